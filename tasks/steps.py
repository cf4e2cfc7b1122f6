"""The investigation's steps, each a plain function over its concern's folder (loading in
``tasks/ingest``, the engine's answer on the run, the agent's steps in ``tasks/agent``, the report
in ``tasks/report``, memory in ``tasks/store``): :func:`tasks.investigation.investigation` composes
them, and the ``investigate`` flow runs each one as a Prefect task (:mod:`flows.steps`, which
declares its retry and cache policy). Each step imports its concern when it first runs, so
loading the files does not wait for the engine, the agent and the report to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasks.ingest.load import LoadReport
    from tasks.run import Run


def load(paths: list[str], db: str, options: dict[str, Any] | None = None) -> LoadReport:
    """Load the files into ``db`` strictly (all rows or a one-line error naming the line);
    ``options`` are :class:`~tasks.ingest.load.LoadOptions`' fields (None: the defaults)."""
    from tasks.ingest.load import LoadOptions, load_files

    return load_files(paths, db, LoadOptions(**(options or {})))


def decompose(run: Run) -> dict[str, Any]:
    """The engine's explanation (result.json's shape) of the run's question."""
    return run.analysis.explanation.model_dump(mode="json")


def recall_history(run: Run, explanation: dict[str, Any]) -> dict[str, Any]:
    """Similar past investigations and past dismissed findings of this data."""
    from tasks.store import memory

    return memory.recall_history(run, explanation)


def hypothesize(
    run: Run, offline: bool, model: str | None, history: dict[str, Any] | None
) -> dict[str, Any]:
    """The hypotheses to investigate: Claude's, or the offline planner's."""
    from tasks.agent import steps as agent_steps

    return agent_steps.hypothesize(run, offline, model, history)


def investigate_hypothesis(
    run: Run, item: dict[str, Any], offline: bool, model: str | None
) -> dict[str, Any]:
    """One hypothesis investigated; an unreachable model raises
    :class:`~tasks.agent.steps.HypothesisUnavailable` (the task retries it; a finished
    hypothesis is cached)."""
    from tasks.agent import steps as agent_steps

    return agent_steps.investigate_hypothesis(run, item, offline, model)


def verify_findings(run: Run, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every accepted finding's recorded query run once more against the data."""
    from tasks.agent.verify import verify_findings as verify

    return verify(run, findings)


def write_report(
    run: Run, out: str, result: dict[str, Any], entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """result.json, report.md, report.html with its charts, and the evidence ledger."""
    from tasks.report.write import write_report as write

    return write(run, out, result, entries)


def remember(
    run: Run, result: dict[str, Any], entries: list[dict[str, Any]], report_md: str
) -> dict[str, Any]:
    """Save the investigation whole in the memory store."""
    from tasks.store import memory

    return memory.remember(run, result, entries, report_md)

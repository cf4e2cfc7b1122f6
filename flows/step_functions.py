"""The investigation's steps as plain functions: each is the body of one Prefect task of
:mod:`flows.steps` (which adds its retry and cache policy), and runs as it is when
:func:`flows.investigation.investigation` runs in-process.

Each step is a thin function over its concern's folder (loading in ``tasks/ingest``, the engine's
answer on the run, the agent's steps in ``tasks/agent``, the report in ``tasks/report``, memory in
``tasks/store``). Importing this module never imports Prefect: a step reaches Prefect's run logger
only inside a task run, when Prefect is already loaded. Each step imports its concern when it
first runs, so loading the files does not wait for the engine, the agent and the report to import.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasks.ingest.load import LoadReport
    from tasks.run import Run


class HypothesisUnavailable(ConnectionError):
    """The model could not be reached for this hypothesis (overload, rate limit, network).

    ``done`` is the hypothesis's run up to then (its tool calls and the findings the gate
    accepted): the task retries the hypothesis, and when it stays unreachable the flow keeps
    that work, marked interrupted (:func:`tasks.agent.steps.interrupted`), instead of losing it.
    """

    def __init__(self, message: str, done: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.done = done


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
    """One hypothesis investigated; an unreachable model raises :class:`HypothesisUnavailable`
    (the task retries it; a finished hypothesis is cached)."""
    from tasks.agent import steps as agent_steps

    done = agent_steps.investigate_hypothesis(run, item, offline, model)
    _log(done)
    if agent_steps.unreachable(done):  # not a result to keep: retry, then the flow records it
        reason = f"{item['hypothesis']['id']}: {done['outcome']['stop_reason']}"
        raise HypothesisUnavailable(reason, done)
    return done


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


def _log(done: dict[str, Any]) -> None:
    """Every tool call of a hypothesis through the run logger, when there is a task run (never
    without Prefect loaded: no task run can exist then)."""
    if "prefect" not in sys.modules:
        return
    from prefect.context import TaskRunContext

    if TaskRunContext.get() is None:
        return
    from prefect.logging import get_run_logger

    from sql_tools.output import printable

    log = get_run_logger()
    outcome = done["outcome"]
    hid = outcome["hypothesis"]["id"]
    for e in done["entries"]:
        log.info(
            "%s %s %s (%.0f ms)%s: %s",
            hid, e["id"], e["tool"], e["elapsed_ms"], " error" if e["is_error"] else "",
            printable(e["summary"]),
        )  # fmt: skip
    log.info("%s %s: %s", hid, outcome["status"], printable(outcome["stop_reason"]))

"""The Prefect tasks the flows compose, each with its retry and cache policy.

Each task is a thin wrapper over a plain step function in its concern's folder (loading in
``tasks/ingest``, the engine's answer on the run, the agent's steps in ``tasks/agent``, the
report in ``tasks/report``, memory in ``tasks/store``). Outside a flow run the composition calls
the same wrappers' ``.fn`` (see :func:`flows.investigate.investigation`).

- ``cache``: ``RUN_INPUTS + TASK_SOURCE``: keyed on the inputs, a :class:`~tasks.run.Run`
  standing for its identity (database, question, data content hash), never its connection; so
  a repeated or crashed run skips the work already done on the same data.
- ``retries``: only for transient errors (network, rate limits, overload), with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, RUN_ID, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext

from tasks.agent import steps as agent_steps
from tasks.agent.verify import verify_findings as _verify_findings
from tasks.ingest.load import LoadReport, load_files
from tasks.report.write import write_report as _write_report
from tasks.run import Run
from tasks.store import memory

TRANSIENT_NAMES = (
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "APITimeoutError",
    "StoreUnavailable",
    "HypothesisUnavailable",
    "StorageUnavailable",
    "ConnectionError",
    "TimeoutError",
)


def is_transient(exc: BaseException) -> bool:
    """An error worth retrying: network trouble, rate limits, overload."""
    names = {t.__name__ for t in type(exc).__mro__}
    return any(n in names for n in TRANSIENT_NAMES)


def _retry_condition(task: Any, task_run: Any, state: Any) -> bool:
    try:
        state.result()
    except Exception as exc:  # the failure being judged
        return is_transient(exc)
    return False


@dataclass
class RunInputs(CachePolicy):
    """Prefect's ``INPUTS``, with a :class:`Run` hashed as its identity (an open connection has
    no stable hash and is not what the result depends on)."""

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        plain = {k: v.identity() if isinstance(v, Run) else v for k, v in inputs.items()}
        return INPUTS.compute_key(task_ctx, plain, flow_parameters, **kwargs)


CACHED = {"cache_policy": RunInputs() + TASK_SOURCE, "persist_result": True}
# Prefect's default (inputs, task source, flow run id: a retry within the same flow run reuses
# a result) for the steps that depend on more than the run's data, with a Run hashed as its
# identity: the default cannot hash an open connection and logs an error on every run.
PER_FLOW_RUN = {"cache_policy": RunInputs() + TASK_SOURCE + RUN_ID}
RETRIED = {"retries": 2, "retry_delay_seconds": [2, 10], "retry_condition_fn": _retry_condition}


class HypothesisUnavailable(ConnectionError):
    """The model could not be reached for this hypothesis (overload, rate limit, network)."""


@task(name="load")
def load(paths: list[str], db: str) -> LoadReport:
    """Load the files into ``db`` strictly (all rows or a one-line error naming the line)."""
    return load_files(paths, db)


@task(name="decompose", **CACHED)
def decompose(run: Run) -> dict[str, Any]:
    """The engine's explanation (result.json's shape) of the run's question."""
    return run.analysis.explanation.model_dump(mode="json")


@task(name="recall-history", **PER_FLOW_RUN, **RETRIED)
def recall_history(run: Run, explanation: dict[str, Any]) -> dict[str, Any]:
    """Similar past investigations and past dismissed findings of this data."""
    return memory.recall_history(run, explanation)


@task(name="hypothesize", **CACHED, **RETRIED)
def hypothesize(
    run: Run, offline: bool, model: str | None, history: dict[str, Any] | None
) -> dict[str, Any]:
    """The hypotheses to investigate: Claude's, or the offline planner's."""
    return agent_steps.hypothesize(run, offline, model, history)


@task(name="investigate-hypothesis", **CACHED, **RETRIED)
def investigate_hypothesis(
    run: Run, item: dict[str, Any], offline: bool, model: str | None
) -> dict[str, Any]:
    """One hypothesis investigated; a finished one is cached, an unreachable model retried."""
    done = agent_steps.investigate_hypothesis(run, item, offline, model)
    _log(done)
    if agent_steps.unreachable(done):  # not a result to keep: retry, then the flow records it
        raise HypothesisUnavailable(f"{item['hypothesis']['id']}: {done['outcome']['stop_reason']}")
    return done


@task(name="verify-findings", **PER_FLOW_RUN)
def verify_findings(run: Run, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every accepted finding's recorded query run once more against the data."""
    return _verify_findings(run, findings)


@task(name="write-report", **PER_FLOW_RUN)
def write_report(
    run: Run, out: str, result: dict[str, Any], entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """result.json, report.md, report.html with its charts, and the evidence ledger."""
    return _write_report(run, out, result, entries)


@task(name="remember", **PER_FLOW_RUN, **RETRIED)
def remember(
    run: Run, result: dict[str, Any], entries: list[dict[str, Any]], report_md: str
) -> dict[str, Any]:
    """Save the investigation whole in the memory store."""
    return memory.remember(run, result, entries, report_md)


def _log(done: dict[str, Any]) -> None:
    """Every tool call of a hypothesis through the run logger, when there is a task run."""
    if TaskRunContext.get() is None:
        return
    from prefect.logging import get_run_logger

    log = get_run_logger()
    outcome = done["outcome"]
    hid = outcome["hypothesis"]["id"]
    for e in done["entries"]:
        log.info(
            "%s %s %s (%.0f ms)%s: %s",
            hid, e["id"], e["tool"], e["elapsed_ms"], " error" if e["is_error"] else "",
            e["summary"],
        )  # fmt: skip
    log.info("%s %s: %s", hid, outcome["status"], outcome["stop_reason"])

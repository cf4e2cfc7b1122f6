"""The Prefect tasks the flows compose: each step of :mod:`tasks.steps` under its name, with
its retry and cache policy declared where the task is defined. The in-process road calls the
plain functions themselves (:class:`tasks.investigation.Road`).

- ``cache``: ``RUN_INPUTS + TASK_SOURCE``: keyed on the inputs, a :class:`~tasks.run.Run`
  standing for its identity (database, question, data content hash), never its connection; so
  a repeated or crashed run skips the work already done on the same data.
- ``retries``: only for transient errors (:data:`TRANSIENT`: network, rate limits, overload),
  with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anthropic
from prefect import task
from prefect.cache_policies import INPUTS, RUN_ID, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext
from prefect.logging import get_run_logger

from sql_tools.output import printable
from tasks import steps
from tasks.agent.steps import HypothesisUnavailable
from tasks.ingest.storage import StorageUnavailable
from tasks.run import Run
from tasks.store import StoreUnavailable

TRANSIENT: tuple[type[BaseException], ...] = (
    anthropic.RateLimitError,
    anthropic.InternalServerError,
    anthropic.APIConnectionError,
    anthropic.APITimeoutError,
    StoreUnavailable,
    StorageUnavailable,
    HypothesisUnavailable,
    ConnectionError,
    TimeoutError,
)
"""The errors worth retrying: network trouble, rate limits, overload."""


def is_transient(exc: BaseException) -> bool:
    """An error worth retrying (:data:`TRANSIENT`)."""
    return isinstance(exc, TRANSIENT)


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


load = task(name="load")(steps.load)
decompose = task(name="decompose", **CACHED)(steps.decompose)
recall_history = task(name="recall-history", **PER_FLOW_RUN, **RETRIED)(steps.recall_history)
hypothesize = task(name="hypothesize", **CACHED, **RETRIED)(steps.hypothesize)
verify_findings = task(name="verify-findings", **PER_FLOW_RUN)(steps.verify_findings)
write_report = task(name="write-report", **PER_FLOW_RUN)(steps.write_report)
remember = task(name="remember", **PER_FLOW_RUN, **RETRIED)(steps.remember)


@task(name="investigate-hypothesis", **CACHED, **RETRIED)
def investigate_hypothesis(
    run: Run, item: dict[str, Any], offline: bool, model: str | None
) -> dict[str, Any]:
    """:func:`tasks.steps.investigate_hypothesis`, with every tool call it made in the task
    run's log (those of an attempt the model could not finish too)."""
    try:
        done = steps.investigate_hypothesis(run, item, offline, model)
    except HypothesisUnavailable as exc:
        _log(exc.done)
        raise
    _log(done)
    return done


def _log(done: dict[str, Any] | None) -> None:
    """Every tool call of a hypothesis, and how it ended, through the run logger."""
    if done is None:
        return
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

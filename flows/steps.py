"""The Prefect tasks the flows compose, each with its retry and cache policy.

Each task is a step's plain function of :mod:`flows.step_functions` (its ``.fn``), under the
step's name. Outside a flow run the composition calls the plain functions themselves (see
:func:`flows.investigation.investigation`).

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

from flows import step_functions as plain
from tasks.run import Run

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


load = task(name="load")(plain.load)
decompose = task(name="decompose", **CACHED)(plain.decompose)
recall_history = task(name="recall-history", **PER_FLOW_RUN, **RETRIED)(plain.recall_history)
hypothesize = task(name="hypothesize", **CACHED, **RETRIED)(plain.hypothesize)
investigate_hypothesis = task(name="investigate-hypothesis", **CACHED, **RETRIED)(
    plain.investigate_hypothesis
)
verify_findings = task(name="verify-findings", **PER_FLOW_RUN)(plain.verify_findings)
write_report = task(name="write-report", **PER_FLOW_RUN)(plain.write_report)
remember = task(name="remember", **PER_FLOW_RUN, **RETRIED)(plain.remember)

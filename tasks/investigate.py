"""Investigate one hypothesis: its tool-use loop (Claude) or plan (offline), its own evidence
ledger and gate. Hypotheses are independent, so they run concurrently (mapped tasks in the flow)
and a finished one is cached: re-running a crashed investigation skips it."""

from __future__ import annotations

from typing import Any

from tasks._prefect import lazy_task
from tasks.agent.config import AgentConfig
from tasks.agent.models import Hypothesis
from tasks.decompose import open_analysis
from tasks.hypothesize import client_for


def investigate_hypothesis(
    db: str,
    qargs: dict[str, Any],
    data: str,
    item: dict[str, Any],
    offline: bool = True,
    model: str | None = None,
) -> dict[str, Any]:
    """``{"outcome", "entries", "findings"}`` of one planned hypothesis (JSON data)."""
    from tasks.agent.run import investigate_one

    config = AgentConfig.from_env(model=model)
    ctx, q, analysis = open_analysis(db, qargs, data)
    h = Hypothesis.model_validate(item["hypothesis"])
    run = investigate_one(
        ctx, q, analysis, h, item["plan"], client=client_for(offline, config), config=config
    )
    _log(run)
    if run.outcome.stop_reason.startswith(TRANSIENT_STOPS):
        # not a result to cache: let the task's retries try again, then the flow records it
        raise HypothesisUnavailable(f"{h.id}: {run.outcome.stop_reason}")
    return run.model_dump(mode="json")


TRANSIENT_STOPS = (
    "error: Anthropic API overloaded",
    "error: rate limited",
    "error: could not reach",
)


class HypothesisUnavailable(ConnectionError):
    """The model could not be reached for this hypothesis (overload, rate limit, network)."""


def unavailable(item: dict[str, Any], reason: str) -> dict[str, Any]:
    """The run of a hypothesis that could not be investigated: inconclusive, with the reason."""
    from tasks.agent.models import Outcome

    outcome = Outcome(
        hypothesis=Hypothesis.model_validate(item["hypothesis"]),
        status="inconclusive",
        confidence="low",
        summary=f"not investigated: {reason}",
        stop_reason=f"error: {reason}",
    )
    return {"outcome": outcome.model_dump(mode="json"), "entries": [], "findings": []}


def _log(run: Any) -> None:
    """Every tool call through the run logger, when there is a run."""
    try:
        from prefect.context import TaskRunContext
        from prefect.logging import get_run_logger
    except ImportError:  # pragma: no cover - prefect is a dependency
        return
    if TaskRunContext.get() is None:
        return
    log = get_run_logger()
    for e in run.entries:
        log.info(
            "%s %s %s (%.0f ms)%s: %s",
            run.outcome.hypothesis.id,
            e.id,
            e.tool,
            e.elapsed_ms,
            " error" if e.is_error else "",
            e.summary,
        )
    log.info("%s %s: %s", run.outcome.hypothesis.id, run.outcome.status, run.outcome.stop_reason)


__getattr__ = lazy_task(
    "investigate_hypothesis_task", investigate_hypothesis, cache=True, retries=2
)

"""The agent's steps of an investigation, on a :class:`~tasks.run.Run`, in JSON in and out:
propose the hypotheses (Claude with a key and not offline, else the offline planner), and
investigate one of them (its tool-use loop or plan, its own evidence ledger and gate).

The API key is read from the environment here, never passed in: it must not appear among a
step's parameters, in a cache key or in Prefect's run records.
"""

from __future__ import annotations

import os
from typing import Any

from tasks.agent.config import AgentConfig, make_client
from tasks.agent.models import Hypothesis, Outcome
from tasks.agent.run import investigate_one, plan
from tasks.run import Run

TRANSIENT_STOPS = (
    "error: Anthropic API overloaded",
    "error: rate limited",
    "error: could not reach",
)
"""How a hypothesis ends when the model could not be reached: worth another try."""


class HypothesisUnavailable(ConnectionError):
    """The model could not be reached for this hypothesis (overload, rate limit, network): a
    transient error.

    ``done`` is the hypothesis's run up to then (its tool calls and the findings the gate
    accepted): the task retries the hypothesis, and when it stays unreachable the composition
    keeps that work, marked interrupted (:func:`interrupted`), instead of losing it.
    """

    def __init__(self, message: str, done: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.done = done


def agent_config(run: Run, model: str | None) -> AgentConfig:
    """The run's agent settings: its own, else from the environment (``model`` overriding)."""
    return run.config if run.config is not None else AgentConfig.from_env(model=model)


def client_for(run: Run, offline: bool, config: AgentConfig) -> Any:
    """The run's Claude client, or None for the offline planner (offline, or no key)."""
    if offline:
        return None
    if run.client is not None:
        return run.client
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return None
    return make_client(config)


def hypothesize(
    run: Run, offline: bool = True, model: str | None = None, history: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``{"planned": [{"hypothesis", "plan"}], "usage", "notes", "mode"}``."""
    config = agent_config(run, model)
    client = client_for(run, offline, config)
    planned, usage, notes = plan(
        run.ctx, run.question, run.analysis, client=client, config=config, history=history
    )
    return {
        "planned": [{"hypothesis": h.model_dump(mode="json"), "plan": p} for h, p in planned],
        "usage": usage.model_dump(),
        "notes": notes,
        "mode": "offline" if client is None else "claude",
    }


def investigate_hypothesis(
    run: Run, item: dict[str, Any], offline: bool = True, model: str | None = None
) -> dict[str, Any]:
    """``{"outcome", "entries", "findings"}`` of one planned hypothesis (JSON data). The
    hypothesis's own trouble ends it inconclusive with the reason; when that reason is the model
    being out of reach (:func:`unreachable`) it is not a result to keep, and
    :class:`HypothesisUnavailable` carries it instead."""
    config = agent_config(run, model)
    h = Hypothesis.model_validate(item["hypothesis"])
    client = client_for(run, offline, config)
    done = investigate_one(
        run.ctx, run.question, run.analysis, h, item["plan"], client=client, config=config
    )
    run_json = done.model_dump(mode="json")
    if unreachable(run_json):
        reason = f"{item['hypothesis']['id']}: {run_json['outcome']['stop_reason']}"
        raise HypothesisUnavailable(reason, run_json)
    return run_json


def unreachable(done: dict[str, Any]) -> bool:
    """True when a hypothesis ended because the model could not be reached (overload, rate
    limit, network): a result worth another try, not one to keep."""
    return str(done["outcome"]["stop_reason"]).startswith(TRANSIENT_STOPS)


def unavailable(item: dict[str, Any], reason: str) -> dict[str, Any]:
    """The run of a hypothesis that could not be investigated: inconclusive, with the reason."""
    outcome = Outcome(
        hypothesis=Hypothesis.model_validate(item["hypothesis"]),
        status="inconclusive",
        confidence="low",
        summary=f"not investigated: {reason}",
        stop_reason=f"error: {reason}",
        interrupted=reason,
    )
    return {"outcome": outcome.model_dump(mode="json"), "entries": [], "findings": []}


def interrupted(item: dict[str, Any], reason: str, done: dict[str, Any] | None) -> dict[str, Any]:
    """The run of a hypothesis that failed after ``done`` (its run up to the failure, when
    known): the tool calls it made and the findings it wrote are kept, since a later failure
    does not undo them, and it is marked interrupted with the reason. Without work done it is
    :func:`unavailable`."""
    if not done or not (done.get("entries") or done.get("findings")):
        return unavailable(item, reason)
    outcome = Outcome.model_validate(done["outcome"])
    summary = (
        f"Interrupted after {outcome.tool_calls} tool calls ({outcome.stop_reason}); "
        "the tool calls and findings made before are kept."
    )
    outcome = outcome.model_copy(update={"interrupted": reason, "summary": summary})
    return {**done, "outcome": outcome.model_dump(mode="json")}

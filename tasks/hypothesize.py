"""Hypothesize: candidate causes from Claude (with a key and not offline) or the offline planner.

The API key is read from the environment here, never passed in: it must not appear among a
task's parameters, in a cache key or in Prefect's run records.
"""

from __future__ import annotations

import os
from typing import Any

from tasks._prefect import lazy_task
from tasks.agent.config import AgentConfig, make_client
from tasks.decompose import open_analysis


def client_for(offline: bool, config: AgentConfig) -> Any:
    """A Claude client, or None for the offline planner (offline, or no key)."""
    if offline or not os.environ.get("ANTHROPIC_API_KEY"):
        return None
    return make_client(config)


def hypothesize(
    db: str,
    qargs: dict[str, Any],
    data: str,
    offline: bool = True,
    model: str | None = None,
    history: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"planned": [{"hypothesis", "plan"}], "usage", "notes", "mode"}``."""
    from tasks.agent.run import plan

    config = AgentConfig.from_env(model=model)
    client = client_for(offline, config)
    ctx, q, analysis = open_analysis(db, qargs, data)
    planned, usage, notes = plan(ctx, q, analysis, client=client, config=config, history=history)
    return {
        "planned": [{"hypothesis": h.model_dump(mode="json"), "plan": p} for h, p in planned],
        "usage": usage.model_dump(),
        "notes": notes,
        "mode": "offline" if client is None else "claude",
    }


__getattr__ = lazy_task("hypothesize_task", hypothesize, cache=True, retries=2)

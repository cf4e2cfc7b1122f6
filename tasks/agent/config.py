"""Agent settings: model, budgets, retries and prices, from the environment when set."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from tasks.agent.models import Budget, Usage

DEFAULT_MODEL = "claude-sonnet-5-5"

# USD per million tokens: input, output, cache write, cache read. Estimates for the cost line
# of a report; set DRILLDOWN_PRICES="in,out,write,read" to use your contract's prices.
PRICES: dict[str, tuple[float, float, float, float]] = {
    "claude-opus-5-5": (15.0, 75.0, 18.75, 1.5),
    "claude-sonnet-5-5": (3.0, 15.0, 3.75, 0.3),
    "claude-haiku-5-5": (1.0, 5.0, 1.25, 0.1),
}


class AgentConfig(BaseModel):
    """How the investigation agent runs."""

    model: str = Field(default=DEFAULT_MODEL, description="Anthropic model id.")
    max_tokens: int = Field(default=2048, ge=256, description="Per model response.")
    budget: Budget = Budget()
    max_hypotheses: int = Field(default=6, ge=1, le=12)
    concurrency: int = Field(default=4, ge=1, le=16, description="Hypotheses investigated at once.")
    max_retries: int = Field(default=4, ge=0, description="429/529/timeouts/connection errors.")
    timeout_s: float = Field(default=120.0, gt=0, description="Per model request.")
    memory_chars: int = Field(
        default=1200, ge=200, description="Cap on each older result kept in working memory."
    )
    prices: tuple[float, float, float, float] | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> AgentConfig:
        """Defaults, then ``DRILLDOWN_MODEL`` / ``DRILLDOWN_PRICES``, then ``overrides``."""
        values: dict[str, Any] = {}
        if os.environ.get("DRILLDOWN_MODEL"):
            values["model"] = os.environ["DRILLDOWN_MODEL"]
        if os.environ.get("DRILLDOWN_PRICES"):
            parts = [float(x) for x in os.environ["DRILLDOWN_PRICES"].split(",")]
            if len(parts) != 4:
                raise ValueError("DRILLDOWN_PRICES needs four numbers: in,out,write,read")
            values["prices"] = tuple(parts)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def cost(self, u: Usage) -> float:
        """Estimated USD for ``u`` at this model's prices (Sonnet's when unknown)."""
        p = self.prices or PRICES.get(self.model, PRICES[DEFAULT_MODEL])
        return (
            u.input_tokens * p[0]
            + u.output_tokens * p[1]
            + u.cache_creation_input_tokens * p[2]
            + u.cache_read_input_tokens * p[3]
        ) / 1e6


def make_client(config: AgentConfig, **kwargs: Any) -> Any:
    """An ``anthropic.Anthropic`` client with the configured retries and timeout.

    The SDK retries 408/409/429/5xx (529 overloaded included), timeouts and connection errors
    with exponential backoff, honouring ``retry-after``. The key comes from
    ``ANTHROPIC_API_KEY`` and is never logged.
    """
    import anthropic

    return anthropic.Anthropic(max_retries=config.max_retries, timeout=config.timeout_s, **kwargs)

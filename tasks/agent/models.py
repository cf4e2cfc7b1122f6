"""The investigation's types: hypotheses, budgets, ledger entries, findings and verdicts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Status = Literal["confirmed", "ruled_out", "inconclusive"]
Confidence = Literal["high", "medium", "low"]
Category = Literal["rate", "mix", "new", "gone", "data_quality", "global"]


class Hypothesis(BaseModel):
    """A candidate cause of the move, to be confirmed or ruled out with evidence."""

    id: str = Field(description="Short id, h1, h2, ...")
    title: str = Field(max_length=200)
    story: str = Field(max_length=2000, description="The causal story: what happened and why.")
    expected: str = Field(
        max_length=1000, description="What the data would show if the story is true."
    )
    dimensions: list[str] = Field(default=[], description="Columns to check.")
    segment: dict[str, Any] = Field(default={}, description="The segment it is about, if one.")
    category: Category = "rate"
    prior: float = Field(default=0.5, ge=0.0, le=1.0, description="Belief before investigating.")
    source: Literal["engine", "data_quality", "model", "history"] = "engine"
    cites: list[str] = Field(default=[], description="Run ids of past investigations it cites.")


class Budget(BaseModel):
    """Limits for one hypothesis; the first one reached ends it as inconclusive."""

    max_turns: int = Field(default=12, ge=1, description="Model requests.")
    max_tool_calls: int = Field(default=20, ge=1)
    max_input_tokens: int = Field(default=300_000, ge=1)
    max_output_tokens: int = Field(default=16_000, ge=1)
    wall_s: float = Field(default=180.0, gt=0)
    max_repeats: int = Field(
        default=2, ge=1, description="Identical calls answered before refusal."
    )


class Usage(BaseModel):
    """Tokens and requests spent; cost at the configured prices."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class LedgerEntry(BaseModel):
    """One tool call of one hypothesis, exactly as it ran."""

    id: str = Field(description="Evidence id, q-1, q-2, ... unique in the investigation.")
    hypothesis_id: str
    seq: int = Field(description="Order of the call within its hypothesis.")
    tool: str
    arguments: dict[str, Any] | str
    is_error: bool = False
    sql: str = ""
    params: dict[str, Any] = {}
    digest: str = Field(default="", description="sha256 of the result, elapsed time left out.")
    summary: str = Field(default="", description="The result in one or two lines.")
    numbers: dict[str, Any] = Field(default={}, description="The figures the result gave.")
    result: dict[str, Any] = Field(default={}, description="The result, rows capped.")
    elapsed_ms: float = 0.0
    tokens: dict[str, int] = Field(default={}, description="Tokens of the model turn that asked.")


class Finding(BaseModel):
    """A claim about one segment, kept whether the gate accepted it or not."""

    key: str = Field(description="segment + category: the same key updates in place.")
    hypothesis_id: str
    segment: dict[str, Any]
    category: Category
    title: str
    summary: str
    evidence: list[str] = Field(description="Ledger ids the claim rests on.")
    claimed: dict[str, float | None] = Field(description="baseline / comparison as claimed.")
    measured: dict[str, float | None] = Field(
        default={}, description="baseline / comparison from the re-run query."
    )
    contribution: float | None = None
    share: float | None = None
    p_value: float | None = None
    status: Literal["accepted", "dismissed"]
    critique: str | None = None
    sql: str = Field(default="", description="The query that re-computes the measured numbers.")
    params: dict[str, Any] = {}
    formula: str = ""
    revision: int = 1


class Outcome(BaseModel):
    """How a hypothesis ended."""

    hypothesis: Hypothesis
    status: Status
    confidence: Confidence
    summary: str = ""
    evidence: list[str] = Field(default=[], description="Ledger ids cited by the verdict.")
    findings: list[str] = Field(default=[], description="Keys of the findings it wrote.")
    stop_reason: str = Field(description="concluded, end_turn, budget: ..., error: ...")
    interrupted: str | None = Field(
        default=None,
        description="Why the model stopped answering before a verdict; what was done before "
        "(tool calls, findings the gate accepted) is kept.",
    )
    tool_calls: int = 0
    usage: Usage = Usage()
    elapsed_ms: float = 0.0

"""What the engine answers, in the shape of ``result.json`` (see the README's contract)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

Effect = Literal["rate", "mix", "new", "gone", "data_quality"]


class Evidence(BaseModel):
    """A query anyone can re-run: a SQL tool call, and the SQL it ran with its parameters."""

    tool: str
    arguments: dict[str, Any]
    sql: str = ""
    params: dict[str, Any] = {}
    result: dict[str, Any] = {}


def json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A query's parameters as :attr:`Evidence.params` holds them: dates and timestamps as ISO
    text, every other value as it is."""
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in params.items()}


def segment_key(segment: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """A segment's ``column=value`` pairs as text, whatever their order or value types: two
    segments naming the same rows have the same key."""
    return frozenset((str(k), str(v)) for k, v in segment.items())


class DataQualityNote(BaseModel):
    """A data defect behind a segment's move: the days it leaves out, and the move without them."""

    kinds: list[str] = Field(description="Kinds of the data-quality issues that set days aside.")
    issues: list[str] = Field(default=[], description="Those issues' messages (segment issues).")
    message: str = Field(description="One plain sentence: the days, the move with and without.")
    days_set_aside: dict[str, list[str]] = Field(
        default={}, description="Per period, the days left out (no rows, or loaded k times)."
    )
    move: float | None = Field(default=None, description="Relative move over every day.")
    move_on_clean_days: float | None = Field(
        default=None, description="Relative move on the clean days only (paired when they pair)."
    )
    unexpected: float | None = Field(
        default=None, description="Root causes: the move beyond the rest of the data."
    )
    unexpected_on_clean_days: float | None = None
    z_on_clean_days: float | None = Field(
        default=None, description="Root causes: what is left, in units of the noise that named it."
    )
    p_value_on_clean_days: float | None = Field(
        default=None, description="The even shift: t-test of daily values on the clean days."
    )
    explained: bool = Field(description="True: the move is the data's doing (effect data_quality).")
    evidence: Evidence | None = None


class Segment(BaseModel):
    """One segment's movement: the answer's unit."""

    segment: dict[str, Any] = Field(description="column -> value; {} is the whole population.")
    aliases: list[dict[str, Any]] = Field(
        default=[],
        description="Other names of the same rows (tied columns, a joined copy of a column); "
        "``segment`` is the one with the fewest columns, base-table columns first.",
    )
    baseline: float | None = None
    comparison: float | None = None
    contribution: float = Field(
        description="Part of the metric's change this segment accounts for."
    )
    share: float | None = Field(default=None, description="contribution / total change.")
    unexpected: float | None = Field(
        default=None, description="Part of the contribution beyond what the rest of the data did."
    )
    rate: float | None = Field(default=None, description="Ratio metrics: own-ratio part.")
    mix: float | None = Field(default=None, description="Ratio metrics: denominator-share part.")
    effect: Effect = "rate"
    p_value: float | None = None
    significant: bool = False
    baseline_volume: float | None = Field(default=None, description="Rows (or denominator) before.")
    comparison_volume: float | None = None
    data_quality: DataQualityNote | None = Field(
        default=None, description="A data defect in this segment's days, and what it explains."
    )
    evidence: Evidence | None = None
    explained_by_root_causes: bool = Field(
        default=False,
        description="Drivers and offsetting segments: within the noise once the root causes are "
        "fitted (a consequence of them, not a mover of its own).",
    )


class DataQualityIssue(BaseModel):
    """Something about the data, not the business, that moves or clouds the metric."""

    kind: Literal[
        "missing_days",
        "segment_missing_days",
        "null_spike",
        "duplicate_rows",
        "partial_period",
        "non_finite_values",
    ]
    message: str = Field(description="One plain sentence a manager can read.")
    severity: Literal["info", "warning", "error"] = "warning"
    column: str | None = None
    segment: dict[str, Any] = {}
    period: Literal["baseline", "comparison"] | None = None
    details: dict[str, Any] = {}
    evidence: Evidence | None = None


class Change(BaseModel):
    """The metric's overall move and whether it is outside the noise."""

    absolute: float | None
    relative: float | None
    significant: bool
    p_value: float | None
    method: str = Field(description="How significance was judged, in words.")
    noise_unjudged: str | None = Field(
        default=None,
        description="Set when the data cannot say what noise is (too few cells, none with days "
        "of its own to measure a spread on): why, in one plain sentence. ``significant`` is then "
        'false without meaning "within the noise", and ``movers`` lists the largest moves.',
    )


class PeriodValue(BaseModel):
    label: str
    value: float | None
    volume: float | None = None
    days: int | None = None


class MetricInfo(BaseModel):
    expression: str
    table: str
    grain: str | None = None
    kind: Literal["additive", "ratio", "distinct"]
    name: str | None = None
    filters: list[dict[str, Any]] = []


class Explanation(BaseModel):
    """The engine's full answer. ``result.json`` is this, plus the agent's hypotheses and findings."""

    metric: MetricInfo
    baseline: PeriodValue
    comparison: PeriodValue
    change: Change
    root_causes: list[Segment] = []
    drivers: list[Segment] = Field(
        default=[], description="Ranked candidate segments, in the direction of the change."
    )
    offsetting: list[Segment] = Field(default=[], description="Segments that moved against it.")
    movers: list[Segment] = Field(
        default=[],
        description="Only when ``change.noise_unjudged`` is set: the largest moves, as measured "
        "facts (not causes, not tested), each with the query that reproduces it.",
    )
    global_shift: Segment | None = Field(
        default=None,
        description="A move that hit everything evenly, if there was one: days missing from the "
        "whole table make one (effect data_quality), told even within the noise.",
    )
    explained_share: float | None = Field(
        default=None, description="Share of the change the root causes account for together."
    )
    hypotheses: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    data_quality: list[DataQualityIssue] = []
    data_grain: Literal["day", "week", "month", "quarter", "year"] | None = Field(
        default=None,
        description="Date periods: the spacing of the dates with rows (monthly data: month). "
        "Missing data is judged, and the change tested, in these units.",
    )
    similar_investigations: list[dict[str, Any]] = Field(
        default=[], description="Past investigations like this one (score, date, causes, run id)."
    )
    dimensions: list[str] = []
    notes: list[str] = []
    stats: dict[str, Any] = Field(
        default={},
        description="Segments searched, timings, depth. An investigation adds `agent` and "
        "`passes`: the reads of each source table (`tables`), and per step (`steps`: `open`, "
        "`engine`, `hypotheses`, `verify`), before the report's charts.",
    )

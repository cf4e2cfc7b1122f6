"""What an investigation asks: a metric, two periods, the dimensions to search.

These models are the engine's input. ``tasks.engine.parse`` builds them from what users write
(``sum(revenue) / count(*)``, ``2024-03-18:2024-03-24``, a ``metrics.yaml`` entry); the Claude agent
builds them through the ``explain_change`` tool. Column names here are references as the tools
accept them: a base-table column, or ``table.column`` for a column reached through a join key.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sql_tools import MAX_SEGMENT_COLUMNS, Filter

DEFAULT_DEPTH = 3
"""The least depth the search goes to when the question leaves it open (every column, if fewer)."""

AggFn = Literal["sum", "count", "count_distinct", "avg"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Aggregate(_Frozen):
    """One aggregate: ``sum(x)``, ``count(*)`` (column None), ``count(distinct x)``, ``avg(x)``."""

    fn: AggFn
    column: str | None = None

    @model_validator(mode="after")
    def _column_rule(self) -> Aggregate:
        if self.fn != "count" and self.column is None:
            raise ValueError(f"{self.fn} needs a column")
        return self

    def text(self) -> str:
        """Canonical text: ``sum(revenue)``, ``count(*)``, ``count(distinct user_id)``."""
        if self.fn == "count":
            return f"count({self.column or '*'})"
        if self.fn == "count_distinct":
            return f"count(distinct {self.column})"
        return f"{self.fn}({self.column})"


class Metric(_Frozen):
    """A metric: one aggregate, or the ratio of two, on one base table."""

    table: str
    numerator: Aggregate
    denominator: Aggregate | None = None
    grain: Literal["day"] | None = Field(
        default=None, description="'day': computed per day and averaged over the period."
    )
    filters: tuple[Filter, ...] = ()
    name: str | None = Field(default=None, description="Name from metrics.yaml, if any.")

    @property
    def expression(self) -> str:
        """Canonical text of the metric, e.g. ``sum(purchases) / sum(sessions)``."""
        if self.denominator is None:
            return self.numerator.text()
        return f"{self.numerator.text()} / {self.denominator.text()}"

    @property
    def kind(self) -> Literal["additive", "ratio", "distinct"]:
        """How segments combine: sums and counts add up; avg and a/b are ratios; distincts do not add."""
        if self.denominator is not None or self.numerator.fn == "avg":
            return "ratio"
        if self.numerator.fn == "count_distinct":
            return "distinct"
        return "additive"


class DateRange(_Frozen):
    """An inclusive range of days on the time column."""

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.end < self.start:
            raise ValueError(f"period ends ({self.end}) before it starts ({self.start})")
        return self

    @property
    def label(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


class Periods(_Frozen):
    """Baseline and comparison: date ranges on ``time_column``, or labels of ``period_column``."""

    time_column: str | None = None
    period_column: str | None = None
    baseline: DateRange | str
    comparison: DateRange | str

    @model_validator(mode="after")
    def _one_kind(self) -> Periods:
        dates = isinstance(self.baseline, DateRange) and isinstance(self.comparison, DateRange)
        labels = isinstance(self.baseline, str) and isinstance(self.comparison, str)
        if dates and self.time_column and not self.period_column:
            first = max(self.baseline.start, self.comparison.start)
            last = min(self.baseline.end, self.comparison.end)
            if first <= last:  # a day in both would be counted on both sides of the change
                both = DateRange(start=first, end=last)
                raise ValueError(
                    f"baseline and comparison periods overlap on {both.label} "
                    f"({both.days} day{'s' if both.days != 1 else ''}); give periods that share no day"
                )
            return self
        if labels and self.period_column and not self.time_column:
            if self.baseline == self.comparison:
                raise ValueError("baseline and comparison are the same label")
            return self
        raise ValueError(
            "periods are either two date ranges with a time column, or two labels with a period column"
        )

    @property
    def by_dates(self) -> bool:
        return self.time_column is not None

    def label(self, which: Literal["baseline", "comparison"]) -> str:
        p = getattr(self, which)
        return p.label if isinstance(p, DateRange) else p


class Question(_Frozen):
    """Why did ``metric`` move from ``periods.baseline`` to ``periods.comparison``?"""

    metric: Metric
    periods: Periods
    dimensions: tuple[str, ...] | None = Field(
        default=None,
        description="Columns to search (joined ones as table.column); None: every dimension column.",
    )
    max_depth: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEGMENT_COLUMNS,
        description=(
            f"Most columns combined in a segment; None: every column (up to {MAX_SEGMENT_COLUMNS})"
            f" while the segments stay within the engine's budget, and at least {DEFAULT_DEPTH}."
        ),
    )
    min_support: float = Field(
        default=0.001,
        ge=0.0,
        lt=1.0,
        description="Smallest share of the metric's volume (either period) a segment must hold.",
    )

"""What every data-quality query shares: the question resolved against the schema, one query
under construction (filters, periods, bound parameters), the evidence of what ran, and the
small formatting helpers of the messages."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal

from sqlglot import exp

from sql_tools import (
    Column,
    OnCells,
    Params,
    QueryOutput,
    Source,
    ToolContext,
    ToolInputError,
    label_value,
    to_sql,
    where_clause,
)
from tasks.engine.result import Evidence
from tasks.engine.spec import DateRange, Question

Which = Literal["baseline", "comparison"]
WHICH: tuple[Which, Which] = ("baseline", "comparison")

MAX_LISTED_DAYS = 10
"""Days named in a message; the rest are counted ("and N more")."""
MAX_SEGMENT_DIMENSIONS = 32
"""Dimensions checked for missing days (the first ones given; ``GROUPING`` is a bit mask)."""
GROUPING_ARGUMENTS = {"postgres": 31}
"""Dialects whose ``GROUPING()`` takes fewer arguments (Postgres: at most 31)."""


@dataclass(frozen=True)
class _Scope:
    """The question resolved against the schema: table, period column(s), dimensions."""

    ctx: ToolContext
    question: Question
    table: str
    time: Column | None
    period: Column | None
    dimensions: tuple[Column, ...]
    metric_columns: tuple[Column, ...]

    @classmethod
    def build(cls, ctx: ToolContext, q: Question, dimensions: Sequence[str]) -> _Scope:
        """Resolve every column reference (raises ``unknown_column`` / ``type_mismatch``)."""
        src = Source(ctx, q.metric.table)
        p = q.periods
        time = src.resolve(p.time_column, "time_column") if p.time_column else None
        period = src.resolve(p.period_column, "period_column") if p.period_column else None
        if time is not None and time.kind not in ("date", "timestamp"):
            raise ToolInputError(
                f"type mismatch: time_column {time.ref!r} is {time.kind} ({time.type}), "
                "not a DATE or TIMESTAMP column",
                code="type_mismatch",
            )
        skip = {c.ref for c in (time, period) if c is not None}
        dims = _unique(src.resolve(d, "dimensions") for d in dimensions)
        aggs = (q.metric.numerator, q.metric.denominator)
        metric_cols = _unique(
            src.resolve(a.column, "metric column") for a in aggs if a is not None and a.column
        )
        return cls(
            ctx=ctx,
            question=q,
            table=src.table,
            time=time,
            period=period,
            dimensions=tuple(d for d in dims if d.ref not in skip),
            metric_columns=metric_cols,
        )

    @property
    def segment_dimensions(self) -> tuple[Column, ...]:
        """The dimensions whose values are checked for missing days."""
        limit = GROUPING_ARGUMENTS.get(self.ctx.dialect, MAX_SEGMENT_DIMENSIONS)
        return self.dimensions[: min(MAX_SEGMENT_DIMENSIONS, limit)]

    def range(self, which: Which) -> DateRange:
        """The date range of one period (date periods only)."""
        r = getattr(self.question.periods, which)
        assert isinstance(r, DateRange)
        return r

    def arguments(self, check: str, **extra: Any) -> dict[str, Any]:
        """Evidence arguments: which check, on what table, periods and filters."""
        p = self.question.periods
        args: dict[str, Any] = {"check": check, "table": self.table}
        if self.time is not None:
            args["time_column"] = self.time.ref
        if self.period is not None:
            args["period_column"] = self.period.ref
        args["baseline"] = p.label("baseline")
        args["comparison"] = p.label("comparison")
        args["filters"] = [f.model_dump() for f in self.question.metric.filters]
        return args | extra


def _unique(cols: Iterable[Column]) -> tuple[Column, ...]:
    """Columns in order, each reference once."""
    seen: dict[str, Column] = {}
    for c in cols:
        seen.setdefault(c.ref, c)
    return tuple(seen.values())


class _Query:
    """One query under construction: its own FROM/joins, bound parameters and filter condition."""

    def __init__(self, scope: _Scope) -> None:
        self.scope = scope
        self.src = Source(scope.ctx, scope.table)
        self.params = Params()
        self._bound: dict[object, exp.Expression] = {}
        self.filters = where_clause(
            scope.ctx, self.src, list(scope.question.metric.filters), self.params
        )

    def col(self, c: Column) -> exp.Expression:
        """The column's expression (registers its join if it needs one)."""
        return self.src.expr(c)

    def day(self) -> exp.Expression:
        """The time column as a DATE."""
        assert self.scope.time is not None
        c = self.col(self.scope.time)
        return c if self.scope.time.kind == "date" else exp.cast(c, exp.DataType.build("DATE"))

    def value(self, key: object, value: Any) -> exp.Expression:
        """A placeholder for ``value``, bound once per ``key`` and reused across the query."""
        if key not in self._bound:
            self._bound[key] = self.params.bind(value)
        return self._bound[key].copy()

    def in_period(self, which: Which) -> exp.Expression:
        """Condition: the row belongs to one period (date range or label)."""
        s = self.scope
        if s.time is not None:
            r = s.range(which)
            c = self.col(s.time)
            if s.time.kind == "date":
                return exp.Between(
                    this=c,
                    low=self.value((which, "start"), r.start),
                    high=self.value((which, "end"), r.end),
                )
            lo = datetime.combine(r.start, datetime.min.time())
            hi = datetime.combine(r.end + timedelta(days=1), datetime.min.time())
            return exp.and_(
                exp.GTE(this=c, expression=self.value((which, "from"), lo)),
                exp.LT(this=c.copy(), expression=self.value((which, "until"), hi)),
            )
        assert s.period is not None
        label = label_value(s.ctx, s.period, getattr(s.question.periods, which), which)
        return exp.EQ(this=self.col(s.period), expression=self.value((which, "label"), label))

    def day_in(self, column: exp.Expression, which: Which) -> exp.Expression:
        """Condition on an already computed DATE column: it falls in one date period."""
        r = self.scope.range(which)
        return exp.Between(
            this=column.copy(),
            low=self.value((which, "start"), r.start),
            high=self.value((which, "end"), r.end),
        )

    def where(self, *conds: exp.Expression | None) -> exp.Expression | None:
        """AND of the metric's filters and ``conds``."""
        parts = [c for c in (self.filters, *conds) if c is not None]
        return exp.and_(*parts) if parts else None

    def in_either(self) -> exp.Expression:
        """Condition: the row belongs to the baseline or the comparison."""
        return exp.or_(self.in_period("baseline"), self.in_period("comparison"))

    def base(self, select: exp.Select) -> exp.Select:
        """Attach FROM and joins to ``select``."""
        return self.src.apply(select)

    def run(
        self, tree: exp.Expression, max_rows: int, on_cells: OnCells | None = None
    ) -> QueryOutput:
        """Render ``tree`` and read it through the context's reader (a shared pass may have
        answered it already: the question's check answers the coverage or null counts; the
        question's stored cells, through ``on_cells``)."""
        sql = self.sql(tree)
        return self.scope.ctx.reader.read(
            sql, self.params.values, max_rows=max_rows, on_cells=on_cells
        )

    def sql(self, tree: exp.Expression) -> str:
        """``tree`` as the connection's SQL."""
        return to_sql(tree, self.scope.ctx.dialect)


def _count_if(cond: exp.Expression, what: exp.Expression | None = None) -> exp.Expression:
    """``count(what) FILTER (WHERE cond)``; ``count(*)`` when ``what`` is None."""
    agg = exp.Count(this=what if what is not None else exp.Star())
    return exp.Filter(this=agg, expression=exp.Where(this=cond))


def _evidence(
    scope: _Scope,
    check: str,
    out: QueryOutput,
    arguments: dict[str, Any] | None = None,
    **result: Any,
) -> Evidence:
    """What ran for ``check``: its arguments, the exact SQL and parameters, key numbers."""
    return Evidence(
        tool="sql",
        arguments=scope.arguments(check, **(arguments or {})),
        sql=out.sql,
        params=dict(out.params),
        result=result,
    )


def _as_day(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    return value if isinstance(value, date) else None


def _list_days(days: Sequence[date]) -> str:
    shown = ", ".join(d.isoformat() for d in days[:MAX_LISTED_DAYS])
    more = len(days) - MAX_LISTED_DAYS
    return f"{shown} and {more} more" if more > 0 else shown


def gap_effect(question: Question, plural: str, whose: str = "the period's") -> str:
    """What time units without rows do to the question's metric: a total (a sum, a count, a
    distinct count) is understated; a per-day mean counts them as zero; a ratio or an average is
    measured on the other units only."""
    m = question.metric
    if m.kind == "ratio":
        return f"{whose} value comes from its other {plural} only"
    if m.grain == "day":
        return f"{whose} mean per day counts them as zero, so it is understated"
    return f"{whose} total is understated"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"

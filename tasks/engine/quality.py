"""Data-quality checks run before the segment search, reported apart from real movement.

A metric can move because the business moved, or because the data did: a period the data does
not fully cover, days that were never loaded, one segment missing for a few days, a column that
suddenly went NULL, rows loaded twice, NaN or infinite numbers. :func:`check_quality` looks for
those six defects with at most five single-pass queries (never one query per value) on the
sandboxed connection, applying the metric's filters to every one. Every issue carries the exact
SQL and parameters it came from.

Queries (label periods run only the last three):

1. coverage: first/last value of the time column -> ``partial_period``;
2. rows per day, overall and per value of every dimension at once (``GROUPING SETS``, reduced
   in SQL to the values worth checking) -> ``missing_days`` and ``segment_missing_days``;
3. rows and non-NULL counts per period of the dimensions and the metric's columns ->
   ``null_spike``;
4. rows, distinct rows and their copy counts per day (per period for label periods), grouping
   rows by a hash of all their columns (on a hash sample above a million rows) ->
   ``duplicate_rows``, only where the copies show a repeated load (see section 5).
5. NaN, Infinity and -Infinity per period in the metric's floating-point columns ->
   ``non_finite_values``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Literal

from scipy.stats import norm, poisson
from sqlglot import exp

from sql_tools._context import Column, QueryOutput, ToolContext
from sql_tools._errors import ToolInputError
from sql_tools._sql import (
    Params,
    Source,
    ident,
    may_be_non_finite,
    non_finite_counts,
    non_finite_text,
    to_sql,
    where_clause,
)
from sql_tools.catalog import jsonable
from tasks.engine.result import DataQualityIssue, Evidence
from tasks.engine.spec import DateRange, Question

Which = Literal["baseline", "comparison"]
WHICH: tuple[Which, Which] = ("baseline", "comparison")

MAX_LISTED_DAYS = 10
"""Days named in a message; the rest are counted ("and N more")."""
SEGMENT_MIN_SHARE = 0.01
"""A segment is checked for missing days when it holds at least this share of baseline rows..."""
SEGMENT_MIN_PRESENCE = 0.8
"""...and has rows on at least this share of the baseline days that have data."""
MAX_SEGMENT_ISSUES = 20
"""Most ``segment_missing_days`` issues reported (largest expected row loss first)."""
MAX_SEGMENT_DIMENSIONS = 32
"""Dimensions checked for missing days (the first ones given; ``GROUPING`` is a bit mask)."""
NULL_MIN_POINTS = 0.05
"""A null rate must move by at least 5 percentage points..."""
NULL_MIN_RATIO = 2.0
"""...and at least double (or halve)..."""
NULL_MAX_P = 0.001
"""...with a two-proportion z-test p-value below this."""
DUPLICATE_MIN_RATE = 0.005
"""Copies beyond chance must be at least 0.5% of a unit's rows to count as loaded again."""
DUPLICATE_EXACT_MAX_ROWS = 1_000_000
"""Up to this many rows in the periods duplicates are counted exactly; above, on a hash sample."""
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def check_quality(
    ctx: ToolContext, question: Question, dimensions: Sequence[str]
) -> list[DataQualityIssue]:
    """Run every data-quality check that applies to ``question``.

    Args:
        ctx: The sandboxed tool context on the loaded database.
        question: Metric (table, filters, columns) and the two periods.
        dimensions: Canonical column references to check (joined ones as ``table.column``).

    Returns:
        Issues sorted by severity (error, warning, info), in check order within a severity.
        Date periods get all six checks; label periods only ``null_spike``,
        ``duplicate_rows`` and ``non_finite_values``.
    """
    scope = _Scope.build(ctx, question, dimensions)
    issues: list[DataQualityIssue] = []
    if scope.time is not None:
        coverage = _coverage(scope)
        issues += coverage.issues
        if coverage.first is not None:
            days = _day_counts(scope)
            issues += _missing_days(scope, coverage, days)
            issues += _segment_missing_days(scope, days)
    rows = _null_spikes(scope)
    issues += rows.issues
    issues += _duplicate_rows(scope, rows)
    issues += _non_finite(scope)
    return sorted(issues, key=lambda i: _SEVERITY_ORDER[i.severity])


# --- shared query building ----------------------------------------------------------------------


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
        return self.dimensions[:MAX_SEGMENT_DIMENSIONS]

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
        label = getattr(s.question.periods, which)
        c = self.col(s.period)
        if s.period.kind != "text":
            c = exp.cast(c, exp.DataType.build("VARCHAR"))
        return exp.EQ(this=c, expression=self.value((which, "label"), label))

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

    def run(self, tree: exp.Expression, max_rows: int) -> QueryOutput:
        """Render ``tree`` and run it on the sandboxed connection."""
        return self.scope.ctx.run(to_sql(tree), self.params.values, max_rows=max_rows)


def _c(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


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


def _days(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def _list_days(days: Sequence[date]) -> str:
    shown = ", ".join(d.isoformat() for d in days[:MAX_LISTED_DAYS])
    more = len(days) - MAX_LISTED_DAYS
    return f"{shown} and {more} more" if more > 0 else shown


def _iso(d: date | None) -> str | None:
    return d.isoformat() if d else None


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


# --- 1. partial_period --------------------------------------------------------------------------


@dataclass
class _Coverage:
    """First and last day with data (after filters) and the partial-period issues."""

    first: date | None
    last: date | None
    issues: list[DataQualityIssue] = field(default_factory=list)


def _coverage(scope: _Scope) -> _Coverage:
    """First and last day with data; a period the data covers only partly (or not at all)."""
    assert scope.time is not None
    q = _Query(scope)
    t = q.col(scope.time)
    sel = exp.select(
        exp.Min(this=t).as_("first"),
        exp.Max(this=t.copy()).as_("last"),
        exp.Count(this=t.copy()).as_("rows"),
    )
    out = q.run(q.base(sel).where(q.where()), max_rows=1)
    cov = _Coverage(_as_day(out.rows[0][0]), _as_day(out.rows[0][1]))
    for which in WHICH:
        issue = _partial(scope, which, cov, out)
        if issue is not None:
            cov.issues.append(issue)
    return cov


def _partial(
    scope: _Scope, which: Which, cov: _Coverage, out: QueryOutput
) -> DataQualityIssue | None:
    """The ``partial_period`` issue of one period, or None when the data covers it fully."""
    assert scope.time is not None
    r = scope.range(which)
    covered = 0
    if cov.first is not None and cov.last is not None:
        lo, hi = max(r.start, cov.first), min(r.end, cov.last)
        covered = max((hi - lo).days + 1, 0)
    if covered == r.days:
        return None
    col = scope.time.ref
    if cov.first is None:
        span = f"no rows of {scope.table!r} match the metric's filters"
    else:
        span = f"the data in {col!r} runs from {cov.first} to {cov.last}"
    if covered == 0:
        message = f"The {which} period {r.label} has no data at all: {span}."
    else:
        message = (
            f"The {which} period {r.label} is only partly covered: {span}, so only {covered} "
            f"of its {r.days} days have data and its total is understated."
        )
    first, last, rows = out.rows[0]
    return DataQualityIssue(
        kind="partial_period",
        message=message,
        severity="error" if covered == 0 else "warning",
        column=col,
        period=which,
        details={
            "period": r.label,
            "covered_days": covered,
            "total_days": r.days,
            "coverage": covered / r.days,
            "data_first": _iso(cov.first),
            "data_last": _iso(cov.last),
        },
        evidence=_evidence(
            scope, "partial_period", out, first=jsonable(first), last=jsonable(last), rows=rows
        ),
    )


# --- 2 and 3. rows per day, overall and per dimension value -------------------------------------


@dataclass
class _SegmentDays:
    """A dimension value steady enough to check, and the comparison days it has rows on."""

    dim: Column
    value: Any
    baseline_rows: int
    baseline_days: int
    present: set[date] = field(default_factory=set)


@dataclass
class _DayCounts:
    """The days query: rows per day (both periods) and the steady segments' comparison days."""

    out: QueryOutput
    totals: dict[date, int]
    baseline_days: int
    segments: list[_SegmentDays]


def _day_counts(scope: _Scope) -> _DayCounts:
    """Run the days query and sort its rows into day totals and per-segment presence."""
    tree, q = _days_query(scope)
    k = len(scope.segment_dimensions)
    b, c = scope.range("baseline"), scope.range("comparison")
    # day totals for both periods, plus for each steady value (at most 100 per dimension:
    # each holds >= 1% of rows) its comparison days and its first baseline day
    max_rows = b.days + c.days + k * 100 * (c.days + 1) + 1
    out = q.run(tree, max_rows=max_rows)
    idx = {name: i for i, name in enumerate(out.columns)}
    full = 2**k - 1
    by_set = {full - 2 ** (k - 1 - i): i for i in range(k)}
    counts = _DayCounts(out, {}, 0, [])
    segments: dict[tuple[int, Any], _SegmentDays] = {}
    for row in out.rows:
        day, gset = _as_day(row[idx["day"]]), row[idx["set"]]
        if day is None:
            continue
        if gset == full:
            counts.totals[day] = row[idx["rows"]]
            counts.baseline_days = row[idx["baseline_days"]] or 0
            continue
        i = by_set[gset]
        value = row[idx[f"d{i}"]]
        seg = segments.get((i, value))
        if seg is None:
            seg = _SegmentDays(
                scope.segment_dimensions[i],
                value,
                row[idx["seg_baseline_rows"]],
                row[idx["seg_baseline_days"]],
            )
            segments[(i, value)] = seg
        if not row[idx["in_baseline"]]:
            seg.present.add(day)
    counts.segments = list(segments.values())
    return counts


def _days_query(scope: _Scope) -> tuple[exp.Select, _Query]:
    """Rows per day, overall and per value of every dimension, in one pass (``GROUPING SETS``).

    Output: the day totals of both periods (``set`` = ``2^k - 1``, every dimension rolled up),
    and for each dimension value holding >= 1% of baseline rows on >= 80% of the baseline days
    with data, its comparison-day rows plus its first baseline-day row (so a value with no
    comparison rows at all still shows up). ``set`` is ``GROUPING(d0, ..., dk-1)``.
    """
    q = _Query(scope)
    day = q.day()
    dims = [q.col(d) for d in scope.segment_dimensions]
    full = 2 ** len(dims) - 1
    sets = [exp.Tuple(expressions=[day.copy()])] + [
        exp.Tuple(expressions=[day.copy(), d.copy()]) for d in dims
    ]
    gid = exp.Grouping(expressions=[d.copy() for d in dims]) if dims else exp.Literal.number(0)
    grouped = q.base(
        exp.select(
            day.as_("day"),
            *[d.as_(f"d{i}") for i, d in enumerate(dims)],
            gid.as_("set"),
            exp.Count(this=exp.Star()).as_("rows"),
        )
    ).where(q.where(q.in_either()))
    grouped = grouped.group_by(exp.GroupingSets(expressions=sets))
    seg = [_c("set")] + [_c(f"d{i}") for i in range(len(dims))]
    is_full = exp.EQ(this=_c("set"), expression=exp.Literal.number(full))

    def in_b() -> exp.Expression:
        return q.day_in(_c("day"), "baseline")

    def win(agg: exp.Expression, cond: exp.Expression, by: list[exp.Expression]) -> exp.Window:
        filtered = exp.Filter(this=agg, expression=exp.Where(this=cond))
        return exp.Window(this=filtered, partition_by=[b.copy() for b in by], over="OVER")

    stats = exp.select(
        exp.Star(),
        in_b().as_("in_baseline"),
        win(exp.Sum(this=_c("rows")), in_b(), seg).as_("seg_baseline_rows"),
        win(exp.Count(this=exp.Star()), in_b(), seg).as_("seg_baseline_days"),
        win(exp.Min(this=_c("day")), in_b(), seg).as_("seg_first_day"),
        win(exp.Sum(this=_c("rows")), exp.and_(in_b(), is_full.copy()), []).as_("baseline_rows"),
        win(exp.Count(this=exp.Star()), exp.and_(in_b(), is_full.copy()), []).as_("baseline_days"),
    ).from_(exp.Table(this=ident("grouped")))

    def at_least(col: str, share: float, of: str) -> exp.Expression:
        return exp.GTE(
            this=_c(col), expression=exp.Mul(this=exp.Literal.number(share), expression=_c(of))
        )

    steady = exp.and_(
        at_least("seg_baseline_rows", SEGMENT_MIN_SHARE, "baseline_rows"),
        at_least("seg_baseline_days", SEGMENT_MIN_PRESENCE, "baseline_days"),
        exp.or_(
            exp.Not(this=_c("in_baseline")),
            exp.EQ(this=_c("day"), expression=_c("seg_first_day")),
        ),
    )
    final = (
        exp.select(
            *[_c(n) for n in ("day", "set", *[f"d{i}" for i in range(len(dims))], "rows")],
            *[_c(n) for n in ("in_baseline", "seg_baseline_rows", "seg_baseline_days")],
            *[_c(n) for n in ("baseline_rows", "baseline_days")],
        )
        .from_(exp.Table(this=ident("stats")))
        .where(exp.or_(is_full.copy(), exp.Paren(this=steady)))
        .order_by(_c("set"), *[_c(f"d{i}") for i in range(len(dims))], _c("day"))
        .with_("grouped", as_=grouped)
        .with_("stats", as_=stats)
    )
    return final, q


def _days_arguments(scope: _Scope) -> dict[str, Any]:
    dims = [d.ref for d in scope.segment_dimensions]
    return {"dimensions": dims, "columns": {f"d{i}": d for i, d in enumerate(dims)}}


def _missing_days(scope: _Scope, cov: _Coverage, days: _DayCounts) -> list[DataQualityIssue]:
    """Days inside a period and inside the data's coverage that have no rows at all."""
    assert cov.first is not None and cov.last is not None
    issues = []
    for which in WHICH:
        r = scope.range(which)
        lo, hi = max(r.start, cov.first), min(r.end, cov.last)
        if lo > hi:
            continue  # not covered at all: partial_period already says so
        covered = _days(lo, hi)
        missing = [d for d in covered if not days.totals.get(d)]
        if missing:
            issues.append(_missing_issue(scope, which, missing, len(covered), cov, days))
    return issues


def _missing_issue(
    scope: _Scope,
    which: Which,
    missing: list[date],
    covered: int,
    cov: _Coverage,
    days: _DayCounts,
) -> DataQualityIssue:
    """One ``missing_days`` issue: the days of ``which`` without a single row."""
    r = scope.range(which)
    n = len(missing)
    every = n == covered
    tail = (
        "the period has no data at all."
        if every
        else "those days look unloaded, so the period's total is understated."
    )
    message = (
        f"No rows on {n} of the {covered} days of the {which} period {r.label} that lie in the "
        f"data's range {cov.first}..{cov.last} ({_list_days(missing)}); {tail}"
    )
    full = 2 ** len(scope.segment_dimensions) - 1
    return DataQualityIssue(
        kind="missing_days",
        message=message,
        severity="error" if every else "warning",
        column=scope.time.ref if scope.time else None,
        period=which,
        details={
            "period": r.label,
            "days": [d.isoformat() for d in missing],
            "missing_days": n,
            "covered_days": covered,
        },
        evidence=_evidence(
            scope,
            "missing_days",
            days.out,
            _days_arguments(scope),
            day_totals={"set": full},
            missing=n,
        ),
    )


def _segment_missing_days(scope: _Scope, days: _DayCounts) -> list[DataQualityIssue]:
    """Comparison days on which a steady segment has no rows while the rest of the table has."""
    comp = scope.range("comparison")
    data_days = {d for d, n in days.totals.items() if n and comp.start <= d <= comp.end}
    found = []
    for seg in days.segments:
        missing = sorted(data_days - seg.present)
        if missing:
            lost = seg.baseline_rows / max(days.baseline_days, 1) * len(missing)
            found.append((lost, seg, missing))
    found.sort(key=lambda f: (-f[0], f[1].dim.ref, str(f[1].value)))
    return [
        _segment_issue(scope, seg, missing, len(data_days), days, lost)
        for lost, seg, missing in found[:MAX_SEGMENT_ISSUES]
    ]


def _segment_issue(
    scope: _Scope,
    seg: _SegmentDays,
    missing: list[date],
    data_days: int,
    days: _DayCounts,
    lost: float,
) -> DataQualityIssue:
    """One ``segment_missing_days`` issue."""
    comp = scope.range("comparison")
    value = jsonable(seg.value)
    name = f"{seg.dim.ref} = {value!r}" if value is not None else f"{seg.dim.ref} = NULL"
    before = f"it had rows on {seg.baseline_days} of {days.baseline_days} baseline days"
    if len(missing) == data_days:
        message = (
            f"{name} has no rows at all in the comparison period {comp.label} although the "
            f"rest of the table does ({before}); check whether it stopped being recorded."
        )
    else:
        message = (
            f"{name} has no rows on {len(missing)} of the {data_days} comparison days with data "
            f"({_list_days(missing)}) while the rest of the table does ({before}); its "
            "comparison total is likely understated."
        )
    return DataQualityIssue(
        kind="segment_missing_days",
        message=message,
        severity="warning",
        column=seg.dim.ref,
        segment={seg.dim.ref: value},
        period="comparison",
        details={
            "days": [d.isoformat() for d in missing],
            "missing_days": len(missing),
            "comparison_days_with_data": data_days,
            "baseline_days_present": seg.baseline_days,
            "baseline_days_with_data": days.baseline_days,
            "baseline_rows": seg.baseline_rows,
            "expected_rows_missing": round(lost, 1),
        },
        evidence=_evidence(
            scope,
            "segment_missing_days",
            days.out,
            _days_arguments(scope),
            segment={seg.dim.ref: value},
        ),
    )


# --- 4. null_spike (and the rows of each period) ------------------------------------------------


@dataclass
class _PeriodRows:
    """Rows per period (after filters) and the null-spike issues, from one pass."""

    baseline: int
    comparison: int
    issues: list[DataQualityIssue]


def _null_spikes(scope: _Scope) -> _PeriodRows:
    """Rows per period, and columns whose NULL rate jumps (or drops) between the periods."""
    columns = _null_columns(scope)
    q = _Query(scope)
    exprs: list[exp.Expression] = [
        _count_if(q.in_period("baseline")).as_("baseline_rows"),
        _count_if(q.in_period("comparison")).as_("comparison_rows"),
    ]
    for i, col in enumerate(columns):
        for which in WHICH:
            exprs.append(_count_if(q.in_period(which), q.col(col)).as_(f"{which}_nonnull_{i}"))
    out = q.run(q.base(exp.select(*exprs)).where(q.where(q.in_either())), max_rows=1)
    row = dict(zip(out.columns, out.rows[0], strict=True))
    nb, nc = row["baseline_rows"], row["comparison_rows"]
    rows = _PeriodRows(nb, nc, [])
    if not nb or not nc:
        return rows
    for i, col in enumerate(columns):
        xb, xc = nb - row[f"baseline_nonnull_{i}"], nc - row[f"comparison_nonnull_{i}"]
        issue = _null_issue(scope, col, (xb, nb), (xc, nc), out)
        if issue is not None:
            rows.issues.append(issue)
    return rows


def _null_columns(scope: _Scope) -> tuple[Column, ...]:
    """Dimensions, then the metric's columns (each once); column i is ``*_nonnull_{i}``."""
    return _unique((*scope.dimensions, *scope.metric_columns))


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of a two-proportion z-test (pooled variance); 1.0 when undefined."""
    if not n1 or not n2:
        return 1.0
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (x2 / n2 - x1 / n1) / se
    return float(2 * norm.sf(abs(z)))


def _null_issue(
    scope: _Scope,
    col: Column,
    baseline: tuple[int, int],
    comparison: tuple[int, int],
    out: QueryOutput,
) -> DataQualityIssue | None:
    """A ``null_spike`` issue when the NULL rate moved enough (``(nulls, rows)`` per period)."""
    (xb, nb), (xc, nc) = baseline, comparison
    rb, rc = xb / nb, xc / nc
    spike = rc - rb >= NULL_MIN_POINTS and rc >= NULL_MIN_RATIO * rb
    filled = rb - rc >= NULL_MIN_POINTS and rb >= NULL_MIN_RATIO * rc
    if not (spike or filled):
        return None
    p = two_proportion_p(xb, nb, xc, nc)
    if p >= NULL_MAX_P:
        return None
    rates = f"NULL in {_pct(rc)} of comparison rows vs {_pct(rb)} of baseline rows"
    if spike and col in scope.metric_columns:
        message = (
            f"Column {col.ref!r} went missing more often: {rates}; the metric skips NULLs, so "
            "it can move for this reason alone."
        )
    elif spike:
        message = (
            f"Column {col.ref!r} went missing more often: {rates}; segments on it can look "
            "like they moved when their values only went missing."
        )
    else:
        message = (
            f"Column {col.ref!r} started being filled: {rates}; segments on it are not "
            "comparable across the periods."
        )
    return DataQualityIssue(
        kind="null_spike",
        message=message,
        severity="warning" if spike else "info",
        column=col.ref,
        period="comparison",
        details={
            "baseline_null_rate": rb,
            "comparison_null_rate": rc,
            "baseline_nulls": xb,
            "baseline_rows": nb,
            "comparison_nulls": xc,
            "comparison_rows": nc,
            "p_value": p,
            "direction": "spike" if spike else "filled",
        },
        evidence=_evidence(
            scope,
            "null_spike",
            out,
            {"columns": [c.ref for c in _null_columns(scope)]},
            column=col.ref,
        ),
    )


# --- 5. duplicate_rows --------------------------------------------------------------------------
#
# Identical rows are not evidence of a double load by themselves: event data without an id
# (``date, platform, country, purchases``) repeats rows all the time. What a repeated load leaves
# behind is copies the data's own structure does not explain, unit by unit (a day; a period for
# label periods), which is how loads arrive:
#
# * k-fold units: every distinct row of the unit appears a multiple of k times (k = 2, 3, 4),
#   more distinct rows than natural counts could all be multiples of k by chance. That chance
#   per distinct row is measured on the other units (the share of their distinct rows whose
#   count is a multiple of k; 1/k when every unit looks k-fold), and the units are judged
#   together: the chance that all their distinct rows are multiples of k must be below
#   DUPLICATE_MAX_P over the k tried.
# * extra copies where rows are otherwise unique: when the typical unit (the half of units
#   with the fewest copies for their size) has under DUPLICATE_SPARSE_SHARE of its rows as
#   copies, chance copies grow with the square of a unit's rows (coincidences between pairs of
#   rows); a unit with more copies than that, beyond chance (Poisson, corrected for the units
#   tested) and by at least DUPLICATE_MIN_RATE of its rows, holds rows loaded again. Where
#   identical rows are normal, part of a unit loaded again cannot be told from natural repeats
#   and is not reported.

DUPLICATE_FOLDS = (4, 3, 2)
"""Multiplicities tried for a unit loaded k times (largest first: a 4-fold unit is 2-fold too)."""
DUPLICATE_MAX_P = 0.001
"""Chance bound for both tests (divided among the folds tried, or the units tested)."""
DUPLICATE_SPARSE_SHARE = 0.05
"""Extra copies are judged only where the typical unit has fewer copies than this share."""


def _sample_factor(rows: int) -> int:
    """1 (exact) up to ``DUPLICATE_EXACT_MAX_ROWS`` rows; else the power of two bringing the
    sampled rows under it."""
    k = 1
    while rows / k > DUPLICATE_EXACT_MAX_ROWS:
        k *= 2
    return k


@dataclass
class _Unit:
    """Rows of one day (or one label period) grouped by their content."""

    key: str
    period: Which
    rows: int
    distinct: int
    multiple_of: dict[int, int]
    """Distinct rows whose count is a multiple of k, per k."""
    fold: int = 1
    """k when the unit was loaded k times; 1 otherwise."""
    copies: float = 0.0
    """Rows that are a load's extra copies: all but 1/k of a k-fold unit's rows; the repeats of
    a unit loaded again in part (where rows are otherwise unique)."""

    @property
    def extra(self) -> int:
        """Rows beyond the first copy of each distinct row (natural repeats included)."""
        return self.rows - self.distinct


def _duplicate_rows(scope: _Scope, rows: _PeriodRows) -> list[DataQualityIssue]:
    """Rows loaded more than once (whole days, or copies beyond what the data explains).

    Rows are grouped per day (per period for label periods) by a 64-bit hash of the whole row (one
    pass, no sort); two different rows share a hash with probability ~n^2/2^65 (about 3e-6 at 10
    million rows). Above ``DUPLICATE_EXACT_MAX_ROWS`` rows only the rows whose hash is 0 modulo a
    power of two k are grouped: copies of a row share its hash, so each group is kept or dropped
    whole, and its count (the evidence of both tests) is exact.
    """
    k = _sample_factor(rows.baseline + rows.comparison)
    q = _Query(scope)
    row_hash = exp.Anonymous(
        this="hash", expressions=[q.col(c) for c in scope.ctx.schema.tables[scope.table]]
    )
    sample = None
    if k > 1:
        sample = exp.EQ(
            this=exp.Mod(this=row_hash.copy(), expression=exp.Literal.number(k)),
            expression=exp.Literal.number(0),
        )
    unit = q.day() if scope.time is not None else q.in_period("baseline")
    per_row = (
        q.base(exp.select(unit.as_("unit"), exp.Count(this=exp.Star()).as_("copies")))
        .where(q.where(exp.Paren(this=q.in_either()), sample))
        .group_by(exp.Literal.number(1), row_hash)
    )

    def multiple_of(fold: int) -> exp.Expression:
        mod = exp.Mod(this=_c("copies"), expression=exp.Literal.number(fold))
        return _count_if(exp.EQ(this=mod, expression=exp.Literal.number(0))).as_(f"x{fold}")

    tree = (
        exp.select(
            _c("unit"),
            exp.Sum(this=_c("copies")).as_("rows"),
            exp.Count(this=exp.Star()).as_("distinct_rows"),
            *[multiple_of(f) for f in DUPLICATE_FOLDS],
        )
        .from_(exp.Table(this=ident("per_row")))
        .group_by(exp.Literal.number(1))
        .order_by(exp.Literal.number(1))
        .with_("per_row", as_=per_row)
    )
    days = scope.range("baseline").days + scope.range("comparison").days if scope.time else 2
    out = q.run(tree, max_rows=days + 1)
    units = [_unit(scope, row) for row in out.rows]
    _find_folds(units)
    _find_extra_copies(units)
    return _duplicate_issue(scope, rows, units, k, out)


def _unit(scope: _Scope, row: tuple[Any, ...]) -> _Unit:
    key, n, distinct, *multiples = row
    if scope.time is not None:
        day = _as_day(key)
        assert day is not None
        b = scope.range("baseline")
        period: Which = "baseline" if b.start <= day <= b.end else "comparison"
        name = day.isoformat()
    else:
        period = "baseline" if key else "comparison"
        name = scope.question.periods.label(period)
    counts = {fold: int(x) for fold, x in zip(DUPLICATE_FOLDS, multiples, strict=True)}
    return _Unit(name, period, int(n), int(distinct), counts)


def _find_folds(units: list[_Unit]) -> None:
    """Mark the units whose every distinct row appears a multiple of k times, when natural
    counts could not all be multiples of k by chance (judged on the units together)."""
    for fold in DUPLICATE_FOLDS:
        open_ = [u for u in units if u.fold == 1]
        looks = [u for u in open_ if u.distinct and u.multiple_of[fold] == u.distinct]
        if not looks:
            continue
        others = [u for u in open_ if u not in looks]
        seen = sum(u.distinct for u in others)
        chance = (sum(u.multiple_of[fold] for u in others) + 1) / (seen + 2) if seen else 1 / fold
        tested = sum(u.distinct for u in looks)
        if tested * math.log(chance) < math.log(DUPLICATE_MAX_P / len(DUPLICATE_FOLDS)):
            for u in looks:
                u.fold, u.copies = fold, u.rows * (fold - 1) / fold


def _find_extra_copies(units: list[_Unit]) -> None:
    """Mark the units with more copies than chance coincidences explain, where rows are otherwise
    unique (copies of the typical unit under ``DUPLICATE_SPARSE_SHARE`` of its rows)."""
    open_ = [u for u in units if u.fold == 1 and u.rows]
    if not open_:
        return
    rates = sorted(u.extra / u.rows**2 for u in open_)
    typical = [u for u in open_ if u.extra / u.rows**2 <= rates[(len(rates) - 1) // 2]]
    rows = sum(u.rows for u in typical)
    if sum(u.extra for u in typical) >= DUPLICATE_SPARSE_SHARE * rows:
        return
    pairs = (sum(u.extra for u in typical) + 1) / sum(u.rows**2 for u in typical)
    bound = DUPLICATE_MAX_P / len(open_)
    for u in open_:
        chance = pairs * u.rows**2
        if u.extra - chance < DUPLICATE_MIN_RATE * u.rows:
            continue
        if float(poisson.sf(u.extra - 1, chance)) < bound:
            u.copies = u.extra  # rows are otherwise unique: its repeats are the copies


def _duplicate_issue(
    scope: _Scope,
    rows: _PeriodRows,
    units: list[_Unit],
    k: int,
    out: QueryOutput,
) -> list[DataQualityIssue]:
    """The ``duplicate_rows`` issue (as a list of 0 or 1): the units loaded more than once."""
    hit = [u for u in units if u.copies > 0]
    if not hit:
        return []
    total = {"baseline": rows.baseline, "comparison": rows.comparison}
    # the share of each period's (sampled) rows that are extra copies, applied to its rows
    seen = {w: sum(u.rows for u in units if u.period == w) for w in WHICH}
    rate = {
        w: sum(u.copies for u in hit if u.period == w) / seen[w] if seen[w] else 0.0 for w in WHICH
    }
    dups = {w: round(rate[w] * total[w]) for w in WHICH}
    about = "about " if k > 1 else ""
    said = []
    for u in hit[:MAX_LISTED_DAYS]:
        if u.fold > 1:
            times = {2: "twice", 3: "three times", 4: "four times"}[u.fold]
            said.append(f"{u.key} (every row {times})")
        else:
            said.append(
                f"{u.key} ({about}{round(k * u.copies):,} of {about}{k * u.rows:,} rows are copies)"
            )
    if len(hit) > MAX_LISTED_DAYS:
        said.append(f"and {len(hit) - MAX_LISTED_DAYS} more")
    what = ("day" if scope.time is not None else "period") + ("s" if len(hit) > 1 else "")
    message = (
        f"Rows loaded more than once in {scope.table!r} on {len(hit)} {what}: {', '.join(said)}; "
        f"{about}{dups['comparison']:,} of {total['comparison']:,} comparison rows and {about}"
        f"{dups['baseline']:,} of {total['baseline']:,} baseline rows are extra copies, so sums "
        "and counts there are inflated."
    )
    if k > 1:
        message += f" (Estimated on the 1/{k} of rows picked by row hash.)"
    details: dict[str, Any] = {}
    for w in WHICH:
        details |= {f"{w}_rows": total[w], f"{w}_duplicates": dups[w], f"{w}_rate": rate[w]}
    details |= {
        "days" if scope.time is not None else "periods": [u.key for u in hit],
        "repeated_days": {u.key: u.fold for u in hit if u.fold > 1 and scope.time is not None},
        "units": [
            {"unit": u.key, "rows": k * u.rows, "distinct_rows": k * u.distinct, "fold": u.fold}
            for u in hit
        ],
        "sample": f"1/{k}",
        "exact": k == 1,
    }
    return [
        DataQualityIssue(
            kind="duplicate_rows",
            message=message,
            severity="warning",
            period="comparison" if dups["comparison"] >= dups["baseline"] else "baseline",
            details=details,
            evidence=_evidence(
                scope, "duplicate_rows", out, {"sample": f"1/{k}"}, period_rows=total
            ),
        )
    ]


# --- 6. non_finite_values ----------------------------------------------------------------------

_NON_FINITE_KINDS = ("nan", "infinity", "minus_infinity")


def _non_finite(scope: _Scope) -> list[DataQualityIssue]:
    """NaN and ±Infinity in the metric's floating-point columns, per period (one query, only
    for a column whose load-time profile does not rule them out).

    The engine leaves such values out of the metric, as it leaves out NULLs; a SQL tool's sum,
    average, minimum or maximum over them is not a number and comes back null. Either way the
    reader has to know they are there.
    """
    columns = [
        c for c in scope.metric_columns if may_be_non_finite(c) and not _all_finite(scope, c)
    ]
    if not columns:
        return []
    q = _Query(scope)
    exprs = [
        count.as_(f"{which}_{kind}_{i}")
        for i, col in enumerate(columns)
        for which in WHICH
        for kind, count in zip(
            _NON_FINITE_KINDS, non_finite_counts(q.col(col), q.in_period(which)), strict=True
        )
    ]
    out = q.run(q.base(exp.select(*exprs)).where(q.where(q.in_either())), max_rows=1)
    row = dict(zip(out.columns, out.rows[0], strict=True))
    issues = []
    for i, col in enumerate(columns):
        found = {w: [int(row[f"{w}_{k}_{i}"]) for k in _NON_FINITE_KINDS] for w in WHICH}
        per_period = {w: sum(found[w]) for w in WHICH}
        if not any(per_period.values()):
            continue
        both = [b + c for b, c in zip(found["baseline"], found["comparison"], strict=True)]
        message = (
            f"Column {col.ref!r} holds {non_finite_text(*both)}: {per_period['baseline']:,} in "
            f"the baseline, {per_period['comparison']:,} in the comparison. The metric leaves "
            "them out, like missing values; a SQL tool's sum or average over them comes back "
            "null."
        )
        details: dict[str, Any] = {}
        for w in WHICH:
            details |= {f"{w}_{k}": n for k, n in zip(_NON_FINITE_KINDS, found[w], strict=True)}
        issues.append(
            DataQualityIssue(
                kind="non_finite_values",
                message=message,
                severity="warning",
                column=col.ref,
                period="comparison"
                if per_period["comparison"] >= per_period["baseline"]
                else "baseline",
                details=details,
                evidence=_evidence(
                    scope,
                    "non_finite_values",
                    out,
                    {"columns": [c.ref for c in columns]},
                    column=col.ref,
                ),
            )
        )
    return issues


def _all_finite(scope: _Scope, col: Column) -> bool:
    """True when the column's profile (over every row, at load) has a finite minimum and
    maximum: DuckDB sorts NaN above +Infinity, so the column then holds no NaN or ±Infinity."""
    prof = scope.ctx.schema.column_profile(col)
    return prof is not None and all(
        isinstance(v, int | float) and math.isfinite(v) for v in (prof.min, prof.max)
    )

"""Query 2, rows per day, overall and per value of every dimension at once -> ``missing_days``
and ``segment_missing_days``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sqlglot import exp

from sql_tools import CellQuery, Column, QueryOutput, ident
from sql_tools.catalog import jsonable
from tasks.engine.quality._scope import (
    WHICH,
    Which,
    _as_day,
    _evidence,
    _list_days,
    _Query,
    _Scope,
    gap_effect,
)
from tasks.engine.quality.coverage import _Coverage
from tasks.engine.quality.grain import Grain, grain_of, profiled_dates
from tasks.engine.result import DataQualityIssue

SEGMENT_MIN_SHARE = 0.01
"""A segment is checked for missing days when it holds at least this share of baseline rows..."""
SEGMENT_MIN_PRESENCE = 0.8
"""...and has rows on at least this share of the baseline days that have data."""
MAX_SEGMENT_ISSUES = 20
"""Most ``segment_missing_days`` issues reported (largest expected row loss first)."""


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
    """Run the days query and sort its rows into day totals and per-segment presence: from the
    question's stored cells when the reader has them and they hold every dimension checked
    (the evidence keeps the query on the source)."""
    tree, q = _days_query(scope)
    k = len(scope.segment_dimensions)
    b, c = scope.range("baseline"), scope.range("comparison")
    # day totals for both periods, plus for each steady value (at most 100 per dimension:
    # each holds >= 1% of rows) its comparison days and its first baseline day
    max_rows = b.days + c.days + k * 100 * (c.days + 1) + 1
    out = q.run(tree, max_rows=max_rows, on_cells=lambda cells: _on_cells(scope, cells))
    idx = {name: i for i, name in enumerate(out.columns)}
    full = 2**k - 1
    by_set = {value_set(k, i): i for i in range(k)}
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


def value_set(k: int, i: int) -> int:
    """``GROUPING(d0, ..., dk-1)`` of the grouping set of the day and dimension ``i`` (every
    other dimension rolled up); the day alone is ``2^k - 1``."""
    return 2**k - 1 - 2 ** (k - 1 - i)


def _on_cells(scope: _Scope, cells: Any) -> CellQuery | None:
    """The days query on the stored cells (the engine's :class:`~tasks.engine.leaf_days.
    LeafDays`): the same query, its rows per day and value summed from the cells instead of
    counted from the rows; None unless they are the question's and hold the rows per day and
    value of every column checked (they hold the columns, or the one pass counted them)."""
    checked = [d.ref for d in scope.segment_dimensions]
    if not cells.asks(scope.question, {}):
        return None
    if not (cells.covers(dict.fromkeys(checked)) or cells.day_columns == checked):
        return None
    local, lq = _days_query(scope, cells)
    return local, lq.params.values


def _by_day_and_value(
    day: exp.Expression, dims: list[exp.Expression], rows: exp.Expression
) -> tuple[exp.Select, exp.GroupingSets]:
    """The days query's first step, without its source: ``day``, each dimension (``d0`` ...),
    ``set`` (``GROUPING`` of the dimensions) and ``rows``, and its grouping sets (the day alone,
    and the day with each dimension)."""
    sets = [exp.Tuple(expressions=[day.copy()])] + [
        exp.Tuple(expressions=[day.copy(), d.copy()]) for d in dims
    ]
    gid = exp.Grouping(expressions=[d.copy() for d in dims]) if dims else exp.Literal.number(0)
    select = exp.select(
        day.as_("day"),
        *[d.as_(f"d{i}") for i, d in enumerate(dims)],
        gid.as_("set"),
        rows.as_("rows"),
    )
    return select, exp.GroupingSets(expressions=sets)


def _grouped_cells(scope: _Scope, cells: Any) -> exp.Select:
    """The days query's first step on the stored cells: rows per day, overall and per value of
    each dimension, summed from the cells (the same filters and periods made them); or, when
    the cells do not hold the dimensions, the rows per day and value the one pass counted."""
    if not cells.covers(dict.fromkeys(d.ref for d in scope.segment_dimensions)):
        k = len(scope.segment_dimensions)
        names = ["day", *[f"d{i}" for i in range(k)], "set", "rows"]
        return exp.select(*[exp.column(n, quoted=True) for n in names]).from_(cells.day_values)
    picked = exp.select(
        exp.column("__day", quoted=True),
        *[
            exp.column(f"d{cells.dims.index(d.ref)}", quoted=True).as_(f"s{i}")
            for i, d in enumerate(scope.segment_dimensions)
        ],
        exp.column("rows", quoted=True),
    ).from_(cells.table)
    dims = [exp.column(f"s{i}", quoted=True) for i in range(len(scope.segment_dimensions))]
    select, sets = _by_day_and_value(
        exp.column("__day", quoted=True), dims, exp.Sum(this=exp.column("rows", quoted=True))
    )
    return select.from_(exp.alias_(exp.paren(picked), "c", table=True)).group_by(sets)


def _days_query(scope: _Scope, cells: Any = None) -> tuple[exp.Select, _Query]:
    """Rows per day, overall and per value of every dimension, in one pass (``GROUPING SETS``).

    Output: the day totals of both periods (``set`` = ``2^k - 1``, every dimension rolled up),
    and for each dimension value holding >= 1% of baseline rows on >= 80% of the baseline days
    with data, its comparison-day rows plus its first baseline-day row (so a value with no
    comparison rows at all still shows up). ``set`` is ``GROUPING(d0, ..., dk-1)``.
    """
    q = _Query(scope)
    dims = [q.col(d) for d in scope.segment_dimensions]
    full = 2 ** len(dims) - 1
    if cells is not None:
        grouped = _grouped_cells(scope, cells)
    else:
        select, sets = _by_day_and_value(q.day(), dims, exp.Count(this=exp.Star()))
        grouped = q.base(select).where(q.where(q.in_either())).group_by(sets)
    seg = [exp.column("set", quoted=True)] + [
        exp.column(f"d{i}", quoted=True) for i in range(len(dims))
    ]
    is_full = exp.EQ(this=exp.column("set", quoted=True), expression=exp.Literal.number(full))

    def in_b() -> exp.Expression:
        return q.day_in(exp.column("day", quoted=True), "baseline")

    def win(agg: exp.Expression, cond: exp.Expression, by: list[exp.Expression]) -> exp.Window:
        filtered = exp.Filter(this=agg, expression=exp.Where(this=cond))
        return exp.Window(this=filtered, partition_by=[b.copy() for b in by], over="OVER")

    stats = exp.select(
        exp.Star(),
        in_b().as_("in_baseline"),
        win(exp.Sum(this=exp.column("rows", quoted=True)), in_b(), seg).as_("seg_baseline_rows"),
        win(exp.Count(this=exp.Star()), in_b(), seg).as_("seg_baseline_days"),
        win(exp.Min(this=exp.column("day", quoted=True)), in_b(), seg).as_("seg_first_day"),
        win(
            exp.Sum(this=exp.column("rows", quoted=True)), exp.and_(in_b(), is_full.copy()), []
        ).as_("baseline_rows"),
        win(exp.Count(this=exp.Star()), exp.and_(in_b(), is_full.copy()), []).as_("baseline_days"),
    ).from_(exp.Table(this=ident("grouped")))

    def at_least(col: str, share: float, of: str) -> exp.Expression:
        return exp.GTE(
            this=exp.column(col, quoted=True),
            expression=exp.Mul(
                this=exp.Literal.number(share), expression=exp.column(of, quoted=True)
            ),
        )

    steady = exp.and_(
        at_least("seg_baseline_rows", SEGMENT_MIN_SHARE, "baseline_rows"),
        at_least("seg_baseline_days", SEGMENT_MIN_PRESENCE, "baseline_days"),
        exp.or_(
            exp.Not(this=exp.column("in_baseline", quoted=True)),
            exp.EQ(
                this=exp.column("day", quoted=True),
                expression=exp.column("seg_first_day", quoted=True),
            ),
        ),
    )
    final = (
        exp.select(
            *[
                exp.column(n, quoted=True)
                for n in ("day", "set", *[f"d{i}" for i in range(len(dims))], "rows")
            ],
            *[
                exp.column(n, quoted=True)
                for n in ("in_baseline", "seg_baseline_rows", "seg_baseline_days")
            ],
            *[exp.column(n, quoted=True) for n in ("baseline_rows", "baseline_days")],
        )
        .from_(exp.Table(this=ident("stats")))
        .where(exp.or_(is_full.copy(), exp.Paren(this=steady)))
        .order_by(
            exp.column("set", quoted=True),
            *[exp.column(f"d{i}", quoted=True) for i in range(len(dims))],
            exp.column("day", quoted=True),
        )
        .with_("grouped", as_=grouped)
        .with_("stats", as_=stats)
    )
    return final, q


def _days_arguments(scope: _Scope) -> dict[str, Any]:
    dims = [d.ref for d in scope.segment_dimensions]
    return {"dimensions": dims, "columns": {f"d{i}": d for i, d in enumerate(dims)}}


def data_grain(scope: _Scope, days: _DayCounts) -> Grain:
    """The data's grain (:func:`~tasks.engine.quality.grain.grain_of`): from the dates with rows
    in the two periods and the time column's first, last and most frequent dates (the engine's
    change test tells it from the same dates)."""
    assert scope.time is not None
    dated = [d for d, n in days.totals.items() if n]
    return grain_of([*dated, *profiled_dates(scope.ctx, scope.table, scope.time.ref)])


def _missing_days(scope: _Scope, cov: _Coverage, days: _DayCounts) -> list[DataQualityIssue]:
    """Units of the data's grain (days of daily data, months of monthly data) inside a period
    and inside the data's coverage that have no rows at all."""
    span = cov.covered()
    assert span is not None
    issues = []
    for which in WHICH:
        r = scope.range(which)
        lo, hi = max(r.start, span[0]), min(r.end, span[1])
        if lo > hi:
            continue  # not covered at all: partial_period already says so
        covered = cov.grain.units(lo, hi)
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
    """One ``missing_days`` issue: the days (the units of the data's grain) of ``which``
    without a single row."""
    r = scope.range(which)
    n = len(missing)
    every = n == covered
    grain = cov.grain
    units = grain.plural
    tail = (
        "the period has no data at all."
        if every
        else f"those {units} look unloaded, so {gap_effect(scope.question, units)}."
    )
    where = "on" if grain.unit == "day" else "for"
    data = "" if grain.unit == "day" else f"{grain.adjective} "
    message = (
        f"No rows {where} {n} of the {covered} {units} of the {which} period {r.label} that lie "
        f"in the {data}data's range {cov.first}..{cov.last} ({_list_days(missing)}); {tail}"
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
            "grain": grain.unit,
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

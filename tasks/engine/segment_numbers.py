"""A segment's numbers on their own: its metric per period (the evidence query a root cause or
a finding cites), its per-day series, and a distinct count's exact totals.

Each is read through the context's reader: from the question's stored cells when they hold the
segment's columns, else from the source; either way the SQL kept is the source's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from sql_tools import Filter, ToolContext, to_sql
from tasks.engine.engine_sql import EngineSql, period_scales
from tasks.engine.spec import DateRange, Question


def segment_question(q: Question, segment: dict[str, Any]) -> Question:
    """``q`` with ``segment``'s values as filters (a null value as ``is_null``)."""
    extra = [
        Filter(column=k, op="is_null") if v is None else Filter(column=k, op="=", value=v)
        for k, v in segment.items()
    ]
    metric = q.metric.model_copy(update={"filters": (*q.metric.filters, *extra)})
    return q.model_copy(update={"metric": metric})


def daily_series(
    ctx: ToolContext, q: Question, segment: dict[str, Any] | None = None
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Per-day numerator/denominator for each period, zero-filled over the period's days, and
    the SQL computing them on the source. ``q``'s filters include ``segment``'s (given, the
    sums are read from the question's stored cells when they hold the segment's columns)."""
    sql = EngineSql(ctx, q, [])
    text = to_sql(sql.daily(), ctx.dialect)
    table: pa.Table = ctx.reader.read_arrow(
        text,
        sql.params.values,
        max_rows=100_000,
        on_cells=lambda cells: (
            None if sql.distinct else cells.sums_query(q, segment or {}, by_day=True)
        ),
    )
    out: dict[str, Any] = {}
    rows = table.to_pylist()
    for p, which in ((0, "baseline"), (1, "comparison")):
        r: DateRange = getattr(q.periods, which)
        by_day = {row["__day"]: row for row in rows if row["__p"] == p}
        days = [r.start + timedelta(days=i) for i in range(r.days)]
        out[which] = {
            "days": days,
            "n": np.array([float((by_day.get(d) or {}).get("n") or 0.0) for d in days]),
            "d": np.array([float((by_day.get(d) or {}).get("d") or 0.0) for d in days]),
            "present": np.array([d in by_day for d in days]),
        }
    return out, text, dict(sql.params.values)


def exact_distinct_totals(ctx: ToolContext, q: Question) -> dict[str, float | None]:
    """A distinct-count metric's exact value per period (per-day mean for a daily grain)."""
    sql = EngineSql(ctx, q, [])
    text = to_sql(sql.distinct_totals(), ctx.dialect)
    out = ctx.reader.read(text, sql.params.values, max_rows=10)
    got = {int(p): float(n) for p, n in out.rows}
    scale = period_scales(q)
    return {
        "baseline": got.get(0, 0.0) / scale[0],
        "comparison": got.get(1, 0.0) / scale[1],
    }


@dataclass
class SegmentQuery:
    """The SQL that computes one segment's metric in each period, and what it returned."""

    sql: str
    params: dict[str, Any]
    formula: str
    baseline: float | None = None
    comparison: float | None = None
    tree: exp.Expression | None = field(default=None, repr=False, compare=False)
    """The tree ``sql`` was rendered from (None for a query re-created from its stored SQL)."""


def segment_query(ctx: ToolContext, q: Question, segment: dict[str, Any]) -> SegmentQuery:
    """Build (not run) the query of ``segment``'s metric: per period ``n`` and ``d``, summed over
    days after counting distinct values per day for a daily grain; the metric is ``formula``."""
    on_segment = segment_question(q, segment)
    metric = on_segment.metric
    sq = EngineSql(ctx, on_segment, [])
    daily = metric.grain == "day" and q.periods.by_dates
    keys = ["__p", *(["__day"] if daily and sq.distinct else [])]
    inner_aggs = []
    for role, agg in (("n", metric.numerator), ("d", metric.denominator)):
        if agg is not None and agg.fn == "count_distinct":
            value = exp.Count(
                this=exp.Distinct(expressions=[exp.column(f"__u{role}", quoted=True)])
            )
        else:
            value = exp.Sum(this=exp.column(f"__{role}", quoted=True))
        inner_aggs.append(exp.alias_(value, role))
    inner = (
        exp.select(*[exp.column(k, quoted=True) for k in keys], *inner_aggs)
        .from_(exp.alias_(exp.paren(sq.base(with_dims=False, with_day=daily)), "b", table=True))
        .group_by(*[exp.column(k, quoted=True) for k in keys])
    )
    tree = (
        exp.select(
            exp.column("__p", quoted=True),
            exp.alias_(exp.Sum(this=exp.column("n", quoted=True)), "n"),
            exp.alias_(exp.Sum(this=exp.column("d", quoted=True)), "d"),
        )
        .from_(exp.alias_(exp.paren(inner), "i", table=True))
        .group_by(exp.column("__p", quoted=True))
        .order_by(exp.column("__p", quoted=True))
    )
    if q.metric.kind == "ratio":
        formula = "n / d"
    elif daily:
        formula = "n / days in the period"
    else:
        formula = "n"
    return SegmentQuery(
        sql=to_sql(tree, ctx.dialect), params=dict(sq.params.values), formula=formula, tree=tree
    )


def run_segment_query(
    ctx: ToolContext, q: Question, sq: SegmentQuery, segment: dict[str, Any] | None = None
) -> SegmentQuery:
    """Fill in the segment's metric per period (None where undefined): ``sq`` as the reader
    answers it; given ``segment`` (the segment ``sq`` was built for), from the question's
    stored cells when they hold its columns."""

    def on_cells(cells: Any) -> Any:
        if segment is None:
            return None
        return cells.sums_query(segment_question(q, segment), segment, by_day=False)

    out = ctx.reader.read(sq.sql, sq.params, max_rows=10, on_cells=on_cells)
    got = {int(p): (float(n or 0.0), float(d or 0.0)) for p, n, d in out.rows}
    scale = period_scales(q)
    for p, which in ((0, "baseline"), (1, "comparison")):
        n, d = got.get(p, (0.0, 0.0))
        if q.metric.kind == "ratio":
            value = n / d if d else None
        else:
            value = n / scale[p]
        setattr(sq, which, value)
    return sq

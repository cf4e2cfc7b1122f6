"""The engine's data passes: leaves and every segment up to the search depth, in one query.

One scan of the base table (joined dimensions through verified many-to-one keys) aggregates rows
into *leaves* (one per combination of all searched dimensions) with per-period sums; a
``GROUPING SETS`` over those leaves then yields every segment of up to ``max_depth`` columns in the
same query. Distinct counts are deduplicated per leaf (and per day for a daily grain) before any
grouping set sees them, never counted inside the grouping sets. A second, small query gives the
per-day series used to judge significance.

SQL is built from sqlglot nodes with quoted identifiers and bound parameters; it goes through the
same guard and time limit as every tool query.

One module of this size because one SQL builder (:class:`EngineSql`: the joined source, filters,
periods and per-leaf statistics) serves the leaves query, the daily series and the segment
evidence queries, which must compute the same numbers; screening lives in ``screen.py``. The
builder returns trees; the functions that run them render each in the context's dialect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sql_tools import (
    MAX_SEGMENT_COLUMNS,
    Column,
    Params,
    Source,
    ToolContext,
    ToolInputError,
    finite_or_null,
    ident,
    label_value,
    may_be_non_finite,
    to_sql,
    where_clause,
)
from tasks.engine.spec import DEFAULT_DEPTH, Aggregate, DateRange, Question

if TYPE_CHECKING:
    from tasks.engine.leaf_days import LeafDays

MAX_RESULT_ROWS = 6_000_000
MAX_DIMENSION_VALUES = 1000
# per-leaf, per-period statistics fetched for each aggregate role ("n" numerator, "d" denominator)
STATS = ("n", "d", "qn", "qd", "qnd", "rows")
# per leaf and period, over its days (date periods): the sum of the squared daily numerator,
# denominator and their product, from which the day-to-day spread of a leaf is measured
DAY_STATS = ("vn", "vd", "vnd", "cells")


@dataclass
class Cube:
    """Leaves and segments as arrays; period 0 is the baseline, 1 the comparison.

    ``codes`` index into ``values[j]`` for dimension ``j``; ``-1`` marks a dimension a segment does
    not constrain. Statistics are already scaled per day for a daily grain.
    """

    dims: list[str]
    values: list[list[Any]]
    leaf_codes: np.ndarray
    leaf: dict[str, np.ndarray]
    seg_mask: np.ndarray
    seg_codes: np.ndarray
    seg: dict[str, np.ndarray]
    total: dict[str, float]
    sql: str
    params: dict[str, Any]
    elapsed_ms: float
    notes: list[str] = field(default_factory=list)
    # days in the baseline and comparison periods, when leaves carry daily statistics
    days: tuple[float, float] | None = None

    def segment_dict(self, i: int) -> dict[str, Any]:
        """``{column: value}`` of segment ``i``."""
        return {
            self.dims[j]: self.values[j][int(c)] for j, c in enumerate(self.seg_codes[i]) if c >= 0
        }


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _filtered_sum(value: exp.Expression, period: int) -> exp.Expression:
    cond = exp.EQ(this=_col("__p"), expression=exp.Literal.number(period))
    return exp.Filter(
        this=exp.Sum(this=value),
        expression=exp.Where(this=cond),
    )


class EngineSql:
    """Builds the engine's queries for one question as sqlglot trees, with their bound values in
    ``params``. Building reads the schema only; nothing here renders or runs a query."""

    def __init__(self, ctx: ToolContext, q: Question, dims: list[str]) -> None:
        self.ctx, self.q = ctx, q
        self.src = Source(ctx, q.metric.table)
        self.params = Params()
        self.dims = [self.src.resolve(d, "dimensions") for d in dims]
        self.num = self._agg_col(q.metric.numerator)
        self.den = self._agg_col(q.metric.denominator) if q.metric.denominator else None
        self.period_col, self.conds = self._periods()
        filters = where_clause(ctx, self.src, list(q.metric.filters), self.params)
        self.where = exp.or_(*self.conds)
        if filters is not None:
            self.where = exp.and_(filters, exp.paren(self.where))

    def _agg_col(self, agg: Aggregate) -> Column | None:
        if agg.column is None:
            return None
        col = self.src.resolve(agg.column, "metric")
        if agg.fn in ("sum", "avg") and col.kind != "number":
            raise ToolInputError(
                f"{agg.fn}({col.ref}) needs a numeric column; {col.ref!r} is {col.kind}",
                code="type_mismatch",
            )
        return col

    def _periods(self) -> tuple[Column, tuple[exp.Expression, exp.Expression]]:
        p = self.q.periods
        if p.by_dates:
            col = self.src.resolve(p.time_column, "time_column")
            if col.kind not in ("date", "timestamp"):
                raise ToolInputError(
                    f"time column {col.ref!r} is {col.kind}, not a date or timestamp",
                    code="type_mismatch",
                )
            conds = tuple(self._between(col, r) for r in (p.baseline, p.comparison))
            return col, conds  # type: ignore[return-value]
        col = self.src.resolve(p.period_column, "period_column")
        conds = []
        for which, label in (("baseline", p.baseline), ("comparison", p.comparison)):
            value = label_value(self.ctx, col, label, which)
            conds.append(exp.EQ(this=self.src.expr(col), expression=self.params.bind(value)))
        return col, (conds[0], conds[1])

    def _between(self, col: Column, r: DateRange) -> exp.Expression:
        e = self.src.expr(col)
        if col.kind == "date":
            return exp.Between(this=e, low=self.params.bind(r.start), high=self.params.bind(r.end))
        lo = datetime.combine(r.start, datetime.min.time())
        hi = datetime.combine(r.end + timedelta(days=1), datetime.min.time())
        return exp.and_(
            exp.GTE(this=e, expression=self.params.bind(lo)),
            exp.LT(this=e.copy(), expression=self.params.bind(hi)),
        )

    def _row_value(self, agg: Aggregate, col: Column | None) -> exp.Expression:
        """The per-row contribution of an additive aggregate (sum/count/avg parts). NaN and
        ±Infinity count as missing, like NULL (the data-quality check says how many there were)."""
        if agg.fn == "count" and col is None:
            return exp.Literal.number(1)
        e = self.src.expr(col)
        if may_be_non_finite(col):
            e = finite_or_null(e)
        if agg.fn == "count" or agg.fn == "count_distinct":
            return exp.If(
                this=exp.Not(this=exp.Is(this=e, expression=exp.Null())),
                true=exp.Literal.number(1),
                false=exp.Literal.number(0),
            )
        return exp.Cast(this=e, to=exp.DataType.build("DOUBLE"))

    def _day(self) -> exp.Expression:
        return exp.Cast(this=self.src.expr(self.period_col), to=exp.DataType.build("DATE"))

    def base(self, *, with_dims: bool = True, with_day: bool = False) -> exp.Select:
        """Rows in either period with dimension columns, period flag and row values."""
        m = self.q.metric
        sel: list[exp.Expression] = []
        if with_dims:
            sel += [exp.alias_(self.src.expr(c), f"d{j}") for j, c in enumerate(self.dims)]
        sel.append(
            exp.alias_(
                exp.If(
                    this=self.conds[1].copy(),
                    true=exp.Literal.number(1),
                    false=exp.Literal.number(0),
                ),
                "__p",
            )
        )
        if with_day:
            sel.append(exp.alias_(self._day(), "__day"))
        num_agg = (
            Aggregate(fn="sum", column=m.numerator.column)
            if m.numerator.fn == "avg"
            else m.numerator
        )
        sel.append(exp.alias_(self._row_value(num_agg, self.num), "__n"))
        if m.numerator.fn == "count_distinct":
            sel.append(exp.alias_(self.src.expr(self.num), "__un"))
        if m.numerator.fn == "avg":
            sel.append(
                exp.alias_(
                    self._row_value(Aggregate(fn="count", column=m.numerator.column), self.num),
                    "__d",
                )
            )
        elif m.denominator is not None:
            sel.append(exp.alias_(self._row_value(m.denominator, self.den), "__d"))
            if m.denominator.fn == "count_distinct":
                sel.append(exp.alias_(self.src.expr(self.den), "__ud"))
        else:
            sel.append(exp.alias_(exp.Literal.number(1), "__d"))
        return self.src.apply(exp.select(*sel)).where(self.where.copy())

    @property
    def has_denominator(self) -> bool:
        """False when every row's denominator is 1 (its statistics follow from the row counts)."""
        m = self.q.metric
        return m.denominator is not None or m.numerator.fn == "avg"

    def stat_names(self) -> list[str]:
        """The per-period statistics the leaves query returns."""
        names = STATS if self.distinct or self.has_denominator else ("n", "qn", "rows")
        if self.by_day:
            names = (*names, *(DAY_STATS if self.has_denominator else ("vn", "cells")))
        return [f"{s}{p}" for s in names for p in ("b", "c")]

    @property
    def by_day(self) -> bool:
        """Leaves also carry their daily second moments (date periods, sums and counts)."""
        return self.q.periods.by_dates and not self.distinct and self.q.metric.grain != "day"

    @property
    def distinct(self) -> bool:
        m = self.q.metric
        return m.numerator.fn == "count_distinct" or (
            m.denominator is not None and m.denominator.fn == "count_distinct"
        )

    def leaves(self, cells: exp.Expression | None = None) -> exp.Select:
        """One row per leaf with per-period statistics (``nb``, ``nc``, ``qnb``, ...): from the
        rows, or from ``cells`` (the table :meth:`cells` was stored in) when given."""
        dcols = [f"d{j}" for j in range(len(self.dims))]
        daily = self.q.metric.grain == "day"
        if not self.distinct and self.by_day:
            return self._leaves_by_day(dcols, cells)
        if cells is not None:
            return self._leaves_of_cells(dcols, cells)
        if not self.distinct:
            b = self.base()
            aggs: list[exp.Expression] = []
            for p, suffix in ((0, "b"), (1, "c")):
                n, d = _col("__n"), _col("__d")
                aggs += [
                    exp.alias_(_filtered_sum(n, p), f"n{suffix}"),
                    exp.alias_(
                        _filtered_sum(exp.Mul(this=n, expression=n.copy()), p), f"qn{suffix}"
                    ),
                    exp.alias_(_filtered_sum(exp.Literal.number(1), p), f"rows{suffix}"),
                ]
                if self.has_denominator:
                    aggs += [
                        exp.alias_(_filtered_sum(d, p), f"d{suffix}"),
                        exp.alias_(
                            _filtered_sum(exp.Mul(this=d, expression=d.copy()), p), f"qd{suffix}"
                        ),
                        exp.alias_(
                            _filtered_sum(exp.Mul(this=n.copy(), expression=d.copy()), p),
                            f"qnd{suffix}",
                        ),
                    ]
            return (
                exp.select(*[_col(c) for c in dcols], *aggs)
                .from_(exp.alias_(exp.paren(b), "b", table=True))
                .group_by(*[_col(c) for c in dcols])
            )
        # distinct counts: deduplicate per leaf, period (and day for a daily grain) first
        b = self.base(with_day=daily)
        keys = [*dcols, "__p", *(["__day"] if daily else [])]
        m = self.q.metric
        inner_aggs = []
        for role, agg in (("n", m.numerator), ("d", m.denominator)):
            if agg is None:
                inner_aggs.append(exp.alias_(exp.Count(this=exp.Star()), f"__{role}"))
            elif agg.fn == "count_distinct":
                inner_aggs.append(
                    exp.alias_(
                        exp.Count(this=exp.Distinct(expressions=[_col(f"__u{role}")])), f"__{role}"
                    )
                )
            else:
                inner_aggs.append(exp.alias_(exp.Sum(this=_col(f"__{role}")), f"__{role}"))
        inner_aggs.append(exp.alias_(exp.Count(this=exp.Star()), "__rows"))
        dedup = (
            exp.select(*[_col(k) for k in keys], *inner_aggs)
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(*[_col(k) for k in keys])
        )
        aggs = []
        for p, suffix in ((0, "b"), (1, "c")):
            n, d = _col("__n"), _col("__d")
            aggs += [
                exp.alias_(_filtered_sum(n, p), f"n{suffix}"),
                exp.alias_(_filtered_sum(d, p), f"d{suffix}"),
                # distinct counts behave like counts: their variance is the count itself
                exp.alias_(_filtered_sum(n.copy(), p), f"qn{suffix}"),
                exp.alias_(_filtered_sum(d.copy(), p), f"qd{suffix}"),
                exp.alias_(_filtered_sum(exp.Literal.number(0), p), f"qnd{suffix}"),
                exp.alias_(_filtered_sum(_col("__rows"), p), f"rows{suffix}"),
            ]
        return (
            exp.select(*[_col(c) for c in dcols], *aggs)
            .from_(exp.alias_(exp.paren(dedup), "u", table=True))
            .group_by(*[_col(c) for c in dcols])
        )

    def _cell_sums(self) -> list[exp.Expression]:
        """A cell's sums of its rows' numerator and denominator, their squares and product, and
        its rows (``n``, ``qn``, ``rows``, ``d``, ``qd``, ``qnd``)."""
        n, d = _col("__n"), _col("__d")
        sums: list[exp.Expression] = [
            exp.alias_(exp.Sum(this=n), "n"),
            exp.alias_(exp.Sum(this=exp.Mul(this=n.copy(), expression=n.copy())), "qn"),
            exp.alias_(exp.Count(this=exp.Star()), "rows"),
        ]
        if self.has_denominator:
            sums += [
                exp.alias_(exp.Sum(this=d), "d"),
                exp.alias_(exp.Sum(this=exp.Mul(this=d.copy(), expression=d.copy())), "qd"),
                exp.alias_(exp.Sum(this=exp.Mul(this=n.copy(), expression=d.copy())), "qnd"),
            ]
        return sums

    @property
    def cell_sums(self) -> list[str]:
        """The sums each cell carries (see :meth:`_cell_sums`)."""
        return ["n", "qn", "rows", *(["d", "qd", "qnd"] if self.has_denominator else [])]

    def cells(self, *, with_day: bool = False) -> exp.Select:
        """The rows aggregated to cells: one per leaf, period (``__p``) and, ``with_day``, day
        (``__day``), with :meth:`_cell_sums`. Every statistic of the leaves, and every sum over
        a segment of the leaves, is a sum of cells (not for distinct counts)."""
        dcols = [f"d{j}" for j in range(len(self.dims))]
        keys = [*dcols, "__p", *(["__day"] if with_day else [])]
        return (
            exp.select(*[_col(k) for k in keys], *self._cell_sums())
            .from_(exp.alias_(exp.paren(self.base(with_day=with_day)), "b", table=True))
            .group_by(*[_col(k) for k in keys])
        )

    def _leaves_of_cells(self, dcols: list[str], cells: exp.Expression) -> exp.Select:
        """Each leaf's per-period statistics, summed from its stored cells."""
        aggs = [
            exp.alias_(_filtered_sum(_col(x), p), f"{x}{suffix}")
            for p, suffix in ((0, "b"), (1, "c"))
            for x in self.cell_sums
        ]
        return (
            exp.select(*[_col(c) for c in dcols], *aggs)
            .from_(cells.copy())
            .group_by(*[_col(c) for c in dcols])
        )

    def _leaves_by_day(self, dcols: list[str], cells: exp.Expression | None) -> exp.Select:
        """The leaves query through per-day cells (from the rows, or the stored ``cells``):
        each leaf's statistics, plus the sums of its squared daily totals (``vn``, ``vd``,
        ``vnd``)."""
        day_cells = (
            cells.copy()
            if cells is not None
            else exp.alias_(exp.paren(self.cells(with_day=True)), "dc", table=True)
        )
        sums = self.cell_sums
        squares = [("vn", "n", "n")]
        if self.has_denominator:
            squares += [("vd", "d", "d"), ("vnd", "n", "d")]
        aggs: list[exp.Expression] = []
        for p, suffix in ((0, "b"), (1, "c")):
            aggs += [exp.alias_(_filtered_sum(_col(x), p), f"{x}{suffix}") for x in sums]
            # days with rows ("cells"): a leaf of one row per day is pre-aggregated data
            aggs.append(exp.alias_(_filtered_sum(exp.Literal.number(1), p), f"cells{suffix}"))
            aggs += [
                exp.alias_(
                    _filtered_sum(exp.Mul(this=_col(a), expression=_col(b)), p), f"{v}{suffix}"
                )
                for v, a, b in squares
            ]
        return (
            exp.select(*[_col(c) for c in dcols], *aggs)
            .from_(day_cells)
            .group_by(*[_col(c) for c in dcols])
        )

    def cover_cells(self, covers: list[tuple[int, ...]]) -> exp.Select:
        """Per-period statistics of every cell of each cover (a set of columns), on raw rows.

        The screening pass: one scan, one grouping set per cover. Distinct counts use
        ``approx_count_distinct`` here (screening only ranks columns; the search that names causes
        counts exactly).
        """
        k = len(self.dims)
        dcols = [f"d{j}" for j in range(k)]
        m = self.q.metric
        daily = m.grain == "day" and self.q.periods.by_dates and self.distinct
        aggs: list[exp.Expression] = []
        for p, suffix in ((0, "b"), (1, "c")):
            n, d = _col("__n"), _col("__d")
            roles = [("n", m.numerator, n)]
            if self.has_denominator:
                roles.append(("d", m.denominator, d))
            for role, agg, val in roles:
                if agg is not None and agg.fn == "count_distinct":
                    # a daily grain counts distinct (value, day) pairs: the per-day counts summed
                    key: exp.Expression = _col(f"__u{role}")
                    if daily:
                        key = _fn("hash", key, _col("__day"))
                    approx = exp.Filter(
                        this=_fn("approx_count_distinct", key),
                        expression=exp.Where(
                            this=exp.EQ(this=_col("__p"), expression=exp.Literal.number(p))
                        ),
                    )
                    aggs += [
                        exp.alias_(approx, f"{role}{suffix}"),
                        exp.alias_(approx.copy(), f"q{role}{suffix}"),
                    ]
                else:
                    aggs += [
                        exp.alias_(_filtered_sum(val, p), f"{role}{suffix}"),
                        exp.alias_(
                            _filtered_sum(exp.Mul(this=val.copy(), expression=val.copy()), p),
                            f"q{role}{suffix}",
                        ),
                    ]
            aggs.append(exp.alias_(_filtered_sum(exp.Literal.number(1), p), f"rows{suffix}"))
            if self.has_denominator:
                aggs.append(
                    exp.alias_(
                        _filtered_sum(exp.Mul(this=n.copy(), expression=d.copy()), p),
                        f"qnd{suffix}",
                    )
                )

        grouping = exp.GroupingSets(
            expressions=[exp.Tuple(expressions=[_col(dcols[j]) for j in c]) for c in covers]
        )
        sel = [
            exp.alias_(exp.Anonymous(this="GROUPING", expressions=[_col(c) for c in dcols]), "__g"),
            *[_col(c) for c in dcols],
            *aggs,
        ]
        base = self.base(with_day=daily)
        tree = exp.select(*sel).from_(exp.alias_(exp.paren(base), "b", table=True))
        tree.set("group", exp.Group(grouping_sets=[grouping]))
        return tree

    def cube(self, max_depth: int, cells: exp.Expression | None = None) -> exp.Select:
        """Leaves plus every segment of 1..max_depth columns plus the total, as grouping sets
        (the leaves from the rows, or from the stored ``cells``)."""
        k = len(self.dims)
        dcols = [f"d{j}" for j in range(k)]
        sets: list[tuple[str, ...]] = [tuple(dcols)]
        for depth in range(min(max_depth, k), 0, -1):
            sets += [c for c in combinations(dcols, depth) if len(c) < k]
        sets.append(())
        grouping = exp.GroupingSets(
            expressions=[exp.Tuple(expressions=[_col(c) for c in s]) for s in sets]
        )
        stat_cols = self.stat_names()
        sel = [
            exp.alias_(exp.Anonymous(this="GROUPING", expressions=[_col(c) for c in dcols]), "__g")
            if k
            else exp.alias_(exp.Literal.number(0), "__g"),
            *[_col(c) for c in dcols],
            *[exp.alias_(exp.Sum(this=_col(s)), s) for s in stat_cols],
        ]
        leaves = exp.alias_(exp.paren(self.leaves(cells)), "leaves", table=True)
        tree = exp.select(*sel).from_(leaves)
        tree.set("group", exp.Group(grouping_sets=[grouping]))
        return tree

    def daily(self) -> exp.Select:
        """Per-day numerator and denominator totals (date periods only)."""
        m = self.q.metric
        b = self.base(with_dims=False, with_day=True)
        aggs = []
        for role, agg in (("n", m.numerator), ("d", m.denominator)):
            if agg is not None and agg.fn == "count_distinct":
                aggs.append(
                    exp.alias_(exp.Count(this=exp.Distinct(expressions=[_col(f"__u{role}")])), role)
                )
            else:
                aggs.append(exp.alias_(exp.Sum(this=_col(f"__{role}")), role))
        tree = (
            exp.select(_col("__day"), _col("__p"), *aggs)
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(_col("__day"), _col("__p"))
            .order_by(_col("__day"))
        )
        return tree

    def distinct_totals(self) -> exp.Select:
        """A distinct count's exact value per period (``__p``, ``n``): counted per day and summed
        for a daily grain."""
        daily = self.q.metric.grain == "day" and self.q.periods.by_dates
        b = self.base(with_dims=False, with_day=daily)
        keys = ["__p", *(["__day"] if daily else [])]
        inner = (
            exp.select(
                *[_col(k) for k in keys],
                exp.alias_(exp.Count(this=exp.Distinct(expressions=[_col("__un")])), "n"),
            )
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(*[_col(k) for k in keys])
        )
        return (
            exp.select(_col("__p"), exp.alias_(exp.Sum(this=_col("n")), "n"))
            .from_(exp.alias_(exp.paren(inner), "i", table=True))
            .group_by(_col("__p"))
        )


def build_cube(
    ctx: ToolContext, q: Question, dims: list[str], cells: LeafDays | None = None
) -> Cube:
    """Run the leaves + grouping-sets query and return it as arrays: on the stored ``cells`` of
    ``dims`` when given (the cube keeps the SQL that computes it on the source)."""
    depth = q.max_depth or auto_depth(ctx, q, dims)
    sql = EngineSql(ctx, q, dims)
    text = to_sql(sql.cube(depth), ctx.dialect)
    import time

    start = time.perf_counter()
    raw = (
        cells.cube(depth)
        if cells is not None
        else ctx.run_arrow(text, sql.params.values, max_rows=MAX_RESULT_ROWS)
    )
    table = in_order(raw, len(dims))
    elapsed = (time.perf_counter() - start) * 1000
    k = len(dims)
    g = _numpy(table.column("__g")).astype(np.int64)
    # GROUPING() sets bit (k-1-j) when dimension j is aggregated away
    grouped = np.zeros((len(g), k), dtype=bool)
    for j in range(k):
        grouped[:, j] = ((g >> (k - 1 - j)) & 1) == 0
    codes = np.full((len(g), k), -1, dtype=np.int64)
    values: list[list[Any]] = []
    notes: list[str] = []
    for j in range(k):
        col = table.column(f"d{j}")
        enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
        idx = _numpy(enc.indices)
        idx = (
            np.where(np.isnan(idx.astype(float)), -1, idx).astype(np.int64)
            if idx.dtype.kind == "f"
            else idx.astype(np.int64)
        )
        vals = enc.dictionary.to_pylist()
        values.append([_plain(v) for v in vals])
        codes[:, j] = np.where(grouped[:, j], idx, -1)
    scale = _scales(q)
    stats: dict[str, np.ndarray] = {}
    raw = _constant_denominator(table)
    for s in STATS:
        for p, suffix in ((0, "b"), (1, "c")):
            arr = raw[f"{s}{suffix}"]
            if s in ("n", "d"):
                arr = arr / scale[p]
            elif s in ("qn", "qd", "qnd"):
                arr = arr / scale[p] ** 2
            stats[f"{s}{suffix}"] = arr
    for s in DAY_STATS:
        for suffix in ("b", "c"):
            if f"{s}{suffix}" in raw:
                stats[f"{s}{suffix}"] = raw[f"{s}{suffix}"]
    is_leaf = grouped.all(axis=1) if k else np.zeros(len(g), dtype=bool)
    is_total = (~grouped).all(axis=1)
    if k == 0:
        is_total = np.ones(len(g), dtype=bool)
    t = int(np.flatnonzero(is_total)[0]) if is_total.any() else None
    total = {key: float(arr[t]) if t is not None else 0.0 for key, arr in stats.items()}
    # segment 0 is the whole population (the global term); then every segment up to max_depth
    seg_sel = ~is_leaf | (grouped.sum(axis=1) <= depth)
    order = np.concatenate([np.flatnonzero(is_total), np.flatnonzero(seg_sel & ~is_total)])
    seg_sel = order
    return Cube(
        dims=list(dims),
        values=values,
        leaf_codes=codes[is_leaf],
        leaf={key: arr[is_leaf] for key, arr in stats.items()},
        seg_mask=grouped[seg_sel],
        seg_codes=codes[seg_sel],
        seg={key: arr[seg_sel] for key, arr in stats.items()},
        total=total,
        sql=text,
        params=dict(sql.params.values),
        elapsed_ms=elapsed,
        notes=notes,
        days=(
            (float(q.periods.baseline.days), float(q.periods.comparison.days))  # type: ignore[union-attr]
            if sql.by_day
            else None
        ),
    )


def in_order(table: pa.Table, k: int) -> pa.Table:
    """A grouping-sets result sorted by grouping set, then by the dimensions' values.

    A database returns groups in no particular order, and the order becomes the segments'
    numbering, which breaks ties between equal segments (which driver is listed first, which of
    two equal picks is taken). Sorted, the same rows give the same answer on every database and
    on every run.
    """
    order = sorted_codes(table, k)[0].astype(np.int64)
    # the indices wrap the array's buffer: ``pa.array(order)`` would import pandas (see _numpy)
    return table.take(pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(order)]))


def sorted_codes(table: pa.Table, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order :func:`in_order` puts ``table``'s rows in, and each row's dimension values as
    codes: ``(order, codes, sizes)``, where ``codes[:, j]`` (in the table's own row order) ranks
    the value of ``d{j}`` among that column's distinct values (ascending, a null after every
    value) and ``sizes[j]`` is how many ranks column j has.

    The sort runs on integer ranks: sorting the rows' values themselves (strings, mostly) costs
    several times as much on the hundreds of thousands of cells a screening query returns.
    """
    n = table.num_rows
    codes = np.zeros((n, k), dtype=np.int64)
    sizes = np.ones(k, dtype=np.int64)
    for j in range(k):
        # a null is one of the dictionary's values, and sorts after every other (Arrow's order)
        enc = pc.dictionary_encode(table.column(f"d{j}"), null_encoding="encode").combine_chunks()
        distinct = len(enc.dictionary)
        rank = np.empty(distinct, dtype=np.int64)
        rank[_numpy(pc.sort_indices(enc.dictionary))] = np.arange(distinct)
        codes[:, j] = rank[_numpy(enc.indices).astype(np.int64)]
        sizes[j] = max(distinct, 1)
    g = _numpy(table.column("__g")).astype(np.int64)
    order = np.lexsort([codes[:, j] for j in reversed(range(k))] + [g]) if n else np.arange(0)
    return order, codes, sizes


def _floats(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column as float64, a null as NaN. Whole-number decimals (a count's ``SUM(1)``)
    are cast by Arrow, not one Python ``Decimal`` at a time; a decimal with a fraction keeps
    Python's correctly rounded conversion."""
    if pa.types.is_decimal(col.type) and col.type.scale != 0:
        return np.array([np.nan if v is None else float(v) for v in col.to_pylist()], dtype=float)
    if not pa.types.is_floating(col.type):
        col = pc.cast(col, pa.float64())
    return _numpy(col).astype(np.float64, copy=False)


def _numpy(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow array of numbers as a NumPy array (a null as NaN in a float array), its values
    copied from Arrow's buffers directly: Arrow's own conversion first imports pandas (a fifth
    of a second per run) to check for types the engine never reads."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    floating = pa.types.is_floating(t)
    if not (floating or pa.types.is_integer(t)) or (arr.null_count and not floating):
        return arr.to_numpy(zero_copy_only=False)
    kind = "f" if floating else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    validity, data = arr.buffers()[:2]
    out = np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
    out = out.copy()
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        out[bits[arr.offset : arr.offset + len(arr)] == 0] = np.nan
    return out


def _constant_denominator(table: pa.Table) -> dict[str, np.ndarray]:
    """The statistics of a result as float arrays, completing those of a denominator of 1 per row
    (``d`` = ``qd`` = the row count, ``qnd`` = ``n``) when the query left them out."""
    out: dict[str, np.ndarray] = {}
    for s in (*STATS, *DAY_STATS):
        for suffix in ("b", "c"):
            name = f"{s}{suffix}"
            if name in table.column_names:
                out[name] = np.nan_to_num(_floats(table.column(name)), nan=0.0)
    for suffix in ("b", "c"):
        if f"d{suffix}" not in out:
            out[f"d{suffix}"] = out[f"rows{suffix}"]
            out[f"qd{suffix}"] = out[f"rows{suffix}"]
            out[f"qnd{suffix}"] = out[f"n{suffix}"]
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):  # HUGEINT and DECIMAL arrive from Arrow as Decimal
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def _scales(q: Question) -> tuple[float, float]:
    if q.metric.grain == "day" and q.periods.by_dates:
        return (float(q.periods.baseline.days), float(q.periods.comparison.days))  # type: ignore[union-attr]
    return (1.0, 1.0)


def daily_series(
    ctx: ToolContext,
    q: Question,
    cells: LeafDays | None = None,
    segment: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Per-day numerator/denominator for each period, zero-filled over the period's days, and
    the SQL computing them on the source. ``q``'s filters include ``segment``'s (given with
    ``cells``, the sums are read from the cells when they hold the segment's columns)."""
    sql = EngineSql(ctx, q, [])
    text = to_sql(sql.daily(), ctx.dialect)
    table: pa.Table
    if cells is not None and not sql.distinct and cells.covers(segment or {}):
        table = cells.sums(segment or {}, by_day=True)
    else:
        table = ctx.run_arrow(text, sql.params.values, max_rows=100_000)
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
    out = ctx.run(to_sql(sql.distinct_totals(), ctx.dialect), sql.params.values, max_rows=10)
    got = {int(p): float(n) for p, n in out.rows}
    scale = _scales(q)
    return {
        "baseline": got.get(0, 0.0) / scale[0],
        "comparison": got.get(1, 0.0) / scale[1],
    }


# --- screening: which columns carry the change, when all of them at once are too many leaves ---

LEAF_BUDGET = 200_000
"""Beyond this many leaves, the columns are screened first (:mod:`tasks.engine.screen`)."""
MAX_SEARCH_COLUMNS = 12
"""Most columns one search combines; more are screened first. To depth 3, twelve columns make
12 + 66 + 220 = 298 grouping sets, within :data:`GROUPING_SET_BUDGET`; every array of the cube
and the search grows with the columns times the segments."""
GROUPING_SET_BUDGET = 300
"""Most grouping sets (segments' column sets) in the cube's query. DuckDB builds a hash table
per grouping set, about 1 MB each even over 420 rows: 298 sets took 290 MB, 793 sets 1.5 GB and
11 s, 696 sets did not fit a 1 GB memory limit."""
MAX_SEGMENTS = 1_000_000
"""Most segments the cube may hold, estimated before its query runs (each costs about 1 kB in
the query's result and the search's arrays)."""


def dimension_sizes(ctx: ToolContext, q: Question, dims: list[str]) -> list[int]:
    """Distinct values per dimension (a null counts as one), from the stored profile."""
    sizes = []
    for d in dims:
        prof = ctx.schema.column_profile(ctx.schema.column(q.metric.table, d))
        if prof is None:
            sizes.append(MAX_DIMENSION_VALUES)
        else:
            sizes.append(max(int(prof.distinct_count), 1) + (1 if prof.null_count else 0))
    return sizes


def estimated_leaves(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """At most this many leaves: the smaller of the table's rows and the values' cross product."""
    prof = ctx.schema.profile(q.metric.table)
    rows = prof.row_count if prof is not None else None
    space = math.prod(float(x) for x in dimension_sizes(ctx, q, dims))  # inf past 1e308
    return int(min(space, rows if rows is not None else space, float(2**62)))


SEGMENT_BUDGET = 600_000


def auto_depth(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """The search depth when the question leaves it open: every column (up to
    :data:`MAX_SEGMENT_COLUMNS`) while the segments of all depths stay within
    :data:`SEGMENT_BUDGET`, and at least :data:`DEFAULT_DEPTH` (or every column, if fewer). A
    cause over four or five columns is then named as itself, not as its pieces."""
    k = len(dims)
    if k <= DEFAULT_DEPTH:
        return max(k, 1)
    sizes = dimension_sizes(ctx, q, dims)
    leaves = max(estimated_leaves(ctx, q, dims), 1)
    depth = DEFAULT_DEPTH
    for d in range(1, min(k, MAX_SEGMENT_COLUMNS) + 1):
        if estimated_segments(sizes, leaves, d) > SEGMENT_BUDGET:
            break
        if grouping_sets(k, d) > GROUPING_SET_BUDGET:
            break
        depth = max(depth, d)
    return depth


def grouping_sets(k: int, depth: int) -> int:
    """How many column sets of up to ``depth`` of ``k`` columns the cube's query groups by (the
    leaves and the whole population aside)."""
    return sum(math.comb(k, d) for d in range(1, min(depth, k) + 1))


def estimated_segments(sizes: list[int], leaves: int, depth: int) -> float:
    """At most this many segments of up to ``depth`` columns: per column set, the smaller of its
    values' cross product and the leaves. Call it with few columns (it visits every set)."""
    return sum(
        min(math.prod(float(sizes[j]) for j in c), float(leaves))
        for d in range(1, min(depth, len(sizes)) + 1)
        for c in combinations(range(len(sizes)), d)
    )


def search_depth(ctx: ToolContext, q: Question, dims: list[str]) -> tuple[int, list[str]]:
    """The depth the search goes to over ``dims`` (at most :data:`MAX_SEARCH_COLUMNS`), and a
    note when it is less than the question's ``max_depth`` (else :func:`auto_depth`): lowered
    until the cube's query groups by at most :data:`GROUPING_SET_BUDGET` column sets and holds
    at most :data:`MAX_SEGMENTS` segments (estimated), so its cost is known before it runs."""
    k = len(dims)
    wanted = q.max_depth or auto_depth(ctx, q, dims)
    sizes = dimension_sizes(ctx, q, dims)
    leaves = max(estimated_leaves(ctx, q, dims), 1)

    def too_big(d: int) -> bool:
        return (
            grouping_sets(k, d) > GROUPING_SET_BUDGET
            or estimated_segments(sizes, leaves, d) > MAX_SEGMENTS
        )

    depth = min(wanted, k) if k else wanted
    while depth > 1 and too_big(depth):
        depth -= 1
    if depth >= min(wanted, k):
        return wanted, []
    return depth, [
        f"segments combine at most {depth} columns, not {min(wanted, k)}: {k} columns to depth "
        f"{min(wanted, k)} would take {grouping_sets(k, wanted):,} column sets and up to "
        f"{estimated_segments(sizes, leaves, wanted):,.0f} segments, more than one search holds "
        f"({GROUPING_SET_BUDGET:,} and {MAX_SEGMENTS:,})"
    ]


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
    from sql_tools import Filter

    extra = [
        Filter(column=k, op="is_null") if v is None else Filter(column=k, op="=", value=v)
        for k, v in segment.items()
    ]
    metric = q.metric.model_copy(update={"filters": (*q.metric.filters, *extra)})
    sq = EngineSql(ctx, q.model_copy(update={"metric": metric}), [])
    daily = metric.grain == "day" and q.periods.by_dates
    keys = ["__p", *(["__day"] if daily and sq.distinct else [])]
    inner_aggs = []
    for role, agg in (("n", metric.numerator), ("d", metric.denominator)):
        if agg is not None and agg.fn == "count_distinct":
            value = exp.Count(this=exp.Distinct(expressions=[_col(f"__u{role}")]))
        else:
            value = exp.Sum(this=_col(f"__{role}"))
        inner_aggs.append(exp.alias_(value, role))
    inner = (
        exp.select(*[_col(k) for k in keys], *inner_aggs)
        .from_(exp.alias_(exp.paren(sq.base(with_dims=False, with_day=daily)), "b", table=True))
        .group_by(*[_col(k) for k in keys])
    )
    tree = (
        exp.select(
            _col("__p"),
            exp.alias_(exp.Sum(this=_col("n")), "n"),
            exp.alias_(exp.Sum(this=_col("d")), "d"),
        )
        .from_(exp.alias_(exp.paren(inner), "i", table=True))
        .group_by(_col("__p"))
        .order_by(_col("__p"))
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
    ctx: ToolContext,
    q: Question,
    sq: SegmentQuery,
    cells: LeafDays | None = None,
    segment: dict[str, Any] | None = None,
) -> SegmentQuery:
    """Fill in the segment's metric per period (None where undefined): ``sq`` run on the
    source, or, given the stored ``cells`` holding ``segment``'s columns (the segment ``sq``
    was built for), the same sums read from them."""
    if cells is not None and segment is not None and cells.covers(segment):
        got = cells.per_period(segment)
    else:
        out = ctx.run(sq.sql, sq.params, max_rows=10)
        got = {int(p): (float(n or 0.0), float(d or 0.0)) for p, n, d in out.rows}
    scale = _scales(q)
    for p, which in ((0, "baseline"), (1, "comparison")):
        n, d = got.get(p, (0.0, 0.0))
        if q.metric.kind == "ratio":
            value = n / d if d else None
        else:
            value = n / scale[p]
        setattr(sq, which, value)
    return sq

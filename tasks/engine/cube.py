"""The engine's data passes: leaves and every segment up to the search depth, in one query.

One scan of the base table (joined dimensions through verified many-to-one keys) aggregates rows
into *leaves* (one per combination of all searched dimensions) with per-period sums; a
``GROUPING SETS`` over those leaves then yields every segment of up to ``max_depth`` columns in the
same query. Distinct counts are deduplicated per leaf (and per day for a daily grain) before any
grouping set sees them, never counted inside the grouping sets. A second, small query gives the
per-day series used to judge significance.

SQL is built from sqlglot nodes with quoted identifiers and bound parameters; it goes through the
same guard and time limit as every tool query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from itertools import combinations
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sql_tools._context import Column, ToolContext
from sql_tools._errors import ToolInputError
from sql_tools._sql import Params, Source, ident, to_sql, typed_value, where_clause
from tasks.engine.spec import Aggregate, DateRange, Question

MAX_RESULT_ROWS = 6_000_000
MAX_DIMENSION_VALUES = 1000
# per-leaf, per-period statistics fetched for each aggregate role ("n" numerator, "d" denominator)
STATS = ("n", "d", "qn", "qd", "qnd", "rows")


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


class _Sql:
    """Builds the engine's queries for one question."""

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
        for label in (p.baseline, p.comparison):
            value: Any = label
            if col.kind == "number":
                try:
                    value = float(label) if "." in str(label) else int(label)
                except ValueError:
                    raise ToolInputError(
                        f"period label {label!r} is not a number like column {col.ref!r}",
                        code="invalid_period",
                    ) from None
            value = typed_value(self.ctx, col, value)
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
        """The per-row contribution of an additive aggregate (sum/count/avg parts)."""
        if agg.fn == "count" and col is None:
            return exp.Literal.number(1)
        e = self.src.expr(col)
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
    def distinct(self) -> bool:
        m = self.q.metric
        return m.numerator.fn == "count_distinct" or (
            m.denominator is not None and m.denominator.fn == "count_distinct"
        )

    def leaves(self) -> exp.Select:
        """One row per leaf with per-period statistics (``nb``, ``nc``, ``qnb``, ...)."""
        dcols = [f"d{j}" for j in range(len(self.dims))]
        daily = self.q.metric.grain == "day"
        if not self.distinct:
            b = self.base()
            aggs: list[exp.Expression] = []
            for p, suffix in ((0, "b"), (1, "c")):
                n, d = _col("__n"), _col("__d")
                aggs += [
                    exp.alias_(_filtered_sum(n, p), f"n{suffix}"),
                    exp.alias_(_filtered_sum(d, p), f"d{suffix}"),
                    exp.alias_(
                        _filtered_sum(exp.Mul(this=n, expression=n.copy()), p), f"qn{suffix}"
                    ),
                    exp.alias_(
                        _filtered_sum(exp.Mul(this=d, expression=d.copy()), p), f"qd{suffix}"
                    ),
                    exp.alias_(
                        _filtered_sum(exp.Mul(this=n.copy(), expression=d.copy()), p),
                        f"qnd{suffix}",
                    ),
                    exp.alias_(_filtered_sum(exp.Literal.number(1), p), f"rows{suffix}"),
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

    def cube(self, max_depth: int) -> str:
        """Leaves plus every segment of 1..max_depth columns plus the total, as grouping sets."""
        k = len(self.dims)
        dcols = [f"d{j}" for j in range(k)]
        sets: list[tuple[str, ...]] = [tuple(dcols)]
        for depth in range(min(max_depth, k), 0, -1):
            sets += [c for c in combinations(dcols, depth) if len(c) < k]
        sets.append(())
        grouping = exp.GroupingSets(
            expressions=[exp.Tuple(expressions=[_col(c) for c in s]) for s in sets]
        )
        stat_cols = [f"{s}{p}" for s in STATS for p in ("b", "c")]
        sel = [
            exp.alias_(exp.Anonymous(this="GROUPING", expressions=[_col(c) for c in dcols]), "__g")
            if k
            else exp.alias_(exp.Literal.number(0), "__g"),
            *[_col(c) for c in dcols],
            *[exp.alias_(exp.Sum(this=_col(s)), s) for s in stat_cols],
        ]
        tree = exp.select(*sel).from_(exp.alias_(exp.paren(self.leaves()), "leaves", table=True))
        tree.set("group", exp.Group(grouping_sets=[grouping]))
        return to_sql(tree)

    def daily(self) -> str:
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
        return to_sql(tree)


def build_cube(ctx: ToolContext, q: Question, dims: list[str]) -> Cube:
    """Run the leaves + grouping-sets query and return it as arrays."""
    sql = _Sql(ctx, q, dims)
    text = sql.cube(q.max_depth)
    import time

    start = time.perf_counter()
    table = ctx.run_arrow(text, sql.params.values, max_rows=MAX_RESULT_ROWS)
    elapsed = (time.perf_counter() - start) * 1000
    k = len(dims)
    g = table.column("__g").to_numpy().astype(np.int64)
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
        idx = enc.indices.to_numpy(zero_copy_only=False)
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
    for s in STATS:
        for p, suffix in ((0, "b"), (1, "c")):
            arr = table.column(f"{s}{suffix}").to_numpy(zero_copy_only=False)
            arr = np.nan_to_num(np.asarray(arr, dtype=np.float64), nan=0.0)
            if s in ("n", "d"):
                arr = arr / scale[p]
            elif s in ("qn", "qd", "qnd"):
                arr = arr / scale[p] ** 2
            stats[f"{s}{suffix}"] = arr
    is_leaf = grouped.all(axis=1) if k else np.zeros(len(g), dtype=bool)
    is_total = (~grouped).all(axis=1)
    if k == 0:
        is_total = np.ones(len(g), dtype=bool)
    t = int(np.flatnonzero(is_total)[0]) if is_total.any() else None
    total = {key: float(arr[t]) if t is not None else 0.0 for key, arr in stats.items()}
    # segment 0 is the whole population (the global term); then every segment up to max_depth
    seg_sel = ~is_leaf | (grouped.sum(axis=1) <= q.max_depth)
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
    )


def _plain(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    return v


def _scales(q: Question) -> tuple[float, float]:
    if q.metric.grain == "day" and q.periods.by_dates:
        return (float(q.periods.baseline.days), float(q.periods.comparison.days))  # type: ignore[union-attr]
    return (1.0, 1.0)


def daily_series(ctx: ToolContext, q: Question) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Per-day numerator/denominator for each period, zero-filled over the period's days."""
    sql = _Sql(ctx, q, [])
    text = sql.daily()
    table: pa.Table = ctx.run_arrow(text, sql.params.values, max_rows=100_000)
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
    sql = _Sql(ctx, q, [])
    daily = q.metric.grain == "day" and q.periods.by_dates
    b = sql.base(with_dims=False, with_day=daily)
    keys = ["__p", *(["__day"] if daily else [])]
    inner = (
        exp.select(
            *[_col(k) for k in keys],
            exp.alias_(exp.Count(this=exp.Distinct(expressions=[_col("__un")])), "n"),
        )
        .from_(exp.alias_(exp.paren(b), "b", table=True))
        .group_by(*[_col(k) for k in keys])
    )
    tree = (
        exp.select(_col("__p"), exp.alias_(exp.Sum(this=_col("n")), "n"))
        .from_(exp.alias_(exp.paren(inner), "i", table=True))
        .group_by(_col("__p"))
    )
    out = ctx.run(to_sql(tree), sql.params.values, max_rows=10)
    got = {int(p): float(n) for p, n in out.rows}
    scale = _scales(q)
    return {
        "baseline": got.get(0, 0.0) / scale[0],
        "comparison": got.get(1, 0.0) / scale[1],
    }

"""The engine's SQL builder: one question's queries on the source, as sqlglot trees.

:class:`EngineSql` holds what every engine query shares (the joined source, the filters, the
periods and the per-row values of the metric) and builds the leaves query, the cube's
``GROUPING SETS`` over the leaves, the cells stored once per question, screening's covers, the
daily series and a distinct count's totals from it, so that they compute the same numbers.
Identifiers are quoted and values bound as parameters; building reads the schema only. The
functions that run the trees render each in the context's dialect.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import combinations

from sqlglot import exp

from sql_tools import (
    Column,
    Params,
    Source,
    ToolContext,
    ToolInputError,
    finite_or_null,
    label_value,
    may_be_non_finite,
    where_clause,
)
from tasks.engine.spec import Aggregate, DateRange, Question

# per-leaf, per-period statistics fetched for each aggregate role ("n" numerator, "d" denominator)
STATS = ("n", "d", "qn", "qd", "qnd", "rows")
# per leaf and period, over its days (date periods): the sum of the squared daily numerator,
# denominator and their product, from which the day-to-day spread of a leaf is measured
DAY_STATS = ("vn", "vd", "vnd", "cells")


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _filtered_sum(value: exp.Expression, period: int) -> exp.Expression:
    cond = exp.EQ(this=exp.column("__p", quoted=True), expression=exp.Literal.number(period))
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
                n, d = exp.column("__n", quoted=True), exp.column("__d", quoted=True)
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
                exp.select(*[exp.column(c, quoted=True) for c in dcols], *aggs)
                .from_(exp.alias_(exp.paren(b), "b", table=True))
                .group_by(*[exp.column(c, quoted=True) for c in dcols])
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
                        exp.Count(
                            this=exp.Distinct(expressions=[exp.column(f"__u{role}", quoted=True)])
                        ),
                        f"__{role}",
                    )
                )
            else:
                inner_aggs.append(
                    exp.alias_(exp.Sum(this=exp.column(f"__{role}", quoted=True)), f"__{role}")
                )
        inner_aggs.append(exp.alias_(exp.Count(this=exp.Star()), "__rows"))
        dedup = (
            exp.select(*[exp.column(k, quoted=True) for k in keys], *inner_aggs)
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(*[exp.column(k, quoted=True) for k in keys])
        )
        aggs = []
        for p, suffix in ((0, "b"), (1, "c")):
            n, d = exp.column("__n", quoted=True), exp.column("__d", quoted=True)
            aggs += [
                exp.alias_(_filtered_sum(n, p), f"n{suffix}"),
                exp.alias_(_filtered_sum(d, p), f"d{suffix}"),
                # distinct counts behave like counts: their variance is the count itself
                exp.alias_(_filtered_sum(n.copy(), p), f"qn{suffix}"),
                exp.alias_(_filtered_sum(d.copy(), p), f"qd{suffix}"),
                exp.alias_(_filtered_sum(exp.Literal.number(0), p), f"qnd{suffix}"),
                exp.alias_(_filtered_sum(exp.column("__rows", quoted=True), p), f"rows{suffix}"),
            ]
        return (
            exp.select(*[exp.column(c, quoted=True) for c in dcols], *aggs)
            .from_(exp.alias_(exp.paren(dedup), "u", table=True))
            .group_by(*[exp.column(c, quoted=True) for c in dcols])
        )

    def _cell_sums(self) -> list[exp.Expression]:
        """A cell's sums of its rows' numerator and denominator, their squares and product, and
        its rows (``n``, ``qn``, ``rows``, ``d``, ``qd``, ``qnd``)."""
        n, d = exp.column("__n", quoted=True), exp.column("__d", quoted=True)
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
            exp.select(*[exp.column(k, quoted=True) for k in keys], *self._cell_sums())
            .from_(exp.alias_(exp.paren(self.base(with_day=with_day)), "b", table=True))
            .group_by(*[exp.column(k, quoted=True) for k in keys])
        )

    def _leaves_of_cells(self, dcols: list[str], cells: exp.Expression) -> exp.Select:
        """Each leaf's per-period statistics, summed from its stored cells."""
        aggs = [
            exp.alias_(_filtered_sum(exp.column(x, quoted=True), p), f"{x}{suffix}")
            for p, suffix in ((0, "b"), (1, "c"))
            for x in self.cell_sums
        ]
        return (
            exp.select(*[exp.column(c, quoted=True) for c in dcols], *aggs)
            .from_(cells.copy())
            .group_by(*[exp.column(c, quoted=True) for c in dcols])
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
            aggs += [
                exp.alias_(_filtered_sum(exp.column(x, quoted=True), p), f"{x}{suffix}")
                for x in sums
            ]
            # days with rows ("cells"): a leaf of one row per day is pre-aggregated data
            aggs.append(exp.alias_(_filtered_sum(exp.Literal.number(1), p), f"cells{suffix}"))
            aggs += [
                exp.alias_(
                    _filtered_sum(
                        exp.Mul(
                            this=exp.column(a, quoted=True), expression=exp.column(b, quoted=True)
                        ),
                        p,
                    ),
                    f"{v}{suffix}",
                )
                for v, a, b in squares
            ]
        return (
            exp.select(*[exp.column(c, quoted=True) for c in dcols], *aggs)
            .from_(day_cells)
            .group_by(*[exp.column(c, quoted=True) for c in dcols])
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
            n, d = exp.column("__n", quoted=True), exp.column("__d", quoted=True)
            roles = [("n", m.numerator, n)]
            if self.has_denominator:
                roles.append(("d", m.denominator, d))
            for role, agg, val in roles:
                if agg is not None and agg.fn == "count_distinct":
                    # a daily grain counts distinct (value, day) pairs: the per-day counts summed
                    key: exp.Expression = exp.column(f"__u{role}", quoted=True)
                    if daily:
                        key = _fn("hash", key, exp.column("__day", quoted=True))
                    approx = exp.Filter(
                        this=_fn("approx_count_distinct", key),
                        expression=exp.Where(
                            this=exp.EQ(
                                this=exp.column("__p", quoted=True),
                                expression=exp.Literal.number(p),
                            )
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
            expressions=[
                exp.Tuple(expressions=[exp.column(dcols[j], quoted=True) for j in c])
                for c in covers
            ]
        )
        sel = [
            exp.alias_(
                exp.Anonymous(
                    this="GROUPING", expressions=[exp.column(c, quoted=True) for c in dcols]
                ),
                "__g",
            ),
            *[exp.column(c, quoted=True) for c in dcols],
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
            expressions=[
                exp.Tuple(expressions=[exp.column(c, quoted=True) for c in s]) for s in sets
            ]
        )
        stat_cols = self.stat_names()
        sel = [
            exp.alias_(
                exp.Anonymous(
                    this="GROUPING", expressions=[exp.column(c, quoted=True) for c in dcols]
                ),
                "__g",
            )
            if k
            else exp.alias_(exp.Literal.number(0), "__g"),
            *[exp.column(c, quoted=True) for c in dcols],
            *[exp.alias_(exp.Sum(this=exp.column(s, quoted=True)), s) for s in stat_cols],
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
                    exp.alias_(
                        exp.Count(
                            this=exp.Distinct(expressions=[exp.column(f"__u{role}", quoted=True)])
                        ),
                        role,
                    )
                )
            else:
                aggs.append(exp.alias_(exp.Sum(this=exp.column(f"__{role}", quoted=True)), role))
        tree = (
            exp.select(exp.column("__day", quoted=True), exp.column("__p", quoted=True), *aggs)
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(exp.column("__day", quoted=True), exp.column("__p", quoted=True))
            .order_by(exp.column("__day", quoted=True))
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
                *[exp.column(k, quoted=True) for k in keys],
                exp.alias_(
                    exp.Count(this=exp.Distinct(expressions=[exp.column("__un", quoted=True)])), "n"
                ),
            )
            .from_(exp.alias_(exp.paren(b), "b", table=True))
            .group_by(*[exp.column(k, quoted=True) for k in keys])
        )
        return (
            exp.select(
                exp.column("__p", quoted=True),
                exp.alias_(exp.Sum(this=exp.column("n", quoted=True)), "n"),
            )
            .from_(exp.alias_(exp.paren(inner), "i", table=True))
            .group_by(exp.column("__p", quoted=True))
        )


def period_scales(q: Question) -> tuple[float, float]:
    """What each period's sums are divided by: its days for a daily grain, else one."""
    if q.metric.grain == "day" and q.periods.by_dates:
        return (float(q.periods.baseline.days), float(q.periods.comparison.days))  # type: ignore[union-attr]
    return (1.0, 1.0)

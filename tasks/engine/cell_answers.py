"""Tool calls answered from the stored cells: the hypotheses', the gate's and the charts'.

Once the engine has aggregated the question's rows to cells (:mod:`tasks.engine.leaf_days`),
most of what an investigation asks the SQL tools is a sum of cells: the offline planner's
``metric_compare_periods`` split of a root cause, Claude's comparisons of the question's
metric, the gate re-running a cited call, the report's per-day numbers through
``metric_aggregate``. Such a call is turned here into a statement on the cells, which the
context's reader (:class:`~sql_tools.Reader`) runs instead of a pass over the source, once the
analysis opens its cells to the tools; any other (a column or filter the cells do not hold,
other periods, a minimum, a distinct count) reads the source as before.

A call is answered from the cells when all of these hold:

- its table is the question's, and its filters are the question's plus conditions (``=``,
  ``!=``, ``in``, ``not_in``, ``is_null``, ``not_null``) on the cells' columns;
- its group-by columns are the cells' (and, for ``metric_aggregate``, the time column when it
  holds dates);
- its periods are the question's (``metric_compare_periods``), or its filters on the time
  column keep whole days within them (``metric_aggregate``);
- each measure is a count of rows, or a sum, count or average the cells carry (the question's
  numerator and denominator), of a column that holds no NaN or infinity in the question's rows
  (the cells leave those out; the source's sum is not a number).

The answer is the source query's: the same columns, values of the types the source gives (a
sum of integers is an integer where the source's is), the same order and cap, and the output
still shows the SQL on the source, which gives the same numbers
(``tests/engine/test_cell_answers.py``; on Postgres in ``tests/flows/test_postgres_source.py``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlglot import exp

from sql_tools import (
    CellQuery,
    Column,
    Filter,
    Measure,
    Params,
    Source,
    SourceQuery,
    SqlToolError,
    column_alias,
    filter_condition,
    label_value,
    may_be_non_finite,
    private,
    typed_value,
)
from sql_tools.aggregate import AggregateInput, AggregateQuery
from sql_tools.catalog import INTEGER_TYPES
from sql_tools.compare_periods import ComparePeriodsInput, ComparePeriodsQuery
from tasks.engine.engine_sql import EngineSql
from tasks.engine.spec import Question

EQUALITY = ("=", "!=", "in", "not_in", "is_null", "not_null")
"""Filter operators answered on a cell column: they mean the same in every database (an order
of text depends on the database's collation)."""


class _Source(Exception):
    """The call needs the source's rows."""


class CellAnswers:
    """Tool calls as statements on one question's stored cells (see the module's docstring):
    the cells of ``q`` over ``sql``'s dimensions, in ``table``. ``non_finite``: the metric's
    columns holding NaN or infinity in the question's rows (the engine's data-quality check),
    whose sums are read from the source."""

    def __init__(
        self, sql: EngineSql, q: Question, table: exp.Expression, non_finite: set[str]
    ) -> None:
        self.ctx, self.q, self.table = sql.ctx, q, table
        self.cell_sql, self.non_finite = sql, set(non_finite)
        self.dims = [c.ref for c in sql.dims]
        self.time = sql.period_col
        self.sums = self._sums()

    def _sums(self) -> dict[tuple[str, str | None], str]:
        """``(agg, column ref)`` -> the cell column holding its sum: the rows, and the
        question's numerator and denominator (an average is a sum and a count)."""
        m, src = self.q.metric, Source(self.ctx, self.q.metric.table)
        sums: dict[tuple[str, str | None], str] = {("count", None): "rows"}
        parts = [(m.numerator, "n")]
        if m.numerator.fn == "avg":
            parts = [(m.numerator.model_copy(update={"fn": "sum"}), "n")]
            parts.append((m.numerator.model_copy(update={"fn": "count"}), "d"))
        elif m.denominator is not None:
            parts.append((m.denominator, "d"))
        for agg, name in parts:
            if agg.fn in ("sum", "count"):
                ref = src.resolve(agg.column).ref if agg.column else None
                sums.setdefault((agg.fn, ref), name)
        return sums

    def query(self, inp: BaseModel, q: SourceQuery) -> CellQuery | None:
        """The statement on the cells giving the rows ``q`` gives on the source; None when
        they cannot say."""
        params = Params()
        try:
            if isinstance(q, ComparePeriodsQuery) and isinstance(inp, ComparePeriodsInput):
                tree = self._compare(inp, q, params)
            elif isinstance(q, AggregateQuery) and isinstance(inp, AggregateInput):
                tree = self._aggregate(inp, q, params)
            else:
                return None
        except (_Source, SqlToolError):
            return None
        return tree, params.values

    def holds_query(self, table: str, column: str, values: list[str]) -> CellQuery | None:
        """The statement on the cells listing those of ``values`` they hold in ``column`` of
        ``table`` (the source holds them too: the cells are its rows); None when the column is
        not one of the cells'."""
        if not values:
            return None
        try:
            ref = self._source(table).resolve(column).ref
        except (_Source, SqlToolError):
            return None
        if ref not in self.dims:
            return None
        c = exp.column(f"d{self.dims.index(ref)}", quoted=True)
        params = Params()
        listed = exp.In(this=c.copy(), expressions=[params.bind(v) for v in set(values)])
        return self._select([c], [listed]).distinct(), params.values

    # --- metric_compare_periods -----------------------------------------------------------------

    def _compare(
        self, inp: ComparePeriodsInput, q: ComparePeriodsQuery, params: Params
    ) -> exp.Expression:
        """``q``'s tree with its per-segment sums (and, for an average, its totals) read from
        the cells: what follows them (deltas, shares, order, cap) is the source query's."""
        src = self._source(inp.table)
        self._same_periods(src, inp)
        conds, times = self._filters(src, inp.filters, params)
        if times:
            raise _Source
        groups = self._groups(src, inp.group_by)
        sides = [
            exp.EQ(this=exp.column("__p", quoted=True), expression=exp.Literal.number(p))
            for p in (0, 1)
        ]
        values = [self._measure(src, inp.metric, side).as_(name) for side, name in
                  zip(sides, (private("baseline"), private("comparison")), strict=True)]  # fmt: skip
        rows = [
            _count(_total("rows", side)).as_(name)
            for side, name in zip(
                sides, map(private, ("baseline_rows", "comparison_rows")), strict=True
            )
        ]
        seg = self._select([*groups, *values, *rows], conds)
        if groups:
            seg = seg.group_by(*[g.this.copy() for g in groups])
        tree = q.tree.copy()
        for cte in tree.find(exp.With).expressions:  # type: ignore[union-attr]
            if cte.alias == private("seg"):
                cte.set("this", seg)
            elif (
                cte.alias == private("tot") and not q.additive
            ):  # an average's totals: from the rows
                tot = self._select([v.copy() for v in values], conds)
                cte.set("this", tot)
        return tree

    def _same_periods(self, src: Source, inp: ComparePeriodsInput) -> None:
        """Refuse periods other than the question's (the cells hold its periods' rows only)."""
        p = self.q.periods
        column = inp.time_column if p.by_dates else inp.period_column
        if column is None or src.resolve(column).ref != self.time.ref:
            raise _Source
        for which in ("baseline", "comparison"):
            mine, theirs = getattr(p, which), getattr(inp, which)
            if p.by_dates:
                got = (date.fromisoformat(theirs.start), date.fromisoformat(theirs.end))
                if got != (mine.start, mine.end):
                    raise _Source
            else:
                cond = self.cell_sql.conds[0 if which == "baseline" else 1]
                want = self.cell_sql.params.values[cond.expression.name]
                got = label_value(self.ctx, self.time, theirs.label, which)
                if type(got) is not type(want) or got != want:
                    raise _Source

    # --- metric_aggregate -----------------------------------------------------------------------

    def _aggregate(self, inp: AggregateInput, q: AggregateQuery, params: Params) -> exp.Expression:
        """``q`` on the cells: its groups and measures summed from them, ordered and capped as
        the source query is."""
        src = self._source(inp.table)
        if not self.q.periods.by_dates:
            raise _Source
        conds, times = self._filters(src, inp.filters, params)
        lo, hi = self._days(times)
        day = exp.column("__day", quoted=True)
        conds.append(exp.Between(this=day, low=params.bind(lo), high=params.bind(hi)))
        groups = self._groups(src, inp.group_by)
        measures = [
            self._measure(src, m, None).as_(private(f"m{j}")) for j, m in enumerate(inp.measures)
        ]
        window = exp.Window(this=exp.Count(this=exp.Star())).as_(private("matched"))
        tree = self._select([*groups, *measures, window], conds)
        if groups:
            tree = tree.group_by(*[g.this.copy() for g in groups])
        tree.set("order", q.tree.args["order"].copy())
        tree.set("limit", q.tree.args["limit"].copy())
        return tree

    def _days(self, times: list[Filter]) -> tuple[date, date]:
        """The days the time column's filters keep, when they are whole days within the
        question's periods."""
        lo, hi = date.min, date.max
        for f in times:
            for op, day in self._bounds(f):
                if op == "lo":
                    lo = max(lo, day)
                else:
                    hi = min(hi, day)
        p = self.q.periods
        spans = sorted([(p.baseline.start, p.baseline.end), (p.comparison.start, p.comparison.end)])
        day = lo
        for start, end in spans:  # every kept day lies in a period
            if start <= day <= end:
                day = end + timedelta(days=1)
        if lo <= hi and day <= hi:
            raise _Source
        return lo, hi

    def _bounds(self, f: Filter) -> list[tuple[str, date]]:
        """A time filter as bounds on the day (``lo``/``hi``, inclusive). On a timestamp only
        ``>=`` and ``<`` at midnight keep whole days."""
        values = f.value if isinstance(f.value, list) else [f.value]
        days = [_day(typed_value(self.ctx, self.time, v)) for v in values]
        one = timedelta(days=1)
        if self.time.kind == "timestamp":
            if f.op == ">=":
                return [("lo", days[0])]
            if f.op == "<":
                return [("hi", days[0] - one)]
            raise _Source
        bounds = {
            ">=": [("lo", days[0])],
            ">": [("lo", days[0] + one)],
            "<=": [("hi", days[0])],
            "<": [("hi", days[0] - one)],
            "=": [("lo", days[0]), ("hi", days[0])],
            "between": [("lo", days[0]), ("hi", days[-1])],
        }
        if f.op not in bounds:
            raise _Source
        return bounds[f.op]

    # --- shared ---------------------------------------------------------------------------------

    def _source(self, table: str) -> Source:
        src = Source(self.ctx, table)
        if src.table != self.q.metric.table:
            raise _Source
        return src

    def _select(self, projections: list[exp.Expression], conds: list[exp.Expression]) -> exp.Select:
        tree = exp.select(*projections).from_(self.table.copy())
        return tree.where(exp.and_(*conds)) if conds else tree

    def _filters(
        self, src: Source, filters: list[Filter], params: Params
    ) -> tuple[list[exp.Expression], list[Filter]]:
        """The call's filters past the question's, as conditions on the cells' columns; and
        those on the time column. Refused: a question's filter missing, another column."""
        wanted = Counter(_key(src, f) for f in self.q.metric.filters)
        conds: list[exp.Expression] = []
        times: list[Filter] = []
        on_cells = _OnCells(src, self.dims)
        for f in filters:
            key = _key(src, f)
            if wanted[key] > 0:
                wanted[key] -= 1
                continue
            ref = src.resolve(f.column).ref
            if ref == self.time.ref and self.q.periods.by_dates:
                times.append(f)
            elif ref in self.dims and f.op in EQUALITY:
                cond = filter_condition(self.ctx, on_cells, f, params)  # type: ignore[arg-type]
                conds.append(cond)
            else:
                raise _Source
        if +wanted:
            raise _Source
        return conds, times

    def _groups(self, src: Source, group_by: list[str]) -> list[exp.Alias]:
        out = []
        for i, g in enumerate(group_by):
            col = src.resolve(g)
            if col.ref in self.dims:
                out.append(
                    exp.column(f"d{self.dims.index(col.ref)}", quoted=True).as_(column_alias(i))
                )
            elif col.ref == self.time.ref and col.kind == "date" and self.q.periods.by_dates:
                out.append(exp.column("__day", quoted=True).as_(column_alias(i)))
            else:
                raise _Source
        return out

    def _measure(self, src: Source, m: Measure, side: exp.Expression | None) -> exp.Expression:
        """``m`` summed from the cells (over ``side``'s period when given), of the type the
        source's aggregate has."""
        col = src.resolve(m.column) if m.column is not None else None
        ref = col.ref if col is not None else None
        if col is not None and may_be_non_finite(col):
            # the cells leave NaN and infinity out; a Postgres REAL sums in single precision
            if ref in self.non_finite or (self.ctx.dialect == "postgres" and col.type == "FLOAT"):
                raise _Source
        if m.agg == "count" and ("count", ref) in self.sums:
            return _count(_total(self.sums["count", ref], side))
        if m.agg == "sum" and ("sum", ref) in self.sums:
            total = _total(self.sums["sum", ref], side)
            return exp.Cast(this=total, to=exp.DataType.build(self._sum_type(col)))
        if m.agg == "avg" and ("sum", ref) in self.sums and ("count", ref) in self.sums:
            n, d = _total(self.sums["sum", ref], side), _total(self.sums["count", ref], side)
            return exp.Div(this=n, expression=exp.Nullif(this=d, expression=exp.Literal.number(0)))
        raise _Source

    def _sum_type(self, col: Column | None) -> str:
        """The type of the source's sum of ``col``: an integer for integers (Postgres's NUMERIC
        sum of a BIGINT comes back as one too), a DECIMAL of the column's scale for a DuckDB
        DECIMAL, else floating point. A Postgres NUMERIC's scale is not known: refused."""
        kind = col.type.upper() if col is not None else "DOUBLE"
        if kind in INTEGER_TYPES:
            return "HUGEINT"
        if kind.startswith("DECIMAL"):
            scale = re.fullmatch(r"DECIMAL\(\d+, ?(\d+)\)", kind)
            if scale is None:
                raise _Source
            return f"DECIMAL(38, {scale.group(1)})"
        return "DOUBLE"


class _OnCells:
    """A :class:`~sql_tools._sql.Source` whose columns are the cells': a filter on one of the
    cells' columns becomes the same condition on the stored cells."""

    def __init__(self, src: Source, dims: list[str]) -> None:
        self.src, self.dims = src, dims

    def resolve(self, ref: object, field_name: str = "column") -> Column:
        return self.src.resolve(ref, field_name)

    def expr(self, col: Column) -> exp.Column:
        return exp.column(f"d{self.dims.index(col.ref)}", quoted=True)


def _key(src: Source, f: Filter) -> tuple[str, str, str]:
    """A filter's identity: its resolved column, operator and value."""
    return src.resolve(f.column).ref, f.op, json.dumps(f.value, sort_keys=True, default=str)


def _total(name: str, side: exp.Expression | None) -> exp.Expression:
    """The sum of cell column ``name`` (in one period when ``side`` is given)."""
    total: exp.Expression = exp.Sum(this=exp.column(name, quoted=True))
    if side is not None:
        total = exp.Filter(this=total, expression=exp.Where(this=side.copy()))
    return total


def _count(total: exp.Expression) -> exp.Expression:
    """A count summed from cells: 0, not NULL, where there are none, as a BIGINT."""
    zero = exp.Coalesce(this=total, expressions=[exp.Literal.number(0)])
    return exp.Cast(this=zero, to=exp.DataType.build("BIGINT"))


def _day(value: Any) -> date:
    """A typed time value as a day; a time of day other than midnight is not a day's bound."""
    if isinstance(value, datetime):
        if value.time() != datetime.min.time() or value.tzinfo is not None:
            raise _Source
        return value.date()
    return value

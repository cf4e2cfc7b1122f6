"""The source read once: the question's rows aggregated to leaves per day, kept in a private DuckDB.

Once the search's columns are chosen, one query on the user's tables
(:meth:`~tasks.engine.engine_sql.EngineSql.cells`) sums the rows of each leaf (a combination of the
columns' values), period and day: the numerator and denominator, their squares and product, and
the rows. The answer, at most a few hundred thousand cells where the table has millions of rows,
is stored in a temporary table of this process's DuckDB (the file's own database, or an
in-memory one for data in Postgres), and every later number that is a sum of cells
is read there instead of from the source: the cube of segments, the per-day series the change is
tested on, a root cause's or a finding's value in each period, and the per-day series of a
segment that clean days are measured on. On a warehouse, each of those would be one more scan
billed; on DuckDB or Postgres, one more pass over millions of rows.

The same statement counts what the data-quality check of rows loaded twice counts (rows grouped
by a hash of the whole row, per day; :func:`cells_with_copies`) and holds its answer on the
connection, so that check reads nothing; after screening, which keeps fewer columns than the
missing-days check reads, it also counts that check's rows per day and value.

What the numbers claim stays re-runnable: each still carries the SQL that computes it on the
source tables (the cube's, a segment's, a day series'), and that SQL gives the same numbers
(``tests/engine/test_leaf_days.py``). Distinct counts are not sums of cells (a user seen in two
leaves, or on two days, is one user): for them the engine reads the source as before, and
:func:`leaf_days` returns None.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sql_tools import (
    CellQuery,
    Column,
    Params,
    QueryOutput,
    ResourceLimit,
    ToolContext,
    ident,
    to_sql,
    typed_value,
)
from sql_tools.catalog import jsonable
from tasks.engine.cell_answers import CellAnswers
from tasks.engine.cube import MAX_DIMENSION_VALUES, estimated_leaves
from tasks.engine.engine_sql import EngineSql
from tasks.engine.quality._scope import _count_if
from tasks.engine.quality.days import value_set
from tasks.engine.quality.duplicates import (
    DUPLICATE_FOLDS,
    Ahead,
    held_ahead,
    multiple_of,
    row_key,
)
from tasks.engine.segment_numbers import segment_question
from tasks.engine.spec import Question

TABLE = "__drilldown_cells"
DAY_VALUES = "__drilldown_day_values"
MAX_CELLS = 3_000_000
"""Most cells stored (estimated before the query runs; about 120 bytes each): the leaves of a
search (at most :data:`~tasks.engine.cube.LEAF_BUDGET`) over two weeks. A question of more,
two months of many leaves, reads the source for each number instead."""


@dataclass
class DayValues:
    """The missing-days check's columns, and the rows per day and value the one pass counted of
    those the cells leave out (``counted``, in the order of the pass's ``__s0``, ``__s1`` ...)."""

    columns: Sequence[Column]
    counted: Sequence[Column]
    table: pa.Table | None


class LeafDays:
    """The stored cells of one question over ``dims`` (see the module's docstring), in a
    temporary table of a connection of their own. Close it when done (:meth:`close`)."""

    def __init__(
        self,
        ctx: ToolContext,
        q: Question,
        dims: list[str],
        table: pa.Table,
        days: DayValues | None = None,
    ) -> None:
        self.ctx, self.q, self.dims = ctx, q, list(dims)
        self.sql = EngineSql(ctx, q, dims)
        self.day_columns = [c.ref for c in days.columns] if days is not None else None
        """The columns whose rows per day and value are stored (:attr:`day_values`), or None."""
        self.con: duckdb.DuckDBPyConnection | None = _connection(ctx)
        try:
            self.con.register("__arrow_cells", table)
            self.con.execute(f'CREATE TEMP TABLE "{TABLE}" AS SELECT * FROM __arrow_cells')
            self.con.unregister("__arrow_cells")
            if days is not None:
                self._store_day_values(days)
        except BaseException:
            self.close()
            raise
        self.rows = table.num_rows
        self._lock = threading.Lock()  # the engine and its data-quality checks share it
        self._tools: CellAnswers | None = None

    @property
    def closed(self) -> bool:
        """Whether the cells were let go (:meth:`close`)."""
        return self.con is None

    def asks(self, q: Question, segment: dict[str, Any]) -> bool:
        """Whether ``q`` is these cells' question with ``segment``'s values as filters (the
        question asked of one of its segments), and the cells hold the segment's columns."""
        if q.periods != self.q.periods or not self.covers(segment):
            return False
        return q.metric == segment_question(self.q, segment).metric

    @property
    def table(self) -> exp.Expression:
        """The stored cells, as a FROM clause."""
        return exp.Table(this=ident(TABLE), db=ident("main"), catalog=ident("temp"))

    @property
    def day_values(self) -> exp.Expression:
        """The stored rows per day, overall and per value of :attr:`day_columns`, as the
        missing-days query groups them on the source (``day``, ``d0`` ..., ``set``, ``rows``),
        as a FROM clause."""
        return exp.Table(this=ident(DAY_VALUES), db=ident("main"), catalog=ident("temp"))

    def _store_day_values(self, days: DayValues) -> None:
        """Store the rows per day and value of every column checked, as the missing-days query
        groups them: the one pass's counts for the columns the cells leave out, the cells'
        sums for those they hold, and each day's rows (the sum of its cells)."""
        assert self.con is not None and days.table is not None
        k, m = len(days.columns), len(days.counted)
        counted = {c.ref: j for j, c in enumerate(days.counted)}

        def branch(i: int, value: str, source: str, rows: str, tail: str) -> str:
            cols = [value if j == i else "NULL" for j in range(k)]
            named = ", ".join(f"{c} AS d{j}" for j, c in enumerate(cols))
            gid = value_set(k, i)
            return f'SELECT __day AS "day", {named}, {gid} AS "set", {rows} AS "rows" ' + (
                f"FROM {source}{tail}"
            )

        parts = []
        for i, c in enumerate(days.columns):
            if c.ref in counted:
                j = counted[c.ref]
                where = f" WHERE __set = {value_set(m, j)}"
                parts.append(branch(i, f"__s{j}", "__arrow_day_values", '"rows"', where))
            else:
                d = f"d{self.dims.index(c.ref)}"
                parts.append(branch(i, d, f'"{TABLE}"', 'sum("rows")', f" GROUP BY __day, {d}"))
        nulls = ", ".join(f"NULL AS d{j}" for j in range(k))
        total = f'SELECT __day, {nulls}, {2**k - 1}, sum("rows") FROM "{TABLE}" GROUP BY __day'
        parts.append(total)
        self.con.register("__arrow_day_values", days.table)
        self.con.execute(f'CREATE TEMP TABLE "{DAY_VALUES}" AS ' + " UNION ALL ".join(parts))
        self.con.unregister("__arrow_day_values")

    def run(self, tree: exp.Expression, params: Mapping[str, Any] | None = None) -> pa.Table:
        """Run one of the engine's trees on the stored cells."""
        text, used = self.text(tree, params)
        with self._lock:
            assert self.con is not None, "the cells are closed"
            return self.con.sql(text, params=used).to_arrow_table()

    def fetch(
        self, tree: exp.Expression, params: Mapping[str, Any], max_rows: int
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and at most ``max_rows`` rows of a tree run on the stored cells."""
        text, used = self.text(tree, params)
        with self._lock:
            assert self.con is not None, "the cells are closed"
            cur = self.con.execute(text, used)
            columns = [d[0] for d in cur.description or []]
            return columns, cur.fetchmany(max_rows)

    @staticmethod
    def text(
        tree: exp.Expression, params: Mapping[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The tree's DuckDB text and the parameters it uses (a tree built beside a source query
        shares its parameters, not all of which it reads)."""
        text = to_sql(tree, "duckdb")
        named = set(re.findall(r"\$(p[0-9]+)", text))
        return text, {k: v for k, v in (params or {}).items() if k in named}

    def cube_query(self, q: Question, dims: list[str], max_depth: int) -> CellQuery | None:
        """The cube's grouping sets of ``q`` over ``dims`` (:meth:`EngineSql.cube`), on the
        cells when they are ``q``'s over ``dims``."""
        if not self.asks(q, {}) or dims != self.dims:
            return None
        return self.sql.cube(max_depth, self.table), {}

    def covers(self, segment: dict[str, Any]) -> bool:
        """Whether the cells can answer ``segment``: every column of it is one of theirs."""
        return all(k in self.dims for k in segment)

    def sums_query(self, q: Question, segment: dict[str, Any], *, by_day: bool) -> CellQuery | None:
        """``__p`` (and ``__day`` when ``by_day``), ``n``, ``d``: ``segment``'s numerator and
        denominator per period (per day), summed over its cells, when ``q`` is the question
        asked of ``segment`` (:meth:`asks`). A value that does not fit its column is refused
        (``ToolInputError``) as the source query refuses it."""
        if not self.asks(q, segment):
            return None
        params = Params()
        conds: list[exp.Expression] = []
        for k, v in segment.items():
            c = exp.column(f"d{self.dims.index(k)}", quoted=True)
            if v is None:
                conds.append(exp.Is(this=c, expression=exp.Null()))
            else:
                col = self.ctx.schema.column(self.q.metric.table, k)
                conds.append(exp.EQ(this=c, expression=params.bind(typed_value(self.ctx, col, v))))
        keys = ["__p", *(["__day"] if by_day else [])]
        d = "d" if "d" in self.sql.cell_sums else "rows"
        tree = (
            exp.select(
                *[exp.column(k, quoted=True) for k in keys],
                exp.alias_(exp.Sum(this=exp.column("n", quoted=True)), "n"),
                exp.alias_(exp.Sum(this=exp.column(d, quoted=True)), "d"),
            )
            .from_(self.table)
            .group_by(*[exp.column(k, quoted=True) for k in keys])
            .order_by(*[exp.column(k, quoted=True) for k in reversed(keys)])
        )
        if conds:
            tree = tree.where(exp.and_(*conds))
        return tree, params.values

    def answer_tools(self, non_finite: set[str]) -> None:
        """From now on, answer the tools' calls the cells can (:mod:`tasks.engine.cell_answers`):
        ``non_finite``, the metric's columns holding NaN or infinity in the question's rows,
        are read from the source."""
        self._tools = CellAnswers(self.sql, self.q, self.table, non_finite)

    def answer_tool(self, inp: Any, q: Any) -> CellQuery | None:
        """A tool's query as a statement on the cells, once they answer the tools."""
        return self._tools.query(inp, q) if self._tools is not None else None

    def holds(self, table: str, column: str, values: list[str]) -> set[str]:
        """Those of ``values`` the cells hold in ``column`` of ``table``, once they answer the
        tools (empty when they cannot say)."""
        query = self._tools.holds_query(table, column, values) if self._tools else None
        if query is None or self.closed:
            return set()
        _, rows = self.fetch(*query, len(values))
        return {r[0] for r in rows}

    def close(self) -> None:
        """Close the cells' connection (its temporary table goes with it)."""
        con, self.con = self.con, None
        if con is not None:
            con.close()


def _connection(ctx: ToolContext) -> duckdb.DuckDBPyConnection:
    """Where the cells are kept. On a DuckDB file: a new connection to the context's own
    database (read-only and sandboxed; its temporary tables are its own), not a second database
    in the process, whose reserved address space a capped process may not have. Data in
    Postgres: a private in-memory DuckDB, with nothing written to disk."""
    con = getattr(ctx, "con", None)
    if isinstance(con, duckdb.DuckDBPyConnection):
        return con.cursor()
    mem = duckdb.connect(
        ":memory:",
        config={
            "threads": ctx.limits.threads,
            "memory_limit": ctx.limits.memory_limit,
            "python_enable_replacements": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        },
    )
    mem.execute("SET temp_directory = ''")
    mem.execute("SET enable_external_access = false")
    mem.execute("SET lock_configuration = true")
    return mem


def leaf_days(
    ctx: ToolContext, q: Question, dims: list[str], checked: Sequence[str] | None = None
) -> LeafDays | None:
    """:func:`aggregated`, kept by the context's reader: from now on it answers sums of the
    cells from them (None: every number reads the source)."""
    cells = aggregated(ctx, q, dims, checked)
    ctx.reader.keep(cells)
    return cells


def aggregated(
    ctx: ToolContext, q: Question, dims: list[str], checked: Sequence[str] | None = None
) -> LeafDays | None:
    """Read the source once: ``q``'s rows aggregated to cells over ``dims`` (per day for date
    periods), stored locally. None, and each number read from the source as before, for a
    distinct count (it is not a sum of cells) and for more cells than :data:`MAX_CELLS`.

    ``checked``, the data-quality checks' columns: the same pass also counts the rows loaded
    twice (:func:`cells_with_copies`) when the question's check has counted the rows that check
    samples by, and holds its answer on the connection; and, when ``dims`` leave out some of
    the missing-days check's columns, their rows per day and value (stored beside the cells)."""
    sql = EngineSql(ctx, q, dims)
    if sql.distinct or estimated_cells(ctx, q, dims) > MAX_CELLS:
        return None
    with_day = q.periods.by_dates
    copies = held_ahead(ctx, q, checked) if checked is not None else None
    if copies is None:
        tree, days, missing = sql.cells(with_day=with_day), (), []
    else:
        days = _days_not_in(copies, dims) if with_day else ()
        missing = [c for c in days if c.ref not in dims]
        tree = cells_with_copies(sql, copies, with_day, missing)
    text = to_sql(tree, ctx.dialect)
    t0 = time.perf_counter()
    most = MAX_CELLS + _units(q) * (1 + len(days) * MAX_DIMENSION_VALUES)
    try:
        table = ctx.reader.read_arrow(text, sql.params.values, max_rows=most)
    except ResourceLimit:  # a profile's estimate of distinct values fell short
        return None
    values = None
    if copies is not None:
        secs = time.perf_counter() - t0
        table, values = _hold_copies(ctx, table, copies, with_day, len(missing), secs)
    if table.num_rows > MAX_CELLS:
        return None
    return LeafDays(ctx, q, dims, table, DayValues(days, missing, values) if days else None)


def _days_not_in(copies: Ahead, dims: list[str]) -> tuple[Column, ...]:
    """The missing-days check's columns, when the cells do not hold them all (after screening):
    their rows per day and value are then stored beside the cells, the one pass counting those
    of the columns the cells leave out. Empty when the cells hold them all."""
    checked = copies.scope.segment_dimensions
    return () if all(c.ref in dims for c in checked) else checked


def _units(q: Question) -> int:
    """The periods' days (the two periods of labels): the duplicates check's units, and the
    cells per leaf at most."""
    p = q.periods
    return p.baseline.days + p.comparison.days if p.by_dates else 2  # type: ignore[union-attr]


_COPY_COUNTS = ("__rows", "__distinct", *(f"__x{f}" for f in DUPLICATE_FOLDS))


def cells_with_copies(
    sql: EngineSql, copies: Ahead, with_day: bool, days: Sequence[Column] = ()
) -> exp.Select:
    """The cells and the duplicates check's numbers from one pass over the rows.

    The rows are grouped several ways in one statement (``GROUPING SETS``): by the cells' keys,
    and by period (and day) and a hash of the whole row of the question's table, sampled as the
    check samples it (:func:`~tasks.engine.quality.duplicates.row_key`); and, for each of the
    ``days`` columns, by period, day and value (the missing-days check's rows per value, when the
    cells do not hold those columns). An outer grouping passes each cell and each day's value
    through unchanged (``min`` of its one row) and sums the hashed groups per unit into the
    check's numbers: rows, distinct rows and the distinct rows seen a multiple of each fold.
    ``__cell`` is 0 on those units; ``__set`` (``GROUPING`` of the ``days`` columns, numbered as
    the missing-days query numbers its sets) tells the cells (every bit set) from a value's."""
    row_hash, sample = row_key(copies.q, copies.k)
    h = row_hash if sample is None else exp.Case(ifs=[exp.If(this=sample, true=row_hash)])
    values = [sql.src.expr(c).as_(f"__s{i}") for i, c in enumerate(days)]  # joins before base
    vcols = [f"__s{i}" for i in range(len(days))]
    keys = [*[f"d{j}" for j in range(len(sql.dims))], "__p", *(["__day"] if with_day else [])]
    units = ["__p", *(["__day"] if with_day else [])]
    sets = exp.GroupingSets(
        expressions=[
            exp.Tuple(expressions=[exp.column(k, quoted=True) for k in keys]),
            exp.Tuple(expressions=[exp.column(k, quoted=True) for k in [*units, "__h"]]),
            *[
                exp.Tuple(expressions=[exp.column(k, quoted=True) for k in [*units, v]])
                for v in vcols
            ],
        ]
    )
    grouping = [
        exp.alias_(
            exp.Anonymous(this="GROUPING", expressions=[exp.column("__h", quoted=True)]), "__cell"
        )
    ]
    if vcols:
        by_value = exp.Anonymous(
            this="GROUPING", expressions=[exp.column(v, quoted=True) for v in vcols]
        )
        grouping.append(exp.alias_(by_value, "__set"))
    inner: exp.Select = exp.select(
        *[exp.column(k, quoted=True) for k in [*keys, *vcols]],
        *sql._cell_sums(),
        *grouping,
        exp.column("__h", quoted=True),
    )
    rows = sql.base(with_day=with_day).select(h.as_("__h"), *values)
    inner = inner.from_(exp.alias_(exp.paren(rows), "b", table=True))
    inner.set("group", exp.Group(grouping_sets=[sets]))
    hashed = exp.Not(this=exp.Is(this=exp.column("__h", quoted=True), expression=exp.Null()))
    flags = ["__cell", *(["__set"] if vcols else [])]
    return (
        exp.select(
            *[exp.column(k, quoted=True) for k in [*keys, *vcols]],
            *[exp.alias_(exp.Min(this=exp.column(x, quoted=True)), x) for x in sql.cell_sums],
            *[exp.column(k, quoted=True) for k in flags],
            exp.alias_(
                exp.Filter(
                    this=exp.Sum(this=exp.column("rows", quoted=True)),
                    expression=exp.Where(this=hashed),
                ),
                "__rows",
            ),
            exp.alias_(_count_if(hashed.copy()), "__distinct"),
            *[
                multiple_of(exp.column("rows", quoted=True), f, hashed).as_(f"__x{f}")
                for f in DUPLICATE_FOLDS
            ],
        )
        .from_(exp.alias_(exp.paren(inner), "g", table=True))
        .group_by(*[exp.column(k, quoted=True) for k in [*keys, *vcols, *flags]])
    )


def _hold_copies(
    ctx: ToolContext, table: pa.Table, copies: Ahead, with_day: bool, n_values: int, secs: float
) -> tuple[pa.Table, pa.Table | None]:
    """Hold the duplicates check's answer (its own SQL and parameters, its rows: per unit in the
    unit's order) on the connection. Returns the cells alone, as the cells' query gives them,
    and the rows per day and value of the missing-days check's columns (None: not counted)."""
    tree, dq = copies.tree, copies.q
    is_unit = pc.equal(table["__cell"], 0)
    units = table.filter(is_unit).to_pylist()
    rows = sorted(
        (
            (u["__day"] if with_day else u["__p"] == 0, *(int(u[c] or 0) for c in _COPY_COUNTS))
            for u in units
            if u["__distinct"]  # a unit none of whose rows is in the sample: the check has none
        ),
        key=lambda r: (r[0] is None, r[0]),
    )
    columns = ["unit", "rows", "distinct_rows", *(f"x{f}" for f in DUPLICATE_FOLDS)]
    params = {k: jsonable(v) for k, v in dq.params.values.items()}
    ctx.reader.hold(QueryOutput(columns, rows, dq.sql(tree), params, secs * 1000))
    table = table.filter(pc.invert(is_unit))
    vcols = [f"__s{j}" for j in range(n_values)]
    if not vcols:
        return table.drop_columns(["__cell", *_COPY_COUNTS]), None
    is_cell = pc.equal(table["__set"], 2 ** len(vcols) - 1)
    values = table.filter(pc.invert(is_cell)).select(["__day", *vcols, "__set", "rows"])
    cells = table.filter(is_cell).drop_columns(["__cell", "__set", *vcols, *_COPY_COUNTS])
    return cells, values


def estimated_cells(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """At most this many cells: the leaves (:func:`~tasks.engine.cube.estimated_leaves`) times
    the periods' days (two periods of labels), and never more than the table's rows."""
    cells = estimated_leaves(ctx, q, dims) * _units(q)
    prof = ctx.schema.profile(q.metric.table)
    return min(cells, prof.row_count) if prof is not None else cells

"""The source read once: the question's rows aggregated to leaves per day, kept in a private DuckDB.

Once the search's columns are chosen, one query on the user's tables
(:meth:`~tasks.engine.cube.EngineSql.cells`) sums the rows of each leaf (a combination of the
columns' values), period and day: the numerator and denominator, their squares and product, and
the rows. The answer, at most a few hundred thousand cells where the table has millions of rows,
is stored in a temporary table of this process's DuckDB (the file's own database, or an
in-memory one for data in Postgres), and every later number that is a sum of cells
is read there instead of from the source: the cube of segments, the per-day series the change is
tested on, a root cause's or a finding's value in each period, and the per-day series of a
segment that clean days are measured on. On a warehouse, each of those would be one more scan
billed; on DuckDB or Postgres, one more pass over millions of rows.

What the numbers claim stays re-runnable: each still carries the SQL that computes it on the
source tables (the cube's, a segment's, a day series'), and that SQL gives the same numbers
(``tests/engine/test_leaf_days.py``). Distinct counts are not sums of cells (a user seen in two
leaves, or on two days, is one user): for them the engine reads the source as before, and
:func:`leaf_days` returns None.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from sql_tools._context import ToolContext
from sql_tools._errors import ResourceLimit
from sql_tools._sql import Params, ident, to_sql, typed_value
from tasks.engine.cube import EngineSql, _col, estimated_leaves
from tasks.engine.spec import Question

TABLE = "__drilldown_cells"
MAX_CELLS = 3_000_000
"""Most cells stored (estimated before the query runs; about 120 bytes each): the leaves of a
search (at most :data:`~tasks.engine.cube.LEAF_BUDGET`) over two weeks. A question of more,
two months of many leaves, reads the source for each number instead."""


class LeafDays:
    """The stored cells of one question over ``dims`` (see the module's docstring), in a
    temporary table of a connection of their own. Close it when done (:meth:`close`)."""

    def __init__(self, ctx: ToolContext, q: Question, dims: list[str], table: pa.Table) -> None:
        self.ctx, self.q, self.dims = ctx, q, list(dims)
        self.sql = EngineSql(ctx, q, dims)
        self.con: duckdb.DuckDBPyConnection | None = _connection(ctx)
        try:
            self.con.register("__arrow_cells", table)
            self.con.execute(f'CREATE TEMP TABLE "{TABLE}" AS SELECT * FROM __arrow_cells')
            self.con.unregister("__arrow_cells")
        except BaseException:
            self.close()
            raise
        self.rows = table.num_rows
        self._lock = threading.Lock()  # the engine and its data-quality checks share it

    @property
    def table(self) -> exp.Expression:
        """The stored cells, as a FROM clause."""
        return exp.Table(this=ident(TABLE), db=ident("main"), catalog=ident("temp"))

    def run(self, tree: exp.Expression, params: dict[str, Any] | None = None) -> pa.Table:
        """Run one of the engine's trees on the stored cells."""
        text, used = self._sql(tree, params)
        with self._lock:
            assert self.con is not None, "the cells are closed"
            return self.con.sql(text, params=used).to_arrow_table()

    def fetch(
        self, tree: exp.Expression, params: dict[str, Any], max_rows: int
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and at most ``max_rows`` rows of a tree run on the stored cells."""
        text, used = self._sql(tree, params)
        with self._lock:
            assert self.con is not None, "the cells are closed"
            cur = self.con.execute(text, used)
            columns = [d[0] for d in cur.description or []]
            return columns, cur.fetchmany(max_rows)

    @staticmethod
    def _sql(tree: exp.Expression, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """The tree's DuckDB text and the parameters it uses (a tree built beside a source query
        shares its parameters, not all of which it reads)."""
        text = to_sql(tree, "duckdb")
        named = set(re.findall(r"\$(p[0-9]+)", text))
        return text, {k: v for k, v in (params or {}).items() if k in named}

    def cube(self, max_depth: int) -> pa.Table:
        """The cube's grouping sets, from the cells (see :meth:`EngineSql.cube`)."""
        return self.run(self.sql.cube(max_depth, self.table))

    def covers(self, segment: dict[str, Any]) -> bool:
        """Whether the cells can answer ``segment``: every column of it is one of theirs."""
        return all(k in self.dims for k in segment)

    def sums(self, segment: dict[str, Any], *, by_day: bool = False) -> pa.Table:
        """``__p`` (and ``__day`` when ``by_day``), ``n``, ``d``: ``segment``'s numerator and
        denominator per period (per day), summed over its cells. A value that does not fit its
        column is refused (``ToolInputError``) as the source query refuses it."""
        params = Params()
        conds: list[exp.Expression] = []
        for k, v in segment.items():
            c = _col(f"d{self.dims.index(k)}")
            if v is None:
                conds.append(exp.Is(this=c, expression=exp.Null()))
            else:
                col = self.ctx.schema.column(self.q.metric.table, k)
                conds.append(exp.EQ(this=c, expression=params.bind(typed_value(self.ctx, col, v))))
        keys = ["__p", *(["__day"] if by_day else [])]
        d = "d" if "d" in self.sql.cell_sums else "rows"
        tree = (
            exp.select(
                *[_col(k) for k in keys],
                exp.alias_(exp.Sum(this=_col("n")), "n"),
                exp.alias_(exp.Sum(this=_col(d)), "d"),
            )
            .from_(self.table)
            .group_by(*[_col(k) for k in keys])
            .order_by(*[_col(k) for k in reversed(keys)])
        )
        if conds:
            tree = tree.where(exp.and_(*conds))
        return self.run(tree, params.values)

    def per_period(self, segment: dict[str, Any]) -> dict[int, tuple[float, float]]:
        """``{period: (n, d)}`` of ``segment``: what its query gives on the source."""
        return {
            int(r["__p"]): (float(r["n"] or 0.0), float(r["d"] or 0.0))
            for r in self.sums(segment).to_pylist()
        }

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


def leaf_days(ctx: ToolContext, q: Question, dims: list[str]) -> LeafDays | None:
    """Read the source once: ``q``'s rows aggregated to cells over ``dims`` (per day for date
    periods), stored locally. None, and each number read from the source as before, for a
    distinct count (it is not a sum of cells) and for more cells than :data:`MAX_CELLS`."""
    sql = EngineSql(ctx, q, dims)
    if sql.distinct or estimated_cells(ctx, q, dims) > MAX_CELLS:
        return None
    text = to_sql(sql.cells(with_day=q.periods.by_dates), ctx.dialect)
    try:
        table = ctx.run_arrow(text, sql.params.values, max_rows=MAX_CELLS)
    except ResourceLimit:  # a profile's estimate of distinct values fell short
        return None
    return LeafDays(ctx, q, dims, table)


def estimated_cells(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """At most this many cells: the leaves (:func:`~tasks.engine.cube.estimated_leaves`) times
    the periods' days (two periods of labels), and never more than the table's rows."""
    p = q.periods
    days = p.baseline.days + p.comparison.days if p.by_dates else 2  # type: ignore[union-attr]
    cells = estimated_leaves(ctx, q, dims) * days
    prof = ctx.schema.profile(q.metric.table)
    return min(cells, prof.row_count) if prof is not None else cells

"""The sandboxed, read-only DuckDB connection every tool runs on, and the live schema.

Recipe (see the security notes in the README): the file is opened ``read_only``; extension
loading, replacement scans and persistent secrets are off; memory, threads and spill space are
bounded; spill files go to a private temporary directory removed on close; then external
access is switched off and the configuration locked. Every query passes the statement guard
and runs under a wall-clock limit enforced by ``interrupt()``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel, Field

from sql_tools._errors import (
    QueryTimeout,
    ResourceLimit,
    SqlToolError,
    ToolInputError,
    one_line,
)
from sql_tools._guard import check_select
from sql_tools.passes import Passes
from sql_tools.reader import ContextReader, QueryOutput
from sql_tools.views import left_out_note, refused_views
from sql_tools.catalog import (
    META_SCHEMA,
    Catalog,
    ColumnProfile,
    JoinKey,
    TableProfile,
    jsonable,
    kind_of,
    quote_ident,
    read_catalog,
)


class Limits(BaseModel):
    """Resource and size limits for one tool context."""

    memory_limit: str = Field(
        default_factory=lambda: os.environ.get("DRILLDOWN_MEMORY_LIMIT") or "1GB",
        description="DuckDB's memory limit (``DRILLDOWN_MEMORY_LIMIT``); beyond it, queries spill. "
        "In Postgres, a quarter of it is each sort's or hash's ``work_mem``.",
    )
    threads: int = 2
    max_temp_directory_size: str = Field(
        default_factory=lambda: os.environ.get("DRILLDOWN_MAX_TEMP_DIRECTORY_SIZE") or "2GB",
        description="Disk a query may spill to (``DRILLDOWN_MAX_TEMP_DIRECTORY_SIZE``); a query "
        "that needs more stops with ``resource_limit``.",
    )
    timeout_s: float = Field(default=15.0, gt=0)
    default_rows: int = 50
    max_rows: int = 1000
    max_cell_chars: int = 200
    max_result_bytes: int = 64 * 1024
    max_filters: int = 20
    max_list_items: int = 1000
    max_string_bytes: int = 1024
    max_input_bytes: int = 64 * 1024
    max_nesting: int = 32
    address_space_bytes: int = Field(
        default=3 * 1024**3,
        description="Address-space cap for a process dedicated to tool calls (the CLI); bounds "
        "single huge values that escape memory_limit.",
    )


@dataclass(frozen=True)
class Column:
    """A column a tool may reference. ``ref`` is how callers write it (``table.column`` if joined)."""

    table: str
    name: str
    type: str
    kind: str
    ref: str
    join: JoinKey | None = None


@dataclass
class Schema:
    """Live schema: user tables of ``main`` with their columns, profiles and join keys."""

    tables: dict[str, list[Column]]
    catalog: Catalog
    row_counts: dict[str, int] = field(default_factory=dict)
    #: relation name -> why it is not offered (a view that reads beyond the file's tables, a
    #: relation the database fails to read)
    left_out: dict[str, str] = field(default_factory=dict)
    #: relation name -> what it is called in its note, when not "view"
    left_out_kinds: dict[str, str] = field(default_factory=dict)

    @property
    def notes(self) -> list[str]:
        """One line per relation left out, naming it and why."""
        return [
            left_out_note(name, why, self.left_out_kinds.get(name, "view"))
            for name, why in sorted(self.left_out.items())
        ]

    def leave_out(self, name: str, reason: str, kind: str = "view") -> None:
        """Offer ``name`` no more: it is gone from the tables and named in :attr:`notes`."""
        self.tables.pop(name, None)
        self.left_out[name] = reason
        if kind != "view":
            self.left_out_kinds[name] = kind

    @property
    def table_names(self) -> list[str]:
        """Names of the user tables, sorted."""
        return sorted(self.tables)

    def table(self, name: object) -> str:
        """Resolve a table name (exact, else case-insensitive) or raise ``unknown_table``."""
        if isinstance(name, str):
            if name in self.tables:
                return name
            folded = [t for t in self.tables if t.lower() == name.lower()]
            if len(folded) == 1:
                return folded[0]
            if name in self.left_out:
                raise ToolInputError(
                    f"table {_show(name)} cannot be used: {self.left_out[name]}",
                    code="unknown_table",
                    valid_values=self.table_names,
                    field="table",
                )
        raise ToolInputError(
            f"unknown table {_show(name)}",
            code="unknown_table",
            valid_values=self.table_names,
            field="table",
        )

    def joins_from(self, table: str) -> list[JoinKey]:
        """Many-to-one joins usable from ``table`` (one hop), first key per target table."""
        seen: dict[str, JoinKey] = {}
        for k in self.catalog.join_keys:
            if k.from_table == table and k.to_table != table and k.to_table in self.tables:
                seen.setdefault(k.to_table, k)
        return list(seen.values())

    def columns_for(self, table: str) -> list[Column]:
        """Columns usable with ``table`` as the base: its own, then joined ``t.c`` columns."""
        cols = list(self.tables[table])
        for k in self.joins_from(table):
            for c in self.tables[k.to_table]:
                if c.name != k.to_column:
                    cols.append(
                        Column(k.to_table, c.name, c.type, c.kind, f"{k.to_table}.{c.name}", k)
                    )
        return cols

    def all_refs(self) -> list[str]:
        """Every column reference any table accepts (for schema enums)."""
        refs: dict[str, None] = {}
        for t in self.table_names:
            for c in self.columns_for(t):
                refs[c.ref] = None
        return list(refs)

    def column(self, table: str, ref: object, *, field_name: str = "column") -> Column:
        """Resolve ``ref`` against ``table`` or raise ``unknown_column`` listing valid names."""
        cols = self.columns_for(table)
        if isinstance(ref, str):
            exact = [c for c in cols if c.ref == ref]
            if exact:
                return exact[0]
            folded = [c for c in cols if c.ref.lower() == ref.lower()]
            if len(folded) == 1:
                return folded[0]
            # the table's own column written table.column (a result's key for a column that
            # shares its name with a result field, see sql_tools._names)
            own = [c for c in self.tables[table] if ref == f"{table}.{c.name}"]
            if own:
                return own[0]
        raise ToolInputError(
            f"unknown column {_show(ref)} in {field_name} for table {table!r}",
            code="unknown_column",
            valid_values=[c.ref for c in cols],
            field=field_name,
        )

    def profile(self, table: str) -> TableProfile | None:
        """The stored profile of ``table``, if the loader wrote one."""
        return self.catalog.profiles.get(table)

    def column_profile(self, col: Column) -> ColumnProfile | None:
        """The stored profile of one column, if any."""
        prof = self.profile(col.table)
        return prof.column(col.name) if prof else None


def table_signatures(schema: Schema, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Each table's signature from ``(name, row count, sum of row hashes)`` rows: its columns
    with their types, its row count and the sum (as text: it outgrows 64 bits)."""
    return {
        name: {
            "columns": [[c.name, c.type] for c in schema.tables[name]],
            "rows": int(n),
            "row_hash_sum": str(h),
        }
        for name, n, h in rows
    }


def _show(value: object) -> str:
    r = repr(value)
    return r if len(r) <= 80 else r[:76] + "…" + r[-1]


class ToolContext:
    """A read-only sandboxed connection on one database file plus its live schema.

    ``tables``, when given, is all the context knows of the file: an investigation names the
    tables its own load wrote, so tables left in the same file by an earlier load are neither
    offered (schema, tool enums, profiles) nor queried (the statement guard allows only the
    schema's tables).

    Use as a context manager, or call :meth:`close`.
    """

    #: the SQL dialect queries are rendered in for this context (see ``_sql.to_sql``)
    dialect = "duckdb"

    def __init__(
        self,
        db_path: str | Path,
        limits: Limits | None = None,
        tables: Collection[str] | None = None,
    ) -> None:
        if str(db_path).lower().startswith(("postgresql:/", "postgres:/")):  # never echo it
            raise SqlToolError(
                "a postgresql:// URL is not a DuckDB file: this reads DuckDB files only",
                code="database_error",
            )
        self.db_path = Path(db_path)
        self.limits = limits or Limits()
        if not self.db_path.is_file():
            raise SqlToolError(
                f"database file not found: {str(self.db_path)!r}", code="database_error"
            )
        self._tmpdir = tempfile.mkdtemp(prefix="drilldown-tmp-")
        try:
            self.con = _open_sandboxed(self.db_path, self.limits, self._tmpdir)
        except duckdb.Error as exc:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            raise SqlToolError(
                f"cannot open database {str(self.db_path)!r}: {one_line(exc, 200)}",
                code="database_error",
            ) from exc
        self._lock = threading.Lock()
        self._stopped = False
        self.passes = Passes()
        self.reader = ContextReader(self)
        self.schema = self._read_schema(tables)

    def __enter__(self) -> ToolContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and remove the private temporary directory."""
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
            self.con = None  # type: ignore[assignment]
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def sibling(self) -> ToolContext:
        """A second connection to the same open database, with the same schema, sandbox and
        limits, for queries that run beside this context's (each connection has its own lock and
        time limit; the memory limit is shared). Close it before this context."""
        twin = object.__new__(type(self))
        twin.db_path, twin.limits, twin._tmpdir = self.db_path, self.limits, None
        twin.con = self.con.cursor()
        twin._lock = threading.Lock()
        twin._stopped = False
        twin.schema = self.schema
        twin.passes = self.passes
        twin.reader = self.reader.on(twin)
        return twin

    def stop(self) -> None:
        """Stop the query running on this connection, and refuse any further one."""
        self._stopped = True
        self.con.interrupt()

    def content_fingerprint(self) -> dict[str, Any]:
        """The data's identity: where it is (the file) and, per table, its columns, row count
        and the sum of its rows' 64-bit hashes, from one query. It is measured, not taken from
        the load records: a file written outside the loader has none, and a table changed after
        its load keeps them. Any change to a row changes its table's sum; a copy of the file
        holds the same tables. A relation the database fails to read (a view the sandbox
        refuses that passed :func:`refused_views`) is left out of the schema and named in its
        notes."""
        names = self.schema.table_names
        rows = []
        if names:
            with self._lock:  # the product's own query: no guard, no tool time limit
                try:
                    rows = self.con.execute(_signature_sql(names), names).fetchall()
                except duckdb.Error:
                    rows = self._signatures_one_by_one(names)
            self.passes.add_each([r[0] for r in rows])
        return {"location": str(self.db_path), "tables": table_signatures(self.schema, rows)}

    def _signatures_one_by_one(self, names: list[str]) -> list[tuple[Any, ...]]:
        """Each relation's signature by itself: one the database refuses is left out."""
        rows = []
        for name in names:
            try:
                rows += self.con.execute(_signature_sql([name]), [name]).fetchall()
            except duckdb.Error as exc:
                why = f"reading it fails here ({type(exc).__name__})"
                self.schema.leave_out(name, why)
        return rows

    def _read_schema(self, only: Collection[str] | None) -> Schema:
        """The user tables of ``main`` (only those named in ``only`` when given) and their
        catalogue; views that read beyond the file's tables (:func:`refused_views`) are left
        out and named."""
        catalog = read_catalog(self.con)
        tables: dict[str, list[Column]] = {}
        rows = self.con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'main' AND table_catalog = current_database()"
            " ORDER BY table_name, ordinal_position"
        ).fetchall()
        for tname, cname, ctype in rows:
            if tname.startswith(META_SCHEMA):
                continue
            tables.setdefault(tname, []).append(Column(tname, cname, ctype, kind_of(ctype), cname))
        if only is not None:
            keep = set(only)
            tables = {name: cols for name, cols in tables.items() if name in keep}
        left_out = {v: why for v, why in refused_views(self.con).items() if v in tables}
        tables = {name: cols for name, cols in tables.items() if name not in left_out}
        if only is not None or left_out:
            catalog = _restricted(catalog, set(tables))
        return Schema(tables=tables, catalog=catalog, left_out=left_out)

    @contextmanager
    def _executing(self, sql: str, *, type_errors: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """The guard, then the connection for one query, under the lock and the time limit;
        DuckDB's errors as ours (a value that does not convert to a column's type is the
        caller's ``type_mismatch`` when ``type_errors``, else a failed query)."""
        with self._lock:  # the guard parses on the connection too: one caller at a time
            if self._stopped:
                raise SqlToolError("query not run: the connection was stopped")
            reads = check_select(self.con, sql, allowed_tables=set(self.schema.tables))
            self.passes.add(reads)
            timer = threading.Timer(self.limits.timeout_s, self.con.interrupt)
            timer.start()
            try:
                yield self.con
            except duckdb.InterruptException as exc:
                raise QueryTimeout(
                    f"query exceeded the time limit of {self.limits.timeout_s:g} s and was stopped"
                ) from exc
            except duckdb.OutOfMemoryException as exc:
                raise ResourceLimit(_out_of_memory(exc, self.limits)) from exc
            except duckdb.ConversionException as exc:
                if not type_errors:
                    raise SqlToolError(f"query failed: {one_line(exc, 300)}") from exc
                raise ToolInputError(
                    f"a value does not fit the column type: {one_line(exc, 200)}",
                    code="type_mismatch",
                ) from exc
            except duckdb.Error as exc:
                raise SqlToolError(f"query failed: {one_line(exc, 300)}") from exc
            finally:
                timer.cancel()

    def run(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> QueryOutput:
        """Guard, then execute ``sql`` with bound ``params``; fetch at most ``max_rows`` rows."""
        params = params or {}
        with self._executing(sql, type_errors=True) as con:
            start = time.perf_counter()
            cur = con.execute(sql, params)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchmany(max_rows)
            cur.abort()  # rows past max_rows would block the connection's next con.sql()
            elapsed = (time.perf_counter() - start) * 1000
        return QueryOutput(columns, rows, sql, {k: jsonable(v) for k, v in params.items()}, elapsed)

    def run_arrow(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> Any:
        """Like :meth:`run`, but return the whole result as a ``pyarrow.Table`` (bulk engine reads).

        Refuses results longer than ``max_rows`` instead of cutting them.
        """
        with self._executing(sql, type_errors=False) as con:
            table = con.sql(sql, params=params or {}).to_arrow_table()
        if table.num_rows > max_rows:
            raise ResourceLimit(f"query returned {table.num_rows:,} rows, more than {max_rows:,}")
        return table


def _signature_sql(names: list[str]) -> str:
    """One query for the signatures of ``names`` (bound as its parameters)."""
    return " UNION ALL ".join(
        "SELECT ?::VARCHAR AS name, count(*) AS n, "
        f"coalesce(sum(hash(r)), 0)::VARCHAR AS h FROM main.{quote_ident(t)} AS r"
        for t in names
    )


def _restricted(catalog: Catalog, tables: set[str]) -> Catalog:
    """The catalogue of ``tables`` alone: their load records and profiles, and the join keys
    between two of them. What it leaves out is as absent as a table the file never held."""
    return Catalog(
        version=catalog.version,
        loads={t: rec for t, rec in catalog.loads.items() if t in tables},
        profiles={t: prof for t, prof in catalog.profiles.items() if t in tables},
        join_keys=[
            k for k in catalog.join_keys if k.from_table in tables and k.to_table in tables
        ],
    )


def _out_of_memory(exc: duckdb.OutOfMemoryException, limits: Limits) -> str:
    """Which bound a query ran into: the spill space on disk, or the memory limit."""
    if "max_temp_directory_size" in str(exc):
        return (
            f"query needed more than the {limits.max_temp_directory_size} of disk it may spill "
            "to (max_temp_directory_size) and was stopped"
        )
    return f"query exceeded the memory limit of {limits.memory_limit}"


def limit_address_space(max_bytes: int) -> None:
    """Cap this process's address space (only in a process dedicated to tool calls).

    DuckDB's ``memory_limit`` does not bound a single huge value (``repeat('a', 10^9)``); an
    address-space limit turns such an allocation into a clean ``OutOfMemoryException``.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        max_bytes = min(max_bytes, hard)
    if soft == resource.RLIM_INFINITY or soft > max_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, hard))


def _open_sandboxed(path: Path, limits: Limits, tmpdir: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        str(path),
        read_only=True,
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "allow_persistent_secrets": False,
            "python_enable_replacements": False,
            "threads": limits.threads,
            "memory_limit": limits.memory_limit,
            "max_execution_time": int(limits.timeout_s * 1000) + 1000,
        },
    )
    _bound_spill(con, limits, tmpdir)
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _bound_spill(con: duckdb.DuckDBPyConnection, limits: Limits, tmpdir: str) -> None:
    """Spill space, set on the open connection.

    Given to ``duckdb.connect``'s config instead, ``max_temp_directory_size`` is reported by
    ``current_setting`` but not enforced: a distinct count spilled 400 MB against a 20 MB cap.
    Set here, a query that needs more spill stops with "failed to offload data block". The
    setting is the database instance's, so the cursors made from this connection
    (:meth:`ToolContext.sibling`) share it.
    """
    con.execute("SET temp_directory = ?", [tmpdir])
    con.execute("SET max_temp_directory_size = ?", [limits.max_temp_directory_size])

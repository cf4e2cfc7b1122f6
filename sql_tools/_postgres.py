"""The read-only Postgres connection tools run on when the data stays in Postgres.

:class:`PostgresContext` has the interface of :class:`~sql_tools._context.ToolContext`
(``schema``, ``limits``, ``dialect``, ``run``, ``run_arrow``, ``close``) over tables of one
Postgres schema, read where they are. The database enforces what matters:

- the role must not be able to do more than read: a superuser, a role with BYPASSRLS, or one
  that may INSERT, UPDATE, DELETE or TRUNCATE a table it would read is refused at connect
  (:class:`UnsafeRole`);
- every query runs in its own ``READ ONLY`` transaction with ``statement_timeout`` and
  ``idle_in_transaction_session_timeout`` set from ``limits.timeout_s`` and ``work_mem`` from
  ``limits.memory_limit`` (:data:`WORK_MEM_SHARE`), and the session's default transactions are
  read-only too;
- rows are read through a server-side cursor, at most ``max_rows`` of them;
- ``search_path`` is ``pg_catalog, pg_temp`` (:data:`SEARCH_PATH`), for the session and again in
  every transaction: a function, aggregate, operator, type or collation a query names is always
  the built-in one, never one another role defined in the chosen schema (a ``public.sum(double
  precision)`` would otherwise answer every sum). Every query names the schema's tables with
  their schema (:func:`~sql_tools._guard.qualify_tables` writes it where a query leaves it out).

The statement guard (:func:`~sql_tools._guard.check_postgres_select`) checks every tool and
engine query first, as on DuckDB. :meth:`PostgresContext.introspect` runs the product's own fixed
catalogue, profile and fingerprint queries: read-only and time-limited, but not guarded (they
read ``pg_catalog``); nothing a caller sends ever reaches it.

The connection URL is ``postgresql://user:password@host:port/dbname`` with any libpq parameter,
plus three of ours, removed before connecting: ``schema`` (default ``public``), ``tables`` (a
comma-separated subset of the schema's tables; default every table, view and materialized view
the role may SELECT) and ``query_timeout`` (seconds per query). The password is kept only to
connect: :attr:`PostgresSource.display` and every message leave it out. Without one in the URL,
libpq's ``PGPASSWORD`` or password file supplies it.

This is the only module of ``sql_tools`` that imports psycopg (see ``tests/test_layout.py``),
and only once a URL is parsed or a connection made: a run on a DuckDB file never loads it.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pyarrow as pa

from sql_tools._context import Column, Limits, QueryOutput, Schema, table_signatures
from sql_tools._errors import (
    QueryRejected,
    QueryTimeout,
    ResourceLimit,
    SqlToolError,
    ToolInputError,
    one_line,
)
from sql_tools._guard import check_postgres_select, qualify_tables, table_reads
from sql_tools.passes import Passes
from sql_tools.reader import ContextReader
from sql_tools.catalog import Catalog, jsonable, kind_of, quote_ident, quote_literal

if TYPE_CHECKING:
    import psycopg

SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "public"
OUR_PARAMETERS = ("schema", "tables", "query_timeout")
CONNECT_TIMEOUT_S = 10
SEARCH_PATH = "pg_catalog, pg_temp"
"""Where every session looks up unqualified names: the built-ins first (for functions and
operators they win even over the temporary schema), the session's own temporary objects, and
no schema another role may create objects in."""
ROW_HASH_SUM = "coalesce(sum(hashtextextended(CAST(r AS text), 0)), 0)::text"
"""A table's fingerprint of its rows (aliased ``r``): the sum of their 64-bit hashes, as text."""
# relations a role may read: tables, partitioned tables, views, materialized views, foreign tables
_RELKINDS = ("r", "p", "v", "m", "f")


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?i?b)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
WORK_MEM_SHARE = 4
"""Postgres sorts and hashes each get this share of ``limits.memory_limit`` (``work_mem``, a
quarter: 250 MB at the default 1 GB). The server's default (4 MB) makes the engine's grouped
statements (screening's grouping sets, the cells with the data-quality checks' sets) sort
their rows on disk set by set instead of hashing them in one go: 52 s instead of 17-22 s for
screening 10 million rows (``benchmarks/RESULTS.md``)."""


def postgres_work_mem(memory_limit: str) -> str | None:
    """``work_mem`` for the product's statements, in kB, from DuckDB's ``memory_limit`` text
    (``1GB``, ``512MiB``; units of 1000, or of 1024 with ``i``). None when it is not a size
    (the server's own setting stays)."""
    m = _SIZE.match(memory_limit)
    if m is None:
        return None
    size = float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()]
    return f"{max(64, int(size / WORK_MEM_SHARE / 1024))}kB"


def is_postgres_url(location: object) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) connection URL."""
    return isinstance(location, str) and location.lower().startswith(SCHEMES)


@dataclass(frozen=True)
class PostgresSource:
    """Where the data is: libpq connection parameters (the password among them, never shown),
    the schema, the tables chosen (None: all readable) and the per-query time limit."""

    conninfo: dict[str, str]
    schema: str
    tables: tuple[str, ...] | None
    timeout_s: float | None

    @property
    def password(self) -> str | None:
        """The password given in the URL, if any (to scrub it from messages)."""
        return self.conninfo.get("password") or None

    @property
    def display(self) -> str:
        """The URL without its password: what reports, logs and errors show."""
        return self._url(with_user=True, extra=True)

    @property
    def location(self) -> str:
        """Host, port, database, schema and tables as a URL: the data's place, for caching."""
        return self._url(with_user=False, extra=False)

    def _url(self, *, with_user: bool, extra: bool) -> str:
        info = dict(self.conninfo)
        info.pop("password", None)
        user = info.pop("user", None)
        host = info.pop("host", None) or ""
        port = info.pop("port", None)
        dbname = info.pop("dbname", None) or ""
        query: list[tuple[str, str]] = []
        netloc = ""
        if host and not host.startswith("/") and "," not in host:
            netloc = quote(host, safe=":[]") + (f":{port}" if port else "")
        else:
            if host:
                query.append(("host", host))
            if port:
                query.append(("port", port))
        if with_user and user:
            netloc = quote(user, safe="") + "@" + netloc
        if extra:
            query += sorted((k, v) for k, v in info.items() if k != "passfile")
        query.append(("schema", self.schema))
        if self.tables is not None:
            query.append(("tables", ",".join(self.tables)))
        if extra and self.timeout_s is not None:
            query.append(("query_timeout", f"{self.timeout_s:g}"))
        return f"postgresql://{netloc}/{quote(dbname)}?{urlencode(query, safe='/,')}"

    def scrub(self, text: object) -> str:
        """``text`` as one line with the password, if any, replaced by ``***``."""
        s = str(text)
        if self.password:
            s = s.replace(self.password, "***").replace(quote(self.password, safe=""), "***")
        return one_line(s, 300)


def parse_postgres_url(url: str) -> PostgresSource:
    """Split a connection URL into libpq parameters and ours (``schema``, ``tables``,
    ``query_timeout``). Raises ``SqlToolError`` (``database_error``) for a malformed URL; the
    message never holds the password."""
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(key, value) if key in OUR_PARAMETERS else theirs.append((key, value)))
    libpq_url = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(theirs), ""))
    import psycopg
    from psycopg import conninfo as pg_conninfo

    try:
        info = {k: str(v) for k, v in pg_conninfo.conninfo_to_dict(libpq_url).items()}
    except psycopg.Error as exc:
        source = PostgresSource({}, DEFAULT_SCHEMA, None, None)
        raise SqlToolError(
            f"not a valid postgresql:// URL: {source.scrub(exc)}", code="database_error"
        ) from None
    schema = ours.get("schema", DEFAULT_SCHEMA).strip() or DEFAULT_SCHEMA
    tables = None
    if ours.get("tables", "").strip():
        tables = tuple(dict.fromkeys(t.strip() for t in ours["tables"].split(",") if t.strip()))
    timeout = None
    if "query_timeout" in ours:
        try:
            timeout = float(ours["query_timeout"])
        except ValueError:
            timeout = -1.0
        if not (math.isfinite(timeout) and timeout > 0):
            raise ToolInputError(
                f"query_timeout must be a positive number of seconds, got {ours['query_timeout']!r}"
            )
    return PostgresSource(info, schema, tables, timeout)


def without_password(url: str) -> str:
    """``url`` with its password (in the user part or a ``password`` parameter) left out,
    everything else as it was."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = userinfo.split(":", 1)[0] + "@" + host
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), parts.fragment))


def role_statements(role: str, schema: str, tables: Sequence[str] | None = None) -> str:
    """The SQL (for an administrator to run) creating ``role``, which may only read ``tables``
    of ``schema`` (every table of it when None): the kind of role the product connects as."""
    r, s = quote_ident(role), quote_ident(schema)
    on = (
        "TABLE " + ", ".join(f"{s}.{quote_ident(t)}" for t in tables)
        if tables
        else f"ALL TABLES IN SCHEMA {s}"
    )
    lines = [
        "-- A role that may only read, for metric-drilldown. Run as an administrator of the",
        f"-- database, then give it a password (in psql: \\password {r}).",
        f"CREATE ROLE {r} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION;",
        f"GRANT USAGE ON SCHEMA {s} TO {r};",
        f"GRANT SELECT ON {on} TO {r};",
        f"ALTER ROLE {r} SET default_transaction_read_only = on;",
    ]
    if not tables:
        lines.insert(5, "-- (tables created later need their own GRANT SELECT)")
    return "\n".join(lines)


class UnsafeRole(SqlToolError):
    """The connecting role can do more than read the tables; the product refuses to use it."""

    code = "unsafe_role"


# Postgres type (as format_type writes it, modifiers removed) -> the product's type vocabulary
# (DuckDB's names, which kind_of, the profile's role rules and the non-finite checks read).
_TYPE_NAMES = {
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "numeric": "DECIMAL",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "character": "VARCHAR",
    "name": "VARCHAR",
    "citext": "VARCHAR",
    "date": "DATE",
    "timestamp without time zone": "TIMESTAMP",
    "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "time without time zone": "TIME",
    "time with time zone": "TIME WITH TIME ZONE",
    "interval": "INTERVAL",
    "boolean": "BOOLEAN",
    "uuid": "UUID",
    "bytea": "BLOB",
    "json": "JSON",
    "jsonb": "JSON",
}


def product_type(pg_type: str) -> str:
    """A Postgres column type in the product's vocabulary: ``double precision`` -> ``DOUBLE``,
    ``numeric(10,2)`` -> ``DECIMAL(10,2)``, ``character varying(20)`` -> ``VARCHAR``; an
    array or an unknown type keeps its Postgres name (upper case) and is of kind ``other``."""
    t = pg_type.strip().lower()
    if t.endswith("]"):
        return pg_type.upper()
    numeric = re.fullmatch(r"numeric\((\d+),(\d+)\)", t.replace(" ", ""))
    if numeric:
        return f"DECIMAL({numeric.group(1)},{numeric.group(2)})"
    base = re.sub(r"\(\d+(,\d+)?\)", "", t).strip()
    return _TYPE_NAMES.get(base, pg_type.upper())


@cache
def _integral_numeric_loader() -> type:
    """A psycopg loader of ``numeric`` values: without a fraction as ``int`` (a sum of
    integers, as DuckDB returns it), others as ``Decimal``."""
    from psycopg.types.numeric import NumericLoader

    class _IntegralNumericLoader(NumericLoader):
        def load(self, data: Any) -> Any:
            text = bytes(data)
            if text.lstrip(b"-").isdigit():
                return int(text)
            return super().load(data)

    return _IntegralNumericLoader


class PostgresContext:
    """A read-only connection on one Postgres schema plus its live schema.

    Use as a context manager, or call :meth:`close`. The schema's ``catalog`` (profiles and join
    keys) starts empty; ``tasks.ingest.postgres`` measures and sets it.
    """

    #: the SQL dialect queries are rendered in for this context (see ``_sql.to_sql``)
    dialect = "postgres"

    def __init__(self, url: str, limits: Limits | None = None) -> None:
        self.source = parse_postgres_url(url)
        limits = limits or Limits()
        if self.source.timeout_s is not None:
            limits = limits.model_copy(update={"timeout_s": self.source.timeout_s})
        self.limits = limits
        self._lock = threading.Lock()
        self.passes = Passes()
        self.reader = ContextReader(self)
        # table -> (rows, sum of row hashes), measured by the pass that profiled it
        self.measured: dict[str, tuple[int, str]] = {}
        self.con: psycopg.Connection[Any] | None = None
        self.con = self._connect()
        try:
            self.schema = self._read_schema()
            self._refuse_unsafe_role()
        except BaseException:
            self.close()
            raise

    @property
    def display(self) -> str:
        """The connection URL without its password."""
        return self.source.display

    def __enter__(self) -> PostgresContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        con, self.con = self.con, None
        if con is not None:
            con.close()

    def sibling(self) -> None:
        """None: a second connection would read its own snapshot of tables others may write, so
        every query of one question runs on this one."""
        return None

    # --- connecting and checking ---------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        params: dict[str, Any] = dict(self.source.conninfo)
        params.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
        params.setdefault("application_name", "drilldown")
        import psycopg

        try:
            con = psycopg.connect(autocommit=True, prepare_threshold=None, **params)
        except psycopg.Error as exc:
            raise SqlToolError(
                f"cannot connect to {self.display}: {self.source.scrub(exc)}",
                code="database_error",
            ) from None
        con.adapters.register_loader("numeric", _integral_numeric_loader())
        con.read_only = True  # every transaction this connection begins: BEGIN READ ONLY
        try:
            con.execute("SET default_transaction_read_only = on")
            con.execute(f"SET search_path = {SEARCH_PATH}")
        except psycopg.Error as exc:
            con.close()
            raise SqlToolError(
                f"cannot set up the session on {self.display}: {self.source.scrub(exc)}",
                code="database_error",
            ) from None
        return con

    def _read_schema(self) -> Schema:
        rows = self.introspect(
            """
            SELECT c.relname, a.attname,
                   format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
                               CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END),
                   t.typtype
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
                 AND a.attnum > 0 AND NOT a.attisdropped
            JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
            WHERE n.nspname = %(schema)s AND c.relkind = ANY(%(kinds)s)
              AND NOT c.relispartition AND has_table_privilege(c.oid, 'SELECT')
            ORDER BY c.relname, a.attnum
            """,
            {"schema": self.source.schema, "kinds": list(_RELKINDS)},
        )
        tables: dict[str, list[Column]] = {}
        for tname, cname, pg_type, typtype in rows:
            if self.source.tables is not None and tname not in self.source.tables:
                continue
            ctype = "VARCHAR" if typtype == "e" else product_type(pg_type)  # enums read as text
            tables.setdefault(tname, []).append(Column(tname, cname, ctype, kind_of(ctype), cname))
        if self.source.tables is not None:
            missing = [t for t in self.source.tables if t not in tables]
            if missing:
                raise ToolInputError(
                    f"no table {missing[0]!r} that this role may SELECT in schema "
                    f"{self.source.schema!r} of {self.display}",
                    code="unknown_table",
                    valid_values=sorted({r[0] for r in rows}),
                )
        if not tables:
            raise ToolInputError(
                f"schema {self.source.schema!r} of {self.display} has no table this role may "
                "SELECT",
                code="unknown_table",
            )
        return Schema(tables=tables, catalog=Catalog())

    def _refuse_unsafe_role(self) -> None:
        """Raise :class:`UnsafeRole` for a role that may do more than read the chosen tables."""
        [(role, superuser, bypassrls)] = self.introspect(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_catalog.pg_roles "
            "WHERE rolname = current_user"
        )
        hint = (
            "connect as a role that may only SELECT (`drilldown postgres-role` prints the SQL "
            "to create one)"
        )
        if superuser or bypassrls:
            what = "a superuser" if superuser else "allowed to bypass row-level security"
            raise UnsafeRole(f"refusing to read as role {role!r}: it is {what}; {hint}")
        writable = self.introspect(
            """
            SELECT c.relname FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s)
              AND (has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
                   OR has_any_column_privilege(c.oid, 'INSERT, UPDATE'))
            ORDER BY c.relname
            """,
            {"schema": self.source.schema, "tables": self.schema.table_names},
        )
        if writable:
            raise UnsafeRole(
                f"refusing to read as role {role!r}: it may INSERT, UPDATE, DELETE or TRUNCATE "
                f"table {writable[0][0]!r}; {hint}"
            )

    # --- running queries -----------------------------------------------------------------------

    @contextmanager
    def _read_only(self) -> Iterator[psycopg.Connection[Any]]:
        """One READ ONLY transaction with this context's time limits; errors as ours."""
        con = self.con
        if con is None:
            raise SqlToolError("the Postgres connection is closed", code="database_error")
        ms = int(self.limits.timeout_s * 1000)
        settings = {
            "statement_timeout": f"{ms}ms",
            "idle_in_transaction_session_timeout": f"{ms + 10_000}ms",
            "search_path": SEARCH_PATH,
            "TimeZone": "UTC",
            "cursor_tuple_fraction": "1",  # plans for the whole result, not its first rows
        }
        work_mem = postgres_work_mem(self.limits.memory_limit)
        if work_mem is not None:
            settings["work_mem"] = work_mem
        set_local = "SELECT " + ", ".join(
            f"set_config('{name}', %({name})s, true)" for name in settings
        )
        import psycopg
        from psycopg import errors as pg_errors

        try:
            with con.transaction():
                con.execute(set_local, settings)
                yield con
        except SqlToolError:
            raise
        except pg_errors.QueryCanceled:
            raise QueryTimeout(
                f"query exceeded the time limit of {self.limits.timeout_s:g} s and was stopped"
            ) from None
        except pg_errors.ReadOnlySqlTransaction as exc:
            raise QueryRejected(
                f"the database refused a write in a read-only transaction: {self.source.scrub(exc)}"
            ) from None
        except pg_errors.InsufficientResources as exc:
            raise ResourceLimit(
                f"the database ran out of resources: {self.source.scrub(exc)}"
            ) from None
        except pg_errors.DataException as exc:
            raise ToolInputError(
                f"a value does not fit the column type: {self.source.scrub(exc)}",
                code="type_mismatch",
            ) from None
        except psycopg.OperationalError as exc:
            raise SqlToolError(
                f"lost the connection to {self.display}: {self.source.scrub(exc)}",
                code="database_error",
            ) from None
        except psycopg.Error as exc:
            raise SqlToolError(f"query failed: {self.source.scrub(exc)}") from None

    def _fetch(
        self, sql: str, params: dict[str, Any] | Sequence[Any] | None, max_rows: int
    ) -> tuple[list[str], list[int], list[tuple[Any, ...]]]:
        """Columns, their type oids and at most ``max_rows`` rows, through a server-side cursor."""
        sql = qualify_tables(sql, self.source.schema, placeholders=params is not None)
        with self._read_only() as con, con.cursor(name="drilldown") as cur:
            cur.execute(sql, params)
            description = cur.description or []
            rows = cur.fetchmany(max_rows)
        return [d.name for d in description], [d.type_code for d in description], rows

    def run(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> QueryOutput:
        """Guard, then execute ``sql`` with bound ``params``; fetch at most ``max_rows`` rows."""
        params = params or {}
        with self._lock:
            self.passes.add(check_postgres_select(sql, set(self.schema.tables), self.source.schema))
            start = time.perf_counter()
            columns, _, rows = self._fetch(sql, params, max_rows)
            elapsed = (time.perf_counter() - start) * 1000
        return QueryOutput(columns, rows, sql, {k: jsonable(v) for k, v in params.items()}, elapsed)

    def run_arrow(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> Any:
        """Like :meth:`run`, but return the whole result as a ``pyarrow.Table`` (bulk engine reads).

        Refuses results longer than ``max_rows`` instead of cutting them.
        """
        params = params or {}
        with self._lock:
            self.passes.add(check_postgres_select(sql, set(self.schema.tables), self.source.schema))
            columns, oids, rows = self._fetch(sql, params, max_rows + 1)
        if len(rows) > max_rows:
            raise ResourceLimit(f"query returned more than {max_rows:,} rows")
        arrays = [_arrow_array([r[j] for r in rows], oids[j]) for j in range(len(columns))]
        return pa.Table.from_arrays(arrays, names=columns)

    def introspect(
        self,
        sql: str,
        params: dict[str, Any] | Sequence[Any] | None = None,
        *,
        max_rows: int = 100_000,
    ) -> list[tuple[Any, ...]]:
        """Run one of the product's own fixed SELECTs (catalogue, profile, fingerprint): read-only,
        time-limited and one statement (a server-side cursor declares only a query) like every
        query, but not checked by the statement guard. ``sql`` takes psycopg placeholders when
        ``params`` is given; never SQL built from a caller's input. Its reads of the chosen
        tables are counted (the catalogue's own tables are not the user's)."""
        with self._lock:
            rows = self._fetch(sql, params, max_rows)[2]
        schema = getattr(self, "schema", None)  # the catalogue query that reads it has none
        if schema is not None:
            self.passes.add(table_reads(sql, set(schema.tables), self.source.schema))
        return rows

    def content_fingerprint(self) -> dict[str, Any]:
        """The data's identity without the password: where it is (host, port, database, schema,
        tables) and, per table, its columns, row count and the sum of its rows' 64-bit hashes.
        Any change to a row changes its table's sum. A table profiled when the context opened
        was measured by that pass (``tasks.ingest.postgres``: one read of each table opens the
        data); the others are measured by one query."""
        left = [t for t in self.schema.table_names if t not in self.measured]
        parts = [
            f"SELECT {quote_literal(t)} AS name, count(*) AS n, {ROW_HASH_SUM} AS h "
            f"FROM {quote_ident(self.source.schema)}.{quote_ident(t)} AS r"
            for t in left
        ]
        rows = self.introspect(" UNION ALL ".join(parts)) if parts else []
        rows += [(t, *self.measured[t]) for t in self.schema.table_names if t not in left]
        rows.sort(key=lambda r: self.schema.table_names.index(r[0]))
        return {"location": self.source.location, "tables": table_signatures(self.schema, rows)}


# type oid -> the Arrow type of a column of that type (others are inferred from the values)
_ARROW_TYPES = {
    16: pa.bool_(),
    20: pa.int64(),
    21: pa.int64(),
    23: pa.int64(),
    700: pa.float64(),
    701: pa.float64(),
    25: pa.string(),
    1043: pa.string(),
    1042: pa.string(),
    19: pa.string(),
    1082: pa.date32(),
    1114: pa.timestamp("us"),
    1184: pa.timestamp("us", tz="UTC"),
}
_NUMERIC_OID = 1700


def _arrow_array(values: list[Any], oid: int) -> pa.Array:
    """One result column as Arrow: ``numeric`` as int64 when every value is an integer that
    fits, else float64 (the engine computes in floats); known types as themselves; anything
    else inferred, or as text when the values do not share one type."""
    if oid == _NUMERIC_OID:
        if all(v is None or (isinstance(v, int) and -(2**63) <= v < 2**63) for v in values):
            return pa.array(values, pa.int64())
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    known = _ARROW_TYPES.get(oid)
    if known is not None:
        return pa.array(values, known)
    try:
        return pa.array([float(v) if isinstance(v, Decimal) else v for v in values])
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())

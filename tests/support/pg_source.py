"""Data in Postgres for the Postgres-source tests: the same rows the loader put in a DuckDB file,
copied with their types, and roles that may only read them (or may do more).

:func:`copy_tables` reads every user table of a DuckDB file (written by the real loader) and
creates it in a Postgres database with the matching column types, rows copied exactly
(``COPY ... FROM STDIN`` in binary-safe rows). :func:`reader_role` runs what
``drilldown postgres-role`` prints.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

import duckdb
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sql_tools import role_statements

# DuckDB type -> Postgres type of the copy
_PG_TYPES = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "numeric",
    "UTINYINT": "smallint",
    "USMALLINT": "integer",
    "UINTEGER": "bigint",
    "UBIGINT": "numeric",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "VARCHAR": "text",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "TIME": "time",
    "UUID": "uuid",
}


def pg_type(duck_type: str) -> str:
    """The Postgres type holding a DuckDB column's values exactly."""
    t = duck_type.upper()
    decimal = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", t)
    if decimal:
        return f"numeric({decimal.group(1)},{decimal.group(2)})"
    return _PG_TYPES[t]


def copy_tables(
    duck_path: Path, pg_uri: str, schema: str = "public", *, streamed: bool = False
) -> list[str]:
    """Create every user table of ``duck_path`` in ``pg_uri``'s ``schema`` with its rows.

    Row by row through Python by default (every value as DuckDB returns it); ``streamed`` writes
    each table to a CSV file with DuckDB and streams the file to ``COPY ... (FORMAT csv)``, for
    millions of rows (NULL is an unquoted empty field, an empty string a quoted one)."""
    with duckdb.connect(str(duck_path), read_only=True) as duck:
        tables = [
            r[0]
            for r in duck.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
                "ORDER BY table_name"
            ).fetchall()
        ]
        with psycopg.connect(pg_uri, autocommit=False) as pg:
            pg.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            for t in tables:
                cols = duck.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
                    [t],
                ).fetchall()
                target = sql.Identifier(schema, t)
                pg.execute(
                    sql.SQL("CREATE TABLE {} ({})").format(
                        target,
                        sql.SQL(", ").join(
                            sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(pg_type(ty)))
                            for c, ty in cols
                        ),
                    )
                )
                names = sql.SQL(", ").join(sql.Identifier(c) for c, _ in cols)
                if streamed:
                    _copy_csv(duck, t, pg, sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
                        target, names))  # fmt: skip
                    continue
                rows = duck.execute(f'SELECT * FROM main."{t}"').fetchall()
                with pg.cursor().copy(
                    sql.SQL("COPY {} ({}) FROM STDIN").format(target, names)
                ) as copy:
                    for row in rows:
                        copy.write_row(row)
            pg.commit()
    return tables


def _copy_csv(duck: Any, table: str, pg: Any, copy_sql: sql.Composed) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.csv"
        duck.execute(
            f"COPY (SELECT * FROM main.\"{table}\") TO '{path}' "
            "(FORMAT csv, HEADER false, FORCE_QUOTE *)"
        )
        with pg.cursor().copy(copy_sql) as copy, open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                copy.write(chunk)


def reader_role(
    admin_uri: str, tables: list[str] | None = None, schema: str = "public", **extra: Any
) -> str:
    """Create a new role as ``drilldown postgres-role`` prints it; return a URL connecting as it
    (``extra`` adds URL parameters)."""
    role = "reader_" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin_uri, autocommit=True) as c:
        c.execute(role_statements(role, schema, tables))
    return as_role(admin_uri, role, **extra)


def as_role(admin_uri: str, role: str, **extra: Any) -> str:
    """``admin_uri`` connecting as ``role``, with ``extra`` URL parameters (ours included)."""
    info = conninfo_to_dict(admin_uri)
    host = info.pop("host", "")
    dbname = info.pop("dbname", "")
    info.pop("user", None)
    info.pop("password", None)
    params = {**({"host": host} if host else {}), **info, **extra}
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"postgresql://{role}@/{dbname}?{query}"


def role_conninfo(admin_uri: str, role: str, **changes: Any) -> str:
    """A libpq connection string like ``admin_uri``, connecting as ``role``."""
    return make_conninfo(admin_uri, user=role, **changes)


def create_database(server_uri: str) -> str:
    """A new empty database on the server of ``server_uri``; its superuser URI."""
    name = "src_" + uuid.uuid4().hex[:10]
    with psycopg.connect(server_uri, autocommit=True) as c:
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server_uri, dbname=name)


def drop_database(server_uri: str, database_uri: str) -> None:
    """Drop the database ``database_uri`` names (its connections ended)."""
    name = conninfo_to_dict(database_uri)["dbname"]
    with psycopg.connect(server_uri, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def password_role(database_uri: str, password: str, tables: list[str]) -> str:
    """A SELECT-only role that must give ``password`` (scram-sha-256 in pg_hba.conf for it
    alone; the test server trusts every other role); returns its name."""
    role = "pw_" + uuid.uuid4().hex[:8]
    with psycopg.connect(database_uri, autocommit=True) as c:
        c.execute(role_statements(role, "public", tables))
        c.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(password))
        )
        hba = Path(c.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
        hba.write_text(f"local all {role} scram-sha-256\n" + hba.read_text())
        c.execute("SELECT pg_reload_conf()")
    return role


def differences(
    a: Any, b: Any, path: str = "", *, skip: frozenset[str] = frozenset(), rel: float = 1e-9
) -> list[str]:
    """Where two JSON values differ: floats beyond ``rel`` (relative), anything else unequal;
    keys in ``skip`` (SQL text, timings) are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b))
            if k not in skip
            for d in differences(a.get(k), b.get(k), f"{path}.{k}", skip=skip, rel=rel)
        ]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]", skip=skip, rel=rel)
        ]
    numbers = (int, float)
    if (isinstance(a, float) or isinstance(b, float)) and not isinstance(a, bool | str):
        if not isinstance(a, numbers) or not isinstance(b, numbers) or isinstance(b, bool):
            return [f"{path}: {a!r} vs {b!r}"]
        return [] if abs(a - b) <= rel * max(1.0, abs(a), abs(b)) else [f"{path}: {a!r} vs {b!r}"]
    if isinstance(a, str) and isinstance(b, str) and _same_text(a, b):
        return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)")


def _same_text(a: str, b: str) -> bool:
    """Two texts that say the same figures: the words equal, each printed number equal or one
    unit apart in its last printed digit (two sums equal to 1e-9 can round either side of a
    half: 21.65% printed as 21.6% or 21.7%)."""
    pa, pb = _NUMBER.split(a), _NUMBER.split(b)
    if len(pa) != len(pb):
        return False
    for i, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if i % 2 == 0 or x == y:
            if x != y:
                return False
            continue
        places = len(x.split(".")[1]) if "." in x else 0
        if places != (len(y.split(".")[1]) if "." in y else 0):
            return False
        unit = 10.0**-places
        if abs(float(x.replace(",", "")) - float(y.replace(",", ""))) > unit * 1.000001:
            return False
    return True

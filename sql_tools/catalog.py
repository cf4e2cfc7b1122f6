"""The catalogue stored inside every metric-drilldown DuckDB file.

The loader writes it (schema ``_drilldown``) in the same transaction as the tables it loads;
the tools read it on a read-only connection. User tables live in ``main``; the ``_drilldown``
schema is never addressable through a tool.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Literal

import duckdb
from pydantic import BaseModel, Field

META_SCHEMA = "_drilldown"
CATALOG_VERSION = 1

Scalar = str | int | float | bool | None
Role = Literal["time", "dimension", "measure", "identifier", "other"]
Kind = Literal["number", "text", "date", "timestamp", "boolean", "other"]


INTEGER_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
    }
)
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL", "BIGNUM", "VARINT"})


def kind_of(duck_type: str) -> Kind:
    """Map a DuckDB type string to a coarse kind.

    Args:
        duck_type: A type as DuckDB prints it, e.g. ``BIGINT``, ``DECIMAL(10,2)``, ``VARCHAR``.

    Returns:
        ``number``, ``text``, ``date``, ``timestamp``, ``boolean`` or ``other``.
    """
    t = duck_type.upper()
    if t in INTEGER_TYPES or t in FLOAT_TYPES or t.startswith("DECIMAL"):
        return "number"
    if t.startswith("VARCHAR"):
        return "text"
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP") or t == "DATETIME":
        return "timestamp"
    if t == "BOOLEAN":
        return "boolean"
    return "other"


def quote_ident(name: str) -> str:
    """Quote ``name`` as a DuckDB identifier (``"`` doubled inside)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """Quote ``text`` as an SQL string literal (``'`` doubled inside)."""
    return "'" + text.replace("'", "''") + "'"


class ColumnInfo(BaseModel):
    """A loaded column: its safe name and the header text it came from."""

    name: str = Field(description="Column name in the database (what tools accept).")
    label: str = Field(description="Original header text from the file (untrusted display text).")


class LoadRecord(BaseModel):
    """How one file became one table."""

    table: str
    source: str = Field(description="Path of the file as given to the loader.")
    file_name: str
    sha256: str = Field(description="SHA-256 of the file's bytes as stored on disk.")
    format: Literal["csv", "csv.gz", "parquet"]
    rows: int
    bytes: int = Field(description="Bytes read (after decompression).")
    encoding: str = "utf-8"
    delimiter: str | None = None
    reading: dict[str, str | bool] = Field(
        default={},
        description="The options given that change how the file is read (encoding, "
        "delimiter, decimal_comma, date_format); the same bytes read otherwise are reloaded.",
    )
    columns: list[ColumnInfo]
    warnings: list[str] = []
    loaded_at: datetime


class ColumnProfile(BaseModel):
    """What a column holds, measured over the whole table."""

    name: str
    label: str
    type: str = Field(description="DuckDB type, e.g. BIGINT, DOUBLE, VARCHAR, DATE.")
    kind: Kind
    null_count: int
    null_rate: float
    distinct_count: int
    distinct_exact: bool = Field(description="False when the count is an estimate (large columns).")
    min: Scalar = None
    max: Scalar = None
    samples: list[Scalar] = Field(default=[], description="Up to 5 most frequent values.")
    mixed_type: bool = False
    mixed_note: str | None = None
    role: Role


class TableProfile(BaseModel):
    """Profile of one loaded table."""

    name: str
    row_count: int
    columns: list[ColumnProfile]

    def column(self, name: str) -> ColumnProfile | None:
        """The profile of ``name`` (exact), or None."""
        return next((c for c in self.columns if c.name == name), None)


class JoinKey(BaseModel):
    """A many-to-one join verified by value containment: every ``from`` row finds at most one ``to`` row."""

    from_table: str
    from_column: str
    to_table: str
    to_column: str
    containment: float = Field(
        description="Share of distinct non-null from-values found in to_column."
    )


class Catalog(BaseModel):
    """Everything the loader recorded about a database file."""

    version: int = CATALOG_VERSION
    loads: dict[str, LoadRecord] = {}
    profiles: dict[str, TableProfile] = {}
    join_keys: list[JoinKey] = []


_DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {META_SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {META_SCHEMA}.tables ("
    " name VARCHAR PRIMARY KEY, sha256 VARCHAR NOT NULL, load JSON NOT NULL, profile JSON)",
    f"CREATE TABLE IF NOT EXISTS {META_SCHEMA}.join_keys (doc JSON NOT NULL)",
)


def ensure_catalog(con: duckdb.DuckDBPyConnection) -> None:
    """Create the catalogue tables if they are missing (writer connections only)."""
    for stmt in _DDL:
        con.execute(stmt)


def has_catalog(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the database holds a metric-drilldown catalogue."""
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
        [META_SCHEMA, "tables"],
    ).fetchone()
    return bool(row and row[0])


def write_load(con: duckdb.DuckDBPyConnection, record: LoadRecord) -> None:
    """Insert or replace the load record of ``record.table`` (clears its stale profile)."""
    con.execute(f"DELETE FROM {META_SCHEMA}.tables WHERE name = ?", [record.table])
    con.execute(
        f"INSERT INTO {META_SCHEMA}.tables (name, sha256, load, profile) VALUES (?, ?, ?, NULL)",
        [record.table, record.sha256, record.model_dump_json()],
    )


def write_profile(con: duckdb.DuckDBPyConnection, profile: TableProfile) -> None:
    """Store the profile of an already recorded table."""
    con.execute(
        f"UPDATE {META_SCHEMA}.tables SET profile = ? WHERE name = ?",
        [profile.model_dump_json(), profile.name],
    )


def write_join_keys(con: duckdb.DuckDBPyConnection, keys: list[JoinKey]) -> None:
    """Replace the stored join keys."""
    con.execute(f"DELETE FROM {META_SCHEMA}.join_keys")
    for k in keys:
        con.execute(f"INSERT INTO {META_SCHEMA}.join_keys (doc) VALUES (?)", [k.model_dump_json()])


def read_catalog(con: duckdb.DuckDBPyConnection) -> Catalog:
    """Read the catalogue; an empty one when the file was not written by the loader."""
    if not has_catalog(con):
        return Catalog()
    cat = Catalog()
    for name, load, profile in con.execute(
        f"SELECT name, load, profile FROM {META_SCHEMA}.tables ORDER BY name"
    ).fetchall():
        cat.loads[name] = LoadRecord.model_validate_json(load)
        if profile is not None:
            cat.profiles[name] = TableProfile.model_validate_json(profile)
    for (doc,) in con.execute(f"SELECT doc FROM {META_SCHEMA}.join_keys").fetchall():
        cat.join_keys.append(JoinKey.model_validate_json(doc))
    return cat


def jsonable(value: Any) -> Scalar:
    """Map a DuckDB value to a JSON-safe scalar: non-finite floats become None, dates ISO text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return jsonable(float(value))
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


__all__ = [
    "META_SCHEMA",
    "Catalog",
    "ColumnInfo",
    "ColumnProfile",
    "JoinKey",
    "LoadRecord",
    "TableProfile",
    "ensure_catalog",
    "has_catalog",
    "jsonable",
    "kind_of",
    "quote_ident",
    "read_catalog",
    "write_join_keys",
    "write_load",
    "write_profile",
]

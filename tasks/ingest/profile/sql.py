"""How the profile reads the database: quoted table references, and every result fetched whole
(DuckDB refuses relation work on a connection with a pending result)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from sql_tools.catalog import (
    quote_ident as quote,
)

USER_SCHEMA = "main"


def _table_ref(table: str, schema: str = USER_SCHEMA) -> str:
    return f"{quote(schema)}.{quote(table)}"


def _fetch_all(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """Run ``sql`` and fetch every row, so no result stays pending on the caller's connection."""
    return con.execute(sql, list(params)).fetchall()


__all__ = ["USER_SCHEMA", "quote"]

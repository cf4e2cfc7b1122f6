"""Restricted, read-only SQL tools over a loaded DuckDB file, or over tables read where they are
in Postgres (``PostgresContext``): the only road to the data.

The names below are the package's public surface: the layers above import from ``sql_tools``,
never from its ``_`` modules. The Postgres names load their module (and pyarrow) when first used.
This package imports nothing of the product's other packages (see ``tests/test_layout.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sql_tools._context import Column, Limits, QueryOutput, Schema, ToolContext, limit_address_space
from sql_tools._errors import (
    LoadError,
    QueryRejected,
    QueryTimeout,
    ResourceLimit,
    SqlToolError,
    ToolInputError,
    one_line,
    short,
)
from sql_tools._names import column_alias, private
from sql_tools._sql import (
    MAX_SEGMENT_COLUMNS,
    Agg,
    Filter,
    FilterOp,
    Measure,
    Params,
    Source,
    SourceQuery,
    StrictModel,
    filter_condition,
    finite_or_null,
    ident,
    label_value,
    may_be_non_finite,
    measure_expr,
    non_finite_counts,
    non_finite_text,
    to_sql,
    typed_value,
    where_clause,
)
from sql_tools.reader import CellQuery, Cells, ContextReader, OnCells, Provenance, Reader
from sql_tools.registry import SQL_TOOLS, Registry, ToolSpec

if TYPE_CHECKING:
    from sql_tools._postgres import (
        ROW_HASH_SUM,
        PostgresContext,
        is_postgres_url,
        parse_postgres_url,
        role_statements,
        without_password,
    )

_POSTGRES = frozenset(
    {"ROW_HASH_SUM", "PostgresContext", "is_postgres_url", "parse_postgres_url",
     "role_statements", "without_password"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """The Postgres names, from their module on first use."""
    if name in _POSTGRES:
        from sql_tools import _postgres

        return getattr(_postgres, name)
    raise AttributeError(f"module 'sql_tools' has no attribute {name!r}")


__all__ = [
    "MAX_SEGMENT_COLUMNS",
    "ROW_HASH_SUM",
    "SQL_TOOLS",
    "Agg",
    "CellQuery",
    "Cells",
    "Column",
    "ContextReader",
    "Filter",
    "FilterOp",
    "Limits",
    "LoadError",
    "Measure",
    "OnCells",
    "Params",
    "PostgresContext",
    "Provenance",
    "QueryOutput",
    "QueryRejected",
    "QueryTimeout",
    "Reader",
    "Registry",
    "ResourceLimit",
    "Schema",
    "Source",
    "SourceQuery",
    "SqlToolError",
    "StrictModel",
    "ToolContext",
    "ToolInputError",
    "ToolSpec",
    "column_alias",
    "filter_condition",
    "finite_or_null",
    "ident",
    "is_postgres_url",
    "label_value",
    "limit_address_space",
    "may_be_non_finite",
    "measure_expr",
    "non_finite_counts",
    "non_finite_text",
    "one_line",
    "parse_postgres_url",
    "private",
    "role_statements",
    "short",
    "to_sql",
    "typed_value",
    "where_clause",
    "without_password",
]

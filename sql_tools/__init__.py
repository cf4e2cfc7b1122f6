"""Restricted, read-only SQL tools over a loaded DuckDB file, or over tables read where they are
in Postgres (``_postgres.PostgresContext``): the only road to the data.

This package imports nothing of the product's other packages (see ``tests/test_layout.py``).
"""

from sql_tools._context import Limits, ToolContext
from sql_tools._errors import QueryRejected, QueryTimeout, SqlToolError, ToolInputError
from sql_tools.registry import SQL_TOOLS, Registry, ToolSpec

__all__ = [
    "SQL_TOOLS",
    "Limits",
    "QueryRejected",
    "QueryTimeout",
    "Registry",
    "SqlToolError",
    "ToolContext",
    "ToolInputError",
    "ToolSpec",
]

"""Restricted, read-only SQL tools over a loaded DuckDB file: the only road to the data."""

from sql_tools._context import Limits, ToolContext
from sql_tools._errors import QueryRejected, QueryTimeout, SqlToolError, ToolInputError
from sql_tools.registry import TOOLS, ToolSpec, anthropic_tools, call, dispatch

__all__ = [
    "TOOLS",
    "Limits",
    "QueryRejected",
    "QueryTimeout",
    "SqlToolError",
    "ToolContext",
    "ToolInputError",
    "ToolSpec",
    "anthropic_tools",
    "call",
    "dispatch",
]

"""Errors raised by the SQL tool layer.

Every error carries a stable ``code`` that scripts and the agent loop can rely on, and a
one-line ``message`` of at most 500 characters. Text that came from the data or from a
model is quoted with ``!r`` and truncated, never trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_MESSAGE = 500

# Stable error codes (the shared error vocabulary of tools, loader and CLI).
CODES = (
    "unknown_tool",
    "invalid_arguments",
    "unknown_table",
    "unknown_column",
    "invalid_operator",
    "invalid_value",
    "type_mismatch",
    "invalid_period",
    "limit_exceeded",
    "timeout",
    "resource_limit",
    "query_rejected",
    "query_failed",
    "load_error",
    "unsupported_file",
    "database_error",
    "unsafe_role",
    "budget_exceeded",
    "repeated_call",
    "unverified_evidence",
)


def one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    """Collapse ``text`` to a single line of at most ``limit`` characters."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def short(value: object, limit: int = 60) -> str:
    """``repr`` of an untrusted value, truncated for use inside messages."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 4] + "…" + r[-1]


class SqlToolError(Exception):
    """Base class: an error a caller can show as ``{"code", "message"}``."""

    code = "query_failed"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        self.message = one_line(message)
        if code is not None:
            self.code = code
        assert self.code in CODES, self.code
        self.details = details
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The JSON error shape: ``{"error": {"code": ..., "message": ...}}``."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        err.update({k: v for k, v in self.details.items() if v is not None})
        return {"error": err}


class ToolInputError(SqlToolError):
    """Arguments a caller can correct; ``valid_values`` lists what would have been accepted."""

    code = "invalid_arguments"

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid_arguments",
        valid_values: Iterable[str] | None = None,
        field: str | None = None,
    ) -> None:
        vals = list(valid_values) if valid_values is not None else None
        if vals is not None:
            shown = ", ".join(vals[:40]) + (f", … ({len(vals)} in all)" if len(vals) > 40 else "")
            message = f"{message}; valid: {shown}"
        super().__init__(message, code=code, valid_values=vals[:200] if vals else vals, field=field)


class QueryRejected(SqlToolError):
    """The statement guard refused a query (not a single read-only SELECT over known tables)."""

    code = "query_rejected"


class QueryTimeout(SqlToolError):
    """A query ran past its time limit and was interrupted."""

    code = "timeout"


class ResourceLimit(SqlToolError):
    """A query hit the memory limit."""

    code = "resource_limit"


class LoadError(SqlToolError):
    """A file could not be loaded; the message names the file and, where known, the line."""

    code = "load_error"

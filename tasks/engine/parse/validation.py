"""A model's validation error as the parser's one-line :class:`ToolInputError`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from sql_tools import ToolInputError

_T = TypeVar("_T")


def _validated(build: Callable[[], _T], *, what: str, code: str, field: str | None = None) -> _T:
    """Run a model constructor; turn a pydantic ``ValidationError`` into a one-line error."""
    try:
        return build()
    except ValidationError as exc:
        raise ToolInputError(f"{what}: {_first_error(exc)}", code=code, field=field) from None


def _first_error(exc: ValidationError) -> str:
    """``loc: message`` of the first validation error (plus how many more there were)."""
    errors = exc.errors()
    err = errors[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in err["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"

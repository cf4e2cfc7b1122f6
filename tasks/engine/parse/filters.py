"""The filter grammar: ``col op value`` split (syntax only), then resolved and typed against
the live :class:`Schema` into the tools' :class:`Filter`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime

from sql_tools import Column, Filter, FilterOp, Schema, ToolInputError, short
from tasks.engine.parse.columns import _column, _Ref, _resolve, _unquote
from tasks.engine.parse.validation import _validated

FILTER_CODE = "invalid_value"
"""Code for malformed filter values (``invalid_filter`` is not a registered code)."""
MAX_FILTER_CHARS = 64 * 1024

_NAME_PART = r'(?:"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_]*)'
_FILTER_COL_RE = re.compile(rf"\s*(?P<a>{_NAME_PART})(?:\s*\.\s*(?P<b>{_NAME_PART}))?")
_FILTER_OP_RE = re.compile(
    r"""\s*(?:
        (?P<sym>!=|<>|<=|>=|==|=|<|>)
      | (?P<word>is\s+not\s+null|is\s+null|not\s+null|not\s+in|in|between|contains)
        (?![A-Za-z0-9_])
    )""",
    re.X | re.I,
)
_OP_ALIASES: dict[str, FilterOp] = {
    "<>": "!=",
    "==": "=",
    "is not null": "not_null",
    "is null": "is_null",
    "not null": "not_null",
    "not in": "not_in",
}
_OPS_HINT = "=, !=, <, <=, >, >=, in, not in, between, is null, not null, contains"
_QUOTED_RE = re.compile(r'"(?:[^"]|"")*"')
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class _FilterSyntax:
    """A filter split into its parts, before any schema lookup."""

    column: _Ref
    op: FilterOp
    values: list[str]


def _filter_error(text: str, problem: str, code: str = FILTER_CODE) -> ToolInputError:
    return ToolInputError(f"invalid filter {short(text)}: {problem}", code=code, field="filters")


def _split_values(text: str, rest: str) -> list[str]:
    """Comma-separated values; a value in double quotes may hold commas and spaces."""
    values: list[str] = []
    i, n = 0, len(rest)
    while True:
        while i < n and rest[i].isspace():
            i += 1
        if i < n and rest[i] == '"':
            m = _QUOTED_RE.match(rest, i)
            if m is None:
                raise _filter_error(text, "unterminated quoted value")
            values.append(_unquote(m.group()))
            i = m.end()
            while i < n and rest[i].isspace():
                i += 1
            if i < n and rest[i] != ",":
                raise _filter_error(text, "text after a quoted value; separate values with ','")
        else:
            j = rest.find(",", i)
            item = rest[i : n if j < 0 else j].strip()
            if not item:
                raise _filter_error(text, "empty value")
            if '"' in item:
                raise _filter_error(text, f"stray quote in {short(item)}; quote the whole value")
            values.append(_sql_unquoted(item))
            i = n if j < 0 else j
        if i >= n:
            return values
        i += 1  # the comma


def _sql_unquoted(item: str) -> str:
    """``'ios'`` -> ``ios``: SQL habit quotes text values, and a kept quote would match no row.
    One matching pair is stripped; a quote inside a value (``O'Brien``) stays."""
    if len(item) >= 2 and item[0] == item[-1] == "'":
        return item[1:-1]
    return item


def _check_arity(text: str, op: FilterOp, values: list[str]) -> None:
    shown = op.replace("_", " ")
    if op in ("is_null", "not_null"):
        if values:
            raise _filter_error(text, f"'{shown}' takes no value")
    elif op == "between":
        if len(values) != 2:
            raise _filter_error(text, "between takes two values: low,high")
    elif op not in ("in", "not_in") and len(values) != 1:
        raise _filter_error(text, f"'{shown}' takes one value; use 'in' for a list")


def _split_filter(text: str) -> _FilterSyntax:
    """Split ``col op value`` (syntax only)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("filter is empty", code=FILTER_CODE, field="filters")
    if len(text) > MAX_FILTER_CHARS:
        raise _filter_error(text, f"longer than {MAX_FILTER_CHARS} characters")
    m = _FILTER_COL_RE.match(text)
    if m is None:
        raise _filter_error(text, "expected a column name at the start")
    a, b = (_unquote(p) if p and p.startswith('"') else p for p in (m["a"], m["b"]))
    ref = _Ref(a, b) if b is not None else _Ref(None, a)
    op_m = _FILTER_OP_RE.match(text, m.end())
    if op_m is None:
        raise _filter_error(
            text, f"expected an operator after {ref.text!r} ({_OPS_HINT})", code="invalid_operator"
        )
    raw = op_m["sym"] or " ".join(op_m["word"].lower().split())
    op: FilterOp = _OP_ALIASES.get(raw, raw)  # type: ignore[assignment]
    rest = text[op_m.end() :]
    values = _split_values(text, rest) if rest.strip() else []
    if not values and op not in ("is_null", "not_null"):
        raise _filter_error(text, f"'{op.replace('_', ' ')}' needs a value")
    _check_arity(text, op, values)
    return _FilterSyntax(ref, op, values)


def _number(text: str, col: Column, raw: str) -> int | float:
    s = raw.strip()
    if not _NUMBER_RE.fullmatch(s):
        raise _type_mismatch(text, col, raw, "a number")
    if re.fullmatch(r"[+-]?\d+", s):
        return int(s)
    value = float(s)
    if not math.isfinite(value):
        raise _filter_error(text, f"{short(raw)} is not a finite number")
    return value


def _when(text: str, col: Column, raw: str) -> str:
    s = raw.strip()
    try:
        if col.kind == "timestamp" and ("T" in s or " " in s):
            datetime.fromisoformat(s)
        else:
            date.fromisoformat(s)
    except ValueError:
        raise _type_mismatch(text, col, raw, "an ISO date (YYYY-MM-DD)") from None
    return s


def _type_mismatch(text: str, col: Column, raw: str, expected: str) -> ToolInputError:
    return _filter_error(
        text,
        f"column {col.ref!r} is {col.kind} ({col.type}); {short(raw)} is not {expected}",
        code="type_mismatch",
    )


def _typed(text: str, col: Column, raw: str) -> str | int | float | bool:
    """Convert one value by the column kind (dates stay ISO strings; the tools parse them)."""
    if col.kind == "number":
        return _number(text, col, raw)
    if col.kind == "text":
        return raw
    if col.kind == "boolean":
        word = raw.strip().lower()
        if word not in ("true", "false"):
            raise _type_mismatch(text, col, raw, "true or false")
        return word == "true"
    if col.kind in ("date", "timestamp"):
        return _when(text, col, raw)
    raise _filter_error(
        text,
        f"column {col.ref!r} has type {col.type}; only 'is null' / 'not null' apply",
        code="type_mismatch",
    )


def parse_filter(text: str, schema: Schema, table: str) -> Filter:
    """Parse one filter: ``col=v``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``col in a,b``,
    ``col not in a,b``, ``col between lo,hi``, ``col is null``, ``col not null``,
    ``col contains text``.

    Spaces around symbol operators are optional. Values may be double-quoted (``""`` escapes a
    quote) to hold commas or surrounding spaces. Values are converted by the column's kind:
    numbers to int/float, ``true``/``false`` to bool, dates and timestamps checked and kept as ISO
    strings.

    Raises:
        ToolInputError: ``invalid_operator`` (no operator), ``invalid_value`` (malformed value or
            wrong number of values), ``type_mismatch``, ``unknown_table``, ``unknown_column``.
    """
    return _filter_from(_split_filter(text), text, schema, table)


def _filter_from(syntax: _FilterSyntax, text: str, schema: Schema, table: str) -> Filter:
    """The filter whose syntax was split from ``text``, resolved and typed against the schema."""
    base = schema.table(table)
    col = _resolve(schema, base, syntax.column, "filters.column")
    if syntax.op == "contains" and col.kind != "text":
        raise _filter_error(
            text, f"contains needs a text column; {col.ref!r} is {col.kind}", code="type_mismatch"
        )
    typed = [_typed(text, col, v) for v in syntax.values]
    value: object = None
    if syntax.op in ("in", "not_in", "between"):
        value = typed
    elif typed:
        value = typed[0]
    return _validated(
        lambda: Filter(column=col.ref, op=syntax.op, value=value),
        what=f"invalid filter {short(text)}",
        code=FILTER_CODE,
        field="filters",
    )


def _canonical_filter(schema: Schema, table: str, f: Filter) -> Filter:
    """``f`` with its column resolved against ``table`` (canonical reference)."""
    col = _column(schema, table, f.column, "filters.column")
    return f if col.ref == f.column else f.model_copy(update={"column": col.ref})


def _checked_filter(f: Filter, schema: Schema, table: str) -> Filter:
    """A filter in the tools' form, its column resolved (values are type-checked when bound)."""
    col = _column(schema, schema.table(table), f.column, "filters.column")
    if f.op == "contains" and col.kind != "text":
        raise ToolInputError(
            f"contains needs a text column; {col.ref!r} is {col.kind}", code="type_mismatch"
        )
    return f.model_copy(update={"column": col.ref})

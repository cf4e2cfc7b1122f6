"""Columns as users write them (``name``, ``table.name``, ``"quoted"``), resolved against the
live :class:`Schema`; a misspelled name is refused with the closest column.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from sql_tools import Column, Schema, ToolInputError, short


def _unquote(quoted: str) -> str:
    """Strip the surrounding double quotes and undo ``""`` escapes."""
    return quoted[1:-1].replace('""', '"')


@dataclass(frozen=True)
class _Ref:
    """A column as written: ``name`` or ``table.name``."""

    table: str | None
    name: str

    @property
    def text(self) -> str:
        return f"{self.table}.{self.name}" if self.table else self.name

    def key_for(self, base: str) -> str:
        """The reference to resolve with ``base`` as the base table (``base.x`` -> ``x``)."""
        if self.table is not None and self.table.lower() == base.lower():
            return self.name
        return self.text


def _resolve(schema: Schema, table: str, ref: _Ref, field_name: str = "metric") -> Column:
    return _column(schema, table, ref.key_for(table), field_name)


def _column(schema: Schema, table: str, ref: str, field_name: str) -> Column:
    """``schema.column``, whose refusal of a misspelled name also names the closest column:
    a list of every column does not show that ``revenu`` was meant to be ``revenue``."""
    try:
        return schema.column(table, ref, field_name=field_name)
    except ToolInputError as exc:
        if exc.code != "unknown_column" or not isinstance(ref, str):
            raise
        names = [c.ref for c in schema.columns_for(table)]
        close = _closest_name(ref, names)
        hint = f"; closest: {close!r}" if close else ""
        raise ToolInputError(
            f"unknown column {short(ref)} in {field_name} for table {table!r}{hint}",
            code="unknown_column",
            valid_values=names,
            field=field_name,
        ) from None


def _closest_name(name: str, names: Sequence[str]) -> str | None:
    """The name in ``names`` most like ``name`` (case ignored), if any is close."""
    folded = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None

"""The names a tool's SQL gives its outputs, apart from every name a user's table can hold.

A tool's query names what it computes (``baseline``, ``delta``, ``sum_revenue``, the rows
matched) and what it groups by. A user's column can be called anything, ``baseline`` and
``__matched`` included, so no output of the SQL takes a user's name: a computed value is
``__dd_<what>``, a grouped or returned column is ``__dd_g<position>``, and the common table
expressions are ``__dd_<name>``. A user's column only ever appears qualified by its table's
alias (``t0."baseline"``), never as an output's name, so a column named like any output (or
like the prefix) is read as the column it is.

The rows a tool returns keep their public names: :func:`public_rows` maps the private names
back after the query ran. A grouped column whose name a result field already holds (a column
``baseline`` beside the field ``baseline``) is keyed ``<table>.<column>`` in the rows, a name
the tools accept for that column (:meth:`sql_tools._context.Schema.column`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sql_tools.catalog import Scalar

PREFIX = "__dd_"
"""Every name a tool's SQL makes up starts with this."""


def private(name: str) -> str:
    """A computed output's (or a common table expression's) name in SQL."""
    return f"{PREFIX}{name}"


def column_alias(i: int) -> str:
    """The name in SQL of the ``i``-th grouped or returned column."""
    return f"{PREFIX}g{i}"


def row_keys(table: str, refs: Sequence[str], fields: Iterable[str]) -> list[str]:
    """The keys the rows give the columns ``refs`` of ``table``: each column's own name, or
    ``<table>.<column>`` when one of the result's ``fields`` holds that name."""
    taken = set(fields)
    return [f"{table}.{r}" if r in taken else r for r in refs]


def public_rows(
    names: list[str], rows: list[dict[str, Scalar]], public: dict[str, str]
) -> tuple[list[str], list[dict[str, Scalar]]]:
    """``names`` and ``rows`` (keyed by SQL's private names) keyed by their public names."""
    return [public.get(n, n) for n in names], [
        {public.get(k, k): v for k, v in r.items()} for r in rows
    ]

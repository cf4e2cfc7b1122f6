"""An answer the reader gave from the stored cells, held against its source SQL: the statement
that produced it, re-run on the cells, and the source statement that re-computes it, run on the
source, give the same rows (the same columns, read by name; numbers to 1e-9; in any order)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sql_tools import ContextReader, Provenance, ToolContext

REL = 1e-9


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return v


def _key(row: tuple[Any, ...]) -> tuple[str, ...]:
    """A row's order: its values other than floating-point sums (the groups' keys)."""
    return tuple(repr(v) for v in row if not isinstance(v, float))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL, abs_tol=1e-9)
    return a == b


def rows(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(_plain(v) for v in r) for r in found), key=_key)


def assert_same_answer(source: Any, cells: Any, p: Provenance) -> None:
    """``p``'s statement on ``cells`` (the engine's stored cells, still open) gives the rows its
    source statement gives on ``source`` (a tool context)."""
    assert p.sql != p.source_sql
    cur = cells.con.execute(p.sql, p.params)
    columns = [d[0] for d in cur.description or []]
    found = cur.fetchall()
    out = source.run(p.source_sql, p.source_params, max_rows=10_000_000)
    assert sorted(out.columns) == sorted(columns), (out.columns, columns)  # read by name
    at = [columns.index(c) for c in out.columns]
    given = rows([tuple(r[i] for i in at) for r in found])
    want = rows(out.rows)
    assert len(want) == len(given), (p.source_sql, len(want), len(given))
    for w, g in zip(want, given, strict=True):
        assert all(_same(x, y) for x, y in zip(w, g, strict=True)), (p.source_sql, w, g)


@contextmanager
def source_beside(ctx: ToolContext) -> Iterator[ToolContext]:
    """A second connection to ``ctx``'s file with a reader of its own: every number from the
    source (one process opens a file's database once)."""
    twin = ctx.sibling()
    twin.reader = ContextReader(twin)
    try:
        yield twin
    finally:
        twin.close()

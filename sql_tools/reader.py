"""Where every number comes from: a context's reader.

A tool context opens with one reader (:class:`ContextReader`), and every statement the engine
and the tools run on the user's data asks it. It answers the source SQL: from the source, or
from an answer a shared pass computed ahead for that very statement (one read of the source
answering several of the product's fixed queries). Once a question's rows are aggregated to
cells (:meth:`Reader.keep`), it answers what is a sum of those cells from them, with no pass
over the source: the asker gives, beside the source statement, the same numbers as a statement
on the cells (``on_cells``), or None when the cells cannot give them.

Every answer keeps its provenance: the statement that produced it and the source statement
that re-computes it. An answer read from the cells shows the source's SQL and parameters (what
a user re-runs gives the same numbers), and the reader notes both statements
(:attr:`Reader.provenance`); ``tests/engine/test_provenance.py`` holds the two equal.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from sql_tools.catalog import jsonable


@dataclass
class QueryOutput:
    """Rows of one executed query plus what ran."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    sql: str
    params: dict[str, Any]
    elapsed_ms: float


@dataclass(frozen=True)
class Provenance:
    """One answer read from the stored cells: ``sql`` (with ``params``) produced it on the
    cells; ``source_sql`` (with ``source_params``) re-computes it on the source."""

    sql: str
    params: dict[str, Any]
    source_sql: str
    source_params: dict[str, Any]


CellQuery = tuple[exp.Expression, Mapping[str, Any]]
"""A statement on the stored cells: its tree and the values bound to its placeholders."""

OnCells = Callable[[Any], CellQuery | None]
"""Given the stored cells, the statement on them that gives a source statement's numbers, or
None when they cannot."""


class Cells(Protocol):
    """A question's rows aggregated and stored: what answers sums of them."""

    @property
    def closed(self) -> bool:
        """Whether the cells were let go (every statement then reads the source)."""
        ...

    def text(self, tree: exp.Expression, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """A statement on the cells as it runs there: its text and the parameters it uses."""
        ...

    def fetch(
        self, tree: exp.Expression, params: Mapping[str, Any], max_rows: int
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Columns and at most ``max_rows`` rows of a statement on the cells."""
        ...

    def run(self, tree: exp.Expression, params: Mapping[str, Any]) -> Any:
        """The whole result of a statement on the cells, as a ``pyarrow.Table``."""
        ...

    def answer_tool(self, inp: Any, q: Any) -> CellQuery | None:
        """A tool's query (``q``, built from its input ``inp``) as a statement on the cells, or
        None when the cells do not answer tools or cannot give its rows."""
        ...

    def holds(self, table: str, column: str, values: list[str]) -> set[str]:
        """Those of ``values`` the cells hold in ``column`` of ``table`` (so the source does
        too); empty when they cannot say."""
        ...


class Source(Protocol):
    """The connection a reader reads the source through (a tool context)."""

    def run(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> QueryOutput:
        """Guard, then run ``sql``: at most ``max_rows`` rows."""
        ...

    def run_arrow(self, sql: str, params: dict[str, Any] | None = None, *, max_rows: int) -> Any:
        """Guard, then run ``sql``: the whole result as a ``pyarrow.Table``."""
        ...


class Reader(Protocol):
    """What answers the statements of an investigation (see the module's docstring)."""

    def read(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        max_rows: int,
        on_cells: OnCells | None = None,
    ) -> QueryOutput:
        """The rows of source statement ``sql`` (at most ``max_rows``): an answer held for it,
        else from the cells (``on_cells``), else from the source."""
        ...

    def read_arrow(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        max_rows: int,
        on_cells: OnCells | None = None,
    ) -> Any:
        """The whole result of ``sql`` as a ``pyarrow.Table``: from the cells (``on_cells``),
        else from the source (refused past ``max_rows`` rows)."""
        ...

    def holds(self, table: str, column: str, values: list[str]) -> set[str]:
        """Those of ``values`` the cells hold in ``column`` of ``table``: empty without cells."""
        ...

    def hold(self, out: QueryOutput) -> None:
        """Keep ``out`` as the answer of its own ``sql`` and ``params``, computed ahead by a
        shared pass: the statement then reads nothing (once)."""
        ...

    def peek(self, sql: str, params: Mapping[str, Any]) -> QueryOutput | None:
        """The answer held for ``sql`` with ``params``, left held (or None)."""
        ...

    def keep(self, cells: Cells | None) -> None:
        """Answer sums of ``cells`` from them from now on (None: read the source)."""
        ...

    @property
    def provenance(self) -> list[Provenance]:
        """The answers read from the cells, oldest first (the last :data:`MAX_NOTED`)."""
        ...

    def on(self, source: Source) -> Reader:
        """The same reader (its held answers and cells) reading the source through ``source``
        (a second connection to the same data)."""
        ...


class HeldAnswers:
    """Results a shared pass computed ahead for statements the product would otherwise run on
    their own, by SQL text and parameters: one read of the source answers several of its fixed
    queries. A statement is taken once, and keeps its own SQL and parameters, so what users are
    shown to re-run is the statement whose rows they get."""

    MAX_HELD = 16
    """Answers kept at most (the oldest go first): a long-lived connection whose questions are
    checked but never investigated holds no more than these."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], Any] = {}

    @staticmethod
    def _key(sql: str, params: Mapping[str, Any]) -> tuple[str, str]:
        return sql, json.dumps({k: jsonable(v) for k, v in params.items()}, sort_keys=True)

    def hold(self, out: Any) -> None:
        """Keep ``out`` (a ``QueryOutput``) as the answer of its own ``sql`` and ``params``."""
        with self._lock:
            self._held[self._key(out.sql, out.params)] = out
            while len(self._held) > self.MAX_HELD:
                del self._held[next(iter(self._held))]

    def peek(self, sql: str, params: Mapping[str, Any]) -> Any:
        """The held answer of ``sql`` with ``params``, left held (or None)."""
        with self._lock:
            return self._held.get(self._key(sql, params))

    def take(self, sql: str, params: Mapping[str, Any]) -> Any:
        """The held answer of ``sql`` with ``params`` (then forgotten), or None."""
        with self._lock:
            return self._held.pop(self._key(sql, params), None)


MAX_NOTED = 10_000
"""Answers from the cells whose provenance a reader keeps (the oldest go first)."""


class _State:
    """What the readers of one data's connections share: the held answers and the cells."""

    def __init__(self) -> None:
        self.held = HeldAnswers()
        self.cells: Cells | None = None
        self.noted: deque[Provenance] = deque(maxlen=MAX_NOTED)


class ContextReader:
    """The :class:`Reader` of a tool context: the source through the context's connection, the
    answers held ahead, and the cells once kept."""

    def __init__(self, source: Source, state: _State | None = None) -> None:
        self._source = source
        self._state = state if state is not None else _State()

    def on(self, source: Source) -> ContextReader:
        return ContextReader(source, self._state)

    def keep(self, cells: Cells | None) -> None:
        self._state.cells = cells

    def hold(self, out: QueryOutput) -> None:
        self._state.held.hold(out)

    def peek(self, sql: str, params: Mapping[str, Any]) -> QueryOutput | None:
        found: QueryOutput | None = self._state.held.peek(sql, params)
        return found

    @property
    def provenance(self) -> list[Provenance]:
        return list(self._state.noted)

    def _cells(self, on_cells: OnCells | None) -> tuple[Cells, CellQuery] | None:
        cells = self._state.cells
        if on_cells is None or cells is None or cells.closed:
            return None
        query = on_cells(cells)
        return None if query is None else (cells, query)

    def _note(self, cells: Cells, query: CellQuery, sql: str, params: Mapping[str, Any]) -> None:
        text, used = cells.text(*query)
        source_params = {k: jsonable(v) for k, v in params.items()}
        self._state.noted.append(Provenance(text, used, sql, source_params))

    def read(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        max_rows: int,
        on_cells: OnCells | None = None,
    ) -> QueryOutput:
        held: QueryOutput | None = self._state.held.take(sql, params)
        if held is not None:
            return held
        found = self._cells(on_cells)
        if found is None:
            return self._source.run(sql, dict(params), max_rows=max_rows)
        cells, query = found
        start = time.perf_counter()
        columns, rows = cells.fetch(*query, max_rows)
        elapsed = (time.perf_counter() - start) * 1000
        self._note(cells, query, sql, params)
        return QueryOutput(columns, rows, sql, {k: jsonable(v) for k, v in params.items()}, elapsed)

    def read_arrow(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        max_rows: int,
        on_cells: OnCells | None = None,
    ) -> Any:
        found = self._cells(on_cells)
        if found is None:
            return self._source.run_arrow(sql, dict(params), max_rows=max_rows)
        cells, query = found
        table = cells.run(*query)
        self._note(cells, query, sql, params)
        return table

    def holds(self, table: str, column: str, values: list[str]) -> set[str]:
        cells = self._state.cells
        if cells is None or cells.closed:
            return set()
        return cells.holds(table, column, values)

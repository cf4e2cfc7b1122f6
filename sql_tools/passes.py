"""The pass ledger: how many times an investigation reads each of the user's tables.

A warehouse bills for every scan of a table, and a large table costs time on any database, so
the number of passes over the source is a figure of the product, reported in ``result.json``
(``stats.passes``). Every statement on the user's tables runs through a tool context, whose
statement guard parses it and returns the tables it reads; the context adds them here. A
reference to a table in a statement is one pass over its rows (a self-join is two). The
product's own fixed queries (the data's fingerprint, the profile of a table read in place)
count too.

Reads are filed under the step that made them (:meth:`Passes.during`): opening the data, the
engine, the hypotheses, the last check of the findings, the report. Contexts that share a
connection (:meth:`~sql_tools._context.ToolContext.sibling`) share the ledger.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from sql_tools.reader import HeldAnswers

__all__ = ["OPEN", "HeldAnswers", "Passes"]

OPEN = "open"
"""The step before the question is asked: the data's fingerprint and a table's profile."""


class Passes:
    """Reads of each source table, by step. Safe to add to from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[str, Counter[str]] = {}
        self.step = OPEN

    def add(self, reads: Mapping[str, int]) -> None:
        """Count one statement's reads (table -> references) under the current step."""
        if not reads:
            return
        with self._lock:
            self._steps.setdefault(self.step, Counter()).update(reads)

    def add_each(self, tables: Iterable[str]) -> None:
        """Count one read of each of ``tables`` (a statement that reads every table once)."""
        self.add(Counter(tables))

    @contextmanager
    def during(self, step: str) -> Iterator[None]:
        """File the reads made inside the block under ``step`` (then back to the step before)."""
        before, self.step = self.step, step
        try:
            yield
        finally:
            self.step = before

    def by_table(self) -> dict[str, int]:
        """Reads of each table over every step."""
        with self._lock:
            total: Counter[str] = Counter()
            for counts in self._steps.values():
                total.update(counts)
        return dict(sorted(total.items()))

    def by_step(self) -> dict[str, dict[str, int]]:
        """Reads of each table, per step (in the order the steps first read)."""
        with self._lock:
            return {step: dict(sorted(c.items())) for step, c in self._steps.items()}

    def stats(self) -> dict[str, dict[str, object]]:
        """``{"tables": {table: reads}, "steps": {step: {table: reads}}}`` for result.json."""
        return {"tables": self.by_table(), "steps": self.by_step()}

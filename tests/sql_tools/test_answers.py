"""Answers a shared pass computed ahead (sql_tools.passes.HeldAnswers): a statement gets the rows
held for its own SQL and parameters, once, and a connection keeps only a few."""

from __future__ import annotations

from datetime import date

from sql_tools import QueryOutput
from sql_tools.passes import HeldAnswers


def _out(sql: str, day: str = "2024-03-04") -> QueryOutput:
    return QueryOutput(["n"], [(1,)], sql, {"p0": day}, 0.0)


def test_an_answer_is_taken_once_by_its_own_sql_and_parameters():
    answers = HeldAnswers()
    held = _out("SELECT count(*) FROM t WHERE d >= $p0")
    answers.hold(held)
    assert answers.take(held.sql, {"p0": date(2024, 3, 5)}) is None  # other parameters
    assert answers.take("SELECT count(*) FROM t", {"p0": date(2024, 3, 4)}) is None
    assert answers.take(held.sql, {"p0": date(2024, 3, 4)}) is held  # bound values as run
    assert answers.take(held.sql, {"p0": date(2024, 3, 4)}) is None  # then forgotten


def test_a_connection_holds_a_few_answers_the_newest_kept():
    answers = HeldAnswers()
    for i in range(HeldAnswers.MAX_HELD + 4):
        answers.hold(_out(f"SELECT {i}"))
    assert answers.take("SELECT 0", {"p0": "2024-03-04"}) is None
    newest = f"SELECT {HeldAnswers.MAX_HELD + 3}"
    assert answers.take(newest, {"p0": "2024-03-04"}) is not None

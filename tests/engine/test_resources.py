"""What the engine does at the edges of its resources and its arithmetic: a file wider than any
search can combine, many dimensions, and a baseline of zero."""

from __future__ import annotations

from datetime import date, timedelta

from sql_tools import ToolContext
from tasks.engine.explain import explain_change
from tasks.engine.parse import build_question
from tasks.report.markdown import render


def _days_csv(rows_per_day: int, value: "callable[[date, int], int]") -> str:
    """date, platform, purchases over the 14 days from 2024-03-04."""
    lines = ["date,platform,purchases"]
    for i in range(14):
        day = date(2024, 3, 4) + timedelta(days=i)
        for r in range(rows_per_day):
            lines.append(f"{day},{'web' if r % 2 else 'ios'},{value(day, r)}")
    return "\n".join(lines) + "\n"


def test_a_zero_baseline_says_why_the_change_has_no_relative_size(make_db):
    # nothing was bought in the first week: the move has a size, but no relative one
    text = _days_csv(4, lambda day, r: 0 if day < date(2024, 3, 11) else 3 + r)
    db = make_db(sales=text)
    with ToolContext(db) as ctx:
        q = build_question(
            ctx.schema,
            metric="sum(purchases)",
            baseline="2024-03-04:2024-03-10",
            comparison="2024-03-11:2024-03-17",
        )
        e = explain_change(ctx, q)
    assert e.baseline.value == 0 and e.change.absolute > 0
    assert e.change.relative is None
    note = "the baseline is 0, so the change has no relative size"
    assert note in e.notes
    assert note in render(e)

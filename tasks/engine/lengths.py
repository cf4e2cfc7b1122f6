"""Periods of different lengths: when two calendar periods (months, quarters, years) are the
business's own periods although their days differ, and the note their totals carry."""

from __future__ import annotations

from datetime import timedelta

from tasks.engine.spec import DateRange, Question


def days_text(n: int) -> str:
    return f"{n} day" if n == 1 else f"{n} days"


def whole_months(r: DateRange) -> int | None:
    """How many whole calendar months ``r`` spans (it starts on a 1st and ends on a month's
    last day), else None."""
    if r.start.day != 1 or (r.end + timedelta(days=1)).day != 1:
        return None
    return (r.end.year - r.start.year) * 12 + r.end.month - r.start.month + 1


def same_months(b: DateRange, c: DateRange) -> bool:
    months = whole_months(b)
    return months is not None and months == whole_months(c)


def length_notes(q: Question) -> list[str]:
    """The note a total over calendar periods of different lengths carries (the question's
    check lets them through): by how many days they differ, and how to compare per day."""
    b, c = q.periods.baseline, q.periods.comparison
    if not isinstance(b, DateRange) or not isinstance(c, DateRange) or b.days == c.days:
        return []
    if q.metric.kind == "ratio" or q.metric.grain == "day" or not same_months(b, c):
        return []
    longer = "comparison" if c.days > b.days else "baseline"
    return [
        f"the periods differ in length by {days_text(abs(c.days - b.days))} (baseline "
        f"{days_text(b.days)}, comparison {days_text(c.days)}): the totals include the {longer}'s extra "
        "days; --grain day compares the average per day instead"
    ]

"""The data's grain: how far apart its time values are (one row a day, a week, a month, a quarter,
a year), told from the dates that have rows.

Monthly data has rows on one date a month (the 1st, or the month's last day), weekly data on one
weekday, 7 days apart. The checks judge missing data in the grain's units (a month with no rows
in monthly data, not the 29 other days of it), and the change's test pairs the grain's units.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal

import numpy as np

from sql_tools import ToolContext

Unit = Literal["day", "week", "month", "quarter", "year"]

PLURAL = {"day": "days", "week": "weeks", "month": "months", "quarter": "quarters", "year": "years"}
ADJECTIVE = {
    "day": "daily",
    "week": "weekly",
    "month": "monthly",
    "quarter": "quarterly",
    "year": "yearly",
}
MIN_VALUES = 3
"""Distinct dates needed to tell a grain coarser than a day (two dates 7 days apart may be
chance)."""


@dataclass(frozen=True)
class Grain:
    """The unit of the data's time values, and which dates stand for one unit."""

    unit: Unit = "day"
    weekday: int | None = None
    """Weekly data: the weekday every date falls on (Monday 0)."""
    month_end: bool = False
    """Monthly and coarser data: dated on the unit's last day, not its first."""

    @property
    def plural(self) -> str:
        return PLURAL[self.unit]

    @property
    def adjective(self) -> str:
        return ADJECTIVE[self.unit]

    def stands_for_unit(self, d: date) -> bool:
        """Whether ``d`` is the date this grain gives one unit (any date for a daily grain)."""
        if self.unit == "day":
            return True
        if self.unit == "week":
            return d.weekday() == self.weekday
        edge = (d + timedelta(days=1)).day == 1 if self.month_end else d.day == 1
        if not edge:
            return False
        month = d.month
        if self.unit == "month":
            return True
        if self.unit == "quarter":
            return (month % 3 == 0) if self.month_end else (month % 3 == 1)
        return month == (12 if self.month_end else 1)

    def span(self, d: date) -> tuple[date, date]:
        """The first and last day of the unit ``d`` stands for (``d`` itself for a daily grain)."""
        if self.unit == "day":
            return d, d
        if self.unit == "week":
            return d, d + timedelta(days=6)
        months = {"month": 1, "quarter": 3, "year": 12}[self.unit]
        if self.month_end:
            first = _add_months(d.replace(day=1), 1 - months)
            return first, d
        return d, _add_months(d, months) - timedelta(days=1)

    def units(self, start: date, end: date) -> list[date]:
        """The dates standing for one unit from ``start`` to ``end`` (both included)."""
        n = (end - start).days + 1
        return [d for d in (start + timedelta(days=i) for i in range(n)) if self.stands_for_unit(d)]

    def buckets(self, days: Sequence[date]) -> np.ndarray:
        """For each of ``days`` (a period's consecutive days), the index of the unit it falls in:
        the last date standing for a unit on or before it (days before the first such date
        belong to the first unit)."""
        out = np.zeros(len(days), dtype=np.int64)
        k = -1
        for i, d in enumerate(days):
            if self.stands_for_unit(d):
                k += 1
            out[i] = max(k, 0)
        return out


DAY = Grain()


def _add_months(d: date, months: int) -> date:
    """The first of the month ``months`` after ``d``'s month (``d`` is a month's first day)."""
    k = d.year * 12 + d.month - 1 + months
    return date(k // 12, k % 12 + 1, 1)


def grain_of(days: Iterable[date]) -> Grain:
    """The coarsest grain every date fits: a year, a quarter, a month (all on the unit's first day,
    or all on its last), a week (all on one weekday), else a day. Fewer than :data:`MIN_VALUES`
    dates are taken as daily."""
    distinct = sorted(set(days))
    if len(distinct) < MIN_VALUES:
        return DAY
    for end in (False, True):
        for unit in ("year", "quarter", "month"):
            g = Grain(unit=unit, month_end=end)  # type: ignore[arg-type]
            if all(g.stands_for_unit(d) for d in distinct):
                return g
    weekdays = {d.weekday() for d in distinct}
    if len(weekdays) == 1:
        return Grain(unit="week", weekday=weekdays.pop())
    return DAY


def profiled_dates(ctx: ToolContext, table: str, column: str) -> list[date]:
    """The time column's first, last and most frequent dates over the whole table (from its
    profile, measured at load): what tells the grain beside the periods' own dates."""
    prof = ctx.schema.column_profile(ctx.schema.column(table, column))
    if prof is None:
        return []
    values = [prof.min, prof.max, *prof.samples]
    return [d for d in (_as_date(v) for v in values) if d is not None]


def _as_date(v: Any) -> date | None:
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    if isinstance(v, str):
        try:
            return date.fromisoformat(v[:10])
        except ValueError:
            return None
    return None


def by_unit(
    grain: Grain, days: Sequence[date], values: Sequence[np.ndarray], present: np.ndarray
) -> tuple[list[date], list[np.ndarray], np.ndarray]:
    """A period's per-day ``values`` summed per unit of ``grain``: the unit's date, the sums,
    and whether the unit has rows. A daily grain returns them as they are."""
    if grain.unit == "day":
        return list(days), [np.asarray(v) for v in values], np.asarray(present, dtype=bool)
    idx = grain.buckets(days)
    n = int(idx.max()) + 1 if len(idx) else 0
    firsts = [days[int(np.argmax(idx == k))] for k in range(n)]
    sums = [np.bincount(idx, weights=np.asarray(v, dtype=np.float64), minlength=n) for v in values]
    has = np.bincount(idx, weights=np.asarray(present, dtype=np.float64), minlength=n) > 0
    return firsts, sums, has

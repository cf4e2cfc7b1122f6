"""Periods: dates, date ranges and labels as users write them, the table's time column, and the
baseline and comparison built into :class:`Periods`.
"""

from __future__ import annotations

import re
from datetime import date

from sql_tools import Column, Schema, ToolInputError, short
from tasks.engine.parse.columns import _column
from tasks.engine.parse.validation import _validated
from tasks.engine.spec import DateRange, Periods

MAX_LABEL_CHARS = 200

_DATEISH = re.compile(r"[\d\s:.\-]*\d{4}-\d{1,2}-\d{1,2}[\d\s:.\-]*")
_ISO_DAY = r"(\d{4}-\d{2}-\d{2})"
_RANGE_RE = re.compile(rf"{_ISO_DAY}\s*(?::|\.\.)\s*{_ISO_DAY}")
_DAY_RE = re.compile(_ISO_DAY)


def _period_error(text: str, problem: str) -> ToolInputError:
    return ToolInputError(f"invalid period {short(text)}: {problem}", code="invalid_period")


def _iso_day(text: str, part: str) -> date:
    try:
        return date.fromisoformat(part)
    except ValueError:
        raise _period_error(text, f"{part!r} is not a valid date") from None


def parse_period(text: str) -> DateRange | str:
    """Parse a period: ``YYYY-MM-DD:YYYY-MM-DD`` or ``YYYY-MM-DD..YYYY-MM-DD`` (inclusive), a
    single ``YYYY-MM-DD`` (one day), or else a label (stripped, 1-200 characters).

    Text made only of digits, ``-``, ``:``, ``.`` and spaces that contains a date-like part
    (``2024-13-01:2024-13-07``, ``2024-03-01 2024-03-07``) must be a valid range; it is never
    taken as a label.
    """
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("period is empty", code="invalid_period")
    s = text.strip()
    if len(s) > MAX_LABEL_CHARS:
        raise _period_error(s, f"labels are at most {MAX_LABEL_CHARS} characters")
    return _date_range(s) if _DATEISH.fullmatch(s) else s


def _date_range(s: str) -> DateRange:
    if m := _DAY_RE.fullmatch(s):
        day = _iso_day(s, m[1])
        return DateRange(start=day, end=day)
    m = _RANGE_RE.fullmatch(s)
    if m is None:
        raise _period_error(
            s, "expected YYYY-MM-DD, YYYY-MM-DD:YYYY-MM-DD or YYYY-MM-DD..YYYY-MM-DD"
        )
    start, end = _iso_day(s, m[1]), _iso_day(s, m[2])
    if end < start:
        raise _period_error(s, f"ends ({end}) before it starts ({start})")
    return DateRange(start=start, end=end)


def _label(text: str) -> str:
    """A period label for a period column (never parsed as dates)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("period label is empty", code="invalid_period")
    s = text.strip()
    if len(s) > MAX_LABEL_CHARS:
        raise _period_error(s, f"labels are at most {MAX_LABEL_CHARS} characters")
    return s


def _role(schema: Schema, col: Column) -> str | None:
    prof = schema.column_profile(col)
    return prof.role if prof else None


def detect_time_column(schema: Schema, table: str) -> str:
    """The base table's single date/timestamp column whose profile role is ``time``.

    Without a stored profile every date/timestamp column counts.

    Raises:
        ToolInputError: None (``invalid_period``) or several (``invalid_arguments``, listing them).
    """
    base = schema.table(table)
    found = [
        c.ref
        for c in schema.tables[base]
        if c.kind in ("date", "timestamp") and _role(schema, c) in ("time", None)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ToolInputError(
            f"table {base!r} has no date column; pass --time-column or --period-column",
            code="invalid_period",
            field="time_column",
        )
    raise ToolInputError(
        f"table {base!r} has several date columns; pass --time-column",
        code="invalid_arguments",
        valid_values=found,
        field="time_column",
    )


def _periods(
    schema: Schema,
    table: str,
    *,
    time_column: str | None,
    period_column: str | None,
    baseline: str,
    comparison: str,
) -> Periods:
    """Label periods on ``period_column``, else date ranges on the (detected) time column."""
    if period_column is not None:
        col = _column(schema, table, period_column, "period_column")
        return _validated(
            lambda: Periods(
                period_column=col.ref, baseline=_label(baseline), comparison=_label(comparison)
            ),
            what="invalid periods",
            code="invalid_period",
        )
    ref = time_column if time_column is not None else detect_time_column(schema, table)
    col = _column(schema, table, ref, "time_column")
    if col.kind not in ("date", "timestamp"):
        raise ToolInputError(
            f"type mismatch: time column {col.ref!r} is {col.kind} ({col.type}), not a date",
            code="type_mismatch",
            field="time_column",
        )
    ranges = [
        _dated(which, text) for which, text in (("baseline", baseline), ("comparison", comparison))
    ]
    return _validated(
        lambda: Periods(time_column=col.ref, baseline=ranges[0], comparison=ranges[1]),
        what=f"invalid periods (baseline {ranges[0].label}, comparison {ranges[1].label})",
        code="invalid_period",
    )


def _dated(which: str, text: str) -> DateRange:
    period = parse_period(text)
    if isinstance(period, str):
        raise ToolInputError(
            f"{which} {short(period)} is not a date or date range (YYYY-MM-DD:YYYY-MM-DD); "
            "for labelled periods pass --period-column",
            code="invalid_period",
            field=which,
        )
    return period

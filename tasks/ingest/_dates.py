"""Dates written day and month first (``03/25/2024``, ``25.03.2024``), decided over a whole column.

DuckDB's sniffer picks one such format from its sample and, when every sampled day is 12 or
less, picks day/month without a word: ``03/05/2024`` would become 3 May. So the loader keeps
those columns as text (:func:`day_month_first`) and decides here, over every value of the
column: month/day when some second number is above 12, day/month when some first number is,
and neither (the column stays text, with a warning naming ``--date-format``) when no value
tells. A format given with ``--date-format`` (strftime-style, e.g. ``%m/%d/%Y``) is applied
instead to every text column whose values it reads.

SQL text here holds identifiers and the fixed patterns below only; values are bound parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from sql_tools import LoadError, short
from tasks.ingest._names import quote_ident as q

SEPARATORS = ("/", ".", "-")
_TIME = r"( \d{1,2}:\d{2}(:\d{2}(\.\d{1,6})?)?( ?[AaPp][Mm])?)?"
_TIME_FORMATS = (
    "%H:%M", "%H:%M:%S", "%H:%M:%S.%f", "%I:%M %p", "%I:%M:%S %p", "%I:%M%p", "%I:%M:%S%p",
)  # fmt: skip
_TIME_DIRECTIVES = re.compile(r"%[HIMSfpTRXcrzZ]")
_DAY_MONTH = re.compile(r"%[dme]\W?%[dme]")
EXAMPLE_FORMATS = "%m/%d/%Y or %d/%m/%Y"


def _pattern(sep: str) -> str:
    s = re.escape(sep)
    return rf"(\d{{1,2}}){s}(\d{{1,2}}){s}\d{{4}}{_TIME}"


DATE_LIKE = "|".join(f"({_pattern(s)})" for s in SEPARATORS)
"""Any day-month-year date with one of the separators (a cheap screen before the counts)."""


def day_month_first(fmt: str | None) -> bool:
    """Whether a format DuckDB's sniffer reports writes the day and the month first, in an order
    its sample may not have told (``%d/%m/%Y``, ``%m-%d-%Y``)."""
    return bool(fmt) and _DAY_MONTH.match(fmt or "") is not None


def has_time(fmt: str) -> bool:
    """Whether a strftime-style format reads a time of day (the column is then a TIMESTAMP)."""
    return _TIME_DIRECTIVES.search(fmt) is not None


def check_date_format(con: duckdb.DuckDBPyConnection, fmt: str) -> None:
    """Refuse a ``--date-format`` that cannot read back a date it writes."""
    ok = False
    if "%" in fmt and len(fmt) <= 64:
        try:
            row = con.execute(
                "SELECT try_strptime(strftime(TIMESTAMP '2024-03-25 14:30:05', $f), $f) "
                "= (CASE WHEN $t THEN TIMESTAMP '2024-03-25 14:30:05' "
                "ELSE TIMESTAMP '2024-03-25' END)",
                {"f": fmt, "t": has_time(fmt)},
            ).fetchone()
            ok = bool(row and row[0])
        except duckdb.Error:
            ok = False
    if not ok:
        raise LoadError(
            f"option --date-format {short(fmt, 40)} is not a date format that names a day, a "
            f"month and a year (strftime-style, e.g. {EXAMPLE_FORMATS})",
            code="invalid_arguments",
        )


@dataclass
class DatePlan:
    """Column rewrites: column -> SQL expression over the raw text; and the warnings."""

    exprs: dict[str, str]
    warnings: list[str]


def plan_dates(
    con: duckdb.DuckDBPyConnection,
    target: str,
    columns: list[str],
    tokens: list[str],
    date_format: str | None,
) -> DatePlan:
    """Which text ``columns`` of ``target`` are dates, and how each is converted."""
    plan = DatePlan({}, [])
    for col in columns:
        if date_format is not None:
            _forced(con, target, col, tokens, date_format, plan)
        else:
            _detected(con, target, col, tokens, plan)
    return plan


def _values(c: str) -> str:
    """SQL: the column's non-null values that are not missing-value markers."""
    return f"{c} IS NOT NULL AND NOT list_contains($tokens, trim({c}))"


def _convert(c: str, formats: list[str], typ: str) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in formats)
    value = f"CAST(try_strptime(trim({c}), [{listed}]) AS {typ})"
    return f"CASE WHEN list_contains($tokens, trim({c})) THEN NULL ELSE {value} END"


def _forced(
    con: duckdb.DuckDBPyConnection,
    target: str,
    col: str,
    tokens: list[str],
    fmt: str,
    plan: DatePlan,
) -> None:
    """``--date-format``: a column it reads whole becomes a date; one it reads more than half
    of, but not all, is an error naming a value it cannot read."""
    c = q(col)
    row = con.execute(
        f"SELECT count(*), count(try_strptime(trim({c}), $f)), "
        f"min(CASE WHEN try_strptime(trim({c}), $f) IS NULL THEN {c} END) "
        f"FROM {target} WHERE {_values(c)}",
        {"f": fmt, "tokens": tokens},
    ).fetchone()
    assert row is not None
    values, read, unread = int(row[0]), int(row[1]), row[2]
    if not read:
        return
    if read < values:
        if 2 * read > values:
            raise LoadError(
                f"column {col}: value {short(str(unread), 40)} does not match --date-format "
                f"{fmt} ({read:,} of {values:,} values do); nothing was loaded",
                code="invalid_value",
            )
        return
    typ = "TIMESTAMP" if has_time(fmt) else "DATE"
    plan.exprs[col] = _convert(c, [fmt], typ)
    note = _markers(con, target, c, tokens)
    plan.warnings.append(f"column {col}: read as {typ} with --date-format {fmt}{note}")


def _detected(
    con: duckdb.DuckDBPyConnection, target: str, col: str, tokens: list[str], plan: DatePlan
) -> None:
    """A column whose every value is ``N{sep}N{sep}YYYY`` (a time of day optional), with one
    separator: month/day or day/month, as the numbers above 12 tell."""
    c = q(col)
    t = f"trim({c})"
    counts = ", ".join(f"count_if(regexp_full_match({t}, $p{i}))" for i in range(len(SEPARATORS)))
    params: dict[str, object] = {f"p{i}": _pattern(s) for i, s in enumerate(SEPARATORS)}
    params["tokens"] = tokens
    row = con.execute(
        f"SELECT count(*), {counts} FROM {target} WHERE {_values(c)}", params
    ).fetchone()
    assert row is not None
    values, *matched = (int(v) for v in row)
    hits = [s for s, m in zip(SEPARATORS, matched, strict=True) if values and m == values]
    if not hits:
        return
    sep = hits[0]
    pat = _pattern(sep)
    stats = con.execute(
        f"SELECT max(CAST(regexp_extract({t}, $p, 1) AS INTEGER)), "
        f"max(CAST(regexp_extract({t}, $p, 2) AS INTEGER)), "
        f"count_if(contains({t}, ':')), "
        f"min(CASE WHEN CAST(regexp_extract({t}, $p, 1) AS INTEGER) <= 12 "
        f"AND CAST(regexp_extract({t}, $p, 2) AS INTEGER) <= 12 THEN {t} END) "
        f"FROM {target} WHERE {_values(c)}",
        {"p": pat, "tokens": tokens},
    ).fetchone()
    assert stats is not None
    first, second, timed, example = stats
    if first > 12 and second > 12:
        return  # month/day and day/month mixed: the profile flags the column as mixed
    if first <= 12 and second <= 12:
        plan.warnings.append(
            f"column {col}: dates like {short(str(example), 24)} could be month/day or "
            f"day/month (no value has a day above 12); kept as text. Load with --date-format "
            f"%m{sep}%d{sep}%Y or --date-format %d{sep}%m{sep}%Y"
        )
        return
    order = ("%m", "%d") if second > 12 else ("%d", "%m")
    base = f"{order[0]}{sep}{order[1]}{sep}%Y"
    formats = [base] + [f"{base} {tf}" for tf in _TIME_FORMATS]
    typ = "TIMESTAMP" if timed else "DATE"
    expr = _convert(c, formats, typ)
    bad = con.execute(
        f"SELECT min({c}) FROM {target} WHERE {_values(c)} AND ({expr}) IS NULL",
        {"tokens": tokens},
    ).fetchone()
    if bad and bad[0] is not None:
        plan.warnings.append(
            f"column {col}: looks like {base} dates but {short(str(bad[0]), 24)} is not a "
            "date; kept as text"
        )
        return
    name = "month/day/year" if order[0] == "%m" else "day/month/year"
    plan.exprs[col] = expr
    note = _markers(con, target, c, tokens)
    plan.warnings.append(f"column {col}: {name} dates ({base}) read as {typ}{note}")


def _markers(con: duckdb.DuckDBPyConnection, target: str, c: str, tokens: list[str]) -> str:
    """``; N missing-value marker(s) read as NULL`` when the column holds any, else nothing."""
    row = con.execute(
        f"SELECT count(*) FROM {target} WHERE list_contains($tokens, trim({c}))",
        {"tokens": tokens},
    ).fetchone()
    n = int(row[0]) if row else 0
    return f"; {n:,} missing-value marker(s) read as NULL" if n else ""

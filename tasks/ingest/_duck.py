"""DuckDB side of the loader: read a validated file into a table and tidy its columns.

The loader first reads every file straight into its final table inside the load transaction,
so DuckDB writes each table once. A CSV is read as text and each typed column converted and
checked in the same statement, so that no value changes on the way in (see :func:`_typed`).
A failed statement aborts that transaction, so a read that needs a second attempt (a type
detected from the 20,480-row sample that does not hold a later value exactly, or mixed line
endings) raises :class:`Reread` instead; the caller then rolls back and
builds staging tables in an attached in-memory database in auto-commit mode, where such a read
is retried, and copies the finished tables into the real database inside one transaction.

SQL text here holds identifiers only (quoted by :func:`quote_ident`); every value is a bound
parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from sql_tools import LoadError, short
from tasks.ingest._csv import CsvScan
from tasks.ingest._dates import DATE_LIKE, day_month_first, plan_dates
from tasks.ingest._names import quote_ident as q

NA_TOKENS = ["NA", "N/A", "n/a", "null", "NULL", "NaN", "nan", "-", ""]
_NUM = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
_INT = r"[+-]?\d{1,18}"
_LEADING_ZERO = r"[+-]?0\d+"
_DC_ANY = r"[+-]?(\d+|[1-9]\d{0,2}(\.\d{3})+|[1-9]\d{0,2}( \d{3})+)(,\d+)?"
"""A decimal-comma number: dot or space thousands, the comma optional."""
_TC_ANY = r"[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?"
"""A number with comma thousands and an optional decimal point (``2,510.00``)."""
_TC_INT = r"[+-]?[1-9]\d{0,2}(,\d{3}){1,5}"
_AMBIGUOUS = r"[+-]?[1-9]\d{0,2},\d{3}"  # 1,234: thousands separator or decimal comma?
_NUMBERISH = f"({_NUM})|({_DC_ANY})|({_TC_ANY})"
_PARAMS = {
    "tokens": NA_TOKENS,
    "num": _NUM,
    "int": _INT,
    "lz": _LEADING_ZERO,
    "dc_any": _DC_ANY,
    "tc_any": _TC_ANY,
    "tc_int": _TC_INT,
}
_MATCH = "regexp_full_match(trim({c}), ${p})"
_STATS = {
    "nonnull": "count({c})",
    "tokens": "count_if(list_contains($tokens, trim({c})))",
    "nums": f"count_if({_MATCH.format(c='{c}', p='num')})",
    "ints": f"count_if({_MATCH.format(c='{c}', p='int')})",
    "lead0": f"count_if({_MATCH.format(c='{c}', p='lz')})",
    "dc_any": f"count_if({_MATCH.format(c='{c}', p='dc_any')})",
    "dc_marked": f"count_if({_MATCH.format(c='{c}', p='dc_any')} AND "
    "regexp_matches(trim({c}), '[, ]'))",
    "tc_any": f"count_if({_MATCH.format(c='{c}', p='tc_any')})",
    "tc_ints": f"count_if({_MATCH.format(c='{c}', p='tc_int')} OR "
    f"{_MATCH.format(c='{c}', p='int')})",
    "numberish": f"count_if({_MATCH.format(c='{c}', p='num')} OR "
    f"{_MATCH.format(c='{c}', p='dc_any')} OR {_MATCH.format(c='{c}', p='tc_any')})",
}
"""Per text column: non-null values, NA tokens, and the values of each number form."""


def duck_message(err: BaseException, limit: int = 200, path: Path | None = None) -> str:
    """A short, single-line digest of a DuckDB error (never the offending CSV line itself).

    Args:
        err: The DuckDB exception.
        limit: Maximum length of the digest.
        path: A private temporary path to hide (shown as ``<file>``).
    """
    text = str(err) if path is None else str(err).replace(str(path), "<file>")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.lower().startswith(("original line", "file ="))]
    text = " ".join(keep[:2]) if keep else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


_DIALECT = (
    "header = true, names = ?, delim = ?, quote = '\"', escape = '\"', comment = '', skip = 0, "
    "strict_mode = ?, null_padding = false, ignore_errors = false, compression = 'none', "
    "encoding = 'utf-8', max_line_size = ?"
)
_INEXACT = "drilldown: inexact value in column #"
_INEXACT_COLUMN = re.compile(re.escape(_INEXACT) + r"(\d+)")
_CHECK = "_drilldown_check"
_INTEGER_TYPES = frozenset(
    "TINYINT SMALLINT INTEGER BIGINT HUGEINT UTINYINT USMALLINT UINTEGER UBIGINT UHUGEINT".split()
)
_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_ ]*(\(\d+(, ?\d+)?\))?")
_WITH_ZONE = r"[0-9]:[0-9]{2}(:[0-9]{2})?(\.[0-9]*)?\s*[^\s0-9:.]"
"""A time of day followed by an offset or a zone name (``+05:00``, ``Z``, ``UTC``, ...)."""
_NON_FINITE = r"(?i)[+-]?(inf|infinity|nan)"
_ISO_DATE = "%Y-%m-%d"
"""The format the sniffer reports for ISO dates, which a plain cast reads (faster than strptime)."""


@dataclass(frozen=True)
class _Typed:
    """How one column's text becomes its type, and when that conversion is exact.

    ``convert`` is SQL over ``{r}``, the raw text (NULL for an empty field); ``exact`` is SQL
    over ``{r}`` and ``{c}``, the converted value, true when ``{c}`` stands for ``{r}`` exactly.
    """

    type: str
    convert: str
    exact: str
    reason: str

    def converted(self, raw: str) -> str:
        """SQL converting the text in column ``raw``."""
        return self.convert.replace("{r}", raw)

    def is_exact(self, raw: str, converted: str | None = None) -> str:
        """SQL, true when the text in column ``raw`` converts exactly, else false or NULL;
        ``converted`` names a column that holds :meth:`converted` (None: convert again).

        Not wrapped in ``coalesce``: as a CASE condition, DuckDB then evaluates the costly
        parts of an OR only for the rows whose cheap part fails.
        """
        exact = self.exact.replace("{r}", raw)
        return exact.replace("{c}", converted or f"({self.converted(raw)})")


def _typed(duck_type: str, date_format: str | None, timestamp_format: str | None) -> _Typed | None:
    """The conversion of text to ``duck_type`` (as DuckDB's sniffer chose it) and its check;
    None keeps the column as text (VARCHAR, or a type name this module does not recognise).

    DuckDB's CSV reader converts text it cannot store exactly without a word (``30000.5``
    becomes the BIGINT 30001, ``2024-01-05 10:30`` the DATE 2024-01-05, an offset is dropped
    from a TIMESTAMP), so files are read as text and converted here, where every value is
    checked. Text read with a detected date or timestamp format must match it whole; a format
    that writes the day and the month first keeps the column as text for :func:`fix_columns`.
    """
    t = duck_type.upper()
    if t == "VARCHAR" or not _TYPE_NAME.fullmatch(t):
        return None
    fmt = timestamp_format if t.startswith("TIMESTAMP") else date_format
    if day_month_first(fmt) and t in ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"):
        return None  # month/day or day/month: decided over the whole column (fix_columns)
    if fmt and fmt != _ISO_DATE and t in ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE"):
        literal = "'" + fmt.replace("'", "''") + "'"
        return _Typed(t, f"CAST(TRY_STRPTIME({{r}}, {literal}) AS {t})", "{c} IS NOT NULL", "")
    if t in _INTEGER_TYPES:
        return _Typed(
            t,
            f"TRY_CAST({{r}} AS {t})",
            "{c} IS NOT NULL AND (NOT (contains({r}, '.') OR contains({r}, 'e') OR "
            "contains({r}, 'E')) OR coalesce(TRY_CAST(trim({r}) AS DECIMAL(38,18)) = {c}, true))",
            "not a whole number within its range",
        )
    if t in ("DOUBLE", "FLOAT"):
        return _Typed(
            t,
            f"TRY_CAST({{r}} AS {t})",
            f"{{c}} IS NOT NULL AND (isfinite({{c}}) OR "
            f"regexp_full_match(trim({{r}}), '{_NON_FINITE}'))",
            "beyond its range",
        )
    if t == "DATE":
        return _Typed(
            t,
            "TRY_CAST({r} AS DATE)",
            "{c} IS NOT NULL AND (NOT contains({r}, ':') OR "
            "TRY_CAST(trim({r}) AS TIMESTAMP) = {c})",
            "it has a time of day",
        )
    if t in ("TIMESTAMP", "TIME"):
        return _Typed(
            t,
            f"TRY_CAST(trim({{r}}) AS {t})",
            f"{{c}} IS NOT NULL AND NOT regexp_matches({{r}}, '{_WITH_ZONE}')",
            "it has a time-zone offset or name, which the type would drop",
        )
    if t == "TIMESTAMP WITH TIME ZONE":
        return _Typed(
            t,
            f"TRY_CAST(trim({{r}}) AS {t})",
            f"{{c}} IS NOT NULL AND regexp_matches({{r}}, '{_WITH_ZONE}')",
            "it has no time-zone offset, unlike the column's other values",
        )
    return _Typed(t, f"TRY_CAST({{r}} AS {t})", "{c} IS NOT NULL", "")


Columns = list[tuple[str, _Typed | None]]
"""Each column's name and conversion (None: text, kept as it is)."""


def _sniff(con: duckdb.DuckDBPyConnection, params: list[object], full_sample: bool) -> Columns:
    """Column types as DuckDB's sniffer detects them (from its sample, or from every row)."""
    sample = ", sample_size = -1" if full_sample else ""
    row = con.execute(
        f"SELECT Columns, DateFormat, TimestampFormat FROM sniff_csv(?, {_DIALECT}{sample})",
        params,
    ).fetchone()
    assert row is not None
    detected, date_format, timestamp_format = row
    return [(c["name"], _typed(c["type"], date_format, timestamp_format)) for c in detected]


def _read_csv_sql(target: str, columns: Columns) -> str:
    """``CREATE TABLE target AS ...``: the file read as text with pinned dialect options, each
    typed column converted and checked; an inexact value stops the statement with
    ``error()`` naming the column's position."""
    inner: list[str] = []
    outer: list[str] = []
    for i, (name, typed) in enumerate(columns):
        inner.append(f"{q(name)} AS r{i}")
        if typed is None:
            outer.append(f"r{i} AS {q(name)}")
            continue
        inner.append(f"{typed.converted(q(name))} AS c{i}")
        outer.append(
            f"CASE WHEN r{i} IS NULL THEN NULL WHEN {typed.is_exact(f'r{i}', f'c{i}')} THEN c{i} "
            f"ELSE error('{_INEXACT}{i}') END AS {q(name)}"
        )
    return (
        f"CREATE TABLE {target} AS SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} "
        f"FROM read_csv(?, {_DIALECT}, all_varchar = true))"
    )


def _inexact_column(err: duckdb.Error, columns: Columns) -> str | None:
    """The column an ``error()`` of :func:`_read_csv_sql` names, None for other errors."""
    m = _INEXACT_COLUMN.search(str(err))
    return columns[int(m.group(1))][0] if m and int(m.group(1)) < len(columns) else None


def _first_inexact(
    con: duckdb.DuckDBPyConnection, params: list[object], columns: Columns
) -> tuple[int, str, _Typed, str] | None:
    """``(data row, column, conversion, raw text)`` of the first value that does not convert
    exactly, in file order (a scratch table's row ids keep it); None when there is none."""
    typed = [(i, name, t) for i, (name, t) in enumerate(columns) if t is not None]
    if not typed:
        return None
    keep = ", ".join(f"{q(name)} AS r{i}" for i, name, _ in typed)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {_CHECK} AS SELECT {keep} "
        f"FROM read_csv(?, {_DIALECT}, all_varchar = true)",
        params,
    )
    try:
        bad = [
            (i, f"(r{i} IS NOT NULL AND NOT coalesce({t.is_exact(f'r{i}')}, false))")
            for i, _, t in typed
        ]
        which = " ".join(f"WHEN {b} THEN {i}" for i, b in bad)
        raw = " ".join(f"WHEN {b} THEN r{i}" for i, b in bad)
        row = con.execute(
            f"SELECT rowid, CASE {which} END, CASE {raw} END FROM temp.{_CHECK} "
            f"WHERE {' OR '.join(b for _, b in bad)} ORDER BY rowid LIMIT 1"
        ).fetchone()
    finally:
        con.execute(f"DROP TABLE IF EXISTS temp.{_CHECK}")
    if row is None:
        return None
    name, conversion = columns[row[1]]
    assert conversion is not None
    return int(row[0]) + 1, name, conversion, str(row[2])


_SAMPLE_WARNING = (
    "column types detected from every row (a value after the 20,480-row sample did not fit "
    "the sampled type{where} exactly)"
)
_LENIENT_WARNING = (
    "mixed line endings; DuckDB read the file in lenient mode (every record was checked in "
    "Python and the row count reconciled)"
)


@dataclass
class ReadPlan:
    """How DuckDB reads a CSV: strict mode or not, types from its sample or from every row, and
    the warnings that these choices add."""

    strict: bool = True
    full_sample: bool = False
    warnings: list[str] = field(default_factory=list)


class Reread(Exception):
    """A read inside the load transaction failed in a way that a second read fixes; ``plan`` is
    the read to try next (the retry :func:`stage_csv` would have made)."""

    def __init__(self, plan: ReadPlan) -> None:
        super().__init__(plan)
        self.plan = plan


def stage_csv(
    con: duckdb.DuckDBPyConnection,
    scan: CsvScan,
    path: Path,
    target: str,
    names: list[str],
    *,
    retry: bool = True,
    plan: ReadPlan | None = None,
) -> list[str]:
    """Read a validated CSV into ``target`` (a quoted ``schema.table``); returns warnings.

    Types come from DuckDB's sniffer over its sample first. Every value of a typed column is
    converted from its text and checked (see :func:`_typed`); when one after the sample does
    not fit its type exactly, the table is read again with types detected from every row
    (``sample_size=-1``), so ``30000.5`` in a column of whole numbers makes it DOUBLE. A value
    that still does not fit fails the load, naming its line. DuckDB's strict mode refuses
    files with mixed line endings; those (and only those, as seen by the Python pass) are read
    again with ``strict_mode=false``; the field counts were already checked record by record
    and the row count is reconciled by the caller.

    Args:
        retry: False inside a transaction, where a failed statement cannot be retried: a read
            that would be retried raises :class:`Reread` instead.
        plan: Where to start (from :class:`Reread`); None for a strict read with the sample.
    """
    plan = ReadPlan() if plan is None else replace(plan, warnings=list(plan.warnings))
    for _ in range(3):
        params: list[object] = [str(path), names, scan.delimiter, plan.strict, scan.max_line_bytes]
        columns: Columns = []
        try:
            columns = _sniff(con, params, plan.full_sample)
            con.execute(_read_csv_sql(target, columns), params)
            return plan.warnings
        except duckdb.Error as e:
            column = _inexact_column(e, columns)
            if column is not None or isinstance(e, duckdb.ConversionException):
                if plan.full_sample:
                    raise _inexact_error(con, scan, path, params, columns, e) from None
                plan.full_sample = True
                where = f" of column {column}" if column else ""
                plan.warnings.append(_SAMPLE_WARNING.format(where=where))
            elif plan.strict and scan.mixed_line_ends and "sniffing" in str(e):
                plan.strict = False
                plan.warnings.append(_LENIENT_WARNING)
            else:
                raise _read_error(scan, path, e) from None
        if not retry:
            raise Reread(plan)
    raise LoadError(f"{scan.source.name}: DuckDB could not read the file")


def _inexact_error(
    con: duckdb.DuckDBPyConnection,
    scan: CsvScan,
    path: Path,
    params: list[object],
    columns: Columns,
    err: duckdb.Error,
) -> LoadError:
    """The error for a value that fits no type DuckDB detects from every row, naming its line."""
    found = _first_inexact(con, params, columns)
    if found is None:
        return _read_error(scan, path, err)
    row, column, conversion, raw = found
    why = f" ({conversion.reason})" if conversion.reason else ""
    return LoadError(
        f"{scan.source.name} line {scan.line_of_row(path, row)}: value {short(raw, 40)} in "
        f"column {column} cannot be stored exactly as {conversion.type}, the type detected "
        f"from all its values{why}; nothing was loaded"
    )


def _read_error(scan: CsvScan, path: Path, err: duckdb.Error) -> LoadError:
    return LoadError(
        f"{scan.source.name}: DuckDB could not read the file: {duck_message(err, path=path)}"
    )


def stage_parquet(
    con: duckdb.DuckDBPyConnection, path: Path, name: str, target: str, names: list[str]
) -> None:
    """Read a Parquet file into ``target`` with columns renamed (by position) to ``names``."""
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        if len(described) != len(names):
            raise LoadError(
                f"{name}: DuckDB sees {len(described)} columns, the Parquet schema {len(names)}"
            )
        select = ", ".join(f"{q(d[0])} AS {q(n)}" for d, n in zip(described, names, strict=True))
        con.execute(f"CREATE TABLE {target} AS SELECT {select} FROM read_parquet(?)", [str(path)])
    except duckdb.Error as e:
        raise LoadError(
            f"{name}: DuckDB could not read the file: {duck_message(e, path=path)}"
        ) from None


def row_count(con: duckdb.DuckDBPyConnection, target: str) -> int:
    """``count(*)`` of a staged table."""
    row = con.execute(f"SELECT count(*) FROM {target}").fetchone()
    return int(row[0]) if row else 0


def column_types(con: duckdb.DuckDBPyConnection, target: str) -> list[tuple[str, str]]:
    """``[(name, type)]`` of a staged table in column order."""
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {target}").fetchall()]


def _may_be(con: duckdb.DuckDBPyConnection, target: str, column: str, pattern: str) -> bool:
    """False as soon as one value neither matches ``pattern`` (numbers, dates) nor is a
    missing-value marker.

    A cheap screen before the full statistics: for a genuine text column DuckDB stops at the
    first such row.
    """
    c = q(column)
    row = con.execute(
        f"SELECT 1 FROM {target} WHERE {c} IS NOT NULL AND NOT list_contains(?, trim({c})) "
        f"AND NOT regexp_full_match(trim({c}), ?) LIMIT 1",
        [NA_TOKENS, pattern],
    ).fetchall()
    return not row


def _column_stats(
    con: duckdb.DuckDBPyConnection, target: str, columns: list[str]
) -> dict[str, dict[str, int]]:
    """For each text column: counts of non-null values, NA tokens, and each number form
    (the keys of ``_STATS``)."""
    exprs = [s.format(c=q(c)) for c in columns for s in _STATS.values()]
    row = con.execute(f"SELECT {', '.join(exprs)} FROM {target}", _PARAMS).fetchone()
    assert row is not None
    k = len(_STATS)
    return {
        c: {key: int(v or 0) for key, v in zip(_STATS, row[i * k : (i + 1) * k], strict=True)}
        for i, c in enumerate(columns)
    }


def _tokens_found(con: duckdb.DuckDBPyConnection, target: str, column: str) -> list[str]:
    """The missing-value markers that occur in ``column``."""
    rows = con.execute(
        f"SELECT DISTINCT trim({q(column)}) AS v FROM {target} "
        f"WHERE list_contains(?, trim({q(column)})) ORDER BY v",
        [NA_TOKENS],
    ).fetchall()
    return [r[0] for r in rows]


class _Plan:
    """Column rewrites decided from the stats: column -> (SQL expression, type)."""

    def __init__(self) -> None:
        self.exprs: dict[str, str] = {}
        self.warnings: list[str] = []


def _plan_column(
    con: duckdb.DuckDBPyConnection,
    target: str,
    col: str,
    st: dict[str, int],
    decimal_comma: bool | None,
    plan: _Plan,
) -> None:
    """How a text column of numbers is read: decimal comma, comma thousands, or NA markers.

    A column whose every value reads as a decimal-comma number (``1,5``, ``1.234,5``,
    ``1 234,5``) and one whose every value reads with comma thousands (``2,510.00``,
    ``1,234,567``) are converted when only one of the two readings holds, or when
    ``decimal_comma`` picks it (True: decimal comma; False: comma thousands). A column that
    both readings hold (``1,234``) stays text with a warning naming both options.
    """
    nonnull, tokens = st["nonnull"], st["tokens"]
    if nonnull == 0:
        return
    c = q(col)
    null_if = f"CASE WHEN list_contains($tokens, trim({c})) THEN NULL ELSE {{}} END"
    as_dc = st["dc_marked"] > 0 and st["dc_any"] + tokens == nonnull
    as_tc = st["tc_any"] > 0 and st["nums"] + st["tc_any"] + tokens == nonnull and not st["lead0"]
    if as_dc and (decimal_comma or (decimal_comma is None and not as_tc)):
        plain = f"replace(replace(replace(trim({c}), '.', ''), ' ', ''), ',', '.')"
        plan.exprs[col] = null_if.format(f"CAST({plain} AS DOUBLE)")
        note = _tokens_note(con, target, col, tokens)
        plan.warnings.append(f"column {col}: decimal comma read as DOUBLE ('1,5' = 1.5){note}")
        return
    if as_tc and (decimal_comma is False or (decimal_comma is None and not as_dc)):
        typ = "BIGINT" if st["tc_ints"] == st["nums"] + st["tc_any"] else "DOUBLE"
        plan.exprs[col] = null_if.format(f"CAST(replace(trim({c}), ',', '') AS {typ})")
        note = _tokens_note(con, target, col, tokens)
        plan.warnings.append(
            f"column {col}: ',' read as a thousands separator ('2,510.5' = 2510.5), "
            f"converted to {typ}{note}"
        )
        return
    if as_dc and as_tc and decimal_comma is None:
        plan.warnings.append(
            f"column {col}: values like {_example(con, target, col)} are ambiguous (thousands "
            "separator or decimal comma); kept as text. Load with --no-decimal-comma to read "
            "',' as a thousands separator, or --decimal-comma to read it as the decimal point"
        )
        return
    if decimal_comma is None and st["dc_marked"] and st["tc_any"]:
        if st["numberish"] + tokens == nonnull:
            plan.warnings.append(
                f"column {col}: numbers written with ',' both as the decimal point and as a "
                "thousands separator; kept as text"
            )
            return
    if tokens and st["nums"] and st["nums"] + tokens == nonnull and not st["lead0"]:
        typ = "BIGINT" if st["ints"] == st["nums"] else "DOUBLE"
        plan.exprs[col] = null_if.format(f"CAST(trim({c}) AS {typ})")
        found = ", ".join(short(t, 12) for t in _tokens_found(con, target, col))
        plan.warnings.append(
            f"column {col}: {tokens} missing-value marker(s) ({found}) read as NULL; "
            f"converted to {typ}"
        )


def _example(con: duckdb.DuckDBPyConnection, target: str, col: str) -> str:
    """One value of ``col`` that reads both ways (``'1,234'``), quoted."""
    row = con.execute(
        f"SELECT min(trim({q(col)})) FROM {target} WHERE regexp_full_match(trim({q(col)}), ?)",
        [_AMBIGUOUS],
    ).fetchone()
    return short(str(row[0]), 16) if row and row[0] is not None else "'1,234'"


def _tokens_note(con: duckdb.DuckDBPyConnection, target: str, col: str, tokens: int) -> str:
    if not tokens:
        return ""
    found = ", ".join(short(t, 12) for t in _tokens_found(con, target, col))
    return f"; {tokens} missing-value marker(s) ({found}) read as NULL"


def fix_columns(
    con: duckdb.DuckDBPyConnection,
    target: str,
    decimal_comma: bool | None,
    date_format: str | None = None,
) -> list[str]:
    """Convert text columns that are really numbers (decimal comma, thousands separators, NA
    markers) or dates written day and month first (:mod:`tasks.ingest._dates`); returns warnings.

    Only VARCHAR columns are examined. A column is converted only when every non-null value is
    a number (or a date) of the recognised form or a missing-value marker; genuine text keeps
    the column as text and markers are never nulled in a text column.
    """
    types = column_types(con, target)
    text = [n for n, t in types if t == "VARCHAR"]
    numeric = [n for n in text if _may_be(con, target, n, _NUMBERISH)]
    plan = _Plan()
    if numeric:
        stats = _column_stats(con, target, numeric)
        for col in numeric:
            _plan_column(con, target, col, stats[col], decimal_comma, plan)
    others = [n for n in text if n not in plan.exprs]
    if date_format is None:
        others = [n for n in others if n not in numeric and _may_be(con, target, n, DATE_LIKE)]
    dates = plan_dates(con, target, others, NA_TOKENS, date_format)
    plan.exprs.update(dates.exprs)
    plan.warnings += dates.warnings
    if plan.exprs:
        select = ", ".join(f"{plan.exprs.get(n, q(n))} AS {q(n)}" for n, _ in types)
        con.execute(
            f"CREATE OR REPLACE TABLE {target} AS SELECT {select} FROM {target}",
            {"tokens": NA_TOKENS},
        )
    return plan.warnings

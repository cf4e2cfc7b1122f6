"""DuckDB side of the loader: read a validated file into a table and tidy its columns.

The loader first reads every file straight into its final table inside the load transaction,
so DuckDB writes each table once. A failed statement aborts that transaction, so a read that
needs a second attempt (a type detected from the 20,480-row sample that does not fit a later
row, or mixed line endings) raises :class:`Reread` instead; the caller then rolls back and
builds staging tables in an attached in-memory database in auto-commit mode, where such a read
is retried, and copies the finished tables into the real database inside one transaction.

SQL text here holds identifiers only (quoted by :func:`quote_ident`); every value is a bound
parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from sql_tools._errors import LoadError, short
from tasks._csv import CsvScan
from tasks._names import quote_ident as q

NA_TOKENS = ["NA", "N/A", "n/a", "null", "NULL", "NaN", "nan", "-", ""]
_NUM = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
_INT = r"[+-]?\d{1,18}"
_LEADING_ZERO = r"[+-]?0\d+"
_DC_ANY = r"[+-]?(\d+|\d{1,3}(\.\d{3})+)(,\d+)?"  # decimal-comma number, comma optional
_DC_COMMA = r"[+-]?(\d+|\d{1,3}(\.\d{3})+),\d+"
_DC_AMBIGUOUS = r"[+-]?[1-9]\d{0,2},\d{3}"  # 1,234: thousands separator or decimal comma?
_NUMBERISH = f"({_NUM})|({_DC_ANY})"
_PARAMS = {
    "tokens": NA_TOKENS,
    "num": _NUM,
    "int": _INT,
    "lz": _LEADING_ZERO,
    "dc_any": _DC_ANY,
    "dc_comma": _DC_COMMA,
    "dc_amb": _DC_AMBIGUOUS,
}
_STATS = (
    "count({c})",
    "count_if(list_contains($tokens, trim({c})))",
    "count_if(regexp_full_match(trim({c}), $num))",
    "count_if(regexp_full_match(trim({c}), $int))",
    "count_if(regexp_full_match(trim({c}), $lz))",
    "count_if(regexp_full_match(trim({c}), $dc_any))",
    "count_if(regexp_full_match(trim({c}), $dc_comma))",
    "count_if(regexp_full_match(trim({c}), $dc_amb))",
)


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


def _read_csv_sql(target: str, full_sample: bool) -> str:
    """``CREATE TABLE target AS SELECT * FROM read_csv(?, ...)`` with pinned dialect options."""
    sample = ", sample_size = -1" if full_sample else ""
    return (
        f"CREATE TABLE {target} AS SELECT * FROM read_csv(?, header = true, names = ?, "
        "delim = ?, quote = '\"', escape = '\"', comment = '', skip = 0, strict_mode = ?, "
        "null_padding = false, ignore_errors = false, compression = 'none', "
        f"encoding = 'utf-8', max_line_size = ?{sample})"
    )


_SAMPLE_WARNING = (
    "column types detected from every row (a value after the 20,480-row sample did not fit "
    "the sampled type)"
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

    Type detection uses DuckDB's sample first; when a later row does not fit the sampled type
    (ConversionException), the table is read again with ``sample_size=-1``. DuckDB's strict
    mode refuses files with mixed line endings; those (and only those, as seen by the Python
    pass) are read again with ``strict_mode=false``; the field counts were already checked
    record by record and the row count is reconciled by the caller.

    Args:
        retry: False inside a transaction, where a failed statement cannot be retried: a read
            that would be retried raises :class:`Reread` instead.
        plan: Where to start (from :class:`Reread`); None for a strict read with the sample.
    """
    plan = ReadPlan() if plan is None else replace(plan, warnings=list(plan.warnings))
    for _ in range(3):
        params = [str(path), names, scan.delimiter, plan.strict, scan.max_line_bytes]
        try:
            con.execute(_read_csv_sql(target, plan.full_sample), params)
            return plan.warnings
        except duckdb.ConversionException as e:
            if plan.full_sample:
                raise _read_error(scan, path, e) from None
            plan.full_sample = True
            plan.warnings.append(_SAMPLE_WARNING)
        except duckdb.Error as e:
            if not (plan.strict and scan.mixed_line_ends and "sniffing" in str(e)):
                raise _read_error(scan, path, e) from None
            plan.strict = False
            plan.warnings.append(_LENIENT_WARNING)
        if not retry:
            raise Reread(plan)
    raise LoadError(f"{scan.source.name}: DuckDB could not read the file")


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


def _may_be_numeric(con: duckdb.DuckDBPyConnection, target: str, column: str) -> bool:
    """False as soon as one value is neither a number nor a missing-value marker.

    A cheap screen before the full statistics: for a genuine text column DuckDB stops at the
    first such row.
    """
    c = q(column)
    row = con.execute(
        f"SELECT 1 FROM {target} WHERE {c} IS NOT NULL AND NOT list_contains(?, trim({c})) "
        f"AND NOT regexp_full_match(trim({c}), ?) LIMIT 1",
        [NA_TOKENS, _NUMBERISH],
    ).fetchall()
    return not row


def _column_stats(
    con: duckdb.DuckDBPyConnection, target: str, columns: list[str]
) -> dict[str, tuple[int, ...]]:
    """For each text column: counts of non-null, NA tokens, numbers, ints, decimal-comma forms."""
    exprs = [s.format(c=q(c)) for c in columns for s in _STATS]
    row = con.execute(f"SELECT {', '.join(exprs)} FROM {target}", _PARAMS).fetchone()
    assert row is not None
    k = len(_STATS)
    return {c: tuple(int(v or 0) for v in row[i * k : (i + 1) * k]) for i, c in enumerate(columns)}


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
    stats: tuple[int, ...],
    decimal_comma: bool | None,
    plan: _Plan,
) -> None:
    nonnull, tokens, nums, ints, lead0, dc_any, dc_comma, dc_amb = stats
    if nonnull == 0:
        return
    c = q(col)
    null_if = f"CASE WHEN list_contains($tokens, trim({c})) THEN NULL ELSE {{}} END"
    if decimal_comma is not False and dc_comma and dc_any + tokens == nonnull:
        unambiguous = dc_comma > dc_amb
        if decimal_comma or unambiguous:
            cast = f"CAST(replace(replace(trim({c}), '.', ''), ',', '.') AS DOUBLE)"
            plan.exprs[col] = null_if.format(cast)
            note = _tokens_note(con, target, col, tokens)
            plan.warnings.append(f"column {col}: decimal comma read as DOUBLE ('1,5' = 1.5){note}")
            return
        plan.warnings.append(
            f"column {col}: values like '1,234' are ambiguous (thousands separator or decimal "
            "comma); kept as text. Load with --decimal-comma to read ',' as the decimal point"
        )
        return
    if tokens and nums and nums + tokens == nonnull and not lead0:
        typ = "BIGINT" if ints == nums else "DOUBLE"
        plan.exprs[col] = null_if.format(f"CAST(trim({c}) AS {typ})")
        found = ", ".join(short(t, 12) for t in _tokens_found(con, target, col))
        plan.warnings.append(
            f"column {col}: {tokens} missing-value marker(s) ({found}) read as NULL; "
            f"converted to {typ}"
        )


def _tokens_note(con: duckdb.DuckDBPyConnection, target: str, col: str, tokens: int) -> str:
    if not tokens:
        return ""
    found = ", ".join(short(t, 12) for t in _tokens_found(con, target, col))
    return f"; {tokens} missing-value marker(s) ({found}) read as NULL"


def fix_columns(
    con: duckdb.DuckDBPyConnection, target: str, decimal_comma: bool | None
) -> list[str]:
    """Convert text columns that are really numbers (decimal comma, NA markers); returns warnings.

    Only VARCHAR columns are examined. A column is converted only when every non-null value is
    a number of the recognised form or a missing-value marker; genuine text keeps the column
    as text and markers are never nulled in a text column.
    """
    types = column_types(con, target)
    text_cols = [n for n, t in types if t == "VARCHAR" and _may_be_numeric(con, target, n)]
    if not text_cols:
        return []
    stats = _column_stats(con, target, text_cols)
    plan = _Plan()
    for col in text_cols:
        _plan_column(con, target, col, stats[col], decimal_comma, plan)
    if plan.exprs:
        select = ", ".join(f"{plan.exprs.get(n, q(n))} AS {q(n)}" for n, _ in types)
        con.execute(
            f"CREATE OR REPLACE TABLE {target} AS SELECT {select} FROM {target}",
            {"tokens": NA_TOKENS},
        )
    return plan.warnings

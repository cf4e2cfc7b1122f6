"""The statistics of one column beyond the table's single scan: its samples (the most frequent
values, or the first found for a near-unique column), a text column's min/max, numbers, dates and
lengths from its distinct values, and the note of a text column that is mostly numbers or dates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from sql_tools import ToolInputError, short
from sql_tools.catalog import Scalar, jsonable
from tasks.ingest.profile.sql import USER_SCHEMA, _fetch_all, _table_ref, quote

TEXT_LIMIT = 200
"""Text min/max and samples are cut to this many characters."""
SAMPLE_SIZE = 5
NEAR_UNIQUE_SHARE = 0.9
"""A column whose distinct count is at least this share of its non-null values is near-unique:
its samples are the first values found instead of the most frequent ones (all counts are ~1)."""
NEAR_UNIQUE_MIN_VALUES = 1_000
"""Below this many non-null values the exact most-frequent query is cheap, so always use it."""
MIXED_MIN_SHARE = 0.5
VALUE_INDEX_MAX_BITS = 22
"""Largest value table, in bits (4M slots per DuckDB thread), for grouping an integer column by
value instead of hashing."""


def _cut(value: Scalar) -> Scalar:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT]
    return value


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    rows = _fetch_all(
        con,
        "SELECT column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = ? AND table_name = ? "
        "ORDER BY column_index",
        [USER_SCHEMA, table],
    )
    if not rows:
        raise ToolInputError(f"no table {table!r} in schema {USER_SCHEMA}", code="unknown_table")
    return [(str(n), str(t)) for n, t in rows]


_NOT_A = {"numbers": "DOUBLE", "dates": "DATE"}
"""Mixed kind -> the type its odd values (the example in the note) do not cast to."""


def _mixed_kind(non_null: int, numbers: int, dates: int) -> str | None:
    """``numbers`` or ``dates`` when a text column is mostly (but not all) of them, else None."""
    if non_null == 0:
        return None
    kind, count = ("numbers", numbers) if numbers >= dates else ("dates", dates)
    if count < non_null and count >= MIXED_MIN_SHARE * non_null:
        return kind
    return None


def _mixed_note(kind: str, non_null: int, count: int, example: Any) -> str:
    """The note of a mixed text column: ``mostly numeric text: 3 of 4 values are numbers ...``."""
    adjective = "numeric" if kind == "numbers" else "date"
    return (
        f"mostly {adjective} text: {count} of {non_null} values are {kind} "
        f"(e.g. {short(example, 60)})"
    )


def _mixed_examples(
    con: duckdb.DuckDBPyConnection, table: str, kinds: dict[str, str]
) -> dict[str, Any]:
    """For each mixed column, its smallest value that is not of the column's mixed kind.

    One scan for all mixed columns; none when no column is mixed (the common case: the
    filtered minimum costs more than the rest of the profile).
    """
    if not kinds:
        return {}
    exprs = [
        f"min({quote(c)}) FILTER (WHERE TRY_CAST({quote(c)} AS {_NOT_A[k]}) IS NULL)"
        for c, k in kinds.items()
    ]
    row = _fetch_all(con, f"SELECT {', '.join(exprs)} FROM {_table_ref(table)}")[0]
    return dict(zip(kinds, row, strict=True))


def _near_unique(non_null: int, distinct: int) -> bool:
    """True when the samples are the first values found rather than the most frequent ones."""
    return non_null > NEAR_UNIQUE_MIN_VALUES and distinct >= NEAR_UNIQUE_SHARE * non_null


def _sample_list(values: Iterable[Any]) -> list[Scalar]:
    """The first five different values, JSON-safe and cut to ``TEXT_LIMIT``."""
    out: list[Scalar] = []
    for value in values:
        v = _cut(jsonable(value))
        if v not in out:
            out.append(v)
        if len(out) == SAMPLE_SIZE:
            break
    return out


@contextmanager
def _grouped_by_value(con: duckdb.DuckDBPyConnection, span: int | None) -> Iterator[None]:
    """Let DuckDB group an integer column in a table indexed by value instead of a hash table.

    ``span`` is the column's ``max - min`` (None for other columns); nothing changes unless that
    table needs at most ``VALUE_INDEX_MAX_BITS`` bits (one more for null) and more than DuckDB
    allows by default. DuckDB's setting is per database, so it is put back right after; the
    results are the same either way, only faster.
    """
    bits = None if span is None else span.bit_length() + 1
    if bits is None or bits > VALUE_INDEX_MAX_BITS:
        yield
        return
    old = int(_fetch_all(con, "SELECT current_setting('perfect_ht_threshold')")[0][0])
    if bits <= old:
        yield
        return
    con.execute(f"SET perfect_ht_threshold = {bits}")
    try:
        yield
    finally:
        try:
            con.execute(f"SET perfect_ht_threshold = {old}")
        except duckdb.Error:
            pass  # an aborted transaction refuses SET; the error that aborted it is raised


def _samples(
    con: duckdb.DuckDBPyConnection,
    table: str,
    column: str,
    non_null: int,
    distinct: int,
    span: int | None = None,
) -> list[Scalar]:
    """Up to five most frequent non-null values (the first ones found for near-unique columns).

    ``span`` is ``max - min`` of an integer column whose range is at most its count of values.
    """
    if non_null == 0:
        return []
    q, t = quote(column), _table_ref(table)
    if _near_unique(non_null, distinct):
        rows = _fetch_all(con, f"SELECT {q} FROM {t} WHERE {q} IS NOT NULL LIMIT ?", [20])
    else:
        with _grouped_by_value(con, span):
            rows = _fetch_all(
                con,
                f"SELECT {q} FROM {t} WHERE {q} IS NOT NULL GROUP BY {q} "
                f"ORDER BY count(*) DESC, {q} LIMIT ?",
                [SAMPLE_SIZE],
            )
    return _sample_list(value for (value,) in rows)


_TEXT_STATS = ("min", "max", "numbers", "dates", "length")


def _text_samples_and_stats(
    con: duckdb.DuckDBPyConnection, table: str, column: str
) -> tuple[list[Scalar], dict[str, Any]]:
    """The five most frequent non-null values of a text column and its :func:`_text_stats`,
    from one ``GROUP BY`` (the same samples as :func:`_samples` for a column that is not
    near-unique; the casts and lengths are computed once per distinct value)."""
    q, t = quote(column), _table_ref(table)
    top, *stats = _fetch_all(
        con,
        f"WITH g AS (SELECT {q} AS v, count(*) AS n FROM {t} WHERE {q} IS NOT NULL GROUP BY 1) "
        "SELECT (SELECT list(v ORDER BY n DESC, v) FROM "
        "(SELECT v, n FROM g ORDER BY n DESC, v LIMIT ?)), min(v), max(v), "
        "sum(n) FILTER (WHERE TRY_CAST(v AS DOUBLE) IS NOT NULL), "
        "sum(n) FILTER (WHERE TRY_CAST(v AS DATE) IS NOT NULL), sum(length(v) * n) FROM g",
        [SAMPLE_SIZE],
    )[0]
    return _sample_list(top or []), dict(zip(_TEXT_STATS, stats, strict=True))


def _text_stats(
    con: duckdb.DuckDBPyConnection, table: str, columns: list[str]
) -> dict[str, dict[str, Any]]:
    """Per text column, in one scan (none when ``columns`` is empty): ``min`` and ``max``,
    ``numbers`` and ``dates`` (values that cast to DOUBLE, to DATE) and ``length`` (the sum of
    the values' lengths)."""
    if not columns:
        return {}
    exprs = [
        f"min({q}), max({q}), count(TRY_CAST({q} AS DOUBLE)), count(TRY_CAST({q} AS DATE)), "
        f"sum(length({q}))"
        for q in map(quote, columns)
    ]
    row = _fetch_all(con, f"SELECT {', '.join(exprs)} FROM {_table_ref(table)}")[0]
    n = len(_TEXT_STATS)
    return {
        c: dict(zip(_TEXT_STATS, row[n * i : n * (i + 1)], strict=True))
        for i, c in enumerate(columns)
    }

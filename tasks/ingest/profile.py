"""Profile loaded tables and detect join keys between them.

A profile describes every column of a table over *all* of its rows: type, kind, nulls, distinct
count, min/max, the most frequent values, whether a text column is mostly numbers or dates, and a
guess at the column's role. Join keys are many-to-one relations between loaded tables, proposed
from column names and types and then verified against the values.

Cost per table: one ``count(*)``, one aggregate query that computes the counts, distinct counts
and non-text min/max of all columns in a single scan, and one small ``GROUP BY`` (or ``LIMIT``)
query per column for the samples. For a text column that ``GROUP BY`` also gives the min/max and
how many values are numbers or dates and how long they are, from its distinct values (much
cheaper than casting and comparing strings on every row). An integer column whose values span a
range no larger than their count is grouped in a table indexed by value (about five times faster
than hashing for 500,000 ids in 10M rows). Only when needed: one more aggregate for the same text
statistics of near-unique text columns, and one for the examples in the notes of mixed text
columns. Identifiers are always quoted; values are always passed as ``?`` parameters.

Everything here runs on the loader's writer connection, inside the loader's transaction: nothing
commits or rolls back, every result is fetched completely (DuckDB 2.0 refuses relation work on a
connection with a pending result), and no query is issued that could fail on valid data (a
failed statement would abort the caller's transaction).

One module of this size because the profile's single scan is built column by column from the
same per-kind rules the join-key check and the notes read back; split, each part would restate
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from sql_tools import ToolInputError, short
from sql_tools.catalog import (
    INTEGER_TYPES,
    META_SCHEMA,
    Catalog,
    ColumnProfile,
    JoinKey,
    Role,
    Scalar,
    TableProfile,
    jsonable,
    kind_of,
    read_catalog,
    write_join_keys,
    write_profile,
)
from sql_tools.catalog import (
    quote_ident as quote,
)

USER_SCHEMA = "main"
EXACT_DISTINCT_MAX_ROWS = 1_000_000
"""Tables up to this many rows get an exact ``count(DISTINCT)``; larger ones an estimate."""
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
MIN_CONTAINMENT = 0.9
LOW_CARDINALITY_MAX = 20
ID_MIN_DISTINCT = 1_000
ID_MIN_SHARE = 0.5
UNIQUE_ID_MIN_ROWS = 100
FREE_TEXT_MIN_AVG_LENGTH = 40

_ORDERABLE_OTHER = frozenset({"TIME", "TIME WITH TIME ZONE", "UUID", "INTERVAL"})
_ID_LAST_WORDS = frozenset({"id", "uuid", "guid", "key"})
_AMOUNT_WORDS = frozenset(
    {
        "revenue",
        "revenues",
        "amount",
        "amounts",
        "price",
        "prices",
        "cost",
        "costs",
        "sessions",
        "count",
        "counts",
        "qty",
        "quantity",
        "quantities",
        "value",
        "values",
        "sales",
        "clicks",
        "views",
        "orders",
        "purchases",
        "users",
        "total",
        "sum",
        "spend",
        "units",
        "impressions",
        "conversions",
        "visits",
        "signups",
    }
)
_JOIN_KEY_SUFFIXES = ("id", "key", "code")
_GENERIC_KEY_NAMES = frozenset({"id", "key", "code", "uuid"})
"""Shared bare names that are each table's own surrogate key, never a join by name alone."""


def _table_ref(table: str, schema: str = USER_SCHEMA) -> str:
    return f"{quote(schema)}.{quote(table)}"


def _fetch_all(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """Run ``sql`` and fetch every row, so no result stays pending on the caller's connection."""
    return con.execute(sql, list(params)).fetchall()


# --------------------------------------------------------------------------------------------
# Types and names
# --------------------------------------------------------------------------------------------


def _is_integer(duck_type: str) -> bool:
    return duck_type.upper() in INTEGER_TYPES


def _has_min_max(duck_type: str) -> bool:
    return kind_of(duck_type) != "other" or duck_type.upper() in _ORDERABLE_OTHER


def name_words(name: str) -> list[str]:
    """Split a column name into lower-case words at separators, camel case and digits.

    ``userId`` -> ``["user", "id"]``, ``USER_ID`` -> ``["user", "id"]``,
    ``pageViews2024`` -> ``["page", "views", "2024"]``, ``valid`` -> ``["valid"]``.
    """
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    parts = re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])|(?<=[0-9])(?=[a-z])", s.lower())
    return [p for p in parts if p]


def is_identifier_name(name: str) -> bool:
    """True for names like ``id``, ``user_id``, ``userId``, ``uuid``, ``order_key``, ``email``."""
    words = name_words(name)
    if not words:
        return False
    return words[-1] in _ID_LAST_WORDS or words[-1] == "email" or words[-2:] == ["email", "address"]


def is_amount_name(name: str) -> bool:
    """True when a word of ``name`` suggests a quantity (revenue, amount, price, sessions, ...)."""
    return any(w in _AMOUNT_WORDS for w in name_words(name))


def _cut(value: Scalar) -> Scalar:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT]
    return value


# --------------------------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------------------------


def guess_role(
    name: str,
    duck_type: str,
    row_count: int,
    non_null: int,
    distinct: int,
    avg_length: float | None = None,
) -> Role:
    """Guess what a column is for. The first rule that matches wins.

    1. No non-null value at all -> ``other``.
    2. DATE / TIMESTAMP / TIMESTAMP WITH TIME ZONE -> ``time``.
    3. Named like an identifier (``id``, ``*_id``, camel ``userId``, ``uuid``, ``*_key``,
       ``email``), or of type UUID -> ``identifier``.
    4. A single distinct value: ``measure`` if numeric with an amount-like name, else ``other``.
    5. Numbers:
       a. name suggests an amount (revenue, amount, price, cost, sessions, count, qty, quantity,
          value, sales, clicks, views, orders, purchases, users, total, ...) -> ``measure``;
       b. non-integer (FLOAT, DOUBLE, DECIMAL) -> ``measure``;
       c. integer unique per row (no nulls) in a table of more than 100 rows -> ``identifier``;
       d. integer with distinct count > 50 % of rows and > 1,000 -> ``identifier``;
       e. integer with more than 20 distinct values -> ``measure``;
       f. otherwise (a low-cardinality code such as ``app_version`` or ``tier``) -> ``dimension``.
    6. Text:
       a. more than 50 % of the non-null values distinct and an average length of at least 40
          characters (free text such as comments) -> ``other``;
       b. distinct count > 50 % of rows and > 1,000 -> ``identifier``;
       c. otherwise -> ``dimension``.
    7. BOOLEAN -> ``dimension``.
    8. Anything else (TIME, INTERVAL, BLOB, lists, structs) -> ``other``.

    Args:
        name: Column name.
        duck_type: DuckDB type string.
        row_count: Rows in the table.
        non_null: Non-null values in the column.
        distinct: Distinct non-null values (exact or estimated).
        avg_length: Average length of the text values (text columns only).

    Returns:
        One of ``time``, ``identifier``, ``measure``, ``dimension``, ``other``.
    """
    kind = kind_of(duck_type)
    if non_null == 0:
        return "other"
    if kind in ("date", "timestamp"):
        return "time"
    if is_identifier_name(name) or duck_type.upper() == "UUID":
        return "identifier"
    if distinct <= 1:
        return "measure" if kind == "number" and is_amount_name(name) else "other"
    high_cardinality = distinct > ID_MIN_SHARE * row_count and distinct > ID_MIN_DISTINCT
    if kind == "number":
        if is_amount_name(name) or not _is_integer(duck_type):
            return "measure"
        if distinct == row_count == non_null and row_count > UNIQUE_ID_MIN_ROWS:
            return "identifier"
        if high_cardinality:
            return "identifier"
        return "measure" if distinct > LOW_CARDINALITY_MAX else "dimension"
    if kind == "text":
        if distinct > ID_MIN_SHARE * non_null and (avg_length or 0) >= FREE_TEXT_MIN_AVG_LENGTH:
            return "other"
        return "identifier" if high_cardinality else "dimension"
    if kind == "boolean":
        return "dimension"
    return "other"


# --------------------------------------------------------------------------------------------
# Table profile
# --------------------------------------------------------------------------------------------


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


PROFILE_COLUMNS_PER_SCAN = 32
"""Columns whose statistics one scan computes. DuckDB's time for the distinct counts of one query
grows with the square of their number: 480 columns of 420 rows took 14 s in one query, 0.2 s in
batches of 16 to 64 (and a few MB for the hash tables instead of hundreds)."""


def _aggregates(
    con: duckdb.DuckDBPyConnection, tref: str, exprs: list[str], *, per_column: int
) -> tuple[Any, ...]:
    """The values of ``exprs`` (``per_column`` or so of them per column) over ``tref``, computed
    :data:`PROFILE_COLUMNS_PER_SCAN` columns' worth at a time, in order."""
    step = max(PROFILE_COLUMNS_PER_SCAN * per_column, 1)
    out: list[Any] = []
    for lo in range(0, len(exprs), step):
        out += _fetch_all(con, f"SELECT {', '.join(exprs[lo : lo + step])} FROM {tref}")[0]
    return tuple(out)


def profile_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    labels: dict[str, str],
    *,
    exact_distinct_max_rows: int = EXACT_DISTINCT_MAX_ROWS,
) -> TableProfile:
    """Profile every column of ``main.<table>`` over the whole table.

    Args:
        con: Connection holding the table (the loader's writer connection is fine).
        table: Table name in schema ``main``.
        labels: Original header text per column name; a column without one is labelled by name.
        exact_distinct_max_rows: Tables with more rows get ``approx_count_distinct`` estimates
            (``distinct_exact=False``) instead of an exact ``count(DISTINCT)``.

    Returns:
        The table profile, columns in table order.

    Raises:
        ToolInputError: ``unknown_table`` when the table does not exist.
    """
    cols = _columns(con, table)
    tref = _table_ref(table)
    row_count = int(_fetch_all(con, f"SELECT count(*) FROM {tref}")[0][0])
    exact = row_count <= exact_distinct_max_rows

    # One scan: every statistic except the samples and those of _text_stats, for all columns.
    exprs: list[str] = []
    slots: list[dict[str, int]] = []
    for name, duck_type in cols:
        q = quote(name)
        slot: dict[str, int] = {}

        def add(expr: str, key: str, slot: dict[str, int] = slot) -> None:
            slot[key] = len(exprs)
            exprs.append(expr)

        add(f"count({q})", "nn")
        add(f"count(DISTINCT {q})" if exact else f"approx_count_distinct({q})", "distinct")
        if _has_min_max(duck_type) and kind_of(duck_type) != "text":
            add(f"min({q})", "min")
            add(f"max({q})", "max")
        slots.append(slot)
    agg = _aggregates(con, tref, exprs, per_column=len(exprs) // max(len(cols), 1))

    stats: list[dict[str, Any]] = []
    for slot in slots:
        st = {key: agg[i] for key, i in slot.items()}
        st["nn"] = non_null = int(st["nn"] or 0)
        st["distinct"] = min(int(st["distinct"] or 0), non_null)
        if non_null and not st["distinct"]:
            st["distinct"] = 1  # an estimate can't be below one when a value exists
        stats.append(st)

    # Samples, and for text columns the statistics of _text_stats: near-unique ones in one scan,
    # the others from the GROUP BY that finds their samples.
    near_unique_text = [
        name
        for (name, duck_type), st in zip(cols, stats, strict=True)
        if kind_of(duck_type) == "text" and st["nn"] and _near_unique(st["nn"], st["distinct"])
    ]
    text_stats = _text_stats(con, table, near_unique_text)
    samples: list[list[Scalar]] = []
    for (name, duck_type), st in zip(cols, stats, strict=True):
        non_null, distinct = st["nn"], st["distinct"]
        if kind_of(duck_type) == "text" and non_null and name not in text_stats:
            top, text_stats[name] = _text_samples_and_stats(con, table, name)
        else:
            span = None
            if _is_integer(duck_type) and non_null and st["max"] - st["min"] < non_null:
                span = st["max"] - st["min"]
            top = _samples(con, table, name, non_null, distinct, span)
        samples.append(top)
        if kind_of(duck_type) == "text":
            st.update(text_stats.get(name, {}))  # none when no value at all

    counts: dict[str, tuple[int, int]] = {}  # mixed text column -> (non-null, numbers or dates)
    kinds: dict[str, str] = {}
    for (name, duck_type), st in zip(cols, stats, strict=True):
        if kind_of(duck_type) == "text":
            non_null, numbers = st["nn"], int(st.get("numbers") or 0)
            dates = int(st.get("dates") or 0)
            kind = _mixed_kind(non_null, numbers, dates)
            if kind is not None:
                kinds[name] = kind
                counts[name] = (non_null, numbers if kind == "numbers" else dates)
    examples = _mixed_examples(con, table, kinds)

    profiles: list[ColumnProfile] = []
    for (name, duck_type), st, top in zip(cols, stats, samples, strict=True):
        non_null, distinct = st["nn"], st["distinct"]
        mixed, note = name in kinds, None
        if mixed:
            note = _mixed_note(kinds[name], *counts[name], examples[name])
        avg_length = None
        low, high = st.get("min"), st.get("max")
        if kind_of(duck_type) == "text":
            avg_length = int(st.get("length") or 0) / non_null if non_null else 0.0
        null_count = row_count - non_null
        profiles.append(
            ColumnProfile(
                name=name,
                label=labels.get(name, name),
                type=duck_type,
                kind=kind_of(duck_type),
                null_count=null_count,
                null_rate=null_count / row_count if row_count else 0.0,
                distinct_count=distinct,
                distinct_exact=exact,
                min=_cut(jsonable(low)),
                max=_cut(jsonable(high)),
                samples=top,
                mixed_type=mixed,
                mixed_note=note,
                role=guess_role(name, duck_type, row_count, non_null, distinct, avg_length),
            )
        )
    return TableProfile(name=table, row_count=row_count, columns=profiles)


# --------------------------------------------------------------------------------------------
# Join keys
# --------------------------------------------------------------------------------------------


def _join_class(duck_type: str) -> str | None:
    """Types that may be joined with each other share a class; None means never a key."""
    if _is_integer(duck_type):
        return "integer"
    kind = kind_of(duck_type)
    if kind == "text":
        return "text"
    if kind == "date":
        return "date"
    return None


def _singulars(table: str) -> set[str]:
    """Name variants: ``customers`` -> customer, ``addresses`` -> address, ``-ies`` -> ``-y``."""
    t = table.lower()
    out = {t}
    if t.endswith("ies") and len(t) > 3:
        out.add(t[:-3] + "y")
    if t.endswith("es") and len(t) > 2:
        out.add(t[:-2])
    if t.endswith("s") and len(t) > 1:
        out.add(t[:-1])
    return out


def _names_match(from_col: str, to_table: str, to_col: str) -> bool:
    """Candidate by name: the same column name (except a bare ``id``/``key``/``code``/``uuid``,
    which is each table's own key), or ``<table>_<id|key|code>`` / ``<table><Id>``."""
    x, y = from_col.lower(), to_col.lower()
    if x == y:
        return x not in _GENERIC_KEY_NAMES
    if y not in _JOIN_KEY_SUFFIXES:
        return False
    return any(x in (f"{b}_{y}", f"{b}{y}") for b in _singulars(to_table))


def join_candidates(
    columns: Mapping[str, Sequence[tuple[str, str]]],
) -> list[tuple[str, str, str, str]]:
    """The pairs ``(A, x, B, y)`` that names and types alone make candidates for a key
    ``A.x -> B.y`` (see :func:`detect_join_keys`), from each table's ``(column, type)`` list:
    known before any value is read, so a pass over a table can measure what their checks need."""
    pairs: list[tuple[str, str, str, str]] = []
    names = sorted(columns)
    for a in names:
        for x, x_type in columns[a]:
            x_class = _join_class(x_type)
            if x_class is None:
                continue
            pairs += [
                (a, x, b, y)
                for b in names
                if b != a
                for y, y_type in columns[b]
                if _join_class(y_type) == x_class and _names_match(x, b, y)
            ]
    return pairs


@dataclass(frozen=True)
class KeyFacts:
    """What the pass that profiled a table measured of a column a join key may use, so its
    checks need no query of their own: whether its non-NULL values are all different (exact),
    and the set of those values when the pass brought them back, equal where the database's
    ``=`` finds them equal (None: not brought back, the values are compared in SQL)."""

    unique: bool
    values: frozenset[Any] | None = None


def detect_join_keys(
    con: duckdb.DuckDBPyConnection | Any,
    profiles: dict[str, TableProfile],
    *,
    schema: str = USER_SCHEMA,
    known: Mapping[tuple[str, str], KeyFacts] | None = None,
) -> list[JoinKey]:
    """Find many-to-one joins ``A.x -> B.y`` between the profiled tables, verified by values.

    A pair is a candidate when ``A != B``, the names match (the same column name other than a
    bare ``id``/``key``/``code``/``uuid``, which is each table's own key, or ``x`` is
    ``<b>_<y>`` or ``<b><Y>`` where ``<b>`` is B's name or its singular and ``y`` is ``id``,
    ``key`` or ``code``; case-insensitive), both types are integers, both text or both DATE, and
    neither column is a measure. It is kept when ``B.y`` is unique among its non-null values (so
    a join never duplicates A's rows; estimated counts are re-checked exactly) and at least 90 %
    of A.x's distinct non-null values occur in ``B.y``. Both directions are kept for 1:1 keys.

    The two checks are plain SQL that DuckDB and Postgres both run, unless ``known`` already
    holds the answer: a column's exact uniqueness, and the values of both columns of a pair,
    whose containment is then counted here.

    Args:
        con: Connection holding the tables (DuckDB's, or anything whose
            ``execute(sql, params).fetchall()`` runs SQL where the tables are).
        profiles: Table profiles by table name.
        schema: The tables' schema.
        known: What was measured already, by ``(table, column)``.

    Returns:
        The verified keys, sorted by (from_table, from_column, to_table, to_column).
    """
    known = dict(known or {})
    keys: list[JoinKey] = []
    columns = {t: [(c.name, c.type) for c in p.columns] for t, p in profiles.items()}
    for a_name, x_name, b_name, y_name in join_candidates(columns):
        a, b = profiles[a_name], profiles[b_name]
        x, y = a.column(x_name), b.column(y_name)
        assert x is not None and y is not None
        if x.role == "measure" or x.null_count >= a.row_count or y.role == "measure":
            continue
        if not _is_unique(con, b, y, schema, known):
            continue
        containment = _containment(con, (a.name, x.name), (b.name, y.name), schema, known)
        if containment is not None and containment >= MIN_CONTAINMENT:
            keys.append(
                JoinKey(
                    from_table=a.name,
                    from_column=x.name,
                    to_table=b.name,
                    to_column=y.name,
                    containment=round(containment, 6),
                )
            )
    keys.sort(key=lambda k: (k.from_table, k.from_column, k.to_table, k.to_column))
    return keys


def _is_unique(
    con: duckdb.DuckDBPyConnection | Any,
    tp: TableProfile,
    cp: ColumnProfile,
    schema: str,
    known: dict[tuple[str, str], KeyFacts],
) -> bool:
    """Whether ``cp``'s non-null values are all different: known, counted by the profile, or
    (an estimated count close to the rows) checked in SQL and remembered in ``known``."""
    key = (tp.name, cp.name)
    if key in known:
        return known[key].unique
    non_null = tp.row_count - cp.null_count
    if non_null == 0:
        return False
    if cp.distinct_exact:
        return cp.distinct_count == non_null
    if cp.distinct_count < 0.97 * non_null:
        return False
    q = quote(cp.name)
    dup = _fetch_all(
        con,
        f"SELECT count(*) FROM (SELECT 1 FROM {_table_ref(tp.name, schema)} "
        f"WHERE {q} IS NOT NULL GROUP BY {q} HAVING count(*) > 1 LIMIT 1) AS d",
    )[0][0]
    known[key] = KeyFacts(unique=dup == 0)
    return known[key].unique


def _containment(
    con: duckdb.DuckDBPyConnection | Any,
    ax: tuple[str, str],
    by: tuple[str, str],
    schema: str,
    known: Mapping[tuple[str, str], KeyFacts],
) -> float | None:
    """The share of ``A.x``'s distinct non-null values found in ``B.y`` (None: it has none),
    counted from both columns' known values, else in SQL (one statement reading both tables)."""
    xs, ys = known.get(ax), known.get(by)
    if xs is not None and ys is not None and xs.values is not None and ys.values is not None:
        total, found = len(xs.values), len(xs.values & ys.values)
    else:
        qx, qy = quote(ax[1]), quote(by[1])
        total, found = _fetch_all(
            con,
            f"SELECT count(DISTINCT a.x), count(DISTINCT a.x) FILTER "
            f"(WHERE b.y IS NOT NULL) FROM "
            f"(SELECT DISTINCT {qx} AS x FROM {_table_ref(ax[0], schema)} "
            f"WHERE {qx} IS NOT NULL) a LEFT JOIN "
            f"(SELECT DISTINCT {qy} AS y FROM {_table_ref(by[0], schema)}) b "
            "ON a.x = b.y",
        )[0]
    return found / total if total else None


# --------------------------------------------------------------------------------------------
# Database
# --------------------------------------------------------------------------------------------


def profile_database(
    con: duckdb.DuckDBPyConnection,
    tables: Iterable[str] | None = None,
    *,
    exact_distinct_max_rows: int = EXACT_DISTINCT_MAX_ROWS,
) -> Catalog:
    """Profile ``tables`` (every recorded table when None), recompute join keys, store both.

    Runs on the loader's writer connection, inside the caller's transaction (it never commits
    or rolls back), and returns the catalogue as stored. Recorded tables that are not named but
    have no stored profile (``write_load`` clears it) are profiled too, so join keys are always
    computed across every recorded table.

    Args:
        con: The loader's writer connection; the catalogue must exist (``ensure_catalog``).
        tables: Names of recorded tables to (re-)profile; None for all of them.
        exact_distinct_max_rows: Passed to :func:`profile_table`.

    Returns:
        The catalogue read back with :func:`read_catalog`.

    Raises:
        ToolInputError: ``unknown_table`` when a named table has no load record.
    """
    catalog = read_catalog(con)
    recorded = sorted(catalog.loads)
    if tables is None:
        wanted = list(recorded)
    else:
        wanted = list(dict.fromkeys(tables))
        unknown = [t for t in wanted if t not in catalog.loads]
        if unknown:
            raise ToolInputError(
                f"not a loaded table in {META_SCHEMA}.tables: {short(unknown[0])}",
                code="unknown_table",
                valid_values=recorded,
            )
    wanted += [t for t in recorded if t not in wanted and t not in catalog.profiles]

    profiles = {t: p for t, p in catalog.profiles.items() if t in catalog.loads}
    for table in wanted:
        labels = {c.name: c.label for c in catalog.loads[table].columns}
        profile = profile_table(con, table, labels, exact_distinct_max_rows=exact_distinct_max_rows)
        write_profile(con, profile)
        profiles[table] = profile

    write_join_keys(con, detect_join_keys(con, profiles))
    return read_catalog(con)


__all__ = [
    "EXACT_DISTINCT_MAX_ROWS",
    "KeyFacts",
    "detect_join_keys",
    "guess_role",
    "is_amount_name",
    "is_identifier_name",
    "join_candidates",
    "kind_of",
    "name_words",
    "profile_database",
    "profile_table",
    "quote",
]

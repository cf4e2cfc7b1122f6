"""Join keys: many-to-one relations ``A.x -> B.y`` between loaded tables, proposed from the
columns' names and types and verified against their values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from sql_tools.catalog import ColumnProfile, JoinKey, TableProfile, kind_of
from tasks.ingest.profile.roles import _is_integer
from tasks.ingest.profile.sql import USER_SCHEMA, _fetch_all, _table_ref, quote

MIN_CONTAINMENT = 0.9
_JOIN_KEY_SUFFIXES = ("id", "key", "code")
_GENERIC_KEY_NAMES = frozenset({"id", "key", "code", "uuid"})
"""Shared bare names that are each table's own surrogate key, never a join by name alone."""


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

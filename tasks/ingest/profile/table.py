"""One table's profile: every column over all of the table's rows, from one aggregate scan (in
batches of columns) and the per-column statistics of :mod:`tasks.ingest.profile.columns`."""

from __future__ import annotations

from typing import Any

import duckdb

from sql_tools.catalog import ColumnProfile, Scalar, TableProfile, jsonable, kind_of
from tasks.ingest.profile.columns import (
    _columns,
    _cut,
    _mixed_examples,
    _mixed_kind,
    _mixed_note,
    _near_unique,
    _samples,
    _text_samples_and_stats,
    _text_stats,
)
from tasks.ingest.profile.roles import _is_integer, guess_role
from tasks.ingest.profile.sql import _fetch_all, _table_ref, quote

EXACT_DISTINCT_MAX_ROWS = 1_000_000
"""Tables up to this many rows get an exact ``count(DISTINCT)``; larger ones an estimate."""
_ORDERABLE_OTHER = frozenset({"TIME", "TIME WITH TIME ZONE", "UUID", "INTERVAL"})


def _has_min_max(duck_type: str) -> bool:
    return kind_of(duck_type) != "other" or duck_type.upper() in _ORDERABLE_OTHER


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

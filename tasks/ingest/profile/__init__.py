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

The package: ``roles.py`` (a column's role, from its name, type and counts), ``table.py`` (one
table's profile, :func:`profile_table`), ``columns.py`` (the per-column statistics it reads
beyond its single scan: samples, text statistics, mixed-type notes), ``join_keys.py`` (the join
keys, :func:`detect_join_keys`), ``sql.py`` (quoted references, results fetched whole), and here
:func:`profile_database`, which profiles, finds the keys and stores both.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from sql_tools import ToolInputError, short
from sql_tools.catalog import (
    META_SCHEMA,
    Catalog,
    kind_of,
    read_catalog,
    write_join_keys,
    write_profile,
)
from tasks.ingest.profile.columns import NEAR_UNIQUE_MIN_VALUES

# read by tasks.ingest.postgres, which profiles Postgres tables by the same rules
from tasks.ingest.profile.columns import _cut as _cut
from tasks.ingest.profile.columns import _mixed_kind as _mixed_kind
from tasks.ingest.profile.columns import _mixed_note as _mixed_note
from tasks.ingest.profile.columns import _sample_list as _sample_list
from tasks.ingest.profile.join_keys import KeyFacts, detect_join_keys, join_candidates
from tasks.ingest.profile.roles import guess_role, is_amount_name, is_identifier_name, name_words
from tasks.ingest.profile.sql import quote
from tasks.ingest.profile.table import EXACT_DISTINCT_MAX_ROWS, profile_table


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
    "NEAR_UNIQUE_MIN_VALUES",
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

"""Data that stays in Postgres: open a read-only context on it and profile its tables there.

Nothing is loaded or copied. :func:`open_postgres` connects (refusing a role that may write,
see :class:`~sql_tools._postgres.PostgresContext`), then measures each chosen table in Postgres,
read-only, and gives the context the same catalogue the DuckDB loader stores: per column its
kind, nulls, distinct count, range, most frequent values, a guessed role
(:func:`~tasks.ingest.profile.guess_role`), and the verified join keys between the tables
(:func:`~tasks.ingest.profile.detect_join_keys`).

Cost per table: one pass, join keys included. A warehouse bills each scan and a large table
costs time on any database, so one statement (``GROUP BY GROUPING SETS ((), (a), (b), ...)``)
counts the rows of each value of every column, and each column's statistics come from its
groups: non-NULL values, distinct values, range, the five most frequent values (for a
near-unique column, the first ones by count then value), how many text values look like numbers
or dates and the smallest one that does not. The whole-table set gives the row count and the
sum of the rows' hashes, the data's fingerprint (``PostgresContext.content_fingerprint``).

The join keys' candidates are known from names and types before any row is read
(:func:`~tasks.ingest.profile.join_candidates`), so the same statement measures what their two
checks need: whether a column's values are all different (its exact distinct count against its
non-NULL values), and each candidate column's distinct values, whose containment in the other
column is counted here, without reading either table again. Values are brought back only for
types whose ``=`` is Python's equality (``KEY_TYPES``), and at most ``KEY_VALUES_MAX`` values
(``KEY_TEXT_MAX_BYTES`` of text) per column; a pair whose values were not all brought back is
checked in SQL, which reads both its tables once more. Distinct counts in the profile are exact
up to ``EXACT_DISTINCT_MAX_ROWS`` rows; above, Postgres's own estimate from its statistics
(``pg_stats``, kept by ANALYZE) is used when there is one, else the exact count. Text is
compared byte by byte (``COLLATE "C"``), as DuckDB compares it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sql_tools import (
    ROW_HASH_SUM,
    Limits,
    PostgresContext,
    SqlToolError,
    ToolContext,
    is_postgres_url,
)
from sql_tools.catalog import (
    Catalog,
    ColumnProfile,
    TableProfile,
    jsonable,
    kind_of,
    quote_literal,
)
from tasks.ingest.profile import (
    EXACT_DISTINCT_MAX_ROWS,
    KeyFacts,
    _cut,
    _mixed_kind,
    _mixed_note,
    _sample_list,
    detect_join_keys,
    guess_role,
    join_candidates,
    quote,
)

# What DuckDB's TRY_CAST(text AS DOUBLE) / TRY_CAST(text AS DATE) accept, as Postgres regular
# expressions: the counts behind a "mostly numeric text" note.
NUMBER_PATTERN = (
    r"^\s*[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[iI][nN][fF]([iI][nN][iI][tT][yY])?"
    r"|[nN][aA][nN])\s*$"
)
DATE_PATTERN = r"^\s*[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}\s*$"
_PATTERNS = {"numbers": NUMBER_PATTERN, "dates": DATE_PATTERN}
_ORDERABLE_OTHER = frozenset({"TIME", "TIME WITH TIME ZONE", "INTERVAL"})
KEY_VALUES_MAX = 1_000_000
"""Most distinct values of a join-key column the one pass brings back, to count the key's
containment here: a million values take about 1 s (integers) to 1.5 s (36-character text) to
fetch and 90 to 150 MB to hold. A pair with a column of more is checked in SQL instead (one
more read of both its tables), so opening data never holds more than that per column."""
KEY_TEXT_MAX_BYTES = 64 * 2**20
"""Most bytes of text values brought back per join-key column: long values would otherwise
reach the size of array Postgres allows (1 GB) well below ``KEY_VALUES_MAX`` values."""
UNREADABLE = frozenset({"query_failed", "type_mismatch"})
"""Codes of a relation the database fails to read (a view dividing by zero, calling a function
the reader may not run, casting a value that does not fit): it is left out and named in a note,
and the other tables are investigated."""
KEY_TYPES = ("smallint", "integer", "bigint", "text", "character varying", "date")
"""Postgres types whose ``=`` is the equality of the values psycopg returns (for text, under a
deterministic collation): ``character`` ignores trailing spaces, ``citext`` case and a
nondeterministic collation what it was made to ignore, so their keys are checked in SQL."""


def open_context(
    location: str, limits: Limits | None = None, tables: Collection[str] | None = None
) -> ToolContext | PostgresContext:
    """A read-only tool context on ``location``: a ``postgresql://`` URL (profiled in place) or
    a DuckDB file written by the loader, knowing only ``tables`` of the file when given."""
    if is_postgres_url(location):
        return open_postgres(location, limits)
    return ToolContext(location, limits, tables)


def open_postgres(url: str, limits: Limits | None = None) -> PostgresContext:
    """Connect read-only to the tables ``url`` names and give the context their profiles and
    join keys (see the module's docstring)."""
    ctx = PostgresContext(url, limits)
    try:
        ctx.schema.catalog = profile_postgres(ctx)
    except BaseException:
        ctx.close()
        raise
    return ctx


def profile_postgres(
    ctx: PostgresContext, *, exact_distinct_max_rows: int = EXACT_DISTINCT_MAX_ROWS
) -> Catalog:
    """Profiles of every table of ``ctx`` and the join keys between them, measured in Postgres:
    the pass over each table also measures what the keys' checks need (see the module's
    docstring). ``exact_distinct_max_rows`` is passed to :func:`profile_table`."""
    keyed = _key_columns(ctx)
    profiles: dict[str, TableProfile] = {}
    known: dict[tuple[str, str], KeyFacts] = {}
    for t in ctx.schema.table_names:
        try:
            profiles[t], facts = _measure_table(
                ctx, t, keyed.get(t, set()), exact_distinct_max_rows=exact_distinct_max_rows
            )
        except SqlToolError as exc:
            if exc.code not in UNREADABLE:
                raise  # a time or resource limit, a lost connection: the source's, not the table's
            ctx.schema.leave_out(t, f"reading it fails in the database ({exc.code})", "relation")
            continue
        known |= {(t, c): f for c, f in facts.items()}
    keys = detect_join_keys(_Connection(ctx), profiles, schema=ctx.source.schema, known=known)
    return Catalog(profiles=profiles, join_keys=keys)


def _key_columns(ctx: PostgresContext) -> dict[str, set[str]]:
    """Per table, the columns whose values the pass brings back: both sides of each pair that
    names and types make a join-key candidate, when both are of ``KEY_TYPES``."""
    pairs = join_candidates(
        {t: [(c.name, c.type) for c in cols] for t, cols in ctx.schema.tables.items()}
    )
    comparable = _comparable_columns(ctx) if pairs else set()
    keyed: dict[str, set[str]] = {}
    for a, x, b, y in pairs:
        if (a, x) in comparable and (b, y) in comparable:
            keyed.setdefault(a, set()).add(x)
            keyed.setdefault(b, set()).add(y)
    return keyed


def _comparable_columns(ctx: PostgresContext) -> set[tuple[str, str]]:
    """The ``(table, column)`` of ``KEY_TYPES`` with a deterministic collation, from the
    catalogue (no table is read)."""
    rows = ctx.introspect(
        "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_catalog.pg_collation l ON l.oid = a.attcollation "
        "WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s) AND a.attnum > 0 "
        "AND NOT a.attisdropped AND format_type(a.atttypid, NULL) = ANY(%(types)s) "
        "AND coalesce(l.collisdeterministic, true)",
        {"schema": ctx.source.schema, "tables": ctx.schema.table_names, "types": list(KEY_TYPES)},
    )
    return {(t, c) for t, c in rows}


class _Connection:
    """The ``execute(sql, params).fetchall()`` that :func:`detect_join_keys` runs its checks
    through, on the context's read-only transactions."""

    def __init__(self, ctx: PostgresContext) -> None:
        self.ctx = ctx
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Connection:
        assert not params, "the join-key checks take no parameters"
        self.rows = self.ctx.introspect(sql)
        return self

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


def _table(ctx: PostgresContext, table: str) -> str:
    return f"{quote(ctx.source.schema)}.{quote(table)}"


def _text(column: str) -> str:
    """A text column compared byte by byte."""
    return f'{quote(column)} COLLATE "C"'


def _min_max(duck_type: str) -> tuple[str, str] | None:
    """The aggregates giving a column's range (None when the type has none in Postgres)."""
    kind = kind_of(duck_type)
    if kind == "boolean":
        return ("bool_and", "bool_or")
    if kind in ("number", "text", "date", "timestamp") or duck_type.upper() in _ORDERABLE_OTHER:
        return ("min", "max")
    return None


def profile_table(
    ctx: PostgresContext, table: str, *, exact_distinct_max_rows: int = EXACT_DISTINCT_MAX_ROWS
) -> TableProfile:
    """Profile every column of one table over all its rows, in one pass (see the module's
    docstring). The pass also measures the table's fingerprint, kept on ``ctx``
    (:meth:`~sql_tools._postgres.PostgresContext.content_fingerprint` reads it)."""
    return _measure_table(ctx, table, set(), exact_distinct_max_rows=exact_distinct_max_rows)[0]


def _measure_table(
    ctx: PostgresContext,
    table: str,
    keyed: Collection[str],
    *,
    exact_distinct_max_rows: int = EXACT_DISTINCT_MAX_ROWS,
) -> tuple[TableProfile, dict[str, KeyFacts]]:
    """:func:`profile_table`, and per column what the join keys' checks need: whether its
    values are all different (exact), and for the ``keyed`` columns their values, when the pass
    brought back all of them."""
    sets = _one_pass(ctx, table, keyed)
    row_count = int(sets[-1]["n"] or 0)
    ctx.measured[table] = (row_count, str(sets[-1]["h"]))
    estimates = (
        _distinct_estimates(ctx, table, row_count) if row_count > exact_distinct_max_rows else {}
    )
    columns = [
        _column_profile(c.name, c.type, row_count, sets.get(i, {}), estimates.get(c.name))
        for i, c in enumerate(ctx.schema.tables[table])
    ]
    facts = {
        c.name: _key_facts(sets.get(i, {}), c.name in keyed)
        for i, c in enumerate(ctx.schema.tables[table])
    }
    return TableProfile(name=table, row_count=row_count, columns=columns), facts


def _key_facts(st: dict[str, Any], keyed: bool) -> KeyFacts:
    """A column's facts from its grouping set's exact counts ``st``; its values only when the
    pass brought back every one (not cut by ``KEY_VALUES_MAX`` or ``KEY_TEXT_MAX_BYTES``)."""
    non_null, distinct = int(st.get("nn") or 0), int(st.get("distinct") or 0)
    values = st.get("values") or []
    complete = keyed and len(values) == distinct
    return KeyFacts(unique=0 < non_null == distinct, values=frozenset(values) if complete else None)


def _column_profile(
    name: str, duck_type: str, row_count: int, st: dict[str, Any], estimate: int | None
) -> ColumnProfile:
    """One column's profile from its grouping set's numbers ``st`` (none: a table without
    rows); ``estimate`` is Postgres's estimate of its distinct values, used when given."""
    kind = kind_of(duck_type)
    non_null = int(st.get("nn") or 0)
    distinct = estimate if estimate is not None else int(st.get("distinct") or 0)
    distinct = min(distinct, non_null) or (1 if non_null else 0)
    mixed, note, avg_length = None, None, None
    if kind == "text":
        numbers, dates = int(st.get("numbers") or 0), int(st.get("dates") or 0)
        mixed = _mixed_kind(non_null, numbers, dates)
        if mixed is not None:
            count = numbers if mixed == "numbers" else dates
            note = _mixed_note(mixed, non_null, count, st[f"odd_{mixed}"])
        avg_length = int(st.get("length") or 0) / non_null if non_null else 0.0
    null_count = row_count - non_null
    return ColumnProfile(
        name=name,
        label=name,
        type=duck_type,
        kind=kind,
        null_count=null_count,
        null_rate=null_count / row_count if row_count else 0.0,
        distinct_count=distinct,
        distinct_exact=estimate is None,
        min=_cut(jsonable(st.get("min"))),
        max=_cut(jsonable(st.get("max"))),
        samples=_sample_list(st.get("samples") or []),
        mixed_type=mixed is not None,
        mixed_note=note,
        role=guess_role(name, duck_type, row_count, non_null, distinct, avg_length),
    )


def _value(column: str, kind: str) -> str:
    """The column as it is grouped and compared: text byte by byte, other types as text."""
    q = f"r.{quote(column)}"
    if kind == "text":
        return f'{q} COLLATE "C"'
    return q if kind != "other" else f"CAST({q} AS text)"


def _column_outputs(v: str, kind: str, duck_type: str) -> dict[str, str]:
    """What the one pass computes of a column from its groups ``v`` (a value, its rows ``n``,
    its rank ``rk`` among them): the statistics the separate queries used to measure on rows."""
    out = {"samples": f"array_agg({v} ORDER BY rk) FILTER (WHERE {v} IS NOT NULL AND rk <= 20)"}
    agg = _min_max(duck_type)
    if agg is not None:
        out |= {"min": f"{agg[0]}({v})", "max": f"{agg[1]}({v})"}
    if kind == "text":
        plain = f'({v} COLLATE "default")'  # the patterns match as they did on the rows
        for key, pattern in _PATTERNS.items():
            out[key] = f"sum(n) FILTER (WHERE {plain} ~ {quote_literal(pattern)})"
            out[f"odd_{key}"] = f"min({v}) FILTER (WHERE NOT {plain} ~ {quote_literal(pattern)})"
        out["length"] = f"sum(length({v}) * n)"
    return out


def _key_values(v: str, kind: str) -> str:
    """The aggregate bringing back a join-key column's distinct non-NULL values (its groups
    ``v``): the first ``KEY_VALUES_MAX`` by rank, text only while their bytes (``kb``, summed in
    rank order) stay within ``KEY_TEXT_MAX_BYTES``."""
    cap = f"rk <= {KEY_VALUES_MAX}"
    if kind == "text":
        cap += f" AND kb <= {KEY_TEXT_MAX_BYTES}"
    return f"array_agg({v}) FILTER (WHERE {v} IS NOT NULL AND {cap})"


def _one_pass(
    ctx: PostgresContext, table: str, keyed: Collection[str] = ()
) -> dict[int, dict[str, Any]]:
    """Every column's statistics and samples, the table's rows and the sum of their hashes, from
    one statement (one scan): ``GROUP BY GROUPING SETS ((), (a), (b), ...)`` counts the rows of
    each value of each column, and a column's groups give its statistics. Returns set ``i``'s
    numbers for column ``i`` (``nn``, ``distinct`` and :func:`_column_outputs`, and for the
    ``keyed`` columns ``values``, see :func:`_key_values`), and for set ``-1`` (the whole
    table) ``n``, its rows, and ``h``, the fingerprint's sum of row hashes."""
    cols = ctx.schema.tables[table]
    values = [_value(c.name, c.kind) for c in cols]
    v = [f"v{i}" for i in range(len(cols))]
    which = "".join(f"WHEN GROUPING({e}) = 0 THEN {i} " for i, e in enumerate(values))
    which = f"CASE {which}ELSE -1 END" if values else "-1"
    has = f"num_nonnulls({', '.join(v)}) > 0" if v else "false"
    keys: list[tuple[str, int]] = [("n", -1), ("h", -1), ("nn", -1), ("distinct", -1)]
    outputs = ["sum(n)", "max(h)", "sum(n) FILTER (WHERE has)", "count(*) FILTER (WHERE has)"]
    for i, c in enumerate(cols):
        column_outputs = _column_outputs(v[i], c.kind, c.type)
        if c.name in keyed:
            column_outputs["values"] = _key_values(v[i], c.kind)
        for key, expr in column_outputs.items():
            keys.append((key, i))
            outputs.append(expr)
    texts = [v[i] for i, c in enumerate(cols) if c.name in keyed and c.kind == "text"]
    kb = (
        f", sum(octet_length(coalesce({', '.join(texts)}))) OVER (o ROWS UNBOUNDED PRECEDING) AS kb"
        if texts
        else ""
    )
    sets = ", ".join(["()", *(f"({e})" for e in values)])
    sql = (
        f"WITH v AS (SELECT {which} AS g, "
        + "".join(f"{e} AS {name}, " for e, name in zip(values, v, strict=True))
        + f"count(*) AS n, {ROW_HASH_SUM} AS h "
        f"FROM {_table(ctx, table)} AS r GROUP BY GROUPING SETS ({sets})), "
        f"w AS (SELECT v.*, {has} AS has, row_number() OVER o AS rk{kb} FROM v "
        f"WINDOW o AS (PARTITION BY g, {has} ORDER BY {', '.join(['n DESC', *v])})) "
        f"SELECT g, {', '.join(outputs)} FROM w GROUP BY g"
    )
    out: dict[int, dict[str, Any]] = {}
    for g, *row in ctx.introspect(sql):
        out[int(g)] = {key: x for (key, i), x in zip(keys, row, strict=True) if i in (-1, int(g))}
    return out


def _distinct_estimates(ctx: PostgresContext, table: str, row_count: int) -> dict[str, int]:
    """Postgres's estimates of each column's distinct values (``pg_stats.n_distinct``: a count,
    or minus a share of the rows), for the columns ANALYZE has measured."""
    rows = ctx.introspect(
        "SELECT attname, n_distinct FROM pg_catalog.pg_stats "
        "WHERE schemaname = %(schema)s AND tablename = %(table)s",
        {"schema": ctx.source.schema, "table": table},
    )
    return {
        name: max(int(round(-n * row_count if n < 0 else n)), 1)
        for name, n in rows
        if n is not None
    }

"""Data that stays in Postgres: open a read-only context on it and profile its tables there.

Nothing is loaded or copied. :func:`open_postgres` connects (refusing a role that may write,
see :class:`~sql_tools._postgres.PostgresContext`), then measures each chosen table with a few
queries run in Postgres and read-only, and gives the context the same catalogue the DuckDB
loader stores: per column its kind, nulls, distinct count, range, most frequent values, a
guessed role (:func:`~tasks.ingest.profile.guess_role`), and the verified join keys between the
tables (:func:`~tasks.ingest.profile.detect_join_keys`, whose two checks are plain SQL).

Cost per table: one ``count(*)`` scan with every column's statistics, one small ``GROUP BY`` (or
``LIMIT``) query per column for its samples, and for mostly-numeric or mostly-date text columns
one more scan for an example of the odd values. Distinct counts are exact up to
``EXACT_DISTINCT_MAX_ROWS`` rows; above, Postgres's own estimate from its statistics (``pg_stats``,
kept by ANALYZE) is used when there is one, else the exact count. Text is compared byte by byte
(``COLLATE "C"``), as DuckDB compares it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sql_tools._context import Limits, ToolContext
from sql_tools._postgres import PostgresContext, is_postgres_url
from sql_tools.catalog import Catalog, ColumnProfile, Scalar, TableProfile, jsonable, kind_of
from tasks.ingest.profile import (
    EXACT_DISTINCT_MAX_ROWS,
    _cut,
    _mixed_kind,
    _mixed_note,
    _near_unique,
    _sample_list,
    detect_join_keys,
    guess_role,
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


def profile_postgres(ctx: PostgresContext) -> Catalog:
    """Profiles of every table of ``ctx`` and the join keys between them, measured in Postgres."""
    profiles = {t: profile_table(ctx, t) for t in ctx.schema.table_names}
    keys = detect_join_keys(_Connection(ctx), profiles, schema=ctx.source.schema)
    return Catalog(profiles=profiles, join_keys=keys)


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


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
    """Profile every column of one table over all its rows (see the module's docstring)."""
    cols = [(c.name, c.type) for c in ctx.schema.tables[table]]
    tref = _table(ctx, table)
    row_count = int(ctx.introspect(f"SELECT count(*) FROM {tref}")[0][0])
    estimates = (
        _distinct_estimates(ctx, table, row_count) if row_count > exact_distinct_max_rows else {}
    )
    exprs: list[str] = []
    slots: list[dict[str, int]] = []
    for name, duck_type in cols:
        kind = kind_of(duck_type)
        q = quote(name)
        value = _text(name) if kind == "text" else q if kind != "other" else f"CAST({q} AS text)"
        slot: dict[str, int] = {}

        def add(expr: str, key: str, slot: dict[str, int] = slot) -> None:
            slot[key] = len(exprs)
            exprs.append(expr)

        add(f"count({q})", "nn")
        if name not in estimates:
            add(f"count(DISTINCT {value})", "distinct")
        agg = _min_max(duck_type)
        if agg is not None:
            add(f"{agg[0]}({value})", "min")
            add(f"{agg[1]}({value})", "max")
        if kind == "text":
            for key, pattern in _PATTERNS.items():
                add(f"count(*) FILTER (WHERE {q} ~ {_literal(pattern)})", key)
            add(f"avg(length({q}))", "avg_length")
        slots.append(slot)
    agg_row = ctx.introspect(f"SELECT {', '.join(exprs)} FROM {tref}")[0]

    profiles: list[ColumnProfile] = []
    mixed: dict[str, tuple[str, int]] = {}
    stats: list[dict[str, Any]] = []
    for (name, duck_type), slot in zip(cols, slots, strict=True):
        st = {key: agg_row[i] for key, i in slot.items()}
        non_null = int(st["nn"] or 0)
        distinct = estimates[name] if name in estimates else int(st["distinct"] or 0)
        st["nn"], st["distinct"] = non_null, min(distinct, non_null) or (1 if non_null else 0)
        if kind_of(duck_type) == "text":
            kind = _mixed_kind(non_null, int(st["numbers"] or 0), int(st["dates"] or 0))
            if kind is not None:
                mixed[name] = (kind, int(st[kind] or 0))
        stats.append(st)
    examples = _mixed_examples(ctx, table, {n: k for n, (k, _) in mixed.items()})
    for (name, duck_type), st in zip(cols, stats, strict=True):
        non_null, distinct = st["nn"], st["distinct"]
        kind = kind_of(duck_type)
        note = None
        if name in mixed:
            note = _mixed_note(mixed[name][0], non_null, mixed[name][1], examples[name])
        avg_length = float(st["avg_length"] or 0.0) if kind == "text" else None
        null_count = row_count - non_null
        profiles.append(
            ColumnProfile(
                name=name,
                label=name,
                type=duck_type,
                kind=kind,
                null_count=null_count,
                null_rate=null_count / row_count if row_count else 0.0,
                distinct_count=distinct,
                distinct_exact=name not in estimates,
                min=_cut(jsonable(st.get("min"))),
                max=_cut(jsonable(st.get("max"))),
                samples=_samples(ctx, table, name, kind, non_null, distinct),
                mixed_type=name in mixed,
                mixed_note=note,
                role=guess_role(name, duck_type, row_count, non_null, distinct, avg_length),
            )
        )
    return TableProfile(name=table, row_count=row_count, columns=profiles)


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


def _samples(
    ctx: PostgresContext, table: str, column: str, kind: str, non_null: int, distinct: int
) -> list[Scalar]:
    """Up to five most frequent non-null values (the first ones found for near-unique columns)."""
    if non_null == 0:
        return []
    q, t = quote(column), _table(ctx, table)
    if _near_unique(non_null, distinct):
        rows = ctx.introspect(f"SELECT {q} FROM {t} WHERE {q} IS NOT NULL LIMIT 20")
    else:
        value = _text(column) if kind == "text" else q if kind != "other" else f"CAST({q} AS text)"
        rows = ctx.introspect(
            f"SELECT {value} AS v FROM {t} WHERE {q} IS NOT NULL GROUP BY 1 "
            "ORDER BY count(*) DESC, 1 LIMIT 5"
        )
    return _sample_list(value for (value,) in rows)


def _mixed_examples(ctx: PostgresContext, table: str, kinds: dict[str, str]) -> dict[str, Any]:
    """For each mostly-numeric or mostly-date text column, its smallest value that is not one."""
    if not kinds:
        return {}
    exprs = [
        f"min({_text(c)}) FILTER (WHERE NOT {quote(c)} ~ {_literal(_PATTERNS[k])})"
        for c, k in kinds.items()
    ]
    row = ctx.introspect(f"SELECT {', '.join(exprs)} FROM {_table(ctx, table)}")[0]
    return dict(zip(kinds, row, strict=True))

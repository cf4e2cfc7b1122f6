"""The dimensions a question searches: the columns a user names, or the profiled dimension
columns of the table and its joined tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sql_tools import Column, Schema, ToolInputError, short
from tasks.engine.parse.columns import _column
from tasks.engine.spec import Metric, Periods

MAX_DIMENSION_DISTINCT = 1_000


def _join_columns(schema: Schema) -> set[tuple[str, str]]:
    """(table, column) of every join-key column."""
    keys: set[tuple[str, str]] = set()
    for k in schema.catalog.join_keys:
        keys.add((k.from_table, k.from_column))
        keys.add((k.to_table, k.to_column))
    return keys


def _is_dimension(schema: Schema, col: Column) -> bool:
    prof = schema.column_profile(col)
    return (
        prof is not None
        and prof.role == "dimension"
        and 1 < prof.distinct_count <= MAX_DIMENSION_DISTINCT
    )


def default_dimensions(schema: Schema, table: str, *, exclude: Iterable[str]) -> list[str]:
    """Columns worth searching: profile role ``dimension`` with 2-1,000 distinct values.

    Covers the table and its joined tables (``table.column`` refs), base table first, in column
    order. Join-key columns and ``exclude`` (refs, case-insensitive) are left out. Columns of
    tables without a stored profile are never chosen.
    """
    base = schema.table(table)
    skip = {e.lower() for e in exclude}
    keys = _join_columns(schema)
    return [
        c.ref
        for c in schema.columns_for(base)
        if c.ref.lower() not in skip and (c.table, c.name) not in keys and _is_dimension(schema, c)
    ]


def _split_dimensions(dimensions: str | Sequence[str]) -> list[str]:
    items = dimensions.split(",") if isinstance(dimensions, str) else list(dimensions)
    names = [d.strip() for d in items if isinstance(d, str)]
    if not names or len(names) != len(items) or not all(names):
        raise ToolInputError(
            f"dimensions must be column names separated by commas, got {short(dimensions)}",
            code="invalid_arguments",
            field="dimensions",
        )
    return names


def _resolve_dimensions(
    schema: Schema, table: str, dimensions: str | Sequence[str], periods: Periods
) -> tuple[str, ...]:
    """Resolve user-named dimensions to canonical refs (deduplicated, order kept)."""
    period_col = periods.time_column or periods.period_column
    refs: dict[str, None] = {}
    for d in _split_dimensions(dimensions):
        col = _column(schema, table, _dimension_ref(d, table), "dimensions")
        if col.ref == period_col:
            raise ToolInputError(
                f"dimension {col.ref!r} is the column that defines the periods",
                code="invalid_arguments",
                field="dimensions",
            )
        refs[col.ref] = None
    return tuple(refs)


def _dimension_ref(text: str, table: str) -> str:
    """``events.platform`` -> ``platform`` when ``events`` is the base table."""
    head, dot, tail = text.partition(".")
    return tail if dot and head.lower() == table.lower() else text


def _metric_columns(metric: Metric) -> list[str]:
    aggs = [metric.numerator] + ([metric.denominator] if metric.denominator else [])
    return [a.column for a in aggs if a.column is not None]


def _single_value_columns(metric: Metric) -> list[str]:
    """Columns a filter pins to one value (no point searching them)."""
    return [f.column for f in metric.filters if f.op in ("=", "is_null")]


def _dimensions(
    schema: Schema,
    metric: Metric,
    periods: Periods,
    dimensions: str | Sequence[str] | None,
) -> tuple[str, ...]:
    if dimensions is not None:
        return _resolve_dimensions(schema, metric.table, dimensions, periods)
    exclude = [*_metric_columns(metric), *_single_value_columns(metric)]
    exclude += [c for c in (periods.time_column, periods.period_column) if c]
    found = default_dimensions(schema, metric.table, exclude=exclude)
    if not found:
        raise ToolInputError(
            f"found no dimension columns to search in {metric.table!r}; pass --dimensions",
            code="invalid_arguments",
            field="dimensions",
        )
    return tuple(found)

"""A parsed metric expression resolved against the live :class:`Schema` into a :class:`Metric`:
its table (inferred when not given), its columns, their types, its grain and filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sql_tools import Filter, Schema, ToolInputError, short
from tasks.engine.parse.columns import _closest_name, _Ref, _resolve
from tasks.engine.parse.expression import METRIC_CODE, _Agg, _Expr, _parse_expression
from tasks.engine.parse.filters import _canonical_filter
from tasks.engine.parse.validation import _validated
from tasks.engine.spec import Aggregate, Metric


def _resolves(schema: Schema, table: str, ref: _Ref) -> bool:
    try:
        _resolve(schema, table, ref)
    except ToolInputError:
        return False
    return True


def _infer_table(schema: Schema, expr: _Expr, text: str) -> str:
    """The single table on which every column of ``expr`` resolves."""
    refs = expr.refs
    tables = schema.table_names
    if not tables:
        raise ToolInputError("the database has no tables", code="unknown_table", field="table")
    fits = [t for t in tables if all(_resolves(schema, t, r) for r in refs)]
    if len(fits) == 1:
        return fits[0]
    if fits:
        raise ToolInputError(
            f"metric {short(text)} fits more than one table; pass --table",
            code="invalid_arguments",
            valid_values=fits,
            field="table",
        )
    missing = [r.text for r in refs if not any(_resolves(schema, t, r) for t in tables)]
    if missing:
        _refuse_misspelled(schema, missing[0])
    problem = (
        f"no table has column(s) {', '.join(map(repr, missing))}"
        if missing
        else f"no single table has every column of metric {short(text)}"
    )
    raise ToolInputError(
        f"{problem}; pass --table to see its columns",
        code="unknown_column",
        valid_values=tables,
        field="table",
    )


def _refuse_misspelled(schema: Schema, name: str) -> None:
    """Refuse a column no table has by the closest column of any table, when one is close."""
    tables = schema.table_names
    candidates = {c.ref: t for t in tables for c in schema.columns_for(t)}
    close = _closest_name(name.rpartition(".")[2], list(candidates))
    if close is None:
        return
    table = candidates[close]
    raise ToolInputError(
        f"no table has column {short(name)}; closest: {close!r} in table {table!r}",
        code="unknown_column",
        valid_values=[c.ref for c in schema.columns_for(table)],
        field="metric",
    )


def _aggregate(schema: Schema, table: str, agg: _Agg) -> Aggregate:
    """Resolve an aggregate's column and check its type."""
    if agg.ref is None:
        return Aggregate(fn=agg.fn)
    col = _resolve(schema, table, agg.ref)
    if agg.fn in ("sum", "avg") and col.kind != "number":
        raise ToolInputError(
            f"type mismatch: {agg.fn} needs a numeric column; {col.ref!r} is {col.kind} "
            f"({col.type})",
            code="type_mismatch",
            field="metric",
        )
    return Aggregate(fn=agg.fn, column=col.ref)


def _check_grain(grain: str | None) -> Literal["day"] | None:
    if grain is None:
        return None
    if isinstance(grain, str) and grain.strip().lower() == "day":
        return "day"
    raise ToolInputError(
        f"unknown grain {short(grain)}",
        code="invalid_arguments",
        valid_values=["day"],
        field="grain",
    )


def parse_metric(
    text: str,
    schema: Schema,
    table: str | None = None,
    *,
    grain: str | None = None,
    filters: Sequence[Filter] = (),
    name: str | None = None,
) -> Metric:
    """Parse ``sum(x)``, ``avg(x)``, ``count(*)``, ``count(x)``, ``count(distinct x)`` or ``A / B``.

    Keywords are case-insensitive and whitespace may appear anywhere. A column is a bare name,
    ``table.column`` (a joined table's column, or the base table's own) or a double-quoted name
    (``""`` escapes a quote).

    Args:
        text: The metric as the user wrote it.
        schema: The live schema.
        table: Base table; None infers the single table where every column resolves.
        grain: None or ``"day"``.
        filters: Conditions restricting the metric's rows (columns resolved against the table).
        name: The metric's name in ``metrics.yaml``, if any.

    Returns:
        The metric, with canonical column references.

    Raises:
        ToolInputError: Syntax errors (with the character position and what was expected),
            unknown or ambiguous tables, unknown columns, ``sum``/``avg`` of a non-number.
    """
    return _metric_from(
        _parse_expression(text), text, schema, table, grain=grain, filters=filters, name=name
    )


def _metric_from(
    expr: _Expr,
    text: str,
    schema: Schema,
    table: str | None,
    *,
    grain: str | None = None,
    filters: Sequence[Filter] = (),
    name: str | None = None,
) -> Metric:
    """The metric whose syntax ``expr`` was parsed from ``text``, resolved against the schema."""
    day = _check_grain(grain)
    base = schema.table(table) if table is not None else _infer_table(schema, expr, text)
    numerator = _aggregate(schema, base, expr.numerator)
    denominator = _aggregate(schema, base, expr.denominator) if expr.denominator else None
    checked = tuple(_canonical_filter(schema, base, f) for f in filters)
    return _validated(
        lambda: Metric(
            table=base,
            numerator=numerator,
            denominator=denominator,
            grain=day,
            filters=checked,
            name=name,
        ),
        what=f"invalid metric {short(text)}",
        code=METRIC_CODE,
        field="metric",
    )

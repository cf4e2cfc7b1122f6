"""metric_aggregate: measures over optional group-by columns, filtered, ordered and capped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator
from sqlglot import exp

from sql_tools._context import Column, ToolContext
from sql_tools._errors import ToolInputError
from sql_tools._names import column_alias, private, public_rows, row_keys
from sql_tools._sql import (
    MAX_SEGMENT_COLUMNS,
    case_notes,
    Filter,
    Measure,
    Params,
    Source,
    SourceQuery,
    StrictModel,
    ToolResult,
    check_limit,
    measure_expr,
    measure_label,
    non_finite_notes,
    non_finite_result,
    run_source_query,
    shape_rows,
    where_clause,
)


class OrderBy(StrictModel):
    """Sort order of the result rows."""

    by: str = Field(
        description="A measure's output name (e.g. sum_revenue, count) or a group-by column.",
        json_schema_extra={"x-live": "output"},
    )
    direction: Literal["asc", "desc"] = "desc"


class AggregateInput(StrictModel):
    __doc__ = f"""Compute measures (count, count_distinct, sum, avg, min, max) over a table,
    optionally grouped by up to {MAX_SEGMENT_COLUMNS} columns and filtered. Use it to size
    segments and check a number before claiming it. Returns one row per group with the measures,
    largest first by default, capped at ``limit`` rows with ``matched_count`` giving the number
    of groups.
    """

    table: str = Field(description="Table to aggregate.", json_schema_extra={"x-live": "table"})
    measures: list[Measure] = Field(
        min_length=1,
        max_length=10,
        description="What to compute, e.g. [{agg: sum, column: revenue}].",
    )
    group_by: list[str] = Field(
        default=[],
        max_length=MAX_SEGMENT_COLUMNS,
        description=f"Up to {MAX_SEGMENT_COLUMNS} columns to group by (table.column for a joined "
        "table).",
        json_schema_extra={"x-live": "column"},
    )
    filters: list[Filter] = Field(default=[], description="Conditions, combined with AND.")
    order_by: OrderBy | None = Field(
        default=None, description="Default: the first measure, descending."
    )
    limit: int | None = Field(
        default=None, ge=1, description="Rows to return (default 50, max 1000)."
    )

    @model_validator(mode="after")
    def _distinct_groups(self) -> AggregateInput:
        if len(set(self.group_by)) != len(self.group_by):
            raise ValueError("group_by columns must not repeat")
        return self


class AggregateResult(ToolResult):
    """Grouped measures."""

    table: str
    group_by: list[str]
    measures: list[str] = Field(description="Output names of the measures, in order.")


@dataclass
class AggregateQuery(SourceQuery):
    """The query ``metric_aggregate`` runs, with what shaping its rows needs."""

    table: str
    group_by: list[str]
    measures: list[str]
    limit: int
    non_finite: dict[str, Column]
    """Outputs that can come back NaN or ±Infinity: measure name -> its column."""


def aggregate_query(ctx: ToolContext, inp: AggregateInput) -> AggregateQuery:
    """Build (not run) the grouped aggregate query of ``inp`` from the schema and limits."""
    limit = check_limit(ctx, inp.limit)
    src = Source(ctx, inp.table)
    params = Params()
    groups = [src.resolve(g, "group_by") for g in inp.group_by]
    projections: list[exp.Expression] = [
        src.expr(g).as_(column_alias(i)) for i, g in enumerate(groups)
    ]
    labels: list[str] = []
    measured: dict[str, Column] = {}
    for m in inp.measures:
        agg, col = measure_expr(src, m)
        label = measure_label(m, col)
        if label in labels:
            raise ToolInputError(f"measure {label!r} is requested twice", code="invalid_arguments")
        name = private(f"m{len(labels)}")
        labels.append(label)
        projections.append(agg.as_(name))
        if non_finite_result(m.agg, col):
            measured[name] = col  # type: ignore[assignment]
    where = where_clause(ctx, src, inp.filters, params)
    matched = exp.Window(this=exp.Count(this=exp.Star())).as_(private("matched"))
    select = exp.select(*projections, matched)
    if where is not None:
        select = select.where(where)
    select = src.apply(select)
    if groups:
        select = select.group_by(*[src.expr(g) for g in groups])
    order = inp.order_by or OrderBy(by=labels[0], direction="desc")
    keys = row_keys(src.table, [g.ref for g in groups], labels)
    out_names = keys + labels
    by = next((i for i, n in enumerate(out_names) if n == order.by), None)
    if by is None:
        by = next((i for i, n in enumerate(out_names) if n.lower() == order.by.lower()), None)
    if by is None:
        raise ToolInputError(
            f"order_by {order.by!r} is not an output column",
            code="invalid_arguments",
            valid_values=out_names,
            field="order_by.by",
        )
    # by position: a user's column of the same name as an output is never what is meant
    ordering = [
        exp.Ordered(
            this=exp.Literal.number(by + 1), desc=order.direction == "desc", nulls_first=False
        )
    ]
    ordering += [exp.Ordered(this=exp.Literal.number(i + 1)) for i in range(len(groups)) if i != by]
    select = select.order_by(*ordering).limit(limit + 1)
    return AggregateQuery(
        tree=select,
        params=params.values,
        src=src,
        where=where,
        table=src.table,
        group_by=keys,
        measures=labels,
        limit=limit,
        non_finite=measured,
    )


def aggregate(ctx: ToolContext, inp: AggregateInput) -> AggregateResult:
    """Run one grouped aggregate query."""
    q = aggregate_query(ctx, inp)
    out = run_source_query(ctx, inp, q, q.limit + 1)
    names, rows, truncated, notes = shape_rows(ctx, out, limit=q.limit, drop=(private("matched"),))
    notes += non_finite_notes(ctx, q, out, q.non_finite)
    public = {column_alias(i): k for i, k in enumerate(q.group_by)}
    public |= {private(f"m{j}"): label for j, label in enumerate(q.measures)}
    names, rows = public_rows(names, rows, public)
    matched = int(out.rows[0][-1]) if out.rows else 0
    if not out.rows or not q.group_by and all(v in (0, None) for v in out.rows[0][:-1]):
        notes += case_notes(ctx, q.table, inp.filters)  # no rows matched (or none counted)
    if any(m.agg == "count_distinct" for m in inp.measures) and q.group_by:
        notes.append("count_distinct is not additive: group values need not sum to the total")
    return AggregateResult(
        table=q.table,
        group_by=q.group_by,
        measures=q.measures,
        columns=names,
        rows=rows,
        matched_count=matched,
        truncated=truncated or matched > len(rows),
        sql=out.sql,
        params=out.params,
        elapsed_ms=round(out.elapsed_ms, 2),
        notes=notes,
    )

"""Shared query building: validated filters and measures, joins, bound parameters, result shaping.

SQL is built as a sqlglot AST with every identifier quoted; every value from a caller becomes a
named parameter (``$p1``, ``$p2``, ...). Nothing a caller sends is ever pasted into SQL text.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from sql_tools._context import Column, QueryOutput, Schema, ToolContext
from sql_tools._errors import ToolInputError, short
from sql_tools.catalog import INTEGER_TYPES, Scalar, jsonable
from sql_tools.dialects import render
from sql_tools.output import MAX_SAFE_INTEGER

FilterOp = Literal[
    "=", "!=", "<", "<=", ">", ">=", "in", "not_in", "is_null", "not_null", "between", "contains"
]
_INTEGER = re.compile(r"-?[0-9]{1,40}")
MAX_SEGMENT_COLUMNS = 6
"""Most columns one segment combines, everywhere: a tool's group_by, a hypothesis's or a
finding's segment, and the depth the engine searches to."""
Agg = Literal["count", "count_distinct", "sum", "avg", "min", "max"]


class StrictModel(BaseModel):
    """Base for tool inputs: unknown fields are an error and values are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Filter(StrictModel):
    """One condition; all filters of a call are combined with AND."""

    column: str = Field(
        description="Column to test (a joined table's column is written table.column).",
        json_schema_extra={"x-live": "column"},
    )
    op: FilterOp = Field(
        description="Operator. in/not_in take a list; between takes [low, high] (inclusive); "
        "is_null/not_null take no value; contains matches a literal substring (text columns)."
    )
    value: Any = Field(
        default=None,
        description="Number, string, true/false, ISO date 'YYYY-MM-DD', or a list (in, not_in, "
        "between). Must match the column's type; text matches exactly, letter case included.",
    )


class Measure(StrictModel):
    """An aggregate over one column (or over rows, for count without a column)."""

    agg: Agg = Field(description="Aggregation: count, count_distinct, sum, avg, min or max.")
    column: str | None = Field(
        default=None,
        description="Column to aggregate; omit only for count (counts rows).",
        json_schema_extra={"x-live": "column"},
    )


class ToolResult(BaseModel):
    """Fields every data-returning tool result carries."""

    columns: list[str] = Field(description="Column names of the rows, in order.")
    rows: list[dict[str, Scalar]]
    matched_count: int = Field(description="Rows (or groups) that matched before the row cap.")
    truncated: bool = Field(description="True when rows were cut to the cap.")
    sql: str = Field(description="The exact SQL that ran; re-run it with params to check.")
    params: dict[str, Scalar] = Field(description="Bound parameter values by name.")
    elapsed_ms: float
    notes: list[str] = []


class Params:
    """Collects bound values and hands out ``$pN`` placeholders."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def bind(self, value: Any) -> exp.Expression:
        """A placeholder for ``value`` (bound at execution, never inlined)."""
        name = f"p{len(self.values) + 1}"
        self.values[name] = value
        return exp.Placeholder(this=name)


def ident(name: str) -> exp.Identifier:
    """A quoted identifier."""
    return exp.to_identifier(name, quoted=True)


class Source:
    """The FROM clause of one tool query: a base table plus LEFT JOINs added on demand.

    Joins come only from verified many-to-one join keys, so joining never duplicates base rows.
    """

    def __init__(self, ctx: ToolContext, table: object) -> None:
        self.schema: Schema = ctx.schema
        self.table = self.schema.table(table)
        self._aliases: dict[str, str] = {}

    def resolve(self, ref: object, field_name: str = "column") -> Column:
        """Resolve a column reference for this base table (raises ``unknown_column``)."""
        return self.schema.column(self.table, ref, field_name=field_name)

    def expr(self, col: Column) -> exp.Column:
        """The qualified column expression, registering a join when the column needs one."""
        if col.join is None:
            return exp.Column(this=ident(col.name), table=ident("t0"))
        alias = self._aliases.setdefault(col.table, f"t{len(self._aliases) + 1}")
        return exp.Column(this=ident(col.name), table=ident(alias))

    def apply(self, select: exp.Select) -> exp.Select:
        """Attach FROM and the registered joins to ``select``."""
        select = select.from_(
            exp.Table(this=ident(self.table), alias=exp.TableAlias(this=ident("t0")))
        )
        for k in self.schema.joins_from(self.table):
            alias = self._aliases.get(k.to_table)
            if alias is None:
                continue
            on = exp.EQ(
                this=exp.Column(this=ident(k.from_column), table=ident("t0")),
                expression=exp.Column(this=ident(k.to_column), table=ident(alias)),
            )
            select = select.join(
                exp.Table(this=ident(k.to_table), alias=exp.TableAlias(this=ident(alias))),
                on=on,
                join_type="left",
            )
        return select


def _type_error(col: Column, value: Any, expected: str) -> ToolInputError:
    return ToolInputError(
        f"type mismatch: column {col.ref!r} is {col.kind} ({col.type}); "
        f"value {short(value)} is not {expected}",
        code="type_mismatch",
        field="value",
    )


def typed_value(ctx: ToolContext, col: Column, value: Any) -> Any:
    """Check one filter value against the column's type and return the value to bind."""
    lim = ctx.limits
    if value is None:
        raise ToolInputError(f"filter on {col.ref!r} needs a value", code="invalid_value")
    if isinstance(value, list | dict):
        raise ToolInputError(
            f"filter on {col.ref!r} takes a single value here, not {type(value).__name__}",
            code="invalid_value",
        )
    if isinstance(value, str) and len(value.encode()) > lim.max_string_bytes:
        raise ToolInputError(
            f"string value for {col.ref!r} is longer than {lim.max_string_bytes} bytes",
            code="limit_exceeded",
        )
    if col.kind == "number":
        if isinstance(value, str) and col.type.upper() in INTEGER_TYPES:
            value = _big_integer(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(col, value, "a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolInputError(f"value for {col.ref!r} must be finite", code="invalid_value")
        return value
    if col.kind == "text":
        if not isinstance(value, str):
            raise _type_error(col, value, "a string")
        return value
    if col.kind == "boolean":
        if not isinstance(value, bool):
            raise _type_error(col, value, "true or false")
        return value
    if col.kind in ("date", "timestamp"):
        if not isinstance(value, str):
            raise _type_error(col, value, "an ISO date string")
        return parse_when(value, col.kind, field_name=col.ref)
    raise ToolInputError(
        f"column {col.ref!r} has type {col.type}; only is_null/not_null filters apply",
        code="type_mismatch",
    )


_DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")
_BOOLEAN = {"true": True, "false": False}


def label_value(ctx: ToolContext, col: Column, label: Any, which: str) -> Any:
    """A period label (``which``: baseline or comparison) as a value of the period column's type,
    to bind: a label is written as text on a command line and as a string or a number in a tool's
    arguments, and both mean the column's value. Text of an integer column must be a whole
    number, of a decimal column a number, of a boolean column true or false, of a date column an
    ISO date; a whole JSON number labels a text column as its digits. Anything else is refused."""
    whole = col.type.upper() in INTEGER_TYPES
    if isinstance(label, str) and col.kind != "text":
        label = label.strip()
    if isinstance(label, str) and col.kind in ("number", "boolean"):
        if col.kind == "boolean":
            value, want = _BOOLEAN.get(label.lower()), "true or false"
        elif whole:
            value, want = (int(label) if _INTEGER.fullmatch(label) else None), "a whole number"
        else:
            value, want = (float(label) if _DECIMAL.fullmatch(label) else None), "a number"
        if value is None:
            raise _label_error(col, label, which, want)
        label = value
    elif col.kind == "text" and isinstance(label, int) and not isinstance(label, bool):
        label = str(label)
    elif isinstance(label, float) and whole:
        if not label.is_integer():
            raise _label_error(col, label, which, "a whole number")
        label = int(label)
    return typed_value(ctx, col, label)


def _label_error(col: Column, label: Any, which: str, want: str) -> ToolInputError:
    return ToolInputError(
        f"{which} label {short(label)} is not {want}: period column {col.ref!r} is {col.kind} "
        f"({col.type})",
        code="invalid_period",
        field=which,
    )


def _big_integer(text: str) -> int | str:
    """An integer beyond 2^53 - 1 written as a string (as every JSON the product emits writes
    it) as the integer; any other string unchanged."""
    if _INTEGER.fullmatch(text) and abs(int(text)) > MAX_SAFE_INTEGER:
        return int(text)
    return text


def parse_when(text: str, kind: str, *, field_name: str) -> date | datetime:
    """Parse an ISO date (or, for timestamps, date-time) string."""
    try:
        if kind == "timestamp" and ("T" in text or " " in text.strip()):
            return datetime.fromisoformat(text)
        return date.fromisoformat(text)
    except ValueError:
        raise ToolInputError(
            f"{field_name}: {short(text)} is not an ISO date (YYYY-MM-DD)", code="invalid_value"
        ) from None


def filter_condition(ctx: ToolContext, src: Source, f: Filter, params: Params) -> exp.Expression:
    """Build the SQL condition for one validated filter."""
    col = src.resolve(f.column, "filters.column")
    c = src.expr(col)
    op = f.op
    if op in ("is_null", "not_null"):
        if f.value is not None:
            raise ToolInputError(f"{op} takes no value", code="invalid_value")
        return (
            exp.Is(this=c, expression=exp.Null())
            if op == "is_null"
            else exp.Not(this=exp.Is(this=c, expression=exp.Null()))
        )
    if op in ("in", "not_in", "between"):
        if not isinstance(f.value, list) or not f.value:
            raise ToolInputError(
                f"{op} on {col.ref!r} needs a non-empty list", code="invalid_value"
            )
        if len(f.value) > ctx.limits.max_list_items:
            raise ToolInputError(
                f"{op} list for {col.ref!r} has {len(f.value)} items; at most "
                f"{ctx.limits.max_list_items} allowed",
                code="limit_exceeded",
            )
        values = [typed_value(ctx, col, v) for v in f.value]
        if op == "between":
            if len(values) != 2:
                raise ToolInputError("between takes exactly [low, high]", code="invalid_value")
            return exp.Between(this=c, low=params.bind(values[0]), high=params.bind(values[1]))
        cond = exp.In(this=c, expressions=[params.bind(v) for v in values])
        return cond if op == "in" else exp.Not(this=cond)
    if op == "contains":
        if col.kind != "text":
            raise _type_error(col, f.value, "usable with contains (text columns only)")
        return exp.Anonymous(
            this="contains", expressions=[c, params.bind(typed_value(ctx, col, f.value))]
        )
    value = params.bind(typed_value(ctx, col, f.value))
    cls = {"=": exp.EQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE}[op]
    return cls(this=c, expression=value)


def where_clause(
    ctx: ToolContext, src: Source, filters: list[Filter], params: Params
) -> exp.Expression | None:
    """AND of all filters, or None."""
    if len(filters) > ctx.limits.max_filters:
        raise ToolInputError(
            f"{len(filters)} filters given; at most {ctx.limits.max_filters} allowed",
            code="limit_exceeded",
        )
    conds = [filter_condition(ctx, src, f, params) for f in filters]
    return exp.and_(*conds) if conds else None


MAX_CASE_VALUES = 5
"""Values named per filter value that matches no row exactly but does in another letter case."""


def case_notes(ctx: ToolContext, table: str, filters: list[Filter]) -> list[str]:
    """For a call that matched no rows: each ``=``/``in`` value on a text column that the column
    does not hold, but holds in another letter case (``iOS`` where the data has ``ios``), with
    the values it holds. Matching itself stays exact; one query per such filter."""
    notes: list[str] = []
    for f in filters:
        if f.op not in ("=", "in"):
            continue
        src = Source(ctx, table)
        col = src.resolve(f.column, "filters.column")
        wanted = f.value if isinstance(f.value, list) else [f.value]
        if col.kind != "text" or not all(isinstance(v, str) for v in wanted):
            continue
        prof = ctx.schema.column_profile(col)
        known = set(prof.samples if prof is not None else [])
        known |= ctx.reader.holds(src.table, col.ref, wanted)
        wanted = [v for v in wanted if v not in known]  # held as written: nothing to say
        if not wanted:
            continue
        params = Params()
        c = src.expr(col)
        folded = [params.bind(v) for v in dict.fromkeys(v.lower() for v in wanted)]
        cap = MAX_CASE_VALUES * len(folded) + 1
        folded_in = exp.In(this=exp.Lower(this=c.copy()), expressions=folded)
        tree = src.apply(exp.select(c).distinct().where(folded_in))
        query = Query(tree.order_by(c.copy()).limit(cap), params.values)
        out = ctx.run(query.sql(ctx.dialect), query.params, max_rows=cap)
        held = [r[0] for r in out.rows if isinstance(r[0], str)]
        for v in dict.fromkeys(wanted):
            other = [h for h in held if h != v and h.lower() == v.lower()]
            if v in held or not other:
                continue
            shown = ", ".join(short(h) for h in other[:MAX_CASE_VALUES])
            more = " ..." if len(other) > MAX_CASE_VALUES else ""
            notes.append(
                f"filter on {col.ref!r}: {short(v)} matches no rows (text matches exactly, "
                f"letter case included); the column holds {shown}{more}"
            )
    return notes


def measure_label(m: Measure, col: Column | None) -> str:
    """Output name of a measure, e.g. ``sum_revenue`` or ``count``."""
    return m.agg if col is None else f"{m.agg}_{col.ref}"


def measure_expr(
    src: Source, m: Measure, *, condition: exp.Expression | None = None
) -> tuple[exp.Expression, Column | None]:
    """The aggregate expression for ``m`` (optionally restricted by ``condition``)."""
    col: Column | None = None
    if m.column is None:
        if m.agg != "count":
            raise ToolInputError(
                f"{m.agg} needs a column", code="invalid_arguments", field="column"
            )
        agg: exp.Expression = exp.Count(this=exp.Star())
    else:
        col = src.resolve(m.column, "measure column")
        c = src.expr(col)
        if m.agg in ("sum", "avg") and col.kind != "number":
            raise ToolInputError(
                f"type mismatch: {m.agg} needs a numeric column; {col.ref!r} is {col.kind} "
                f"({col.type})",
                code="type_mismatch",
            )
        if m.agg in ("min", "max") and col.kind == "other":
            raise ToolInputError(
                f"type mismatch: {m.agg} is not defined for {col.ref!r} ({col.type})",
                code="type_mismatch",
            )
        agg = {
            "count": lambda: exp.Count(this=c),
            "count_distinct": lambda: exp.Count(this=exp.Distinct(expressions=[c])),
            "sum": lambda: exp.Sum(this=c),
            "avg": lambda: exp.Avg(this=c),
            "min": lambda: exp.Min(this=c),
            "max": lambda: exp.Max(this=c),
        }[m.agg]()
    if condition is not None:
        agg = exp.Filter(this=agg, expression=exp.Where(this=condition))
    return agg, col


def to_sql(tree: exp.Expression, dialect: str) -> str:
    """Render a tree in ``dialect`` (the context's; see :mod:`sql_tools.dialects`) with every
    identifier quoted. Each query is built once as a tree; only this step knows the dialect."""
    return render(tree, dialect)


@dataclass
class Query:
    """One query as built, before anything runs: its tree and the values bound to its
    placeholders. Building reads only the schema, the limits and the caller's input; rendering
    (:meth:`sql`) picks the dialect; running is the caller's."""

    tree: exp.Expression
    params: dict[str, Any]

    def sql(self, dialect: str) -> str:
        """The query as SQL text in ``dialect``."""
        return to_sql(self.tree, dialect)


@dataclass
class SourceQuery(Query):
    """A query over a tool's source: ``src`` and ``where`` say which rows it reads, so that a
    follow-up query (:func:`non_finite_query`) reads the same rows with the same parameters."""

    src: Source
    where: exp.Expression | None


def run_source_query(
    ctx: ToolContext, inp: BaseModel, q: SourceQuery, max_rows: int
) -> QueryOutput:
    """A tool's query, as the context's reader answers it: from the stored cells when they can
    give its rows (no pass over the source; the output still shows the source's SQL), else on
    the source."""
    return ctx.reader.read(
        q.sql(ctx.dialect), q.params, max_rows=max_rows, on_cells=lambda c: c.answer_tool(inp, q)
    )


def shape_rows(
    ctx: ToolContext, out: QueryOutput, *, limit: int, drop: tuple[str, ...] = ()
) -> tuple[list[str], list[dict[str, Scalar]], bool, list[str]]:
    """JSON-safe rows capped at ``limit`` rows, cell text and result bytes; plus notes."""
    cols = [c for c in out.columns if c not in drop]
    idx = [out.columns.index(c) for c in cols]
    notes: list[str] = []
    cut_cells = 0
    rows: list[dict[str, Scalar]] = []
    size = 0
    truncated = len(out.rows) > limit
    for raw in out.rows[:limit]:
        row: dict[str, Scalar] = {}
        for name, i in zip(cols, idx, strict=True):
            v = jsonable(raw[i])
            if isinstance(v, str) and len(v) > ctx.limits.max_cell_chars:
                v = v[: ctx.limits.max_cell_chars] + "…"
                cut_cells += 1
            row[name] = v
        size += len(json.dumps(row, ensure_ascii=False))
        if size > ctx.limits.max_result_bytes and rows:
            truncated = True
            notes.append(
                f"rows cut to {len(rows)} to stay under {ctx.limits.max_result_bytes} bytes"
            )
            break
        rows.append(row)
    if cut_cells:
        notes.append(
            f"{cut_cells} cell(s) longer than {ctx.limits.max_cell_chars} characters shortened"
        )
    return cols, rows, truncated, notes


# --- non-finite values ---------------------------------------------------------------------------

NON_FINITE_TYPES = frozenset({"DOUBLE", "FLOAT", "REAL"})
"""Column types that can hold NaN, Infinity and -Infinity."""


def may_be_non_finite(col: Column) -> bool:
    """True for a floating-point column, the only kind that can hold NaN or ±Infinity."""
    return col.type.upper() in NON_FINITE_TYPES


def non_finite_result(agg: str, col: Column | None) -> bool:
    """True when ``agg`` over ``col`` can come back NaN or ±Infinity (the sum, average,
    minimum or maximum of a floating-point column)."""
    return col is not None and may_be_non_finite(col) and agg in ("sum", "avg", "min", "max")


def finite_or_null(value: exp.Expression) -> exp.Expression:
    """``value`` where it is a finite number, else NULL (NaN and ±Infinity count as missing)."""
    finite = exp.Anonymous(this="isfinite", expressions=[value])
    return exp.If(this=finite, true=value.copy(), false=exp.Null())


def non_finite_counts(
    value: exp.Expression, condition: exp.Expression | None = None
) -> list[exp.Expression]:
    """How many values of ``value`` are NaN, +Infinity and -Infinity (where ``condition``)."""
    inf = exp.Anonymous(this="isinf", expressions=[value.copy()])
    zero = exp.Literal.number(0)
    kinds = [
        exp.Anonymous(this="isnan", expressions=[value.copy()]),
        exp.and_(inf, exp.GT(this=value.copy(), expression=zero)),
        exp.and_(inf.copy(), exp.LT(this=value.copy(), expression=zero.copy())),
    ]
    return [
        exp.Filter(
            this=exp.Count(this=exp.Star()),
            expression=exp.Where(this=k if condition is None else exp.and_(k, condition.copy())),
        )
        for k in kinds
    ]


def non_finite_text(nan: int, positive: int, negative: int) -> str:
    """``3 non-finite values (1 NaN, 1 Infinity, 1 -Infinity)``."""
    kinds = [(nan, "NaN"), (positive, "Infinity"), (negative, "-Infinity")]
    total = nan + positive + negative
    parts = ", ".join(f"{n:,} {name}" for n, name in kinds if n)
    return f"{total:,} non-finite value{'s' if total != 1 else ''} ({parts})"


def is_non_finite(value: Any) -> bool:
    """True for a float that is NaN or ±Infinity (what a result shows as null)."""
    return isinstance(value, float) and not math.isfinite(value)


def non_finite_query(q: SourceQuery, cols: list[Column]) -> Query:
    """How many NaN, +Infinity and -Infinity values each of ``cols`` holds in the rows ``q``
    reads: three counts per column, in order."""
    src = q.src
    exprs = [e for col in cols for e in non_finite_counts(src.expr(col))]
    tree = src.apply(exp.select(*exprs))
    if q.where is not None:
        tree = tree.where(q.where.copy())
    used = {p.name for p in tree.find_all(exp.Placeholder)}
    return Query(tree, {k: v for k, v in q.params.items() if k in used})


def non_finite_notes(
    ctx: ToolContext, q: SourceQuery, out: QueryOutput, outputs: dict[str, Column]
) -> list[str]:
    """Why outputs of ``q`` came back null: for each column behind an output (``outputs``: output
    name -> column) that was NaN or ±Infinity, how many such values it holds in the rows ``q``
    read. One more query, run only when there is something to explain."""
    hit: dict[str, Column] = {}
    for name, col in outputs.items():
        i = out.columns.index(name)
        if any(is_non_finite(row[i]) for row in out.rows):
            hit.setdefault(col.ref, col)
    if not hit:
        return []
    counts_query = non_finite_query(q, list(hit.values()))
    row = ctx.run(counts_query.sql(ctx.dialect), counts_query.params, max_rows=1)
    notes = []
    for j, ref in enumerate(hit):
        counts = [int(n) for n in row.rows[0][3 * j : 3 * j + 3]]
        notes.append(
            f"column {ref!r} holds {non_finite_text(*counts)} in the rows read: a sum, average, "
            "minimum or maximum that takes one in is not a finite number and is shown as null"
        )
    return notes


def non_finite_cells(out: QueryOutput, limit: int) -> list[str]:
    """Why cells of the first ``limit`` rows are null: per column, the NaN and ±Infinity
    values among them."""
    notes = []
    for i, name in enumerate(out.columns):
        values = [row[i] for row in out.rows[:limit] if is_non_finite(row[i])]
        if values:
            nan = sum(1 for v in values if math.isnan(v))
            pos = sum(1 for v in values if v > 0)
            counts = non_finite_text(nan, pos, len(values) - nan - pos)
            notes.append(f"column {name!r}: {counts} in these rows, shown as null")
    return notes


def check_limit(ctx: ToolContext, value: int | None, field_name: str = "limit") -> int:
    """Apply the default row cap and refuse values above the hard cap."""
    if value is None:
        return ctx.limits.default_rows
    if value > ctx.limits.max_rows:
        raise ToolInputError(
            f"{field_name}={value} is above the maximum of {ctx.limits.max_rows}",
            code="limit_exceeded",
            field=field_name,
        )
    return value

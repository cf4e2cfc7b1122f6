"""metric_compare_periods: one metric in a baseline vs a comparison period, per segment."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, Field, model_validator
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
    ident,
    label_value,
    measure_expr,
    measure_label,
    non_finite_notes,
    non_finite_result,
    parse_when,
    run_source_query,
    shape_rows,
    where_clause,
)
from sql_tools.catalog import Scalar

ADDITIVE = ("count", "sum")


class Period(StrictModel):
    """A period: an inclusive date range on the time column, or a label of the period column."""

    start: str | None = Field(default=None, description="First day, ISO 'YYYY-MM-DD' (inclusive).")
    end: str | None = Field(default=None, description="Last day, ISO 'YYYY-MM-DD' (inclusive).")
    label: str | int | float | bool | None = Field(
        default=None,
        description="A value of period_column, e.g. 'week_1' or 2007 (instead of start/end); "
        "text of a number, boolean or date column is read as that type ('2007' is 2007).",
    )


TimeColumnArg = Annotated[
    str | None,
    Field(
        description="DATE/TIMESTAMP column the start/end periods refer to.",
        json_schema_extra={"x-live": "column"},
    ),
]
PeriodColumnArg = Annotated[
    str | None,
    Field(
        description="Column whose labels name the periods (instead of time_column).",
        json_schema_extra={"x-live": "column"},
    ),
]


class ComparePeriodsInput(StrictModel):
    __doc__ = f"""Compare a metric between a baseline and a comparison period, overall or per
    segment of up to {MAX_SEGMENT_COLUMNS} group-by columns. Periods are inclusive date ranges on
    a time column, or labels of a period column. Each row gives baseline, comparison, delta,
    relative delta, its share of the total delta and whether the segment is new or gone; rows
    are sorted by |delta|, so the first rows are the segments that moved the metric most. The
    start of most investigations.
    """

    table: str = Field(
        description="Table holding the metric.", json_schema_extra={"x-live": "table"}
    )
    metric: Measure = Field(description="The metric, e.g. {agg: sum, column: revenue}.")
    time_column: TimeColumnArg = None
    period_column: PeriodColumnArg = None
    baseline: Period = Field(description="The 'before' period.")
    comparison: Period = Field(description="The 'after' period.")
    group_by: list[str] = Field(
        default=[],
        max_length=MAX_SEGMENT_COLUMNS,
        description=f"Up to {MAX_SEGMENT_COLUMNS} segment columns (table.column for a joined "
        "table); omit for totals.",
        json_schema_extra={"x-live": "column"},
    )
    filters: list[Filter] = Field(default=[], description="Conditions applied to both periods.")
    limit: int | None = Field(
        default=None, ge=1, description="Rows to return (default 50, max 1000)."
    )

    @model_validator(mode="after")
    def _one_period_kind(self) -> ComparePeriodsInput:
        if (self.time_column is None) == (self.period_column is None):
            raise ValueError("give exactly one of time_column or period_column")
        if len(set(self.group_by)) != len(self.group_by):
            raise ValueError("group_by columns must not repeat")
        return self


class Totals(BaseModel):
    """The metric over everything that matched."""

    baseline: float | None
    comparison: float | None
    delta: float | None
    relative_delta: float | None


class ComparePeriodsResult(ToolResult):
    """Per-segment comparison, sorted by absolute delta."""

    table: str
    metric: str
    baseline_period: str
    comparison_period: str
    group_by: list[str] = Field(
        description="The rows' keys of the segment columns: each column's name, or "
        "table.column when a row field (baseline, delta, ...) has that name."
    )
    additive: bool = Field(description="True when segment deltas add up to the total delta.")
    total: Totals


def _num(v: Scalar) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


class _PeriodSql:
    """Builds the two period conditions and their display labels."""

    def __init__(self, ctx: ToolContext, src: Source, inp: ComparePeriodsInput, params: Params):
        self.notes: list[str] = []
        if inp.time_column is not None:
            col = src.resolve(inp.time_column, "time_column")
            if col.kind not in ("date", "timestamp"):
                raise ToolInputError(
                    f"type mismatch: time_column {col.ref!r} is {col.kind} ({col.type}), "
                    "not a DATE or TIMESTAMP column",
                    code="type_mismatch",
                )
            b = self._range(col, inp.baseline, "baseline")
            c = self._range(col, inp.comparison, "comparison")
            if b[0] <= c[1] and c[0] <= b[1]:
                raise ToolInputError(
                    f"baseline {b[0]}..{b[1]} and comparison {c[0]}..{c[1]} overlap",
                    code="invalid_period",
                )
            self.labels = (f"{b[0]}..{b[1]}", f"{c[0]}..{c[1]}")
            self._coverage(ctx, col, b, c)
            expr = src.expr(col)
            self.conds = tuple(self._between(expr, col, r, params) for r in (b, c))
        else:
            col = src.resolve(inp.period_column, "period_column")
            vals = []
            for name, p in (("baseline", inp.baseline), ("comparison", inp.comparison)):
                if p.label is None or p.start is not None or p.end is not None:
                    raise ToolInputError(
                        f"{name}: with period_column give only a label", code="invalid_period"
                    )
                vals.append(label_value(ctx, col, p.label, name))
            if vals[0] == vals[1]:
                raise ToolInputError(
                    "baseline and comparison labels are the same", code="invalid_period"
                )
            self.labels = (_label_text(vals[0]), _label_text(vals[1]))
            expr = src.expr(col)
            self.conds = tuple(exp.EQ(this=expr.copy(), expression=params.bind(v)) for v in vals)

    @staticmethod
    def _range(col: Column, p: Period, name: str) -> tuple[date, date]:
        if p.start is None or p.end is None or p.label is not None:
            raise ToolInputError(
                f"{name}: with time_column give start and end (ISO dates)", code="invalid_period"
            )
        try:
            start, end = date.fromisoformat(p.start), date.fromisoformat(p.end)
        except ValueError:
            raise ToolInputError(
                f"{name}: start/end must be ISO dates YYYY-MM-DD, got {p.start!r}..{p.end!r}"[:300],
                code="invalid_period",
            ) from None
        if start > end:
            raise ToolInputError(f"{name}: start {start} is after end {end}", code="invalid_period")
        return start, end

    def _coverage(self, ctx: ToolContext, col: Column, *ranges: tuple[date, date]) -> None:
        prof = ctx.schema.column_profile(col)
        if prof is None or not isinstance(prof.min, str) or not isinstance(prof.max, str):
            return
        lo = parse_when(prof.min[:10], "date", field_name=col.ref)
        hi = parse_when(prof.max[:10], "date", field_name=col.ref)
        for name, (s, e) in zip(("baseline", "comparison"), ranges, strict=True):
            if s < lo or e > hi:
                self.notes.append(
                    f"{name} period {s}..{e} is not fully covered by the data in "
                    f"{col.ref!r} ({lo}..{hi})"
                )

    @staticmethod
    def _between(expr: exp.Expression, col: Column, r: tuple[date, date], params: Params):
        if col.kind == "date":
            return exp.Between(this=expr.copy(), low=params.bind(r[0]), high=params.bind(r[1]))
        lo = datetime.combine(r[0], datetime.min.time())
        hi = datetime.combine(r[1] + timedelta(days=1), datetime.min.time())
        return exp.and_(
            exp.GTE(this=expr.copy(), expression=params.bind(lo)),
            exp.LT(this=expr.copy(), expression=params.bind(hi)),
        )


def _label_text(value: object) -> str:
    """A bound label as the result names its period (``true``, ``2002``, ``2024-03-18``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class ComparePeriodsQuery(SourceQuery):
    """The query ``metric_compare_periods`` runs, with what shaping its rows needs; it reads
    the rows of either period that pass the filters."""

    table: str
    metric: str
    metric_column: Column | None
    period_labels: tuple[str, str]
    group_by: list[str]
    additive: bool
    limit: int
    notes: list[str]


def compare_periods_query(ctx: ToolContext, inp: ComparePeriodsInput) -> ComparePeriodsQuery:
    """Build (not run) the per-segment comparison query of ``inp`` from the schema, its stored
    profile (notes on periods the data does not cover) and the limits."""
    limit = check_limit(ctx, inp.limit)
    src = Source(ctx, inp.table)
    params = Params()
    periods = _PeriodSql(ctx, src, inp, params)
    base_cond, comp_cond = periods.conds
    groups = [src.resolve(g, "group_by") for g in inp.group_by]
    where = where_clause(ctx, src, inp.filters, params)
    in_either = exp.or_(base_cond.copy(), comp_cond.copy())
    scope = exp.and_(in_either, where) if where is not None else in_either

    def side(cond: exp.Expression) -> exp.Expression:
        return measure_expr(src, inp.metric, condition=cond.copy())[0]

    _, mcol = measure_expr(src, inp.metric)
    metric = measure_label(inp.metric, mcol)
    B, C, BR, CR = (
        private(n) for n in ("baseline", "comparison", "baseline_rows", "comparison_rows")
    )
    SEG, TOT = private("seg"), private("tot")
    seg = exp.select(
        *[src.expr(g).as_(column_alias(i)) for i, g in enumerate(groups)],
        side(base_cond).as_(B),
        side(comp_cond).as_(C),
        exp.Filter(
            this=exp.Count(this=exp.Star()), expression=exp.Where(this=base_cond.copy())
        ).as_(BR),
        exp.Filter(
            this=exp.Count(this=exp.Star()), expression=exp.Where(this=comp_cond.copy())
        ).as_(CR),
    ).where(scope)
    seg = src.apply(seg)
    if groups:
        seg = seg.group_by(*[src.expr(g) for g in groups])

    additive = inp.metric.agg in ADDITIVE
    if additive:  # the segments' sums and counts add up to the totals: no second read
        tot = exp.select(
            *[exp.Sum(this=exp.column(name, SEG, quoted=True)).as_(name) for name in (B, C)]
        ).from_(exp.Table(this=ident(SEG)))
    else:
        tot = exp.select(side(base_cond).as_(B), side(comp_cond).as_(C)).where(scope.copy())
        tot = src.apply(tot)

    def delta(t: str) -> exp.Expression:
        b, c = exp.column(B, t, quoted=True), exp.column(C, t, quoted=True)
        if additive:
            zero = exp.Literal.number(0)
            return exp.Sub(
                this=exp.Coalesce(this=c, expressions=[zero]),
                expression=exp.Coalesce(this=b, expressions=[zero.copy()]),
            )
        return exp.Sub(this=c, expression=b)

    seg_delta = exp.Paren(this=delta(SEG))
    tot_delta = exp.Paren(this=delta(TOT))
    zero = exp.Literal.number(0)
    outer = (
        exp.select(
            *[exp.column(column_alias(i), SEG, quoted=True) for i in range(len(groups))],
            exp.column(B, SEG, quoted=True),
            exp.column(C, SEG, quoted=True),
            seg_delta.copy().as_(private("delta")),
            exp.Div(
                this=seg_delta.copy(),
                expression=exp.Nullif(
                    this=exp.Abs(this=exp.column(B, SEG, quoted=True)), expression=zero.copy()
                ),
            ).as_(private("relative_delta")),
            exp.Div(
                this=seg_delta.copy(),
                expression=exp.Nullif(this=tot_delta.copy(), expression=zero.copy()),
            ).as_(private("share_of_delta")),
            exp.column(BR, SEG, quoted=True),
            exp.column(CR, SEG, quoted=True),
            exp.column(B, TOT, quoted=True).as_(private("total_baseline")),
            exp.column(C, TOT, quoted=True).as_(private("total_comparison")),
            exp.Window(this=exp.Count(this=exp.Star())).as_(private("matched")),
        )
        .from_(exp.Table(this=ident(SEG)))
        .join(exp.Table(this=ident(TOT)), join_type="cross")
        .where(
            exp.or_(
                exp.GT(this=exp.column(BR, SEG, quoted=True), expression=zero.copy()),
                exp.GT(this=exp.column(CR, SEG, quoted=True), expression=zero.copy()),
            )
        )
        .order_by(
            exp.Ordered(
                this=exp.Abs(this=exp.column(private("delta"), quoted=True)),
                desc=True,
                nulls_first=False,
            ),
            *[
                exp.Ordered(this=exp.column(column_alias(i), SEG, quoted=True))
                for i in range(len(groups))
            ],
        )
        .limit(limit + 1)
        .with_(SEG, as_=seg)
        .with_(TOT, as_=tot)
    )
    return ComparePeriodsQuery(
        tree=outer,
        params=params.values,
        src=src,
        where=scope,
        table=src.table,
        metric=metric,
        metric_column=mcol,
        period_labels=periods.labels,
        group_by=[g.ref for g in groups],
        additive=additive,
        limit=limit,
        notes=periods.notes,
    )


ROW_FIELDS = (
    "baseline",
    "comparison",
    "delta",
    "relative_delta",
    "share_of_delta",
    "baseline_rows",
    "comparison_rows",
    "status",
)
"""The fields of every row beside its segment's columns."""


def compare_periods(ctx: ToolContext, inp: ComparePeriodsInput) -> ComparePeriodsResult:
    """Compare one metric between two periods, per segment."""
    q = compare_periods_query(ctx, inp)
    out = run_source_query(ctx, inp, q, q.limit + 1)
    totals = (private("total_baseline"), private("total_comparison"))
    drop = (*totals, private("matched"))
    names, rows, truncated, notes = shape_rows(ctx, out, limit=q.limit, drop=drop)
    if non_finite_result(inp.metric.agg, q.metric_column):
        sides = (private("baseline"), private("comparison"), *totals)
        notes += non_finite_notes(ctx, q, out, dict.fromkeys(sides, q.metric_column))
    keys = row_keys(q.table, q.group_by, ROW_FIELDS)
    public = {column_alias(i): k for i, k in enumerate(keys)}
    public |= {private(f): f for f in ROW_FIELDS}
    names, rows = public_rows(names, rows, public)
    for r in rows:
        r["status"] = (
            "new" if not r["baseline_rows"] else "gone" if not r["comparison_rows"] else "both"
        )
    names.append("status")
    if out.rows:
        first = dict(zip(out.columns, out.rows[0], strict=True))
        tb, tc = _num(first[totals[0]]), _num(first[totals[1]])
        matched = int(first[private("matched")])
    else:
        tb = tc = None
        matched = 0
        notes.append("no rows fall in either period")
        notes += case_notes(ctx, q.table, inp.filters)
    if q.additive:
        tb, tc = tb or 0.0, tc or 0.0
    total_delta = tc - tb if tb is not None and tc is not None else None
    rel = total_delta / abs(tb) if total_delta is not None and tb else None
    notes += _zero_baseline_notes(rows, tb, total_delta)
    if not q.additive and q.group_by:
        notes.append(
            f"{inp.metric.agg} is not additive: segment deltas do not sum to the total delta; "
            "share_of_delta is each segment's delta divided by the total delta"
        )
    return ComparePeriodsResult(
        table=q.table,
        metric=q.metric,
        baseline_period=q.period_labels[0],
        comparison_period=q.period_labels[1],
        group_by=keys,
        additive=q.additive,
        total=Totals(baseline=tb, comparison=tc, delta=total_delta, relative_delta=rel),
        columns=names,
        rows=rows,
        matched_count=matched,
        truncated=truncated or matched > len(rows),
        sql=out.sql,
        params=out.params,
        elapsed_ms=round(out.elapsed_ms, 2),
        notes=q.notes + notes,
    )


def _zero_baseline_notes(
    rows: list[dict[str, Scalar]], tb: float | None, delta: float | None
) -> list[str]:
    """Why a relative delta is null: the total's, or some segments', baseline is 0 (a change
    from 0 has no relative size)."""
    notes = []
    if tb == 0 and delta is not None:
        notes.append(
            "total relative_delta is null: the baseline is 0, so the change has no relative size"
        )
    zero = sum(1 for r in rows if r.get("baseline") == 0 and r.get("delta") is not None)
    if zero:
        notes.append(
            f"relative_delta is null in {zero} row{'s' if zero != 1 else ''} whose baseline is "
            "0: a change from 0 has no relative size"
        )
    return notes

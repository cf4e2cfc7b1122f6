"""Questions that cannot mean what they say, refused before anything is computed or written.

A parsed question can still be one whose answer would be confidently wrong: a total over one day
compared with a total over seven, a period the data does not reach, a filter that matches no row
(``platform=iOS`` when the data says ``ios``), a ratio whose baseline denominator is zero. Each
is refused with one line that names the problem and what the data holds, so the user can fix
the question instead of reading "0 -> 0, within the normal noise".
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from sql_tools import Filter, Measure, QueryOutput, ToolContext, ToolInputError, measure_expr, short
from sql_tools.catalog import jsonable
from tasks.engine.lengths import days_text, same_months
from tasks.engine.quality._scope import WHICH, Which, _as_day, _count_if, _Query, _Scope
from tasks.engine.quality.coverage import coverage_columns, coverage_query
from tasks.engine.quality.non_finite import (
    largest_values,
    non_finite_columns,
    non_finite_query,
    too_large,
)
from tasks.engine.quality.nulls import _null_counts, null_query
from tasks.engine.spec import DateRange, Metric, Question

MAX_SHOWN_VALUES = 5
"""Values of a filter's column named when the filter matches nothing."""
MAX_READ_VALUES = 1_000
"""Distinct values read to find the closest one to a filter's value."""


def check_answerable(ctx: ToolContext, q: Question) -> None:
    """Raise :class:`ToolInputError` when ``q`` cannot mean what it says (see the module).

    Its one pass over the rows also counts what the data-quality checks' coverage query (the
    null check's, for label periods) counts, and holds that query's answer with the context's
    reader (:class:`~sql_tools.Reader`): the engine reads the source once less."""
    _check_lengths(q)
    dims = _quality_dimensions(ctx, q)
    scope = _Scope.build(ctx, q, dims or ())
    counts = _counts(scope, ahead=dims is not None)
    for which in WHICH:
        if not counts[f"{which}_rows"]:
            raise _refusal(f"{_period(q, which)} has no rows; {_coverage(scope, counts)}")
    if q.metric.filters and not (counts["baseline_kept"] or counts["comparison_kept"]):
        raise _refusal(_no_match(scope), code="invalid_value")
    large = too_large(scope, counts, counts["baseline_kept"] + counts["comparison_kept"])
    if large is not None:
        raise _refusal(large, code="invalid_value")
    if q.metric.denominator is not None and not counts["denominator"]:
        raise _refusal(
            f"{q.metric.expression} has no baseline value: its denominator "
            f"{q.metric.denominator.text()} is 0 in the baseline "
            f"{q.periods.label('baseline')}; compare a metric whose baseline is not zero",
            code="invalid_arguments",
        )


def _refusal(message: str, code: str = "invalid_period") -> ToolInputError:
    return ToolInputError(f"cannot answer: {message}", code=code)


def _check_lengths(q: Question) -> None:
    """A total (sum, count, distinct count) over periods of different lengths measures the
    lengths, not the business; a ratio, an average or a per-day value does not. Periods of the
    same number of whole calendar months (two months, quarters or years) are the business's
    own periods: their totals are compared, with a note (:func:`tasks.engine.lengths.length_notes`)."""
    b, c = q.periods.baseline, q.periods.comparison
    if not isinstance(b, DateRange) or not isinstance(c, DateRange):
        return
    if b.days == c.days or q.metric.kind == "ratio" or q.metric.grain == "day":
        return
    if same_months(b, c):
        return
    raise _refusal(
        f"baseline has {days_text(b.days)} ({b.label}), comparison {days_text(c.days)} ({c.label}): "
        "give periods of equal length or of as many whole calendar months (months, quarters, "
        "years), compare per day (--grain day), or compare a ratio/average metric"
    )


def _period(q: Question, which: Which) -> str:
    return f"{which} {q.periods.label(which)}"


def _quality_dimensions(ctx: ToolContext, q: Question) -> list[str] | None:
    """The columns the data-quality checks will count (None when the engine will refuse them:
    it says why, as before)."""
    from tasks.engine.explain import search_dimensions

    try:
        return search_dimensions(ctx, q)
    except ToolInputError:
        return None


def _counts(scope: _Scope, *, ahead: bool = False) -> dict[str, Any]:
    """One query: the time column's range, each period's rows with and without the metric's
    filters, and the metric's denominator in the baseline; when ``ahead``, also the columns of
    the data-quality query it answers (:func:`_ahead`)."""
    q = _Query(scope)
    cols: list[exp.Expression] = []
    if scope.time is not None:
        t = q.col(scope.time)
        cols += [exp.Min(this=t).as_("first"), exp.Max(this=t.copy()).as_("last")]
    names = ["first", "last"] if scope.time is not None else []
    for which in WHICH:
        period = q.in_period(which)
        kept = exp.and_(period.copy(), q.filters.copy()) if q.filters is not None else period
        cols += [_count_if(period).as_(f"{which}_rows"), _count_if(kept).as_(f"{which}_kept")]
        names += [f"{which}_rows", f"{which}_kept"]
    denominator = _denominator(q, scope.question.metric)
    if denominator is not None:
        cols.append(denominator.as_("denominator"))
        names.append("denominator")
    largest = largest_values(scope, q)
    cols += largest
    names += [c.alias for c in largest]
    held = _ahead(scope, q) if ahead else []
    counted = [_only(c, rows) for _, columns, rows in held for c in columns]
    extra = [c.as_(f"ahead_{i}") for i, c in enumerate(counted)]
    out = q.run(q.base(exp.select(*cols, *extra)), max_rows=1)
    row = out.rows[0]
    rest = row[len(names) :]
    for build, columns, _ in held:
        values, rest = rest[: len(columns)], rest[len(columns) :]
        _hold(scope, build, [c.alias for c in columns], values, out.elapsed_ms)
    return dict(zip(names, row[: len(names)], strict=True))


_Build = Callable[[_Scope], tuple[exp.Select, _Query]]


def _ahead(
    scope: _Scope, q: _Query
) -> list[tuple[_Build, list[exp.Expression], exp.Expression | None]]:
    """The data-quality queries this pass answers, as (how that query is built, its columns
    here, the rows it reads): the coverage query (label periods: the null check's) and the
    count of NaN and infinity, when the profile does not rule them out."""
    either = q.where(q.in_either())
    answered: list[tuple[_Build, list[exp.Expression], exp.Expression | None]] = []
    if scope.time is not None:
        answered.append((coverage_query, coverage_columns(scope, q), q.filters))
    else:
        answered.append((null_query, _null_counts(scope, q), either))
    finite = non_finite_columns(scope, q)
    if finite:
        answered.append((non_finite_query, finite, either))
    return answered


def _only(col: exp.Expression, cond: exp.Expression | None) -> exp.Expression:
    """The aggregate of the aliased ``col`` over the rows where ``cond`` holds too."""
    agg = col.this.copy()
    if cond is None:
        return agg
    if isinstance(agg, exp.Filter):
        both = exp.and_(agg.expression.this, cond.copy())
        return exp.Filter(this=agg.this, expression=exp.Where(this=both))
    return exp.Filter(this=agg, expression=exp.Where(this=cond.copy()))


def _hold(
    scope: _Scope, build: _Build, names: list[str], values: tuple[Any, ...], elapsed_ms: float
) -> None:
    """Hold ``values`` as the answer of the data-quality query they were counted for, under its
    own SQL and parameters (what its issues show)."""
    tree, q = build(scope)
    params = {k: jsonable(v) for k, v in q.params.values.items()}
    scope.ctx.reader.hold(QueryOutput(names, [tuple(values)], q.sql(tree), params, elapsed_ms))


def _denominator(q: _Query, metric: Metric) -> exp.Expression | None:
    """The ratio's denominator over the baseline's filtered rows (None: not a ratio of two)."""
    d = metric.denominator
    if d is None:
        return None
    cond = q.where(q.in_period("baseline"))
    measure = Measure(agg=d.fn, column=d.column)
    return measure_expr(q.src, measure, condition=cond)[0]


def _coverage(scope: _Scope, counts: dict[str, Any]) -> str:
    """Where the data is: the time column's first and last day (or the period column)."""
    if scope.time is None:
        assert scope.period is not None
        return f"pass labels that occur in {scope.period.ref!r}"
    first, last = _as_day(counts["first"]), _as_day(counts["last"])
    if first is None or last is None:
        return f"{scope.time.ref!r} has no dates at all"
    return f"the data covers {first.isoformat()}..{last.isoformat()}"


def _no_match(scope: _Scope) -> str:
    """Which filter matches no row of either period, and what its column holds instead."""
    filters = scope.question.metric.filters
    for f in filters:
        alone = scope.question.model_copy(
            update={"metric": scope.question.metric.model_copy(update={"filters": (f,)})}
        )
        one = _Scope.build(scope.ctx, alone, ())
        counts = _counts(one)
        if not (counts["baseline_kept"] or counts["comparison_kept"]):
            return f"filter {_show(f)} matches no rows in either period{_hint(one, f)}"
    shown = ", ".join(_show(f) for f in filters)
    return f"the filters {shown} together match no rows in either period"


def _show(f: Filter) -> str:
    value = "" if f.value is None else f" {f.value}"
    return short(f"{f.column} {f.op.replace('_', ' ')}{value}".replace(" = ", "="))


def _hint(scope: _Scope, f: Filter) -> str:
    """For a text column: the value closest to the filter's, and a few of its values."""
    col = scope.ctx.schema.column(scope.table, f.column)
    if col.kind != "text":
        return ""
    values = _values(scope, f.column)
    if not values:
        return f"; {f.column!r} has no values in these periods"
    wanted = f.value if isinstance(f.value, list) else [f.value]
    close = [m for w in wanted for m in _closest(str(w), values)]
    more = " ..." if len(values) > MAX_SHOWN_VALUES else ""
    some = f"{f.column!r} has {', '.join(values[:MAX_SHOWN_VALUES])}{more}"
    return f"; closest value: {close[0]!r}; {some}" if close else f"; {some}"


def _closest(wanted: str, values: list[str]) -> list[str]:
    folded = [v for v in values if v.casefold() == wanted.casefold()]
    return folded or difflib.get_close_matches(wanted, values, n=1, cutoff=0.6)


def _values(scope: _Scope, column: str) -> list[str]:
    """The column's most frequent values in either period (without the metric's filters)."""
    bare = scope.question.model_copy(
        update={"metric": scope.question.metric.model_copy(update={"filters": ()})}
    )
    q = _Query(_Scope.build(scope.ctx, bare, ()))
    c = q.col(q.src.resolve(column))
    sel = exp.select(c, exp.Count(this=exp.Star()).as_("n")).where(q.in_either())
    sel = q.base(sel).group_by(c.copy()).order_by(exp.Ordered(this=exp.column("n"), desc=True))
    out = q.run(sel.limit(MAX_READ_VALUES), max_rows=MAX_READ_VALUES)
    return [str(r[0]) for r in out.rows if r[0] is not None]

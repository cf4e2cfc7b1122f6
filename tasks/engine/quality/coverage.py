"""Query 1, coverage: the first and last day with data -> ``partial_period``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from sqlglot import exp

from sql_tools import QueryOutput
from sql_tools.catalog import jsonable
from tasks.engine.quality._scope import (
    WHICH,
    Which,
    _as_day,
    _evidence,
    _Query,
    _Scope,
    gap_effect,
)
from tasks.engine.quality.grain import DAY, Grain
from tasks.engine.quality.nulls import _null_counts
from tasks.engine.result import DataQualityIssue


@dataclass
class _Coverage:
    """First and last day with data (after filters) and the partial-period issues; ``out`` also
    holds the null check's counts (:func:`~tasks.engine.quality.nulls._null_counts`)."""

    first: date | None
    last: date | None
    out: QueryOutput
    issues: list[DataQualityIssue] = field(default_factory=list)
    grain: Grain = DAY

    def covered(self) -> tuple[date, date] | None:
        """The days the data covers: from the first day of its first value's unit to the last
        day of its last value's (monthly data dated 2009-12-01 covers December)."""
        if self.first is None or self.last is None:
            return None
        return self.grain.span(self.first)[0], self.grain.span(self.last)[1]


def _coverage(scope: _Scope) -> _Coverage:
    """First and last day with data. The same pass counts the rows and non-NULL values per
    period for the null check."""
    tree, q = coverage_query(scope)
    out = q.run(tree, max_rows=1)
    return _Coverage(_as_day(out.rows[0][0]), _as_day(out.rows[0][1]), out)


def partial_periods(scope: _Scope, cov: _Coverage, grain: Grain) -> list[DataQualityIssue]:
    """The periods the data covers only partly (or not at all), in units of ``grain``."""
    cov.grain = grain
    issues = []
    for which in WHICH:
        issue = _partial(scope, which, cov, cov.out)
        if issue is not None:
            issues.append(issue)
    cov.issues += issues
    return issues


def coverage_columns(scope: _Scope, q: _Query) -> list[exp.Expression]:
    """What the coverage query computes over the filtered rows of every day: the time
    column's first and last value, its non-NULL values, and :func:`_null_counts`."""
    assert scope.time is not None
    t = q.col(scope.time)
    return [
        exp.Min(this=t).as_("first"),
        exp.Max(this=t.copy()).as_("last"),
        exp.Count(this=t.copy()).as_("rows"),
        *_null_counts(scope, q),
    ]


def coverage_query(scope: _Scope) -> tuple[exp.Select, _Query]:
    """The coverage query (the SQL its issues show) and the query it was built on."""
    q = _Query(scope)
    return q.base(exp.select(*coverage_columns(scope, q))).where(q.where()), q


def _partial(
    scope: _Scope, which: Which, cov: _Coverage, out: QueryOutput
) -> DataQualityIssue | None:
    """The ``partial_period`` issue of one period, or None when the data covers it fully."""
    assert scope.time is not None
    r = scope.range(which)
    covered = 0
    span = cov.covered()
    if span is not None:
        lo, hi = max(r.start, span[0]), min(r.end, span[1])
        covered = max((hi - lo).days + 1, 0)
    if covered == r.days:
        return None
    col = scope.time.ref
    if cov.first is None:
        span = f"no rows of {scope.table!r} match the metric's filters"
    else:
        span = f"the data in {col!r} runs from {cov.first} to {cov.last}"
    if covered == 0:
        message = f"The {which} period {r.label} has no data at all: {span}."
    else:
        message = (
            f"The {which} period {r.label} is only partly covered: {span}, so only {covered} "
            f"of its {r.days} days have data and "
            f"{gap_effect(scope.question, 'days', whose='its')}."
        )
    first, last, rows = out.rows[0][:3]
    return DataQualityIssue(
        kind="partial_period",
        message=message,
        severity="error" if covered == 0 else "warning",
        column=col,
        period=which,
        details={
            "period": r.label,
            "covered_days": covered,
            "total_days": r.days,
            "coverage": covered / r.days,
            "data_first": jsonable(cov.first),
            "data_last": jsonable(cov.last),
        },
        evidence=_evidence(
            scope, "partial_period", out, first=jsonable(first), last=jsonable(last), rows=rows
        ),
    )

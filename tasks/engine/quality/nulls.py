"""Query 3, rows and non-NULL counts per period -> ``null_spike`` (and the rows of each
period, which the duplicates check scales its estimate to)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from sql_tools import Column, QueryOutput
from tasks.engine.distributions import norm_sf
from tasks.engine.quality._scope import WHICH, _count_if, _evidence, _pct, _Query, _Scope, _unique
from tasks.engine.result import DataQualityIssue

NULL_MIN_POINTS = 0.05
"""A null rate must move by at least 5 percentage points..."""
NULL_MIN_RATIO = 2.0
"""...and at least double (or halve)..."""
NULL_MAX_P = 0.001
"""...with a two-proportion z-test p-value below this."""


@dataclass
class _PeriodRows:
    """Rows per period (after filters) and the null-spike issues, from one pass."""

    baseline: int
    comparison: int
    issues: list[DataQualityIssue]


def _null_counts(scope: _Scope, q: _Query) -> list[exp.Expression]:
    """Rows per period and the non-NULL values of each column per period, each counted under
    its period's condition: they hold in a query over the filtered rows of every day (the
    coverage query carries them, so the two checks share one pass)."""
    exprs: list[exp.Expression] = [
        _count_if(q.in_period("baseline")).as_("baseline_rows"),
        _count_if(q.in_period("comparison")).as_("comparison_rows"),
    ]
    for i, col in enumerate(_null_columns(scope)):
        for which in WHICH:
            exprs.append(_count_if(q.in_period(which), q.col(col)).as_(f"{which}_nonnull_{i}"))
    return exprs


def _null_spikes(scope: _Scope, counted: QueryOutput | None = None) -> _PeriodRows:
    """Rows per period, and columns whose NULL rate jumps (or drops) between the periods: from
    ``counted`` (a query that carried :func:`_null_counts`) when given, else from a query of
    their own."""
    columns = _null_columns(scope)
    out = counted
    if out is None:
        tree, q = null_query(scope)
        out = q.run(tree, max_rows=1)
    row = dict(zip(out.columns, out.rows[0], strict=True))
    nb, nc = row["baseline_rows"], row["comparison_rows"]
    rows = _PeriodRows(nb, nc, [])
    if not nb or not nc:
        return rows
    for i, col in enumerate(columns):
        xb, xc = nb - row[f"baseline_nonnull_{i}"], nc - row[f"comparison_nonnull_{i}"]
        issue = _null_issue(scope, col, (xb, nb), (xc, nc), out)
        if issue is not None:
            rows.issues.append(issue)
    return rows


def null_query(scope: _Scope) -> tuple[exp.Select, _Query]:
    """The null check's own query, over the filtered rows of either period (label periods:
    date periods count in the coverage query), and the query it was built on."""
    q = _Query(scope)
    return q.base(exp.select(*_null_counts(scope, q))).where(q.where(q.in_either())), q


def _null_columns(scope: _Scope) -> tuple[Column, ...]:
    """Dimensions, then the metric's columns (each once); column i is ``*_nonnull_{i}``."""
    return _unique((*scope.dimensions, *scope.metric_columns))


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of a two-proportion z-test (pooled variance); 1.0 when undefined."""
    if not n1 or not n2:
        return 1.0
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (x2 / n2 - x1 / n1) / se
    return float(2 * norm_sf(abs(z)))


def _null_issue(
    scope: _Scope,
    col: Column,
    baseline: tuple[int, int],
    comparison: tuple[int, int],
    out: QueryOutput,
) -> DataQualityIssue | None:
    """A ``null_spike`` issue when the NULL rate moved enough (``(nulls, rows)`` per period)."""
    (xb, nb), (xc, nc) = baseline, comparison
    rb, rc = xb / nb, xc / nc
    spike = rc - rb >= NULL_MIN_POINTS and rc >= NULL_MIN_RATIO * rb
    filled = rb - rc >= NULL_MIN_POINTS and rb >= NULL_MIN_RATIO * rc
    if not (spike or filled):
        return None
    p = two_proportion_p(xb, nb, xc, nc)
    if p >= NULL_MAX_P:
        return None
    rates = f"NULL in {_pct(rc)} of comparison rows vs {_pct(rb)} of baseline rows"
    if spike and col in scope.metric_columns:
        message = (
            f"Column {col.ref!r} went missing more often: {rates}; the metric skips NULLs, so "
            "it can move for this reason alone."
        )
    elif spike:
        message = (
            f"Column {col.ref!r} went missing more often: {rates}; segments on it can look "
            "like they moved when their values only went missing."
        )
    else:
        message = (
            f"Column {col.ref!r} started being filled: {rates}; segments on it are not "
            "comparable across the periods."
        )
    return DataQualityIssue(
        kind="null_spike",
        message=message,
        severity="warning" if spike else "info",
        column=col.ref,
        period="comparison",
        details={
            "baseline_null_rate": rb,
            "comparison_null_rate": rc,
            "baseline_nulls": xb,
            "baseline_rows": nb,
            "comparison_nulls": xc,
            "comparison_rows": nc,
            "p_value": p,
            "direction": "spike" if spike else "filled",
        },
        evidence=_evidence(
            scope,
            "null_spike",
            out,
            {"columns": [c.ref for c in _null_columns(scope)]},
            column=col.ref,
        ),
    )

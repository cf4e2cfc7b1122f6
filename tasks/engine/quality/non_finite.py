"""Query 5, NaN, Infinity and -Infinity per period in the metric's floating-point columns ->
``non_finite_values``."""

from __future__ import annotations

import math
import sys
from typing import Any

from sqlglot import exp

from sql_tools import Column, finite_or_null, may_be_non_finite, non_finite_counts, non_finite_text
from tasks.engine.quality._scope import WHICH, _evidence, _Query, _Scope
from tasks.engine.result import DataQualityIssue

_NON_FINITE_KINDS = ("nan", "infinity", "minus_infinity")


def _non_finite(scope: _Scope) -> list[DataQualityIssue]:
    """NaN and ±Infinity in the metric's floating-point columns, per period (one query, only
    for a column whose load-time profile does not rule them out).

    The engine leaves such values out of the metric, as it leaves out NULLs; a SQL tool's sum,
    average, minimum or maximum over them is not a number and comes back null. Either way the
    reader has to know they are there.
    """
    columns = _columns(scope)
    if not columns:
        return []
    tree, q = non_finite_query(scope)
    out = q.run(tree, max_rows=1)
    row = dict(zip(out.columns, out.rows[0], strict=True))
    issues = []
    for i, col in enumerate(columns):
        found = {w: [int(row[f"{w}_{k}_{i}"]) for k in _NON_FINITE_KINDS] for w in WHICH}
        per_period = {w: sum(found[w]) for w in WHICH}
        if not any(per_period.values()):
            continue
        both = [b + c for b, c in zip(found["baseline"], found["comparison"], strict=True)]
        message = (
            f"Column {col.ref!r} holds {non_finite_text(*both)}: {per_period['baseline']:,} in "
            f"the baseline, {per_period['comparison']:,} in the comparison. The metric leaves "
            "them out, like missing values; a SQL tool's sum or average over them comes back "
            "null."
        )
        details: dict[str, Any] = {}
        for w in WHICH:
            details |= {f"{w}_{k}": n for k, n in zip(_NON_FINITE_KINDS, found[w], strict=True)}
        issues.append(
            DataQualityIssue(
                kind="non_finite_values",
                message=message,
                severity="warning",
                column=col.ref,
                period="comparison"
                if per_period["comparison"] >= per_period["baseline"]
                else "baseline",
                details=details,
                evidence=_evidence(
                    scope,
                    "non_finite_values",
                    out,
                    {"columns": [c.ref for c in columns]},
                    column=col.ref,
                ),
            )
        )
    return issues


def _columns(scope: _Scope) -> list[Column]:
    """The metric's floating-point columns whose profile does not rule NaN and ±Infinity out."""
    return [c for c in scope.metric_columns if may_be_non_finite(c) and not _all_finite(scope, c)]


def non_finite_columns(scope: _Scope, q: _Query) -> list[exp.Expression]:
    """What the query counts: NaN, +Infinity and -Infinity of each column, per period."""
    return [
        count.as_(f"{which}_{kind}_{i}")
        for i, col in enumerate(_columns(scope))
        for which in WHICH
        for kind, count in zip(
            _NON_FINITE_KINDS, non_finite_counts(q.col(col), q.in_period(which)), strict=True
        )
    ]


def non_finite_query(scope: _Scope) -> tuple[exp.Select, _Query]:
    """The query (the SQL its issues show), over the filtered rows of either period, and the
    query it was built on."""
    q = _Query(scope)
    exprs = non_finite_columns(scope, q)
    return q.base(exp.select(*exprs)).where(q.where(q.in_either())), q


def _all_finite(scope: _Scope, col: Column) -> bool:
    """True when the column's profile (over every row, at load) has a finite minimum and
    maximum: DuckDB sorts NaN above +Infinity, so the column then holds no NaN or ±Infinity."""
    prof = scope.ctx.schema.column_profile(col)
    return prof is not None and all(
        isinstance(v, int | float) and math.isfinite(v) for v in (prof.min, prof.max)
    )


# --- values too large to compute with ------------------------------------------------------------

LARGEST_FLOAT = sys.float_info.max
SAFETY = 1e6
"""How far below overflow the metric's largest figures must stay: the engine adds the values up
and its statistics reach the fourth power of a sum (the spread of a variance), in floating
point."""


def largest_values(scope: _Scope, q: _Query) -> list[exp.Expression]:
    """The largest finite magnitude of each of the metric's floating-point columns, over the
    rows of either period that pass the filters (named ``largest_<i>``)."""
    cond = q.where(q.in_either())
    return [
        exp.Filter(
            this=exp.Max(this=exp.Abs(this=finite_or_null(q.col(col)))),
            expression=exp.Where(this=cond.copy()),
        ).as_(f"largest_{i}")
        for i, col in enumerate(_float_columns(scope))
    ]


def _float_columns(scope: _Scope) -> list[Column]:
    return [c for c in scope.metric_columns if may_be_non_finite(c)]


def computable_bound(rows: int) -> float:
    """The largest magnitude the metric's values may have over ``rows`` rows: the sum of
    ``rows`` of them, to the fourth power, ``SAFETY`` times over, stays below the largest
    float."""
    return (LARGEST_FLOAT / SAFETY) ** 0.25 / max(rows, 1)


def too_large(scope: _Scope, counts: dict[str, Any], rows: int) -> str | None:
    """Why the question cannot be computed (its metric's values are too large for floating
    point arithmetic over ``rows`` rows: sums and squares would overflow), or None. ``counts``
    holds the ``largest_<i>`` values :func:`largest_values` read. One more query, only when a
    value is too large: how many rows hold one."""
    bound = computable_bound(rows)
    over = [
        (i, c)
        for i, c in enumerate(_float_columns(scope))
        if counts.get(f"largest_{i}") is not None and counts[f"largest_{i}"] > bound
    ]
    if not over:
        return None
    i, col = over[0]
    q = _Query(scope)
    value = q.col(col)
    big = exp.GT(this=exp.Abs(this=finite_or_null(value)), expression=q.params.bind(bound))
    tree = q.base(exp.select(exp.Count(this=exp.Star()).as_("n"))).where(
        q.where(exp.and_(exp.Paren(this=q.in_either()), big))
    )
    n = int(q.run(tree, max_rows=1).rows[0][0])
    return (
        f"column {col.ref!r} holds {n:,} value{'s' if n != 1 else ''} too large to compute with "
        f"over the {rows:,} rows of the periods (up to {counts[f'largest_{i}']:.3g}; the "
        f"arithmetic holds values up to {bound:.3g}): correct or filter out those rows"
    )

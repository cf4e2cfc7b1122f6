"""Data-quality checks, run beside the segment search (on a second connection where the database
allows one) and reported apart from real movement.

A metric can move because the business moved, or because the data did: a period the data does
not fully cover, days that were never loaded, one segment missing for a few days, a column that
suddenly went NULL, rows loaded twice, NaN or infinite numbers. :func:`check_quality` looks for
those six defects with at most five single-pass queries (never one query per value) on the
sandboxed connection, applying the metric's filters to every one. Every issue carries the exact
SQL and parameters it came from.

Queries (label periods run only the last three):

1. coverage: first/last value of the time column -> ``partial_period``; the same pass counts
   what query 3 counts (date periods read the rows once for both). The question's check
   (``tasks/engine/answerable.py``) counts both in its own pass and holds the answer on the
   connection (label periods: query 3's), so after it this query reads nothing;
2. rows per day, overall and per value of every dimension at once (``GROUPING SETS``, reduced
   in SQL to the values worth checking) -> ``missing_days`` and ``segment_missing_days``; read
   from the question's cells when the context's reader has them (``tasks/engine/leaf_days.py``). The dates
   with rows tell the data's grain (``grain.py``: monthly data misses months, not days), which
   ``partial_period`` and ``missing_days`` judge in;
3. rows and non-NULL counts per period of the dimensions and the metric's columns ->
   ``null_spike``;
4. rows, distinct rows and their copy counts per day (per period for label periods), grouping
   rows by a hash of all their columns (on a hash sample above a million rows) ->
   ``duplicate_rows``, only where the copies show a repeated load (see ``duplicates.py``);
   counted by the engine's one aggregation when the question's check counted the periods' rows
   (``tasks/engine/leaf_days.py``), so that this query reads nothing;
5. NaN, Infinity and -Infinity per period in the metric's floating-point columns ->
   ``non_finite_values``; also counted ahead by the question's check, like query 1.

One module per query, in that order: ``coverage``, ``days``, ``nulls``, ``duplicates``,
``non_finite``; what they share (the resolved question, a query under construction, the evidence)
is in ``_scope``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sql_tools import ToolContext
from tasks.engine.quality._scope import (
    MAX_LISTED_DAYS,
    MAX_SEGMENT_DIMENSIONS,
    WHICH,
    Which,
    _Scope,
)
from tasks.engine.quality.coverage import _coverage, partial_periods
from tasks.engine.quality.days import (
    MAX_SEGMENT_ISSUES,
    SEGMENT_MIN_PRESENCE,
    SEGMENT_MIN_SHARE,
    _day_counts,
    _missing_days,
    _segment_missing_days,
    data_grain,
)
from tasks.engine.quality.duplicates import (
    DUPLICATE_EXACT_MAX_ROWS,
    DUPLICATE_FOLDS,
    DUPLICATE_MAX_P,
    DUPLICATE_MIN_RATE,
    DUPLICATE_SPARSE_SHARE,
    _duplicate_rows,
)
from tasks.engine.quality.grain import DAY
from tasks.engine.quality.non_finite import _non_finite
from tasks.engine.quality.nulls import (
    NULL_MAX_P,
    NULL_MIN_POINTS,
    NULL_MIN_RATIO,
    _null_spikes,
    two_proportion_p,
)
from tasks.engine.result import DataQualityIssue
from tasks.engine.spec import Question

# the thresholds live in the module of the check that reads them (patch them there)
__all__ = [
    "DUPLICATE_EXACT_MAX_ROWS",
    "DUPLICATE_FOLDS",
    "DUPLICATE_MAX_P",
    "DUPLICATE_MIN_RATE",
    "DUPLICATE_SPARSE_SHARE",
    "MAX_LISTED_DAYS",
    "MAX_SEGMENT_DIMENSIONS",
    "MAX_SEGMENT_ISSUES",
    "NULL_MAX_P",
    "NULL_MIN_POINTS",
    "NULL_MIN_RATIO",
    "SEGMENT_MIN_PRESENCE",
    "SEGMENT_MIN_SHARE",
    "WHICH",
    "Which",
    "check_quality",
    "two_proportion_p",
]

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def check_quality(
    ctx: ToolContext,
    question: Question,
    dimensions: Sequence[str],
) -> list[DataQualityIssue]:
    """Run every data-quality check that applies to ``question``.

    Args:
        ctx: The sandboxed tool context on the loaded database.
        question: Metric (table, filters, columns) and the two periods.
        dimensions: Canonical column references to check (joined ones as ``table.column``).

    Returns:
        Issues sorted by severity (error, warning, info), in check order within a severity.
        Date periods get all six checks; label periods only ``null_spike``,
        ``duplicate_rows`` and ``non_finite_values``.
    """
    scope = _Scope.build(ctx, question, dimensions)
    issues: list[DataQualityIssue] = []
    counted = None
    if scope.time is not None:
        coverage = _coverage(scope)
        counted = coverage.out  # the null check's counts too: one pass for both
        if coverage.first is None:
            issues += partial_periods(scope, coverage, DAY)
        else:
            days = _day_counts(scope)
            issues += partial_periods(scope, coverage, data_grain(scope, days))
            issues += _missing_days(scope, coverage, days)
            issues += _segment_missing_days(scope, days)
    rows = _null_spikes(scope, counted)
    issues += rows.issues
    issues += _duplicate_rows(scope, rows)
    issues += _non_finite(scope)
    return sorted(issues, key=lambda i: _SEVERITY_ORDER[i.severity])

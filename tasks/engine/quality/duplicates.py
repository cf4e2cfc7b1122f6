"""Query 4, rows grouped by a hash of all their columns, per day (per period for label
periods) -> ``duplicate_rows``, only where the copies show a repeated load."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sql_tools import QueryOutput, ToolContext, ident
from tasks.engine.distributions import poisson_sf
from tasks.engine.quality._scope import (
    MAX_LISTED_DAYS,
    WHICH,
    Which,
    _as_day,
    _count_if,
    _evidence,
    _Query,
    _Scope,
)
from tasks.engine.quality.coverage import coverage_query
from tasks.engine.quality.nulls import _PeriodRows, null_query
from tasks.engine.result import DataQualityIssue
from tasks.engine.spec import Question

# Identical rows are not evidence of a double load by themselves: event data without an id
# (``date, platform, country, purchases``) repeats rows all the time. What a repeated load leaves
# behind is copies the data's own structure does not explain, unit by unit (a day; a period for
# label periods), which is how loads arrive:
#
# * k-fold units: every distinct row of the unit appears a multiple of k times (k = 2, 3, 4),
#   more distinct rows than natural counts could all be multiples of k by chance. That chance
#   per distinct row is measured on the other units (the share of their distinct rows whose
#   count is a multiple of k; 1/k when every unit looks k-fold), and the units are judged
#   together: the chance that all their distinct rows are multiples of k must be below
#   DUPLICATE_MAX_P over the k tried.
# * extra copies where rows are otherwise unique: when the typical unit (the half of units
#   with the fewest copies for their size) has under DUPLICATE_SPARSE_SHARE of its rows as
#   copies, chance copies grow with the square of a unit's rows (coincidences between pairs of
#   rows); a unit with more copies than that, beyond chance (Poisson, corrected for the units
#   tested) and by at least DUPLICATE_MIN_RATE of its rows, holds rows loaded again. Where
#   identical rows are normal, part of a unit loaded again cannot be told from natural repeats
#   and is not reported.
# * mass copies: a unit whose distinct rows each appear DUPLICATE_MASS_COPIES times or more on
#   average (one row, or a few, repeated over and over) is copies whatever the data's structure:
#   natural repeats of events come in many distinct rows of varied counts. A hash sample keeps a
#   distinct row whole or drops it, so a sample of few distinct rows says little: below
#   DUPLICATE_EXACT_DISTINCT sampled distinct rows the units are counted again exactly (few
#   distinct rows group cheaply, however many rows there are).

DUPLICATE_MIN_RATE = 0.005
"""Copies beyond chance must be at least 0.5% of a unit's rows to count as loaded again."""
DUPLICATE_EXACT_MAX_ROWS = 1_000_000
"""Up to this many rows in the periods duplicates are counted exactly; above, on a hash sample."""
DUPLICATE_FOLDS = (4, 3, 2)
"""Multiplicities tried for a unit loaded k times (largest first: a 4-fold unit is 2-fold too)."""
DUPLICATE_MAX_P = 0.001
"""Chance bound for both tests (divided among the folds tried, or the units tested)."""
DUPLICATE_SPARSE_SHARE = 0.05
"""Extra copies are judged only where the typical unit has fewer copies than this share."""
DUPLICATE_MASS_COPIES = 1_000
"""Copies per distinct row, on average over a unit, that no natural repeat reaches."""
DUPLICATE_EXACT_DISTINCT = 10_000
"""Sampled distinct rows below which the units are counted again exactly."""


def sample_factor(rows: int) -> int:
    """1 (exact) up to ``DUPLICATE_EXACT_MAX_ROWS`` rows; else the power of two bringing the
    sampled rows under it."""
    k = 1
    while rows / k > DUPLICATE_EXACT_MAX_ROWS:
        k *= 2
    return k


@dataclass
class _Unit:
    """Rows of one day (or one label period) grouped by their content."""

    key: str
    period: Which
    rows: int
    distinct: int
    multiple_of: dict[int, int]
    """Distinct rows whose count is a multiple of k, per k."""
    fold: int = 1
    """k when the unit was loaded k times; 1 otherwise."""
    copies: float = 0.0
    """Rows that are a load's extra copies: all but 1/k of a k-fold unit's rows; the repeats of
    a unit loaded again in part (where rows are otherwise unique)."""

    @property
    def extra(self) -> int:
        """Rows beyond the first copy of each distinct row (natural repeats included)."""
        return self.rows - self.distinct


def _duplicate_rows(scope: _Scope, rows: _PeriodRows) -> list[DataQualityIssue]:
    """Rows loaded more than once (whole days, or copies beyond what the data explains).

    Rows are grouped per day (per period for label periods) by a 64-bit hash of the whole row (one
    pass, no sort); two different rows share a hash with probability ~n^2/2^65 (about 3e-6 at 10
    million rows). Above ``DUPLICATE_EXACT_MAX_ROWS`` rows only the rows whose hash is 0 modulo a
    power of two k are grouped: copies of a row share its hash, so each group is kept or dropped
    whole, and its count (the evidence of both tests) is exact. When the engine's one
    aggregation carried these counts (:func:`tasks.engine.leaf_days.leaf_days`), the answer is
    held on the connection and the query reads nothing.
    """
    k = sample_factor(rows.baseline + rows.comparison)
    days = scope.range("baseline").days + scope.range("comparison").days if scope.time else 2
    while True:
        tree, q = duplicates_query(scope, k)
        out = q.run(tree, max_rows=days + 1)
        units = [_unit(scope, row) for row in out.rows]
        if k == 1 or sum(u.distinct for u in units) >= DUPLICATE_EXACT_DISTINCT:
            break
        k = 1  # few distinct rows: the sample may have kept none of them, or all
    _find_mass_copies(units)
    _find_folds(units)
    _find_extra_copies(units)
    return _duplicate_issue(scope, rows, units, k, out)


def row_key(q: _Query, k: int) -> tuple[exp.Expression, exp.Expression | None]:
    """A hash of the whole row of the question's table, and the condition that keeps a row in
    the sample of one in ``k`` (None: every row)."""
    row_hash = exp.Anonymous(
        this="hash", expressions=[q.col(c) for c in q.scope.ctx.schema.tables[q.scope.table]]
    )
    if k == 1:
        return row_hash, None
    sample = exp.EQ(
        this=exp.Mod(this=row_hash.copy(), expression=exp.Literal.number(k)),
        expression=exp.Literal.number(0),
    )
    return row_hash, sample


def multiple_of(copies: exp.Expression, fold: int, *conds: exp.Expression) -> exp.Expression:
    """The distinct rows (groups of ``copies`` rows, where ``conds`` hold) whose count is a
    multiple of ``fold``, named ``x<fold>``."""
    mod = exp.Mod(this=copies, expression=exp.Literal.number(fold))
    cond = exp.and_(*[c.copy() for c in conds], exp.EQ(this=mod, expression=exp.Literal.number(0)))
    return _count_if(cond).as_(f"x{fold}")


def duplicates_query(scope: _Scope, k: int) -> tuple[exp.Select, _Query]:
    """The check's own query, sampling one row in ``k`` by its hash: per unit (a day; a period
    for label periods), its rows, distinct rows and the distinct rows whose count is a multiple
    of each fold."""
    q = _Query(scope)
    row_hash, sample = row_key(q, k)
    unit = q.day() if scope.time is not None else q.in_period("baseline")
    per_row = (
        q.base(exp.select(unit.as_("unit"), exp.Count(this=exp.Star()).as_("copies")))
        .where(q.where(exp.Paren(this=q.in_either()), sample))
        .group_by(exp.Literal.number(1), row_hash)
    )
    tree = (
        exp.select(
            exp.column("unit", quoted=True),
            exp.Sum(this=exp.column("copies", quoted=True)).as_("rows"),
            exp.Count(this=exp.Star()).as_("distinct_rows"),
            *[multiple_of(exp.column("copies", quoted=True), f) for f in DUPLICATE_FOLDS],
        )
        .from_(exp.Table(this=ident("per_row")))
        .group_by(exp.Literal.number(1))
        .order_by(exp.Literal.number(1))
        .with_("per_row", as_=per_row)
    )
    return tree, q


@dataclass
class Ahead:
    """The check's own query, to be answered by another pass over the same rows."""

    tree: exp.Select
    q: _Query
    k: int
    """Its sample factor (see :func:`sample_factor`)."""

    @property
    def scope(self) -> _Scope:
        """The question as the data-quality checks resolved it."""
        return self.q.scope


def held_ahead(ctx: ToolContext, q: Question, dims: Sequence[str]) -> Ahead | None:
    """The check's own query (:func:`duplicates_query`) for ``q`` over ``dims`` (the checks'
    columns), when the rows it samples by are already counted: the question's check held them
    on the connection (the coverage query's answer; the null check's for label periods), so a
    pass that reads the question's rows anyway can count this query's numbers too. None when
    they are not held (the check then runs its own query)."""
    scope = _Scope.build(ctx, q, dims)
    tree, counting = coverage_query(scope) if scope.time is not None else null_query(scope)
    counted = ctx.reader.peek(counting.sql(tree), counting.params.values)
    if counted is None:
        return None
    row = dict(zip(counted.columns, counted.rows[0], strict=True))
    k = sample_factor(row["baseline_rows"] + row["comparison_rows"])
    return Ahead(*duplicates_query(scope, k), k)


def _unit(scope: _Scope, row: tuple[Any, ...]) -> _Unit:
    key, n, distinct, *multiples = row
    if scope.time is not None:
        day = _as_day(key)
        assert day is not None
        b = scope.range("baseline")
        period: Which = "baseline" if b.start <= day <= b.end else "comparison"
        name = day.isoformat()
    else:
        period = "baseline" if key else "comparison"
        name = scope.question.periods.label(period)
    counts = {fold: int(x) for fold, x in zip(DUPLICATE_FOLDS, multiples, strict=True)}
    return _Unit(name, period, int(n), int(distinct), counts)


def _find_folds(units: list[_Unit]) -> None:
    """Mark the units whose every distinct row appears a multiple of k times, when natural
    counts could not all be multiples of k by chance (judged on the units together)."""
    for fold in DUPLICATE_FOLDS:
        open_ = [u for u in units if u.fold == 1 and not u.copies]
        looks = [u for u in open_ if u.distinct and u.multiple_of[fold] == u.distinct]
        if not looks:
            continue
        others = [u for u in open_ if u not in looks]
        seen = sum(u.distinct for u in others)
        chance = (sum(u.multiple_of[fold] for u in others) + 1) / (seen + 2) if seen else 1 / fold
        tested = sum(u.distinct for u in looks)
        if tested * math.log(chance) < math.log(DUPLICATE_MAX_P / len(DUPLICATE_FOLDS)):
            for u in looks:
                u.fold, u.copies = fold, u.rows * (fold - 1) / fold


def _find_mass_copies(units: list[_Unit]) -> None:
    """Mark the units whose distinct rows appear ``DUPLICATE_MASS_COPIES`` times or more on
    average: all their repeats are copies."""
    for u in units:
        if u.fold == 1 and u.distinct and u.rows >= DUPLICATE_MASS_COPIES * u.distinct:
            u.copies = u.extra


def _find_extra_copies(units: list[_Unit]) -> None:
    """Mark the units with more copies than chance coincidences explain, where rows are otherwise
    unique (copies of the typical unit under ``DUPLICATE_SPARSE_SHARE`` of its rows)."""
    open_ = [u for u in units if u.fold == 1 and u.rows and not u.copies]
    if not open_:
        return
    rates = sorted(u.extra / u.rows**2 for u in open_)
    typical = [u for u in open_ if u.extra / u.rows**2 <= rates[(len(rates) - 1) // 2]]
    rows = sum(u.rows for u in typical)
    if sum(u.extra for u in typical) >= DUPLICATE_SPARSE_SHARE * rows:
        return
    pairs = (sum(u.extra for u in typical) + 1) / sum(u.rows**2 for u in typical)
    bound = DUPLICATE_MAX_P / len(open_)
    for u in open_:
        chance = pairs * u.rows**2
        if u.extra - chance < DUPLICATE_MIN_RATE * u.rows:
            continue
        if float(poisson_sf(u.extra - 1, chance)) < bound:
            u.copies = u.extra  # rows are otherwise unique: its repeats are the copies


def _duplicate_issue(
    scope: _Scope,
    rows: _PeriodRows,
    units: list[_Unit],
    k: int,
    out: QueryOutput,
) -> list[DataQualityIssue]:
    """The ``duplicate_rows`` issue (as a list of 0 or 1): the units loaded more than once."""
    hit = [u for u in units if u.copies > 0]
    if not hit:
        return []
    total = {"baseline": rows.baseline, "comparison": rows.comparison}
    # the share of each period's (sampled) rows that are extra copies, applied to its rows
    seen = {w: sum(u.rows for u in units if u.period == w) for w in WHICH}
    rate = {
        w: sum(u.copies for u in hit if u.period == w) / seen[w] if seen[w] else 0.0 for w in WHICH
    }
    dups = {w: round(rate[w] * total[w]) for w in WHICH}
    about = "about " if k > 1 else ""
    said = []
    for u in hit[:MAX_LISTED_DAYS]:
        if u.fold > 1:
            times = {2: "twice", 3: "three times", 4: "four times"}[u.fold]
            said.append(f"{u.key} (every row {times})")
        else:
            said.append(
                f"{u.key} ({about}{round(k * u.copies):,} of {about}{k * u.rows:,} rows are copies)"
            )
    if len(hit) > MAX_LISTED_DAYS:
        said.append(f"and {len(hit) - MAX_LISTED_DAYS} more")
    what = ("day" if scope.time is not None else "period") + ("s" if len(hit) > 1 else "")
    message = (
        f"Rows loaded more than once in {scope.table!r} on {len(hit)} {what}: {', '.join(said)}; "
        f"{about}{dups['comparison']:,} of {total['comparison']:,} comparison rows and {about}"
        f"{dups['baseline']:,} of {total['baseline']:,} baseline rows are extra copies, so sums "
        "and counts there are inflated."
    )
    if k > 1:
        message += f" (Estimated on the 1/{k} of rows picked by row hash.)"
    details: dict[str, Any] = {}
    for w in WHICH:
        details |= {f"{w}_rows": total[w], f"{w}_duplicates": dups[w], f"{w}_rate": rate[w]}
    details |= {
        "days" if scope.time is not None else "periods": [u.key for u in hit],
        "repeated_days": {u.key: u.fold for u in hit if u.fold > 1 and scope.time is not None},
        "units": [
            {"unit": u.key, "rows": k * u.rows, "distinct_rows": k * u.distinct, "fold": u.fold}
            for u in hit
        ],
        "sample": f"1/{k}",
        "exact": k == 1,
    }
    return [
        DataQualityIssue(
            kind="duplicate_rows",
            message=message,
            severity="warning",
            period="comparison" if dups["comparison"] >= dups["baseline"] else "baseline",
            details=details,
            evidence=_evidence(
                scope, "duplicate_rows", out, {"sample": f"1/{k}"}, period_rows=total
            ),
        )
    ]

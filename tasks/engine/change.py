"""The metric's change as a whole: its value in each period, the data's grain, whether the move
stands outside the noise (the values per day or per unit of the grain, else the leaves'
noise), a move concentrated in a few segments, and when the data cannot say what noise is."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sql_tools import ToolContext
from tasks.engine import significance as sig
from tasks.engine.cube import Cube, exact_distinct_totals
from tasks.engine.distributions import ttest_rel, ttest_welch
from tasks.engine.quality.grain import DAY, Grain, by_unit, grain_of, profiled_dates
from tasks.engine.result import Change
from tasks.engine.search import MIN_DAYS, Leaves, Search
from tasks.engine.segments import _finite
from tasks.engine.spec import Question


def period_totals(ctx: ToolContext, q: Question, cube: Cube) -> dict[str, float | None]:
    """The metric's value in each period (exact, including distinct counts)."""
    t = cube.total
    kind = q.metric.kind
    if kind == "ratio":
        return {
            "baseline": t["nb"] / t["db"] if t["db"] else None,
            "comparison": t["nc"] / t["dc"] if t["dc"] else None,
        }
    if kind == "distinct":
        return exact_distinct_totals(ctx, q)
    return {"baseline": t["nb"], "comparison": t["nc"]}


def data_grain(ctx: ToolContext, q: Question, series: dict[str, Any] | None) -> Grain:
    """The data's grain, from the dates with rows in the two periods and the time column's
    profile, as the data-quality checks tell it (daily without dates)."""
    if series is None or q.periods.time_column is None:
        return DAY
    s = [series[w] for w in ("baseline", "comparison")]
    dated = [d for p in s for d, ok in zip(p["days"], p["present"], strict=True) if ok]
    return grain_of([*dated, *profiled_dates(ctx, q.metric.table, q.periods.time_column)])


def _per_unit(s: dict[str, Any], grain: Grain) -> dict[str, Any]:
    """A period's per-day series summed per unit of the data's grain (months of monthly data)."""
    days, (n, d), present = by_unit(grain, s["days"], (s["n"], s["d"]), s["present"])
    return {"days": days, "n": n, "d": d, "present": present}


def significance(
    q: Question,
    totals: dict[str, float | None],
    series: dict[str, Any] | None,
    leaves: Leaves,
    grain: Grain = DAY,
) -> Change:
    """Is the overall move outside the noise? The variation of the values per unit of the data's
    grain (days, or the months of monthly data) when there are dates (``series``, from
    :func:`daily_series`), else the leaves' quasi-Poisson noise."""
    b, c = totals["baseline"], totals["comparison"]
    absolute = c - b if b is not None and c is not None else None
    relative = absolute / abs(b) if absolute is not None and b else None
    if series is not None:
        xb = _daily_values(q, _per_unit(series["baseline"], grain))
        xc = _daily_values(q, _per_unit(series["comparison"], grain))
        if len(xb) >= 3 and len(xc) >= 3:
            # identical differences leave no spread: the p-value is then 0 (a move) or NaN (no
            # move, or a NaN value), handled below
            unit, units = grain.unit, grain.plural
            if len(xb) == len(xc):
                res = ttest_rel(xc, xb)
                method = f"paired t-test on {len(xb)} {unit} pairs (same position in each period)"
            else:
                res = ttest_welch(xc, xb)
                method = (
                    f"Welch t-test on {grain.adjective} values ({len(xb)} vs {len(xc)} {units})"
                )
            p = float(res.pvalue) if np.isfinite(res.pvalue) else (1.0 if absolute == 0 else 0.0)
            return Change(
                absolute=absolute,
                relative=relative,
                significant=sig.significant(p),
                p_value=p,
                method=method,
            )
    resid = float(leaves.v.sum() - leaves.f.sum())
    var = float((leaves.phi * leaves.P).sum())
    z = resid / math.sqrt(var) if var > 0 else (0.0 if resid == 0 else math.inf)
    p = float(sig.two_sided_p(z))
    return Change(
        absolute=absolute,
        relative=relative,
        significant=sig.significant(p),
        p_value=p,
        # plain words for the reader; the test itself is described in docs/method.md
        method=(
            "the change is compared with how much the "
            f"{len(leaves.v):,} most specific segments vary around their expected values"
        ),
    )


def noise_unjudged(cube: Cube, found: Search, days: tuple[float, float] | None) -> str | None:
    """Why the data cannot say what noise is, or None when it can.

    A cell (a leaf: one combination of the searched columns) has a spread of its own only
    from its days: with fewer than ``MIN_DAYS`` days holding rows in a period (or periods given
    by label), the noise is measured across the cells, on their own moves. The leaves' noise
    units are scaled so their squares average to one over the cells, so no cell can stand
    further than ``sqrt(n)`` units from the rest unless it lies far outside them all; with
    ``n`` no larger than ``z**2`` (``z``: the bound a segment must clear after allowing for
    every segment searched), no move could have stood out, and "within the noise" would say
    nothing about the data.
    """
    if days is not None and min(days) >= MIN_DAYS:
        return None
    n = len(cube.leaf_codes)
    if n > found.z_crit**2:
        return None
    leaf = cube.leaf
    one_row = "rowsb" in leaf and bool(np.all(leaf["rowsb"] <= 1) and np.all(leaf["rowsc"] <= 1))
    cells = f"{n} cell" + ("" if n == 1 else "s")
    if one_row:
        cells += " with one row each" if n > 1 else " with one row"
    if days is None:
        repeat = "periods not split into days"
    else:
        seen = int(min(days))
        repeat = f"rows on only {seen} day{'' if seen == 1 else 's'} of a period"
    return (
        f"the noise cannot be judged from {cells}: with {repeat}, no cell has a spread of its "
        f"own, so a cell's move can only be set against the other cells' moves, and {n} "
        f"{'is' if n == 1 else 'are'} too few for any one to stand out from the rest"
    )


def distinct_overlap(cube: Cube, totals: dict[str, float | None]) -> float:
    """How many leaves a distinct value is counted in, on average (at least 1).

    A value seen in several leaves (a user in several channels) is counted once per leaf, so a
    segment's leaf sum moves by that many at once when the value comes or goes: the noise of a
    sum over leaves is that factor above the sum of the leaves' own noise. Measured on the whole
    population as the leaf sum over the exact distinct count.
    """
    if not _finite(totals):
        return 1.0
    exact = float(totals["baseline"]) + float(totals["comparison"])  # type: ignore[arg-type]
    summed = float(cube.leaf["nb"].sum() + cube.leaf["nc"].sum())
    return max(1.0, summed / exact) if exact > 0 else 1.0


def localized(change: Change, found: Search, eligible: np.ndarray) -> Change:
    """A move concentrated in a few segments is real even when the total hides it in noise.

    The change counts as significant when the total test says so, or when some segment's move
    clears the Bonferroni bound over every segment searched (a max-statistic test of "nothing
    changed anywhere").
    """
    seg_p = found.p[1:][eligible[1:]]
    if seg_p.size == 0:
        return change
    p_local = sig.adjusted(float(seg_p.min()), found.tests)
    if change.significant or not sig.significant(p_local):
        return change
    return change.model_copy(
        update={
            "significant": True,
            "p_value": p_local,
            "method": change.method
            + f"; within the noise in total (p={change.p_value:.3g}), but a segment's move is "
            f"larger than noise among the {found.n_tested:,} segments searched",
        }
    )


def _daily_values(q: Question, s: dict[str, Any]) -> np.ndarray:
    n, d = s["n"], s["d"]
    if q.metric.kind == "ratio":
        ok = d > 0
        return n[ok] / d[ok]
    return n

"""explain_change: measure a metric's move, test it against the noise, and name its causes."""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from sql_tools._context import ToolContext
from sql_tools._errors import ToolInputError
from tasks.engine import cube as cube_mod
from tasks.engine import screen as screen_mod
from tasks.engine.clean_days import assign_data_quality
from tasks.engine.cube import Cube, build_cube, daily_series
from tasks.engine.result import (
    Change,
    DataQualityIssue,
    Evidence,
    Explanation,
    MetricInfo,
    PeriodValue,
    Segment,
)
from tasks.engine.search import (
    Leaves,
    Search,
    additive_leaves,
    ancestors,
    descendants,
    ratio_leaves,
    search,
)
from tasks.engine.spec import DateRange, Question

ALPHA = 0.05
ADDITIVE_SEARCH: dict[str, Any] = {"gain_units": "noise", "min_effect": 0.0}
RATIO_SEARCH: dict[str, Any] = {"gain_units": "absolute", "min_effect": 0.2}
MAX_DRIVERS = 15


def explain_change(db: str | Path | ToolContext, question: Question) -> Explanation:
    """Explain why ``question.metric`` moved between the two periods (no Prefect, no LLM)."""
    return analyze(db, question).explanation


def analyze(db: str | Path | ToolContext, question: Question) -> Analysis:
    """The explanation, plus the searched segments' statistics (for judging other claims)."""
    if isinstance(db, ToolContext):
        return _explain(db, question)
    with ToolContext(db) as ctx:
        return _explain(ctx, question)


@dataclass(frozen=True)
class SegmentTest:
    """What the engine measured for one segment: its part of the change and its significance."""

    segment: dict[str, Any]
    contribution: float
    share: float | None
    p_value: float = field(metadata={"doc": "Bonferroni-adjusted over the segments searched"})
    significant: bool
    explained: bool = field(
        metadata={"doc": "within the noise once the root causes are fitted (and not one)"}
    )
    effect: str
    baseline_volume: float
    comparison_volume: float
    support: float = field(metadata={"doc": "larger of its volume shares in the two periods"})


@dataclass
class Analysis:
    """An explanation and the segment statistics behind it."""

    explanation: Explanation
    cube: Cube
    contrib: dict[str, np.ndarray]
    found: Search
    delta: float | None
    # root causes' own p-values (Bonferroni-adjusted), by segment key: a mix cause is judged by
    # the test of its share, which the rate view's residual does not see
    cause_p: dict[str, float] = field(default_factory=dict)

    def test(self, segment: dict[str, Any]) -> SegmentTest | None:
        """The engine's statistics for ``segment``; None when it was not among those searched
        (a column outside the search, more columns than the depth, or a value not present)."""
        cube = self.cube
        i = self._find(segment)
        if i is None:
            return None
        kind = self.explanation.metric.kind
        c = float(self.contrib["contribution"][i])
        s, t = self.cube.seg, self.cube.total
        support = max(s["db"][i] / max(t["db"], 1e-300), s["dc"][i] / max(t["dc"], 1e-300))
        found = self.found
        key = json.dumps(cube.segment_dict(i), sort_keys=True, default=str)
        p = min(1.0, float(found.p[i]) * found.n_tested, self.cause_p.get(key, 1.0))
        named = {  # a root cause under any of its names
            json.dumps(name, sort_keys=True, default=str)
            for rc in self.explanation.root_causes
            for name in (rc.segment, *rc.aliases)
        }
        explained = False
        if key not in named and found.fit is not None:
            explained = _within_fit(found, i)
            vs, fs, _ = found.fit
            if self.explanation.global_shift is not None and fs[0] > 0:
                # an even shift reported from what the causes left: scale the fit by it
                explained |= _within_fit(found, i, float(vs[0] / fs[0]))
        return SegmentTest(
            segment=self.cube.segment_dict(i),
            contribution=c,
            share=c / self.delta if self.delta else None,
            p_value=p,
            significant=p < ALPHA,
            explained=bool(explained),
            effect=_effect(self.cube, i, self.contrib, kind),
            baseline_volume=float(s["rowsb"][i]),
            comparison_volume=float(s["rowsc"][i]),
            support=float(support),
        )

    def name_of(self, segment: dict[str, Any]) -> dict[str, Any] | None:
        """The engine's name for the rows of ``segment`` (see :func:`one_name_each`): the
        segment itself unless a tied column names them with fewer columns; None when it was
        not among those searched."""
        i = self._find(segment)
        return None if i is None else self.cube.segment_dict(_same_rows(self.cube, i)[0])

    def _find(self, segment: dict[str, Any]) -> int | None:
        cube = self.cube
        try:
            exact = {}
            for k, v in segment.items():  # "5.2" from a model names the value 5.2
                vals = cube.values[cube.dims.index(k)]
                exact[k] = v if v in vals else next(x for x in vals if str(x) == str(v))
            return _index_of(cube, exact)
        except (ValueError, IndexError, StopIteration):
            return None


def _dimensions(ctx: ToolContext, q: Question) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    if q.dimensions is not None:
        dims = [
            ctx.schema.column(q.metric.table, d, field_name="dimensions").ref for d in q.dimensions
        ]
    else:
        from tasks.engine.parse import default_dimensions

        used = {q.periods.time_column, q.periods.period_column}
        used |= {a.column for a in (q.metric.numerator, q.metric.denominator) if a is not None}
        dims = default_dimensions(ctx.schema, q.metric.table, exclude=[u for u in used if u])
    kept = []
    for d in dims:
        col = ctx.schema.column(q.metric.table, d)
        prof = ctx.schema.column_profile(col)
        distinct = prof.distinct_count if prof else None
        if distinct is not None and distinct > cube_mod.MAX_DIMENSION_VALUES:
            notes.append(f"dimension {d!r} skipped: {distinct:,} distinct values")
            continue
        kept.append(col.ref)
    if len(set(kept)) != len(kept):
        raise ToolInputError("dimensions repeat a column", code="invalid_arguments")
    return kept, notes


def _explain(ctx: ToolContext, q: Question) -> Analysis:
    t0 = time.perf_counter()
    dims, notes = _dimensions(ctx, q)
    kind = q.metric.kind
    quality = _quality(ctx, q, dims)
    screening = None
    search_dims = dims
    if cube_mod.estimated_leaves(ctx, q, dims) > cube_mod.LEAF_BUDGET:
        open_depth = q.max_depth or cube_mod.DEFAULT_DEPTH
        screening = screen_mod.screen(ctx, q.model_copy(update={"max_depth": open_depth}), dims)
        search_dims = screening.dims
        notes += _screening_notes(dims, screening)
    if q.max_depth is None:
        q = q.model_copy(update={"max_depth": cube_mod.auto_depth(ctx, q, search_dims)})
    cube = build_cube(ctx, q, search_dims)
    series = daily_series(ctx, q)[0] if q.periods.by_dates else None
    days = None
    if cube.days is not None and series is not None:
        # a leaf's day-to-day spread is measured over the days the table has rows for: days
        # missing from the whole table (a gap, data that ends early) are a data-quality matter,
        # not noise
        b, c = (float(series[w]["present"].sum()) for w in ("baseline", "comparison"))
        days = (b, c)
    totals = _totals(ctx, q, cube)
    leaves = (
        ratio_leaves(cube.leaf, cube.total, days)
        if kind == "ratio"
        else additive_leaves(cube.leaf, days)
    )
    change = _significance(q, totals, series, leaves)
    if kind == "distinct":
        # a distinct count is a count: its noise is never below the count itself (the row
        # level of counts), then scaled by how often one value is counted in several leaves
        leaves.phi = np.maximum(leaves.phi, 1.0) * _overlap(cube, totals)
    eligible = _eligible(cube, q.min_support)
    # Ratios of counts on real data carry heavy-tailed per-segment noise: there the search ranks
    # by explanatory power and asks each cause to carry a fifth of what is left unexplained.
    style = RATIO_SEARCH if kind == "ratio" else ADDITIVE_SEARCH
    found = search(cube, leaves, eligible=eligible, alpha=ALPHA, **style)
    change = _localized(change, found, eligible)
    contrib = _contributions(cube, kind)
    causes = [
        _segment(cube, contrib, p.seg, _adjusted(p.p_value, found))
        for p in found.picks
        if p.seg != 0
    ]
    if kind == "ratio":
        causes = _with_mix(cube, q, contrib, causes, eligible, totals)
    delta = totals["comparison"] - totals["baseline"] if _finite(totals) else None
    global_shift = _global_shift(cube, found, kind, delta, change.significant)
    if not change.significant:
        notes.append("the change is within the noise; no root causes are named")
        causes = []
    assign_data_quality(ctx, q, causes, global_shift, quality, found.z_crit, found.n_tested)
    direction = math.copysign(1.0, delta) if delta else 1.0
    causes.sort(key=lambda s: (-(s.contribution * direction > 0), -abs(s.contribution)))
    drivers, offsetting = _drivers(cube, contrib, found, eligible, direction)
    causes, drivers, offsetting = one_name_each(cube, contrib, causes, drivers, offsetting)
    for c in [*causes, *drivers, *offsetting]:
        c.evidence = _evidence(ctx, q, c.segment)
    for c in causes:
        _verify(ctx, q, c)
    for c in [*causes, *drivers, *offsetting]:
        c.share = c.contribution / delta if delta else None
    explained = sum(c.contribution for c in causes) / delta if delta and causes else None
    notes += _overlap_notes(causes)
    if kind == "distinct":
        notes.append(
            "distinct counts do not add up across segments: a root cause's figures count its own "
            "distinct values (its query was run), so contributions can overlap; drivers' figures "
            "add up finer cells and can count a value more than once"
        )
    notes += cube.notes
    explanation = Explanation(
        metric=MetricInfo(
            expression=q.metric.expression,
            table=q.metric.table,
            grain=q.metric.grain,
            kind=kind,
            name=q.metric.name,
            filters=[f.model_dump() for f in q.metric.filters],
        ),
        baseline=PeriodValue(
            label=q.periods.label("baseline"),
            value=totals["baseline"],
            volume=cube.total["rowsb"],
            days=_days(q.periods.baseline),
        ),
        comparison=PeriodValue(
            label=q.periods.label("comparison"),
            value=totals["comparison"],
            volume=cube.total["rowsc"],
            days=_days(q.periods.comparison),
        ),
        change=change,
        root_causes=causes,
        drivers=drivers,
        offsetting=offsetting,
        global_shift=global_shift if change.significant else None,
        explained_share=explained,
        data_quality=quality,
        dimensions=dims,
        notes=notes,
        stats={
            "segments": int(len(cube.seg_mask)),
            "segments_tested": found.n_tested,
            "leaves": int(len(cube.leaf_codes)),
            "max_depth": q.max_depth,
            "z_threshold": round(found.z_crit, 3),
            "dispersion": float(np.median(found.leaves.phi)),
            "global_factor": 1.0 + found.leaves.g,
            "query_ms": round(cube.elapsed_ms, 1),
            "search_dimensions": list(search_dims),
            "screening": _screening_stats(screening),
            "elapsed_ms": round((time.perf_counter() - t0) * 1000, 1),
            "sql": cube.sql,
            "params": {k: _jsonable(v) for k, v in cube.params.items()},
        },
    )
    cause_p = {
        json.dumps(name, sort_keys=True, default=str): (c.p_value if c.p_value is not None else 1.0)
        for c in causes
        for name in (c.segment, *c.aliases)
    }
    return Analysis(explanation, cube, contrib, found, delta, cause_p)


def _screening_notes(dims: list[str], sc: screen_mod.Screening) -> list[str]:
    out = []
    left = [d for d in dims if d not in sc.dims]
    if left:
        out.append(
            f"too many value combinations to search all {len(dims)} columns at once: the search "
            f"used the {len(sc.dims)} columns where the change is strongest ({', '.join(sc.dims)}); "
            f"screened and left out: {', '.join(left)}"
        )
    for d in sc.dropped[:5]:
        out.append(
            "a significant move over " + " x ".join(d["columns"]) + f" (z={d['max_z']:g}) was "
            "left out of the search for room; investigate it with --dimensions"
        )
    return out


def _screening_stats(sc: screen_mod.Screening | None) -> dict[str, Any] | None:
    if sc is None:
        return None
    return {
        "covers": sc.covers,
        "z_threshold": round(sc.z_threshold, 3),
        "significant_segments": sc.significant,
        "dropped": sc.dropped,
        "elapsed_ms": round(sc.elapsed_ms, 1),
        "sql": sc.sql,
    }


def _jsonable(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def _days(p: DateRange | str) -> int | None:
    return p.days if isinstance(p, DateRange) else None


def _finite(t: dict[str, float | None]) -> bool:
    return all(v is not None and math.isfinite(v) for v in (t["baseline"], t["comparison"]))


def _quality(ctx: ToolContext, q: Question, dims: list[str]) -> list[DataQualityIssue]:
    try:
        from tasks.engine.quality import check_quality
    except ImportError:  # pragma: no cover - the module ships with the engine
        return []
    return check_quality(ctx, q, dims)


def _totals(ctx: ToolContext, q: Question, cube: Cube) -> dict[str, float | None]:
    """The metric's value in each period (exact, including distinct counts)."""
    t = cube.total
    kind = q.metric.kind
    if kind == "ratio":
        return {
            "baseline": t["nb"] / t["db"] if t["db"] else None,
            "comparison": t["nc"] / t["dc"] if t["dc"] else None,
        }
    if kind == "distinct":
        exact = cube_mod.exact_distinct_totals(ctx, q)
        return exact
    return {"baseline": t["nb"], "comparison": t["nc"]}


def _significance(
    q: Question,
    totals: dict[str, float | None],
    series: dict[str, Any] | None,
    leaves: Leaves,
) -> Change:
    """Is the overall move outside the noise? Per-day variation when there are days (``series``,
    from :func:`daily_series`), else the leaves' quasi-Poisson noise."""
    b, c = totals["baseline"], totals["comparison"]
    absolute = c - b if b is not None and c is not None else None
    relative = absolute / abs(b) if absolute is not None and b else None
    if series is not None:
        xb, xc = _daily_values(q, series["baseline"]), _daily_values(q, series["comparison"])
        if len(xb) >= 3 and len(xc) >= 3:
            # identical daily differences make scipy warn of precision loss; the result is
            # then non-finite and handled below
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                if len(xb) == len(xc):
                    res = stats.ttest_rel(xc, xb)
                    method = f"paired t-test on {len(xb)} day pairs (same position in each period)"
                else:
                    res = stats.ttest_ind(xc, xb, equal_var=False)
                    method = f"Welch t-test on daily values ({len(xb)} vs {len(xc)} days)"
            p = float(res.pvalue) if np.isfinite(res.pvalue) else (1.0 if absolute == 0 else 0.0)
            return Change(
                absolute=absolute,
                relative=relative,
                significant=p < ALPHA,
                p_value=p,
                method=method,
            )
    resid = float(leaves.v.sum() - leaves.f.sum())
    var = float((leaves.phi * leaves.P).sum())
    z = resid / math.sqrt(var) if var > 0 else (0.0 if resid == 0 else math.inf)
    p = float(2 * stats.norm.sf(abs(z)))
    return Change(
        absolute=absolute,
        relative=relative,
        significant=p < ALPHA,
        p_value=p,
        method=(
            "quasi-Poisson z-test over segments: row-level variance scaled by a dispersion "
            f"estimated from {len(leaves.v):,} segments"
        ),
    )


def _overlap(cube: Cube, totals: dict[str, float | None]) -> float:
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


def _localized(change: Change, found: Search, eligible: np.ndarray) -> Change:
    """A move concentrated in a few segments is real even when the total hides it in noise.

    The change counts as significant when the total test says so, or when some segment's move
    clears the Bonferroni bound over every segment searched (a max-statistic test of "nothing
    changed anywhere").
    """
    seg_p = found.p[1:][eligible[1:]]
    if seg_p.size == 0:
        return change
    p_local = float(min(1.0, seg_p.min() * found.n_tested))
    if change.significant or p_local >= ALPHA:
        return change
    return change.model_copy(
        update={
            "significant": True,
            "p_value": p_local,
            "method": change.method
            + f"; not significant in total (p={change.p_value:.3g}), but a segment moved beyond "
            f"the noise (Bonferroni over {found.n_tested:,} segments)",
        }
    )


def _daily_values(q: Question, s: dict[str, Any]) -> np.ndarray:
    n, d = s["n"], s["d"]
    if q.metric.kind == "ratio":
        ok = d > 0
        return n[ok] / d[ok]
    return n


def _eligible(cube: Cube, min_support: float) -> np.ndarray:
    tb = max(cube.total["db"], 1e-300)
    tc = max(cube.total["dc"], 1e-300)
    share = np.maximum(cube.seg["db"] / tb, cube.seg["dc"] / tc)
    return share >= min_support


def _contributions(cube: Cube, kind: str) -> dict[str, np.ndarray]:
    """Each segment's contribution to the total change (Shapley rate/mix for ratios)."""
    s = cube.seg
    t = cube.total
    if kind != "ratio":
        delta = s["nc"] - s["nb"]
        rest_b = t["nb"] - s["nb"]
        rest_c = t["nc"] - s["nc"]
        rest_rate = np.where(rest_b > 0, rest_c / np.where(rest_b > 0, rest_b, 1.0) - 1.0, 0.0)
        return {
            "contribution": delta,
            "unexpected": delta - s["nb"] * rest_rate,
            "baseline": s["nb"],
            "comparison": s["nc"],
            "rate": delta,
            "mix": np.zeros_like(delta),
        }
    Rb = t["nb"] / t["db"] if t["db"] else 0.0
    Rc = t["nc"] / t["dc"] if t["dc"] else 0.0
    sb = s["db"] / t["db"] if t["db"] else np.zeros_like(s["db"])
    sc = s["dc"] / t["dc"] if t["dc"] else np.zeros_like(s["dc"])
    rb = np.where(s["db"] > 0, s["nb"] / np.where(s["db"] > 0, s["db"], 1.0), np.nan)
    rc = np.where(s["dc"] > 0, s["nc"] / np.where(s["dc"] > 0, s["dc"], 1.0), np.nan)
    # a segment absent in one period has no own ratio there: its rate part is zero
    rb_f = np.where(np.isnan(rb), rc, rb)
    rc_f = np.where(np.isnan(rc), rb, rc)
    rb_f, rc_f = np.nan_to_num(rb_f), np.nan_to_num(rc_f)
    rate = (rc_f - rb_f) * (sb + sc) / 2
    mix = (sc - sb) * ((rb_f + rc_f) / 2 - (Rb + Rc) / 2)
    # rest-of-population ratio change, to say how much a segment's own ratio moved beyond it
    rest_nb, rest_db = t["nb"] - s["nb"], t["db"] - s["db"]
    rest_nc, rest_dc = t["nc"] - s["nc"], t["dc"] - s["dc"]
    with np.errstate(divide="ignore", invalid="ignore"):
        rest_change = np.where(
            (rest_db > 0) & (rest_dc > 0), rest_nc / rest_dc - rest_nb / rest_db, 0.0
        )
    unexpected = (rc_f - rb_f - rest_change) * (sb + sc) / 2 + mix
    return {
        "contribution": rate + mix,
        "unexpected": unexpected,
        "baseline": rb,
        "comparison": rc,
        "rate": rate,
        "mix": mix,
    }


def _effect(cube: Cube, i: int, contrib: dict[str, np.ndarray], kind: str) -> str:
    s = cube.seg
    if s["rowsb"][i] == 0 and s["rowsc"][i] > 0:
        return "new"
    if s["rowsc"][i] == 0 and s["rowsb"][i] > 0:
        return "gone"
    if kind == "ratio" and abs(contrib["mix"][i]) > abs(contrib["rate"][i]):
        return "mix"
    return "rate"


def _segment(cube: Cube, contrib: dict[str, np.ndarray], i: int, p: float) -> Segment:
    kind = "ratio" if np.any(contrib["mix"]) else "additive"
    return Segment(
        segment=cube.segment_dict(i),
        baseline=_num(contrib["baseline"][i]),
        comparison=_num(contrib["comparison"][i]),
        contribution=float(contrib["contribution"][i]),
        unexpected=_num(contrib["unexpected"][i]),
        rate=_num(contrib["rate"][i]) if kind == "ratio" else None,
        mix=_num(contrib["mix"][i]) if kind == "ratio" else None,
        effect=_effect(cube, i, contrib, kind),  # type: ignore[arg-type]
        p_value=p,
        significant=p < ALPHA,
        baseline_volume=float(cube.seg["rowsb"][i]),
        comparison_volume=float(cube.seg["rowsc"][i]),
    )


def _num(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _with_mix(
    cube: Cube,
    q: Question,
    contrib: dict[str, np.ndarray],
    causes: list[Segment],
    eligible: np.ndarray,
    totals: dict[str, float | None],
) -> list[Segment]:
    """Ratio metrics: add segments whose share of the denominator moved enough to matter.

    A candidate's share of the denominator moved beyond the noise (its denominator against the
    overall growth, quasi-Poisson, Bonferroni over the segments searched), and the mix part of
    its Shapley contribution carries at least a tenth of the change and outweighs its rate part.
    Candidates are taken by the size of that mix part; a segment whose mix sits almost wholly
    (90%) in one sub-segment gives way to it, and a taken segment's ancestors and descendants
    are not taken again: one shift, named once, at the level that carries it.
    """
    if not _finite(totals):
        return causes
    delta = totals["comparison"] - totals["baseline"]  # type: ignore[operator]
    if delta == 0:
        return causes
    leaf = cube.leaf
    den = {"nb": leaf["db"], "nc": leaf["dc"], "qnb": leaf["qdb"], "qnc": leaf["qdc"]}
    phi = float(np.median(additive_leaves(den).phi))
    s = cube.seg
    rest_b, rest_c = cube.total["db"], cube.total["dc"]
    n_tested = max(int(eligible.sum()), 1)
    z_crit = float(stats.norm.isf(ALPHA / (2 * n_tested)))
    mix, rate = contrib["mix"], contrib["rate"]
    sized = eligible & (np.abs(mix) >= 0.1 * abs(delta)) & (np.abs(mix) > np.abs(rate))
    sized &= cube.seg_mask.sum(axis=1) > 0
    blocked = np.zeros(len(sized), dtype=bool)
    for c in causes:  # a segment already named for its rate is not named again for its mix
        i = _index_of(cube, c.segment)
        blocked |= _related(cube, i)
        rest_b, rest_c = rest_b - s["db"][i], rest_c - s["dc"][i]
    while True:
        # shares are zero-sum: once a segment's growth is named, the others are measured
        # against the growth of what is left, so their shrinking shares are not named too
        growth = rest_c / rest_b if rest_b > 0 else 1.0
        var = phi * (s["qdc"] + growth**2 * s["qdb"])
        z = (s["dc"] - growth * s["db"]) / np.sqrt(np.maximum(var, 1e-300))
        cand = sized & (np.abs(z) >= z_crit)
        open_ = np.flatnonzero(cand & ~blocked)
        if open_.size == 0:
            break
        i = int(open_[np.argmax(np.abs(mix[open_]))])
        while True:  # descend while one sub-segment carries nearly all of the mix
            inner = np.flatnonzero(cand & descendants(cube, i) & ~blocked)
            inner = inner[(inner != i) & (np.abs(mix[inner]) >= 0.9 * abs(mix[i]))]
            if inner.size == 0:
                break
            i = int(inner[np.argmax(np.abs(mix[inner]))])
        p_adj = min(1.0, float(2 * stats.norm.sf(abs(z[i]))) * n_tested)
        causes.append(_segment(cube, contrib, i, p_adj))
        blocked |= _related(cube, i)
        rest_b, rest_c = rest_b - s["db"][i], rest_c - s["dc"][i]
    return causes


SAME_ROWS = 0.99


def one_name_each(
    cube: Cube, contrib: dict[str, np.ndarray], *groups: list[Segment]
) -> tuple[list[Segment], ...]:
    """Segments that cover the same rows are one segment, named once.

    Tied columns (every ``platform = web`` row has ``app_version = web``) and a joined copy of a
    column (``country`` and ``users.country``) give one set of rows several names. Two segments
    are the same rows when, in each period, the rows, the denominator and the absolute numerator
    they share are at least ``SAME_ROWS`` of each one's own: counted on the leaves, which
    partition the rows exactly, so a tie broken by a handful of stray rows still holds and a
    segment that differs by more than a percent of its volume or of its metric stays apart.
    Each segment takes the name with the fewest columns (base-table columns before joined ones,
    then the columns' order), and its numbers; the other names become its ``aliases``. A list
    that names the same rows twice keeps the first.
    """
    out = []
    for group in groups:
        kept: list[Segment] = []
        seen: set[int] = set()
        for s in group:
            names = _same_rows(cube, _index_of(cube, s.segment))
            if names[0] in seen:
                continue
            seen.add(names[0])
            if cube.segment_dict(names[0]) != s.segment:
                s = _segment(cube, contrib, names[0], s.p_value)  # type: ignore[arg-type]
            s.aliases = [cube.segment_dict(k) for k in names[1:]]
            kept.append(s)
        out.append(kept)
    return tuple(out)


def _same_rows(cube: Cube, i: int) -> list[int]:
    """Segment ``i`` and every segment covering the same rows, best name first."""
    s = cube.seg
    leaf = cube.leaf
    # a necessary condition on the segments' own sums (of statistics no leaf has negative)
    # narrows the leaf-level check
    near = cube.seg_mask.any(axis=1)
    for k in _MASS:
        if (leaf[k] >= 0).all():
            near &= np.minimum(s[k], s[k][i]) >= SAME_ROWS * np.maximum(s[k], s[k][i])
    near[i] = True
    mass = [np.abs(leaf[k]) for k in _MASS]
    own = _leaf_members(cube, i)
    same = []
    for k in np.flatnonzero(near):
        other = own if k == i else _leaf_members(cube, int(k))
        shared = own & other
        if all(m[shared].sum() >= SAME_ROWS * max(m[own].sum(), m[other].sum()) for m in mass):
            same.append(int(k))

    def rank(k: int) -> tuple[int, int, tuple[int, ...]]:
        cols = tuple(int(j) for j in np.flatnonzero(cube.seg_mask[k]))
        return len(cols), sum("." in cube.dims[j] for j in cols), cols

    return sorted(same, key=rank)


_MASS = ("rowsb", "rowsc", "db", "dc", "nb", "nc")


def _leaf_members(cube: Cube, i: int) -> np.ndarray:
    """Which leaves make up segment ``i``."""
    cols = np.flatnonzero(cube.seg_mask[i])
    return (cube.leaf_codes[:, cols] == cube.seg_codes[i, cols]).all(axis=1)


def _overlap_notes(causes: list[Segment]) -> list[str]:
    """Say so when root causes' shares add to more than the whole change because some of them
    hold the same rows (two segments overlap unless they set one column to different values)."""
    shares = [c.share for c in causes if c.share is not None and c.share > 0]
    if sum(shares) <= 1.05:
        return []
    pairs = [
        (a, b)
        for i, a in enumerate(causes)
        for b in causes[i + 1 :]
        if all(str(b.segment[k]) == str(v) for k, v in a.segment.items() if k in b.segment)
    ]
    if not pairs:
        return []
    named = "; ".join(
        " and ".join(", ".join(f"{k} = {v}" for k, v in s.segment.items()) for s in pair)
        for pair in pairs[:3]
    )
    return [
        f"root causes overlap (they share rows: {named}), so their shares add to "
        f"{sum(shares):.0%} of the change"
    ]


def _adjusted(p: float, found: Search) -> float:
    """A segment's p-value corrected for every segment searched (Bonferroni), as reported."""
    return min(1.0, p * found.n_tested)


def _index_of(cube: Cube, segment: dict[str, Any]) -> int:
    """The row of ``segment`` among the cube's segments."""
    if len(segment) > len(cube.dims):
        raise ValueError("more columns than the cube has")
    want = {cube.dims.index(k): v for k, v in segment.items()}
    cols = np.array(sorted(want), dtype=np.int64)
    match = cube.seg_mask.sum(axis=1) == len(cols)
    for j in cols:
        code = cube.values[j].index(want[j])
        match &= cube.seg_codes[:, j] == code
    return int(np.flatnonzero(match)[0])


def _related(cube: Cube, i: int) -> np.ndarray:
    """Segment ``i``, its descendants and its ancestors."""
    return descendants(cube, i) | ancestors(cube, i)


def _global_shift(
    cube: Cube,
    found: Search,
    kind: str,
    delta: float | None,
    significant: bool,
) -> Segment | None:
    """The even move of everything: what remains once the named segments are taken out.

    Reported when the change is significant and at least half of it is left over after the
    root causes, so no segment stood out for it: it hit everything alike. Whether it is the
    data's doing (missing or repeated days) is decided by ``assign_data_quality``.
    """
    if not significant or not delta:
        return None
    pick = next((p for p in found.picks if p.seg == 0), None)
    part = float(found.remainder) + (pick.observed - pick.expected if pick else 0.0)
    if kind == "ratio":
        part /= max(cube.total["dc"], 1e-300)
    if pick is None and (part * delta <= 0 or abs(part) < 0.5 * abs(delta)):
        return None
    return Segment(
        segment={},
        contribution=part,
        share=part / delta,
        unexpected=0.0,
        effect="rate",
        p_value=None,
        significant=True,
    )


def _drivers(
    cube: Cube,
    contrib: dict[str, np.ndarray],
    found: Search,
    eligible: np.ndarray,
    direction: float,
) -> tuple[list[Segment], list[Segment]]:
    """Segments significant after correcting for every segment searched (the same bound the
    causes meet), ranked by contribution, with and against the change."""
    crit = found.seg_crit if found.seg_crit is not None else found.z_crit
    sig = eligible & (np.abs(found.z) >= crit)
    sig[0] = False  # the whole population is not a driver
    idx = np.flatnonzero(sig)
    c = contrib["contribution"][idx] * direction
    depth = cube.seg_mask[idx].sum(axis=1)
    order = np.lexsort((depth, -np.abs(c)))
    with_, against = [], []
    for j in order:
        i = int(idx[j])
        seg = _segment(cube, contrib, i, _adjusted(float(found.p[i]), found))
        seg.explained_by_root_causes = _follows_from_causes(found, i)
        (with_ if c[j] > 0 else against).append(seg)
        if len(with_) >= MAX_DRIVERS and len(against) >= MAX_DRIVERS:
            break
    return with_[:MAX_DRIVERS], against[:MAX_DRIVERS]


def _follows_from_causes(found: Search, i: int) -> bool:
    """Segment ``i``'s move is within the noise once the picked causes are fitted."""
    return any(p.seg != 0 for p in found.picks) and _within_fit(found, i)


def _within_fit(found: Search, i: int, scale: float = 1.0) -> bool:
    """Segment ``i`` is within its bound once the picks are fitted (the fit scaled by ``scale``,
    for an even shift on top of them)."""
    if found.fit is None:
        return False
    vs, fs, ps = found.fit
    crit = float(found.seg_crit[i]) if found.seg_crit is not None else found.z_crit
    return bool(abs(vs[i] - fs[i] * scale) / math.sqrt(max(float(ps[i]), 1e-300)) < crit)


def _verify(ctx: ToolContext, q: Question, c: Segment) -> None:
    """Run a root cause's own query; its exact numbers replace the cube's where those can
    differ (a distinct count summed over leaves counts a value once per leaf it appears in)."""
    assert c.evidence is not None
    sq = cube_mod.SegmentQuery(sql=c.evidence.sql, params=c.evidence.params, formula="")
    cube_mod.run_segment_query(ctx, q, sq)
    c.evidence.result = {"baseline": sq.baseline, "comparison": sq.comparison}
    if q.metric.kind == "distinct" and sq.baseline is not None and sq.comparison is not None:
        c.baseline, c.comparison = sq.baseline, sq.comparison
        c.contribution = sq.comparison - sq.baseline


def _evidence(ctx: ToolContext, q: Question, segment: dict[str, Any]) -> Evidence:
    """A segment's own query (SQL and parameters: its metric in each period) and the
    compare_periods call that shows the same segment through a tool."""
    args = compare_arguments(q, segment)
    sq = cube_mod.segment_query(ctx, q, segment)
    return Evidence(
        tool="metric_compare_periods",
        arguments=args,
        sql=sq.sql,
        params={k: _jsonable(v) for k, v in sq.params.items()},
        result={"formula": sq.formula},
    )


def compare_arguments(q: Question, segment: dict[str, Any] | None = None) -> dict[str, Any]:
    """``metric_compare_periods`` arguments for the question's metric (its numerator for a
    ratio) and periods, filtered to ``segment`` when given."""
    filters = [f.model_dump() for f in q.metric.filters]
    filters += [
        {"column": k, "op": "is_null"} if v is None else {"column": k, "op": "=", "value": v}
        for k, v in (segment or {}).items()
    ]
    args: dict[str, Any] = {"table": q.metric.table, "metric": _measure(q)}
    p = q.periods
    if p.by_dates:
        args["time_column"] = p.time_column
        args["baseline"] = {
            "start": p.baseline.start.isoformat(),  # type: ignore[union-attr]
            "end": p.baseline.end.isoformat(),  # type: ignore[union-attr]
        }
        args["comparison"] = {
            "start": p.comparison.start.isoformat(),  # type: ignore[union-attr]
            "end": p.comparison.end.isoformat(),  # type: ignore[union-attr]
        }
    else:
        args["period_column"] = p.period_column
        args["baseline"] = {"label": p.baseline}
        args["comparison"] = {"label": p.comparison}
    if filters:
        args["filters"] = filters
    return args


def _measure(q: Question) -> dict[str, Any]:
    a = q.metric.numerator
    m: dict[str, Any] = {"agg": a.fn}
    if a.column:
        m["column"] = a.column
    return m

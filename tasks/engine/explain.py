"""explain_change: measure a metric's move, test it against the noise, and name its causes."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from sql_tools import ToolContext, ToolInputError
from tasks.engine import cube as cube_mod
from tasks.engine import screen as screen_mod
from tasks.engine import significance as sig
from tasks.engine.clean_days import assign_data_quality
from tasks.engine.cube import Cube, build_cube, daily_series
from tasks.engine.distributions import ttest_rel, ttest_welch
from tasks.engine.leaf_days import LeafDays, leaf_days
from tasks.engine.lengths import length_notes
from tasks.engine.quality.grain import DAY, Grain, by_unit, grain_of, profiled_dates
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
    MIN_DAYS,
    Leaves,
    Search,
    additive_leaves,
    ratio_leaves,
    search_stories,
    told_by_a_column,
)
from tasks.engine.segments import MAX_DRIVERS as MAX_DRIVERS  # also importable from here
from tasks.engine.segments import SAME_ROWS as SAME_ROWS  # also importable from here
from tasks.engine.segments import (
    _adjusted,
    _contributions,
    _drivers,
    _effect,
    _finite,
    _global_shift,
    _index_of,
    _largest_moves,
    _overlap_notes,
    _same_rows,
    _segment,
    _with_mix,
    _within_fit,
    one_name_each,
)
from tasks.engine.spec import DateRange, Question

T = TypeVar("T")

MAX_NAMED = 40
"""Columns a note names; the rest are counted (the result's stats list them all)."""
ADDITIVE_SEARCH: dict[str, Any] = {"gain_units": "noise", "min_effect": 0.0}
RATIO_SEARCH: dict[str, Any] = {"gain_units": "absolute", "min_effect": 0.2}


def explain_change(db: str | Path | ToolContext, question: Question) -> Explanation:
    """Explain why ``question.metric`` moved between the two periods (no Prefect, no LLM)."""
    return analyze(db, question).explanation


def analyze(db: str | Path | ToolContext, question: Question) -> Analysis:
    """The explanation, plus the searched segments' statistics (for judging other claims).
    ``db`` is a DuckDB file, or an open tool context (on DuckDB or Postgres)."""
    if not isinstance(db, str | Path):
        return _explain(db, question)
    with ToolContext(db) as ctx:
        return _explain(ctx, question)


@dataclass(frozen=True)
class SegmentTest:
    """What the engine measured for one segment: its part of the change and its significance."""

    segment: dict[str, Any]
    contribution: float
    share: float | None
    p_value: float = field(
        metadata={
            "doc": "a root cause's as reported; else Bonferroni-adjusted over the segments searched"
        }
    )
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
    # root causes' p-values as reported, by segment key (each of their names): the gate judges
    # a root cause by the figure its row shows
    cause_p: dict[str, float] = field(default_factory=dict)
    # the source read once (None for a distinct count), which the context's reader answers
    # sums of cells from until the analysis is closed
    cells: LeafDays | None = None

    def close(self) -> None:
        """Let go of the stored cells (the analysis's numbers stay)."""
        if self.cells is not None:
            self.cells.close()

    def answer_tools(self) -> None:
        """From now on the tools' calls (the hypotheses', the gate's re-runs, the report's
        per-day numbers) are answered from the stored cells when they can, with no pass over
        the source (:mod:`tasks.engine.cell_answers`); the metric's columns the data-quality
        check found NaN or infinity in are read from the source."""
        if self.cells is None:
            return
        found = {
            i.column
            for i in self.explanation.data_quality
            if i.kind == "non_finite_values" and i.column
        }
        self.cells.answer_tools(found)

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
        # a root cause's p-value is the one its row in the report shows (a mix cause is judged
        # by the test of its share, a cause in a narrower family by that family's correction);
        # any other segment's is its rate test corrected for every segment searched
        p = self.cause_p.get(key)
        if p is None:
            p = sig.adjusted(float(found.p[i]), found.tests)
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
            significant=sig.significant(p),
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


def search_dimensions(ctx: ToolContext, q: Question) -> list[str]:
    """The columns the engine searches and its data-quality checks count for ``q`` (before
    screening); raises ``ToolInputError`` as the engine would."""
    return _dimensions(ctx, q)[0]


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
    notes = length_notes(q) + notes
    # the data-quality queries do not depend on the search: they run on a second connection
    # while the search's queries and arithmetic run on this one, from when the source has been
    # aggregated (the checks the cells can answer read them)
    checks: _Beside[list[DataQualityIssue]] = _Beside(ctx, lambda c: _quality(c, q, dims))
    try:
        return _explained(ctx, q, dims, notes, checks, t0)
    finally:
        checks.close()


def _explained(
    ctx: ToolContext,
    q: Question,
    dims: list[str],
    notes: list[str],
    checks: _Beside[list[DataQualityIssue]],
    t0: float,
) -> Analysis:
    kind = q.metric.kind
    screening = None
    search_dims = dims
    many = len(dims) > cube_mod.MAX_SEARCH_COLUMNS
    if many or cube_mod.estimated_leaves(ctx, q, dims) > cube_mod.LEAF_BUDGET:
        open_depth = q.max_depth or cube_mod.DEFAULT_DEPTH
        screening = screen_mod.screen(ctx, q.model_copy(update={"max_depth": open_depth}), dims)
        search_dims = screening.dims
        notes += _screening_notes(dims, screening)
    depth, depth_notes = cube_mod.search_depth(ctx, q, search_dims)
    notes += depth_notes
    q = q.model_copy(update={"max_depth": depth})
    cells = leaf_days(ctx, q, search_dims, dims)  # the one pass over the source's rows
    checks.start()
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
    grain = _grain(ctx, q, series)
    change = _significance(q, totals, series, leaves, grain)
    if totals["baseline"] == 0:  # a move from nothing has a size, but not a relative one
        notes.append("the baseline is 0, so the change has no relative size")
    if kind == "distinct":
        # a distinct count is a count: its noise is never below the count itself (the row
        # level of counts), then scaled by how often one value is counted in several leaves
        leaves.phi = np.maximum(leaves.phi, 1.0) * _overlap(cube, totals)
    eligible = _eligible(cube, q.min_support)
    # Ratios of counts on real data carry heavy-tailed per-segment noise: there the search ranks
    # by explanatory power and asks each cause to carry a fifth of what is left unexplained.
    style = RATIO_SEARCH if kind == "ratio" else ADDITIVE_SEARCH
    kw = {"eligible": eligible, "alpha": sig.ALPHA, **style}
    found = search_stories(cube, leaves, **kw)
    change = _localized(change, found, eligible)
    contrib = _contributions(cube, kind)
    causes = _picked(cube, contrib, found)
    if kind == "ratio":
        causes = _with_mix(cube, q, contrib, causes, eligible, totals, days)
    delta = totals["comparison"] - totals["baseline"] if _finite(totals) else None
    global_shift = _global_shift(cube, found, kind, delta, change.significant)
    if global_shift is not None and not causes and not found.picks:
        # no segment stood out, and the change is told as an even move of everything: a claim
        # about every column, tested as for an even shift the search took
        told = told_by_a_column(cube, leaves, found, kw)
        if told is not found:
            found, global_shift = told, None
            causes = _picked(cube, contrib, found)
    movers: list[Segment] = []
    if not change.significant:
        unjudged = _noise_unjudged(cube, found, days)
        if unjudged is None:
            notes.append("the change is within the noise; no root causes are named")
        else:
            change = change.model_copy(update={"noise_unjudged": unjudged})
            notes.append(f"{unjudged}; no root causes are named, and the largest moves are listed")
            movers = one_name_each(cube, contrib, _largest_moves(cube, contrib, eligible))[0]
        causes = []
    quality = checks.result()
    global_shift = assign_data_quality(
        ctx,
        q,
        causes,
        global_shift,
        quality,
        found.z_crit,
        found.tests,
        grain,
        (totals["baseline"], totals["comparison"]),
        notes,
    )
    direction = math.copysign(1.0, delta) if delta else 1.0
    causes.sort(key=lambda s: (-(s.contribution * direction > 0), -abs(s.contribution)))
    drivers, offsetting = _drivers(cube, contrib, found, eligible, direction)
    causes, drivers, offsetting = one_name_each(cube, contrib, causes, drivers, offsetting)
    drivers, offsetting = _besides(causes, drivers), _besides(causes, offsetting)
    for c in [*causes, *drivers, *offsetting]:
        c.evidence = _evidence(ctx, q, c.segment)
    for c in movers:
        c.evidence = _evidence(ctx, q, c.segment)
    for c in [*causes, *movers]:
        _verify(ctx, q, c)
    for c in [*causes, *drivers, *offsetting, *movers]:
        c.share = c.contribution / delta if delta else None
    explained = sum(c.contribution for c in causes) / delta if delta and causes else None
    notes += _overlap_notes(causes, delta)
    if kind == "distinct":
        notes.append(
            "distinct counts do not add up across segments: a root cause's figures count its own "
            "distinct values (its query was run), so contributions can overlap; drivers' figures "
            "add up finer cells and can count a value more than once"
        )
    notes += cube.notes
    notes += ctx.schema.notes  # relations of the database left out (views reading beyond it)
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
        movers=movers,
        # missing data that moved the total is told whether or not the move is beyond the noise
        global_shift=global_shift
        if change.significant or (global_shift and global_shift.effect == "data_quality")
        else None,
        explained_share=explained,
        data_quality=quality,
        data_grain=grain.unit if q.periods.by_dates else None,
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
    return Analysis(explanation, cube, contrib, found, delta, cause_p, cells)


def _besides(causes: list[Segment], movers: list[Segment]) -> list[Segment]:
    """``movers`` without the root causes: a cause listed again under drivers or offsetting,
    under its own name or another name of the same rows (an alias), would be counted twice by
    a reader and can contradict it (a cause "moving the other way")."""
    named = {_name_key(n) for c in causes for n in (c.segment, *c.aliases)}
    return [s for s in movers if not any(_name_key(n) in named for n in (s.segment, *s.aliases))]


def _name_key(segment: dict[str, Any]) -> str:
    return json.dumps(segment, sort_keys=True, default=str)


def _screening_notes(dims: list[str], sc: screen_mod.Screening) -> list[str]:
    out = []
    left = [d for d in dims if d not in sc.dims]
    if left:
        shown = ", ".join(left[:MAX_NAMED]) + (
            f" and {len(left) - MAX_NAMED:,} more (stats.screening.left_out)"
            if len(left) > MAX_NAMED
            else ""
        )
        out.append(
            f"too many columns or value combinations to search all {len(dims)} columns at once: "
            f"the search used the {len(sc.dims)} columns where the change is strongest "
            f"({', '.join(sc.dims)}); screened and left out: {shown}"
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
        "left_out": sc.left_out,
        "shortlisted": sc.shortlisted,
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


class _Beside(Generic[T]):
    """``work(ctx, *args)``, from :meth:`start`, on a sibling connection
    (:meth:`ToolContext.sibling`) in a thread of its own, its answer or its error at
    :meth:`result`; where the context has no sibling (Postgres), ``work`` runs at once on
    ``ctx``. :meth:`close` stops the work if it is still running (the caller failed first) and
    waits for the thread."""

    def __init__(self, ctx: ToolContext, work: Callable[..., T]) -> None:
        self._ctx, self._work = ctx, work
        self._twin: ToolContext | None = None
        self._thread: threading.Thread | None = None
        self._answer: Future[T] = Future()

    def start(self, *args: Any) -> None:
        """Begin the work with ``args`` after the context."""
        self._twin = self._ctx.sibling()
        work = self._work
        if self._twin is None:
            self._answer.set_result(work(self._ctx, *args))  # an error is the caller's at once
            return
        twin = self._twin

        def run() -> None:
            try:
                self._answer.set_result(work(twin, *args))
            except BaseException as exc:  # handed to the caller by result()
                self._answer.set_exception(exc)

        self._thread = threading.Thread(target=run, name="drilldown-quality", daemon=True)
        self._thread.start()

    def result(self) -> T:
        return self._answer.result()

    def close(self) -> None:
        while self._thread is not None and self._thread.is_alive():
            assert self._twin is not None
            self._twin.stop()  # again until it ends: a stop between two queries finds none
            self._thread.join(0.05)
        if self._twin is not None:
            self._twin.close()
            self._twin = None


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


def _grain(ctx: ToolContext, q: Question, series: dict[str, Any] | None) -> Grain:
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


def _significance(
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


def _noise_unjudged(cube: Cube, found: Search, days: tuple[float, float] | None) -> str | None:
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


def _picked(cube: Cube, contrib: dict[str, np.ndarray], found: Search) -> list[Segment]:
    """The search's picks as root causes (the even shift, when picked, is not one)."""
    return [
        _segment(cube, contrib, p.seg, _adjusted(p.p_value, found, p.p_adjusted))
        for p in found.picks
        if p.seg != 0
    ]


def _eligible(cube: Cube, min_support: float) -> np.ndarray:
    tb = max(cube.total["db"], 1e-300)
    tc = max(cube.total["dc"], 1e-300)
    share = np.maximum(cube.seg["db"] / tb, cube.seg["dc"] / tc)
    return share >= min_support


def _verify(ctx: ToolContext, q: Question, c: Segment) -> None:
    """A root cause's numbers from its own query (summed from the stored cells, where there are
    some); they replace the cube's where those can differ (a distinct count summed over leaves
    counts a value once per leaf it appears in)."""
    assert c.evidence is not None
    sq = cube_mod.SegmentQuery(sql=c.evidence.sql, params=c.evidence.params, formula="")
    cube_mod.run_segment_query(ctx, q, sq, c.segment)
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

"""explain_change: measure a metric's move, test it against the noise, and name its causes."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from sql_tools import ToolContext, ToolInputError
from tasks.engine import cube as cube_mod
from tasks.engine import screen as screen_mod
from tasks.engine import significance as sig
from tasks.engine.analysis import Analysis as Analysis  # also importable from here
from tasks.engine.analysis import SegmentTest as SegmentTest  # also importable from here
from tasks.engine.change import (
    data_grain,
    distinct_overlap,
    localized,
    noise_unjudged,
    period_totals,
    significance,
)
from tasks.engine.clean_days import assign_data_quality
from tasks.engine.cube import Cube, build_cube, daily_series
from tasks.engine.leaf_days import leaf_days
from tasks.engine.lengths import length_notes
from tasks.engine.result import (
    DataQualityIssue,
    Evidence,
    Explanation,
    MetricInfo,
    PeriodValue,
    Segment,
    json_params,
)
from tasks.engine.search import (
    Search,
    SearchOptions,
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
    _finite,
    _global_shift,
    _largest_moves,
    _overlap_notes,
    _segment,
    _with_mix,
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
    totals = period_totals(ctx, q, cube)
    leaves = (
        ratio_leaves(cube.leaf, cube.total, days)
        if kind == "ratio"
        else additive_leaves(cube.leaf, days)
    )
    grain = data_grain(ctx, q, series)
    change = significance(q, totals, series, leaves, grain)
    if totals["baseline"] == 0:  # a move from nothing has a size, but not a relative one
        notes.append("the baseline is 0, so the change has no relative size")
    if kind == "distinct":
        # a distinct count is a count: its noise is never below the count itself (the row
        # level of counts), then scaled by how often one value is counted in several leaves
        leaves.phi = np.maximum(leaves.phi, 1.0) * distinct_overlap(cube, totals)
    eligible = _eligible(cube, q.min_support)
    # Ratios of counts on real data carry heavy-tailed per-segment noise: there the search ranks
    # by explanatory power and asks each cause to carry a fifth of what is left unexplained.
    style = RATIO_SEARCH if kind == "ratio" else ADDITIVE_SEARCH
    options = SearchOptions(eligible=eligible, alpha=sig.ALPHA, **style)
    found = search_stories(cube, leaves, options)
    change = localized(change, found, eligible)
    contrib = _contributions(cube, kind)
    causes = _picked(cube, contrib, found)
    if kind == "ratio":
        causes = _with_mix(cube, q, contrib, causes, eligible, totals, days)
    delta = totals["comparison"] - totals["baseline"] if _finite(totals) else None
    global_shift = _global_shift(cube, found, kind, delta, change.significant)
    if global_shift is not None and not causes and not found.picks:
        # no segment stood out, and the change is told as an even move of everything: a claim
        # about every column, tested as for an even shift the search took
        told = told_by_a_column(cube, leaves, found, options)
        if told is not found:
            found, global_shift = told, None
            causes = _picked(cube, contrib, found)
    movers: list[Segment] = []
    if not change.significant:
        unjudged = noise_unjudged(cube, found, days)
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
            "params": json_params(cube.params),
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


def _picked(cube: Cube, contrib: dict[str, np.ndarray], found: Search) -> list[Segment]:
    """The search's picks as root causes (the even shift, when picked, is not one)."""
    return [
        _segment(cube, contrib, p.seg, _adjusted(p.p_value, found, p.p_adjusted))
        for p in found.picks
        if p.seg != 0
    ]


def _eligible(cube: Cube, floor: float) -> np.ndarray:
    """The segments holding at least ``floor`` of the volume in either period."""
    tb = max(cube.total["db"], 1e-300)
    tc = max(cube.total["dc"], 1e-300)
    share = np.maximum(cube.seg["db"] / tb, cube.seg["dc"] / tc)
    return share >= floor


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
        params=json_params(sq.params),
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

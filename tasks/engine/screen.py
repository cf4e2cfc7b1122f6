"""Screening: which columns carry the change, when all of them at once are too many leaves.

One scan computes the cells of a few *covers* (column sets that together hold every pair of
columns); every segment of one or two columns is scored from them, and the search keeps the
strongest columns whose value combinations fit the leaf budget (:data:`cube.LEAF_BUDGET`).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

import numpy as np

from sql_tools import ToolContext, to_sql
from tasks.engine import cube
from tasks.engine import significance as sig
from tasks.engine.cube import (
    MAX_RESULT_ROWS,
    EngineSql,
    _constant_denominator,
    _numpy,
    dimension_sizes,
    sorted_codes,
)
from tasks.engine.search import additive_leaves, ratio_leaves
from tasks.engine.spec import Question

# Screening scores segments of up to this many columns: a cause over three columns moves each of
# its pairs too, and pairs need half the grouping sets of triples.
SCREEN_DEPTH = 2

EXACT_COVER_MAX_COLUMNS = 12
"""Up to this many columns the fewest covers are searched (see :func:`covers`)."""
EXACT_COVER_MAX_TRIES = 20_000
"""Candidate coverings tried per number of covers before the greedy covering is kept."""

ROWS_PER_CELL = 50
"""Covers hold at most one cell per this many rows of the table: the dispersion is read off the
cells' lower quartile of ``r^2 / P``, which follows a chi-square only when each cell sums enough
rows. Cells of a row or two (a cover of 150k cells on a million rows) put that quartile at the
value a single row gives, and make every segment look significant or none."""


def _cells(sizes: list[int], cols: Iterable[int]) -> float:
    """How many value combinations the columns ``cols`` can form (their sizes' product)."""
    return math.prod(float(sizes[j]) for j in cols)


def covers(sizes: list[int], depth: int, budget: int) -> list[tuple[int, ...]]:
    """Sets of columns, each with at most ``budget`` value combinations where possible, such that
    every combination of ``depth`` columns lies inside at least one of them.

    Each cover is one more pass over the rows, so the fewest covers win (then the fewest cells):
    for up to :data:`EXACT_COVER_MAX_COLUMNS` columns the fewest are searched among the largest
    column sets within the budget. The greedy covering (:func:`_greedy_covers`) is kept when no
    smaller one is found within :data:`EXACT_COVER_MAX_TRIES` candidates, and for more columns.
    """
    greedy = _greedy_covers(sizes, depth, budget)
    k = len(sizes)
    depth = min(depth, k)
    if len(greedy) <= 1 or k > EXACT_COVER_MAX_COLUMNS:
        return greedy

    # the column sets within the budget that no further column fits into
    largest: list[tuple[int, ...]] = []
    cells: list[float] = []
    for r in range(depth, k + 1):
        for s in combinations(range(k), r):
            c = _cells(sizes, s)
            if c <= budget and all(c * sizes[j] > budget for j in range(k) if j not in s):
                largest.append(s)
                cells.append(c)
    # which combinations each set holds, as bits of one integer
    todo = list(combinations(range(k), depth))
    held = [sum(1 << i for i, c in enumerate(todo) if set(c) <= set(s)) for s in largest]
    everything = (1 << len(todo)) - 1
    for n in range(1, len(greedy)):
        if math.comb(len(largest), n) > EXACT_COVER_MAX_TRIES:
            break
        found = [
            (sum(cells[i] for i in pick), pick)
            for pick in combinations(range(len(largest)), n)
            if functools.reduce(operator.or_, (held[i] for i in pick)) == everything
        ]
        if found:
            return [largest[i] for i in min(found)[1]]
    return greedy


def _greedy_covers(sizes: list[int], depth: int, budget: int) -> list[tuple[int, ...]]:
    """Covers (see :func:`covers`) grown one column at a time: each starts from the largest
    combination not yet covered and takes the column that completes the most others."""
    k = len(sizes)
    depth = min(depth, k)
    todo = set(combinations(range(k), depth))
    out: list[tuple[int, ...]] = []
    while todo:
        # start from the largest uncovered combination; grow while it stays within the budget
        first = max(todo, key=lambda c: (_cells(sizes, c), c))
        cover = set(first)
        while True:
            best, best_new = None, 0
            for j in range(k):
                if j in cover or _cells(sizes, cover | {j}) > budget:
                    continue
                new = sum(1 for c in todo if set(c) <= cover | {j})
                if new > best_new:
                    best, best_new = j, new
            if best is None:
                break
            cover.add(best)
        out.append(tuple(sorted(cover)))
        todo = {c for c in todo if not set(c) <= cover}
    return out


MAX_PAIR_COLUMNS = 24
"""Most columns whose pairs are scored (276 pairs: as many grouping sets, at most, in one scan).
Beyond this many, each column is first scored alone and the strongest are shortlisted
(:func:`_shortlist`), so no step grows with the square of the columns a file has."""


@dataclass
class Screening:
    """The columns the search keeps, and how they were chosen."""

    dims: list[str]
    covers: list[list[str]]
    z_threshold: float
    significant: int
    dropped: list[dict[str, Any]]
    sql: str
    elapsed_ms: float
    shortlisted: list[str] | None = None
    """The columns whose pairs were scored, when there were more than :data:`MAX_PAIR_COLUMNS`."""
    left_out: list[str] = field(default_factory=list)
    """The columns screened and left out of the search."""


@dataclass
class _Cover:
    """One cover's cells, fitted: the columns (indices into the screened columns), each cell's
    value codes for them and their radix, and its residual, noise and whether it measured any."""

    cols: tuple[int, ...]
    codes: np.ndarray
    radix: np.ndarray
    resid: np.ndarray
    P: np.ndarray
    measured: np.ndarray


def screen(
    ctx: ToolContext,
    q: Question,
    dims: list[str],
    *,
    budget: int | None = None,
    alpha: float = sig.ALPHA,
) -> Screening:
    """Rank columns by the strongest segment move they take part in; keep as many as fit.

    One scan computes the cells of a few *covers* (column sets, each within ``budget`` value
    combinations, that together hold every pair of columns); every segment of one or two columns
    is summed from its cover's cells and scored against the move of the
    whole (quasi-Poisson, dispersion measured on the cells). Columns are taken in the order of the
    segments' scores while the cross product of their values stays within ``budget`` and they
    number at most :data:`cube.MAX_SEARCH_COLUMNS`; a significant segment over a column left out
    is reported, never silently lost. Covers have at most one cell per :data:`ROWS_PER_CELL` rows
    of the table, so that the dispersion is measured on cells of many rows. More than
    :data:`MAX_PAIR_COLUMNS` columns are shortlisted first (:func:`_shortlist`).
    """
    import time

    start = time.perf_counter()
    budget = budget or cube.LEAF_BUDGET
    first = _shortlist(ctx, q, dims, alpha) if len(dims) > MAX_PAIR_COLUMNS else None
    cols = first.dims if first is not None else dims
    sizes = dimension_sizes(ctx, q, cols)
    depth_max = min(q.max_depth, SCREEN_DEPTH, len(cols))
    prof = ctx.schema.profile(q.metric.table)
    cells = budget if prof is None else min(budget, max(prof.row_count // ROWS_PER_CELL, 1))
    cov = covers(sizes, depth_max, cells)
    fitted, text = _fitted(ctx, q, cols, cov)
    scores, seg_z = _scores(fitted, depth_max)
    k = len(cols)
    n_tested = max(sum(len(z) for z in seg_z), 1)
    z_crit = sig.bonferroni_z(n_tested, alpha)
    keep: set[int] = set()
    for _, c in sorted(scores, key=lambda t: -t[0]):
        grown = keep | set(c)
        if grown != keep and len(grown) <= cube.MAX_SEARCH_COLUMNS:
            if _cells(sizes, grown) <= budget:
                keep = grown
        if len(keep) == min(k, cube.MAX_SEARCH_COLUMNS):
            break
    # a left-out segment matters unless the kept columns of it already move as much
    score_of = dict((c, z) for z, c in scores)
    dropped = [
        {"columns": [cols[j] for j in c], "max_z": round(z_max, 2)}
        for z_max, c in sorted(scores, key=lambda t: -t[0])
        if z_max >= z_crit
        and not set(c) <= keep
        and score_of.get(tuple(j for j in c if j in keep), 0.0) < z_max
    ]
    significant = int(sum(int((z >= z_crit).sum()) for z in seg_z))
    if first is not None:  # columns left out by the shortlist, where they moved significantly
        dropped += first.dropped
        significant += first.significant
        text = first.sql + ";\n" + text
    kept = [cols[j] for j in sorted(keep)]
    return Screening(
        dims=kept,
        covers=[[cols[j] for j in c] for c in cov],
        z_threshold=z_crit,
        significant=significant,
        dropped=dropped,
        sql=text,
        elapsed_ms=(time.perf_counter() - start) * 1000,
        shortlisted=list(cols) if first is not None else None,
        left_out=[d for d in dims if d not in kept],
    )


SHORTLIST_BATCH = {"duckdb": 60, "postgres": 31}
"""Columns read by one query of :func:`_shortlist`: a query's ``GROUPING`` takes at most 63
columns in DuckDB, 31 in Postgres."""


def _shortlist(ctx: ToolContext, q: Question, dims: list[str], alpha: float) -> Screening:
    """The :data:`MAX_PAIR_COLUMNS` columns whose values moved most, each column scored alone.

    Columns are read :data:`SHORTLIST_BATCH` at a time (one grouping set per column), all scored
    with one dispersion. Its ``dropped`` lists the significant columns left off the list.
    """
    fitted: list[_Cover] = []
    texts: list[str] = []
    step = SHORTLIST_BATCH.get(ctx.dialect, min(SHORTLIST_BATCH.values()))
    for lo in range(0, len(dims), step):
        batch = dims[lo : lo + step]
        got, text = _fitted(ctx, q, batch, [(j,) for j in range(len(batch))])
        fitted += [replace(f, cols=(f.cols[0] + lo,)) for f in got]
        texts.append(text)
    scores, seg_z = _scores(fitted, 1)
    z_crit = sig.bonferroni_z(max(sum(len(z) for z in seg_z), 1), alpha)
    ranked = sorted(scores, key=lambda t: (-t[0], t[1]))
    short = sorted(c[0] for _, c in ranked[:MAX_PAIR_COLUMNS])
    return Screening(
        dims=[dims[j] for j in short],
        covers=[[d] for d in dims],
        z_threshold=z_crit,
        significant=int(sum(int((z >= z_crit).sum()) for z in seg_z)),
        dropped=[
            {"columns": [dims[c[0]]], "max_z": round(z, 2)}
            for z, c in ranked[MAX_PAIR_COLUMNS:]
            if z >= z_crit
        ],
        sql=";\n".join(texts),
        elapsed_ms=0.0,
    )


def _fitted(
    ctx: ToolContext, q: Question, dims: list[str], cov: list[tuple[int, ...]]
) -> tuple[list[_Cover], str]:
    """The cells of the covers ``cov`` of ``dims`` in one scan, each cover fitted by the model of
    "nothing but an even move changed" (the rate view for a ratio); and the query's SQL."""
    sql = EngineSql(ctx, q, dims)
    text = to_sql(sql.cover_cells(cov), ctx.dialect)
    raw = ctx.reader.read_arrow(text, sql.params.values, max_rows=MAX_RESULT_ROWS)
    k = len(dims)
    # the cells in :func:`in_order`'s order (sums over them then add up the same way on every
    # run and database), the values as their ranks: the values themselves are not needed here
    order, codes, radix = sorted_codes(raw, k)
    codes = codes[order]
    g = _numpy(raw.column("__g")).astype(np.int64)[order]
    cells = {name: arr[order] for name, arr in _constant_denominator(raw).items()}
    ratio = q.metric.kind == "ratio"
    fitted = []
    for cover in cov:
        mask = 0
        for j in cover:
            mask |= 1 << (k - 1 - j)
        rows = np.flatnonzero(g == ((1 << k) - 1) ^ mask)
        leaf = {name: arr[rows] for name, arr in cells.items()}
        total = {name: float(arr.sum()) for name, arr in leaf.items()}
        model = ratio_leaves(leaf, total) if ratio else additive_leaves(leaf)
        resid = model.v - (1.0 + model.g) * model.f
        # a cell whose numerator is 0 on every row fits exactly: it measures no spread
        measured = (leaf["qnb"] + leaf["qnc"]) > 0
        picked = list(cover)
        fitted.append(
            _Cover(cover, codes[np.ix_(rows, picked)], radix[picked], resid, model.P, measured)
        )
    return fitted, text


def _scores(
    fitted: list[_Cover], depth_max: int
) -> tuple[list[tuple[float, tuple[int, ...]]], list[np.ndarray]]:
    """Every segment of up to ``depth_max`` columns of the covers, scored: per column set its
    largest ``|z|`` (with the columns), and the ``|z|`` of each of its segments."""
    # one dispersion for all covers: most covers leave out the columns of a cause, so their cells
    # differ by noise; a cover holding the cause has many moved cells and alone would overstate it
    phi = float(np.median([_quartile_dispersion(f.resid, f.P, f.measured) for f in fitted]))
    scores: list[tuple[float, tuple[int, ...]]] = []
    seg_z: list[np.ndarray] = []
    done: set[tuple[int, ...]] = set()
    for f in fitted:
        var = phi * f.P
        for depth in range(1, depth_max + 1):
            for picked in combinations(range(len(f.cols)), depth):
                cols = tuple(f.cols[i] for i in picked)
                if cols in done:
                    continue
                done.add(cols)
                key = np.zeros(len(f.resid), dtype=np.int64)
                for i in picked:
                    key = key * f.radix[i] + f.codes[:, i]
                R, V = _sums_by_key(key, f.resid, var)
                z = np.abs(R) / np.sqrt(np.maximum(V, 1e-300))
                seg_z.append(z)
                scores.append((float(z.max()) if z.size else 0.0, cols))
    return scores, seg_z


def _sums_by_key(key: np.ndarray, *weights: np.ndarray) -> list[np.ndarray]:
    """Each weight summed per distinct ``key``, in ascending key order (keys that occur only)."""
    space = int(key.max()) + 1 if key.size else 0
    if space <= max(4 * key.size, 1 << 16):
        present = np.bincount(key, minlength=space) > 0
        return [np.bincount(key, weights=w, minlength=space)[present] for w in weights]
    _, gid = np.unique(key, return_inverse=True)
    return [np.bincount(gid, weights=w) for w in weights]


CHI2_Q25 = 0.10153104426762156  # lower quartile of a chi-square with one degree of freedom


def _quartile_dispersion(r: np.ndarray, P: np.ndarray, measured: np.ndarray) -> float:
    """A cover's dispersion, from the lower quartile of ``r^2 / P`` over its ``measured`` cells.

    Cells are coarse: a real move can shift a third of them or more, which would inflate a
    median-based estimate; the lower quartile stays put until most cells moved. Cells without a
    measured spread (a numerator of 0 on all their rows: ``r`` is 0 by construction) are left
    out; where they are common (few rows per cell, a mostly-zero metric) they would drag the
    quartile to 0 and make every segment look significant.
    """
    ok = (P > 0) & measured
    if ok.sum() < 4:
        return 1.0
    return max(float(np.quantile(r[ok] ** 2 / P[ok], 0.25)) / CHI2_Q25, 1e-12)


# --- one segment's exact numbers, by a query anyone can re-run ---

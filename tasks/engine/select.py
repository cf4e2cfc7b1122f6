"""Whole explanations weighed against each other: the story with the lowest penalized misfit.

A story is a set of segments, each moved by a factor of its own (leaves of several by the
product of their factors, fitted jointly), each with a spread of its leaves around that factor,
and optionally an even shift of everything the segments leave. Its score is the leaves' negative
log-likelihood under that fit plus a price per parameter: ``z_S^2`` for a segment (the Bonferroni
bound it must clear, widened for a heavy noise tail; the risk-inflation criterion) and again for
its spread; the even shift is the whole population, priced as any segment. Every member must
also be significant by its own total given the rest of the story.

Stories start from the forward search's picks (with and without the even shift), from the even
shift alone and from nothing, and improve by single moves (add, drop, replace by a parent or a
child) while the score falls; the lowest score wins. ``docs/method.md`` states the criterion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.search import Groups, Pick, Search, ancestors, descendants, segment_leaves

FIT_ROUNDS = 8
POOL = 400
PAIRS = 6
MAX_MOVES = 40


@dataclass
class Fit:
    """A story's fit: the leaves' expected values, the segments' factors and the score."""

    segs: tuple[int, ...]
    even: bool
    fitted: np.ndarray
    factors: list[float]
    even_factor: float
    misfit: float
    score: float


class Stories:
    """Fits and scores stories over one cube's leaves."""

    def __init__(
        self,
        cube: Cube,
        groups: Groups,
        found: Search,
        eligible: np.ndarray,
    ) -> None:
        self.cube, self.groups, self.found = cube, groups, found
        lv = found.leaves
        self.f0, self.v = lv.f, lv.v
        # each leaf's noise variance when nothing changed (``w``), and the part of it that is
        # the expectation's own noise (``wb``, the baseline's): at factor ``k`` the leaf's
        # variance is ``w + (k^2 - 1) wb`` (the expectation is scaled with its noise)
        self.w = np.maximum(lv.phi * lv.P, 1e-300)
        self.wb = lv.phi * lv.Pb if lv.Pb is not None else np.zeros_like(self.w)
        crit = found.seg_crit if found.seg_crit is not None else np.full(len(eligible), 1.0)
        self.price = np.asarray(crit, dtype=np.float64) ** 2
        self.eligible = eligible
        # the segments a move may add: the strongest at the start, whether or not beyond their
        # bound alone (two movers that offset each other each look small alone)
        z = np.abs(found.z)
        pool = np.flatnonzero(eligible)
        pool = pool[pool != 0]
        self.pool = pool[np.argsort(-z[pool], kind="stable")][:POOL]
        self.depth = cube.seg_mask.sum(axis=1)
        self._members: dict[int, np.ndarray] = {}
        self._related: dict[int, np.ndarray] = {}
        self._fits: dict[tuple[tuple[int, ...], bool], Fit] = {}
        self._weakest: dict[tuple[tuple[int, ...], bool], int | None] = {}

    def related(self, seg: int) -> np.ndarray:
        """Segment ``seg``, its ancestors and its descendants (cached)."""
        got = self._related.get(seg)
        if got is None:
            got = descendants(self.cube, seg) | ancestors(self.cube, seg)
            self._related[seg] = got
        return got

    def members(self, seg: int) -> np.ndarray:
        got = self._members.get(seg)
        if got is None:
            got = segment_leaves(self.groups, seg)
            self._members[seg] = got
        return got

    def fit(self, segs: tuple[int, ...], even: bool) -> Fit:
        """Fit and score a story (cached by its segments and even shift)."""
        key = (tuple(sorted(segs)), even)
        got = self._fits.get(key)
        if got is not None:
            return got
        segs = key[0]
        f0, v, w, wb = self.f0, self.v, self.w, self.wb
        idxs = [self.members(s) for s in segs]
        factors, pre = _factors(f0, v, idxs)
        m = np.ones_like(f0)
        covered = np.zeros(len(f0), dtype=bool)
        new = np.zeros(len(f0), dtype=bool)  # leaves of a segment that had nothing before
        for idx, k in zip(idxs, factors, strict=True):
            covered[idx] = True
            if np.isfinite(k):
                m[idx] *= k
            else:
                new[idx] = True
        fitted = f0 * m
        fitted[new] = v[new]
        rest = ~covered
        F = float(fitted[rest].sum())
        g = float(v[rest].sum()) / F if even and F > 0 else 1.0
        fitted[rest] *= g
        # the leaves' variance at their factor (the expectation scaled with its own noise)
        plain = w.copy()
        for idx, k in zip(idxs, factors, strict=True):
            if np.isfinite(k):
                plain[idx] = np.maximum(w[idx] + (k * k - 1) * wb[idx], 1e-300)
        plain[rest] = np.maximum(w[rest] + (g * g - 1) * wb[rest], 1e-300)
        var = plain.copy()  # plain: the variance of the fit alone; what spreads add pays a log
        price = float(self.price[list(segs)].sum())
        for j, idx in enumerate(idxs):
            if np.isfinite(factors[j]):
                move = (factors[j] - 1.0) * pre[j]  # the segment's move, leaf by leaf
                t2 = _spread(fitted[idx], v[idx], plain[idx], float(self.price[segs[j]]), move)
                var[idx] += t2 * move**2
                price += float(self.price[segs[j]]) if t2 > 0 else 0.0  # a spread's price
        misfit = float(((v - fitted) ** 2 / var).sum() + np.log(var / plain).sum())
        if even:
            # the even shift is the whole population, one of the segments searched, priced
            # as any of them
            price += float(self.price[0])
        out = Fit(segs, even, fitted, factors, g, misfit, misfit + price)
        self._fits[key] = out
        return out

    def given_others(self, fit: Fit, s: int) -> tuple[float, float, float]:
        """Member ``s`` of a story (``0`` for its even shift) tested given the rest of the story:
        its expected sum without it, its observed sum, and its move in noise units."""
        if s == 0:
            idx = np.ones(len(self.v), dtype=bool)
            for x in fit.segs:
                idx[self.members(x)] = False
            without = self.fit(fit.segs, False)
        else:
            idx = self.members(s)
            without = self.fit(tuple(x for x in fit.segs if x != s), fit.even)
        expected = float(without.fitted[idx].sum())
        observed = float(self.v[idx].sum())
        z = float(sig.segment_z(observed - expected, float(self.w[idx].sum())))
        return expected, observed, z

    def weakest(self, fit: Fit) -> int | None:
        """The member of a story (``0`` for its even shift) whose move given the others is
        furthest inside its bound, or None when every member clears it: a segment in a story
        must be significant by its own total given the rest of the story (the test the report
        gives it), whatever misfit its leaves remove."""
        key = (fit.segs, fit.even)
        if key in self._weakest:
            return self._weakest[key]
        worst, out = 1.0, None
        for s in fit.segs + ((0,) if fit.even else ()):
            ratio = abs(self.given_others(fit, s)[2]) / float(self.price[s]) ** 0.5
            if ratio < worst:
                worst, out = ratio, s
        self._weakest[key] = out
        return out

    def add_gains(self, fit: Fit, ids: np.ndarray) -> np.ndarray:
        """For segments ``ids``: the misfit removed by moving each one's leaves by its own
        factor on top of ``fit``, without a spread of its own: with ``k`` its factor and ``a``,
        ``b`` the fit's squared and fit-times-observed sums in noise units over its leaves,
        ``2 (k - 1) b - (k^2 - 1) a`` (``-inf`` for a segment with nothing expected)."""
        v, fitted, w = self.v, fit.fitted, self.w
        out = np.full(len(ids), -np.inf)
        for j, s in enumerate(ids):
            idx = self.members(int(s))
            fi, vi, wi = fitted[idx], v[idx], w[idx]
            F = float(fi.sum())
            if F <= 0:
                continue
            k = float(vi.sum()) / F
            a = float((fi * fi / wi).sum())
            b = float((vi * fi / wi).sum())
            out[j] = 2 * (k - 1) * b - (k * k - 1) * a
        return out


SPREAD_GRID = np.concatenate([[0.0], np.logspace(-4, 2, 13)])


def _factors(
    f0: np.ndarray, v: np.ndarray, idxs: list[np.ndarray]
) -> tuple[list[float], list[np.ndarray]]:
    """Each segment's factor (its fitted sum is its observed sum: the maximum-likelihood factor
    of counts), jointly by coordinate descent where segments overlap (a leaf of several moves
    by the product of their factors); ``inf`` for a segment that had nothing before. Also each
    segment's leaves as expected before its own factor."""
    factors = [1.0] * len(idxs)
    pre = [f0[idx] for idx in idxs]
    if not idxs:
        return factors, pre
    count = np.bincount(np.concatenate(idxs), minlength=len(f0))
    shared = [np.flatnonzero(count[idx] > 1) for idx in idxs]  # positions within each segment
    overlap = any(s.size for s in shared)
    inside = [np.zeros(len(f0), dtype=bool) for _ in idxs] if overlap else []
    for flags, idx in zip(inside, idxs if overlap else [], strict=True):
        flags[idx] = True
    for _ in range(FIT_ROUNDS if overlap else 1):
        for j, idx in enumerate(idxs):
            fi = f0[idx]
            if shared[j].size:
                others = np.ones(shared[j].size)
                leaves = idx[shared[j]]
                for i, flags in enumerate(inside):
                    if i != j and np.isfinite(factors[i]):
                        others[flags[leaves]] *= factors[i]
                fi = fi.copy()
                fi[shared[j]] *= others
            F = float(fi.sum())
            factors[j] = float(v[idx].sum()) / F if F > 0 else np.inf
            pre[j] = fi
    return factors, pre


def _spread(
    fitted: np.ndarray, v: np.ndarray, var: np.ndarray, price: float, move: np.ndarray
) -> float:
    """The most likely spread ``t2`` of a segment's leaves around their fit: ``v`` is normal
    about ``fitted`` with variance ``var + t2 move^2`` (the leaves moved by the segment's factor
    give or take a share of that move), over a grid of spreads, each paying the log of the
    variance it adds and ``price`` if not zero.

    A segment's leaves rarely all move by one factor; without a spread of its own, every slice
    of a cause whose leaves moved unevenly would pass for one more cause. Proportional to the
    move, the spread cannot make a cause of a segment whose total did not move."""
    if v.size == 0:
        return 0.0
    grid = var[None, :] + SPREAD_GRID[:, None] * (move * move)[None, :]
    cost = ((v - fitted)[None, :] ** 2 / grid).sum(axis=1) + np.log(grid / var[None, :]).sum(axis=1)
    cost[1:] += price  # SPREAD_GRID[0] is no spread
    return float(SPREAD_GRID[int(np.argmin(cost))])


def choose(cube: Cube, found: Search, eligible: np.ndarray) -> Search:
    """The story of lowest score (see the module), as the search's picks."""
    assert found.groups is not None
    st = Stories(cube, found.groups, found, eligible)
    picked = tuple(p.seg for p in found.picks if p.seg != 0)
    starts = {(picked, True), (picked, False), ((), True), ((), False)}
    best: Fit | None = None
    for segs, even in sorted(starts):
        got = _admissible(st, _improve(st, st.fit(segs, even)))
        if best is None or got.score < best.score - 1e-9 or (
            abs(got.score - best.score) <= 1e-9 and _simpler(got, best)
        ):
            best = got
    assert best is not None
    return _as_search(st, found, best)


def _simpler(a: Fit, b: Fit) -> bool:
    return (len(a.segs) + a.even, a.even) < (len(b.segs) + b.even, b.even)


def _improve(st: Stories, cur: Fit) -> Fit:
    """Single moves while the score falls: the best of adding a segment, dropping one, and
    replacing one by its parent or a child. The even shift stays as the story started: stories
    with it and without it are improved apart and compared at the end."""
    for _ in range(MAX_MOVES):
        options: list[Fit] = []
        taken = np.zeros(len(st.eligible), dtype=bool)
        for s in cur.segs:
            taken |= st.related(s)
        ids = st.pool[~taken[st.pool]]
        gains = st.add_gains(cur, ids)
        # the strongest few by gain, fitted in full (overlaps and the even shift refit)
        for j in np.argsort(-gains)[:3]:
            if np.isfinite(gains[j]) and gains[j] > st.price[ids[j]]:
                options.append(st.fit((*cur.segs, int(ids[j])), cur.even))
        for j, s in enumerate(cur.segs):
            rest = cur.segs[:j] + cur.segs[j + 1 :]
            options.append(st.fit(rest, cur.even))
            for r in _neighbours(st, s, cur):
                options.append(st.fit((*rest, r), cur.even))
        better = [o for o in options if o.score < cur.score - 1e-9 and st.weakest(o) is None]
        if not better:
            # two at once: movers that offset each other each remove little alone
            # the strongest by leaf misfit and by total move, none inside or above another
            top = _diverse(st, ids[np.argsort(-gains)], PAIRS // 2)
            top += [c for c in _diverse(st, ids, PAIRS) if c not in top][: PAIRS - len(top)]
            pairs = [
                st.fit((*cur.segs, a, b), cur.even) for i, a in enumerate(top) for b in top[i + 1 :]
            ]
            better = [o for o in pairs if o.score < cur.score - 1e-9 and st.weakest(o) is None]
        if not better:
            break
        cur = min(better, key=lambda o: (o.score, len(o.segs) + o.even))
    return cur


def _diverse(st: Stories, ordered: np.ndarray, n: int) -> list[int]:
    """The first ``n`` of ``ordered`` with none inside or above another."""
    out: list[int] = []
    for c in ordered:
        if len(out) == n:
            break
        if not any(st.related(t)[c] for t in out):
            out.append(int(c))
    return out


def _admissible(st: Stories, cur: Fit) -> Fit:
    """Drop the weakest member while some member is not significant given the others, and
    improve again."""
    for _ in range(MAX_MOVES):
        weak = st.weakest(cur)
        if weak is None:
            return cur
        if weak == 0:
            cur = st.fit(cur.segs, False)
        else:
            cur = st.fit(tuple(x for x in cur.segs if x != weak), cur.even)
        cur = _improve(st, cur)
    return cur


def _neighbours(st: Stories, s: int, cur: Fit) -> list[int]:
    """Segment ``s``'s parents (one column fewer) and its best children (one column more)."""
    cube = st.cube
    d = st.depth[s]
    out: list[int] = []
    if d > 1:
        par = np.flatnonzero(ancestors(cube, s) & (st.depth == d - 1) & st.eligible)
        out += [int(p) for p in par]
    kids = np.flatnonzero(descendants(cube, s) & (st.depth == d + 1) & st.eligible)
    if kids.size:
        others = tuple(x for x in cur.segs if x != s)
        base = st.fit(others, cur.even)
        g = st.add_gains(base, kids)
        out += [int(k) for k in kids[np.argsort(-g)[:3]]]
    return [x for x in out if x not in cur.segs]


def _as_search(st: Stories, found: Search, best: Fit) -> Search:
    """The chosen story as a search result: its picks (each with its test given the others),
    the fitted segment sums and what the story leaves unexplained."""
    groups, cube = st.groups, st.cube
    n = len(cube.seg_mask)
    VS = groups.sums(st.v, n)
    PS = groups.sums(st.w, n)
    tests = {s: st.given_others(best, s) for s in best.segs + ((0,) if best.even else ())}
    picks = []
    for s in sorted(best.segs, key=lambda x: -abs(tests[x][1] - tests[x][0])) + (
        [0] if best.even else []
    ):
        expected, observed, z = tests[s]
        without = st.fit(best.segs, False) if s == 0 else st.fit(
            tuple(x for x in best.segs if x != s), best.even
        )
        picks.append(
            Pick(
                seg=int(s),
                z=z,
                p_value=float(sig.two_sided_p(z)),
                gain=without.score - best.score,
                factor=best.even_factor if s == 0 else float(best.factors[best.segs.index(s)]),
                expected=expected,
                observed=observed,
            )
        )
    FS = groups.sums(best.fitted, n)
    found.picks = picks
    found.remainder = float(st.v.sum() - best.fitted.sum())
    found.fit = (VS, FS, PS)
    return found

"""A pick refuted by its parts: the story told by the parts that moved unlike the rest of it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.search.climb import CLIMB_SHARE
from tasks.engine.search.fit import refit, scatter_share
from tasks.engine.search.forward import search
from tasks.engine.search.groups import descendants, segment_leaves
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import SearchOptions, Telling
from tasks.engine.search.picks import Search
from tasks.engine.search.stories.family import family_p
from tasks.engine.search.stories.story import Story

# a pick is told by its parts only when the rest they leave flat holds at least this share of
# the pick's expected value: parts that leave a sliver flat are the pick told in pieces, where
# the leaves' noise reads the last few units of a move as exact
PARTS_REST_SHARE = 0.1


def parts_told(story: Story) -> Story:
    """The story with each pick its parts refute told by them (:func:`told_by_parts`)."""
    found = told_by_parts(story.cube, story.leaves, story.found, story.options)
    return replace(story, found=found)


def told_by_parts(cube: Cube, leaves: Leaves, found: Search, options: SearchOptions) -> Search:
    """The story told by a pick's parts, when they refute it: a segment named as a cause claims
    that all its parts moved by its factor, as an even shift claims it of every column.

    For a pick that is not the even shift, its parts are the segments one column deeper (every
    column it does not constrain splits it). A part that moved beyond the noise, in the pick's
    direction, is tested against the rest of the pick (did the two move by one factor, each
    side's leaves scattering around its factor as much as they are seen to), and those tests
    are corrected over the pick's parts; the clearest part that refutes the pick is named and
    fitted, and the next is sought given it. Two overlapping causes, each a part of their
    shared parent, are found this way, one after the other.

    The named parts, each at its own factor, and the rest of the pick flat, replace the pick
    when the rest (what neither they nor another pick hold):

    - holds a tenth of the pick or more (:data:`PARTS_REST_SHARE`);
    - did not move with them (the test by which the search moves a pick up to its parent,
      :func:`climb_up`), and moved unlike them beyond the bound among the parts;

    and when they fit the pieces they cut the pick into better than the pick at one factor, by
    the bound among the parts squared for each part beyond the first (the price of a part).
    They must still clear that bound given the story's other picks. The noise of each piece is
    the observed's own plus the expectation's at its fitted factor, so a rise and the same fall
    asked the other way round are weighed alike. A story with an even shift is left as it is
    (:func:`one_column_told` weighs its columns)."""
    groups = found.groups
    if groups is None or any(p.seg == 0 for p in found.picks):
        return found
    alpha = options.alpha
    n_seg = len(cube.seg_mask)
    depth = cube.seg_mask.sum(axis=1)
    VS = groups.sums(leaves.v, n_seg)
    eligible = options.eligible
    for _ in range(2 * len(found.picks) + 1):
        told = None
        segs = [p.seg for p in found.picks]
        for s in segs:
            told = _told_by_parts(cube, leaves, found, s, options, VS, depth, alpha, eligible)
            if told is not None:
                break
        if told is None:
            return found
        found = told
    return found


def _told_by_parts(
    cube: Cube,
    leaves: Leaves,
    found: Search,
    s: int,
    options: SearchOptions,
    VS: np.ndarray,
    depth: np.ndarray,
    alpha: float,
    eligible: np.ndarray,
) -> Search | None:
    """The story with pick ``s`` told by its parts (:func:`told_by_parts`), or None."""
    groups = found.groups
    assert groups is not None
    n_seg, v, f0 = len(cube.seg_mask), leaves.v, leaves.f
    if depth[s] >= depth.max():
        return None
    others = [segment_leaves(groups, o) for o in (p.seg for p in found.picks) if o != s]
    mine = segment_leaves(groups, s)
    # the other picks at their factors fitted jointly with this one, which is taken out again:
    # fitted without it, a pick overlapping it would take its move in their overlap
    k_s: list[float] = []
    base = refit(f0, v, [mine, *others], factors=k_s)
    if k_s[0] > 0:
        base[mine[f0[mine] > 0]] /= k_s[0]
    base[mine[f0[mine] <= 0]] = f0[mine[f0[mine] <= 0]]
    # the noise of ``v - k f``: the observed's own, and the expectation's scaled with it, so
    # the same data asked the other way round is weighed alike
    w = leaves.phi * leaves.P
    wb = leaves.phi * leaves.Pb if leaves.Pb is not None else np.zeros_like(w)
    w_own, w_exp = w - wb, wb / (1.0 + leaves.g) ** 2

    def noise(fit: np.ndarray) -> np.ndarray:
        scale = np.divide(fit, f0, out=np.ones_like(fit), where=f0 > 0)
        return w_own + w_exp * scale**2

    parts = descendants(cube, s) & (depth == depth[s] + 1) & eligible
    direction = np.sign(VS[s] - groups.sums(base, n_seg)[s])
    named: list[int] = []
    p_named: dict[int, float] = {}
    columns = [
        np.flatnonzero(parts & cube.seg_mask[:, j]) for j in np.flatnonzero(~cube.seg_mask[s])
    ]
    columns = [c for c in columns if c.size >= 2]
    n_parts = float(sum(c.size for c in columns))
    if not columns:
        return None
    bound = sig.bonferroni_z(n_parts, alpha)
    crit = found.bounds * bound / found.z_crit
    while True:
        f = refit(base, v, [segment_leaves(groups, x) for x in named]) if named else base
        FS = groups.sums(f, n_seg)
        w_f = noise(f)
        W_own, W_exp = groups.sums(w_own, n_seg), groups.sums(w_f - w_own, n_seg)
        v_mine, f_mine, base_mine, w_mine = v[mine], f[mine], base[mine], w_f[mine]
        best, best_p = -1, 1.0
        for c in columns:
            if np.isin(c, named).sum() + 1 >= c.size:
                continue  # every value would be named: the pick itself
            for x in c[~np.isin(c, named) & (FS[c] > 0) & (FS[s] - FS[c] > 0)]:
                z = (VS[x] - FS[x]) / math.sqrt(max(W_own[x] + W_exp[x], 1e-300))
                if z * direction < crit[x]:
                    continue  # it did not move beyond the noise, in the pick's direction
                # the part against the rest of the pick: one test among the pick's parts, each
                # side's leaves scattering around its own factor as much as they are seen to
                # (a cause rarely moves every leaf by one factor, :func:`with_spread`)
                in_x = np.isin(mine, segment_leaves(groups, x))
                spread = _scatter(v_mine, f_mine, base_mine, w_mine, in_x)
                p_x = sig.unlike_values_p(
                    [VS[x], VS[s] - VS[x]],
                    [FS[x], FS[s] - FS[x]],
                    [W_own[x] + spread[0], W_own[s] - W_own[x] + spread[1]],
                    [W_exp[x], W_exp[s] - W_exp[x]],
                )
                # a side of few leaves is judged against the leaves' noise tail, as a segment is
                if p_x < best_p and _beyond(p_x, bound, leaves.tail, w_mine, in_x):
                    best, best_p = int(x), p_x
        if best < 0:
            break
        named.append(best)
        p_named[best] = sig.adjusted(best_p, n_parts)
    if not named:
        return None
    # the rest of the pick (what neither its named parts nor another pick holds) must have moved
    # unlike them, beyond the bound among the parts: a rest that moved with them, or too small
    # to tell, leaves the pick the cause
    inside = np.zeros(len(v), dtype=bool)
    for x in named:
        inside[segment_leaves(groups, x)] = True
    rest = np.zeros(len(v), dtype=bool)
    rest[mine] = True
    rest &= ~inside
    for m in others:
        rest[m] = False
    sides = np.flatnonzero(inside | rest)
    if not rest.any() or base[rest].sum() <= 0 or base[inside].sum() <= 0:
        return None
    # (a rest that moved with the parts is the test by which the search moves a pick up to its
    # parent, :func:`climb_up`; a rest gone to nothing moved as far as it could)
    fi, vi, fr, vr = (float(x[m].sum()) for m in (inside, rest) for x in (base, v))
    w_base = noise(base)
    if fr < PARTS_REST_SHARE * float(base[mine].sum()):
        return None  # a story whose flat rest is a sliver of the pick tells the pick in pieces
    if vi != fi:
        z_rest = (vr - fr) / math.sqrt(max(float(w_base[rest].sum()), 1e-300))
        # the rest's move as a share of the parts', on the log scale or, for parts that went to
        # nothing (no log factor), on the plain one
        share = (vr / fr - 1.0) / (vi / fi - 1.0)
        if vi > 0 and vr > 0:
            share = max(share, math.log(vr / fr) / math.log(vi / fi))
        if z_rest * np.sign(vi - fi) >= sig.one_sided_z(alpha) and share >= CLIMB_SHARE:
            return None
    spread = _scatter(v[sides], base[sides], base[sides], w_base[sides], inside[sides])
    p_rest = sig.unlike_values_p(
        [vi, vr],
        [fi, fr],
        [w_own[inside].sum() + spread[0], w_own[rest].sum() + spread[1]],
        [w_exp[inside].sum(), w_exp[rest].sum()],
    )
    if not _beyond(p_rest, bound, leaves.tail, w_base[sides], inside[sides]):
        return None
    # the pick against its parts, over the pieces they cut it into (which parts hold a row):
    # the misfit of the pick at one factor, less that of the parts each at its own and the rest
    # flat, must pay the bound among the parts, squared, for each part beyond the first
    holds = np.zeros((len(v), len(named)), dtype=bool)
    for j, x in enumerate(named):
        holds[segment_leaves(groups, x), j] = True
    piece = np.unique(holds[mine], axis=0, return_inverse=True)[1].ravel()
    whole = base.copy()
    if base[mine].sum() > 0:
        whole[mine] *= v[mine].sum() / base[mine].sum()

    def misfit(fit: np.ndarray) -> float:
        R = np.bincount(piece, weights=(v - fit)[mine])
        P = np.bincount(piece, weights=noise(fit)[mine])
        return float((R**2 / np.maximum(P, 1e-300)).sum())

    parted = refit(base, v, [segment_leaves(groups, x) for x in named])
    gained = misfit(whole) - misfit(parted)
    if gained <= (len(named) - 1) * sig.bonferroni_z(n_parts, alpha) ** 2:
        return None
    crit = np.where(np.isin(np.arange(n_seg), named), crit, found.bounds)
    p_adjusted = family_p(found, p_named, n_parts, alpha)
    only = np.zeros(n_seg, dtype=bool)
    only[named] = True
    only[[p.seg for p in found.picks if p.seg != s]] = True
    telling = Telling(climb=False, only=only, crit=crit, p_adjusted=p_adjusted)
    told = search(cube, leaves, options, telling, groups=groups)
    if not set(named) <= {p.seg for p in told.picks}:
        return None  # a part does not clear its bound given the others
    return told


def _beyond(p: float, bound: float, tail: float, w: np.ndarray, inside: np.ndarray) -> bool:
    """Whether two sides' test (two-sided ``p``) clears ``bound``, widened for the leaves' noise
    tail by the side of fewer leaves (by noise weight), as :func:`significance.segment_bound`
    widens a segment's."""
    m_eff = min(
        float(x.sum()) ** 2 / max(float((x**2).sum()), 1e-300) for x in (w[inside], w[~inside])
    )
    return sig.z_of_adjusted(p, 1.0) >= float(sig.segment_bound(bound, tail, m_eff))


def _scatter(
    v: np.ndarray, f: np.ndarray, base: np.ndarray, w: np.ndarray, inside: np.ndarray
) -> tuple[float, float]:
    """The variance a pick's leaves add to the totals of its two sides (``inside`` and the
    rest) by scattering around each side's own factor: the scatter beyond the noise, as a share
    of the leaves' squared moves (:func:`scatter_share`, as :func:`with_spread` measures a
    pick's), times each side's squared moves."""
    fit = f.copy()
    for side in (inside, ~inside):
        if f[side].sum() > 0:
            fit[side] *= v[side].sum() / f[side].sum()
    move2 = (fit - base) ** 2
    t2 = scatter_share(v, fit, w, move2)
    return t2 * float(move2[inside].sum()), t2 * float(move2[~inside].sum())

"""The forward search: greedy ripple-fit selection over significant segments.

Each step takes the candidate whose ripple fit (every leaf of the segment moved by its own
factor) removes the most leaf error (:func:`~tasks.engine.search.gains.ripple_gain`), climbs it
to its parent when the parent's rest moved with it (:func:`~tasks.engine.search.climb.climb_up`),
fits every pick's factor together (:func:`~tasks.engine.search.fit.refit`) and repeats, until no
segment is significant given the picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.search.climb import climb_up
from tasks.engine.search.fit import conditional_variance, moves_alike, refit, with_spread
from tasks.engine.search.gains import leaf_gain, ripple_gain
from tasks.engine.search.groups import Groups, descendants, segment_leaves
from tasks.engine.search.leaves import Leaves
from tasks.engine.search.options import FORWARD, SearchOptions, Telling
from tasks.engine.search.picks import Pick, Search


@dataclass(eq=False)
class _Forward:
    """The search's state between steps: every segment's sums, the picks so far and what they
    explain."""

    cube: Cube
    leaves: Leaves
    options: SearchOptions
    telling: Telling
    groups: Groups
    n_seg: int
    n_tested: int
    f: np.ndarray  # each leaf's expectation under the picks so far
    v: np.ndarray
    s: np.ndarray  # each leaf's noise (standard deviation)
    w: np.ndarray  # each leaf's noise variance
    PS: np.ndarray
    VS: np.ndarray
    FS: np.ndarray
    z_crit: float
    seg_crit: np.ndarray
    n_leaves_of: np.ndarray
    z0: np.ndarray
    p0: np.ndarray
    resid0: np.ndarray
    R_total: float
    picks: list[Pick] = field(default_factory=list)
    explained: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    margins: list[np.ndarray] = field(default_factory=list)  # the picks' leaves
    taken: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def search(
    cube: Cube,
    leaves: Leaves,
    options: SearchOptions,
    telling: Telling = FORWARD,
    groups: Groups | None = None,
) -> Search:
    """Greedy ripple-fit selection over significant segments, as ``telling`` limits it.

    ``groups`` reuses the segments' leaves built by an earlier search of the same cube."""
    st = _start(cube, leaves, options, telling, groups)
    for _ in range(options.max_causes):
        R = st.VS - st.FS
        z = R / np.sqrt(np.maximum(st.PS, 1e-300))
        cand, z_new = _candidates(st, R, z)
        if not cand.any():
            break
        gain = _gains(st, cand)
        best = _best(st, cand, gain, z_new)
        if best is None:
            break
        picked_gain = float(gain[best])
        # the evidence that admitted the pick: a parent the climb moves up to spreads its
        # piece's move over parts that moved less, and keeps the piece's evidence
        admitted = float(z_new[best]) ** 2
        if telling.climb:
            best = climb_up(
                cube, best, st.VS, st.FS, st.PS, options.eligible & ~st.taken, options.alpha
            )
        _take(st, best, z, z_new, picked_gain, admitted)
    return _found(st)


def _start(
    cube: Cube,
    leaves: Leaves,
    options: SearchOptions,
    telling: Telling,
    groups: Groups | None,
) -> _Forward:
    """Every segment's sums and bound before any pick, and its evidence against "nothing
    changed"."""
    groups = groups if groups is not None else Groups(cube)
    n_seg = len(cube.seg_mask)
    n_tested = max(int(options.eligible.sum()), 1)
    f = leaves.f.copy()
    v = leaves.v
    s = np.sqrt(leaves.phi * leaves.P)
    w = leaves.P * leaves.phi
    PS = groups.sums(w, n_seg)
    z_crit = sig.bonferroni_z(n_tested, options.alpha)
    # a heavy leaf tail widens the bound of segments made of few leaves (by noise weight); a
    # sum of m leaves has 1/m of their excess tail
    m_eff = PS**2 / np.maximum(groups.sums(w**2, n_seg), 1e-300)
    seg_crit = sig.segment_bound(z_crit, leaves.tail, m_eff)
    n_leaves_of = groups.sums(np.ones(len(f)), n_seg)
    VS = groups.sums(v, n_seg)
    FS = groups.sums(f, n_seg)
    R = VS - FS
    z = R / np.sqrt(np.maximum(PS, 1e-300))
    return _Forward(
        cube=cube,
        leaves=leaves,
        options=options,
        telling=telling,
        groups=groups,
        n_seg=n_seg,
        n_tested=n_tested,
        f=f,
        v=v,
        s=s,
        w=w,
        PS=PS,
        VS=VS,
        FS=FS,
        z_crit=z_crit,
        seg_crit=seg_crit,
        n_leaves_of=n_leaves_of,
        z0=z.copy(),
        p0=sig.two_sided_p(z.copy()),
        resid0=R.copy(),
        R_total=abs(float(R[0])),
        explained=np.zeros(len(f), dtype=bool),
        taken=np.zeros(n_seg, dtype=bool),
    )


def _candidates(st: _Forward, R: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The segments that may be picked next, and their evidence beyond the picks so far."""
    telling, eligible = st.telling, st.options.eligible
    threshold = st.seg_crit if telling.crit is None else telling.crit
    cand = (
        eligible
        & ~st.taken
        & (np.abs(z) >= threshold)
        & (np.abs(R) >= st.options.min_effect * st.R_total)
    )
    cand[0] &= telling.allow_even
    if telling.only is not None:
        cand &= telling.only  # a story's own segments, weighed again in the forward order
    if telling.even_first and not st.picks and cand[0]:
        cand[1:] = False  # the story that starts from an even move of everything
    z_new = z  # the evidence beyond the causes so far
    if st.margins:
        # the evidence beyond the picks so far: the residual under their joint fit, over
        # the noise it keeps once their factors are fitted, their leaves' scatter counted
        w_fit = with_spread(st.leaves.f, st.v, st.f, st.w, st.margins)
        PS_fit = st.groups.sums(w_fit, st.n_seg)
        z_new = R / np.sqrt(conditional_variance(st.groups, w_fit, PS_fit, st.margins, st.n_seg))
        cand &= np.abs(z_new) >= threshold
        if st.explained.any():
            # and its rows outside the picks moved as its rows inside them did: a cause's
            # leaves rarely all move by one factor, and a segment cutting across it must
            # not pass on that scatter (what the joint fit cannot tell from a cause of its
            # own)
            cand &= moves_alike(
                st.groups, st.v, st.f, st.w, w_fit, st.explained, R, st.FS, threshold
            )
    return cand, z_new


def _gains(st: _Forward, cand: np.ndarray) -> np.ndarray:
    """Per candidate, the leaf error its ripple fit removes (``-inf`` elsewhere)."""
    f, v = st.f, st.v
    units = st.s if st.options.gain_units == "noise" else np.ones_like(st.s)
    gain = ripple_gain(st.groups, f, v, units, st.FS, st.VS, cand)
    rest = ~st.explained
    if cand[0] and st.explained.any() and f[rest].sum() > 0:
        # the even move is the move of what the causes so far left unexplained: rescaling
        # leaves a cause already fits would only add error, and the global candidate could
        # never compete with the largest piece of an even drift
        k = v[rest].sum() / f[rest].sum()
        gain[0] = float((leaf_gain(f, v, np.full(len(f), k)) / units)[rest].sum())
    return gain


def _best(st: _Forward, cand: np.ndarray, gain: np.ndarray, z_new: np.ndarray) -> int | None:
    """The candidate picked next, or None to stop."""
    best = int(np.argmax(gain))
    if not np.isfinite(gain[best]) or gain[best] <= 0:
        if st.picks:
            return None
        # nothing picked yet and no candidate's ripple fit lowers the leaves' error (a move
        # spread thinly over many small leaves): the evidence decides, the clearest first
        best = int(np.argmax(np.where(cand, np.abs(z_new), -np.inf)))
    return best


def _take(
    st: _Forward,
    best: int,
    z: np.ndarray,
    z_new: np.ndarray,
    picked_gain: float,
    admitted: float,
) -> None:
    """Fit segment ``best`` at its factor, refit every pick's together, and record the pick."""
    f, v, groups, n_seg = st.f, st.v, st.groups, st.n_seg
    factor = st.VS[best] / st.FS[best] if st.FS[best] > 0 else np.inf
    members = segment_leaves(groups, best)
    if best == 0 and st.explained.any():
        members = np.flatnonzero(~st.explained)
        factor = v[members].sum() / f[members].sum() if f[members].sum() > 0 else np.inf
    elif best != 0:
        st.explained[members] = True
    before = f[members]
    f[members] = v[members] if not np.isfinite(factor) else before * factor
    # only the pick's leaves changed: update every segment's expectation by their change
    change = np.zeros_like(f)
    change[members] = f[members] - before
    st.FS = st.FS + groups.sums(change, n_seg, where=members)
    st.margins.append(members)
    if len(st.margins) > 1:
        f = st.f = refit(st.leaves.f, v, st.margins)
        st.FS = groups.sums(f, n_seg)
    st.taken[best] = True
    # a pick's sub-segments are explained at its factor; they are not separate causes
    st.taken |= descendants(st.cube, best)
    if best != 0:
        # so is every segment all of whose leaves are the pick's, named by other columns
        # (``device = desktop & country = US`` inside ``platform = web & device = desktop``
        # when every desktop is web)
        inside = np.zeros(len(f))
        inside[members] = 1.0
        st.taken |= (groups.sums(inside, n_seg) >= st.n_leaves_of) & (st.n_leaves_of > 0)
    p_adjusted = st.telling.p_adjusted
    st.picks.append(
        Pick(
            seg=best,
            z=float(z[best]),
            p_value=float(sig.two_sided_p(z[best])),
            gain=picked_gain,
            deviance=max(float(z_new[best]) ** 2, admitted),
            factor=float(factor),
            expected=float(st.FS[best] - (f[members].sum() - before.sum())),
            observed=float(st.VS[best]),
            p_adjusted=(
                float(p_adjusted[best])
                if p_adjusted is not None and np.isfinite(p_adjusted[best])
                else None
            ),
        )
    )


def _found(st: _Forward) -> Search:
    remainder = float(st.v.sum() - st.f.sum())
    return Search(
        st.picks,
        st.z0,
        st.p0,
        st.resid0,
        st.leaves,
        st.z_crit,
        st.n_tested,
        st.seg_crit,
        remainder,
        fit=(st.VS, st.FS, st.PS),
        groups=st.groups,
        admitted_at=st.telling.crit,
    )

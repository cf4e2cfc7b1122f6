"""Root-cause search: the smallest set of segments that explains a change beyond the noise.

The model, per leaf ``i`` (one combination of all searched dimensions):

* expected comparison value ``f_i``: the baseline scaled by a *global* factor ``1 + g`` (the move
  that hit everything evenly, a weighted median so a few segments cannot drag it). For ratio
  metrics the leaf keeps its comparison denominator and its own baseline ratio: ``f_i = d_ci *
  r_bi * (1 + g)`` against the observed numerator ``v_i = n_ci`` (the *rate* view).
* noise: quasi-Poisson. ``P_i`` is the compound-Poisson variance of ``v_i - f_i`` from row-level
  sums of squares; a dispersion ``phi`` scales it and is estimated from the leaves themselves
  (the mean of ``r_i^2 / P_i`` per size bin, leaves beyond the noise left out), so
  pre-aggregated and event-level data both get a fitting noise level.

A segment ``S`` is a candidate when its residual ``V_S - F_S`` is significant after a Bonferroni
correction over every segment searched. The step takes the candidate whose *ripple* fit (every
leaf of ``S`` moved by the segment's own factor ``V_S / F_S``) removes the most absolute leaf
error in noise units, read in the direction of the fall so a rise and the same fall weigh alike
(:func:`_leaf_gain`); all picks' factors are then fitted together (:func:`_refit`), and the
search repeats. A parent whose change sits in one child loses to the child (the fit spreads the
change over siblings that did not move); a child that merely follows its parent loses to the
parent (it explains only part); so each cause is reported once, at the most specific level that
carries it. When the ripple fit prefers the largest piece of a segment whose other pieces moved
the same way (beyond the noise, by at least three tenths as much in log factor), the pick moves
up to that segment (:func:`_climb`).

Whether an even move of everything is an even shift or its largest pieces is decided by weighing
both tellings as whole stories (:func:`search_stories`); an even shift taken first stays in its
story only when the rest moved given the segments after it, and when every column's values moved
by its factor (else the values of the column that refutes it tell the story).

A further cause must be significant given the picks so far, their factors fitted together and
their leaves' own scatter around those factors counted as noise (:func:`_conditional_variance`,
:func:`_with_spread`); its rows outside the picks must have moved as its rows inside them did
(:func:`_moves_alike`); and a segment of few leaves is judged by the leaves' own noise tail
(:func:`_tail`). With date periods the dispersion comes from each leaf's day-to-day spread
(:func:`_day_dispersion`), so few cells and many movers neither hide a cause nor pass for an
even shift.

Ratio leaves measure their noise around the typical leaf's move (a weighted median), so a cause
that moved a large part of the data does not pass for noise; additive leaves keep the overall
factor, which measured better on the labelled cases (heavy-tailed sums: a smaller dispersion let
single noisy cells through).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tasks.engine import significance as sig
from tasks.engine.cube import Cube
from tasks.engine.distributions import chi2_isf, norm_isf

CHI2_MEDIAN = 0.454936423119572
MAX_CAUSES = 12
MATRIX_ENTRIES = 20_000_000
"""Most leaf-in-segment entries (leaves x cuboids) the segments-by-leaves matrix holds (about
12 bytes each); beyond it, segment sums are one pass over the leaves per cuboid."""
# a pick moves up to its parent when the parent's other part moved the same way, beyond the
# noise, by at least this share of the pick's own log factor
CLIMB_SHARE = 0.3
# a pick is told by its parts only when the rest they leave flat holds at least this share of
# the pick's expected value: parts that leave a sliver flat are the pick told in pieces, where
# the leaves' noise reads the last few units of a move as exact
PARTS_REST_SHARE = 0.1


@dataclass
class Leaves:
    """The leaf-level model inputs: expected ``f``, observed ``v``, variance units ``P``."""

    f: np.ndarray
    v: np.ndarray
    P: np.ndarray
    g: float
    phi: np.ndarray
    # how much wider the leaves' noise tail is than a normal law's (1: normal)
    tail: float = 1.0
    # the part of ``P`` that is the expectation's own noise (the baseline's, in the
    # comparison's units): a leaf expected at ``k f`` has variance ``P + (k^2 - 1) Pb``
    Pb: np.ndarray | None = None


@dataclass
class Pick:
    """One selected segment and the numbers at the moment it was selected."""

    seg: int
    z: float
    p_value: float
    gain: float
    factor: float
    expected: float
    observed: float
    # the deviance its fit removed: ``z^2`` of its evidence given the earlier picks (for a pick
    # the climb moved up to its parent, at least the evidence of the piece that admitted it)
    deviance: float = 0.0
    # its p-value corrected for multiple testing, when its family is narrower than every segment
    # searched (a column's values, once the column is shown to matter); None: over every segment
    p_adjusted: float | None = None


@dataclass
class Search:
    picks: list[Pick]
    z: np.ndarray
    p: np.ndarray
    residual: np.ndarray
    leaves: Leaves
    z_crit: float
    n_tested: int
    seg_crit: np.ndarray | None = None  # per segment: the |z| it must reach (tails included)
    remainder: float = 0.0
    notes: list[str] = field(default_factory=list)
    # per segment once the picks are fitted: observed, fitted and noise variance
    fit: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # which leaves each segment holds (built by the search; reused by whatever weighs its picks)
    groups: Groups | None = None
    # per segment, the |z| a pick had to reach, where a family narrower than every segment set
    # it (a column's values, once the column is shown to matter); None: the bounds
    admitted_at: np.ndarray | None = None

    @property
    def tests(self) -> float:
        """What the multiple-testing correction counts: the segments searched."""
        return float(self.n_tested)

    @property
    def bounds(self) -> np.ndarray:
        """Per segment, the ``|z|`` it must reach (the Bonferroni bound where no tail widened
        it)."""
        return self.seg_crit if self.seg_crit is not None else np.full(len(self.z), self.z_crit)


def weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    """Median of ``x`` with weights ``w`` (ignores non-finite values and zero weights)."""
    ok = np.isfinite(x) & (w > 0)
    if not ok.any():
        return 0.0
    x, w = x[ok], w[ok]
    order = np.argsort(x, kind="stable")
    cw = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cw, 0.5 * cw[-1])])


def _dispersion(r: np.ndarray, P: np.ndarray, size: np.ndarray | None = None) -> np.ndarray:
    """Per-leaf dispersion: the mean of ``r^2 / P`` within bins of leaf size, leaves beyond the
    noise left out.

    Small and large leaves rarely share one noise law (counts are Poisson-like, big sums move by
    a percentage), so the dispersion is measured per size decile and applied to each leaf.

    Within a bin it is the Pearson estimate (the mean of ``r^2 / P``), which is right whatever
    the shape of a leaf's noise: a median divided by the chi-square median assumes normal leaf
    residuals, and leaves holding one or two events are far from that (a value seen in one
    period only has ``r^2 / P`` of exactly 1, so the median overstated sparse data's noise by
    2.2x). The leaves a cause moved must not count as noise: a leaf whose ``r^2 / P`` exceeds the
    median-based scale times the chi-square bound at ``0.05 / leaves`` (what would be a
    significant single leaf) is left out of the mean. Normal noise loses almost nothing to that
    cut (the mean of a chi-square(1) below its 1 - 1e-6 quantile is 0.9999).
    """
    size = np.abs(size) if size is not None else P
    ok = (P > 0) & (size > 0)
    out = np.ones_like(P)
    if ok.sum() < 3:
        return out
    ratio = np.where(ok, r**2 / np.where(ok, P, 1.0), np.nan)
    cut = float(chi2_isf(0.05 / int(ok.sum()), 1))
    bins, n_bins = _size_bins(size, ok)
    overall = max(_pearson(ratio[ok], cut), 1e-12)
    for k in range(n_bins):
        sel = ok & (bins == k)
        phi = _pearson(ratio[sel], cut) if sel.sum() >= 5 else overall
        # a bin of mostly unchanged leaves must not make the others look infinitely precise
        out[bins == k] = max(phi, 0.1 * overall)
    return out


def _size_bins(size: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int]:
    """Each leaf's bin among up to ten of equal count by size (at least 30 ``ok`` leaves a bin),
    and the number of bins."""
    n_bins = int(min(10, max(1, ok.sum() // 30)))
    edges = np.quantile(size[ok], np.linspace(0, 1, n_bins + 1)[1:-1]) if n_bins > 1 else []
    return np.searchsorted(edges, size, side="right"), n_bins


def _pearson(ratio: np.ndarray, cut: float) -> float:
    """Mean of ``r^2 / P`` over the leaves within the noise (see :func:`_dispersion`)."""
    scale = float(np.median(ratio)) / CHI2_MEDIAN
    keep = ratio <= scale * cut
    return float(np.mean(ratio[keep])) if keep.any() else scale


def _tail(r: np.ndarray, P: np.ndarray, phi: np.ndarray) -> float:
    """How much wider than normal the far tail of the leaves' noise is.

    The 99.9th percentile of the leaves' residuals in noise units over the normal law's (3.29):
    real sums are often heavier-tailed than normal (a single leaf beyond 5 units is then far
    more common than the normal law says), and a single leaf must be judged by its data's own
    tail. Needs enough leaves to see that percentile (5,000); 1 otherwise. The leaves a cause
    moved sit beyond it only when causes hold more than a thousandth of the leaves; those that
    would be significant alone are left out, as for the dispersion.
    """
    ok = P > 0
    n = int(ok.sum())
    if n < 5000:
        return 1.0
    z = np.abs(r[ok]) / np.sqrt(phi[ok] * P[ok])
    z = z[z**2 <= float(chi2_isf(0.05 / n, 1))]
    if z.size < 5000:
        return 1.0
    return max(1.0, float(np.quantile(z, 0.999)) / NORMAL_Q999)


NORMAL_Q999 = float(norm_isf(0.0005))


MIN_DAYS = 3


def _day_variance(
    leaf: dict[str, np.ndarray], days: tuple[float, float], a_b: np.ndarray, a_c: np.ndarray
) -> np.ndarray | None:
    """Per leaf, the variance of ``n - a * d`` summed over a period, from its own days (both
    periods, the baseline's weighted as the model weighs it: ``a_b`` may carry that scale).

    A day without rows counts as a day of zero. None when the leaves carry no daily statistics
    or a period has fewer than :data:`MIN_DAYS` days."""
    if "vnb" not in leaf or min(days) < MIN_DAYS:
        return None
    out = np.zeros_like(leaf["nb"])
    for suffix, a, D in (("b", a_b, days[0]), ("c", a_c, days[1])):
        n, vn = leaf[f"n{suffix}"], leaf[f"vn{suffix}"]
        if f"vd{suffix}" in leaf:
            d = leaf[f"d{suffix}"]
            x, vx = n - a * d, vn - 2 * a * leaf[f"vnd{suffix}"] + a**2 * leaf[f"vd{suffix}"]
        else:
            x, vx = n, vn
        out += np.maximum(D / (D - 1) * (vx - x**2 / D), 0.0)
    return out


def _day_dispersion(
    V: np.ndarray,
    P: np.ndarray,
    leaf: dict[str, np.ndarray],
    size: np.ndarray,
    across: np.ndarray,
) -> np.ndarray:
    """The dispersion measured inside each leaf, from its day-to-day spread: per size bin, the
    leaves' daily variance over their row-level variance (pooled). Movers do not inflate it (a
    leaf that fell between the periods has no more spread within them), so it holds with few
    leaves, where a dispersion measured across leaves is mostly the movers' own move. The
    smaller of it and the dispersion across leaves (``across``) is taken. Event rows (days
    holding several rows of one leaf) never go below the row-level variance itself (a
    dispersion of 1); pre-aggregated rows (one per leaf and day) have no row-level variance."""
    ok = P > 0
    out = np.ones_like(P)
    bins, n_bins = _size_bins(np.abs(size), ok)
    for k in range(n_bins):
        sel = ok & (bins == k)
        if sel.any():
            out[bins == k] = max(float(V[sel].sum()) / max(float(P[sel].sum()), 1e-300), 1e-12)
    rows = float((leaf["rowsb"] + leaf["rowsc"]).sum())
    events = rows > 1.05 * float((leaf["cellsb"] + leaf["cellsc"]).sum())  # days of several rows
    # each view can be inflated by something that is not noise: the spread across leaves by the
    # leaves a cause moved, the spread within them by a day the data got wrong (loaded twice,
    # half missing); the noise is no larger than the smaller of the two. Only days tell event
    # rows apart: without them, a period's rows may be a pre-aggregated table's daily totals
    # asked by month, whose noise is far below their rows' squares, so there is no floor there
    out = np.minimum(out, across)
    return np.maximum(out, 1.0) if events else out


def additive_leaves(leaf: dict[str, np.ndarray], days: tuple[float, float] | None = None) -> Leaves:
    """Expected vs observed for additive metrics (sums, counts, per-leaf distinct counts).

    The expectation starts at "nothing changed"; an even move of everything is the search's
    global candidate. The dispersion is measured around the overall factor, so an even move
    does not pass for noise; with date periods, from each leaf's own days instead.
    """
    b, c = leaf["nb"], leaf["nc"]
    overall = c.sum() / b.sum() if b.sum() > 0 else 1.0
    P = _floor(leaf["qnc"] + overall**2 * leaf["qnb"])
    Pb = np.minimum(overall**2 * leaf["qnb"], P)
    r = c - b * overall
    V = None
    if days and "vnb" in leaf:
        # the baseline enters the residual scaled by the overall factor
        scaled = {**leaf, "vnb": leaf["vnb"] * overall**2, "nb": b * overall}
        V = _day_variance(scaled, days, np.zeros_like(b), np.zeros_like(b))
    phi = _dispersion(r, P, b + c)
    if V is not None:
        phi = _day_dispersion(V, P, leaf, b + c, phi)
    return Leaves(
        f=b.copy(), v=c.copy(), P=P, g=overall - 1.0, phi=phi, tail=_tail(r, P, phi), Pb=Pb
    )


def ratio_leaves(
    leaf: dict[str, np.ndarray], total: dict[str, float], days: tuple[float, float] | None = None
) -> Leaves:
    """Expected vs observed numerator at the comparison denominator (the rate view)."""
    nb, db, nc, dc = leaf["nb"], leaf["db"], leaf["nc"], leaf["dc"]
    overall = total["nb"] / total["db"] if total["db"] else 0.0
    rb = np.where(db > 0, nb / np.where(db > 0, db, 1.0), overall)
    rc = np.where(dc > 0, nc / np.where(dc > 0, dc, 1.0), 0.0)
    f = dc * rb
    overall = nc.sum() / f.sum() if f.sum() > 0 else 1.0
    g = overall - 1.0
    # each row's spread around the leaf's rate over both periods (the rate "nothing changed"
    # expects): a period's own rate fits its few rows too well (a leaf without purchases in one
    # period had no spread there at all); one degree of freedom goes to that rate. A leaf new in
    # the comparison is expected at the baseline's overall rate, and spreads around it
    both = db + dc
    rate = total["nb"] / total["db"] if total["db"] else 0.0
    rp = np.where(db > 0, (nb + nc) / np.where(both > 0, both, 1.0), rate)
    qc = np.maximum(leaf["qnc"] - 2 * rp * leaf["qndc"] + rp**2 * leaf["qdc"], 0.0)
    qb = np.maximum(leaf["qnb"] - 2 * rp * leaf["qndb"] + rp**2 * leaf["qdb"], 0.0)
    scale = np.where(db > 0, dc / np.where(db > 0, db, 1.0), 0.0)
    P = qc + scale**2 * qb
    if "rowsb" in leaf:
        rows = leaf["rowsb"] + leaf["rowsc"]
        P = P * np.where(rows > 1, rows / np.maximum(rows - 1, 1), 1.0)
    # one row per leaf and period (pre-aggregated data): no row-level spread to measure (the
    # spread above is zero but for rounding), so count-like (Poisson) noise on the numerator
    # stands in, the dispersion rescaling it; a count's noise is that of the count expected
    # when that is the larger (a leaf with sessions and no purchase saw 0 of about 1 expected)
    poisson = np.maximum(np.abs(nc), np.abs(f)) + scale**2 * np.abs(nb)
    # in the numerator's units squared, as the row-level spread is (a compound-Poisson sum's
    # variance is its total times the rows' mean square over their mean: 1 for counts), so the
    # metric's units do not change which leaves count
    total = float((np.abs(nb) + np.abs(nc)).sum())
    unit = float((leaf["qnb"] + leaf["qnc"]).sum()) / total if total > 0 else 1.0
    poisson = poisson * max(unit, 1e-300)
    single = (leaf["rowsb"] <= 1) & (leaf["rowsc"] <= 1) if "rowsb" in leaf else P <= 0
    # a leaf's own rows measure its spread badly when it expects few counts: rows without a
    # purchase add (rate x sessions)^2, not the rate x sessions a count's noise is. So a leaf's
    # spread is never below what leaves spread per unit they expect, pooled, at its own
    # expected size
    expected = rp * (dc + scale**2 * db)
    rows_ok = ~single & (P > 0) & (expected > 0)
    per_unit = float(P[rows_ok].sum()) / float(expected[rows_ok].sum()) if rows_ok.any() else 0.0
    P = np.where(single, P, np.maximum(P, per_unit * expected))
    P = _floor(np.where(single | (P <= 1e-9 * poisson), poisson, P))
    r = nc - f * _typical_factor(nc, f)
    V = None
    if days:
        # the baseline's part enters the model scaled to the comparison's denominator
        scaled = {
            **leaf,
            "nb": nb * scale,
            "db": db * scale,
            "vnb": leaf.get("vnb", 0) * scale**2,
            "vdb": leaf.get("vdb", 0) * scale**2,
            "vndb": leaf.get("vndb", 0) * scale**2,
        }
        V = _day_variance(scaled, days, rb, rc)
    phi = _dispersion(r, P, f + nc)
    if V is not None:
        phi = _day_dispersion(V, P, leaf, f + nc, phi)
    return Leaves(f=f, v=nc.copy(), P=P, g=g, phi=phi, tail=_tail(r, P, phi))


def _typical_factor(v: np.ndarray, f: np.ndarray) -> float:
    """The move of a typical leaf (median of ``v / f`` weighted by ``f``): the centre the noise is
    measured around. The overall factor would not do: a cause that moved a third of the data
    drags it, and then every unmoved leaf looks like noise."""
    ok = f > 0
    if not ok.any():
        return 1.0
    return weighted_median(v[ok] / f[ok], f[ok])


def _floor(P: np.ndarray) -> np.ndarray:
    """A variance for leaves with none measured (nothing observed in either period): a hundredth
    of the median leaf's. Leaves with a variance keep their own; raising small leaves to a common
    floor made every leaf in the smallest size bin share one absolute noise, so the bin's
    dispersion fitted none of them and single small cells passed for causes."""
    pos = P[P > 0]
    floor = float(np.median(pos)) * 0.01 if pos.size else 1.0
    return np.where(P > 0, P, floor)


class Groups:
    """For each segment: which leaves it holds (as a group id within its cuboid).

    A cuboid's groups are keyed by one integer (the codes of its columns in mixed radix), so
    grouping costs one pass over the leaves per cuboid, not a sort of multi-column rows. The
    same membership, as a sparse segments-by-leaves matrix, sums a leaf array over every
    segment in one product (:meth:`sums`, called a hundred times and more a search).
    """

    def __init__(self, cube: Cube) -> None:
        n_leaves = self.n_leaves = len(cube.leaf_codes)
        self._matrix: Any = None  # :attr:`matrix`, built when first used (False: it cannot be)
        radix = np.array([max(len(v), 1) for v in cube.values], dtype=np.int64)
        n_cols = cube.seg_mask.shape[1]
        if n_cols <= 62:  # each segment's columns as one integer: a unique of integers, not rows
            bit = np.int64(1) << np.arange(n_cols, dtype=np.int64)
            keys, inverse = np.unique(cube.seg_mask.astype(np.int64) @ bit, return_inverse=True)
            masks = (keys[:, None] & bit) > 0
        else:
            masks, inverse = np.unique(cube.seg_mask, axis=0, return_inverse=True)
        self.cuboids: list[tuple[np.ndarray, np.ndarray, int]] = []  # (segment ids, leaf gid, n)
        self.seg_gid = np.zeros(len(cube.seg_mask), dtype=np.int64)
        self.seg_cuboid = inverse.reshape(-1)
        for m_idx, mask in enumerate(masks):
            cols = np.flatnonzero(mask)
            seg_ids = np.flatnonzero(self.seg_cuboid == m_idx)
            if cols.size == 0:  # the whole population
                self.seg_gid[seg_ids] = 0
                self.cuboids.append((seg_ids, np.zeros(n_leaves, dtype=np.int64), 1))
                continue
            leaf_key = _mixed_radix(cube.leaf_codes[:, cols], radix[cols])
            seg_key = _mixed_radix(cube.seg_codes[seg_ids][:, cols], radix[cols])
            space = int(np.prod(radix[cols].astype(float)))
            if space <= max(4 * n_leaves, 1024):
                # small key space: the key is the group id
                self.seg_gid[seg_ids] = seg_key
                self.cuboids.append((seg_ids, leaf_key, space))
            else:
                uniq, leaf_gid = np.unique(leaf_key, return_inverse=True)
                pos = np.searchsorted(uniq, seg_key)
                pos = np.minimum(pos, max(len(uniq) - 1, 0))
                found = uniq[pos] == seg_key if len(uniq) else np.zeros(len(seg_key), bool)
                self.seg_gid[seg_ids] = np.where(found, pos, -1)
                self.cuboids.append((seg_ids, leaf_gid.reshape(-1), len(uniq)))

    def sums(self, x: np.ndarray, n_segments: int, where: np.ndarray | None = None) -> np.ndarray:
        """Per-segment sum of a leaf array (over the leaves ``where`` only, if given: a mask or
        the leaves' indices)."""
        if where is not None:
            kept = np.zeros(len(x))
            kept[where] = x[where]
            x = kept
        if n_segments != len(self.seg_gid):
            raise ValueError(f"{len(self.seg_gid)} segments, asked for {n_segments}")
        x = np.asarray(x, dtype=np.float64)
        matrix = self.matrix if self.n_leaves * len(self.cuboids) <= MATRIX_ENTRIES else None
        if matrix is not None:
            return np.asarray(matrix @ x)
        out = np.zeros(n_segments)  # one pass over the leaves per cuboid, in bounded memory
        for seg_ids, leaf_gid, n in self.cuboids:
            sums = np.bincount(leaf_gid, weights=x, minlength=n)
            got = self.seg_gid[seg_ids]
            out[seg_ids] = np.where(got >= 0, sums[np.maximum(got, 0)], 0.0)
        return out

    @property
    def matrix(self) -> Any:
        """Segments by leaves, 1 where a segment holds a leaf (sparse, by leaf): a segment's
        sum of a leaf array is one product, every cuboid at once. None when it cannot be had:
        in a process whose address space is capped and mostly reserved (DuckDB reserves far
        more than it touches), the sparse library's own code may fail to load, and the sums
        then go cuboid by cuboid, as past :data:`MATRIX_ENTRIES`."""
        if self._matrix is None:
            try:
                self._matrix = self._build_matrix()
            except (ImportError, MemoryError):
                self._matrix = False
        return None if self._matrix is False else self._matrix

    def _build_matrix(self) -> Any:
        from scipy import sparse

        # per leaf (a row) and cuboid (a column), the segment holding it, -1 for none
        seg = np.empty((self.n_leaves, len(self.cuboids)), dtype=np.int32)
        for k, (seg_ids, leaf_gid, n) in enumerate(self.cuboids):
            seg_of = np.full(n, -1, dtype=np.int32)
            gid = self.seg_gid[seg_ids]
            seg_of[gid[gid >= 0]] = seg_ids[gid >= 0]
            seg[:, k] = seg_of[leaf_gid]
        held = seg >= 0
        indptr = np.concatenate([[0], np.cumsum(held.sum(axis=1))])
        shape = (len(self.seg_gid), self.n_leaves)
        return sparse.csc_matrix((np.ones(int(indptr[-1])), seg[held], indptr), shape=shape)


def _mixed_radix(codes: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """One integer per row from per-column codes in ``[0, radix)``."""
    key = np.zeros(len(codes), dtype=np.int64)
    for j in range(codes.shape[1]):
        key = key * radix[j] + codes[:, j]
    return key


def search(
    cube: Cube,
    leaves: Leaves,
    *,
    eligible: np.ndarray,
    alpha: float = sig.ALPHA,
    max_causes: int = MAX_CAUSES,
    gain_units: str = "noise",
    min_effect: float = 0.0,
    climb: bool = True,
    even_first: bool = False,
    allow_even: bool = True,
    only: np.ndarray | None = None,
    groups: Groups | None = None,
    crit: np.ndarray | None = None,
    p_adjusted: np.ndarray | None = None,
) -> Search:
    """Greedy ripple-fit selection over significant segments.

    ``gain_units`` "noise" weighs each leaf's error by its noise (surprise first: sharp local
    breaks are found even when small); "absolute" weighs by magnitude (explanatory power
    first). ``min_effect`` is the smallest share of the total unexplained change a cause must
    carry when picked. ``only`` limits the picks to a story's own segments (weighed again in the
    forward order; the bound still counts every segment searched); ``groups`` reuses the
    segments' leaves built by an earlier search of the same cube. ``crit`` replaces the bound
    each segment must clear, and ``p_adjusted`` its corrected p-value (NaN: over every segment
    searched), where a family narrower than every segment is tested (:func:`_one_column_told`).
    """
    groups = groups if groups is not None else Groups(cube)
    n_seg = len(cube.seg_mask)
    n_tested = max(int(eligible.sum()), 1)
    f = leaves.f.copy()
    v = leaves.v
    s = np.sqrt(leaves.phi * leaves.P)
    w = leaves.P * leaves.phi
    PS = groups.sums(w, n_seg)
    z_crit = sig.bonferroni_z(n_tested, alpha)
    # a heavy leaf tail widens the bound of segments made of few leaves (by noise weight); a
    # sum of m leaves has 1/m of their excess tail
    m_eff = PS**2 / np.maximum(groups.sums(w**2, n_seg), 1e-300)
    seg_crit = sig.segment_bound(z_crit, leaves.tail, m_eff)
    picks: list[Pick] = []
    explained = np.zeros(len(f), dtype=bool)
    n_leaves_of = groups.sums(np.ones(len(f)), n_seg)
    margins: list[np.ndarray] = []  # the picks' leaves, each fitted its own factor
    taken = np.zeros(n_seg, dtype=bool)
    z0 = p0 = resid0 = None
    R_total: float | None = None
    VS = groups.sums(v, n_seg)
    FS = groups.sums(f, n_seg)
    for _ in range(max_causes):
        R = VS - FS
        z = R / np.sqrt(np.maximum(PS, 1e-300))
        if z0 is None:
            z0, resid0 = z.copy(), R.copy()
            p0 = sig.two_sided_p(z0)
        if z0 is not None and R_total is None:
            R_total = abs(float(R[0]))
        threshold = seg_crit if crit is None else crit
        cand = eligible & ~taken & (np.abs(z) >= threshold) & (np.abs(R) >= min_effect * R_total)
        cand[0] &= allow_even
        if only is not None:
            cand &= only  # a story's own segments, weighed again in the forward order
        if even_first and not picks and cand[0]:
            cand[1:] = False  # the story that starts from an even move of everything
        z_new = z  # the evidence beyond the causes so far
        if margins:
            # the evidence beyond the picks so far: the residual under their joint fit, over
            # the noise it keeps once their factors are fitted, their leaves' scatter counted
            w_fit = _with_spread(leaves.f, v, f, w, margins)
            PS_fit = groups.sums(w_fit, n_seg)
            z_new = R / np.sqrt(_conditional_variance(groups, w_fit, PS_fit, margins, n_seg))
            cand &= np.abs(z_new) >= threshold
            if explained.any():
                # and its rows outside the picks moved as its rows inside them did: a cause's
                # leaves rarely all move by one factor, and a segment cutting across it must
                # not pass on that scatter (what the joint fit cannot tell from a cause of its
                # own)
                cand &= _moves_alike(groups, v, f, w, w_fit, explained, R, FS, threshold)
        if not cand.any():
            break
        units = s if gain_units == "noise" else np.ones_like(s)
        gain = _ripple_gain(groups, f, v, units, FS, VS, cand)
        rest = ~explained
        if cand[0] and explained.any() and f[rest].sum() > 0:
            # the even move is the move of what the causes so far left unexplained: rescaling
            # leaves a cause already fits would only add error, and the global candidate could
            # never compete with the largest piece of an even drift
            k = v[rest].sum() / f[rest].sum()
            gain[0] = float((_leaf_gain(f, v, np.full(len(f), k)) / units)[rest].sum())
        best = int(np.argmax(gain))
        if not np.isfinite(gain[best]) or gain[best] <= 0:
            if picks:
                break
            # nothing picked yet and no candidate's ripple fit lowers the leaves' error (a move
            # spread thinly over many small leaves): the evidence decides, the clearest first
            best = int(np.argmax(np.where(cand, np.abs(z_new), -np.inf)))
        picked_gain = float(gain[best])
        # the evidence that admitted the pick: a parent the climb moves up to spreads its
        # piece's move over parts that moved less, and keeps the piece's evidence
        admitted = float(z_new[best]) ** 2
        if climb:
            best = _climb(cube, best, VS, FS, PS, eligible & ~taken, alpha)
        factor = VS[best] / FS[best] if FS[best] > 0 else np.inf
        members = _members(groups, best)
        if best == 0 and explained.any():
            members = np.flatnonzero(~explained)
            factor = v[members].sum() / f[members].sum() if f[members].sum() > 0 else np.inf
        elif best != 0:
            explained[members] = True
        before = f[members]
        f[members] = v[members] if not np.isfinite(factor) else before * factor
        # only the pick's leaves changed: update every segment's expectation by their change
        change = np.zeros_like(f)
        change[members] = f[members] - before
        FS = FS + groups.sums(change, n_seg, where=members)
        margins.append(members)
        if len(margins) > 1:
            f = _refit(leaves.f, v, margins)
            FS = groups.sums(f, n_seg)
        taken[best] = True
        # a pick's sub-segments are explained at its factor; they are not separate causes
        taken |= descendants(cube, best)
        if best != 0:
            # so is every segment all of whose leaves are the pick's, named by other columns
            # (``device = desktop & country = US`` inside ``platform = web & device = desktop``
            # when every desktop is web)
            inside = np.zeros(len(f))
            inside[members] = 1.0
            taken |= (groups.sums(inside, n_seg) >= n_leaves_of) & (n_leaves_of > 0)
        picks.append(
            Pick(
                seg=best,
                z=float(z[best]),
                p_value=float(sig.two_sided_p(z[best])),
                gain=picked_gain,
                deviance=max(float(z_new[best]) ** 2, admitted),
                factor=float(factor),
                expected=float(FS[best] - (f[members].sum() - before.sum())),
                observed=float(VS[best]),
                p_adjusted=(
                    float(p_adjusted[best])
                    if p_adjusted is not None and np.isfinite(p_adjusted[best])
                    else None
                ),
            )
        )
    assert z0 is not None and p0 is not None and resid0 is not None
    remainder = float(v.sum() - f.sum())
    return Search(
        picks,
        z0,
        p0,
        resid0,
        leaves,
        z_crit,
        n_tested,
        seg_crit,
        remainder,
        fit=(VS, FS, PS),
        groups=groups,
        admitted_at=crit,
    )


def _moves_alike(
    groups: Groups,
    v: np.ndarray,
    f: np.ndarray,
    w: np.ndarray,
    w_fit: np.ndarray,
    explained: np.ndarray,
    R: np.ndarray,
    FS: np.ndarray,
    bound: np.ndarray,
) -> np.ndarray:
    """Per segment, whether its rows outside the picks moved as its rows inside them did: a
    second cause moves all its rows by its factor, overlap or not, while a segment cutting
    across a scattered pick moves only inside it. Its relative move inside (over the fit)
    and outside are compared; it fails when it moved inside beyond what it did outside by
    more than its ``bound`` (the one a cause must clear). A segment with no rows outside the
    picks is one of their slices and fails; one wholly outside them passes."""
    n_seg, rest = len(R), ~explained
    R_rest = groups.sums(v - f, n_seg, where=rest)
    P_rest = groups.sums(w, n_seg, where=rest)
    F_rest = groups.sums(f, n_seg, where=rest)
    F_in = FS - F_rest
    P_in = groups.sums(w_fit, n_seg, where=explained)
    R_in = R - R_rest
    with np.errstate(divide="ignore", invalid="ignore"):
        d_in = R_in / F_in
        d_rest = R_rest / F_rest
        se = np.sqrt(P_in / F_in**2 + P_rest / F_rest**2)
        z_h = (d_in - d_rest) * np.sign(R) / se
    alike = np.where(F_in > 0, np.nan_to_num(z_h, nan=np.inf) < bound, True)
    return alike & (F_rest > 0)


def _refit(
    f0: np.ndarray,
    v: np.ndarray,
    margins: list[np.ndarray],
    rounds: int = 50,
    factors: list[float] | None = None,
) -> np.ndarray:
    """The picks' factors fitted together (iterative proportional fitting): every pick's
    expected total equals its observed total, each leaf expected at its baseline times the
    factors of the picks that hold it. Fitted one at a time, a pick that overlaps a later one
    keeps the overlap's move in its own factor; together, each move goes to the pick it
    belongs to. Leaves with nothing before and something now are expected at what they show."""
    f = f0.astype(np.float64).copy()
    fixed = np.zeros(len(f), dtype=bool)
    for m in margins:
        fixed[m] |= f0[m] <= 0
    f[fixed] = v[fixed]
    K = [1.0] * len(margins)
    for _ in range(rounds):
        moved = 0.0
        for j, m in enumerate(margins):
            free = m[~fixed[m]]
            fs = float(f[free].sum())
            if fs <= 0:
                continue
            k = (float(v[m].sum()) - float(f[m[fixed[m]]].sum())) / fs
            if k < 0:
                continue
            f[free] *= k
            K[j] *= k
            moved = max(moved, abs(k - 1.0))
        if moved < 1e-9:
            break
    if factors is not None:
        factors[:] = K
    return f


def _with_spread(
    f0: np.ndarray, v: np.ndarray, fitted: np.ndarray, w: np.ndarray, margins: list[np.ndarray]
) -> np.ndarray:
    """The leaves' noise variance with each pick's spread added: a cause rarely moves every
    leaf by one factor, so its leaves scatter around the fitted factor by a share of their move
    (``t^2 (fitted - f0)^2``), the share measured on the pick's own leaves (the scatter beyond
    the noise, over the squared moves; none when they scatter no more than the noise). A
    segment cutting across a cause is then not a cause on that scatter alone, while a cause
    whose leaves moved alike keeps its full weight."""
    out = w.copy()
    for m in margins:
        move2 = (fitted[m] - f0[m]) ** 2
        out[m] += _scatter_share(v[m], fitted[m], w[m], move2) * move2
    return out


def _scatter_share(v: np.ndarray, fit: np.ndarray, w: np.ndarray, move2: np.ndarray) -> float:
    """How far leaves scatter around their fit beyond the noise ``w``, as a share of their
    squared moves ``move2`` (``t^2``; none when they scatter no more than the noise)."""
    denom = float(move2.sum())
    if denom <= 0:
        return 0.0
    return max(float(((v - fit) ** 2 - w).sum()) / denom, 0.0)


def _conditional_variance(
    groups: Groups, w: np.ndarray, PS: np.ndarray, margins: list[np.ndarray], n_seg: int
) -> np.ndarray:
    """Per segment, the noise variance of its residual once the picks' factors are fitted: the
    fitted factors take the part of the noise each pick shares with the segment
    (``P_S - c' A^-1 c`` with ``c`` the noise the segment shares with each pick and ``A`` the
    picks' shared noise), so a slice of a pick, already matched in total, is not judged by the
    full noise it no longer has."""
    n = len(w)
    C = np.empty((len(margins), n_seg))
    for j, m in enumerate(margins):
        x = np.zeros(n)
        x[m] = w[m]
        C[j] = groups.sums(x, n_seg)
    A = np.array(
        [
            [float(w[np.intersect1d(a, b, assume_unique=True)].sum()) for b in margins]
            for a in margins
        ]
    )
    sol = np.linalg.pinv(A) @ C  # the least-squares solution; A is the picks' few by few
    V = PS - np.einsum("js,js->s", C, sol)
    return np.maximum(V, 1e-3 * np.maximum(PS, 1e-300))


def _climb(
    cube: Cube,
    best: int,
    VS: np.ndarray,
    FS: np.ndarray,
    PS: np.ndarray,
    open_: np.ndarray,
    alpha: float,
) -> int:
    """Move a pick up to its parent while the rest of the parent moved the same way.

    ``best`` fits its own leaves best, but when the parent's other part (parent minus ``best``)
    also moved beyond the noise (a one-sided test at ``alpha``, in the pick's direction) and by
    at least :data:`CLIMB_SHARE` of its log factor, the change is not confined to ``best``: the
    parent is the cause and ``best`` only its largest piece. The parent whose rest moved most
    clearly wins.
    """
    depth = cube.seg_mask.sum(axis=1)
    while depth[best] > 1:
        parents = np.flatnonzero(ancestors(cube, best) & (depth == depth[best] - 1) & open_)
        if parents.size == 0 or VS[best] <= 0:
            return best
        with np.errstate(divide="ignore", invalid="ignore"):
            if FS[best] > 0:
                log_best = np.full(parents.size, np.log(VS[best] / FS[best]))
            else:
                # a pick with nothing before has no finite factor of its own: the rest is
                # measured against the factor its parent as a whole would be fitted with
                log_best = np.log(np.where(FS[parents] > 0, VS[parents] / FS[parents], np.nan))
        V, F = VS[parents] - VS[best], FS[parents] - FS[best]
        P = np.maximum(PS[parents] - PS[best], 1e-300)
        z = (V - F) / np.sqrt(P)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rest = np.log(np.where((F > 0) & (V > 0), V / F, np.nan))
            share = np.where(log_best != 0, log_rest / log_best, np.nan)
        # a planned, one-sided test (the direction is the pick's), not a search over segments
        ok = z * np.sign(np.nan_to_num(log_best)) >= sig.one_sided_z(alpha)
        ok &= np.nan_to_num(share) >= CLIMB_SHARE
        if not ok.any():
            return best
        best = int(parents[ok][np.argmax(np.abs(z[ok]))])
    return best


def descendants(cube: Cube, seg: int) -> np.ndarray:
    """Segments that constrain every column ``seg`` does, to the same values (``seg`` included;
    none for the whole population)."""
    mask = cube.seg_mask[seg]
    cols = np.flatnonzero(mask)
    if cols.size == 0:
        return np.zeros(len(cube.seg_mask), dtype=bool)
    same = (cube.seg_codes[:, cols] == cube.seg_codes[seg, cols]).all(axis=1)
    return same & cube.seg_mask[:, cols].all(axis=1)


def ancestors(cube: Cube, seg: int) -> np.ndarray:
    """Segments whose every column ``seg`` also constrains, to the same value (``seg`` and the
    whole population included)."""
    mask, codes = cube.seg_mask[seg], cube.seg_codes[seg]
    agree = ((cube.seg_codes == codes) | ~cube.seg_mask).all(axis=1)
    return agree & (cube.seg_mask <= mask).all(axis=1)


def _members(groups: Groups, seg: int) -> np.ndarray:
    seg_ids, leaf_gid, _ = groups.cuboids[groups.seg_cuboid[seg]]
    return np.flatnonzero(leaf_gid == groups.seg_gid[seg])


def _ripple_gain(
    groups: Groups,
    f: np.ndarray,
    v: np.ndarray,
    s: np.ndarray,
    FS: np.ndarray,
    VS: np.ndarray,
    cand: np.ndarray,
) -> np.ndarray:
    """Leaf error removed (in noise units) if every leaf of a segment moved by its factor.

    Computed for the candidate segments only (``-inf`` elsewhere), over their own leaves.
    """
    out = np.full(len(cand), -np.inf)
    for seg_ids, leaf_gid, n in groups.cuboids:
        picked = seg_ids[cand[seg_ids]]
        if picked.size == 0:
            continue
        gid = groups.seg_gid[picked]
        factor = np.full(n, np.nan)
        fs = FS[picked]
        factor[gid] = np.where(fs > 0, VS[picked] / np.where(fs > 0, fs, 1.0), np.nan)
        is_cand = np.zeros(n, dtype=bool)
        is_cand[gid] = True
        idx = np.flatnonzero(is_cand[leaf_gid])
        lg, fi, vi, si = leaf_gid[idx], f[idx], v[idx], s[idx]
        gain = np.bincount(lg, weights=_leaf_gain(fi, vi, factor[lg]) / si, minlength=n)
        out[picked] = gain[gid]
    return out


def _leaf_gain(f: np.ndarray, v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per leaf, the absolute error a factor ``k`` removes, read in the direction of the fall:
    ``|v - f| - |v - k f|`` for a fall, and for a rise the same read from the comparison back
    to the baseline (``|f - v / k|``, which is ``|v - k f| / k``). Read forward only, a rise
    costs more than the same fall (absolute error is least at the median, and sparse leaves
    are skewed: a leaf with nothing observed only loses when its expectation is raised), so a
    cause that rose lost to noise that fell, and the same data asked the other way round told
    another story; read as a fall either way, a leaf pair scores the same whichever period is
    the baseline. A leaf with nothing before (``k`` infinite) is fitted to what it shows."""
    base = np.abs(v - f)
    finite = np.isfinite(k)
    kk = np.where(finite, k, 1.0)
    after = np.abs(v - f * kk) / np.maximum(kk, 1.0)
    return np.where(finite, base - after, base)


def story_score(found: Search) -> float:
    """How well a search's picks explain the change, net of what choosing them costs: the
    deviance each pick removed less its bound squared (the price of a segment chosen among all
    those searched). A segment that did not move against its baseline (an exception to an even
    shift that stayed flat) pays its price and gains nothing: a flat part is not a cause. A
    value of a column tested as a family of its own moved when it cleared that family's bound,
    and pays the price of every segment searched all the same."""
    crit = found.bounds
    admitted = found.admitted_at if found.admitted_at is not None else crit
    moved = np.abs(found.z) >= admitted  # against "nothing changed"
    return float(sum(p.deviance * moved[p.seg] - float(crit[p.seg]) ** 2 for p in found.picks))


def search_stories(cube: Cube, leaves: Leaves, **kw: Any) -> Search:
    """The better of two stories when everything moved beyond the noise: the forward search's,
    and the other telling of the even move of everything (an even shift first with exceptions
    when the search did not take it, segments alone with the rest flat when it did).

    The forward step weighs one candidate against the next, so the order of its picks decides
    whether an even move of everything is told as an even shift or as its largest pieces. The
    two are scored alike (:func:`story_score`) and the higher score is the answer. Segments
    alone must leave a part of the data flat: naming every value of a column is the even shift
    again, told value by value. An even shift taken first stays in its story only when what the
    segments after it leave moved beyond the noise (:func:`_without_an_even_shift_first`), and
    when no column's values refute it (:func:`_one_column_told`): the chosen story is told by
    that column's values, and the story passed over, so told, is weighed against the chosen."""
    return _reclimbed(cube, leaves, _told_stories(cube, leaves, kw), kw)


def _told_stories(cube: Cube, leaves: Leaves, kw: dict[str, Any]) -> Search:
    found = search(cube, leaves, **kw)
    crit = found.bounds
    if abs(found.z[0]) < crit[0]:
        return _parts_told(cube, leaves, found, kw)
    # the other story: without the even shift when the forward search took it, else from it
    took_even = any(p.seg == 0 for p in found.picks)
    telling = {"allow_even": False} if took_even else {"even_first": True}
    other = search(cube, leaves, **telling, **kw, groups=found.groups)
    if not took_even:
        other = _without_an_even_shift_first(cube, leaves, other, kw)
    # no other telling, or the even shift told value by value, or a lower score: the forward one
    told_again = (
        other.picks
        and not _names_a_whole_column(cube, other)
        and story_score(other) > story_score(found)
    )
    chosen, passed = (other, found) if told_again else (found, other)
    told = _one_column_told(cube, leaves, chosen, kw)
    if told is chosen and passed.picks:
        # the story passed over, its even shift refuted by a column, may outscore the chosen one
        by_column = _one_column_told(cube, leaves, passed, kw)
        if by_column is not passed and story_score(by_column) > story_score(chosen):
            return _parts_told(cube, leaves, by_column, kw)
    return _parts_told(cube, leaves, told, kw)


def told_by_a_column(cube: Cube, leaves: Leaves, found: Search, kw: dict[str, Any]) -> Search:
    """A story without picks, whose change is told as an even move of everything, told instead
    by the values of a column that refutes that move (:func:`_one_column_told`, for an even
    shift the search took); ``found`` itself when no column does."""
    if found.picks or found.groups is None:
        return found
    expected, observed = float(leaves.f.sum()), float(leaves.v.sum())
    even = Pick(
        seg=0,
        z=float(found.z[0]),
        p_value=float(found.p[0]),
        gain=0.0,
        factor=observed / expected if expected > 0 else math.inf,
        expected=expected,
        observed=observed,
        deviance=float(found.z[0]) ** 2,
    )
    told = _one_column_told(cube, leaves, replace(found, picks=[even]), kw)
    if not told.picks or told.picks[0].seg == 0:
        return found
    return _parts_told(cube, leaves, told, kw)


def _reclimbed(cube: Cube, leaves: Leaves, found: Search, kw: dict[str, Any]) -> Search:
    """The story with each pick climbed again given the story's other picks.

    The forward search climbs a pick to its parent when the parent's rest moved with it
    (:func:`_climb`), judged against what the picks before it explain. A pick taken before
    another that holds part of its parent's rest was climbed without that one fitted: a rise of
    ``platform = ios`` whose tablets fell with every tablet is first seen as ``ios & phone``,
    the rest of ``ios`` (its tablets) moving unlike it until the tablets' fall is fitted. So
    each pick of a story without an even shift is climbed again against the fit of the others;
    a pick that climbs is replaced by its parent, and the story is weighed again in the forward
    order. The new story stands when every segment of it is picked again; else the old one."""
    segs = [p.seg for p in found.picks]
    groups = found.groups
    if len(segs) < 2 or 0 in segs or groups is None or found.fit is None:
        return found
    n_seg = len(cube.seg_mask)
    depth = cube.seg_mask.sum(axis=1)
    eligible = kw["eligible"]
    alpha = kw.get("alpha", sig.ALPHA)
    VS, _, PS = found.fit
    story = list(segs)
    changed = False
    for _ in range(len(story)):
        # the clearest climb first (its parent's rest moved most), then the others given it
        best: tuple[float, int, int] | None = None
        for i, seg in enumerate(story):
            if depth[seg] < 2:
                continue
            others = [t for t in story if t != seg]
            f_others = _refit(leaves.f, leaves.v, [_members(groups, t) for t in others])
            FS = groups.sums(f_others, n_seg)
            open_ = eligible.copy()
            for t in others:
                open_ &= ~descendants(cube, t)
                open_[t] = False
            up = _climb(cube, seg, VS, FS, PS, open_, alpha)
            if up == seg:
                continue
            rest = VS[up] - VS[seg] - (FS[up] - FS[seg])
            z = abs(rest) / np.sqrt(max(PS[up] - PS[seg], 1e-300))
            if best is None or z > best[0]:
                best = (z, i, up)
        if best is None:
            break
        story[best[1]] = best[2]
        changed = True
    if not changed:
        return found
    only = np.zeros(n_seg, dtype=bool)
    only[story] = True
    again = search(cube, leaves, **{**kw, "only": only}, groups=groups)
    return again if sorted(p.seg for p in again.picks) == sorted(set(story)) else found


def _one_column_told(cube: Cube, leaves: Leaves, found: Search, kw: dict[str, Any]) -> Search:
    """The story told by the values of one column, when its even shift taken first is refuted
    by that column: its values did not move by one factor.

    An even shift is a claim about every leaf, so every column's values must share its factor.
    Each column with two or more values searched is one test of that claim (chi-squared over
    its values' moves from the even shift, :func:`significance.unlike_values_p`), corrected
    over the columns. When the clearest column refutes the even shift, its values are a family
    of their own: a value is named when its move against its baseline clears the bound among
    the one-column segments, and its p-value is corrected over them, never below the column's
    (a value clear of the bound among every segment keeps its p-value over them all).

    The values that moved replace the even shift. The story's other segments (exceptions to the
    even shift, which need not have moved at all) are weighed again beside them, unless a value
    that moved holds all their rows. The story must leave a value of the column out (naming
    every value is the even shift told value by value), and the rows none of its segments hold
    must have moved by a factor nearer flat than the even shift's, on the log scale: a rest
    that moved with the others is the even shift, with exceptions."""
    segs = [p.seg for p in found.picks]
    if not segs or segs[0] != 0 or found.groups is None:
        return found
    groups = found.groups
    n_seg = len(cube.seg_mask)
    alpha = kw.get("alpha", sig.ALPHA)
    w = leaves.phi * leaves.P
    VS, FS, PS = (groups.sums(x, n_seg) for x in (leaves.v, leaves.f, w))
    alone = (cube.seg_mask.sum(axis=1) == 1) & kw["eligible"]
    alone[0] = False
    columns = [np.flatnonzero(alone & cube.seg_mask[:, j]) for j in range(len(cube.dims))]
    columns = [c for c in columns if c.size >= 2 and FS[c].sum() > 0]
    if not columns:
        return found
    refuted = [
        (sig.adjusted(sig.unlike_values_p(VS[c], FS[c], PS[c]), len(columns)), i)
        for i, c in enumerate(columns)
    ]
    p_column, i = min(refuted)
    if not sig.significant(p_column, alpha):
        return found
    values = columns[i]
    n_alone = float(sum(c.size for c in columns))
    crit = found.bounds.copy()  # the bound among the one-column segments, tails kept
    crit[values] *= sig.bonferroni_z(n_alone, alpha) / found.z_crit
    moved = values[np.abs(found.z[values]) >= crit[values]]
    if moved.size == 0 or moved.size == values.size:
        return found  # nothing moved beyond the noise, or every value did: the even shift
    inside = np.zeros(len(leaves.f), dtype=bool)
    for s in moved:
        inside[_members(groups, s)] = True
    only = np.zeros(n_seg, dtype=bool)
    only[moved] = True
    # the story's other segments are weighed again without the even shift (an exception to it
    # may not have moved at all), unless a value that moved holds all their rows
    only[[s for s in segs[1:] if not inside[_members(groups, s)].all()]] = True
    p_adjusted = _family_p(found, {int(s): p_column for s in values}, n_alone, alpha)
    told = search(
        cube,
        leaves,
        **{**kw, "climb": False, "only": only, "groups": groups},
        crit=crit,
        p_adjusted=p_adjusted,
    )
    if not set(moved.tolist()) <= {p.seg for p in told.picks}:
        return found  # a value does not clear its bound given the others
    if _names_a_whole_column(cube, told):
        return found  # the even shift again, told value by value
    rest = np.ones(len(leaves.f), dtype=bool)
    for p in told.picks:
        rest[_members(groups, p.seg)] = False
    # the rest's factor nearer the even shift's than flat, on the log scale (a rise and the same
    # fall told the other way round are as near): the even shift, with its exceptions
    k = float(leaves.v.sum() / leaves.f.sum())
    v, f = float(leaves.v[rest].sum()), float(leaves.f[rest].sum())
    if f <= 0 or k <= 0:
        return told
    log_r = math.log(v / f) if v > 0 else -math.inf
    return found if abs(log_r - math.log(k)) < abs(log_r) else told


def _parts_told(cube: Cube, leaves: Leaves, found: Search, kw: dict[str, Any]) -> Search:
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
      :func:`_climb`), and moved unlike them beyond the bound among the parts;

    and when they fit the pieces they cut the pick into better than the pick at one factor, by
    the bound among the parts squared for each part beyond the first (the price of a part).
    They must still clear that bound given the story's other picks. The noise of each piece is
    the observed's own plus the expectation's at its fitted factor, so a rise and the same fall
    asked the other way round are weighed alike. A story with an even shift is left as it is
    (:func:`_one_column_told` weighs its columns)."""
    groups = found.groups
    if groups is None or any(p.seg == 0 for p in found.picks):
        return found
    alpha = kw.get("alpha", sig.ALPHA)
    n_seg = len(cube.seg_mask)
    depth = cube.seg_mask.sum(axis=1)
    VS = groups.sums(leaves.v, n_seg)
    eligible = kw["eligible"]
    for _ in range(2 * len(found.picks) + 1):
        told = None
        segs = [p.seg for p in found.picks]
        for s in segs:
            told = _told_by_parts(cube, leaves, found, s, kw, VS, depth, alpha, eligible)
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
    kw: dict[str, Any],
    VS: np.ndarray,
    depth: np.ndarray,
    alpha: float,
    eligible: np.ndarray,
) -> Search | None:
    """The story with pick ``s`` told by its parts (:func:`_parts_told`), or None."""
    groups = found.groups
    assert groups is not None
    n_seg, v, f0 = len(cube.seg_mask), leaves.v, leaves.f
    if depth[s] >= depth.max():
        return None
    others = [_members(groups, o) for o in (p.seg for p in found.picks) if o != s]
    mine = _members(groups, s)
    # the other picks at their factors fitted jointly with this one, which is taken out again:
    # fitted without it, a pick overlapping it would take its move in their overlap
    k_s: list[float] = []
    base = _refit(f0, v, [mine, *others], factors=k_s)
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
        f = _refit(base, v, [_members(groups, x) for x in named]) if named else base
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
                # (a cause rarely moves every leaf by one factor, :func:`_with_spread`)
                in_x = np.isin(mine, _members(groups, x))
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
        inside[_members(groups, x)] = True
    rest = np.zeros(len(v), dtype=bool)
    rest[mine] = True
    rest &= ~inside
    for m in others:
        rest[m] = False
    sides = np.flatnonzero(inside | rest)
    if not rest.any() or base[rest].sum() <= 0 or base[inside].sum() <= 0:
        return None
    # (a rest that moved with the parts is the test by which the search moves a pick up to its
    # parent, :func:`_climb`; a rest gone to nothing moved as far as it could)
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
        holds[_members(groups, x), j] = True
    piece = np.unique(holds[mine], axis=0, return_inverse=True)[1].ravel()
    whole = base.copy()
    if base[mine].sum() > 0:
        whole[mine] *= v[mine].sum() / base[mine].sum()

    def misfit(fit: np.ndarray) -> float:
        R = np.bincount(piece, weights=(v - fit)[mine])
        P = np.bincount(piece, weights=noise(fit)[mine])
        return float((R**2 / np.maximum(P, 1e-300)).sum())

    gained = misfit(whole) - misfit(_refit(base, v, [_members(groups, x) for x in named]))
    if gained <= (len(named) - 1) * sig.bonferroni_z(n_parts, alpha) ** 2:
        return None
    crit = np.where(np.isin(np.arange(n_seg), named), crit, found.bounds)
    p_adjusted = _family_p(found, p_named, n_parts, alpha)
    only = np.zeros(n_seg, dtype=bool)
    only[named] = True
    only[[p.seg for p in found.picks if p.seg != s]] = True
    told = search(
        cube,
        leaves,
        **{**kw, "climb": False, "only": only, "groups": groups},
        crit=crit,
        p_adjusted=p_adjusted,
    )
    if not set(named) <= {p.seg for p in told.picks}:
        return None  # a part does not clear its bound given the others
    return told


def _family_p(
    found: Search, gates: dict[int, float], n_family: float, alpha: float
) -> np.ndarray:
    """Per segment, the p-value of a member of a family narrower than every segment searched
    (NaN elsewhere): corrected over the family, and never below ``gates[s]``, the p-value of
    the test that opened the family to it; a member clear of the bound among every segment
    keeps its p-value over them all."""
    out = np.full(len(found.p), np.nan)
    for s, gate in gates.items():
        everywhere = sig.adjusted(float(found.p[s]), found.tests)
        among = max(sig.adjusted(float(found.p[s]), n_family), gate)
        out[s] = everywhere if sig.significant(everywhere, alpha) else among
    return out


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
    of the leaves' squared moves (:func:`_scatter_share`, as :func:`_with_spread` measures a
    pick's), times each side's squared moves."""
    fit = f.copy()
    for side in (inside, ~inside):
        if f[side].sum() > 0:
            fit[side] *= v[side].sum() / f[side].sum()
    move2 = (fit - base) ** 2
    t2 = _scatter_share(v, fit, w, move2)
    return t2 * float(move2[inside].sum()), t2 * float(move2[~inside].sum())


def _without_an_even_shift_first(
    cube: Cube, leaves: Leaves, found: Search, kw: dict[str, Any]
) -> Search:
    """The story without its even shift when what the segments after it leave did not move
    beyond the noise.

    An even shift is a cause when the rest moved given the causes; taken first, it is weighed
    before them, and it carries their move (two segments that rose make the whole rise). Once
    the segments are fitted, the leaves none of them holds must have moved beyond the noise
    (the bound the even shift clears), or the story is told again with the segments alone, in
    the forward order (each given the ones before it, as the search weighs them)."""
    segs = [p.seg for p in found.picks]
    if len(segs) < 2 or segs[0] != 0 or found.groups is None:
        return found
    rest = np.ones(len(leaves.f), dtype=bool)
    for s in segs[1:]:
        rest[_members(found.groups, s)] = False
    w = leaves.phi * leaves.P
    R, W = float((leaves.v - leaves.f)[rest].sum()), float(w[rest].sum())
    if W > 0 and abs(R) / np.sqrt(W) >= found.bounds[0]:
        return found
    only = np.zeros(len(cube.seg_mask), dtype=bool)
    only[segs[1:]] = True
    alone = search(
        cube, leaves, **{**kw, "climb": False, "only": only, "groups": found.groups}
    )
    if sorted(p.seg for p in alone.picks) != sorted(segs[1:]):
        return found  # a segment does not clear its bound without the even shift
    return alone


def _names_a_whole_column(cube: Cube, found: Search) -> bool:
    """The picks name every value of one column, each alone: no part of the data is left flat."""
    named: dict[int, set[int]] = {}
    for p in found.picks:
        cols = np.flatnonzero(cube.seg_mask[p.seg])
        if cols.size == 1:
            named.setdefault(int(cols[0]), set()).add(int(cube.seg_codes[p.seg, cols[0]]))
    alone = cube.seg_mask.sum(axis=1) == 1  # the one-column segments: every value of each column
    return any(len(v) >= int((alone & cube.seg_mask[:, j]).sum()) for j, v in named.items())

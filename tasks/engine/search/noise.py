"""The leaves' noise: the dispersion that scales each leaf's variance (across leaves, or from each
leaf's own days), the width of the noise's far tail, and a variance for leaves with none measured.
"""

from __future__ import annotations

import numpy as np

from tasks.engine.distributions import chi2_isf, norm_isf

CHI2_MEDIAN = 0.454936423119572


def weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    """Median of ``x`` with weights ``w`` (ignores non-finite values and zero weights)."""
    ok = np.isfinite(x) & (w > 0)
    if not ok.any():
        return 0.0
    x, w = x[ok], w[ok]
    order = np.argsort(x, kind="stable")
    cw = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cw, 0.5 * cw[-1])])


def dispersion(r: np.ndarray, P: np.ndarray, size: np.ndarray | None = None) -> np.ndarray:
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
    bins, n_bins = size_bins(size, ok)
    overall = max(_pearson(ratio[ok], cut), 1e-12)
    for k in range(n_bins):
        sel = ok & (bins == k)
        phi = _pearson(ratio[sel], cut) if sel.sum() >= 5 else overall
        # a bin of mostly unchanged leaves must not make the others look infinitely precise
        out[bins == k] = max(phi, 0.1 * overall)
    return out


def size_bins(size: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int]:
    """Each leaf's bin among up to ten of equal count by size (at least 30 ``ok`` leaves a bin),
    and the number of bins."""
    n_bins = int(min(10, max(1, ok.sum() // 30)))
    edges = np.quantile(size[ok], np.linspace(0, 1, n_bins + 1)[1:-1]) if n_bins > 1 else []
    return np.searchsorted(edges, size, side="right"), n_bins


def _pearson(ratio: np.ndarray, cut: float) -> float:
    """Mean of ``r^2 / P`` over the leaves within the noise (see :func:`dispersion`)."""
    scale = float(np.median(ratio)) / CHI2_MEDIAN
    keep = ratio <= scale * cut
    return float(np.mean(ratio[keep])) if keep.any() else scale


def noise_tail(r: np.ndarray, P: np.ndarray, phi: np.ndarray) -> float:
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


def day_variance(
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


def day_dispersion(
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
    bins, n_bins = size_bins(np.abs(size), ok)
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


def typical_factor(v: np.ndarray, f: np.ndarray) -> float:
    """The move of a typical leaf (median of ``v / f`` weighted by ``f``): the centre the noise is
    measured around. The overall factor would not do: a cause that moved a third of the data
    drags it, and then every unmoved leaf looks like noise."""
    ok = f > 0
    if not ok.any():
        return 1.0
    return weighted_median(v[ok] / f[ok], f[ok])


def variance_floor(P: np.ndarray) -> np.ndarray:
    """A variance for leaves with none measured (nothing observed in either period): a hundredth
    of the median leaf's. Leaves with a variance keep their own; raising small leaves to a common
    floor made every leaf in the smallest size bin share one absolute noise, so the bin's
    dispersion fitted none of them and single small cells passed for causes."""
    pos = P[P > 0]
    floor = float(np.median(pos)) * 0.01 if pos.size else 1.0
    return np.where(P > 0, P, floor)

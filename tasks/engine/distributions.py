"""The laws behind the engine's p-values and bounds (normal, chi-squared, Poisson, Student's t)
and its two t-tests on daily values, on ``scipy.special`` and numpy alone.

Each function gives the same numbers, to the last bit, as its ``scipy.stats`` counterpart
(``norm.sf``, ``norm.isf``, ``chi2.sf``, ``chi2.isf``, ``poisson.sf``, ``ttest_rel``,
``ttest_ind`` with ``equal_var=False``), edge cases included: the same special functions, the
same sums in the same order. The engine never imports ``scipy.stats``, which takes about half a
second to load on every run; ``scipy.special`` takes a fraction of that. Nothing here warns: a
test that is undefined (no values, one value, no spread and no move) gives NaN, as there.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import special


class TTestResult(NamedTuple):
    """A two-sided t-test: the t statistic and its p-value (NaN when undefined)."""

    statistic: float
    pvalue: float


def _out(x: np.ndarray) -> np.ndarray | np.float64:
    return x[()] if x.ndim == 0 else x


def norm_sf(x: ArrayLike) -> np.ndarray | np.float64:
    """P(Z > x) for a standard normal Z (1 at -inf, 0 at +inf, NaN for NaN)."""
    return _out(np.asarray(special.ndtr(np.negative(np.asarray(x, dtype=np.float64)))))


def norm_isf(q: ArrayLike) -> np.ndarray | np.float64:
    """The z with P(Z > z) = q (+inf at q = 0, -inf at q = 1, NaN outside [0, 1])."""
    z = -special.ndtri(np.asarray(q, dtype=np.float64))
    return _out(np.asarray(z + 0.0))  # + 0.0: the median is 0.0, not -0.0


def chi2_isf(q: ArrayLike, df: ArrayLike) -> np.ndarray | np.float64:
    """The x with P(X > x) = q for X chi-squared with ``df`` > 0 degrees of freedom (+inf at
    q = 0, 0 at q = 1, NaN outside [0, 1] or for df <= 0)."""
    q, df = np.broadcast_arrays(np.asarray(q, dtype=np.float64), np.asarray(df, dtype=np.float64))
    ok = df > 0
    x = np.full(q.shape, np.nan)
    inside = ok & (q > 0) & (q < 1)
    x[inside] = special.chdtri(df[inside], q[inside])
    x[ok & (q == 0)] = np.inf
    x[ok & (q == 1)] = 0.0
    return _out(x)


def chi2_sf(x: ArrayLike, df: ArrayLike) -> np.ndarray | np.float64:
    """P(X > x) for X chi-squared with ``df`` > 0 degrees of freedom (1 below 0, 0 at +inf,
    NaN for NaN x or df <= 0)."""
    x, df = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(df, dtype=np.float64))
    p = np.full(x.shape, np.nan)
    ok = df > 0
    inside = ok & (x >= 0) & (x < np.inf)
    p[inside] = special.chdtrc(df[inside], x[inside])
    p[ok & (x < 0)] = 1.0
    p[ok & (x == np.inf)] = 0.0
    return _out(p)


def poisson_sf(k: ArrayLike, mu: ArrayLike) -> np.ndarray | np.float64:
    """P(N > k) for N Poisson with mean ``mu`` >= 0; ``k`` is taken down to an integer (1 below
    0, 0 at +inf, NaN for NaN k or negative mu)."""
    k, mu = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(mu, dtype=np.float64))
    ok = mu >= 0
    p = np.zeros(k.shape)
    p[~ok | np.isnan(k)] = np.nan
    p[ok & (k < 0)] = 1.0
    inside = ok & (k >= 0) & np.isfinite(k)
    p[inside] = np.clip(special.pdtrc(np.floor(k[inside]), mu[inside]), 0, 1)
    return _out(p)


def _mean_var(x: np.ndarray) -> tuple[np.float64, np.float64]:
    """Mean and unbiased variance (NaN for one value)."""
    m = np.mean(x)
    n = x.size
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.mean((x - m) ** 2) * np.float64(n / (n - 1) if n > 1 else np.inf)
    return m, v


def _two_sided(t: np.float64, df: np.float64) -> np.float64:
    return 2 * special.stdtr(df, -np.abs(t))


def _sample(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).ravel()


_UNDEFINED = TTestResult(np.float64(np.nan), np.float64(np.nan))


def ttest_rel(a: ArrayLike, b: ArrayLike, *, omit_nan: bool = False) -> TTestResult:
    """Paired t-test of ``a - b`` against 0, two-sided, on ``n - 1`` degrees of freedom.

    A NaN makes the result NaN, unless ``omit_nan``: then the pairs with a NaN on either side
    are left out. No pairs, or no spread in the differences, gives NaN or an infinite t.
    """
    a, b = _sample(a), _sample(b)
    if a.shape != b.shape:
        raise ValueError("ttest_rel needs two samples of the same length")
    if omit_nan:
        keep = ~(np.isnan(a) | np.isnan(b))
        a, b = a[keep], b[keep]
    elif np.isnan(a).any() or np.isnan(b).any():
        return _UNDEFINED
    if a.size == 0:
        return _UNDEFINED
    d = a - b
    n = d.size
    m, v = _mean_var(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.divide(m, np.sqrt(v / n))
    return TTestResult(t, _two_sided(t, np.float64(n - 1)))


def ttest_welch(a: ArrayLike, b: ArrayLike, *, omit_nan: bool = False) -> TTestResult:
    """Welch's t-test of mean(a) - mean(b), two-sided, on Welch-Satterthwaite degrees of freedom.

    A NaN makes the result NaN, unless ``omit_nan``: then each sample's NaNs are left out. An
    empty sample, or a sample of one value, gives NaN.
    """
    a, b = _sample(a), _sample(b)
    if omit_nan:
        a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    elif np.isnan(a).any() or np.isnan(b).any():
        return _UNDEFINED
    if a.size == 0 or b.size == 0:
        return _UNDEFINED
    n1, n2 = a.size, b.size
    m1, v1 = _mean_var(a)
    m2, v2 = _mean_var(b)
    vn1, vn2 = v1 / n1, v2 / n2
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (vn1 + vn2) ** 2 / (vn1**2 / (n1 - 1) + vn2**2 / (n2 - 1))
        df = np.float64(1.0) if np.isnan(df) else df  # no spread: any df gives the same p
        t = np.divide(m1 - m2, np.sqrt(vn1 + vn2))
    return TTestResult(t, _two_sided(t, df))

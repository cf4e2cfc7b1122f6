"""The engine's significance, in one place: one level, one multiple-testing correction, one bound.

Every segment the engine searches is one test of "this segment moved beyond the noise". The
tests are corrected together with Bonferroni over the segments searched: a segment is named only
when its two-sided p-value times the number of segments searched stays below :data:`ALPHA`,
which is the same as its ``|z|`` clearing :func:`bonferroni_z`. A segment made of few leaves is
judged against its data's own noise tail (:func:`segment_bound`). The overall change, screening,
the mix causes of a ratio, the data-quality re-judgement of a cause and the agent's gate all use
these functions, so a segment named by one is named by the others.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from tasks.engine.distributions import chi2_sf, norm_isf, norm_sf

ALPHA = 0.05
"""Significance level of every test the engine and the gate make."""


def bonferroni_z(n_tested: float, alpha: float = ALPHA) -> float:
    """The ``|z|`` a segment must reach, two-sided, among ``n_tested`` independent tests."""
    return float(norm_isf(alpha / (2 * max(float(n_tested), 1.0))))


def one_sided_z(alpha: float = ALPHA) -> float:
    """The ``z`` of a single planned one-sided test (the direction known before looking)."""
    return float(norm_isf(alpha))


def two_sided_p(z: ArrayLike) -> np.ndarray | np.float64:
    """The two-sided p-value of a normal ``z``."""
    return 2 * norm_sf(np.abs(np.asarray(z, dtype=np.float64)))


def adjusted(p: float, n_tested: float) -> float:
    """A p-value corrected for ``n_tested`` independent tests (Bonferroni), at most 1."""
    return min(1.0, float(p) * max(float(n_tested), 1.0))


def z_of_adjusted(p_adjusted: float, n_tested: float) -> float:
    """The ``|z|`` behind a Bonferroni-adjusted two-sided p-value (inverse of :func:`adjusted`)."""
    return float(norm_isf(max(p_adjusted / max(float(n_tested), 1.0), 1e-300) / 2))


def significant(p: float | None, alpha: float = ALPHA) -> bool:
    """A (corrected) p-value below the level."""
    return p is not None and math.isfinite(p) and p < alpha


def segment_z(residual: ArrayLike, variance: ArrayLike) -> np.ndarray:
    """A segment's move in noise units: its residual over the square root of its variance."""
    return np.asarray(residual, dtype=np.float64) / np.sqrt(
        np.maximum(np.asarray(variance, dtype=np.float64), 1e-300)
    )


def segment_bound(z_crit: float, tail: float, m_eff: ArrayLike) -> np.ndarray:
    """The ``|z|`` each segment must reach: the Bonferroni bound, widened by how much heavier
    than normal the leaves' noise tail is (``tail``, 1 for normal), thinning as the segment sums
    more leaves (``m_eff`` leaves by noise weight: a sum of m leaves has 1/m of their excess)."""
    return z_crit * (1.0 + (tail - 1.0) / np.maximum(np.asarray(m_eff, dtype=np.float64), 1.0))


def unlike_values_p(
    observed: ArrayLike,
    expected: ArrayLike,
    variance: ArrayLike,
    expected_variance: ArrayLike | None = None,
) -> float:
    """The p-value of "these values (a column's) moved by one factor": each value's observed
    total against its expected one scaled by their common factor ``k``, in noise units, squared
    and summed, chi-squared with one degree of freedom fewer than the values (the factor
    fitted). ``variance`` is that of ``observed - expected``, or, with ``expected_variance``
    (the expectation's own noise), the observed's own: the expectation's scales with ``k``
    squared, so the same values asked the other way round give the same p-value."""
    v, f = np.asarray(observed, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if v.size < 2 or f.sum() <= 0:
        return 1.0
    k = v.sum() / f.sum()
    var = np.asarray(variance, dtype=np.float64)
    if expected_variance is not None:
        var = var + k * k * np.asarray(expected_variance, dtype=np.float64)
    var = np.maximum(var, 1e-300)
    return float(chi2_sf(float(((v - k * f) ** 2 / var).sum()), v.size - 1))

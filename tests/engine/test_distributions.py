"""The engine's laws and t-tests give scipy.stats's numbers to the last bit, tails and undefined
cases included, and the engine never loads scipy.stats."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from tasks.engine.distributions import (
    chi2_isf,
    chi2_sf,
    norm_isf,
    norm_sf,
    poisson_sf,
    ttest_rel,
    ttest_welch,
)


def same(got, want) -> None:
    """Equal bit for bit: NaN where NaN, the same sign of zero, the same shape."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


PROBABILITIES = np.concatenate(
    [
        np.logspace(-300, 0, 3001),
        [5e-324, 1e-310, 1e-305],  # subnormal
        1 - np.logspace(-16, -1, 151),
        [0.0, 1.0, 0.5, -0.1, 1.1, np.nan, np.inf, -np.inf],
    ]
)


def test_norm_sf_matches_over_the_whole_line() -> None:
    z = np.concatenate([np.linspace(-40, 40, 8001), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    same(norm_sf(z), stats.norm.sf(z))
    same(2 * norm_sf(np.abs(z)), 2 * stats.norm.sf(np.abs(z)))
    assert 0 < norm_sf(37.5) < 1e-300  # the far tail holds down to the smallest doubles


def test_norm_sf_of_a_scalar_is_a_scalar() -> None:
    for x in (0.0, 1.5, -3, 38.0, np.float64(2.0), float("inf")):
        got, want = norm_sf(x), stats.norm.sf(x)
        assert np.ndim(got) == 0 and isinstance(got, np.float64)
        same(got, want)


def test_norm_isf_matches_down_to_the_tiniest_probabilities() -> None:
    same(norm_isf(PROBABILITIES), stats.norm.isf(PROBABILITIES))
    assert norm_isf(0.5) == 0.0 and not np.signbit(norm_isf(0.5))
    assert norm_isf(1e-300) == pytest.approx(37.047096, rel=1e-7)
    assert norm_isf(0.0) == np.inf and norm_isf(1.0) == -np.inf
    for q in (0.0005, 0.05 / 7, 1e-300, 0.5, 1.0):
        assert isinstance(norm_isf(q), np.float64)
        same(norm_isf(q), stats.norm.isf(q))


def test_norm_isf_inverts_norm_sf() -> None:
    q = np.logspace(-300, -1, 300)
    np.testing.assert_allclose(norm_sf(norm_isf(q)), q, rtol=1e-12)


@pytest.mark.parametrize("df", [0.5, 1, 2, 3, 4.5, 10, 30, 100, 1000])
def test_chi2_isf_matches_for_each_degree_of_freedom(df: float) -> None:
    same(chi2_isf(PROBABILITIES, df), stats.chi2.isf(PROBABILITIES, df))
    for q in (0.05, 0.05 / 12345, 1e-300):
        got = chi2_isf(q, df)
        assert isinstance(got, np.float64)
        same(got, stats.chi2.isf(q, df))


@pytest.mark.parametrize("df", [0.5, 1, 2, 3, 4.5, 10, 30, 100, 1000])
def test_chi2_sf_matches_for_each_degree_of_freedom(df: float) -> None:
    x = np.concatenate([np.linspace(-2, 300, 1511), [0.0, -0.0, 1e-300, np.inf, -np.inf, np.nan]])
    same(chi2_sf(x, df), stats.chi2.sf(x, df))
    got = chi2_sf(13.1, df)
    assert isinstance(got, np.float64)
    same(got, stats.chi2.sf(13.1, df))


def test_chi2_sf_outside_its_domain_matches() -> None:
    for df in (0, -1, np.nan, np.inf):
        x = np.array([-1.0, 0.0, 2.5, np.inf, np.nan])
        same(chi2_sf(x, df), stats.chi2.sf(x, df))


def test_chi2_isf_with_one_degree_is_the_squared_normal_bound() -> None:
    q = np.logspace(-300, -1, 300)
    np.testing.assert_allclose(chi2_isf(q, 1), norm_isf(q / 2) ** 2, rtol=1e-12)


def test_chi2_isf_outside_its_domain_matches() -> None:
    for df in (0, -1, np.nan, np.inf):
        same(chi2_isf(PROBABILITIES, df), stats.chi2.isf(PROBABILITIES, df))
    df = np.array([1.0, 2.0, 0.0, 5.0])
    same(chi2_isf(0.01, df), stats.chi2.isf(0.01, df))


K = np.concatenate(
    [
        np.arange(-3, 400),
        np.linspace(-2.5, 60.5, 631),  # fractions: taken down to an integer
        [1e5, 1e6 - 1, 1e7, np.inf, -np.inf, np.nan],
    ]
)


@pytest.mark.parametrize("mu", [0.0, 1e-12, 1e-3, 0.5, 1.0, 3.7, 20.0, 150.0, 1e4, 1e6, 1e8])
def test_poisson_sf_matches(mu: float) -> None:
    same(poisson_sf(K, mu), stats.poisson.sf(K, mu))


def test_poisson_sf_outside_its_domain_and_broadcast() -> None:
    for mu in (-1.0, np.nan, np.inf):
        same(poisson_sf(K, mu), stats.poisson.sf(K, mu))
    mu = np.array([0.0, 2.0, 50.0, 1e4])
    k = np.array([[0.0], [3.0], [60.0], [9990.5]])
    same(poisson_sf(k, mu), stats.poisson.sf(k, mu))
    for k, mu in ((0, 0.1), (4, 2.5), (12345, 11000.7), (-1, 3.0)):
        assert isinstance(poisson_sf(k, mu), np.float64)
        same(poisson_sf(k, mu), stats.poisson.sf(k, mu))


def _samples(seed: int):
    """Pairs of daily samples: random, NaNs, ties, no spread, huge offsets, integers."""
    rng = np.random.default_rng(seed)
    for n1 in (0, 1, 2, 3, 4, 7, 14, 31):
        for n2 in (0, 1, 2, 3, 5, 7, 28, 31):
            a, b = rng.normal(100, 10, n1), rng.normal(95, 30, n2)
            yield a, b
            a2, b2 = a.copy(), b.copy()
            if n1:
                a2[rng.integers(0, n1, max(1, n1 // 3))] = np.nan
            if n2:
                b2[rng.integers(0, n2, max(1, n2 // 3))] = np.nan
            yield a2, b2
            yield np.round(a / 10), np.round(b / 10)  # ties
            yield np.full(n1, 3.3), np.full(n2, 3.3)  # no spread, no move
            yield np.full(n1, 3.3), np.full(n2, 7.1)  # no spread, a move
            yield a * 1e12 + 1e15, b * 1e3 + 1e15
            yield rng.integers(0, 5, n1), rng.integers(0, 5, n2)
            yield np.full(n1, np.nan), b


def _check(got, want) -> None:
    same(got.statistic, want.statistic)
    same(got.pvalue, want.pvalue)


def test_welch_matches_on_every_kind_of_sample() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy.stats warns; ours do not
        cases = [
            (a, b, stats.ttest_ind(a, b, equal_var=False, nan_policy=policy), omit)
            for a, b in _samples(1)
            for policy, omit in (("propagate", False), ("omit", True))
        ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, b, want, omit in cases:
            _check(ttest_welch(a, b, omit_nan=omit), want)
            _check(ttest_welch(list(a), b, omit_nan=omit), want)


def test_paired_matches_on_every_kind_of_sample() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cases = [
            (a, b2, stats.ttest_rel(a, b2, nan_policy=policy), omit)
            for a, b in _samples(2)
            for b2 in (np.resize(b, a.shape) if b.size else np.full(a.shape, 1.0),)
            for policy, omit in (("propagate", False), ("omit", True))
        ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, b, want, omit in cases:
            _check(ttest_rel(a, b, omit_nan=omit), want)


def test_paired_with_identical_differences() -> None:
    """No spread in the differences: infinite t (p = 0) for a move, NaN for none."""
    b = np.random.default_rng(3).normal(50, 5, 7)
    for shift in (0.0, 1.0, 0.1, 1e-9, -4.0):
        a = b + shift
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = stats.ttest_rel(a, b)
        _check(ttest_rel(a, b), want)
    a = np.array([1.0, 2.0, 3.0])
    res = ttest_rel(a + 2.0, a)
    assert res.statistic == np.inf and res.pvalue == 0.0
    assert np.isnan(ttest_rel(a, a).pvalue)


def test_paired_leaves_out_pairs_with_a_nan_on_either_side() -> None:
    a = np.array([1.0, np.nan, 3.0, 4.5, 5.0, 7.0])
    b = np.array([1.2, 2.0, np.nan, 4.0, 4.0, 6.1])
    keep = [0, 3, 4, 5]
    want = stats.ttest_rel(a[keep], b[keep])
    _check(ttest_rel(a, b, omit_nan=True), want)
    assert np.isnan(ttest_rel(a, b).pvalue)


def test_results_are_named_like_scipy_stats() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(0, 1, 10), rng.normal(0.5, 2, 12)
    res = ttest_welch(a, b)
    t, p = res
    assert (t, p) == (res.statistic, res.pvalue)
    np.testing.assert_allclose([t, p], list(stats.ttest_ind(a, b, equal_var=False)), rtol=1e-12)


def test_paired_needs_samples_of_one_length() -> None:
    with pytest.raises(ValueError):
        ttest_rel([1.0, 2.0, 3.0], [1.0, 2.0])


def test_the_engine_never_loads_scipy_stats() -> None:
    code = (
        "import sys\n"
        "import tasks.engine.explain, tasks.engine.search, tasks.engine.clean_days\n"
        "import tasks.engine.segments, tasks.engine.screen, tasks.engine.quality\n"
        "import tasks.engine.tool, tasks.tools\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""Exact law of the discrete Gaussian (normaliser, variance, cdf) at small and large sigma."""

import math

import numpy as np
import pytest

from postdp import DiscreteGaussian


def _brute(sigma, half=4000):
    k = np.arange(-half, half + 1)
    w = np.exp(-(k.astype(float) ** 2) / (2 * sigma**2))
    return k, w / w.sum()


@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0, 2.7, 4.99, 5.0, 20.0, 120.0])
def test_pmf_variance_cdf_match_brute_force_sums(sigma):
    m = DiscreteGaussian(rho=1 / (2 * sigma**2))
    assert m.sigma == pytest.approx(sigma)
    k, p = _brute(sigma)
    window = slice(4000 - 50, 4000 + 51)
    np.testing.assert_allclose(m.pmf(k[window]), p[window], rtol=1e-10, atol=1e-300)
    assert m.variance() == pytest.approx(float((k.astype(float) ** 2 * p).sum()), rel=1e-10)
    np.testing.assert_allclose(m.cdf(k[window]), np.cumsum(p)[window], atol=1e-12)
    np.testing.assert_allclose(m.cdf(k[window] + 3, loc=3), np.cumsum(p)[window], atol=1e-12)


def test_small_sigma_variance_is_below_sigma_squared():
    # the discrete Gaussian has variance strictly below sigma^2 (Canonne et al. 2020, Prop. 19)
    m = DiscreteGaussian(rho=2.0)
    assert m.variance() < m.sigma**2


def test_cdf_edges():
    m = DiscreteGaussian(rho=0.5)
    assert m.cdf(-10_000) == 0.0
    assert m.cdf(10_000) == 1.0
    assert m.cdf(0.5) == m.cdf(0)
    assert math.isnan(float(m.cdf(math.nan)))
    assert m.pmf(0.5) == 0.0


def test_cdf_at_huge_sigma_matches_the_continuity_corrected_normal():
    # sigma = 2e5 takes the outward-summation branch; there the discrete cdf equals
    # Phi((k + 1/2) / sigma) up to O(1/sigma^2) (Euler-Maclaurin).
    from scipy import stats

    m = DiscreteGaussian(rho=1 / (2 * 2e5**2))
    k = np.array([-400_000, -1, 0, 12_345, 600_000])
    np.testing.assert_allclose(m.cdf(k), stats.norm.cdf((k + 0.5) / 2e5), atol=1e-9)

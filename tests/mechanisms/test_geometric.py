"""Exact law of the double geometric mechanism against the closed forms of seed 003 §2.1."""

import math

import numpy as np
import pytest

from postdp import DoubleGeometric, Geometric


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(0.1, 1), (1.0, 1), (1.0, 2), (3.0, 1)])
def test_pmf_matches_closed_form(epsilon, sensitivity):
    m = Geometric(epsilon=epsilon, sensitivity=sensitivity)
    a = math.exp(-epsilon / sensitivity)
    k = np.arange(-30, 31)
    expected = (1 - a) / (1 + a) * a ** np.abs(k)
    np.testing.assert_allclose(m.pmf(k), expected, rtol=1e-12)
    np.testing.assert_allclose(m.logpmf(k), np.log(expected), rtol=1e-12)
    # shifted by the true value
    np.testing.assert_allclose(m.pmf(k + 7, loc=7), expected, rtol=1e-12)


def test_pmf_is_zero_off_the_integers():
    assert Geometric(epsilon=1.0).pmf(0.5) == 0.0


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 2.5])
def test_cdf_and_variance_by_summation(epsilon):
    m = Geometric(epsilon=epsilon)
    k = np.arange(-2000, 2001)
    pmf = m.pmf(k)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(m.cdf(k[1000:1100]), np.cumsum(pmf)[1000:1100], atol=1e-12)
    assert m.variance() == pytest.approx(float((k**2 * pmf).sum()), rel=1e-10)
    # the closed forms of the cdf on both sides of 0
    a = m.a
    assert m.cdf(-3) == pytest.approx(a**3 / (1 + a))
    assert m.cdf(4) == pytest.approx(1 - a**5 / (1 + a))


def test_alias_and_parameters():
    assert DoubleGeometric is Geometric
    m = Geometric(epsilon=0.5, sensitivity=2)
    assert m.a == pytest.approx(math.exp(-0.25))
    assert m.scale == 4.0
    assert m.privacy_cost().epsilon == 0.5
    assert m.std() == pytest.approx(math.sqrt(m.variance()))

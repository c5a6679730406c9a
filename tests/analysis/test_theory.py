"""Closed forms of seed 000 against exact brute-force computations."""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from postdp import Geometric, Hierarchy, Laplace
from postdp.analysis import (
    geometric_h,
    l1_ball_probability,
    p_plus_bias_bound,
    ps_error_cdf,
    ps_error_density,
    ps_error_variance,
    ps_wasserstein_to_laplace,
)
from postdp.errors import ValidationError


def test_h_polynomials_by_their_definition():
    table = geometric_h(5, 6)
    for i in range(4):
        for s in range(7):
            assert table[i + 1][s] == sum(table[i][s - abs(v)] for v in range(-s, s + 1))
    assert table[1] == [2 * s + 1 for s in range(7)]  # h_1(r) = 2r + 1


@pytest.mark.parametrize("n", [1, 2, 3, 6])
@pytest.mark.parametrize("r", [0, 1, 4, 9])
def test_lemma8_geometric_equals_convolution(n, r):
    m = Geometric(epsilon=0.6)
    k = np.arange(0, 400)
    abs_law = np.where(k == 0, m.pmf(0), 2 * m.pmf(k))
    total = np.array([1.0])
    for _ in range(n):
        total = np.convolve(total, abs_law)[:400]
    assert l1_ball_probability(r, n, m) == pytest.approx(total[: r + 1].sum(), rel=1e-10)


@pytest.mark.parametrize("n", [1, 2, 5, 33])
def test_lemma8_laplace_is_the_gamma_cdf_and_the_series(n):
    lam, r = 5.0, 40.0
    series = 1 - math.exp(-r / lam) * sum((r / lam) ** i / math.factorial(i) for i in range(n))
    assert l1_ball_probability(r, n, Laplace.from_scale(lam)) == pytest.approx(series, rel=1e-12)


def test_lemma8_large_dimension_does_not_overflow():
    p = l1_ball_probability(2000, 254, Geometric(epsilon=0.5))
    assert 0.0 <= p <= 1.0


def test_thm11_bound_hand_case_and_vacuous_without_public_root():
    h = Hierarchy.from_parents(["S", "a", "b", "c"], [None, "S", "S", "S"], [60, 10, 20, 30])
    lam = 2.0
    bb = p_plus_bias_bound(h, Laplace.from_scale(lam), public="root")
    assert bb.r_m == 10 and bb.n == 3
    assert bb.c_prime == 50  # county a can go from 10 to 60
    assert bb.outside == pytest.approx(stats.gamma.sf(10, a=3, scale=lam))
    assert bb.bound == pytest.approx(50 * bb.outside)
    assert math.isinf(p_plus_bias_bound(h, Laplace.from_scale(lam)).c_prime)
    # a public county narrows the others' range: b, c then share 60 - 10
    inner = p_plus_bias_bound(h, Laplace.from_scale(lam), public=["S", "a"])
    assert inner.c_prime == 30 and inner.n == 2


def test_ps_law_integrates_to_one_with_the_thm12_variance():
    for n in (2, 15, 254):
        grid = np.linspace(-400, 400, 80001)
        dens = ps_error_density(grid, n, Laplace.from_scale(10.0))
        assert integrate.trapezoid(dens, grid) == pytest.approx(1.0, abs=1e-6)
        var = integrate.trapezoid(grid**2 * dens, grid)
        assert var == pytest.approx(ps_error_variance(n, Laplace.from_scale(10.0)), rel=2e-4)
    assert ps_error_variance(15, Laplace.from_scale(10.0)) == pytest.approx(186.6667, abs=1e-4)
    assert ps_error_variance(254, Laplace.from_scale(10.0)) == pytest.approx(199.2126, abs=1e-4)
    with pytest.raises(ValidationError):
        ps_error_density([0.0], 1, Laplace.from_scale(1.0))


def test_ps_law_n2_is_the_laplace_difference():
    # n = 2: the error is (eta_1 - eta_2)/2, whose density is known in closed form
    lam = 3.0
    x = np.linspace(-20, 20, 9)
    s = lam / 2  # (eta1 - eta2)/2 = difference of two Laplace(lam/2)
    exact = (1 + np.abs(x) / s) * np.exp(-np.abs(x) / s) / (4 * s)
    np.testing.assert_allclose(
        ps_error_density(x, 2, Laplace.from_scale(lam)), exact, rtol=2e-3, atol=1e-6
    )
    assert ps_error_cdf(0.0, 2, Laplace.from_scale(lam)) == pytest.approx(0.5, abs=1e-9)


def test_wasserstein_to_laplace_decreases_to_zero():
    w = [ps_wasserstein_to_laplace(n, Laplace.from_scale(1.0)) for n in (2, 5, 15, 50, 254, 1000)]
    assert all(a > b for a, b in itertools.pairwise(w))
    assert w[-1] < 0.01


def test_tiny_tails_keep_their_digits():
    from postdp.analysis import l1_ball_tail

    lam, r, n = 5.0, 695.0, 33
    series = math.exp(-r / lam) * sum((r / lam) ** i / math.factorial(i) for i in range(n))
    assert l1_ball_tail(r, n, Laplace.from_scale(lam)) == pytest.approx(series, rel=1e-10, abs=0)
    m = Geometric(epsilon=0.2)
    assert 0 < l1_ball_tail(1000, 3, m) < 1e-80

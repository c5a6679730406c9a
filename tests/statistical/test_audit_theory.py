"""The theory of seed 000_52243d433e48a03d.txt against the Monte Carlo engine (fixed seeds)."""

import math

import numpy as np
import pytest

from postdp import Geometric, Hierarchy, Laplace
from postdp.analysis import (
    ReleaseDesign,
    l1_ball_probability,
    p_plus_bias_bound,
    ps_error_cdf,
    ps_error_variance,
    simulate,
)
from postdp.data import county_hierarchy, load_county_populations
from tests.statistical._helpers import ALPHA_SEEDED, Z

pytestmark = pytest.mark.statistical


def _state(fips):
    df = load_county_populations()
    rows = df[(df["id"] == fips) | (df["parent"] == fips)].copy()
    rows.loc[rows["id"] == fips, "parent"] = None
    return Hierarchy.from_frame(rows)


@pytest.mark.parametrize("m", [Laplace.from_scale(2.0), Geometric(epsilon=0.5)], ids=repr)
@pytest.mark.parametrize("n", [1, 4, 12])
def test_lemma8_ball_probability_matches_monte_carlo(m, n):
    """Lemma 8 / Cor. 9: P(||x~ - x||_1 <= r) at radii around the median of ||eta||_1."""
    draws = m.sample(np.zeros(n, dtype=np.int64), rng=100 + n, size=100_000)
    norms = np.abs(draws).sum(axis=1)
    for r in np.quantile(norms, [0.1, 0.5, 0.9]).round():
        p = l1_ball_probability(float(r), n, m)
        se = math.sqrt(p * (1 - p) / norms.size)
        assert abs((norms <= r).mean() - p) <= Z * se + 1e-12


@pytest.mark.parametrize(("fips", "published"), [("04", 186.67), ("48", 199.21)])
def test_thm12_variance_arizona_texas_80000_draws(fips, published):
    """Thm 12 through the engine: (P) with the state total public is (P_S); lambda = 10, 80,000
    draws as in the seed; every county's error variance within 4.5 SE of 2 lambda^2 (1 - 1/n)."""
    h = _state(fips)
    n = h.leaves.size
    theory = ps_error_variance(n, Laplace.from_scale(10.0))
    assert round(theory, 2) == published
    res = simulate(
        ReleaseDesign(h, Laplace.from_scale(10.0), "project", public="root"),
        n_draws=80_000,
        batch=20_000,
        rng=int(fips),
    )
    leaves = h.leaves
    assert np.all(np.abs(res.variance[leaves] - theory) <= Z * res.variance_se[leaves])
    assert np.all(np.abs(res.bias[leaves]) <= Z * res.bias_se[leaves])


def test_thm12_law_ks():
    """The (P_S) error of one county follows the convolution law of Thm 12 (KS, n = 15)."""
    from scipy import stats

    eta = Laplace.from_scale(10.0).sample(np.zeros(15), rng=5, size=40_000)
    err = eta[:, 0] - eta.mean(axis=1)
    assert (
        stats.kstest(err, lambda x: ps_error_cdf(x, 15, Laplace.from_scale(10.0))).pvalue
        > ALPHA_SEEDED
    )


def test_thm11_new_mexico_bias_below_the_bound():
    """(P+) on New Mexico (public total, 33 counties), Laplace lambda = 5: the empirical bias
    and the Thm 11 bound, both reported. On the 2010 counts r_m = 695 and the bound is 1.6e-21,
    so every county's empirical bias must be 0 within 4.5 SE (and below the bound + 4.5 SE)."""
    h = _state("35")
    m = Laplace.from_scale(5.0)
    bound = p_plus_bias_bound(h, m, public="root")
    assert bound.r_m == 695 and bound.n == 33
    assert bound.bound == pytest.approx(1.64e-21, rel=0.01, abs=0.0)
    assert bound.outside > 0
    res = simulate(ReleaseDesign(h, m, "project-nonneg", public="root"), n_draws=40_000, rng=35)
    leaves = h.leaves
    worst = float(np.abs(res.bias[leaves]).max())
    assert np.all(np.abs(res.bias[leaves]) <= bound.bound + Z * res.bias_se[leaves]), (
        worst,
        bound.bound,
    )


def test_thm11_informative_case_small_counts():
    """A small state whose bound is not vacuous: four counties of 2..9 people, lambda = 1. The
    empirical (P+) bias of every county is below C' * Pr(outside) (+ 4.5 SE)."""
    h = Hierarchy.from_parents(
        ["S", "a", "b", "c", "d"], [None, "S", "S", "S", "S"], [26, 2, 5, 10, 9]
    )
    m = Laplace.from_scale(1.0)
    bound = p_plus_bias_bound(h, m, public="root")
    assert 0 < bound.bound < bound.c_prime
    res = simulate(ReleaseDesign(h, m, "project-nonneg", public="root"), n_draws=40_000, rng=4)
    assert np.all(np.abs(res.bias[1:]) <= bound.bound + Z * res.bias_se[1:])
    assert np.abs(res.bias[1:]).max() > 0  # and (P+) is visibly biased here


def test_thm7_p_unbiased_on_the_whole_county_hierarchy():
    """Thm 7 through the engine: every one of 3,195 nodes within 5 SE of zero (Bonferroni)."""
    h = county_hierarchy()
    res = simulate(ReleaseDesign(h, Laplace.from_scale(50.0), "project"), n_draws=6000, rng=7)
    assert np.all(np.abs(res.bias) <= 5 * res.bias_se)

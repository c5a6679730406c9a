"""Posterior modes and the release algorithm of seed 003 §3."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from postdp import Geometric, Hierarchy
from postdp.bayes import (
    bayes_release,
    bayes_release_hierarchy,
    finucan_mode,
    posterior_mode_independent,
    posterior_mode_summed,
    sum_law,
    sum_law_monte_carlo,
)
from postdp.errors import ValidationError
from tests.statistical._helpers import Z


def test_sum_law_is_the_convolution_and_has_the_summed_variance():
    mechs = [Geometric(1.0), Geometric(0.5), Geometric(2.0)]
    law = sum_law(mechs)
    assert law.pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert law.variance == pytest.approx(sum(m.variance() for m in mechs), rel=1e-10)
    # brute force over a box holding all but ~1e-9 of the mass
    a, b, c = np.meshgrid(np.arange(-25, 26), np.arange(-45, 46), np.arange(-15, 16), indexing="ij")
    w = mechs[0].pmf(a) * mechs[1].pmf(b) * mechs[2].pmf(c)
    tot = (a + b + c).ravel()
    brute = np.bincount(tot - tot.min(), weights=w.ravel())
    k = np.arange(-10, 11)
    np.testing.assert_allclose(np.exp(law.logpmf(k)), brute[k - tot.min()], rtol=1e-6)
    # Var(n*) of seed 003: 92.1, 0.7, 9991.7 for 50 components at eps = 1, 5, 0.1
    assert round(sum_law([Geometric(1.0)] * 50).variance, 1) == 92.1
    assert round(sum_law([Geometric(5.0)] * 50).variance, 1) == 0.7
    assert round(sum_law([Geometric(0.1)] * 50).variance, 1) == 9991.7


@pytest.mark.statistical
def test_monte_carlo_law_agrees_with_the_exact_one():
    mechs = [Geometric(1.0)] * 50
    mc = sum_law_monte_carlo(mechs, n_draws=100_000, rng=3)
    exact = sum_law(mechs)
    # the MC variance of 100,000 draws is within z SE of the exact one (kurtosis ~ 3)
    se = exact.variance * np.sqrt(2 / 100_000) * 1.1
    assert abs(mc.variance - exact.variance) <= Z * se


@pytest.mark.parametrize("grid_values", [1 << 18, 7, 400])
def test_summed_mode_equals_brute_force_argmax(grid_values, monkeypatch):
    """The mode is the argmax of the posterior on every candidate; the candidates scored a
    few rows at a time (``_GRID_VALUES``: one row, several rows with a short last part, all
    at once) give the same modes."""
    from postdp.bayes import posterior_mode

    monkeypatch.setattr(posterior_mode, "_GRID_VALUES", grid_values)
    g_total = Geometric(0.1)
    mechs = [Geometric(5.0)] * 50
    law = sum_law(mechs)
    rng = np.random.default_rng(0)
    n = rng.integers(-50, 400, 40)
    s = n + rng.integers(-80, 80, 40)
    got = posterior_mode_summed(n, s, g_total, law=law)
    grid = np.arange(0, 700)
    for i in range(40):
        score = np.abs(n[i] - grid) * np.log(g_total.a) + law.logpmf(s[i] - grid)
        assert got[i] == grid[np.argmax(score)]


@given(
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=1, max_value=12),
    st.sampled_from(["independent", "summed"]),
)
def test_released_counts_add_up_and_are_nonnegative_integers(seed, S, flavor):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 30, S)
    g = Geometric(float(rng.choice([0.2, 1.0, 3.0])))
    ns = g.sample(truth, rng=rng, size=20)
    n = g.sample(np.array([truth.sum()]), rng=rng, size=20)[:, 0]
    r = bayes_release(n, ns, total_mechanism=g, component_mechanisms=g, flavor=flavor)
    assert r.components.dtype == np.int64 and r.total.dtype == np.int64
    assert (r.components >= 0).all() and (r.total >= 0).all()
    np.testing.assert_array_equal(r.components.sum(axis=1), r.total)


def test_hierarchy_release_is_consistent_on_counties():
    from postdp.data import county_hierarchy

    h = county_hierarchy()
    g = Geometric(0.5)
    noisy = g.sample(h.counts, rng=4, size=3)
    for flavor in ("independent", "summed"):
        out = bayes_release_hierarchy(noisy, h, g, flavor=flavor)
        assert out.dtype == np.int64 and out.min() >= 0
        for p in (h.root, *h.levels[1][:5]):
            kids = np.flatnonzero(h.parent == p)
            np.testing.assert_array_equal(out[:, p], out[:, kids].sum(axis=1))
        assert np.abs(out[:, h.root] - h.counts[h.root]).max() < 60


@pytest.mark.parametrize(
    ("ids", "parents"),
    [
        ("T a b a1 a2 b1", [None, "T", "T", "a", "a", "b"]),  # a family of one child
        ("T a b a1 a2 b1 b2 b3", [None, "T", "T", "a", "a", "b", "b", "b"]),  # 2 and 3
        ("T a b c a1 a2 c1", [None, "T", "T", "T", "a", "a", "c"]),  # a leaf above the bottom
    ],
)
def test_hierarchy_release_is_consistent_when_families_differ_in_size(ids, parents):
    """Families narrower than the widest of their level whose modes are all 0 are split
    over their own children, as bayes_release splits them (they once leaked counts into
    the padding, and the parent no longer equalled the sum of its children)."""
    h = Hierarchy.from_parents(ids.split(), parents)
    noisy = np.random.default_rng(0).integers(-3, 10, size=(300, h.n))
    out = bayes_release_hierarchy(noisy, h, Geometric(0.5))
    assert out.min() >= 0
    for p in range(h.n):
        kids = np.flatnonzero(h.parent == p)
        if kids.size:
            np.testing.assert_array_equal(out[:, kids].sum(axis=1), out[:, p])
            modes = posterior_mode_independent(noisy[:, kids])
            np.testing.assert_array_equal(out[:, kids], finucan_mode(out[:, p], modes))


def test_budget_and_validation():
    g1, g2 = Geometric(1.0), Geometric(0.5)
    r = bayes_release([5], [[2, 3]], total_mechanism=g1, component_mechanisms=[g2, g1])
    assert r.budget.epsilon == 2.0  # total 1 + the largest (disjoint) component 1
    with pytest.raises(ValidationError, match="`flavor` must be 'independent' or 'summed'"):
        bayes_release([5], [[2, 3]], total_mechanism=g1, component_mechanisms=g1, flavor="x")
    with pytest.raises(ValidationError, match="one row per total"):
        bayes_release([5, 6], [[2, 3]], total_mechanism=g1, component_mechanisms=g1)
    with pytest.raises(ValidationError, match="one Geometric mechanism or one per component"):
        bayes_release([5], [[2, 3]], total_mechanism=g1, component_mechanisms=[g1])
    h = Hierarchy.from_parents(["T", "a"], [None, "T"])
    with pytest.raises(ValidationError, match="must have shape"):
        bayes_release_hierarchy([1, 2, 3], h, g1)

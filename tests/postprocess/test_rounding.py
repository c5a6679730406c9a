"""Stochastic rounding (seed 002 eq. (28)) and consistent integer rounding of a hierarchy."""

import numpy as np
import pytest

from postdp import Hierarchy, Laplace, project
from postdp.data import county_hierarchy
from postdp.errors import ValidationError
from postdp.postprocess import round_consistent, stochastic_round
from tests.postprocess.catalogue import CATALOGUE
from tests.statistical._helpers import Z


@pytest.mark.statistical
@pytest.mark.parametrize("x", [2.3, -0.75, 1e6 + 0.5, 7.0])
def test_stochastic_round_is_unbiased(x):
    n = 200_000
    out = stochastic_round(np.full(n, x), rng=4)
    frac = x - np.floor(x)
    assert set(np.unique(out)) <= {np.floor(x), np.floor(x) + 1}
    se = np.sqrt(frac * (1 - frac) / n)
    assert abs(out.mean() - x) <= Z * se + 1e-12


def test_stochastic_round_keeps_integers_and_shape():
    ints = np.array([[1, 2], [3, -4]])
    np.testing.assert_array_equal(stochastic_round(ints, rng=0), ints)
    assert stochastic_round(np.zeros((2, 3)) + 0.5, rng=0).shape == (2, 3)
    with pytest.raises(ValidationError, match=r"`x` must be finite"):
        stochastic_round([np.nan], rng=0)


@pytest.mark.parametrize("name", ["star", "unequal", "zeros", "chain"])
def test_round_consistent_sums_exactly_and_stays_within_one(name):
    h = CATALOGUE[name]()
    y = h.counts + np.random.default_rng(1).laplace(0, 5.0, size=(200, h.n))
    v = project(y, h)
    r = round_consistent(v, h, rng=2)
    assert r.dtype == np.int64 and r.shape == v.shape
    assert np.all(np.abs(r - v) < 1)
    for p in np.flatnonzero(~h.is_leaf):
        kids = np.flatnonzero(h.parent == p)
        np.testing.assert_array_equal(r[:, p], r[:, kids].sum(axis=1))
    assert r.min() >= 0  # nonnegative reals stay nonnegative


def test_round_consistent_on_counties_and_integers_unchanged():
    h = county_hierarchy()
    v = project(Laplace(0.1).sample(h.counts.astype(float), rng=3, size=20), h, public="root")
    r = round_consistent(v, h, rng=3)
    assert (r[:, h.root] == 308_745_538).all()
    assert np.all(np.abs(r - v) < 1)
    A_kids = r[:, 52:].reshape(20, -1)
    assert A_kids.sum(axis=1).tolist() == [308_745_538] * 20
    np.testing.assert_array_equal(round_consistent(h.counts, h, rng=0), h.counts)


@pytest.mark.statistical
def test_round_consistent_is_unbiased():
    """Every node's mean over 20,000 roundings of one consistent vector is within 5 SE of it."""
    h = CATALOGUE["unequal"]()
    v = project(h.counts + np.random.default_rng(8).laplace(0, 3.0, size=h.n), h)
    reps = round_consistent(np.broadcast_to(v, (20_000, h.n)), h, rng=9)
    mean = reps.mean(axis=0)
    se = reps.std(axis=0, ddof=1) / np.sqrt(reps.shape[0])
    moving = se > 0
    assert np.all(np.abs(mean - v)[moving] <= 5 * se[moving])
    np.testing.assert_allclose(mean[~moving], v[~moving])


def test_round_consistent_rejects_inconsistent_input():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    with pytest.raises(ValidationError, match=r"must be consistent .* largest gap is 1"):
        round_consistent(np.array([3.0, 1.0, 1.0]), h, rng=0)
    with pytest.raises(ValidationError, match=r"`values` must have shape \(\.\.\., 3\)"):
        round_consistent(np.zeros(4), h, rng=0)

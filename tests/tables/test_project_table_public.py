"""(P) on tables with public (invariant) queries at internal levels, against a dense GLS.

The reference solves the constrained generalised least-squares problem with every leaf
geounit's detailed cells as unknowns, by a null-space basis of the public rows: estimate
x0 + Z (Z'HZ)^-1 Z'M'W(y - M x0) and covariance Z (Z'HZ)^-1 Z' (H = M'WM, W the inverse
noise variances; seed ``000_52243d433e48a03d.txt``, Thm 7: (P) is the GLS estimate).
"""

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy, Laplace
from postdp.postprocess import TableProjector
from postdp.tables import (
    Measurement,
    Query,
    Table,
    TableMeasurements,
    Workload,
)
from tests.tables._reference import assert_equals_dense_gls, dense_gls, random_tree


def _public_case(seed):
    """A random design with a public query at every internal level and noisy queries at
    every level (the detailed cells at the leaves and at least one noisy query above)."""
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, int(rng.integers(3, 10)), "g")
    if seed % 3 == 0:  # chains: a parent with a single child, as in the reported case
        n = int(rng.integers(3, 6))
        geo = Hierarchy([f"g{i}" for i in range(n)], [-1, *range(n - 1)])
    cat = random_tree(rng, int(rng.integers(3, 8)), "c")
    table = Table(geo, cat, rng.integers(0, 30, (geo.leaves.size, cat.leaves.size)))
    measurements = []
    for d in range(geo.n_levels):
        leafy = bool(geo.is_leaf[geo.levels[d]].any())
        mech = Laplace(epsilon=float(rng.uniform(0.2, 2))) if rng.random() < 0.5 else None
        if leafy or mech is not None:
            mech = mech or Gaussian(rho=float(rng.uniform(0.1, 1)))
            measurements.append(Measurement(d, Query.detailed(cat), mech))
        leaves = cat.leaves[rng.permutation(cat.leaves.size)]
        k = int(rng.integers(1, leaves.size + 1))
        groups = np.array_split(leaves[:k], int(rng.integers(1, k + 1)))
        cells = [[str(cat.ids[j]) for j in g] for g in groups]
        if not geo.is_leaf[geo.levels[d]].all():
            # public below the root too
            measurements.append(Measurement(d, Query("q", cells), None))
            if d > 0 and rng.random() < 0.5:
                total = Query("total", [[str(cat.ids[cat.root])]])
                measurements.append(Measurement(d, total, None))  # overlapping invariants
        if rng.random() < 0.5:
            noise = Gaussian(rho=float(rng.uniform(0.1, 1)))
            measurements.append(Measurement(d, Query("q noisy", cells), noise))
    return table, Workload(measurements)


def test_chain_with_a_public_total_in_the_middle():
    # The reported case: S > m > a, categories T > {x, y}, detailed cells at every level
    # with variance 1, public total 11 at m. A chain forces equal rows; least squares
    # gives x = 5 - 1/6 and y = 19/3 - 1/6 everywhere (hand-computed).
    geo = Hierarchy.from_parents(["S", "m", "a"], [None, "S", "m"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    table = Table(geo, cat, [[5, 6]])
    noise = Gaussian(rho=0.5)
    workload = Workload(
        [
            Measurement(0, Query.detailed(cat), noise),
            Measurement(1, Query.detailed(cat), noise),
            Measurement(1, Query("total", [["T"]]), None),
            Measurement(2, Query.detailed(cat), noise),
        ]
    )
    answers = (
        np.array([[6.0, 6.0]]),
        np.array([[4.0, 8.0]]),
        np.array([[11.0]]),
        np.array([[5.0, 5.0]]),
    )
    got = postdp.project(TableMeasurements(table, workload, answers, False), nonneg=False)
    expected = np.array([5 - 1 / 6, 19 / 3 - 1 / 6])
    np.testing.assert_allclose(got, np.tile(expected, (3, 1)), rtol=1e-12)
    # every variance: the dense reference
    _, ref = dense_gls(TableMeasurements(table, workload, answers, False))
    np.testing.assert_allclose(TableProjector(table, workload).variances(), ref, atol=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_public_queries_at_every_level_equal_dense_gls(seed):
    table, workload = _public_case(seed)
    assert_equals_dense_gls(table, workload, seed)

"""Top-down for tables: equal to a per-family Clarabel reference, nonnegative, consistent."""

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Laplace
from postdp.errors import ValidationError
from postdp.tables import Measurement, Query, Table, Workload, measure
from tests._dask import dask_client
from tests.tables._reference import (
    assert_top_down_matches_reference,
    qp_top_down,
    random_tree,
)


def _case(seed):
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, int(rng.integers(2, 14)), "g")
    cat = random_tree(rng, int(rng.integers(2, 9)), "c")
    cells = rng.integers(0, 4, (geo.leaves.size, cat.leaves.size))  # many small counts
    cells[rng.random(cells.shape) < 0.4] = 0
    table = Table(geo, cat, cells)
    items = []
    for d in range(geo.n_levels):
        items.append(
            Measurement(d, Query.detailed(cat), Laplace(epsilon=float(rng.uniform(0.3, 2))))
        )
        if rng.random() < 0.5:  # a second measurement of some single cells, other weight
            leaves = [
                str(cat.ids[j]) for j in cat.leaves[: int(rng.integers(1, cat.leaves.size + 1))]
            ]
            items.append(Measurement(d, Query.nodes(leaves, name="again"), Gaussian(rho=0.3)))
    if rng.random() < 0.5:
        items.append(Measurement(0, Query("total", [[str(cat.ids[0])]]), None))
    return table, Workload(items)


def _own(measurements):
    """Each level's own weighted estimates and cell weights, by hand."""
    table = measurements.table
    c = table.categories.leaves.size
    own, weights = [], []
    for d in range(table.geography.n_levels):
        total = np.zeros((table.geography.levels[d].size, c))
        weight = np.zeros(c)
        for m, v in zip(measurements.workload.measurements, measurements.values, strict=True):
            if m.level == d and not m.public:
                cells = np.argmax(m.query.matrix(table.categories), axis=1)
                weight[cells] += 1 / m.variance
                total[:, cells] += v / m.variance
        own.append(total / weight)
        weights.append(weight)
    return own, weights


@pytest.mark.parametrize("seed", range(16))
def test_top_down_equals_a_per_family_reference(seed):
    table, workload = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = postdp.top_down(draws)
    geo = table.geography
    assert ours.min() >= 0
    kids = np.zeros_like(ours)
    np.add.at(kids, geo.parent[geo.parent >= 0], ours[geo.parent >= 0])
    np.testing.assert_allclose(ours[~geo.is_leaf], kids[~geo.is_leaf], rtol=0, atol=1e-9)
    own, weights = _own(draws)
    ref = qp_top_down(draws, own, weights, ours)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * scale)


def test_batched_draws_match_one_by_one():
    table, workload = _case(3)
    draws = measure(table, workload, secure=False, rng=0, size=4)
    batch = postdp.top_down(draws)
    for i in range(4):
        one = type(draws)(table, workload, tuple(v[i] for v in draws.values), False)
        np.testing.assert_allclose(batch[i], postdp.top_down(one), rtol=0, atol=1e-12)


def test_workloads_top_down_cannot_run_are_refused():
    table, _ = _case(1)
    cat = table.categories
    deepest = table.geography.n_levels - 1
    detailed = [
        Measurement(d, Query.detailed(cat), Laplace(epsilon=1.0)) for d in range(deepest + 1)
    ]
    with pytest.raises(ValidationError, match="identify every detailed cell"):
        postdp.top_down(measure(table, Workload(detailed[:-1]), secure=False, rng=0))
    if deepest >= 1:
        public = Measurement(1, Query("total", [[str(cat.ids[0])]]), None)
        with pytest.raises(ValidationError, match="public queries at the root only"):
            postdp.top_down(measure(table, Workload([*detailed, public]), secure=False, rng=0))


def _grouped(seed):
    """Detailed cells at every level plus grouped noisy queries at some levels and public
    groups (possibly overlapping) at the root: the families' cells are coupled."""
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, int(rng.integers(3, 14)), "g")
    cat = random_tree(rng, int(rng.integers(3, 9)), "c")
    cells = rng.integers(0, 5, (geo.leaves.size, cat.leaves.size))
    cells[rng.random(cells.shape) < 0.4] = 0
    items = []
    for d in range(geo.n_levels):
        items.append(Measurement(d, Query.detailed(cat), Laplace(epsilon=rng.uniform(0.2, 1))))
        if d == 0 or rng.random() < 0.7:
            leaves = cat.leaves[rng.permutation(cat.leaves.size)]
            k = int(rng.integers(2, leaves.size + 1))
            groups = np.array_split(leaves[:k], int(rng.integers(1, k)))
            query = Query("g", [[str(cat.ids[j]) for j in g] for g in groups])
            items.append(Measurement(d, query, Gaussian(rho=float(rng.uniform(0.2, 1)))))
    items.append(Measurement(0, Query("total", [[str(cat.ids[0])]]), None))
    if rng.random() < 0.5:
        items.append(Measurement(0, Query("one", [[str(cat.ids[cat.leaves[0]])]]), None))
    return Table(geo, cat, cells), Workload(items)


@pytest.mark.parametrize("seed", range(12))
def test_coupled_top_down_equals_a_per_family_reference(seed):
    table, workload = _grouped(seed)
    assert_top_down_matches_reference(measure(table, workload, secure=False, rng=seed))


def test_coupled_top_down_batches_match_one_by_one():
    table, workload = _grouped(2)
    draws = measure(table, workload, secure=False, rng=0, size=3)
    batch = postdp.top_down(draws)
    for i in range(3):
        one = type(draws)(table, workload, tuple(v[i] for v in draws.values), False)
        np.testing.assert_allclose(batch[i], postdp.top_down(one), rtol=0, atol=1e-12)


@pytest.mark.processes
def test_dask_partitions_give_the_local_result():
    from postdp.data import synthetic_table

    table = synthetic_table((3, 4, 3, 2), leaf_mean=40, rng=2)
    cat = table.categories
    w = Workload(
        [Measurement(0, Query("total", [["P1_001N"]]), None)]
        + [Measurement(d, Query.detailed(cat), Gaussian(rho=0.5)) for d in range(5)]
    )
    draws = measure(table, w, secure=False, rng=4, size=2)
    local = postdp.top_down(draws)
    with dask_client() as client:
        remote = postdp.top_down(draws, client=client)
    np.testing.assert_array_equal(remote, local)
    geo = table.geography
    kids = np.zeros_like(local)
    np.add.at(kids, (slice(None), geo.parent[geo.parent >= 0]), local[:, geo.parent >= 0])
    np.testing.assert_allclose(local[:, ~geo.is_leaf], kids[:, ~geo.is_leaf], atol=1e-9)


def test_a_root_fixed_by_invariants_alone():
    """A subtree released below a histogram fixed from above: the root's cells are public
    queries with no noisy measurement of their own (streamed, state-by-state releases)."""
    table, _ = _case(4)
    cat = table.categories
    fixed = table.counts()[0, cat.leaves].astype(float) + 0.25
    work = Workload(
        [Measurement(0, Query.detailed(cat), None)]
        + [
            Measurement(d, Query.detailed(cat), Laplace(epsilon=1.0))
            for d in range(1, table.geography.n_levels)
        ]
    )
    draws = measure(table, work, secure=False, rng=0)
    given = type(draws)(table, work, (fixed[None, :], *draws.values[1:]), False)
    out = postdp.top_down(given)
    np.testing.assert_allclose(out[0], fixed, rtol=0, atol=1e-12)
    assert out.min() >= 0
    without_root = Workload(work.measurements[1:])
    with pytest.raises(ValidationError, match="identify every detailed cell"):
        postdp.top_down(measure(table, without_root, secure=False, rng=0))

"""(P+) on tables: equal to cvxpy + Clarabel, certified by its KKT report, consistent."""

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Laplace
from postdp.data import load_p1
from postdp.errors import ValidationError
from postdp.postprocess import TableNonnegProjector
from postdp.tables import Measurement, Query, Table, Workload, measure
from tests.tables._reference import qp_table, random_case, random_tree


def _adversarial(seed):
    """Small counts, many zeros and loud noise (most cells end at 0), random public and
    noisy groups at any level, leaf levels included."""
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, int(rng.integers(2, 16)), "g")
    cat = random_tree(rng, int(rng.integers(2, 9)), "c")
    cells = rng.integers(0, 3, (geo.leaves.size, cat.leaves.size))
    cells[rng.random(cells.shape) < 0.6] = 0
    items = []
    for d in range(geo.n_levels):
        items.append(Measurement(d, Query.detailed(cat), Laplace(epsilon=rng.uniform(0.1, 0.5))))
        if rng.random() < 0.5:
            leaves = cat.leaves[rng.permutation(cat.leaves.size)]
            k = int(rng.integers(1, leaves.size + 1))
            groups = np.array_split(leaves[:k], int(rng.integers(1, k + 1)))
            query = Query("q", [[str(cat.ids[j]) for j in g] for g in groups])
            items.append(Measurement(d, query, None if rng.random() < 0.4 else Gaussian(rho=0.2)))
    return Table(geo, cat, cells), Workload(items)


def _check(ours, draws, nonneg_ref):
    scale = max(1.0, float(np.abs(nonneg_ref).max()))
    np.testing.assert_allclose(ours, nonneg_ref, rtol=0, atol=1e-6 * scale)
    geo = draws.table.geography
    assert ours[geo.leaves].min() >= 0  # exactly: held cells are 0, free ones >= 0
    kids = np.zeros_like(ours)
    np.add.at(kids, geo.parent[geo.parent >= 0], ours[geo.parent >= 0])
    np.testing.assert_allclose(ours[~geo.is_leaf], kids[~geo.is_leaf], rtol=0, atol=1e-9 * scale)
    report = postdp.kkt_report(ours, draws)
    assert report.worst_relative() < 1e-9, report


@pytest.mark.parametrize("seed", range(20))
def test_nonneg_equals_clarabel_on_random_tables(seed):
    table, workload = random_case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    _check(TableNonnegProjector(table, workload)(draws), draws, qp_table(draws, nonneg=True))


@pytest.mark.parametrize("seed", range(24))
def test_nonneg_equals_clarabel_on_adversarial_tables(seed):
    table, workload = _adversarial(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    _check(TableNonnegProjector(table, workload)(draws), draws, qp_table(draws, nonneg=True))


def test_without_negatives_nonneg_is_the_projection():
    table, workload = random_case(3)
    draws = measure(table, workload, secure=False, rng=3)
    plain = postdp.project(draws, nonneg=False)
    if plain[table.geography.leaves].min() >= 0:
        np.testing.assert_allclose(TableNonnegProjector(table, workload)(draws), plain, atol=1e-9)


def test_batches_are_solved_draw_by_draw():
    table, workload = _adversarial(4)
    draws = measure(table, workload, secure=False, rng=1, size=3)
    projector = TableNonnegProjector(table, workload)
    batch = projector(draws)
    for i in range(3):
        one = type(draws)(table, workload, tuple(v[i] for v in draws.values), False)
        np.testing.assert_allclose(batch[i], projector(one), rtol=0, atol=1e-12)


def test_the_report_flags_a_wrong_estimate():
    table, workload = _adversarial(6)
    draws = measure(table, workload, secure=False, rng=6)
    ours = TableNonnegProjector(table, workload)(draws)
    geo = table.geography
    wrong = ours.copy()
    leaf = geo.leaves[0]
    wrong[leaf, 0] += 1.0  # still consistent once the ancestors follow
    node = int(geo.parent[leaf])
    while node >= 0:
        wrong[node, 0] += 1.0
        node = int(geo.parent[node])
    assert postdp.kkt_report(wrong, draws).worst_relative() > 1e-3


def test_a_negative_public_total_is_refused():
    rng = np.random.default_rng(0)
    geo = random_tree(rng, 5, "g")
    cat = random_tree(rng, 3, "c")
    table = Table(geo, cat, np.zeros((geo.leaves.size, cat.leaves.size), dtype=int))
    total = Measurement(0, Query("total", [[str(cat.ids[0])]]), None)
    work = Workload(
        [total]
        + [Measurement(d, Query.detailed(cat), Laplace(epsilon=1.0)) for d in range(geo.n_levels)]
    )
    draws = measure(table, work, secure=False, rng=0)
    values = list(draws.values)
    values[0] = values[0] - 5.0  # an invariant below zero (not from a real table)
    bad = type(draws)(table, work, tuple(values), False)
    with pytest.raises(ValidationError, match="negative total"):
        TableNonnegProjector(table, work)(bad)


def test_us_county_table_is_certified():
    """The national county table (3,274 geounits x 63 cells, public national total): every
    cell >= 0, the total held, KKT residuals at rounding level."""
    t = load_p1("us-county")
    cat = t.categories
    items = [Measurement(0, Query("total", [["P1_001N"]]), None)]
    items += [Measurement(d, Query.detailed(cat), Gaussian(rho=0.05)) for d in range(3)]
    work = Workload(items)
    draws = measure(t, work, secure=False, rng=0)
    out = TableNonnegProjector(t, work)(draws)
    assert out.min() >= 0 and out[0].sum() == pytest.approx(334_735_155, rel=1e-12)
    assert postdp.kkt_report(out, draws).worst_relative() < 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_the_root_update_cell_by_cell_equals_the_matrix_update(seed):
    """When the root's answers each read one detailed cell with noise, the pivoting updates
    the root cell by cell; that equals the matrix Kalman update (two answers of one cell
    included, and held cells, whose summed variance is 0)."""
    from postdp.postprocess._solvers.nonneg_pivoting import (
        _single_cell_update,
        _single_cells,
        _update,
    )

    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 9))
    cells = np.concatenate([np.arange(c), rng.integers(0, c, int(rng.integers(0, 4)))])
    A = np.zeros((cells.size, c))
    A[np.arange(cells.size), cells] = 1.0
    r = rng.uniform(0.3, 4.0, cells.size)
    s = rng.uniform(0.0, 5.0, c) * (rng.random(c) < 0.7)
    m = rng.normal(0, 10, c)
    y = rng.normal(0, 10, (2, cells.size))
    assert _single_cells(A, r)
    ours = _single_cell_update(s, m, A, r, y)
    theirs = _update(np.broadcast_to(np.diag(s), (2, c, c)), np.tile(m, (2, 1)), A, r, y)[1]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-10)
    r0 = r.copy()
    r0[0] = 0.0  # a public answer: the matrix update
    assert not _single_cells(A, r0)
    assert not _single_cells(
        np.vstack([A, np.ones((1, c)) if c > 1 else 2 * A[:1]]), np.ones(A.shape[0] + 1)
    )

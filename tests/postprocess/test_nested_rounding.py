"""The 2020 TopDown's rounder for one family as a minimum-cost flow: the integral answer is
the L1-closest over nested queries (checked against every 0/1 completion of tiny families),
keeps the parent's cells and the fixed totals exactly, and refuses queries that do not nest."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from postdp.errors import ConvergenceError, ValidationError
from postdp.postprocess.topdown2020.rounding import round_nested


def _cost(out, x, chain, cell_w, total_w):
    err = out - x
    cost = cell_w * np.abs(err).sum() + total_w * np.abs(err.sum(axis=1)).sum()
    for groups, w in chain:
        for g in np.unique(groups):
            cost += w * np.abs(err[:, groups == g].sum(axis=1)).sum()
    return cost


def _brute(x, chain, cell_w, total_w, parent=None, totals=None, bounds=None, fixed=None):
    base = np.floor(x).astype(int)
    k, m = x.shape
    best = np.inf
    for bits in itertools.product([0, 1], repeat=k * m):
        out = base + np.array(bits).reshape(k, m)
        if parent is not None and (out.sum(axis=0) != parent).any():
            continue
        if totals is not None and (out.sum(axis=1) != totals).any():
            continue
        if fixed is not None and (out[fixed] != base[fixed]).any():
            continue
        if bounds is not None:
            sums = np.stack([np.bincount(chain[0][0], row, minlength=2) for row in out])
            if (sums < bounds[0]).any() or (sums > bounds[1]).any():
                continue
        best = min(best, _cost(out, x, chain, cell_w, total_w))
    return best


def _family(seed, k=3, m=4):
    rng = np.random.default_rng(seed)
    parent = rng.integers(0, 6, m)
    share = rng.dirichlet(np.ones(k), size=m).T  # (k, m) columns add up to 1
    return parent * share, parent


CHAIN = [(np.array([0, 0, 1, 1]), 1.0), (np.array([0, 1, 2, 2]), 1.0)]


@pytest.mark.parametrize("seed", range(8))
def test_the_flow_is_the_l1_closest_integer_family(seed):
    x, parent = _family(seed)
    got = round_nested(x, CHAIN, cell_weight=2.0, parent=parent, total_weight=1.0)
    assert (got.x.sum(axis=0) == parent).all() and (got.x >= np.floor(x)).all()
    assert (got.x <= np.floor(x) + 1).all()
    want = _brute(x, CHAIN, 2.0, 1.0, parent=parent)
    assert got.cost == pytest.approx(want, abs=1e-9)
    assert got.cost == pytest.approx(_cost(got.x, x, CHAIN, 2.0, 1.0), abs=1e-9)
    assert got.bound <= got.cost + 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_fixed_totals_are_kept(seed):
    x, parent = _family(10 + seed)
    totals = np.floor(x.sum(axis=1)).astype(int)
    totals[: parent.sum() - totals.sum()] += 1  # add up to the parent's total
    got = round_nested(x, CHAIN, cell_weight=1.0, parent=parent, totals=totals)
    assert (got.x.sum(axis=1) == totals).all() and (got.x.sum(axis=0) == parent).all()
    assert got.cost == pytest.approx(_brute(x, CHAIN, 1.0, 0.0, parent, totals), abs=1e-9)


def test_the_root_rounds_its_total_freely_or_to_a_fixed_value():
    x = np.array([[0.4, 0.4, 0.4, 2.6]])
    free = round_nested(x, CHAIN, cell_weight=1.0, total_weight=1.0)
    assert free.cost == pytest.approx(_brute(x, CHAIN, 1.0, 1.0), abs=1e-9)
    fixed = round_nested(x, CHAIN, cell_weight=1.0, totals=np.array([5]))
    assert fixed.x.sum() == 5
    assert fixed.cost == pytest.approx(_brute(x, CHAIN, 1.0, 0.0, totals=[5]), abs=1e-9)


def test_queries_that_do_not_nest_are_refused():
    x, parent = _family(0)
    crossing = [(np.array([0, 0, 1, 1]), 1.0), (np.array([0, 1, 1, 2]), 1.0)]
    with pytest.raises(ValidationError, match="nest"):
        round_nested(x, crossing, cell_weight=1.0, parent=parent)


@pytest.mark.parametrize("seed", range(8))
def test_group_bounds_and_held_cells_are_kept_at_the_l1_closest(seed):
    """Bounds on the first chain query's counts per child (a group-quarters type at least
    its facilities, or 0) and cells held at their floor, taken from a random feasible
    completion: the flow meets them and its cost is the smallest over every 0/1 completion
    that does; bounds no completion meets are refused."""
    x, parent = _family(20 + seed)
    rng = np.random.default_rng(seed)
    base = np.floor(x).astype(int)
    k, m = x.shape
    feasible = [
        out
        for bits in itertools.product([0, 1], repeat=k * m)
        if ((out := base + np.array(bits).reshape(k, m)).sum(axis=0) == parent).all()
    ]
    some = feasible[rng.integers(len(feasible))]
    sums = np.stack([np.bincount(CHAIN[0][0], row, minlength=2) for row in some])
    pick = rng.random(sums.shape)
    lo = np.where(pick < 0.4, sums, 0)
    hi = np.where(pick > 0.7, sums, np.inf)
    fixed = (rng.random(x.shape) < 0.3) & (some == base)
    kwargs = {"cell_weight": 1.0, "parent": parent, "total_weight": 1.0, "fixed": fixed}
    got = round_nested(x, CHAIN, **kwargs, bounds=[(lo, hi), None])
    out_sums = np.stack([np.bincount(CHAIN[0][0], row, minlength=2) for row in got.x])
    assert (out_sums >= lo).all() and (out_sums <= hi).all()
    assert (got.x[fixed] == base[fixed]).all() and (got.x.sum(axis=0) == parent).all()
    want = _brute(x, CHAIN, 1.0, 1.0, parent, bounds=(lo, hi), fixed=fixed)
    assert got.cost == pytest.approx(want, abs=1e-9) and got.bound <= got.cost + 1e-9
    with pytest.raises(ConvergenceError):  # a count above what its cells can hold
        round_nested(x, CHAIN, **kwargs, bounds=[(lo + base.sum() + k * m, hi), None])


def _milp_optimum(x, parent, chain, cell_w, total_w):
    """The L1-closest integer family by scipy's MILP on its own formulation (0/1 steps over
    the floors, one variable per absolute value): an independent reference."""
    from scipy import optimize, sparse

    k, m = x.shape
    base = np.floor(x)
    terms = [(np.eye(m), cell_w)] if cell_w else []
    terms += [((groups[None, :] == g[:, None]).astype(float), w) for groups, w in chain
              for g in [np.unique(groups)]]  # fmt: skip
    terms += [(np.ones((1, m)), total_w)] if total_w else []
    n_z = k * m
    blocks, rhs, weights = [], [], []
    for rows, w in terms:  # rows (r, m): each term's cells; per child, its sums
        for c in range(k):
            pick = np.zeros((rows.shape[0], n_z))
            pick[:, c * m : (c + 1) * m] = rows
            blocks.append(pick)
            rhs.append(rows @ (x[c] - base[c]))  # sum(z) - rhs = the term's error
            weights.append(np.full(rows.shape[0], w))
    P, r, w = np.vstack(blocks), np.concatenate(rhs), np.concatenate(weights)
    n_t = r.size
    eye = sparse.eye(n_t)
    A = sparse.vstack([
        sparse.hstack([sparse.csr_array(P), -eye]),   # P z - t <= r
        sparse.hstack([sparse.csr_array(-P), -eye]),  # -P z - t <= -r
        sparse.hstack([sparse.csr_array(np.tile(np.eye(m), k)), sparse.csr_array((m, n_t))]),
    ])  # fmt: skip
    need = parent - base.sum(axis=0)
    lo = np.concatenate([np.full(2 * n_t, -np.inf), need])
    hi = np.concatenate([r, -r, need])
    upper = np.concatenate([np.ones(n_z), np.full(n_t, np.inf)])
    res = optimize.milp(
        np.concatenate([np.zeros(n_z), w]),
        constraints=optimize.LinearConstraint(A, lo, hi),
        integrality=np.concatenate([np.ones(n_z), np.zeros(n_t)]),
        bounds=optimize.Bounds(np.zeros(n_z + n_t), upper),
    )
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("seed", range(6))
def test_sparse_parents_drop_dead_arcs_and_stay_the_l1_closest(seed):
    """Families whose parent is 0 in most cells (as a block group's blocks): the arcs into
    those cells, and the groups left with no live cell, are dropped before the linear
    program; the result is still the optimum of an independent MILP."""
    rng = np.random.default_rng(100 + seed)
    k, m = 5, 24
    parent = np.where(rng.random(m) < 0.7, 0, rng.integers(1, 9, m))
    x = parent * rng.dirichlet(np.ones(k) * 0.5, size=m).T
    chain = [(np.arange(m) // 12, 1.0), (np.arange(m) // 3, 1.0)]
    got = round_nested(x, chain, cell_weight=1.0, parent=parent, total_weight=1.0)
    assert (got.x.sum(axis=0) == parent).all() and (got.x >= np.floor(x)).all()
    assert (got.x[:, parent == 0] == 0).all()
    want = _milp_optimum(x, parent, chain, 1.0, 1.0)
    assert got.cost == pytest.approx(want, abs=1e-7)
    assert got.bound == pytest.approx(got.cost, abs=1e-7)


def test_a_family_with_nothing_to_move_needs_no_linear_program():
    """Every arc dead (parent 0 in every cell, or cells already whole): the zero flow,
    its cost the distance of the floors; a need that no arc can meet is refused."""
    zeros = np.zeros((3, 4))
    got = round_nested(zeros, CHAIN, cell_weight=1.0, parent=np.zeros(4, dtype=int))
    assert (got.x == 0).all() and got.cost == 0.0 and got.bound == 0.0
    whole = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    fixed = np.ones(whole.shape, dtype=bool)
    got = round_nested(whole, CHAIN, cell_weight=1.0, parent=whole.sum(0).astype(int),
                       totals=whole.sum(1).astype(int), fixed=fixed)  # fmt: skip
    assert (got.x == whole).all() and got.cost == 0.0
    with pytest.raises(ConvergenceError):
        round_nested(whole, CHAIN, cell_weight=1.0, parent=whole.sum(0).astype(int) + 1,
                     totals=whole.sum(1).astype(int) + np.array([2, 0]), fixed=fixed)  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_the_incidence_matrix_is_the_sparse_rows_picked(seed):
    """The rounder's network matrix, built straight from its arcs, equals the node-arc
    incidence matrix built by scipy with the rows not kept dropped (-1 at an arc's tail,
    +1 at its head), its rows sorted within each column as HiGHS is given them."""
    from scipy import sparse

    from postdp.postprocess.topdown2020.rounding import _incidence

    rng = np.random.default_rng(seed)
    nodes, arcs = int(rng.integers(2, 30)), int(rng.integers(1, 80))
    ends = rng.integers(0, nodes, size=(arcs, 2))
    ends[:, 1] = np.where(ends[:, 0] == ends[:, 1], (ends[:, 1] + 1) % nodes, ends[:, 1])
    keep = rng.random(nodes) < 0.8
    full = sparse.csr_array(
        (np.repeat([[-1.0, 1.0]], arcs, axis=0).T.ravel(),
         (ends.T.ravel(), np.tile(np.arange(arcs), 2))),
        shape=(nodes, arcs),
    )  # fmt: skip
    ours = _incidence(ends, keep)
    assert ours.format == "csc" and ours.has_sorted_indices
    assert ours.shape == (int(keep.sum()), arcs)
    np.testing.assert_array_equal(ours.toarray(), full[keep].toarray())
    ref = full[keep].tocsc()
    ref.sort_indices()
    np.testing.assert_array_equal(ours.indices, ref.indices)
    np.testing.assert_array_equal(ours.indptr, ref.indptr)

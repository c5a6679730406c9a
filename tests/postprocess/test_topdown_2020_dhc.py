"""The 2020 TopDown of the DHC persons design (issue 46; ``shared/research/dhc-2020-design.md``
section 4.2): two outer passes per parent with the PL94 histogram held.

- the root's matrix-free least squares with the PL94 cells' sums held
  (``postdp/postprocess/_solvers/grouped_nnls.py``) and a family's split with many public
  rows (``postdp/postprocess/topdown2020/family_rows.py``) equal Clarabel on random inputs,
  with their KKT certificates;
- on a synthetic District of Columbia county (10 geounits): integral, nonnegative,
  consistent, the PL94 histogram of every geounit equal to the one held, the 32 edits kept,
  each child's 40-age-group counts adding up to its parent's;
- bad inputs refused before anything is solved.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from postdp.data import synthetic_dhc_population
from postdp.errors import ValidationError
from postdp.postprocess import top_down_2020
from postdp.postprocess._solvers.grouped_nnls import MarginalGram, grouped_nnls
from postdp.postprocess.topdown2020.dhc import COARSE
from postdp.postprocess.topdown2020.family import LevelQuadratic
from postdp.postprocess.topdown2020.family_free import solve_family_free
from postdp.postprocess.topdown2020.family_rows import potentials, solve_family_rows
from postdp.tables import Query, dhc_schema, dhc_structural_zeros, load_strategy, measure
from postdp.tables.strategies import PL94_IN_DHC
from tests.postprocess._dhc import true_pl94
from tests.postprocess._reference import CLARABEL_TIGHT

# the DHC county's tests peak at about 1.47 GB (the 1.2-million-cell draw: 1.05 GB)


def _queries(shape):
    """Count indices of a few crossing marginals of a small schema (one of them partial)."""
    idx = np.indices(shape).reshape(len(shape), -1)
    return [
        np.arange(idx.shape[1]),  # the cells themselves: H positive definite
        idx[0] * shape[1] + idx[1],
        idx[2],
        idx[1] * shape[3] + idx[3],
        np.where(idx[2] < 2, idx[0], -1),
    ]


def _dense(queries, weights, m):
    H = np.zeros((m, m))
    for q, w in zip(queries, weights, strict=True):
        inside = q >= 0
        same = (q[:, None] == q[None, :]) & inside[:, None] & inside[None, :]
        H += w * same
    return H


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_nnls_equals_clarabel_with_its_certificate(seed):
    rng = np.random.default_rng(seed)
    shape = (4, 3, 5, 2)
    m = int(np.prod(shape))
    queries = _queries(shape)
    weights = list(rng.uniform(0.2, 3.0, len(queries)))
    truth = rng.poisson(0.7, m).astype(float)
    H = _dense(queries, weights, m)
    b = H @ truth + rng.normal(0, 3.0, m)
    group = np.indices(shape).reshape(4, -1)[0]  # the first attribute's cells
    h = np.bincount(group, truth)
    gram = MarginalGram(queries, weights)
    scale = max(1.0, np.abs(b).max(), gram.lipschitz() * h.max())  # as the DHC root's
    res = grouped_nnls(gram, b, group, h, tol=1e-11 * scale)
    assert res.worst <= 1e-9 * scale
    v = cp.Variable(m)
    G = np.zeros((h.size, m))
    G[group, np.arange(m)] = 1.0
    objective = cp.Minimize(0.5 * cp.quad_form(v, cp.psd_wrap(H)) - b @ v)
    cp.Problem(objective, [v >= 0, G @ v == h]).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert np.abs(res.x - v.value).max() <= 1e-5
    f = lambda x: 0.5 * x @ H @ x - b @ x  # noqa: E731
    assert f(res.x) <= f(v.value) + 1e-9 * abs(f(v.value))
    assert (res.x >= 0).all() and np.abs(G @ res.x - h).max() <= 1e-9


def _family(seed, k=4, rate=0.6, shape=(3, 3, 4, 2), spread=1.5):
    """A DHC-like family: k children, the parent's positive cells, each child's counts in
    row groups of the cells held (some at 0), integer data (degenerate optima)."""
    rng = np.random.default_rng(seed)
    queries = _queries(shape)
    weights = list(rng.uniform(0.5, 2.0, len(queries)))
    c = int(np.prod(shape))
    kids = rng.poisson(rate, (k, c))
    parent = kids.sum(axis=0)
    cells = np.flatnonzero(parent > 0)
    m = cells.size
    row_of = np.indices(shape).reshape(4, -1)[0][cells] * 2 + (cells % 2)
    present, where = np.unique(row_of, return_inverse=True)
    G = np.zeros((present.size, m))
    G[where, np.arange(m)] = 1.0
    g = kids[:, cells] @ G.T
    quad = LevelQuadratic(queries, weights)
    noisy = [np.bincount(q[q >= 0], kids[j][q >= 0]) for j in range(k) for q in queries]
    answers = [
        np.stack([noisy[j * len(queries) + i] for j in range(k)]) + rng.normal(0, spread, (k, 1))
        for i in range(len(queries))
    ]
    b = quad.linear(answers, cells)
    return quad, cells, b, parent[cells].astype(float), G, g, where


def _clarabel_family(H, b, p, G, g, a):
    k, m = b.shape
    X = cp.Variable((k, m))
    objective = sum(0.5 * a[j] * cp.quad_form(X[j], cp.psd_wrap(H)) - b[j] @ X[j] for j in range(k))
    cons = [X >= 0, cp.sum(X, axis=0) == p] + [G @ X[j] == g[j] for j in range(k)]
    cp.Problem(cp.Minimize(objective), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    return X.value


def _objective(H, b, a):
    return lambda x: sum(0.5 * a[j] * x[j] @ H @ x[j] - b[j] @ x[j] for j in range(len(a)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_family_with_public_rows_equals_clarabel(seed):
    quad, cells, b, p, G, g, _ = _family(seed)
    H = quad.block(cells)
    res = solve_family_rows(H, b, p, tol=1e-11 * max(1.0, np.abs(b).max()), G=G, g=g)
    assert res.worst <= 1e-9 * max(1.0, np.abs(b).max())
    ones = np.ones(b.shape[0])
    ref = _clarabel_family(H, b, p, G, g, ones)
    f = _objective(H, b, ones)
    assert f(res.x) <= f(ref) + 1e-9 * abs(f(ref))  # Clarabel stops a little short
    assert np.abs(res.x - ref).max() <= 1e-4
    np.testing.assert_allclose(res.x.sum(axis=0), p, atol=1e-9)
    np.testing.assert_allclose(res.x @ G.T, g, atol=1e-9)


@pytest.mark.parametrize(
    ("seed", "k", "rate", "weighted"),
    [(0, 4, 0.6, False), (1, 4, 0.6, True), (2, 12, 0.15, False), (3, 12, 0.15, True)],
)
def test_matrix_free_family_equals_clarabel_and_the_dense_solver(seed, k, rate, weighted):
    """``family_free.py``: the matrix-free split (barrier, then pivoting, then the
    certificate) equals Clarabel and the dense solver, children's weights a_j included;
    the 12-child cases are the sparse, degenerate families of blocks."""
    quad, cells, b, p, G, g, where = _family(seed, k=k, rate=rate)
    a = np.random.default_rng(seed).uniform(0.5, 2.0, k) if weighted else np.ones(k)
    b = b * a[:, None]
    H = quad.block(cells)
    tol = 1e-11 * max(1.0, np.abs(b).max())
    gram = MarginalGram([q[cells] for q in quad.groups], quad.weights)
    res = solve_family_free(gram, b, p, tol=tol, labels=where, g=g, weight=a)
    assert res.worst <= 100 * tol
    ref = _clarabel_family(H, b, p, G, g, a)
    f = _objective(H, b, a)
    assert f(res.x) <= f(ref) + 1e-9 * abs(f(ref))
    assert np.abs(res.x - ref).max() <= 1e-4
    dense = solve_family_rows(H, b, p, tol=tol, G=G, g=g, weight=a)
    assert np.abs(res.x - dense.x).max() <= 1e-8 * max(1.0, p.max())  # one optimum
    assert (res.x >= 0).all()
    np.testing.assert_allclose(res.x.sum(axis=0), p, atol=1e-9)
    np.testing.assert_allclose(res.x @ G.T, g, atol=1e-9)
    assert not res.x[(g == 0)[:, where]].any()  # a row a child holds at 0 stays 0


def test_matrix_free_family_with_a_diagonal_quadratic_is_the_weighted_projection():
    """Outer pass 1's family (the detailed query alone: H = w I) with the children's rows
    held: the matrix-free split equals Clarabel's projection."""
    _, cells, b, p, G, g, where = _family(7, k=5, rate=0.4)
    m = cells.size
    gram = MarginalGram([np.arange(m)], [2.5])
    tol = 1e-11 * max(1.0, np.abs(b).max())
    res = solve_family_free(gram, b, p, tol=tol, labels=where, g=g)
    assert res.worst <= 100 * tol
    ref = _clarabel_family(2.5 * np.eye(m), b, p, G, g, np.ones(5))
    assert np.abs(res.x - ref).max() <= 1e-4
    np.testing.assert_allclose(res.x @ G.T, g, atol=1e-9)


def test_multipliers_by_difference_constraints_prove_optimality_and_only_it():
    """One row, two children, two cells: x = [[1, 0], [0, 1]] with gradients that admit
    multipliers (lam_i + nu_j equal to them where free, at most them where held) is proved;
    a held cell whose gradient is below what the free cells force is not."""
    labels = np.zeros(2, dtype=np.int64)  # one row
    free = np.array([[True, False], [False, True]])
    fixed = np.zeros((2, 2), dtype=bool)
    # free: lam0 + nu0 = 1, lam1 + nu1 = 2; held: lam1 + nu0 <= 3, lam0 + nu1 <= 0
    # lam0 = 0, nu0 = 1, lam1 = 2, nu1 = 0: held sums 3 and 0, both allowed
    assert potentials(np.array([[1.0, 3.0], [0.0, 2.0]]), free, fixed, labels, 1, 1e-12)
    # held lam1 + nu0 <= 2.5 and lam0 + nu1 <= 0 force 1 + 2 = lam0+nu0+lam1+nu1 <= 2.5
    assert not potentials(np.array([[1.0, 2.5], [0.0, 2.0]]), free, fixed, labels, 1, 1e-12)


@pytest.fixture(scope="module")
def dc_run():
    table = synthetic_dhc_population(["11"], seed=1, scale=0.0002)
    work = load_strategy("dhc-2020-persons").workload(table)
    m = measure(table, work, secure=False, rng=3)
    return table, m, true_pl94(table), top_down_2020(m, held=true_pl94(table))


@pytest.mark.slow
def test_dhc_release_is_integral_consistent_and_holds_the_pl94_histogram(dc_run):
    table, _, held, out = dc_run
    geo = table.geography
    assert out.dtype == np.int64 and out.shape == (geo.n, dhc_schema().size)
    assert out.min() >= 0
    kids = np.flatnonzero(geo.parent >= 0)
    sums = np.zeros_like(out)
    np.add.at(sums, geo.parent[kids], out[kids])
    inner = np.bincount(geo.parent[kids], minlength=geo.n) > 0
    np.testing.assert_array_equal(out[inner], sums[inner])
    pl94 = Query.marginal(dhc_schema(), PL94_IN_DHC).marginal_of
    np.testing.assert_array_equal(pl94.apply(out), held)  # every geounit, exactly
    assert not out[:, dhc_structural_zeros()].any()  # the 32 edits
    assert geo.levels[-1].size >= 2 and len({*map(int, out[geo.levels[-1]].sum(axis=1))}) > 1


@pytest.mark.slow
def test_dhc_release_is_deterministic_and_takes_a_fixed_root(dc_run):
    _, m, held, out = dc_run
    again = top_down_2020(m, held=held, root=out[0])
    np.testing.assert_array_equal(again, out)  # the families below solved as before


@pytest.mark.slow
def test_dhc_release_with_every_family_dense_is_the_matrix_free_one(dc_run, monkeypatch):
    """Every family below the root solved by the dense solver (the matrix-free one made to
    fail, so ``_split`` falls back) gives the release of the matrix-free solver, count for
    count (one optimum per family, the same rounding)."""
    import postdp.postprocess.topdown2020.dhc as dhc
    from postdp.errors import ConvergenceError

    def fails(*args, **kwargs):
        raise ConvergenceError("made to fail")

    _, m, held, out = dc_run
    monkeypatch.setattr(dhc, "solve_family_free", fails)
    np.testing.assert_array_equal(top_down_2020(m, held=held, root=out[0]), out)
    monkeypatch.setattr(dhc, "DENSE_ENTRIES", 0)  # no dense fallback: the error stands
    with pytest.raises(ConvergenceError, match="made to fail"):
        top_down_2020(m, held=held, root=out[0])


@pytest.mark.slow
def test_project_runs_the_dhc_topdown_through_the_registry_with_held(dc_run):
    """``postdp.project(m, method="topdown-2020", held=)``: the registry's estimator holds
    the PL94 histograms (``Estimator.holds``) and gives the release of ``top_down_2020``;
    one that does not hold them refuses ``held`` in one line naming those that do."""
    from postdp import project

    _, m, held, out = dc_run
    np.testing.assert_array_equal(project(m, method="topdown-2020", held=held), out)
    with pytest.raises(ValidationError, match="`held`: project does not hold the DHC's"):
        project(m, method="project", held=held)


def test_blue_restore_2020_passes_held_to_the_restoration(monkeypatch):
    """The registry's ``blue-restore-2020`` hands ``held`` to ``blue_restore(...,
    integral=True, held=)`` (which runs ``restore_dhc`` on the DHC design; its BLUE, 4 GB
    on a county, is too heavy for this suite); ``held`` of counts is refused."""
    import postdp.postprocess.restore as restore
    from postdp import Hierarchy, project
    from postdp.postprocess import estimator

    seen = {}

    def fake(m, **kwargs):
        seen.update(kwargs)
        return np.zeros((2, 3))

    monkeypatch.setattr(restore, "blue_restore", fake)
    held = np.ones((2, 2016), dtype=np.int64)
    solver = estimator("blue-restore-2020").table_solver(None, None, held=held)
    solver("measurements")
    assert seen["integral"] is True and seen["held"] is held
    assert estimator("blue-restore-2020").holds and not estimator("blue-restore").holds
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    with pytest.raises(ValidationError, match="`held` is for table measurements"):
        project(np.zeros(3), h, held=held)


@pytest.mark.slow
def test_dhc_design_refuses_bad_inputs_before_solving(dc_run):
    _, m, held, _ = dc_run
    with pytest.raises(ValidationError, match="needs `held`"):
        top_down_2020(m)
    with pytest.raises(ValidationError, match="shape"):
        top_down_2020(m, held=held[:, :100])
    bad = held.copy()
    bad[-1, 0] += 1  # a block no longer adds up to its parent
    with pytest.raises(ValidationError, match="not consistent"):
        top_down_2020(m, held=bad)
    with pytest.raises(ValidationError, match="rounder"):
        top_down_2020(m, held=held, rounders=["detailed"])
    coarse = Query.marginal(dhc_schema(), COARSE)
    assert coarse.size == 423_360  # outer pass 0's histogram


def test_held_is_refused_outside_the_dhc_design():
    from tests.tables._reference import small_pl94_state

    table, work = small_pl94_state(0, people=20)
    m = measure(table, work, secure=False, rng=0)
    with pytest.raises(ValidationError, match="DHC"):
        top_down_2020(m, held=np.zeros((table.geography.n, 2016)))

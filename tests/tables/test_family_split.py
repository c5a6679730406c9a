"""Top-down's family split for schema tables (issue 23): each parent's children solved
jointly in the parent's positive cells (``postdp.postprocess.topdown2020.family``), equal to
Clarabel on random families, to the dense (c x c) coupled path on random schema tables,
with its KKT certificate, by pivoting and by the primal active-set fallback alike."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from scipy import linalg

import postdp
from postdp import Gaussian
from postdp.hierarchy import Hierarchy
from postdp.postprocess import topdown as topdown_module
from postdp.postprocess.topdown2020 import family as _family_nnls
from postdp.postprocess.topdown2020 import root as _root_nnls
from postdp.tables import Measurement, Query, Table, Workload, measure, pl94_schema
from postdp.tables.schema import Marginal
from tests.tables._reference import (
    CLARABEL_TIGHT,
    random_schema,
    random_terms,
    random_tree,
    small_pl94_state,
)


def _random_family(seed):
    """A level's marginal groups (detailed cells always among them), weights, a parent
    with some cells at 0, and children's answers (some exactly 0, some far below 0)."""
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 30))
    k = int(rng.integers(1, 7))
    groups = [np.arange(c)]
    for _ in range(int(rng.integers(0, 4))):
        sizes = int(rng.integers(1, c + 1))
        groups.append(rng.integers(-1, sizes, size=c))  # -1: a cell no count includes
    weights = list(rng.uniform(0.1, 4.0, size=len(groups)))
    quadratic = _family_nnls.LevelQuadratic(groups, weights)
    parent = np.where(rng.random(c) < 0.3, 0.0, rng.exponential(6.0, c))
    answers = []
    for g in groups:
        y = rng.normal(1.0, 5.0, size=(k, int(g.max()) + 1 if g.max() >= 0 else 1))
        y[rng.random(y.shape) < 0.2] = 0.0
        answers.append(y)
    cells = np.flatnonzero(parent > 0)
    return quadratic.block(cells), quadratic.linear(answers, cells), parent[cells]


def _clarabel(H, b, p):
    k, m = b.shape
    X = cp.Variable((k, m))
    objective = sum(0.5 * cp.quad_form(X[j], cp.psd_wrap(H)) - b[j] @ X[j] for j in range(k))
    problem = cp.Problem(cp.Minimize(objective), [X >= 0, cp.sum(X, axis=0) == p])
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert problem.status == cp.OPTIMAL
    return X.value


def _check(H, b, p, result):
    scale = max(1.0, float(np.abs(b).max(initial=0.0)), float(p.max(initial=0.0)) * H.max())
    assert result.x.min(initial=0.0) >= 0
    np.testing.assert_allclose(result.x.sum(axis=0), p, rtol=0, atol=1e-9 * scale)
    worst = max(result.stationarity, result.dual, result.negative, result.consistency)
    assert worst <= 1e-9 * scale
    if b.size and b.shape[0] > 1:
        ref = _clarabel(H, b, p)
        np.testing.assert_allclose(result.x, ref, rtol=0, atol=1e-6 * max(1.0, p.max()))


@pytest.mark.parametrize("seed", range(40))
def test_family_split_equals_clarabel_with_its_certificate(seed):
    H, b, p = _random_family(seed)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    _check(H, b, p, _family_nnls.solve_family(H, b, p, tol=1e-11 * scale))


@pytest.mark.parametrize("seed", range(12))
def test_primal_active_set_fallback_equals_clarabel(seed, monkeypatch):
    """With pivoting stopped at once, the primal active-set method alone finds the same
    certified solution."""
    monkeypatch.setattr(_family_nnls, "_STALL_ROUNDS", 0)
    H, b, p = _random_family(seed)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    _check(H, b, p, _family_nnls.solve_family(H, b, p, tol=1e-11 * scale))


@pytest.mark.parametrize("seed", range(12))
def test_the_split_taken_a_child_at_a_time_equals_clarabel(seed, monkeypatch):
    """With temporaries over one child's inverse at a time (the chunks a 2,500-child family
    needs to stay in memory), the same certified solution."""
    from postdp.postprocess._solvers import quadratic

    monkeypatch.setattr(quadratic, "_CHUNK", 1)
    H, b, p = _random_family(seed)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    _check(H, b, p, _family_nnls.solve_family(H, b, p, tol=1e-11 * scale))


@pytest.mark.parametrize("chunk", [1, 40, 1 << 22])
def test_scattered_blocks_are_the_sum_of_each_childs(chunk, monkeypatch):
    """sum_j E_j Z_j E_j' from padded blocks (padding index m dropped), in any chunking."""
    from postdp.postprocess._solvers import quadratic

    monkeypatch.setattr(quadratic, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    k, w, m = 9, 5, 7
    idx = np.full((k, w), m)
    Z = np.zeros((k, w, w))
    expected = np.zeros((m, m))
    for j in range(k):
        f = int(rng.integers(0, w + 1))
        cells = rng.choice(m, f, replace=False)
        block = rng.normal(size=(f, f))
        idx[j, :f], Z[j, :f, :f] = cells, block
        expected[np.ix_(cells, cells)] += block
    np.testing.assert_allclose(quadratic.scatter_blocks(idx, Z, m), expected, atol=1e-12)
    assert [r.tolist() for r in quadratic.chunks(np.arange(5), 2)] == (
        [[0], [1], [2], [3], [4]] if chunk < 8 else [[0, 1, 2, 3, 4]]
    )


def test_level_quadratic_is_the_marginals_information_matrix():
    """H[cells, cells] and b[:, cells] from count indices equal A' W A and A' W y formed
    from the marginals' dense matrices (PL94 schema, a random cell subset)."""
    rng = np.random.default_rng(5)
    s = pl94_schema()
    names = ["total", "hhinstlevels", "votingage * hispanic * cenrace", "numraces", "detailed"]
    marginals = [Marginal(s, n) for n in names]
    weights = list(rng.uniform(0.5, 2.0, len(names)))
    quadratic = _family_nnls.LevelQuadratic([m.cell_groups() for m in marginals], weights)
    cells = np.sort(rng.choice(s.size, 120, replace=False))
    answers = [rng.normal(size=(3, m.size)) for m in marginals]
    dense = [m.apply(np.eye(s.size)).T for m in marginals]  # (size, c)
    H = sum(w * A.T @ A for w, A in zip(weights, dense, strict=True))
    b = sum(w * y @ A for w, y, A in zip(weights, answers, dense, strict=True))
    np.testing.assert_allclose(quadratic.block(cells), H[np.ix_(cells, cells)], atol=1e-12)
    np.testing.assert_allclose(quadratic.linear(answers, cells), b[:, cells], atol=1e-12)


def _schema_case(seed):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=48)
    geo = random_tree(rng, int(rng.integers(3, 8)), "g")
    table = Table(geo, schema.categories(), rng.integers(0, 6, (geo.leaves.size, schema.size)))
    items = []
    for d in range(geo.n_levels):
        items.append(Measurement(d, Query.marginal(schema, "detailed"), Gaussian(rho=0.3)))
        for _ in range(int(rng.integers(0, 3))):
            name = schema.marginal(random_terms(rng, schema)).name
            if name != "detailed":
                items.append(Measurement(d, Query.marginal(schema, name), Gaussian(rho=0.5)))
    if rng.random() < 0.5:  # a public total at the root replaces a noisy one
        items = [m for m in items if (m.level, m.query.name) != (0, "total")]
        items.append(Measurement(0, Query.marginal(schema, "total"), None))
    items = list({(m.level, m.query.name): m for m in items}.values())
    return table, Workload(items)


@pytest.mark.parametrize("seed", range(12))
def test_schema_top_down_equals_the_dense_coupled_path(seed, monkeypatch):
    """The family split gives the dense path's answer (one (P+) over the whole level with
    c x c matrices) to 1e-9, several draws at once."""
    table, workload = _schema_case(seed)
    draws = measure(table, workload, secure=False, rng=seed, size=2)
    ours = postdp.top_down(draws)
    monkeypatch.setattr(topdown_module, "table_schema", lambda cat, w: None)
    dense = postdp.top_down(draws)
    scale = max(1.0, float(np.abs(dense).max()))
    np.testing.assert_allclose(ours, dense, rtol=0, atol=1e-9 * scale)
    geo = table.geography
    inner = ~geo.is_leaf
    kids = np.zeros_like(ours)
    np.add.at(kids, (slice(None), geo.parent[1:]), ours[:, 1:])
    np.testing.assert_allclose(ours[:, inner], kids[:, inner], rtol=0, atol=1e-9 * scale)
    assert ours.min() >= 0


def test_pl94_family_split_on_sparse_children():
    """The 2,016-cell persons schema: a block group of 25 blocks of ~40 people each, the
    11 production marginals at the block level; certified, nonnegative, adding up."""
    rng = np.random.default_rng(11)
    s = pl94_schema()
    names = [
        "total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq",
        "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic",
        "votingage * hispanic * cenrace", "detailed",
    ]  # fmt: skip
    geo = Hierarchy.from_parents(["bg", *(f"b{i}" for i in range(25))], [None, *["bg"] * 25])
    probs = rng.dirichlet(np.full(s.size, 0.03))
    counts = np.array([rng.multinomial(rng.poisson(40), probs) for _ in range(25)])
    table = Table(geo, s.categories(), counts)
    items = [Measurement(0, Query.marginal(s, "detailed"), Gaussian(rho=1.0))]
    items += [Measurement(1, Query.marginal(s, n), Gaussian(rho=0.05)) for n in names]
    draws = measure(table, Workload(items), secure=False, rng=2)
    out = postdp.top_down(draws)
    assert out.min() >= 0
    np.testing.assert_allclose(out[1:].sum(axis=0), out[0], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(out[1:, out[0] == 0], 0.0)


@pytest.mark.parametrize("seed", range(40))
def test_identification_in_the_basis_equals_the_dense_rank(seed):
    """``identifies_cells`` (the rank test type by type) agrees with the rank of the dense
    information matrix, on random schemas (recodes that leave levels out included)."""
    from postdp.postprocess._solvers.marginal_basis import identifies_cells

    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=40)
    marginals = [schema.marginal(random_terms(rng, schema)) for _ in range(rng.integers(1, 5))]
    if rng.random() < 0.3:
        marginals.append(schema.marginal("detailed"))
    A = np.vstack([m.apply(np.eye(schema.size)).T for m in marginals])
    dense = np.linalg.matrix_rank(A.T @ A) == schema.size
    assert identifies_cells(marginals) == dense


@pytest.mark.parametrize("seed", range(25))
def test_root_with_public_marginals_equals_clarabel(seed):
    """The root's nonnegative least squares with public marginals held (overlapping ones,
    groups whose total is 0 included) equals Clarabel, with its certificate."""
    rng = np.random.default_rng(100 + seed)
    schema = random_schema(rng, max_size=40)
    c = schema.size
    noisy = [schema.marginal("detailed")]
    noisy += [schema.marginal(random_terms(rng, schema)) for _ in range(rng.integers(0, 3))]
    weights = list(rng.uniform(0.2, 3.0, len(noisy)))
    quadratic = _family_nnls.LevelQuadratic([m.cell_groups() for m in noisy], weights)
    truth = np.where(rng.random(c) < 0.4, 0.0, rng.exponential(4.0, c))
    rows = []
    for _ in range(rng.integers(0, 3)):
        groups = schema.marginal(random_terms(rng, schema)).cell_groups()
        rows.append((np.arange(groups.max() + 1)[:, None] == groups[None, :]).astype(float))
    C = np.vstack(rows) if rows else np.zeros((0, c))
    g = C @ truth
    answers = [m.apply(truth) + rng.normal(0, 3.0, m.size) for m in noisy]
    every = np.arange(c)
    H = quadratic.block(every)
    b = quadratic.linear([a[None, :] for a in answers], every)[0]
    scale = max(1.0, float(np.abs(b).max()), float(g.max(initial=0.0)) * H.max())
    result = _root_nnls.solve_root(H, b, C, g, tol=1e-11 * scale)
    worst = max(result.stationarity, result.dual, result.negative, result.consistency)
    assert worst <= 1e-9 * scale and result.x.min() >= 0
    x = cp.Variable(c)
    cons = [x >= 0]
    if C.shape[0]:  # Clarabel wants independent equality rows
        _, R, pivots = linalg.qr(C.T, pivoting=True, mode="economic")
        keep = pivots[: int((np.abs(np.diag(R)) > 1e-9).sum())]
        cons.append(C[keep] @ x == g[keep])
    unit = float(np.abs(b).max())  # Clarabel converges tightly on a unit-scaled objective
    objective = 0.5 * cp.quad_form(x, cp.psd_wrap(H / unit)) - (b / unit) @ x
    problem = cp.Problem(cp.Minimize(objective), cons)
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    np.testing.assert_allclose(result.x[0], x.value, rtol=0, atol=1e-6 * max(1.0, truth.max()))


def _family_with_invariants(seed):
    """A random family whose children each keep a public partition of the cells (their
    exact counts from a true split of the parent)."""
    rng = np.random.default_rng(500 + seed)
    H, b, p = _random_family(seed)
    k, m = b.shape
    truth = rng.dirichlet(np.ones(k), size=m).T * p  # a split of the parent, >= 0
    groups = rng.integers(0, int(rng.integers(1, 4)), size=m)
    G = (np.arange(groups.max() + 1)[:, None] == groups[None, :]).astype(float)
    return H, b, p, G, truth @ G.T


def _clarabel_with_rows(H, b, p, G, g):
    k, m = b.shape
    X = cp.Variable((k, m))
    unit = max(1.0, float(np.abs(b).max()))
    objective = sum(0.5 * cp.quad_form(X[j], cp.psd_wrap(H / unit)) - (b[j] / unit) @ X[j]
                    for j in range(k))  # fmt: skip
    # the last child's rows follow from the others' and the cells' sums: left out (Clarabel
    # wants independent equality rows)
    cons = [X >= 0, cp.sum(X, axis=0) == p, X[:-1] @ G.T - g[:-1] == 0]
    problem = cp.Problem(cp.Minimize(objective), cons)
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert problem.status == cp.OPTIMAL
    return X.value


@pytest.mark.parametrize("primal", [False, True], ids=["pivoting", "primal"])
@pytest.mark.parametrize("seed", range(15))
def test_family_split_with_childrens_invariants_equals_clarabel(seed, primal, monkeypatch):
    """Each child's public counts held exactly (the 2020 state totals, say), certified, and
    equal to Clarabel; with pivoting and with the primal fallback from a transportation
    plan."""
    if primal:
        monkeypatch.setattr(_family_nnls, "_STALL_ROUNDS", 0)
    H, b, p, G, g = _family_with_invariants(seed)
    if b.shape[0] < 2 or not b.size:
        return
    scale = max(1.0, float(np.abs(b).max()))
    result = _family_nnls.solve_family(H, b, p, tol=1e-11 * scale, G=G, g=g)
    worst = max(result.stationarity, result.dual, result.negative, result.consistency)
    assert worst <= 1e-9 * max(scale, float(p.max()) * H.max())
    np.testing.assert_allclose(result.x @ G.T, g, rtol=0, atol=1e-9 * max(1.0, p.max()))
    ref = _clarabel_with_rows(H, b, p, G, g)
    np.testing.assert_allclose(result.x, ref, rtol=0, atol=1e-6 * max(1.0, p.max()))


def test_the_2020_preset_runs_top_down_with_its_state_invariants():
    """The persons preset (public US and state totals) on a small six-level table: top-down
    keeps both totals exactly, nonnegative and consistent; an invariant whose level above
    does not keep it is refused before any work."""
    table, work = small_pl94_state(4)
    geo = table.geography
    out = postdp.top_down(measure(table, work, secure=False, rng=5))
    truth = table.counts()[:, 0]
    np.testing.assert_allclose(out[:3].sum(axis=1), truth[:3], rtol=0, atol=1e-8)
    assert out.min() >= 0
    inner = ~geo.is_leaf
    kids = np.zeros_like(out)
    np.add.at(kids, geo.parent[1:], out[1:])
    np.testing.assert_allclose(out[inner], kids[inner], rtol=0, atol=1e-8)
    from postdp.errors import ValidationError
    from postdp.postprocess import check_top_down

    loose = Workload([m for m in work.measurements if not (m.public and m.level == 0)])
    with pytest.raises(ValidationError, match="not at level 0"):
        check_top_down(table, loose)


def test_simulate_runs_top_down_and_rounding_on_a_schema_table():
    """``simulate`` with a schema table and the steps topdown,round: the public root total
    is released exactly in every draw (bias and variance 0), every count has draws."""
    import postdp
    from postdp.analysis.design import ReleaseDesign

    table, workload = _schema_case(3)
    geo = table.geography
    schema = workload.measurements[0].query.marginal_of.schema
    items = [Measurement(0, Query.marginal(schema, "total"), None)]
    items += [
        Measurement(d, Query.marginal(schema, "detailed"), Gaussian(rho=0.5))
        for d in range(geo.n_levels)
    ]
    result = postdp.simulate(
        ReleaseDesign(table, Workload(items), "topdown,round"), n_draws=40, rng=1
    )
    frame = result.to_frame().set_index("id")
    root = f"{geo.ids[0]}:total"
    assert frame.loc[root, "bias"] == 0 and frame.loc[root, "variance"] == 0
    assert (frame["n_draws"] == 40).all() and (frame["variance"] >= 0).all()


@pytest.mark.parametrize("seed", range(20))
def test_per_child_factors_and_their_updates_agree_with_clarabel(seed, monkeypatch):
    """With no child inverted in the batch, every block goes through its own Cholesky
    factor and, when few of its cells change between rounds, the cell-by-cell updates
    (their drift checked by the certificate): the same certified solution."""
    monkeypatch.setattr(_family_nnls, "_BATCH_WIDTH", 0)
    H, b, p, G, g = _family_with_invariants(seed)
    if b.shape[0] < 2 or not b.size:
        return
    scale = max(1.0, float(np.abs(b).max()))
    for rows in ((None, None), (G, g)):
        result = _family_nnls.solve_family(H, b, p, tol=1e-11 * scale, G=rows[0], g=rows[1])
        worst = max(result.stationarity, result.dual, result.negative, result.consistency)
        assert worst <= 1e-9 * max(scale, float(p.max()) * H.max())
    ref = _clarabel_with_rows(H, b, p, G, g)
    np.testing.assert_allclose(result.x, ref, rtol=0, atol=1e-6 * max(1.0, p.max()))


def test_the_update_path_is_taken_on_wide_children(monkeypatch):
    """A wide family (children with many free cells, few changes per round) uses the
    cell-by-cell updates, and its answer is still certified."""
    monkeypatch.setattr(_family_nnls, "_BATCH_WIDTH", 0)
    calls = []
    original = _family_nnls._Inner._update

    def counted(self, j, removed, added):
        calls.append(1)
        return original(self, j, removed, added)

    monkeypatch.setattr(_family_nnls._Inner, "_update", counted)
    rng = np.random.default_rng(7)
    s = pl94_schema()
    names = ["total", "hhgq", "votingage * hispanic * cenrace", "detailed"]
    marginals = [s.marginal(n) for n in names]
    quadratic = _family_nnls.LevelQuadratic([m.cell_groups() for m in marginals], [0.1] * 4)
    probs = rng.dirichlet(np.full(s.size, 0.05))
    truth = np.array([rng.multinomial(1500, probs) for _ in range(6)]).astype(float)
    parent = truth.sum(axis=0)
    cells = np.flatnonzero(parent > 0)
    answers = [m.apply(truth) + rng.normal(0, 3.0, (6, m.size)) for m in marginals]
    H, b = quadratic.block(cells), quadratic.linear(answers, cells)
    scale = max(1.0, float(np.abs(b).max()), float(parent.max()) * H.max())
    result = _family_nnls.solve_family(H, b, parent[cells], tol=1e-11 * scale)
    worst = max(result.stationarity, result.dual, result.negative, result.consistency)
    assert worst <= 1e-9 * scale and calls  # updated, and certified

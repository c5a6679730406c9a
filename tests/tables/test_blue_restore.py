"""BLUE, then restore (issue 25's ``blue-restore``): the BLUE of a schema table restored to
nonnegative family by family in each level's information metric; equal to a per-family
Clarabel reference given our parents, nonnegative, consistent, invariants exact."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector, blue_restore
from postdp.tables import Measurement, Query, Table, Workload, measure
from tests.tables._reference import (
    CLARABEL_TIGHT,
    random_schema,
    random_terms,
    random_tree,
    small_pl94_state,
)


def _case(seed):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=30)
    geo = random_tree(rng, int(rng.integers(5, 12)), "g")
    table = Table(geo, schema.categories(), rng.integers(0, 3, (geo.leaves.size, schema.size)))
    items = [Measurement(0, Query.marginal(schema, "total"), None)]
    for d in range(geo.n_levels):
        items.append(Measurement(d, Query.marginal(schema, "detailed"), Gaussian(rho=0.2)))
        name = schema.marginal(random_terms(rng, schema)).name
        if name not in ("detailed", "total"):
            items.append(Measurement(d, Query.marginal(schema, name), Gaussian(rho=0.4)))
    return table, Workload(items), schema


def _metric(workload, schema, d):
    H = np.zeros((schema.size, schema.size))
    for m in workload.at(d):
        if not m.public:
            A = m.query.marginal_of.apply(np.eye(schema.size)).T
            H += A.T @ A / m.variance
    return H


def _family(H, blue, parent, first=None):
    """The reference family: children X >= 0 adding up to ``parent``, nearest ``blue`` in
    H; with ``first``, each child's total within 0.1 of it."""
    X = cp.Variable(blue.shape)
    unit = max(1.0, float(np.abs(blue @ H).max()))
    k = blue.shape[0]
    objective = sum(cp.quad_form(X[j] - blue[j], cp.psd_wrap(H / unit)) for j in range(k))
    cons = [X >= 0, cp.sum(X, axis=0) == parent]
    if first is not None:
        cons += [cp.abs(cp.sum(X, axis=1) - first) <= 0.1]
    cp.Problem(cp.Minimize(objective), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    return X.value


def _root_covariance(m, scale=None):
    """The BLUE's covariance at the root by brute force: the BLUE is linear in the noisy
    answers, so its root is L y + const; L's columns are the root's response to each answer
    alone (one draw per answer), and the covariance is L diag(variances) L', a geounit
    measured with budget factor s_j answering with variance / s_j."""
    from postdp.tables import TableMeasurements

    geo = m.table.geography
    noisy = [(i, x) for i, x in enumerate(m.workload.measurements) if not x.public]
    sizes = [m.values[i].size for i, _ in noisy]
    n = sum(sizes)
    values = [np.zeros((n + 1, *v.shape)) for v in m.values]  # draw 0: every answer 0
    variances, row = [], 1
    for (i, x), size in zip(noisy, sizes, strict=True):
        factor = np.ones(geo.n) if scale is None else scale
        per_unit = x.variance / factor[geo.levels[x.level]]
        for k in range(size):
            values[i][row].reshape(-1)[k] = 1.0
            row += 1
        variances += np.repeat(per_unit, size // per_unit.size).tolist()
    probes = TableMeasurements(m.table, m.workload, tuple(values), secure=False, budget_scale=scale)
    root = TableProjector(m.table, m.workload, budget_scale=scale)(probes)[:, 0]
    L = (root[1:] - root[0]).T
    return (L * np.asarray(variances)) @ L.T


def _root_reference(H, blue, table):
    """The root's reference: nonnegative, the public total held, nearest ``blue`` in H."""
    x = cp.Variable(blue.size)
    unit = max(1.0, float(np.abs(H @ blue).max()))
    objective = cp.quad_form(x - blue, cp.psd_wrap(H / unit))
    cons = [x >= 0, cp.sum(x) == table.counts()[0, 0]]
    cp.Problem(cp.Minimize(objective), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    return x.value


@pytest.mark.parametrize("seed", range(4))
def test_cell_precision_inverts_the_blues_covariance_at_the_root(seed):
    """``TableProjector.cell_precision`` (the marginal basis's block inverses rotated back)
    against the covariance found by brute force: a generalised inverse of it (S H S = S),
    positive definite, and its exact inverse on the directions the noise reaches."""
    table, workload, _ = _case(seed)
    m = measure(table, workload, secure=False, rng=seed)
    S = _root_covariance(m)
    H = TableProjector(table, workload).cell_precision(0)
    np.testing.assert_allclose(S @ H @ S, S, rtol=0, atol=1e-9 * np.abs(S).max())
    assert np.linalg.eigvalsh(H).min() > 0
    w, V = np.linalg.eigh(S)
    live = V[:, w > 1e-9 * w.max()]  # every direction but the public total's
    np.testing.assert_allclose(
        live.T @ H @ live, np.linalg.inv(live.T @ S @ live), rtol=1e-9, atol=1e-9
    )


def test_cell_precision_with_each_geounits_own_budget():
    """A geounit measured with its own multiple s_j of its level's budget (the spine's
    bypass, ``budget_scale``) answers with variance / s_j: the precision inverts that
    covariance too."""
    table, workload, _ = _case(5)
    geo = table.geography
    scale = np.random.default_rng(5).uniform(0.5, 2.0, geo.n)
    scale[geo.root] = 1.0
    m = measure(table, workload, secure=False, rng=5)
    S = _root_covariance(m, scale)
    H = TableProjector(table, workload, budget_scale=scale).cell_precision(0)
    np.testing.assert_allclose(S @ H @ S, S, rtol=0, atol=1e-9 * np.abs(S).max())
    plain = TableProjector(table, workload).cell_precision(0)
    assert np.abs(H - plain).max() > 1e-3  # the factors matter


def test_cell_precision_refuses_bad_input():
    table, workload, _ = _case(0)
    projector = TableProjector(table, workload)
    with pytest.raises(ValidationError, match=r"`geounit` must be in 0\.\."):
        projector.cell_precision(table.geography.n)
    with pytest.raises(ValidationError, match="`geounit` must be an int"):
        projector.cell_precision(True)
    geo = Hierarchy.from_parents(["S", "a"], [None, "S"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    w = Workload([Measurement(d, Query.detailed(cat), Gaussian(rho=1.0)) for d in range(2)])
    with pytest.raises(ValidationError, match="schema table"):
        TableProjector(Table(geo, cat, [[1, 2]]), w).cell_precision(0)


@pytest.mark.parametrize("seed", range(4))
def test_root_metric_measurements_restores_the_root_in_its_own_information(seed):
    """``root_metric="measurements"`` (postdp 0.1): the root nearest the BLUE in H_0, the
    information of the root's own noisy answers; the levels below as with the default."""
    table, workload, schema = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = blue_restore(draws, root_metric="measurements")
    blue = TableProjector(table, workload)(draws)
    scale = max(1.0, float(np.abs(blue).max()))
    expected = _root_reference(_metric(workload, schema, 0), blue[0], table)
    np.testing.assert_allclose(ours[0], expected, rtol=0, atol=1e-6 * scale)
    with pytest.raises(ValidationError, match="`root_metric` must be 'blue' or 'measurements'"):
        blue_restore(draws, root_metric="H0")


def _totals(blue_totals, total):
    """Pass 0's reference: totals >= 0 adding up to ``total``, nearest the BLUE's."""
    t = cp.Variable(blue_totals.size)
    cons = [t >= 0, cp.sum(t) == total]
    cp.Problem(cp.Minimize(cp.sum_squares(t - blue_totals)), cons).solve(
        solver=cp.CLARABEL, **CLARABEL_TIGHT
    )
    return t.value


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_blue_restore_equals_a_per_family_reference(seed, ordered):
    """Each family equals a Clarabel reference given our parent: one pass nearest the BLUE
    (``ordered=False``, and the leaves' families), or the production's order (the totals
    nearest the BLUE's on the simplex, then the cells with each total within 0.1 of
    those; ``shared/research/pl94-2020-design.md`` section 1.6)."""
    table, workload, schema = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = blue_restore(draws, ordered=ordered)
    blue = TableProjector(table, workload)(draws)
    geo = table.geography
    assert ours.min() >= 0
    assert abs(ours[0].sum() - table.counts()[0, 0]) < 1e-8  # the public total
    scale = max(1.0, float(np.abs(blue).max()))
    # the root: nearest nonnegative histogram in the BLUE's precision, the public total held
    # (the total's direction, of variance 0, weighed as the others: constant where it is held)
    precision = np.linalg.pinv(_root_covariance(draws), rcond=1e-9, hermitian=True)
    precision += np.trace(precision) / schema.size**2
    expected = _root_reference(precision, blue[0], table)
    np.testing.assert_allclose(ours[0], expected, rtol=0, atol=1e-6 * scale)
    for node in range(geo.n):  # each family given our parent
        kids = np.flatnonzero(geo.parent == node)
        if not kids.size:
            continue
        depth = int(geo.depth[kids[0]])
        H = _metric(workload, schema, depth)
        first = None
        if ordered and depth < geo.n_levels - 1 and kids.size > 1:
            first = _totals(blue[kids].sum(axis=1), ours[node].sum())
        expected = _family(H, blue[kids], ours[node], first)
        np.testing.assert_allclose(ours[kids], expected, rtol=0, atol=1e-6 * scale)
        if first is not None:
            assert np.abs(ours[kids].sum(axis=1) - first).max() <= 0.1 + 1e-9


def test_project_names_project_and_blue_restore():
    """``method="project"`` is the BLUE (what ``nonneg=False`` alone gives); a ``nonneg``
    that contradicts the named estimator is refused."""
    table, workload, _ = _case(3)
    draws = measure(table, workload, secure=False, rng=2, size=2)
    blue = postdp.project(draws, method="project")
    np.testing.assert_array_equal(blue, postdp.project(draws, nonneg=False))
    np.testing.assert_array_equal(blue, postdp.project(draws, nonneg=False, method="project"))
    cells = postdp.project(draws, nonneg=True, method="blue-restore")
    np.testing.assert_allclose(cells, blue_restore(draws), rtol=0, atol=0)
    np.testing.assert_allclose(postdp.project(draws, nonneg=False), blue)
    with pytest.raises(ValidationError, match="'project' is unbounded; got nonneg=True"):
        postdp.project(draws, nonneg=True, method="project")
    with pytest.raises(ValidationError, match="'blue-restore' is nonnegative; got nonneg=False"):
        postdp.project(draws, nonneg=False, method="blue-restore")


def test_the_2020_preset_restores_with_its_state_invariants():
    table, work = small_pl94_state(8)
    geo = table.geography
    out = blue_restore(measure(table, work, secure=False, rng=5))
    np.testing.assert_allclose(out[:3].sum(axis=1), table.counts()[:3, 0], rtol=0, atol=1e-8)
    assert out.min() >= 0
    kids = np.zeros_like(out)
    np.add.at(kids, geo.parent[1:], out[1:])
    inner = ~geo.is_leaf
    np.testing.assert_allclose(out[inner], kids[inner], rtol=0, atol=1e-8)


def test_a_table_without_a_schema_is_refused():
    geo = Hierarchy.from_parents(["S", "a"], [None, "S"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    w = Workload([Measurement(d, Query.detailed(cat), Gaussian(rho=1.0)) for d in range(2)])
    draws = measure(Table(geo, cat, [[1, 2]]), w, secure=False, rng=0)
    with pytest.raises(ValidationError, match="schema table"):
        blue_restore(draws)


def test_counts_refuse_the_table_methods():
    h = Hierarchy.from_parents(["a", "b"], [None, "a"])
    with pytest.raises(ValidationError, match="'blue-restore' does not project a hierarchy"):
        postdp.project(np.array([1.0, 1.0]), h, method="blue-restore")


def test_totals_first_keeps_a_small_childs_raised_cells_out_of_its_siblings():
    """A hand-computed family (docs/accuracy.md, "Where the restoration is worse"): a small
    block group p whose BLUE is 5 persons in one cell and -1.5 in three empty ones (total
    0.5), beside a large one q (100 persons). Measurements consistent across levels make
    the BLUE equal to them. In one pass the empty cells rise to 0 and q pays for them:
    p = (5, 0, 0, 0), 4.5 persons above its BLUE total. Totals first holds p's total within
    0.1 of its BLUE total (the simplex leaves 0.5 and 100 as they are), so p's own cells
    pay: p = (0.6, 0, 0, 0), the nearest point with total at most 0.6."""
    from postdp.tables import Attribute, Schema, TableMeasurements

    schema = Schema([Attribute("a", ["0", "1", "2", "3"])])
    ids = ["S", "T", "p", "q", "bp", "bq"]
    geo = Hierarchy.from_parents(ids, [None, "S", "T", "T", "p", "q"])
    table = Table(geo, schema.categories(), [[2, 0, 0, 0], [30, 40, 20, 10]])
    items = [Measurement(0, Query.marginal(schema, "total"), None)]
    items += [
        Measurement(d, Query.marginal(schema, "detailed"), Gaussian(rho=1.0)) for d in range(4)
    ]
    p, q = np.array([5.0, -1.5, -1.5, -1.5]), np.array([30.0, 40.0, 20.0, 10.0])
    level = [(p + q)[None], (p + q)[None], np.stack([p, q]), np.stack([p, q])]
    values = (np.array([[(p + q).sum()]]), *level)
    m = TableMeasurements(table, Workload(items), values, secure=False)
    np.testing.assert_allclose(TableProjector(table, m.workload)(m)[2:4], level[2], atol=1e-9)
    one_pass = blue_restore(m, ordered=False)
    np.testing.assert_allclose(one_pass[2], [5, 0, 0, 0], atol=1e-9)
    np.testing.assert_allclose(one_pass[3], [30, 38.5, 18.5, 8.5], atol=1e-9)
    ordered = blue_restore(m)
    np.testing.assert_allclose(ordered[2], [0.6, 0, 0, 0], atol=1e-9)
    np.testing.assert_allclose(ordered[3], [34.4, 38.5, 18.5, 8.5], atol=1e-9)
    np.testing.assert_allclose(ordered[4:], ordered[2:4], atol=1e-12)  # only children

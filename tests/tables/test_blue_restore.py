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
    geo = random_tree(rng, int(rng.integers(3, 7)), "g")
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


@pytest.mark.parametrize("seed", range(8))
def test_blue_restore_equals_a_per_family_reference(seed):
    table, workload, schema = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = blue_restore(draws)
    blue = TableProjector(table, workload)(draws)
    geo = table.geography
    assert ours.min() >= 0
    assert abs(ours[0].sum() - table.counts()[0, 0]) < 1e-8  # the public total
    scale = max(1.0, float(np.abs(blue).max()))
    # the root: nearest nonnegative histogram in H_0 with the public total
    H0 = _metric(workload, schema, 0)
    x = cp.Variable(schema.size)
    unit = float(np.abs(H0 @ blue[0]).max())
    objective = cp.quad_form(x - blue[0], cp.psd_wrap(H0 / unit))
    cons = [x >= 0, cp.sum(x) == table.counts()[0, 0]]
    cp.Problem(cp.Minimize(objective), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    np.testing.assert_allclose(ours[0], x.value, rtol=0, atol=1e-6 * scale)
    for node in range(geo.n):  # each family given our parent
        kids = np.flatnonzero(geo.parent == node)
        if not kids.size:
            continue
        H = _metric(workload, schema, int(geo.depth[kids[0]]))
        X = cp.Variable((kids.size, schema.size))
        unit = max(1.0, float(np.abs(blue[kids] @ H).max()))
        objective = sum(cp.quad_form(X[j] - blue[k], cp.psd_wrap(H / unit))
                        for j, k in enumerate(kids))  # fmt: skip
        cons = [X >= 0, cp.sum(X, axis=0) == ours[node]]
        cp.Problem(cp.Minimize(objective), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
        np.testing.assert_allclose(ours[kids], X.value, rtol=0, atol=1e-6 * scale)


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

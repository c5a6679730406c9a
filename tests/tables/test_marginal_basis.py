"""Table (P) in the marginal basis (issue 23): random schemas with recodes, random marginal
workloads per level and public marginals; the estimate and its variances equal the dense
generalised least-squares reference (null-space GLS, ``tests/tables/_reference.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy
from postdp.postprocess import TableProjector
from postdp.tables import Measurement, Query, Table, Workload, expand, measure, pl94_schema
from tests.tables._reference import (
    assert_equals_dense_gls,
    assert_top_down_matches_reference,
    random_marginal_workload,
    random_schema,
    random_terms,
    random_tree,
)


def _terms(rng, schema):
    return random_terms(rng, schema)


def _case(seed):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=60)
    geo = random_tree(rng, int(rng.integers(2, 7)), "g")
    cat = schema.categories()
    table = Table(geo, cat, rng.integers(0, 15, (geo.leaves.size, schema.size)))

    def chosen(d):
        names = [schema.marginal(_terms(rng, schema)).name for _ in range(int(rng.integers(1, 4)))]
        if geo.is_leaf[geo.levels[d]].any():
            names.append("detailed")
        return names

    return table, random_marginal_workload(rng, schema, geo, chosen)


@pytest.mark.parametrize("seed", range(30))
def test_marginal_basis_equals_dense_gls(seed):
    table, workload = _case(seed)
    projector = assert_equals_dense_gls(table, workload, seed)
    assert projector._basis is not None  # the marginal basis, not c x c matrices


def test_batched_draws_are_solved_one_by_one_alike():
    table, workload = _case(3)
    draws = measure(table, workload, secure=False, rng=1, size=(2, 3))
    batched = postdp.project(draws, nonneg=False)
    assert batched.shape[:2] == (2, 3)
    one = type(draws)(draws.table, draws.workload, tuple(v[1, 2] for v in draws.values), False)
    np.testing.assert_allclose(batched[1, 2], postdp.project(one, nonneg=False), atol=1e-9)


def test_the_pl94_blocks_are_tiny():
    """The 2020 persons workload splits into 16 types of blocks of at most 3 unknowns."""
    from postdp import Hierarchy

    s = pl94_schema()
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    names = ["total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq"]
    names += ["hispanic * cenrace", "votingage * cenrace", "votingage * hispanic"]
    names += ["votingage * hispanic * cenrace", "detailed"]
    items = [Measurement(d, Query.marginal(s, q), Gaussian(rho=0.1)) for d in (0, 1) for q in names]
    table = Table(geo, s.categories(), np.zeros((2, s.size), dtype=np.int64))
    projector = TableProjector(table, Workload(items))
    basis = projector._basis
    assert basis is not None and basis.ranks == [3, 1, 1, 1]
    assert len(basis.types) == 16 and max(t[1].c for t in basis.types) == 3


@pytest.mark.parametrize("seed", range(10))
def test_variances_of_any_marginal_equal_the_dense_covariances(seed):
    """Margins of error for every published marginal: diag(Q P Q') with P the dense c x c
    covariance of each geounit's estimate (the dense solver, itself checked against the
    null-space reference above)."""
    table, workload = _case(seed)
    projector = TableProjector(table, workload)
    basis = projector._basis
    schema = basis.schema
    geo = table.geography
    dense = dict(projector._dense().covariances())  # layout position -> c x c
    rng = np.random.default_rng(seed)
    for _ in range(3):
        marginal = schema.marginal(_terms(rng, schema))
        Q = Query.marginal(schema, marginal.name).matrix(table.categories)
        ref = np.array([np.diag(Q @ dense[p] @ Q.T) for p in geo.layout.position])
        ours = projector.query_variances(Query.marginal(schema, marginal.name))
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9 * max(1.0, ref.max()))


def test_query_variances_of_a_category_tree_query():
    """The dense path of ``query_variances`` (a table without a schema) agrees with the
    variances of the category nodes."""
    from tests.tables._reference import random_case

    table, workload = random_case(4)
    projector = TableProjector(table, workload)
    cat = table.categories
    node = int(cat.leaves[0])
    q = Query("one", [[str(cat.ids[node])]])
    np.testing.assert_allclose(
        projector.query_variances(q)[:, 0], projector.variances()[:, node], atol=1e-9
    )


@pytest.mark.parametrize("seed", range(6))
def test_project_on_schema_measurements_matches_clarabel(seed):
    """``postdp.project(measurements, nonneg=...)`` (SPEC section 12): (P) is the marginal
    basis, (P+) the exact table active-set solver; both equal cvxpy + Clarabel (tight)."""
    from tests.tables._reference import qp_table

    table, workload = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed + 100)
    cat = table.categories
    for nonneg in (False, True):
        ours = postdp.project(draws, nonneg=nonneg)  # detailed cells of every geounit
        assert ours.shape == (table.geography.n, cat.leaves.size)
        ref = qp_table(draws, nonneg=nonneg)
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * scale)
        full = expand(ours, table.geography, cat)
        np.testing.assert_allclose(full[:, cat.root], ref.sum(axis=1), atol=1e-6 * scale)
        if nonneg:
            assert ours.min() >= 0


def test_project_refuses_hierarchy_options_for_tables():
    from postdp.errors import ValidationError

    table, workload = _case(0)
    draws = measure(table, workload, secure=False, rng=0)
    with pytest.raises(ValidationError, match="`public` is for counts"):
        postdp.project(draws, public="root")
    with pytest.raises(ValidationError, match="`hierarchy` is required"):
        postdp.project(np.zeros(3))


def test_simulate_a_schema_table_against_theory():
    """``postdp.simulate`` accepts schema tables: the Monte Carlo bias of (P) contains 0 and
    its variance contains the exact variance of the marginal basis, count by count, through
    the simulator's own intervals (fixed seed; a handful of misses allowed by their level)."""
    from postdp.analysis import ReleaseDesign

    table, workload = _case(2)
    frame = postdp.simulate(
        ReleaseDesign(table, workload, "project"), n_draws=4000, rng=7
    ).to_frame()
    exact = TableProjector(table, workload).variances().reshape(-1)
    moving = exact > 0
    bias_ok = (frame["bias_lo"] <= 0) & (frame["bias_hi"] >= 0)
    var_ok = (frame["variance_lo"] <= exact) & (frame["variance_hi"] >= exact)
    # the intervals are 95% ones: far fewer than 15% misses unless the theory is wrong
    assert bias_ok[moving].mean() > 0.85 and var_ok[moving].mean() > 0.85
    assert (frame.loc[~moving, "variance"] < 1e-9).all()


@pytest.mark.parametrize("seed", range(8))
def test_schema_top_down_and_nonneg_certificates(seed):
    """Exact (P+) of a schema workload with its KKT certificate at 1e-9, and top-down (the
    detailed cells measured at every level) equal to a per-family Clarabel reference."""
    from postdp.postprocess import TableNonnegProjector

    table, workload = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed + 7)
    plus = TableNonnegProjector(table, workload)(draws)
    assert plus.min() >= 0 and postdp.kkt_report(plus, draws).worst_relative() < 1e-9
    geo = table.geography
    # top-down: public queries at the root only, and noisy detailed cells at every level
    items = [
        m
        for m in workload.measurements
        if not m.public or (m.level == 0 and m.query.name != "detailed")
    ]
    names = {(m.level, m.query.name) for m in items}
    s = workload.measurements[0].query.marginal_of.schema
    for d in range(geo.n_levels):  # top-down needs each level to identify every cell
        if (d, "detailed") not in names:
            items.append(Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=0.4)))
    assert_top_down_matches_reference(measure(table, Workload(items), secure=False, rng=seed))


def test_variances_held_by_invariants_are_zero_never_negative():
    """Issue 41: under the persons preset the state totals are invariant, so their exact
    variance is 0; the marginal basis's sums leave a rounding residue of either sign there,
    and ``sqrt`` of a negative one made the written standard deviation NaN. Every variance
    is >= 0 and the invariants' are exactly 0, in both covariance paths (marginal basis and
    dense tree), for every marginal of the schema the preset measures."""
    from postdp.tables import load_strategy
    from tests.nmf.conftest import small_table

    t = small_table()
    work = load_strategy("pl94-2020-persons").workload(t)
    projector = TableProjector(t, work)
    schema = work.measurements[0].query.marginal_of.schema
    geo = t.geography
    fixed = np.concatenate([[geo.root], geo.levels[1]])  # the nation and the states: invariant
    names = sorted({"total", "detailed", *(m.query.name for m in work.measurements)})
    for name in names:
        v = projector.query_variances(Query.marginal(schema, name))
        assert (v >= 0).all(), name
        assert np.isfinite(np.sqrt(v)).all()
    total = projector.query_variances(Query.marginal(schema, "total"))
    assert (total[fixed] == 0).all()
    assert (total[geo.leaves] > 1).all()  # blocks are noisy: the clipping is only the residue


def test_dense_path_variances_are_never_negative():
    """The dense tree's covariances (a query outside the schema's marginals) go through the
    same rule: an invariant root total has variance exactly 0, every other one is >= 0."""
    rng = np.random.default_rng(4)
    schema = random_schema(rng, max_size=12)
    kids = [f"{p}{i}" for p in "abc" for i in (1, 2)]
    geo = Hierarchy.from_parents(
        ["S", "a", "b", "c", *kids], [None, "S", "S", "S"] + [k[0] for k in kids]
    )
    cat = schema.categories()
    t = Table(geo, cat, rng.integers(0, 15, (geo.leaves.size, schema.size)))
    items = [Measurement(0, Query.marginal(schema, "total"), None)]
    items += [
        Measurement(d, Query.marginal(schema, "detailed"), Gaussian(rho=0.3)) for d in range(3)
    ]
    projector = TableProjector(t, Workload(items))
    v = projector.query_variances(Query("all", [[str(cat.ids[cat.root])]]))  # not a marginal
    assert v[geo.root, 0] == 0.0
    assert (v >= 0).all() and (np.delete(v, geo.root) > 0).all()
    np.testing.assert_allclose(v, projector.query_variances(Query.marginal(schema, "total")))

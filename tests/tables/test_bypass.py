"""Per-geounit budgets: the production spine's single-child bypass (``tables/bypass.py``;
``pl94-2020-design.md`` section 1.5, ``optimize_spine.py`` ``bypass_geounit``), noise drawn
with each geounit's budget, and generalised least squares that weighs each geounit's answers
by its budget (equal to the dense reference of ``tests/tables/_reference.py``)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from postdp import DiscreteGaussian, Gaussian, Hierarchy, Laplace
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector
from postdp.tables import Measurement, Query, Table, Workload, measure, single_child_bypass
from tests.tables._reference import blue_table, dense_gls, random_schema, random_terms

# S has two counties; c1 holds one tract holding one block (a chain), c2 two tracts, t3 one
# block. Level budgets rho 1, 2, 1, 0.5.
_IDS = ["S", "c1", "c2", "t1", "t2", "t3", "b1", "b2", "b3", "b4"]
_PARENTS = [None, "S", "S", "c1", "c2", "c2", "t1", "t2", "t2", "t3"]
_RHO = [1.0, 2.0, 1.0, 0.5]


def _chain_case(mechanism=Gaussian):
    geo = Hierarchy.from_parents(_IDS, _PARENTS)
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    q = Query.detailed(cat)
    w = Workload([Measurement(d, q, mechanism(rho=r)) for d, r in enumerate(_RHO)])
    return Table(geo, cat, (np.arange(8).reshape(4, 2) * 3) + 1), w


def test_a_chain_of_only_children_is_measured_once_at_its_top():
    """c1 -> t1 -> b1: b1's budget goes to t1 (1 + 0.5 / 1 = 1.5), then t1's to c1
    ((2 + 1 x 1.5) / 2 = 1.75); t3's only block goes to t3 (1 + 0.5 = 1.5)."""
    table, w = _chain_case()
    got = dict(zip(_IDS, single_child_bypass(table, w, top=1).tolist(), strict=True))
    want = {"S": 1, "c1": 1.75, "c2": 1, "t1": 0, "t2": 1, "t3": 1.5}
    want |= {"b1": 0, "b2": 1, "b3": 1, "b4": 0}
    assert got == want


def test_the_production_stops_at_the_counties():
    """``define_spines.call_opt_spine`` optimises each county's subtree on its own: a state
    with one county keeps its budget and so does the county (default ``top=2``); below the
    county, chains are bypassed as before. ``top`` must be a level below the root."""
    ids = ["US", "11", "12", "11001", "12001", "12003", "t1", "t2", "t3", "t4"]
    parents = [None, "US", "US", "11", "12", "12", "11001", "11001", "12001", "12003"]
    geo = Hierarchy.from_parents([*ids, "b1", "b2", "b3", "b4", "b5"],
                                 [*parents, "t1", "t2", "t3", "t3", "t4"])  # fmt: skip
    cat = Hierarchy.from_parents(["all"], [None])
    w = Workload([Measurement(d, Query.detailed(cat), Gaussian(rho=1.0)) for d in range(5)])
    table = Table(geo, cat, np.ones((5, 1), dtype=int))
    got = dict(zip(geo.ids, single_child_bypass(table, w).tolist(), strict=True))
    assert got["11"] == got["11001"] == 1.0  # the District-like state and its one county
    assert got["12003"] == 3.0 and got["t4"] == got["b5"] == 0.0  # county > tract > block
    assert got["t1"] == 2.0 and got["b1"] == 0.0 and (got["12001"], got["t3"]) == (2.0, 0.0)
    assert single_child_bypass(table, w, top=1)[geo.index(["11", "11001"])].tolist() == [2.0, 0.0]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValidationError, match="`top`"):
            single_child_bypass(table, w, top=bad)


def test_every_leafs_path_keeps_the_levels_budget():
    """The bypass moves budget, never adds it (the production's check_total_plb)."""
    rng = np.random.default_rng(5)
    geo = _random_spine(rng, 4, 60)
    cat = Hierarchy.from_parents(["all"], [None])
    rho = [Fraction(int(rng.integers(1, 9)), 7) for _ in range(geo.n_levels)]
    w = Workload(
        [Measurement(d, Query.detailed(cat), Gaussian(rho=float(r))) for d, r in enumerate(rho)]
    )
    table = Table(geo, cat, np.ones((geo.leaves.size, 1), dtype=int))
    s = single_child_bypass(table, w, top=1)
    assert (s == 0).any() and (s > 1).any()
    for leaf in geo.leaves:
        path, node = 0.0, int(leaf)
        while node >= 0:
            path += float(rho[geo.depth[node]]) * s[node]
            node = int(geo.parent[node])
        assert path == pytest.approx(float(sum(rho)), rel=1e-13)
    kids = np.bincount(geo.parent[geo.parent >= 0], minlength=geo.n)
    zero = np.flatnonzero(s == 0)
    assert (kids[geo.parent[zero]] == 1).all()  # only an only child gives its budget away


def test_noise_has_each_geounits_variance_and_nan_where_it_has_no_budget():
    """Study draws: the sample variance of each geounit's noise is its level's / its factor
    (Gaussian variance 1 / (2 rho s)), within z = 4 standard errors of a sample variance."""
    table, w = _chain_case()
    s = single_child_bypass(table, w, top=1)
    n = 4000
    m = measure(table, w, secure=False, rng=11, size=n, budget_scale=s)
    geo = table.geography
    assert m.budget_scale is not None and np.array_equal(m.budget_scale, s)
    detailed = table.detailed()
    for d, values in enumerate(m.values):
        for row, g in enumerate(geo.levels[d]):
            if s[g] == 0:
                assert np.isnan(values[:, row]).all()
                continue
            noise = values[:, row] - detailed[g]
            theory = 1.0 / (2 * _RHO[d] * s[g])
            se = theory * np.sqrt(2.0 / (n - 1))
            assert abs(noise.var(axis=0, ddof=1) - theory).max() <= 4 * se


def test_the_release_path_draws_with_each_geounits_budget():
    table, w = _chain_case(DiscreteGaussian)
    s = single_child_bypass(table, w, top=1)
    m = measure(table, w, budget_scale=s)
    geo = table.geography
    for d, values in enumerate(m.values):
        gone = s[geo.levels[d]] == 0
        assert np.isnan(values[gone]).all() and np.isfinite(values[~gone]).all()
        assert (values[~gone] == np.round(values[~gone])).all()


@pytest.mark.parametrize(
    ("scale", "match"),
    [
        (np.ones(3), "one factor per geounit"),
        (np.full(10, -1.0), "finite factors >= 0"),
        (np.full(10, np.nan), "finite factors >= 0"),
        (np.full(10, 1.5), "more than the workload's budget"),
    ],
)
def test_bad_budget_factors_are_refused_before_any_draw(scale, match):
    table, w = _chain_case()
    with pytest.raises(ValidationError, match=match):
        measure(table, w, secure=False, rng=0, budget_scale=scale)


def test_pure_dp_measurements_take_no_budget_factors():
    table, _ = _chain_case()
    q = Query.detailed(table.categories)
    w = Workload([Measurement(d, q, Laplace(epsilon=1.0)) for d in range(4)])
    scale = np.ones(10)
    scale[1] = 0.5
    with pytest.raises(ValidationError, match="pure DP"):
        measure(table, w, secure=False, rng=0, budget_scale=scale)


def test_least_squares_weighs_each_geounit_by_its_budget():
    table, w = _chain_case()
    s = single_child_bypass(table, w, top=1)
    m = measure(table, w, secure=False, rng=3, budget_scale=s)
    ref, ref_var = dense_gls(m)
    np.testing.assert_allclose(blue_table(m), ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    projector = TableProjector(table, w, budget_scale=s)
    np.testing.assert_allclose(projector.variances(), ref_var, rtol=0, atol=1e-12)
    est = blue_table(m)
    geo = table.geography
    for child in np.flatnonzero(s == 0):  # the same persons as its parent: the same estimate
        np.testing.assert_allclose(est[child], est[geo.parent[child]], atol=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_random_spines_and_schemas_equal_dense_gls(seed):
    """Random geographies with only children at every level, random marginal workloads of a
    random schema (the marginal basis solver), some geounits with budget factors that are
    not the bypass's (any factors whose paths stay within the budget)."""
    rng = np.random.default_rng(100 + seed)
    schema = random_schema(rng, max_size=40)
    geo = _random_spine(rng, int(rng.integers(3, 5)), int(rng.integers(8, 20)))
    table = Table(geo, schema.categories(), rng.integers(0, 15, (geo.leaves.size, schema.size)))
    items = []
    for d in range(geo.n_levels):
        names = {schema.marginal(random_terms(rng, schema)).name for _ in range(2)}
        names.add("detailed")
        mech = Gaussian(rho=float(rng.uniform(0.1, 1)))
        items += [Measurement(d, Query.marginal(schema, name), mech) for name in sorted(names)]
    w = Workload(items)
    s = single_child_bypass(table, w, top=1)
    s[s == 1] = rng.choice([1.0, 0.5, 0.25], size=int((s == 1).sum()))  # spending less is fine
    m = measure(table, w, secure=False, rng=seed, budget_scale=s)
    projector = TableProjector(table, w, budget_scale=s)
    assert projector._basis is not None
    ref, ref_var = dense_gls(m)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(blue_table(m), ref, rtol=0, atol=1e-9 * scale)
    noise = max(x.variance for x in w.measurements) * 4
    np.testing.assert_allclose(projector.variances(), ref_var, rtol=0, atol=1e-9 * noise)


def test_a_geounit_with_no_budget_and_siblings_is_refused():
    table, w = _chain_case()
    s = np.ones(10)
    s[4] = 0.0  # t2 has no answers but its blocks': fine
    TableProjector(table, w, budget_scale=s)
    s[7] = 0.0  # b2 has none at all, and a sibling, b3
    with pytest.raises(ValidationError, match="siblings"):
        TableProjector(table, w, budget_scale=s)


def test_measurements_and_projector_must_share_their_factors():
    table, w = _chain_case()
    s = single_child_bypass(table, w, top=1)
    m = measure(table, w, secure=False, rng=0, budget_scale=s)
    with pytest.raises(ValidationError, match="budget_scale"):
        TableProjector(table, w)(m)


def _random_spine(rng, n_levels, n_leaves):
    """A geography with every leaf at the deepest level and many only children."""
    ids, parents = ["r"], [None]
    level = ["r"]
    for d in range(1, n_levels):
        width = n_leaves if d == n_levels - 1 else max(1, n_leaves * d // n_levels)
        width = max(width, len(level))
        owners = list(level) + list(rng.choice(level, size=width - len(level)))
        nxt = []
        for k, owner in enumerate(owners):
            ids.append(f"g{d}_{k}")
            parents.append(owner)
            nxt.append(f"g{d}_{k}")
        level = nxt
    return Hierarchy.from_parents(ids, parents)

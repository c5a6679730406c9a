"""The 2020 estimators on the AIAN spine (issue 25; ``pl94-2020-design.md`` section 1.5;
production ``define_spines.py`` and ``manipulate_nodes.makeChildGroups``): each state split
into its AIAN and other branches, measured as the production's spine states were, the
state's total invariant and not each branch's.

- with no AIAN area each state has one branch and every estimator gives the tabulation
  spine's release (the same answers read through the other geography);
- ``topdown-2020`` solves the nation's family over the branches with each state's branches
  adding up to its total: integral, consistent, the invariants exact, each branch's total
  the floor or ceiling of the weighted simplex split of its state's total (pass 0);
- ``blue`` equals the dense null-space GLS with the states' totals as the only invariant
  of their level;
- the structural bounds hold on the branches too."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from postdp import Gaussian, Hierarchy
from postdp.data import facility_bounds, synthetic_facilities
from postdp.errors import ValidationError
from postdp.postprocess import blue_restore, top_down_2020
from postdp.tables import (
    Measurement,
    Query,
    Table,
    TableMeasurements,
    Workload,
    aian_branches,
    load_strategy,
    measure,
)
from tests.postprocess._reference import qp_simplex
from tests.tables._reference import assert_equals_dense_gls, blue_table, small_pl94_state

PERSONS = load_strategy("pl94-2020-persons")


def _tabulation_id(branched, node):
    """The tabulation geounit a node of the AIAN spine is part of."""
    g = branched.geography
    name = str(g.ids[node])
    return name[1:] if 2 <= g.depth[node] < g.n_levels - 1 else name


def _read_through(m6, branched, work7):
    """The tabulation run's answers as the AIAN spine's (no AIAN area: one branch per
    state, measured by the state's queries)."""
    g6, g7 = m6.table.geography, branched.geography
    pos6 = {str(i): k for k, i in enumerate(g6.ids)}
    values = []
    for m in work7.measurements:
        d6 = m.level if m.level <= 1 else m.level - 1
        src = next(
            v
            for x, v in zip(m6.workload.measurements, m6.values, strict=True)
            if x.level == d6 and x.query.name == m.query.name and x.public == m.public
        )
        rank6 = np.empty(g6.n, dtype=np.int64)
        rank6[g6.levels[d6]] = np.arange(g6.levels[d6].size)
        rows = [rank6[pos6[_tabulation_id(branched, n)]] for n in g7.levels[m.level]]
        values.append(src[..., rows, :])
    return TableMeasurements(branched, work7, values, False)


def _matched(branched, table):
    """Each AIAN-spine node's tabulation node (the state's branch stands for the state)."""
    pos = {str(i): k for k, i in enumerate(table.geography.ids)}
    return np.array([pos[_tabulation_id(branched, n)] for n in range(branched.geography.n)])


def test_no_aian_area_gives_the_tabulation_spines_release():
    table, work = small_pl94_state(3, people=40)
    m6 = measure(table, work, secure=False, rng=3, size=2)
    branched = aian_branches(table, aian=np.zeros(table.geography.leaves.size, dtype=bool))
    m7 = _read_through(m6, branched, PERSONS.workload(branched, aian=True))
    at = _matched(branched, table)
    np.testing.assert_array_equal(top_down_2020(m7), top_down_2020(m6)[:, at])
    np.testing.assert_allclose(blue_table(m7), blue_table(m6)[:, at], atol=1e-8)
    np.testing.assert_allclose(blue_restore(m7[0]), blue_restore(m6[0])[at], atol=1e-6)


def _branched_state(seed, people=40):
    table, _ = small_pl94_state(seed, people=people)
    flags = np.zeros(table.geography.leaves.size, dtype=bool)
    flags[[0, 2]] = True  # K1 (C1) and K3 (C2): S1 gets two branches, S2 one
    branched = aian_branches(table, aian=flags)
    return table, branched, PERSONS.workload(branched, aian=True)


def _consistent(out, geo):
    kids = np.zeros_like(out)
    np.add.at(kids, (slice(None), geo.parent[1:]), out[:, 1:])
    inner = ~geo.is_leaf
    return bool(np.allclose(out[:, inner], kids[:, inner], atol=1e-7))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_topdown_2020_holds_each_states_total_over_its_branches(seed):
    table, branched, work = _branched_state(seed)
    g = branched.geography
    assert sorted(g.ids[g.levels[2]].tolist()) == ["0S1", "0S2", "1S1"]
    m = measure(branched, work, secure=False, rng=seed, size=3)
    out = top_down_2020(m)
    assert out.dtype == np.int64 and out.min() >= 0 and _consistent(out, g)
    truth = table.counts()[:, 0]
    np.testing.assert_array_equal(out[:, g.index(["US", "S1", "S2"])].sum(-1), [truth[:3]] * 3)
    # pass 0: the branches' noisy totals split their state's total (a weighted simplex);
    # the rounder takes the floor or ceiling of each
    total = next(i for i, x in enumerate(work.measurements) if x.level == 2 and x.query.size == 1)
    branches = g.index(["0S1", "1S1"])
    rank = {int(n): r for r, n in enumerate(g.levels[2])}
    for b in range(3):
        noisy = m.values[total][b, [rank[int(n)] for n in branches], 0]
        want = qp_simplex(noisy, float(truth[1]), nonneg=True)
        got = out[b, branches].sum(-1)
        assert (np.abs(got - want) < 1 + 1e-9).all() and got.sum() == truth[1]


def test_blue_and_blue_restore_on_the_branches():
    table, branched, work = _branched_state(4)
    g = branched.geography
    m = measure(branched, work, secure=False, rng=4)
    est = blue_table(m)
    truth = table.counts()[:, 0]
    np.testing.assert_allclose(est[g.index(["S1", "S2"]), 0], truth[1:3], atol=1e-7)
    assert abs(est[g.index(["1S1"]), 0][0] - table.counts()[[9], 0][0]) > 1e-6  # noisy
    out = blue_restore(m, integral=True)
    assert out.min() >= 0 and _consistent(out[None], g)
    np.testing.assert_array_equal(out[g.index(["US", "S1", "S2"])].sum(-1), truth[:3])


def test_blue_equals_the_dense_gls_with_grouped_invariants():
    """A small schema, so the dense reference fits: the states publish their totals and are
    measured by nothing else; the branches below carry the noisy state-level queries."""
    ids = ["US", "A", "B", "0A", "1A", "0B", "0Ac", "1Ac", "0Bc", "x1", "x2", "x3", "x4"]
    parents = [None, "US", "US", "A", "A", "B", "0A", "1A", "0B", "0Ac", "0Ac", "1Ac", "0Bc"]
    cat = Hierarchy.from_parents(["T", "p", "q", "r"], [None, "T", "T", "T"])
    table = Table(Hierarchy.from_parents(ids, parents), cat, np.arange(12).reshape(4, 3) + 2)
    det, tot = Query.detailed(cat), Query.nodes(["T"], name="total")
    work = Workload(
        [Measurement(0, tot, None), Measurement(1, tot, None)]
        + [Measurement(d, det, Gaussian(rho=float(Fraction(d + 1, 3)))) for d in (0, 2, 3, 4)]
        + [Measurement(d, tot, Gaussian(rho=0.4)) for d in (2, 3)]
    )
    assert_equals_dense_gls(table, work, seed=5)


def test_the_structural_bounds_hold_on_the_branches():
    _, branched, work = _branched_state(6, people=60)
    g = branched.geography
    facilities = synthetic_facilities(branched, seed=6)
    bounds = facility_bounds(facilities, g)
    m = measure(branched, work, secure=False, rng=6, bounds=bounds)
    out = top_down_2020(m)
    hhgq = PERSONS.schema.marginal("hhgq").count_matrix()
    for item in bounds[:1]:
        counts = out @ hhgq.T
        assert (counts >= item.lower).all() and (counts <= item.upper).all()


def test_the_persons_workload_on_the_aian_spine():
    table, branched, work = _branched_state(0)
    flat = PERSONS.workload(table)
    assert work.budget.rho == flat.budget.rho
    assert {m.query.name for m in work.at(1)} == {"total"} and work.at(1)[0].public
    assert [(m.query.name, m.variance) for m in work.at(2)] == [
        (m.query.name, m.variance) for m in flat.at(1) if not m.public
    ]
    units = load_strategy("pl94-2020-units")  # every level's total invariant, branches too
    cells = np.arange(2 * branched.geography.leaves.size).reshape(-1, 2)
    homes = Table(branched.geography, units.schema.categories(), cells)
    assert {m.level for m in units.workload(homes, aian=True).measurements if m.public} == set(
        range(7)
    )
    with pytest.raises(ValidationError, match="7 geolevels"):
        PERSONS.workload(table, aian=True)
    with pytest.raises(ValidationError, match="6 geolevels"):
        PERSONS.workload(branched)


def test_a_level_of_public_totals_right_above_the_leaves_is_refused():
    ids = ["US", "A", "B", "a1", "a2", "b1"]
    geo = Hierarchy.from_parents(ids, [None, "US", "US", "A", "A", "B"])
    s = PERSONS.schema
    cells = np.zeros((3, s.size), dtype=np.int64)
    cells[:, 5] = [3, 4, 5]
    table = Table(geo, s.categories(), cells)
    det, tot = Query.marginal(s, "detailed"), Query.marginal(s, "total")
    work = Workload(
        [Measurement(0, tot, None), Measurement(1, tot, None)]
        + [Measurement(d, q, Gaussian(rho=1.0)) for d in (0, 2) for q in (tot, det)]
    )
    m = measure(table, work, secure=False, rng=0)
    with pytest.raises(ValidationError, match="must not be the leaves"):
        top_down_2020(m)


def test_two_levels_of_public_totals_in_a_row_are_refused():
    table, _ = small_pl94_state(0)
    s = PERSONS.schema
    det, tot = Query.marginal(s, "detailed"), Query.marginal(s, "total")
    work = Workload(
        [Measurement(d, tot, None) for d in (0, 1, 2)]
        + [Measurement(d, q, Gaussian(rho=1.0)) for d in (0, 3, 4, 5) for q in (tot, det)]
    )
    m = measure(table, work, secure=False, rng=0)
    with pytest.raises(ValidationError, match="must be measured"):
        top_down_2020(m)


@pytest.mark.parametrize("flagged", [0, 1])
def test_a_state_alone_with_one_or_two_branches(flagged):
    """The District's shape: the nation has one state; with one branch the branch is the
    state, with two they split its total."""
    table, _ = small_pl94_state(5, people=50)
    geo = table.geography
    keep = [str(i) for i in geo.ids if not str(i).startswith(("S2", "C3", "T3", "G3", "K4"))]
    sub = Table(
        Hierarchy.from_parents(
            keep, [None if i == "US" else str(geo.ids[geo.parent[geo.index([i])[0]]]) for i in keep]
        ),
        table.categories,
        table.cells[:3],
    )
    flags = np.zeros(3, dtype=bool)
    flags[:flagged] = True
    branched = aian_branches(sub, aian=flags)
    m = measure(branched, PERSONS.workload(branched, aian=True), secure=False, rng=5, size=2)
    out = top_down_2020(m)
    g = branched.geography
    assert _consistent(out, g) and out.min() >= 0
    total = int(sub.cells.sum())
    np.testing.assert_array_equal(out[:, g.index(["S1"])[0]].sum(-1), [total, total])
    branches = g.levels[2]
    assert branches.size == 1 + flagged
    if not flagged:
        np.testing.assert_array_equal(out[:, branches[0]], out[:, g.index(["S1"])[0]])

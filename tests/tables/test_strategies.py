"""The 2020 production strategies (issue 25 presets; ``shared/research/pl94-2020-design.md``
sections 1.1-1.4): rho, shares and the sigma table recomputed from the fractions, the
certificates' epsilon at delta = 1e-10, every query a partition of the cells, the workload's
noise and bounded-neighbour cost, and the noise itself against its variance."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.errors import ValidationError
from postdp.mechanisms import DiscreteGaussian
from postdp.tables import Measurement, Query, Table, Workload, load_strategy, measure, pl94_schema

PERSONS = load_strategy("pl94-2020-persons")
UNITS = load_strategy("pl94-2020-units")
P1 = load_strategy("pl94-2020-p1")


def test_rho_and_the_certificates_epsilon():
    assert PERSONS.rho == Fraction(293764, 114921) and UNITS.rho == Fraction(11417641, 152349649)
    # the certificates: 17849145/1041158 = 17.1436 and 1455307/588081 = 2.4747
    assert abs(PERSONS.budget.to_approx_dp(1e-10) - 17849145 / 1041158) < 0.005
    assert abs(UNITS.budget.to_approx_dp(1e-10) - 1455307 / 588081) < 0.005


def test_budget_is_one_property_everywhere_and_the_call_spelling_reads_it():
    # strategies, workloads and both designs expose `.budget` as a property (issue 24); the
    # spelling SPEC.md uses, `strategy.budget()`, returns that same Budget
    from postdp.analysis import ReleaseDesign

    for cls in (type(PERSONS), Workload, ReleaseDesign):
        assert isinstance(cls.__dict__["budget"], property), cls
    assert PERSONS.budget() == PERSONS.budget
    assert PERSONS.budget.to_approx_dp(1e-10) == PERSONS.budget().to_approx_dp(1e-10)


@pytest.mark.parametrize("strategy", [PERSONS, UNITS, P1], ids=lambda s: s.name)
def test_shares_are_exact_and_add_up(strategy):
    assert sum(strategy.level_shares, Fraction(0)) == 1
    for shares in strategy.query_shares:
        assert sum(shares.values(), Fraction(0)) == 1
    assert len(strategy.levels) == len(strategy.level_shares) == 6


def test_sigma_table_matches_the_design_notes():
    """Per-cell sigma of the design notes' table 1.3 (two decimals) and per-level rho."""
    t = PERSONS.sigma_table().set_index(["level", "query"])["sigma"]
    expected = {
        ("State", "total"): 1.10,
        ("County", "total"): 2.17,
        ("Tract", "total"): 2.47,
        ("Block_Group", "total"): 1.75,
        ("Block", "total"): 89.2,
        ("US", "cenrace"): 34.9,
        ("Tract", "hispanic * cenrace"): 2.23,
        ("Block_Group", "hispanic * cenrace"): 2.23,
        ("Block", "detailed"): 3.18,
        ("Block_Group", "detailed"): 2.02,
        ("US", "detailed"): 4.43,
        ("Tract", "votingage * hispanic * cenrace"): 12.0,
    }
    for key, sigma in expected.items():  # the notes print 3 significant digits
        assert abs(t[key] - sigma) <= (0.0051 if sigma < 10 else 0.051), key
    assert ("US", "total") not in t.index  # the US total is not measured (it is invariant)
    per_level = PERSONS.sigma_table().groupby("level", sort=False)["rho"].sum()
    notes = {"US": 0.0649, "State": 0.898, "County": 0.279, "Tract": 0.428}
    notes |= {"Block_Group": 0.783, "Block": 0.103}
    for level, rho in notes.items():
        assert abs(per_level[level] - rho) < 6e-4, level
    units = UNITS.sigma_table().set_index("level")["sigma"]
    for level, sigma in {"US": 52.3, "County": 12.5, "Tract": 6.1, "Block": 10.5}.items():
        assert abs(units[level] - sigma) < 0.06, level


def test_every_query_partitions_the_cells_once():
    s = pl94_schema()
    for shares in PERSONS.query_shares:
        for name in shares:
            groups = s.marginal(name).cell_groups()
            assert (groups >= 0).all()  # every cell in exactly one count
            assert np.bincount(groups).min() >= 1


def _six_levels(schema, rng):
    ids = ["US", "S", "C1", "C2", "T1", "T2", "T3", "G1", "G2", "G3", "K1", "K2", "K3", "K4"]
    parents = [None, "US", "S", "S", "C1", "C1", "C2", "T1", "T2", "T3", "G1", "G1", "G2", "G3"]
    geo = Hierarchy.from_parents(ids, parents)
    return Table(geo, schema.categories(), rng.poisson(0.3, (4, schema.size)))


def test_the_workload_has_the_design_noise_and_cost():
    rng = np.random.default_rng(0)
    table = _six_levels(PERSONS.schema, rng)
    work = PERSONS.workload(table)
    assert work.neighbours == "bounded"
    assert work.budget.rho == pytest.approx(float(PERSONS.rho), rel=1e-15)
    sigma = PERSONS.sigma_table().set_index(["level", "query"])["sigma"]
    for m in work.measurements:
        if m.public:
            assert m.query.name == "total" and m.level in (0, 1)
            continue
        assert isinstance(m.mechanism, DiscreteGaussian)
        assert m.variance == pytest.approx(sigma[(PERSONS.levels[m.level], m.query.name)] ** 2)
    # bounded neighbours: each measurement costs twice its (add/remove) mechanism's rho
    frame = work.cost_frame()
    noisy = frame[(frame["query"] != "*") & (frame["mechanism"] != "public")]
    assert noisy["rho"].sum() == pytest.approx(float(PERSONS.rho))
    released = measure(table, work, secure=False, rng=3)
    public = next(i for i, m in enumerate(work.measurements) if m.public and m.level == 1)
    state = released.values[public]
    assert state[0, 0] == table.counts()[1, 0]  # the invariant is exact


def test_the_noise_has_the_design_variance():
    """Block-level detailed noise of the persons preset: its sample variance within z x SE
    of 1 / (rho x 165/4099 x 3945/4097) (SE from the sample's fourth moment)."""
    rng = np.random.default_rng(1)
    table = _six_levels(PERSONS.schema, rng)
    work = PERSONS.workload(table)
    i = next(i for i, m in enumerate(work.measurements)
             if m.level == 5 and m.query.name == "detailed")  # fmt: skip
    draws = measure(table, work, secure=False, rng=2, size=40)
    noise = (draws.values[i] - table.cells[None]).ravel()
    theory = 1 / float(PERSONS.rho * Fraction(165, 4099) * Fraction(3945, 4097))
    centred = noise - noise.mean()
    se = np.sqrt((np.mean(centred**4) - np.mean(centred**2) ** 2) / noise.size)
    assert abs(np.mean(centred**2) - theory) <= 4 * se


def test_a_table_of_another_shape_is_refused():
    rng = np.random.default_rng(2)
    table = _six_levels(PERSONS.schema, rng)
    with pytest.raises(ValidationError, match="its schema's 2 detailed cells"):
        UNITS.workload(table)
    three = Table(Hierarchy.from_parents(["a", "b", "c"], [None, "a", "b"]),
                  PERSONS.schema.categories(), np.zeros((1, 2016), dtype=int))  # fmt: skip
    with pytest.raises(ValidationError, match="measures 6 geolevels"):
        PERSONS.workload(three)
    with pytest.raises(ValidationError, match="unknown strategy 'pl94'"):
        load_strategy("pl94")


def test_bounded_neighbours_double_every_cost_and_are_checked():
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    items = [Measurement(0, Query.detailed(cat), DiscreteGaussian(rho=0.25))]
    assert Workload(items).budget.rho == 0.25
    assert Workload(items, neighbours="bounded").budget.rho == 0.5
    with pytest.raises(ValidationError, match="`neighbours` must be one of"):
        Workload(items, neighbours="replace")


def test_the_p1_design_is_the_persons_budget_on_the_race_cells():
    """postdp's P1-shaped preset: the persons rho and level shares; per level, ``total`` at
    the persons run's share and the 63 race cells at the rest; the same invariants."""
    assert P1.rho == PERSONS.rho and P1.level_shares == PERSONS.level_shares
    assert P1.schema.cells == pl94_schema().attributes[-1].levels and P1.schema.size == 63
    assert P1.invariants == PERSONS.invariants
    for mine, theirs in zip(P1.query_shares, PERSONS.query_shares, strict=True):
        total = theirs.get("total", Fraction(0))
        assert mine.get("total", Fraction(0)) == total
        assert mine["detailed"] == 1 - total
    sigma = P1.sigma_table().set_index(["level", "query"])["sigma"]
    block = float(P1.rho * Fraction(165, 4099) * (1 - Fraction(5, 4097))) ** -0.5
    assert sigma[("Block", "detailed")] == pytest.approx(block, rel=1e-14)
    assert (
        sigma[("Block", "total")]
        == PERSONS.sigma_table().set_index(["level", "query"])["sigma"][("Block", "total")]
    )


@pytest.mark.parametrize("sparse", [False, True])
def test_tabulate_sums_the_persons_cells_into_the_race_cells(sparse):
    rng = np.random.default_rng(4)
    persons = _six_levels(PERSONS.schema, rng)
    if sparse:
        from scipy import sparse as sp

        persons = Table(persons.geography, persons.categories, sp.csr_array(persons.cells))
    p1 = P1.tabulate(persons)
    assert p1.is_sparse == sparse and p1.geography is persons.geography
    by_race = persons.dense_cells().reshape(-1, 32, 63).sum(axis=1)
    np.testing.assert_array_equal(p1.dense_cells(), by_race)
    assert P1.tabulate(p1) is p1 and PERSONS.tabulate(persons) is persons
    work = P1.workload(p1)
    assert {m.query.name for m in work.measurements} == {"total", "detailed"}
    with pytest.raises(ValidationError, match="tabulates a table of its own schema's 2 cells"):
        UNITS.tabulate(persons)
    with pytest.raises(ValidationError, match="this table has 63 cells"):
        PERSONS.tabulate(p1)

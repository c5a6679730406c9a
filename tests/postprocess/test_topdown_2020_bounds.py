"""The 2020 TopDown with the persons run's structural constraints (issue 25;
``shared/research/pl94-2020-design.md`` section 1.4): at every geounit the persons in each
group-quarters type at least its facilities and 0 where there is none, household persons 0
where there is no housing unit, and no one under 18 in a nursing facility. On a small state
with group quarters, every draw's release meets them exactly while staying integral,
consistent and invariant; the same draws without them break them (so the test can fail)."""

from __future__ import annotations

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.data import facility_bounds, synthetic_facilities
from postdp.errors import ValidationError
from postdp.postprocess import blue_restore, top_down_2020
from postdp.tables import CountBounds, Table, load_strategy, measure, pl94_schema


def _gq_state(seed, blocks=4):
    """US > 2 states > 2 counties each > 2 tracts > 2 block groups > ``blocks`` blocks: a
    household population, a fifth of blocks a group quarters of one type (every resident
    in it, adults only in nursing), some blocks empty."""
    s = pl94_schema()
    rng = np.random.default_rng(seed)
    ids, parents = ["US"], [None]

    def add(node, parent):
        ids.append(node)
        parents.append(parent)

    leaves = []
    for a in range(2):
        add(f"S{a}", "US")
        for b in range(2):
            add(f"C{a}{b}", f"S{a}")
            for c in range(2):
                add(f"T{a}{b}{c}", f"C{a}{b}")
                for d in range(2):
                    add(f"G{a}{b}{c}{d}", f"T{a}{b}{c}")
                    for e in range(blocks):
                        add(f"B{a}{b}{c}{d}{e}", f"G{a}{b}{c}{d}")
                        leaves.append(ids[-1])
    geo = Hierarchy.from_parents(ids, parents)
    race = rng.dirichlet(np.full(63, 0.2))
    cells = np.zeros((geo.leaves.size, s.size), dtype=np.int64)
    position = {name: i for i, name in enumerate(geo.ids[geo.leaves])}
    for name in leaves:
        row = position[name]
        kind = rng.random()
        if kind < 0.15:
            continue  # empty
        people = int(rng.integers(1, 40))
        gq = int(rng.integers(1, 8)) if kind > 0.8 else 0
        adult = (rng.random(people) < 0.78) | (gq == 3)
        hisp = rng.random(people) < 0.2
        r = rng.choice(63, size=people, p=race)
        np.add.at(cells[row], ((gq * 2 + adult) * 2 + hisp) * 63 + r, 1)
    table = Table(geo, s.categories(), cells)
    return table, load_strategy("pl94-2020-persons").workload(table)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_draw_meets_the_group_quarters_bounds_and_the_nursing_zero(seed):
    table, work = _gq_state(seed)
    geo, s = table.geography, pl94_schema()
    bounds = facility_bounds(synthetic_facilities(table, seed=seed), geo)
    truth = table.detailed()
    assert all(b.violation(s, truth) == 0 for b in bounds)  # the truth meets them
    m = measure(table, work, secure=False, rng=seed, size=2)
    out = top_down_2020(m, bounds=bounds)
    assert out.dtype == np.int64 and out.min() >= 0
    for b in bounds:
        assert b.violation(s, out) == 0, b.name
    inner = ~geo.is_leaf
    kids = np.zeros_like(out)
    np.add.at(kids, (slice(None), geo.parent[1:]), out[:, 1:])
    np.testing.assert_array_equal(out[:, inner], kids[:, inner])
    invariant = np.concatenate([[geo.root], geo.levels[1]])  # the nation and the states
    for draw in out:
        np.testing.assert_array_equal(draw[invariant].sum(-1), truth[invariant].sum(-1))
    hhgq = s.marginal(["hhgq"]).count_matrix()
    gq_people = np.asarray(hhgq @ out[0].T).T  # (geounits, 8)
    lower = bounds[0].lower
    assert (gq_people[:, 1:] >= lower[:, 1:]).all()  # at least the facilities
    assert (gq_people[bounds[0].upper == 0] == 0).all()  # none where there is none
    free = top_down_2020(m[0])  # the same draw without the constraints breaks them
    assert max(b.violation(s, free) for b in bounds) > 0


def test_bounds_that_do_not_fit_are_refused_before_solving():
    table, work = _gq_state(0, blocks=2)
    m = measure(table, work, secure=False, rng=0)
    s = pl94_schema()
    n = table.geography.n
    with pytest.raises(ValidationError, match="shape"):
        top_down_2020(m, bounds=[CountBounds("hhgq", np.zeros((n - 1, 8)), np.zeros((n - 1, 8)))])
    low = np.zeros((n, s.marginal(["hispanic"]).size))
    low[0, 1] = 1
    with pytest.raises(ValidationError, match="rounder"):
        top_down_2020(m, bounds=[CountBounds("hispanic", low, np.full(low.shape, np.inf))])


def _consistent(out, geo):
    kids = np.zeros_like(out)
    np.add.at(kids, (slice(None), geo.parent[1:]), out[:, 1:])
    inner = ~geo.is_leaf
    return np.abs(out[:, inner] - kids[:, inner]).max()


@pytest.mark.parametrize("integral", [False, True])
def test_blue_restore_meets_the_bounds_too(integral):
    """blue-restore with the structural bounds: every family's restoration meets them (to
    1e-9 when real-valued); with ``integral=True`` each family is rounded by the production
    rounder's flow as it goes down, so the release is whole numbers meeting them exactly."""
    table, work = _gq_state(3)
    geo, s = table.geography, pl94_schema()
    bounds = facility_bounds(synthetic_facilities(table, seed=3), geo)
    m = measure(table, work, secure=False, rng=4, size=2)
    out = blue_restore(m, bounds=bounds, integral=integral)
    assert out.min() >= 0 and _consistent(out, geo) < 1e-8
    for b in bounds:
        assert b.violation(s, out) <= 1e-9, b.name
    invariant = np.concatenate([[geo.root], geo.levels[1]])
    truth = table.detailed()[invariant].sum(-1)
    np.testing.assert_allclose(out[:, invariant].sum(-1), np.broadcast_to(truth, (2, 3)))
    if integral:
        assert (out == np.rint(out)).all()  # and the same again (the flow is deterministic)
        np.testing.assert_array_equal(out[1], blue_restore(m[1], bounds=bounds, integral=True))
    free = blue_restore(m[0], integral=integral)  # the same draw without them breaks them
    assert max(b.violation(s, free) for b in bounds) > 1e-6


def test_blue_restore_2020_is_an_integral_step():
    """``blue-restore-2020`` (blue_restore with ``integral=True``): a table design's step,
    already integral (``,round`` after it refused), the measurements' bounds held."""
    from postdp.analysis import ReleaseDesign
    from postdp.postprocess import parse_table_method

    table, work = _gq_state(4, blocks=2)
    bounds = facility_bounds(synthetic_facilities(table, seed=4), table.geography)
    out = ReleaseDesign(table, work, "blue-restore-2020").run(rng=1)
    assert (out == np.rint(out)).all() and out.min() >= 0
    with pytest.raises(ValidationError, match="blue-restore-2020"):
        parse_table_method("blue-restore-2020,round")
    m = measure(table, work, secure=False, rng=5, bounds=bounds)
    for b in bounds:
        assert b.violation(pl94_schema(), blue_restore(m, integral=True)) == 0


def test_totals_the_bounds_cannot_hold_fall_back_to_the_flow(monkeypatch):
    """Rounder pass 0 keeps the largest remainders' totals when pass 1 can meet the bounds
    with them (they are then the L1-closest that can); when it cannot -- forced here by
    handing pass 1 totals out of its cells' reach -- the totals come from the flow over the
    bounded rows, and the release still meets every bound, integral and consistent."""
    from postdp.postprocess.topdown2020 import driver as td
    from postdp.postprocess.topdown2020 import passes, rounding

    table, work = _gq_state(2)
    geo, s = table.geography, pl94_schema()
    bounds = facility_bounds(synthetic_facilities(table, seed=2), geo)
    m = measure(table, work, secure=False, rng=7)
    flows = []
    real_round = rounding.round_nested

    def spy(x, chain, **options):
        flows.append(options["cell_weight"] == 0.0)
        return real_round(x, chain, **options)

    def out_of_reach(t, total):
        return np.concatenate([[total], np.zeros(t.size - 1, dtype=np.int64)])

    monkeypatch.setattr(td, "round_nested", spy)
    monkeypatch.setattr(passes, "round_nested", spy)
    usual = td.top_down_2020(m, bounds=bounds)
    assert not any(flows)  # every family's largest remainders could be held here
    monkeypatch.setattr(passes, "largest_remainders", out_of_reach)
    out = td.top_down_2020(m, bounds=bounds)
    assert sum(flows) >= 4  # the flow rounded the totals of those families
    assert out.dtype == np.int64 and out.min() >= 0 and _consistent(out[None], geo) == 0
    for b in bounds:
        assert b.violation(s, out) == 0, b.name
    invariant = np.concatenate([[geo.root], geo.levels[1]])
    np.testing.assert_array_equal(out[invariant].sum(-1), usual[invariant].sum(-1))

"""The 2020 production TopDown (issue 25; ``shared/research/pl94-2020-design.md`` section 1.6)
on small states under the persons preset: integral, nonnegative, consistent both ways, the
nation's and the states' totals exact, deterministic; the pass order visible in the output
(each child's total within 0.1 + rounding of least-squares pass 0's, computed here
independently from the noisy totals); the Python names and the design step; bad designs
refused before anything is drawn."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import simulate
from postdp.analysis import ReleaseDesign
from postdp.errors import ValidationError
from postdp.postprocess import check_top_down_2020, top_down_2020
from postdp.tables import Measurement, Query, Workload, measure, pl94_schema
from tests.tables._reference import small_pl94_state


def _children_sums(out, geo):
    kids = np.zeros_like(out)
    np.add.at(kids, (slice(None), geo.parent[1:]), out[:, 1:])
    return kids


def _simplex(v, total):
    u = np.sort(v)[::-1]
    tau = (np.cumsum(u) - total) / np.arange(1, v.size + 1)
    k = np.flatnonzero(u - tau > 0)[-1]
    return np.maximum(v - tau[k], 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_integral_consistent_with_exact_invariants_and_deterministic(seed):
    table, work = small_pl94_state(seed, people=50)
    geo = table.geography
    m = measure(table, work, secure=False, rng=seed, size=3)
    out = top_down_2020(m)
    assert out.dtype == np.int64 and out.shape == (3, geo.n, pl94_schema().size)
    assert out.min() >= 0
    inner = ~geo.is_leaf
    np.testing.assert_array_equal(out[:, inner], _children_sums(out, geo)[:, inner])
    truth = table.counts()[:, 0]
    np.testing.assert_array_equal(out[:, :3].sum(axis=-1), np.broadcast_to(truth[:3], (3, 3)))
    np.testing.assert_array_equal(out, top_down_2020(m))  # no randomness in the rounder
    np.testing.assert_array_equal(postdp.project(m, method="topdown-2020"), out)


def test_held_and_reach_belong_to_the_dhc_design():
    """The PL94 histograms to hold and record switching's reach are the DHC's only."""
    table, work = small_pl94_state(0, people=20)
    m = measure(table, work, secure=False, rng=0)
    n = table.geography.n
    with pytest.raises(ValidationError, match=r"^`held` is for the DHC persons design"):
        top_down_2020(m, held=np.zeros((n, 2016)))
    with pytest.raises(ValidationError, match=r"^`reach` is for the DHC persons design"):
        top_down_2020(m, reach=np.zeros((1, 1)))


def test_children_totals_follow_least_squares_pass_zero():
    """Below the states (no public total), each child's released total is within 0.1 (the
    production slack) plus the rounding of its pass-0 total: the simplex projection of the
    children's noisy totals onto the parent's released total."""
    table, work = small_pl94_state(5, people=400)
    geo = table.geography
    m = measure(table, work, secure=False, rng=2)
    out = top_down_2020(m)
    totals = out.sum(axis=-1)
    names = [mm.query.name for mm in work.measurements]
    checked = 0
    for d in range(2, geo.n_levels - 1):  # counties, tracts, block groups
        nodes = geo.levels[d]
        noisy = [
            (m.values[i].reshape(-1), mm.variance)
            for i, (mm, name) in enumerate(zip(work.measurements, names, strict=True))
            if mm.level == d and name == "total" and not mm.public
        ]
        y = sum(v / var for v, var in noisy) / sum(1 / var for _, var in noisy)
        for parent in np.unique(geo.parent[nodes]):
            kids = np.flatnonzero(geo.parent[nodes] == parent)
            if kids.size < 2:
                continue
            first = _simplex(y[kids], totals[parent])
            assert np.abs(totals[nodes[kids]] - first).max() <= 1.1 + 1e-9
            checked += 1
    assert checked >= 1


def test_the_design_step_and_the_checks_before_drawing():
    table, work = small_pl94_state(2)
    design = ReleaseDesign(table, work, "topdown-2020")
    assert [str(s) for s in design.steps] == ["topdown-2020"]
    result = simulate(design, n_draws=2, rng=0)
    assert result.n_draws == 2 and np.isfinite(result.mae).all()
    restore = ReleaseDesign(table, work, "blue-restore,round")
    assert [str(s) for s in restore.steps] == ["blue-restore", "round"] and restore.run(
        rng=1
    ).min() >= 0
    with pytest.raises(ValidationError, match="already integral"):
        ReleaseDesign(table, work, "topdown-2020,round")
    s = pl94_schema()
    no_total = Workload(
        [Measurement(0, Query.marginal(s, "total"), None)]
        + [
            Measurement(d, Query.marginal(s, "detailed"), postdp.Gaussian(rho=1.0))
            for d in range(table.geography.n_levels)
        ]
    )
    with pytest.raises(ValidationError, match="noisy or public total at every level"):
        check_top_down_2020(table, no_total)
    own = work.measurements[0].query.marginal_of.schema  # the workload's own schema
    public_hhgq = Workload([*work.measurements, Measurement(0, Query.marginal(own, "hhgq"), None)])
    with pytest.raises(ValidationError, match="public totals only"):
        check_top_down_2020(table, public_hhgq)
    with pytest.raises(ValidationError, match="nest"):
        check_top_down_2020(table, work, rounders=["hhgq", "votingage", "detailed"])


def test_the_default_rounders_are_the_production_queries_on_the_schema():
    """``rounders=None``: the production rounder queries, each without the attributes the
    schema lacks (design notes section 1.6 for the persons list)."""
    from postdp.postprocess import ROUNDER_QUERIES
    from postdp.postprocess.topdown2020.rounding import schema_rounders
    from postdp.tables import Schema

    persons = pl94_schema()
    hhgq, _, _, race = persons.attributes
    assert schema_rounders(persons) == ROUNDER_QUERIES
    assert schema_rounders(Schema([race])) == ("detailed",)
    assert schema_rounders(Schema([hhgq, race])) == ("hhgq", "detailed")
    assert schema_rounders(Schema([persons.attributes[2], race])) == ("hispanic", "detailed")


@pytest.mark.parametrize("seed", [0, 3])
def test_table_p1_runs_through_topdown_2020_with_its_own_rounders(seed):
    """The P1-shaped preset (63 race cells): integral, nonnegative, consistent, the nation's
    and the states' totals exact; the default rounders are ``("detailed",)``; the persons
    schema's default is the production list."""
    from postdp.postprocess import ROUNDER_QUERIES
    from postdp.tables import load_strategy

    persons, work = small_pl94_state(seed, people=60)
    m = measure(persons, work, secure=False, rng=seed)
    np.testing.assert_array_equal(top_down_2020(m), top_down_2020(m, rounders=ROUNDER_QUERIES))
    p1 = load_strategy("pl94-2020-p1")
    table = p1.tabulate(persons)
    geo = table.geography
    m = measure(table, p1.workload(table), secure=False, rng=seed, size=2)
    out = top_down_2020(m)
    assert out.dtype == np.int64 and out.shape == (2, geo.n, 63) and out.min() >= 0
    inner = ~geo.is_leaf
    np.testing.assert_array_equal(out[:, inner], _children_sums(out, geo)[:, inner])
    truth = table.counts()[:3, 0]
    np.testing.assert_array_equal(out[:, :3].sum(axis=-1), np.broadcast_to(truth, (2, 3)))
    np.testing.assert_array_equal(out, top_down_2020(m, rounders=["detailed"]))
    with pytest.raises(ValidationError, match="hhgq"):
        top_down_2020(m, rounders=["hhgq", "detailed"])

"""The 2020 estimators on the production spine's single-child bypass (issue 25;
``pl94-2020-design.md`` section 1.5): each geounit's answers weighed by its own budget.

- ``topdown-2020`` and ``blue-restore`` stay integral (or nonnegative), consistent and exact
  on the invariants, and give a geounit with no budget its parent's histogram;
- scaling every geounit of a level alike is the same as measuring that level with that
  multiple of its budget (the same answers, another workload): the per-geounit weights are
  wired into every pass;
- the weighted total split of least-squares pass 0 equals a convex solver's;
- estimators that weigh a level's geounits alike refuse such measurements."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import postdp
from postdp.errors import ValidationError
from postdp.postprocess import blue_restore, top_down_2020
from postdp.postprocess._solvers.simplex import weighted_simplex
from postdp.tables import Measurement, TableMeasurements, Workload, measure, single_child_bypass
from tests.postprocess._reference import qp_simplex
from tests.tables._reference import blue_table, small_pl94_state


def _bypassed(seed, size=None):
    table, work = small_pl94_state(seed, people=40)
    s = single_child_bypass(table, work)
    return table, work, s, measure(table, work, secure=False, rng=seed, size=size, budget_scale=s)


def _consistent(out, geo):
    kids = np.zeros_like(out)
    np.add.at(kids, (slice(None), geo.parent[1:]), out[:, 1:])
    inner = ~geo.is_leaf
    return bool(np.allclose(out[:, inner], kids[:, inner], atol=1e-7))


@pytest.mark.parametrize("seed", [0, 1])
def test_topdown_2020_on_the_bypassed_spine(seed):
    table, _, s, m = _bypassed(seed, size=2)
    geo = table.geography
    assert (s == 0).sum() == 8 and (s > 1).sum() == 3  # three chains, each measured at its top
    assert s[2] == 1.0  # S2's one county: the production stops at the counties
    out = top_down_2020(m)
    assert out.dtype == np.int64 and out.min() >= 0 and _consistent(out, geo)
    truth = table.counts()[:, 0]
    np.testing.assert_array_equal(out[:, :3].sum(axis=-1), np.broadcast_to(truth[:3], (2, 3)))
    for g in np.flatnonzero(s == 0):  # the same persons as its parent
        np.testing.assert_array_equal(out[:, g], out[:, geo.parent[g]])


@pytest.mark.parametrize("integral", [False, True])
def test_blue_restore_on_the_bypassed_spine(integral):
    table, _, s, m = _bypassed(2)
    geo = table.geography
    out = blue_restore(m, integral=integral)
    assert out.min() >= -1e-9 and _consistent(out[None], geo)
    if integral:
        np.testing.assert_array_equal(out, np.round(out))
    np.testing.assert_allclose(out[:3].sum(axis=-1), table.counts()[:3, 0], atol=1e-7)
    for g in np.flatnonzero(s == 0):
        np.testing.assert_allclose(out[g], out[geo.parent[g]], atol=1e-9)


@pytest.mark.parametrize("level", [2, 3, 5])
def test_a_level_scaled_alike_is_that_level_measured_with_that_budget(level):
    """The same answers read two ways: with every geounit of ``level`` at budget factor
    0.5, and under a workload whose ``level`` mechanisms have half the rho. Every estimator
    must give the same release (weights 1 / variance agree to ~1e-11 for these discrete
    Gaussians)."""
    table, work = small_pl94_state(7, people=40)
    geo = table.geography
    m = measure(table, work, secure=False, rng=7)
    half = Workload(
        [
            x
            if x.public or x.level != level
            else Measurement(x.level, x.query, replace(x.mechanism, rho=x.mechanism.rho / 2))
            for x in work.measurements
        ]
    )
    scale = np.ones(geo.n)
    scale[geo.levels[level]] = 0.5
    scaled = TableMeasurements(table, work, m.values, False, (), scale)
    plain = TableMeasurements(table, half, m.values, False)
    np.testing.assert_allclose(blue_table(scaled), blue_table(plain), atol=1e-8)
    np.testing.assert_allclose(blue_restore(scaled), blue_restore(plain), atol=1e-6)
    np.testing.assert_array_equal(top_down_2020(scaled), top_down_2020(plain))


@pytest.mark.parametrize("seed", range(8))
def test_the_weighted_total_split_equals_a_convex_solver(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 12))
    v = rng.normal(5, 6, k)
    h = rng.choice([0.5, 1.0, 1.75, 4.0], k)
    total = float(rng.uniform(0, 40))
    got = weighted_simplex(v, h, total)
    want = qp_simplex(v, total, nonneg=True, weights=h)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert got.min() >= 0 and abs(got.sum() - total) < 1e-9


def test_geounits_with_no_budget_must_be_only_children():
    table, work = small_pl94_state(0, people=40)
    m = measure(table, work, secure=False, rng=0)
    scale = np.ones(table.geography.n)
    scale[3] = 0.0  # C1 has a sibling, C2
    bad = TableMeasurements(table, work, m.values, False, (), scale)
    for estimator in (top_down_2020, blue_restore):
        with pytest.raises(ValidationError, match="only child"):
            estimator(bad)


def test_estimators_that_weigh_a_level_alike_refuse_per_geounit_budgets():
    _, _, _, m = _bypassed(0)
    with pytest.raises(ValidationError, match="budget_scale"):
        postdp.top_down(m)

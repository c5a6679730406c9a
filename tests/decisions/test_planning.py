"""The allotment planner: dollars misallocated, minimised over per-level splits."""

import itertools

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.analysis.planner_mc import crn_releases
from postdp.decisions import allot, plan_allotment_budget
from postdp.errors import ValidationError


@pytest.fixture(scope="module")
def tree():
    return Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2", "b1", "b2"],
        [None, "T", "T", "a", "a", "b", "b"],
        [60, 14, 46, 4, 10, 30, 16],
    )


def test_the_plan_beats_a_grid_on_the_same_draws(tree):
    a = np.array([1.0, 2.0, 1.0, 0.5])
    kwargs = {"total": 1.2, "multipliers": a, "amount": 1e6, "draws": 120, "rng": 2}
    plan = plan_allotment_budget(tree, "project-nonneg", **kwargs)
    assert plan.shares.sum() == pytest.approx(1.2)
    releases = crn_releases(tree, "project-nonneg", "laplace", None, 120, 2)
    truth = allot(tree.counts[tree.leaves], a, amount=1e6)

    def loss(split):
        released = releases(np.asarray(split))[:, tree.leaves]
        usable = (released * a).sum(axis=1) > 0
        per_draw = np.full(released.shape[0], 1e6)  # nothing allotted: the whole pot
        money = allot(released[usable], a, amount=1e6)
        per_draw[usable] = 0.5 * np.abs(money - truth).sum(axis=1)
        return per_draw.mean()

    assert plan.equal_objective == pytest.approx(loss([0.4, 0.4, 0.4]), rel=1e-6)
    grid = np.linspace(0.05, 0.9, 10)
    best = min(
        loss(np.array([x, y, 1 - x - y]) * 1.2)
        for x, y in itertools.product(grid, grid)
        if x + y < 0.97
    )
    assert plan.objective <= plan.equal_objective
    assert plan.objective <= best * 1.01, (plan.objective, best)


def test_bad_inputs(tree):
    with pytest.raises(ValidationError, match="`multipliers`"):
        plan_allotment_budget(tree, "project-nonneg", total=1.0, multipliers=[1.0, 2.0])
    with pytest.raises(ValidationError, match="`mechanism`"):
        plan_allotment_budget(tree, "project-nonneg", total=1.0, mechanism="geometric")
    with pytest.raises(ValidationError, match="`total`"):
        plan_allotment_budget(tree, "project-nonneg", total=-1.0)


def test_a_feature_the_rule_does_not_read_gets_almost_nothing():
    from postdp.decisions import Threshold, plan_decision_budget

    data = {"x": [50.0, 95.0, 104.0, 150.0], "unused": [10.0, 20.0, 30.0, 40.0]}
    plan = plan_decision_budget(data, Threshold("x", 100), total=1.0, draws=200, rng=1)
    assert plan.shares[1] < 0.05 and plan.objective <= plan.equal_objective


def test_section203_plan_beats_a_grid_on_the_same_draws():
    """Seed 002's Section 203 rule on the bundled jurisdictions nearest their thresholds:
    expected flipped determinations, planned across the three features."""
    from postdp.data import load_section203
    from postdp.decisions import plan_decision_budget, section203_margin, section203_rule
    from postdp.decisions.planning import _flips

    frame = load_section203()
    columns = ["vacit_total", "vaclep", "illit"]
    near = np.argsort(section203_margin({c: frame[c].to_numpy() for c in columns}))[:150]
    data = {c: frame[c].to_numpy()[near].astype(float) for c in columns}
    rule = section203_rule()
    kwargs = {"total": 0.5, "draws": 80, "rng": 3, "postprocess": "clamp"}
    plan = plan_decision_budget(data, rule, **kwargs)
    flips = _flips(data, rule, "laplace", "clamp", 80, 3)
    grid = np.linspace(0.05, 0.9, 9)
    best = min(
        flips(np.array([a, b, 1 - a - b]) * 0.5)
        for a, b in itertools.product(grid, grid)
        if a + b < 0.97
    )
    assert plan.equal_objective == pytest.approx(flips(np.full(3, 0.5 / 3)))
    assert plan.objective <= plan.equal_objective
    assert plan.objective <= best * 1.02, (plan.objective, best, plan.shares)

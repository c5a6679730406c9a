"""The budget planner against a brute-force grid, and against the equal split."""

import itertools

import numpy as np
import pytest

import postdp
from postdp.data import synthetic_hierarchy
from postdp.errors import ValidationError
from postdp.mechanisms import Gaussian, Laplace
from postdp.postprocess.variances import hierarchy_variances


def _objective(h, shares, family, weights, public_root):
    mechs = [family(**{"rho" if family is Gaussian else "epsilon": s}) for s in shares]
    var = hierarchy_variances(h, mechs, public_root=public_root)
    return sum(w * var[nodes].mean() for w, nodes in zip(weights, h.levels, strict=True))


@pytest.mark.parametrize(
    ("family", "name", "weights", "public_root"),
    [
        (Gaussian, "gaussian", [0.0, 0.0, 1.0], False),
        (Laplace, "laplace", [0.0, 1.0, 1.0], True),
        (Gaussian, "gaussian", [1.0, 1.0, 1.0], False),
    ],
)
def test_the_plan_is_no_worse_than_a_fine_grid(family, name, weights, public_root):
    h = synthetic_hierarchy((3, 4), rng=2)
    total = 2.0
    plan = postdp.plan_budget(
        h, total=total, mechanism=name, weights=weights, public_root=public_root
    )
    assert plan.shares.sum() == pytest.approx(total)
    assert plan.objective == pytest.approx(_objective(h, plan.shares, family, weights, public_root))
    grid = np.linspace(0.02, 0.96, 48)
    best = min(
        _objective(h, total * np.array([a, b, 1 - a - b]), family, weights, public_root)
        for a, b in itertools.product(grid, grid)
        if a + b < 0.99
    )
    assert plan.objective <= best * (1 + 1e-6)
    assert plan.objective <= plan.equal_objective


def test_county_split_beats_the_equal_split():
    from postdp.data import county_hierarchy

    h = county_hierarchy()
    plan = postdp.plan_budget(h, total=3.0, weights=[0, 0, 1], compare=[1, 1, 1], starts=2)
    assert plan.given_objective is not None
    assert plan.given_objective == pytest.approx(plan.equal_objective)
    assert plan.objective < 0.5 * plan.equal_objective
    frame = plan.to_frame()
    assert list(frame.columns) == ["level", "budget", "share", "mean_variance"]
    assert frame["share"].sum() == pytest.approx(1.0)  # a fraction of the total


def test_bad_plans():
    h = synthetic_hierarchy((2, 2), rng=0)
    with pytest.raises(ValidationError, match="`total` must be positive"):
        postdp.plan_budget(h, total=0.0)
    with pytest.raises(ValidationError, match="`weights` needs 3"):
        postdp.plan_budget(h, total=1.0, weights=[1.0])
    with pytest.raises(ValidationError, match="unknown mechanism"):
        postdp.plan_budget(h, total=1.0, mechanism="cauchy")
    with pytest.raises(ValidationError, match="`compare` needs 3 positive"):
        postdp.plan_budget(h, total=1.0, compare=[1.0, 0.0, 1.0])
    # a split spending more than the total would look better than the optimum
    with pytest.raises(ValidationError, match="`compare` spends 3, not the total 1"):
        postdp.plan_budget(h, total=1.0, compare=[1.0, 1.0, 1.0])
    from postdp.analysis import plan_mae_budget

    counted = synthetic_hierarchy((2, 2), rng=0)
    with pytest.raises(ValidationError, match=r"`compare` spends 1\.5, not the total 1"):
        plan_mae_budget(counted, "clamp", total=1.0, draws=10, compare=[0.5, 0.5, 0.5])


def test_frontier_follows_the_gaussian_scaling_law():
    """Gaussian(rho) has variance 1/(2 rho): at fixed shares every (P) variance scales as
    1/total, so the optimal objective times the total is the same at every total and the
    optimal shares are proportional to it."""
    from postdp.analysis import budget_frontier

    h = postdp.Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2", "b1"], [None, "T", "T", "a", "a", "b"]
    )
    f = budget_frontier(
        [0.25, 1.0, 4.0], h, mechanism="gaussian", weights=[0, 1, 1], compare=[1, 1, 2]
    )
    scaled = f["optimal"] * f["total"]
    np.testing.assert_allclose(scaled, scaled.iloc[0], rtol=1e-6)
    shares = f[["budget_0", "budget_1", "budget_2"]].to_numpy() / f["total"].to_numpy()[:, None]
    np.testing.assert_allclose(shares, shares[[0]].repeat(3, axis=0), atol=1e-4)
    assert (f["optimal"] <= f["equal"] * (1 + 1e-9)).all()
    assert (f["optimal"] <= f["given"] * (1 + 1e-9)).all()


def test_frontier_columns_name_the_budgets_they_hold():
    """Issue 42: the frontier's per-level columns hold budgets (they add up to the total, not
    to 1), so they are named ``budget_<d>``; no column is called a share."""
    from postdp.analysis import budget_frontier

    h = postdp.Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    f = budget_frontier([0.5, 2.0], h, mechanism="gaussian", weights=[1, 1])
    per_level = [c for c in f.columns if c.startswith(("budget_", "share_"))]
    assert per_level == ["budget_0", "budget_1"]
    np.testing.assert_allclose(f[per_level].sum(axis=1), f["total"], rtol=1e-9)


def test_the_table_planner_is_reached_through_plan_budget_only():
    """The deprecated ``plan_table_budget`` alias is deleted, not kept."""
    import postdp.analysis
    import postdp.analysis.planner

    assert not hasattr(postdp.analysis, "plan_table_budget")
    assert not hasattr(postdp.analysis.planner, "plan_table_budget")
    with pytest.raises(AttributeError):
        postdp.analysis.plan_table_budget  # noqa: B018


def test_table_plan_beats_every_point_of_a_grid():
    """Three measured queries on a small P1-shaped table (Laplace, so variances scale as
    1/eps^2 per query): the plan's objective is the weighted mean exact (P) variance of the
    detailed cells at its split (TableProjector.variances, computed here), and no split of
    a 12 x 12 grid does better."""
    from postdp.data import synthetic_table
    from postdp.postprocess import TableProjector
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((2, 3), leaf_mean=100, rng=1)
    cat = t.categories
    queries = [
        (0, Query.detailed(cat)),
        (1, Query.nodes(["P1_002N", "P1_009N"])),
        (2, Query.detailed(cat)),
    ]
    total, weights = 2.0, [0, 1, 1]
    plan = postdp.plan_budget(
        t, queries=queries, total=total, mechanism="laplace", weights=weights, starts=4
    )
    assert plan.shares.sum() == pytest.approx(total)
    assert plan.objective <= plan.equal_objective

    def value(split):
        pairs = zip(queries, split, strict=True)
        work = Workload([Measurement(d, q, Laplace(epsilon=b)) for (d, q), b in pairs])
        var = TableProjector(t, work).variances()[:, cat.leaves]
        levels = t.geography.levels
        return sum(w * var[nodes].mean() for w, nodes in zip(weights, levels, strict=True))

    assert plan.objective == pytest.approx(value(plan.shares), rel=1e-12)
    assert plan.equal_objective == pytest.approx(value([total / 3] * 3), rel=1e-12)
    grid = np.linspace(0.05, 0.9, 12)
    best = min(
        value([a * total, b * total, (1 - a - b) * total])
        for a, b in itertools.product(grid, grid)
        if a + b < 0.97
    )
    assert plan.objective <= best * (1 + 1e-6)


@pytest.mark.parametrize("steps", ["project-nonneg", "project-nonneg,round", "clamp"])
def test_mae_plan_beats_a_grid_on_the_same_common_random_numbers(steps):
    """With common random numbers the objective is deterministic, so a grid of splits
    evaluated on the same draws (compare=) is a fair brute-force reference."""
    from postdp.analysis import plan_mae_budget

    h = postdp.Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2", "b1", "b2"],
        [None, "T", "T", "a", "a", "b", "b"],
        [40, 12, 28, 3, 9, 20, 8],
    )
    kwargs = {"total": 1.5, "weights": [0, 1, 2], "draws": 150, "rng": 4, "bins": (0, 10, 100)}
    plan = plan_mae_budget(h, steps, **kwargs)
    assert plan.shares.sum() == pytest.approx(1.5)
    from postdp.analysis.planner_mc import mae_levels

    levels = mae_levels(h, steps, "laplace", None, (0, 10, 100), 150, 4)
    grid = np.linspace(0.05, 0.9, 12)
    best = min(
        float(np.array([0, 1, 2]) @ levels(np.array([a, b, 1 - a - b]) * 1.5))
        for a, b in itertools.product(grid, grid)
        if a + b < 0.97
    )
    assert plan.objective <= plan.equal_objective
    assert plan.objective <= best * 1.01, (plan.objective, best)


def test_the_plan_says_when_it_is_at_a_corner():
    """The exact-variance planner on the county hierarchy puts almost everything on the
    counties (a corner); the verdict says so and what it implies. An equal split is not."""
    from postdp.analysis import BudgetPlan
    from postdp.data import county_hierarchy

    plan = postdp.plan_budget(county_hierarchy(), total=1.0, starts=2)
    assert (plan.shares[:2] / plan.shares.sum() < 0.01).all()  # 0.0001, 0.0001, 0.9998
    assert plan.verdict().startswith("at a corner: part(s) 0, 1 get less than 1%")
    even = BudgetPlan(np.full(3, 1 / 3), 1.0, 1.0, None, np.ones(3))
    assert even.verdict().startswith("interior split: every part gets at least 1%")
    corner = BudgetPlan(np.array([1e-4, 0.2, 0.7999]), 1.0, 1.0, None, np.ones(3))
    assert corner.verdict().startswith("at a corner: part(s) 0 get less than 1%")


def test_a_long_plan_reports_its_progress_and_the_plan_is_unchanged():
    """Issue 27: ``progress`` is called once per split evaluated; the plan is the same."""
    from postdp.analysis import plan_mae_budget

    h = postdp.Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [12, 2, 10])
    calls = []
    kwargs = {"total": 1.0, "weights": [0, 1], "draws": 60}
    quiet = plan_mae_budget(h, "project-nonneg", **kwargs)
    loud = plan_mae_budget(h, "project-nonneg", **kwargs, progress=lambda: calls.append(1))
    assert len(calls) > 3
    np.testing.assert_array_equal(loud.shares, quiet.shares)


@pytest.mark.statistical
def test_a_tables_mae_objective_is_the_monte_carlo_mae_of_its_design():
    """The MAE planner's objective for a table at a given split (common random numbers)
    equals an independent Monte Carlo of the same design (ReleaseDesign.run, other noise)
    within z = 4 standard errors of the difference, each from its own sample's spread; a
    plan's ``given_objective`` is that objective at the split it is given, bit for bit (the
    plan itself on 10 common draws: its optimisation costs one solve per draw per split)."""
    from postdp import Gaussian
    from postdp.analysis import ReleaseDesign, plan_mae_budget
    from postdp.analysis.planner_mc import table_mae_levels
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((2, 3), leaf_mean=20, rng=4)
    qs = [(d, Query.detailed(t.categories)) for d in range(3)]
    split = [0.3, 0.5, 1.2]
    w = np.array([0.0, 0.0, 1.0])

    def objective(draws):
        levels = table_mae_levels(
            t, qs, "project-nonneg", mechanism="gaussian", public=[], categories=None,
            bins=(0, 10, 100, 1_000, 10_000), draws=draws, rng=3,
        )  # fmt: skip
        return float(w @ levels(np.array(split)))

    draws = 60
    work = Workload(
        [Measurement(d, q, Gaussian(rho=b)) for (d, q), b in zip(qs, split, strict=True)]
    )
    runs = ReleaseDesign(t, work, "project-nonneg").run(rng=9, size=draws)
    geo, cat = t.geography, t.categories
    leaves = np.flatnonzero(geo.depth == 2)
    truth = t.counts()
    totals = truth[:, cat.root]
    bins = np.searchsorted([0, 10, 100, 1_000, 10_000], totals, side="right") - 1
    err = np.abs(runs[:, leaves][:, :, cat.leaves] - truth[leaves][:, cat.leaves]).mean(axis=2)
    groups = [np.flatnonzero(bins[leaves] == b) for b in np.unique(bins[leaves])]
    per_draw = np.mean([err[:, g].mean(axis=1) for g in groups], axis=0)  # (draws,)
    se = per_draw.std(ddof=1) / np.sqrt(draws)
    assert abs(objective(draws) - per_draw.mean()) <= 4 * np.sqrt(2) * se
    plan = plan_mae_budget(
        t, "project-nonneg", total=2.0, mechanism="gaussian", queries=qs, weights=[0, 0, 1],
        draws=10, compare=split, rng=3,
    )  # fmt: skip
    assert plan.given_objective == objective(10)
    assert plan.objective <= plan.equal_objective + 1e-12
    assert plan.shares.sum() == pytest.approx(2.0, rel=1e-9) and plan.shares.size == 3
    assert list(plan.to_frame().columns) == ["level", "budget", "share", "mean_mae"]
    small = {"total": 2.0, "mechanism": "gaussian", "queries": qs, "draws": 10, "rng": 5}
    first = plan_mae_budget(t, "topdown", **small)
    again = plan_mae_budget(t, "topdown", **small)
    assert np.array_equal(again.shares, first.shares)  # common random numbers: deterministic

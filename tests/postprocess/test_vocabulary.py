"""One vocabulary for counts and tables (SPEC section 12): ``project``, ``top_down``,
``round``, ``kkt_report`` and ``plan_budget`` take a hierarchy's counts or a table, and a
hierarchy of counts is the table with one cell per geounit."""

import numpy as np
import pytest

import postdp
from postdp import Hierarchy, Laplace
from postdp.data import synthetic_hierarchy
from postdp.errors import ValidationError
from postdp.postprocess import TableKKTReport, TableNonnegReport
from postdp.tables import Measurement, Query, Table, Workload, expand, measure
from tests.tables._reference import random_case


def _one_cell(seed):
    """A hierarchy, the same geography as a one-cell table, one draw of each."""
    h = synthetic_hierarchy((3, 4), rng=seed)
    cat = Hierarchy.from_parents(["T"], [None])
    table = Table(h, cat, h.counts[h.leaves][:, None])
    mechs = [Laplace(epsilon=0.5), Laplace(epsilon=1.0), Laplace(epsilon=2.0)]
    work = Workload([Measurement(d, Query.detailed(cat), mechs[d]) for d in range(h.n_levels)])
    measured = measure(table, work, secure=False, rng=seed, size=4)
    noisy = np.zeros((4, h.n))
    for d, values in enumerate(measured.values):
        noisy[:, h.levels[d]] = values[..., 0]
    weights = postdp.postprocess.inverse_variance_weights(h, mechs)
    return h, table, measured, noisy, weights


@pytest.mark.parametrize("seed", range(4))
def test_a_hierarchy_is_the_one_cell_table(seed):
    """(P), (P+) and top-down of the one-cell table equal those of the hierarchy with
    inverse-variance weights (the table's GLS weights), on the same noisy values."""
    h, table, measured, noisy, weights = _one_cell(seed)
    for nonneg in (False, True):
        as_table = postdp.project(measured, nonneg=nonneg)
        assert as_table.shape == (4, h.n, 1)
        as_counts = postdp.project(noisy, h, nonneg=nonneg, weights=weights)
        np.testing.assert_allclose(as_table[..., 0], as_counts, rtol=0, atol=1e-9)
    down = postdp.top_down(measured)[..., 0]
    np.testing.assert_allclose(down, postdp.top_down(noisy, h, weights=weights), atol=1e-9)
    # rounding the one-cell table is rounding the hierarchy, draw for draw
    np.testing.assert_array_equal(
        postdp.round(down[..., None], table, rng=seed)[..., 0], postdp.round(down, h, rng=seed)
    )


@pytest.mark.parametrize("seed", range(6))
def test_the_verbs_on_tables_are_the_table_solvers(seed):
    table, workload = random_case(seed)
    measured = measure(table, workload, secure=False, rng=seed)
    geo, cat = table.geography, table.categories
    blue = postdp.project(measured, nonneg=False)
    assert blue.shape == (geo.n, cat.leaves.size)  # detailed cells of every geounit
    np.testing.assert_array_equal(blue, postdp.project(measured, nonneg=False, method="project"))
    assert expand(blue, geo, cat).shape == (geo.n, cat.n)
    report = postdp.kkt_report(blue, measured, nonneg=False)
    assert isinstance(report, TableKKTReport) and report.worst_relative() < 1e-9
    plus = postdp.project(measured, nonneg=True)
    report = postdp.kkt_report(plus, measured)
    assert isinstance(report, TableNonnegReport) and report.worst_relative() < 1e-9
    assert postdp.kkt_report(blue, measured).negative > 0 or blue.min() >= 0
    down = postdp.top_down(measured) if _top_down_applies(table, workload) else None
    if down is not None:
        rounded = postdp.round(down, table, rng=seed)
        assert (np.abs(rounded - down) < 1).all()


def _top_down_applies(table, workload):
    from postdp.postprocess import check_top_down

    try:
        check_top_down(table, workload)
    except ValidationError:
        return False
    return True


def test_the_verbs_refuse_what_belongs_to_the_other_model():
    h, table, measured, noisy, weights = _one_cell(0)
    with pytest.raises(ValidationError, match="`weights` is for counts"):
        postdp.top_down(measured, weights=weights)
    with pytest.raises(ValidationError, match="`hierarchy` is for counts"):
        postdp.kkt_report(postdp.project(measured)[0], measured, h)
    with pytest.raises(ValidationError, match="`hierarchy` is required"):
        postdp.kkt_report(noisy, noisy)
    with pytest.raises(ValidationError, match="`split` and `client` are for tables"):
        postdp.round(noisy[0], h, split=True)
    with pytest.raises(TypeError, match="Hierarchy or a Table"):
        postdp.round(noisy[0], "h")
    with pytest.raises(ValidationError, match="`queries` is required"):
        postdp.plan_budget(table, total=1.0)
    with pytest.raises(ValidationError, match="`queries` and `categories` are for tables"):
        postdp.plan_budget(h, total=1.0, categories=["T"])


def test_plan_budget_takes_a_table_with_its_workload():
    """A workload's noisy measurements are the planned pairs; its public ones stay exact."""
    t = postdp.data.synthetic_table((2, 3), leaf_mean=100, rng=0)
    cat = t.categories
    work = Workload(
        [Measurement(0, Query("total", [[str(cat.ids[cat.root])]]), None)]
        + [Measurement(d, Query.detailed(cat), Laplace(epsilon=1.0)) for d in range(3)]
    )
    by_workload = postdp.plan_budget(t, queries=work, total=3.0, mechanism="laplace", starts=1)
    pairs = [(m.level, m.query) for m in work.measurements if not m.public]
    # the workload's own mechanisms are not read: only its pairs and its public queries
    regauged = Workload(
        [work.measurements[0]] + [Measurement(d, q, Laplace(epsilon=9.0)) for d, q in pairs]
    )
    again = postdp.plan_budget(t, queries=regauged, total=3.0, mechanism="laplace", starts=1)
    np.testing.assert_allclose(by_workload.shares, again.shares, rtol=1e-12)
    assert by_workload.shares.size == 3
    # the public total is held exact: without it the same split is judged worse
    by_pairs = postdp.plan_budget(t, queries=pairs, total=3.0, mechanism="laplace", starts=1)
    assert by_workload.objective < by_pairs.objective


@pytest.mark.parametrize(
    "name",
    [
        "project_table",
        "top_down_table",
        "round_table",
        "table_kkt_report",
        "table_nonneg_report",
        "Restriction",
        "LogLaplace",
        "TemperatureSearch",
        "optimal_temperature",
    ],
)
def test_the_deprecated_aliases_are_gone(name):
    """0.1.0 was never published: the table twins' old names and the names that moved to
    mechanisms and decisions are not kept as aliases."""
    with pytest.raises(AttributeError, match=name):
        getattr(postdp.postprocess, name)


def _one_cell_case(seed):
    """A one-cell table with a public root and two measurements at the leaf level."""
    h = synthetic_hierarchy((3, 4), rng=seed)
    cat = Hierarchy.from_parents(["T"], [None])
    table = Table(h, cat, h.counts[h.leaves][:, None])
    cell = Query.detailed(cat)
    leaf = h.n_levels - 1
    work = Workload(
        [Measurement(0, cell, None)]
        + [Measurement(leaf, Query("total", [["T"]]), Laplace(epsilon=0.3))]
        + [Measurement(d, cell, Laplace(epsilon=1.0)) for d in range(1, h.n_levels)]
    )
    return table, measure(table, work, secure=False, rng=seed, size=3)


@pytest.mark.parametrize("seed", range(4))
def test_a_one_cell_table_takes_the_hierarchy_solvers(seed, monkeypatch):
    """The one-cell table is solved as the hierarchy (its answers combined by inverse
    variance, the public root fixed), and equals the general c x c solvers' answer."""
    from postdp.postprocess import topdown
    from postdp.postprocess._solvers import one_cell as one_cell_module
    from postdp.postprocess._solvers.one_cell import one_cell

    table, measured = _one_cell_case(seed)
    counts = one_cell(measured)
    assert counts is not None and list(counts.public) == [table.geography.ids[0]]
    verbs = {
        "(P)": lambda: postdp.project(measured, nonneg=False),
        "(P+)": lambda: postdp.project(measured),
        "top-down": lambda: postdp.top_down(measured),
    }
    fast = {name: verb() for name, verb in verbs.items()}
    np.testing.assert_array_equal(fast["(P+)"][..., 0], counts.solve(nonneg=True))
    declined: list[object] = []
    for module in (one_cell_module, topdown):  # (P) and (P+) reach it via solve_one_cell
        monkeypatch.setattr(module, "one_cell", lambda m: declined.append(m))
    for name, verb in verbs.items():
        asked = len(declined)
        general = verb()
        assert len(declined) > asked, f"{name} did not ask for the one-cell path"
        scale = max(1.0, float(np.abs(general).max()))
        np.testing.assert_allclose(fast[name], general, rtol=0, atol=1e-9 * scale, err_msg=name)
    for b in range(3):
        assert postdp.kkt_report(fast["(P+)"][b], measured[b]).worst_relative() < 1e-12


def test_only_one_cell_tables_without_budget_factors_take_the_fast_path():
    import dataclasses

    from postdp.postprocess._solvers.one_cell import one_cell

    table, workload = random_case(0)
    assert table.categories.leaves.size > 1
    assert one_cell(measure(table, workload, secure=False, rng=0)) is None
    table, measured = _one_cell_case(0)
    assert one_cell(measured) is not None
    scaled = dataclasses.replace(measured, budget_scale=np.ones(table.geography.n))
    assert one_cell(scaled) is None
    unmeasured = Workload([m for m in measured.workload.measurements if m.level != 1])
    assert one_cell(measure(table, unmeasured, secure=False, rng=0)) is None

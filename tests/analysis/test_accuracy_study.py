"""The accuracy study (issue 44): every estimator on the same draws, the Census Bureau's
metrics per draw, their means with Monte Carlo standard errors and paired differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp.analysis import (
    AccuracyStudy,
    ReleaseDesign,
    accuracy_study,
    census_metrics,
    reliability_threshold,
)
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector
from postdp.tables import measure, pl94_schema
from tests.tables._reference import small_pl94_state

SCHEMA = pl94_schema()
Z = 4.0  # fixed seeds; |estimate - theory| <= Z * SE from the sample


@pytest.fixture(scope="module")
def state():
    return small_pl94_state(3)


def test_every_row_is_the_direct_metrics_of_its_draw(state):
    """The documented streams: draw r measures with SeedSequence(seed).spawn(R)[r].spawn(1 +
    E)[0], estimator k rounds with child 1 + k. Rebuilding every release that way, each row
    of ``per_draw`` equals ``census_metrics`` of that release (rmse kept as its square), and
    the pooled reliability threshold equals the threshold of every draw's release at once."""
    table, work = state
    names = ["topdown-2020", "blue-restore,round"]
    study = accuracy_study(
        table, work, names, schema=SCHEMA, draws=2, rng=11, queries=["total", "hispanic"],
        reliability_level=4,
    )  # fmt: skip
    kept = {name: [] for name in names}
    for r, seed in enumerate(np.random.SeedSequence(11).spawn(2)):
        noise, *rounding = seed.spawn(1 + len(names))
        measured = measure(table, work, secure=False, rng=np.random.default_rng(noise))
        for name, stream in zip(names, rounding, strict=True):
            released = ReleaseDesign(table, work, name).solve(
                measured, rng=np.random.default_rng(stream)
            )
            kept[name].append(released)
            direct = census_metrics(released, table, schema=SCHEMA, queries=["total", "hispanic"])
            rows = study.per_draw[
                (study.per_draw["estimator"] == name) & (study.per_draw["draw"] == r)
            ]
            assert len(rows) == len(direct)
            np.testing.assert_array_equal(rows["mae"].to_numpy(), direct["mae"].to_numpy())
            np.testing.assert_allclose(rows["mse"], direct["rmse"] ** 2, rtol=1e-15)
            np.testing.assert_array_equal(rows["mean_error"], direct["mean_error"])
            np.testing.assert_array_equal(rows["tvd"].isna(), direct["tvd"].isna())
    for name in names:
        pooled = reliability_threshold(np.stack(kept[name]), table, schema=SCHEMA, level=4)
        ours = study.reliability[name]
        assert ours.threshold == pooled.threshold
        pd.testing.assert_frame_equal(
            ours.by_bin[["low", "high", "units"]], pooled.by_bin[["low", "high", "units"]],
            check_dtype=False,
        )  # fmt: skip
        np.testing.assert_allclose(ours.by_bin["share_within"], pooled.by_bin["share_within"])


def test_summary_and_differences_by_hand():
    """Means, standard errors (sd / sqrt(draws)), rmse from the mean square (delta-method
    SE), NaN tvd left out of its mean, and paired differences, on numbers worked by hand."""
    frame = pd.DataFrame(
        {
            "estimator": ["a"] * 3 + ["b"] * 3,
            "draw": [0, 1, 2] * 2,
            "query": "total",
            "level": "1",
            "size": "0+",
            "geounits": 4,
            "counts": 4,
            "mae": [1.0, 2.0, 3.0, 2.0, 2.0, 5.0],
            "mse": [4.0, 4.0, 16.0, 1.0, 9.0, 8.0],
            "tvd": [0.1, np.nan, 0.3, 0.2, 0.2, np.nan],
        }
    )
    s = AccuracyStudy(frame, {}, "a")
    assert s.estimators == ["a", "b"] and s.draws == 3
    summary = s.summary().set_index("estimator")
    assert summary.loc["a", "mae"] == 2.0
    assert summary.loc["a", "mae_se"] == pytest.approx(1.0 / np.sqrt(3))  # sd 1
    assert summary.loc["a", "rmse"] == pytest.approx(np.sqrt(8.0))
    mse_se = np.sqrt(48.0) / np.sqrt(3)  # var of (4, 4, 16) is 48
    assert summary.loc["a", "rmse_se"] == pytest.approx(mse_se / (2 * np.sqrt(8.0)))
    assert summary.loc["a", "tvd"] == pytest.approx(0.2)  # (0.1 + 0.3) / 2
    assert summary.loc["a", "tvd_se"] == pytest.approx(np.sqrt(0.02) / np.sqrt(2))
    diff = s.differences().set_index("estimator")
    # b - a per draw: mae (1, 0, 2): mean 1, sd 1
    assert diff.loc["b", "mae"] == pytest.approx(1.0)
    assert diff.loc["b", "mae_se"] == pytest.approx(1 / np.sqrt(3))
    assert diff.loc["b", "mae_lo"] == pytest.approx(1 - 1.96 / np.sqrt(3))
    assert diff.loc["b", "tvd"] == pytest.approx(0.1)  # only draw 0 has both
    again = s.differences("b").set_index("estimator")
    assert again.loc["a", "mae"] == pytest.approx(-1.0) and again.loc["a", "reference"] == "b"
    with pytest.raises(ValidationError, match="`reference` must be one of"):
        s.differences("c")


@pytest.mark.statistical
def test_the_blue_is_unbiased_with_its_gls_variance(state):
    """The study reproduces the BLUE's known law over 60 draws: its mean square error per
    level is the GLS variance of the level's totals (TableProjector.variances, the exact
    filter), and it is unbiased: the mean algebraic error of the race-alone-or-in-combination
    counts is 0, each within z SE. (A level's mean error of totals, or of any query whose
    groups partition the persons, is 0 in every draw: the public totals fix their sum.)"""
    table, work = state
    queries = ["total", "race alone or in combination"]
    study = accuracy_study(
        table, work, ["project"], schema=SCHEMA, draws=60, rng=5, queries=queries, bins=[0]
    )
    summary = study.summary().set_index(["query", "level"])
    var = TableProjector(table, work).variances()  # (geounits, category nodes)
    geo, cat = table.geography, table.categories
    for d in range(geo.n_levels):
        row = summary.loc[("total", str(d))]
        theory = float(var[geo.levels[d], cat.root].mean())
        assert abs(row["mse"] - theory) <= Z * row["mse_se"] + 1e-9, (d, row["mse"], theory)
        assert abs(row["mean_error"]) <= 1e-9  # the public totals fix the level's sum
        race = summary.loc[("race alone or in combination", str(d))]
        assert race["mean_error_se"] > 0.05, race  # the test has something to test
        assert abs(race["mean_error"]) <= Z * race["mean_error_se"], (d, race["mean_error"])
    assert summary.loc[("total", "0"), "mse"] <= 1e-18  # the US total: held (to rounding)


def test_topdown_2020_holds_its_invariants_in_every_draw(state):
    """The production algorithm's invariants (the nation's and the states' totals) are exact
    in every draw of the study: zero error at those levels, while the lower levels move."""
    table, work = state
    study = accuracy_study(
        table, work, ["topdown-2020"], schema=SCHEMA, draws=3, rng=2, queries=["total"], bins=[0]
    )
    rows = study.per_draw
    held = rows[rows["level"].isin(["0", "1"])]
    assert (held["mae"] == 0).all() and (held["mse"] == 0).all() and len(held) == 6
    assert rows[rows["level"] == "5"]["mae"].sum() > 0
    diff = study.differences()
    assert diff.empty  # one estimator: nothing to compare


def test_the_facility_bounds_travel_with_every_draw():
    """With ``bounds`` (the production facility bounds), every draw is measured carrying
    them: the study's rows are the metrics of releases that meet them (rebuilt from the
    documented streams with the bounds), while the same draw released without them breaks
    them, so the rows would differ had the bounds been dropped."""
    from postdp.data import facility_bounds, synthetic_facilities
    from tests.postprocess.test_topdown_2020_bounds import _gq_state

    table, work = _gq_state(0, blocks=2)
    bounds = facility_bounds(synthetic_facilities(table, seed=0), table.geography)
    names = ["topdown-2020", "blue-restore-2020"]
    study = accuracy_study(
        table, work, names, schema=SCHEMA, draws=2, rng=8, queries=["total"], bounds=bounds
    )
    noise, *rounding = np.random.SeedSequence(8).spawn(2)[0].spawn(1 + len(names))  # draw 0
    held = measure(table, work, secure=False, rng=np.random.default_rng(noise), bounds=bounds)
    for name, stream in zip(names, rounding, strict=True):
        design = ReleaseDesign(table, work, name, bounds=bounds)
        assert design.bounds == tuple(bounds)
        released = design.solve(held, rng=np.random.default_rng(stream))
        assert all(b.violation(SCHEMA, released) == 0 for b in bounds), name
        direct = census_metrics(released, table, schema=SCHEMA, queries=["total"])
        rows = study.per_draw[(study.per_draw["estimator"] == name) & (study.per_draw["draw"] == 0)]
        np.testing.assert_array_equal(rows["mae"].to_numpy(), direct["mae"].to_numpy())
    free = measure(table, work, secure=False, rng=np.random.default_rng(noise))
    unbounded = ReleaseDesign(table, work, names[0]).solve(free)
    assert max(b.violation(SCHEMA, unbounded) for b in bounds) > 0
    with pytest.raises(ValidationError, match="table designs"):
        ReleaseDesign(table.geography, work.measurements[0].mechanism, bounds=bounds)
    with pytest.raises(ValidationError, match="shape"):
        accuracy_study(
            table, work, names, schema=SCHEMA, draws=2, bounds=[
                type(bounds[0])("hhgq", np.zeros((2, 8)), np.zeros((2, 8)))
            ],
        )  # fmt: skip


def test_options_are_checked_before_anything_is_drawn(state, monkeypatch):
    table, work = state
    import postdp.analysis.accuracy as accuracy

    def no_draw(*args, **kwargs):
        raise AssertionError("drew before the options were checked")

    monkeypatch.setattr(accuracy, "measure", no_draw)
    ok = {"schema": SCHEMA, "draws": 2, "rng": 0}
    bad = [
        ((["project", "project"],), ok, "distinct estimators"),
        (([],), ok, "distinct estimators"),
        ((["project"],), ok | {"draws": 1}, "whole number >= 2"),
        ((["project"],), ok | {"draws": 2.5}, "whole number >= 2"),
        ((["project"],), ok | {"reference": "topdown"}, "`reference` must be one of"),
        ((["none"],), ok, "releases no table"),
        ((["clamp"],), ok, "table"),
        ((["project"],), ok | {"queries": ["nope"]}, "unknown queries"),
        ((["project"],), ok | {"levels": ["a"]}, "levels"),
        ((["project"],), ok | {"reliability_level": 9}, "reliability_level"),
        ((["project"],), ok | {"rng": np.random.default_rng(0)}, "SeedSequence or None"),
        ((["project"],), ok | {"rng": -1}, "nonnegative"),
        ((["project"],), ok | {"workers": 0}, "`workers`"),
    ]
    for args, options, message in bad:
        with pytest.raises(ValidationError, match=message):
            accuracy_study(table, work, *args, **options)


@pytest.mark.processes
def test_the_same_study_on_processes_and_on_dask(state):
    """Draws scored in two local processes, or as Dask tasks (gathered in whatever order
    they finish), give the same rows, bit for bit, as the draws scored one by one; progress
    is reported once per draw."""
    from tests._dask import dask_client

    table, work = state
    options = {"schema": SCHEMA, "draws": 3, "rng": 4, "queries": ["total"], "reliability_level": 4}
    names = ["topdown-2020", "project"]
    seen = []
    alone = accuracy_study(table, work, names, progress=lambda k, n: seen.append((k, n)), **options)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    two = accuracy_study(table, work, names, workers=2, **options)
    pd.testing.assert_frame_equal(two.per_draw, alone.per_draw)
    with dask_client() as client:
        on_dask = accuracy_study(table, work, names, client=client, **options)
    pd.testing.assert_frame_equal(on_dask.per_draw, alone.per_draw)
    for name in names:
        pd.testing.assert_frame_equal(
            on_dask.reliability[name].by_bin, alone.reliability[name].by_bin
        )


def test_size_bins_pooled_draw_by_draw():
    """``sizes=False``: each draw's bins of a level weighted by their counts before the mean
    over draws: bins of 1 and 3 counts with MAE 4 and 0 pool to 1 in draw 0."""
    frame = pd.DataFrame(
        {
            "estimator": "a",
            "draw": [0, 0, 1, 1],
            "query": "total",
            "level": "1",
            "size": ["0-9", "10+"] * 2,
            "geounits": [1, 3] * 2,
            "counts": [1, 3] * 2,
            "mae": [4.0, 0.0, 2.0, 2.0],
            "mse": [16.0, 0.0, 4.0, 4.0],
            "mean_error": [4.0, 0.0, -2.0, 2.0],
            "mape": [1.0, 2.0, 3.0, 4.0],
        }
    )
    pooled = AccuracyStudy(frame, {}, "a").summary(sizes=False).iloc[0]
    assert pooled["size"] == "all" and pooled["counts"] == 4 and pooled["geounits"] == 4
    assert pooled["mae"] == pytest.approx(1.5)  # draws 1.0 and 2.0
    assert pooled["mae_se"] == pytest.approx(0.5)  # sd 0.707 / sqrt(2)
    assert pooled["mse"] == pytest.approx(4.0) and pooled["rmse"] == pytest.approx(2.0)
    assert pooled["mean_error"] == pytest.approx(1.0)  # draws (4 + 0)/4 and (-2 + 6)/4
    assert "mape" not in pooled.index  # percent errors do not pool by counts


def test_tally_counts_cells_by_hand():
    """``tally``: per metric, the cells whose paired 95% interval favours each estimator
    (error metrics: below or above 0; bias: the mean farther from 0 and the difference that
    way), the cells where both are exact left out, and chance = 2.5% of the cells with the
    binomial probability of at least that many flags."""
    from scipy import stats

    # three cells (size bins), two draws; differences b - a per draw:
    #   "0-9":  mae +1.0, +0.9 -> worse (mean 0.95, SE 0.05); mean_error -> see below
    #   "10+":  mae -1.0, -1.1 -> better; exact in both estimators for mean_error
    #   "100+": mae 0, 0 in both -> left out
    frame = pd.DataFrame(
        {
            "estimator": ["a"] * 6 + ["b"] * 6,
            "draw": [0, 1] * 6,
            "query": "total",
            "level": "1",
            "size": ["0-9", "0-9", "10+", "10+", "100+", "100+"] * 2,
            "geounits": 1,
            "counts": 1,
            "mae": [1.0, 1.0, 3.0, 3.0, 0.0, 0.0, 2.0, 1.9, 2.0, 1.9, 0.0, 0.0],
            # bias of a: +0.5 and -2 and 0; of b: -1.0 (farther, the difference -1.5 points
            # away from 0: worse) and -1.0 (nearer, the difference +1 points to 0: better)
            "mean_error": [0.5, 0.5, -2.0, -2.0, 0.0, 0.0, -1.0, -1.01, -1.0, -0.99, 0.0, 0.0],
        }
    )
    tally = AccuracyStudy(frame, {}, "a").tally().set_index("metric")
    assert tally.loc["mae", ["cells", "better", "worse"]].tolist() == [2, 1, 1]
    assert tally.loc["mean_error", ["cells", "better", "worse"]].tolist() == [2, 1, 1]
    assert tally.loc["mae", "chance"] == pytest.approx(0.05)
    assert tally.loc["mae", "p_worse"] == pytest.approx(stats.binom.sf(0, 2, 0.025))
    assert set(tally["reference"]) == {"a"} and set(tally["estimator"]) == {"b"}
    with pytest.raises(ValidationError, match="`reference` must be one of"):
        AccuracyStudy(frame, {}, "a").tally("c")


def test_the_page_states_where_each_estimator_wins(state, tmp_path):
    """The study's page: a verdict per estimator against the reference (levels where the
    paired 95% interval lies below or above 0), the reliability thresholds, two figures and
    the tables; it renders to one HTML file."""
    from postdp.report import accuracy_report, study_verdicts

    table, work = state
    study = accuracy_study(
        table, work, ["topdown-2020", "project"], schema=SCHEMA, draws=4, rng=1,
        queries=["total", "hispanic"], reliability_level=4,
    )  # fmt: skip
    diff = study.differences(sizes=False)
    total = diff[diff["query"] == "total"].set_index("level")
    verdict, every = study_verdicts(study)
    lower = [lv for lv, row in total.iterrows() if row["mae_hi"] < -1e-9]
    higher = [lv for lv, row in total.iterrows() if row["mae_lo"] > 1e-9]
    assert "0" not in lower + higher  # the nation's total: both hold it (to rounding)
    assert verdict.label == "project vs topdown-2020: MAE of total"
    for level in lower:
        assert level in verdict.value.split("higher")[0]
    for level in higher:
        assert level in verdict.value.split("higher")[1]
    tally = study.tally()
    assert every.label == "project vs topdown-2020: every metric, query, level and size bin"
    for row in tally.itertuples():
        assert f"{row.metric} {row.better}/{row.worse} of {row.cells}" in every.detail
        assert (f"{row.metric} ({row.worse} of {row.cells} cells" in every.value) == (
            row.p_worse < 0.05
        )
    page = accuracy_report(study, design={"truth": "small_pl94_state(3)"})
    assert len(page.figures) == 2 and [h.label for h in page.headline][2:] == [
        "reliability threshold, topdown-2020",
        "reliability threshold, project",
    ]
    assert page.design["draws"] == "4" and page.design["truth"] == "small_pl94_state(3)"
    path = tmp_path / "study.html"
    page.write(path)
    text = path.read_text()
    assert "Paired differences to topdown-2020" in text and "<img" in text

"""A synthetic run's truth rebuilt from its manifest, and a release measured against it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postdp import nmf
from postdp.cli import main
from postdp.errors import ValidationError


@pytest.fixture(scope="module")
def dc_run(tmp_path_factory):
    """``postdp measure --synthetic 11`` with its own population seed, scale and noise seed."""
    folder = tmp_path_factory.mktemp("study")
    argv = ["measure", "--synthetic", "11", "--population-seed", "3", "--population-scale"]
    argv += ["0.05", "--study", "--seed", "5"]
    assert main([*argv, "--quiet", "--output-dir", str(folder / "run")]) == 0
    return folder / "run"


def test_the_manifest_rebuilds_the_population_and_the_draw(dc_run, tmp_path):
    """The manifest records the states, the scale and both seeds; the truth rebuilt from it
    is the
    population measured (its state total the run's invariant), and measuring it again
    with the recorded noise seed draws the run's answers."""
    from postdp.nmf import synthetic_population
    from postdp.tables import load_strategy

    record = json.loads((dc_run / "postdp-nmf.json").read_text())["synthetic"]
    assert record["states"] == ["11"]
    assert (record["population_seed"], record["noise_seed"]) == (3, 5)
    assert record["population_scale"] == 0.05
    truth = nmf.synthetic_truth(dc_run)
    population = synthetic_population(states=["11"], seed=3, scale=0.05)
    assert np.array_equal(truth.geography.ids, population.geography.ids)
    assert (truth.cells != population.cells).nnz == 0
    top = nmf.read(dc_run, levels=2)
    state = next(
        v for x, v in zip(top.workload.measurements, top.values, strict=True)
        if x.public and x.level == 1 and x.query.name == "total"
    )  # fmt: skip
    assert int(state[0, 0]) == int(truth.counts()[truth.geography.levels[1][0], 0])
    strategy = load_strategy("pl94-2020-persons")
    again = nmf.measure_by_state(
        lambda s: strategy.tabulate(
            synthetic_population(
                states=[s], seed=record["population_seed"], scale=record["population_scale"]
            )
        ),
        record["states"], tmp_path / "again", strategy=strategy, secure=False,
        rng=record["noise_seed"], population_seed=record["population_seed"],
        population_scale=record["population_scale"],
    )  # fmt: skip
    a, b = nmf.read(dc_run), nmf.read(again)
    for x, y in zip(a.values, b.values, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_manifest_without_a_scale_is_of_the_whole_population_and_a_bad_one_is_refused(
    dc_run, tmp_path
):
    """A run written before scales were recorded was of the whole population (scale 1); a
    scale that is not a number in (0, 1] is refused naming the manifest."""
    import shutil

    from postdp.nmf import synthetic_population

    run = tmp_path / "run"
    shutil.copytree(dc_run, run)
    path = run / "postdp-nmf.json"
    manifest = json.loads(path.read_text())
    del manifest["synthetic"]["population_scale"]
    path.write_text(json.dumps(manifest))
    whole = synthetic_population(states=["11"], seed=3)
    assert (nmf.synthetic_truth(run).cells != whole.cells).nnz == 0
    for bad in (0, 2, "0.5", True):
        manifest["synthetic"]["population_scale"] = bad
        path.write_text(json.dumps(manifest))
        with pytest.raises(ValidationError, match="population_scale") as err:
            nmf.synthetic_truth(run)
        assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_run_without_a_synthetic_population_has_no_truth(tmp_path):
    from postdp.tables import measure

    from .conftest import small_table

    t = small_table()
    from postdp.tables import load_strategy

    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=1)
    run = nmf.write(m, tmp_path / "run")
    with pytest.raises(ValidationError, match="records no synthetic population"):
        nmf.synthetic_truth(run)


def test_evaluate_equals_a_hand_computation(dc_run, tmp_path):
    """The metrics of a topdown-2020 release against the truth: the state's total exact
    (an invariant), the county's absolute error, and the tracts' mean absolute error of
    their totals in each size bin, computed here from the wide form's ``total`` column."""
    out = nmf.postprocess(dc_run, tmp_path / "out", method="topdown-2020")
    got = nmf.evaluate(out, queries=["total", "votingage"])
    truth = nmf.synthetic_truth(dc_run)
    geo = truth.geography
    counts = truth.counts()  # every geounit's counts, aggregated once
    true_total = {
        ("0" + str(geo.ids[g])): int(counts[g, 0]) for d in (1, 2, 3) for g in geo.levels[d]
    }
    wide = {
        level: pd.read_parquet(out / "wide" / f"{level}.parquet").set_index("geocode")
        for level in ("State", "County", "Tract")
    }
    row = got[(got["query"] == "total") & (got["level"] == "State")]
    assert row["mae"].tolist() == [0.0]
    (county,) = wide["County"].index
    row = got[(got["query"] == "total") & (got["level"] == "County")]
    assert row["mae"].tolist() == [abs(wide["County"].loc[county, "total"] - true_total[county])]
    tracts = pd.DataFrame({"released": wide["Tract"]["total"]})
    tracts["true"] = [true_total[g] for g in tracts.index]
    labels = ["0-9", "10-99", "100-999", "1,000-9,999", "10,000+"]
    edges = [0, 10, 100, 1000, 10000, np.inf]
    tracts["size"] = pd.cut(tracts["true"], edges, right=False, labels=labels)
    tracts["error"] = (tracts["released"] - tracts["true"]).abs()
    hand = tracts.groupby("size", observed=True)["error"].agg(["mean", "size"])
    rows = got[(got["query"] == "total") & (got["level"] == "Tract")].set_index("size")
    assert list(rows.index) == [str(s) for s in hand.index]
    np.testing.assert_allclose(rows["mae"].to_numpy(), hand["mean"].to_numpy(), rtol=1e-12)
    assert rows["geounits"].tolist() == hand["size"].tolist()
    # votingage at the county: two counts, each cell's attribute read off its name
    cells = [c for c in wide["County"].columns if c != "total"]
    adult = np.array([c.split("|")[1] == "18+" for c in cells])
    county_cells = wide["County"].loc[county, cells].to_numpy(np.int64)
    true_cells = truth.level_detailed(2)
    true_cells = np.asarray(true_cells.toarray() if hasattr(true_cells, "toarray") else true_cells)
    true_cells = true_cells.ravel()
    errors = [
        abs(county_cells[adult].sum() - true_cells[adult].sum()),
        abs(county_cells[~adult].sum() - true_cells[~adult].sum()),
    ]
    row = got[(got["query"] == "votingage") & (got["level"] == "County")]
    assert row["mae"].tolist() == [pytest.approx(np.mean(errors))]

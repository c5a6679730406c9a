"""``postdp measure --strategy dhc-2020-persons`` (issue 46, part 3): the DHC persons design
drawn from the synthetic DHC population into the noisy measurement file layout, its
eight geolevels, and the refusals that come before any draw."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from postdp import nmf
from postdp.cli import main
from postdp.data import synthetic_dhc_population
from postdp.tables import load_strategy

from .test_nmf_cli import _person_records

Z = 4.0


@pytest.fixture(scope="module")
def dhc_run(tmp_path_factory):
    """A tiny District of Columbia (138 persons, 10 geounits) drawn with the DHC design."""
    run = tmp_path_factory.mktemp("dhc") / "run"
    args = ["measure", "--synthetic", "11", "--population-scale", "0.0002", "--strategy"]
    args += ["dhc-2020-persons", "--study", "--seed", "7", "--output-dir", str(run), "--quiet"]
    assert main(args) == 0
    return run


def test_measure_draws_the_dhc_design_of_the_synthetic_population(dhc_run):
    """Every geolevel's folder, the design's budget (rho = 24811/5000, epsilon 25.42 at
    delta 1e-10), the population's record, and the State's 1,227,744 detailed answers:
    their errors against the truth have the design's mean (0) and variance within Z
    standard errors of the sample's."""
    run = dhc_run
    manifest = json.loads((run / "postdp-nmf.json").read_text())
    assert (
        manifest["levels"] == list(load_strategy("dhc-2020-persons").levels)
        and manifest["strategy"] == "dhc-2020-persons"
    )
    assert manifest["rho"] == "24811/5000"
    assert manifest["synthetic"]["generator"] == "postdp.data.synthetic_dhc_population"
    statement = json.loads((run / "privacy.json").read_text())
    assert statement["epsilon_at_delta"]["epsilon"] == pytest.approx(25.42, abs=0.005)
    blocks = pq.read_table(run / "Block.parquet" / "DPQuery").num_rows
    truth = nmf.synthetic_truth(run)
    expected = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    assert abs(truth.cells - expected.cells).max() == 0  # the same persons, rebuilt
    n_blocks = truth.geography.levels[7].size
    assert blocks == 10 * n_blocks  # ten noisy queries per block
    top = nmf.read(run, levels=2)
    state = truth.level_detailed(1)
    state = np.asarray(state.todense() if hasattr(state, "todense") else state, dtype=float)
    (k,) = [
        i
        for i, m in enumerate(top.workload.measurements)
        if m.level == 1 and m.query.name == "detailed"
    ]
    error = top.values[k] - state
    assert error.size == 1_227_744
    variance = top.workload.measurements[k].variance
    se_mean = np.sqrt(variance / error.size)
    se_var = variance * np.sqrt(2.0 / error.size)  # normal fourth moment: within 1e-9 here
    assert abs(error.mean()) <= Z * se_mean
    assert abs(error.var() - variance) <= Z * se_var


def test_person_records_and_the_plain_population_are_refused_for_the_dhc(tmp_path, capsys, spy):
    """PPMF person records carry no age, sex or relationship: refused by name, exit 2, one
    line, nothing drawn, no folder."""
    from postdp.nmf import synthetic_population

    table = synthetic_population(["11"], seed=1, scale=0.0002)
    _person_records(table).to_parquet(tmp_path / "persons.parquet")
    args = ["measure", "--input", str(tmp_path / "persons.parquet"), "--strategy"]
    args += ["dhc-2020-persons", "--study", "--seed", "1", "--output-dir", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--strategy 'dhc-2020-persons'" in err and "single year of age" in err
    assert err.count("\n") == 1 and spy == [] and not (tmp_path / "r").exists()


def test_postprocess_refuses_what_is_not_built_for_the_dhc_before_any_output(
    dhc_run, tmp_path, capsys
):
    """Every table estimator that forms a cells x cells matrix refuses a table of the DHC's
    1,227,744 cells in its design check (no traceback, no gigabytes asked for); the CLI
    says so in one line naming --method, exit 2, and makes no output folder."""
    from postdp.postprocess import check_step, check_top_down_2020, estimators

    table = synthetic_dhc_population(["11"], seed=0, scale=0.0002)  # the run's truth
    work = load_strategy("dhc-2020-persons").workload(table)
    for e in estimators("table"):
        if e.solver and not e.wide:
            with pytest.raises(ValueError, match=r"not built for tables of more than 20,000"):
                check_step(e.name, table, work)
    check_step("project", table, work)  # (P) solves it in the marginal basis
    # its passes, the PL94 histograms to hold coming with the measurements (a study's per
    # draw; top_down_2020 itself refuses to run without them)
    check_step("topdown-2020", table, work)
    with pytest.raises(ValueError, match=r"`held` must have shape \(10, 2016\)"):
        check_top_down_2020(table, work, held=np.zeros((3, 2016)))  # checked when given
    out = tmp_path / "out"
    # topdown-2020 is held to a PL94 release (tests/nmf/test_postprocess_dhc.py): none given
    args = ["postprocess", str(dhc_run), "--method", "topdown-2020", "--output-dir", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--held:" in err and "PL94 release" in err and err.count("\n") == 1
    assert not out.exists()
    # (P) solves it, but the output forms hold a column per cell: refused by --method
    args = ["postprocess", str(dhc_run), "--method", "project", "--output-dir", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--method 'project'" in err and "restore_dhc" in err and err.count("\n") == 1
    assert not out.exists()


def test_block_histograms_of_the_dhc_schema_draw_what_the_synthetic_population_does(
    dhc_run, tmp_path, capsys
):
    """The long form (tabulation GEOID, cell, count) of the synthetic DHC population's
    blocks, measured with the same study seed, gives the run the synthetic population gave:
    ``dhc_spine`` builds the population's spine from the GEOIDs, so every answer is equal."""
    import pandas as pd

    table = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    geo = table.geography
    c = table.cells.tocoo()
    every = np.array([str(i) for i in geo.ids[geo.leaves]])
    # every block listed, the empty ones with a count of 0, so the geographies are equal
    rows = np.concatenate([c.row, np.arange(every.size)])
    cols = np.concatenate([c.col, np.zeros(every.size, dtype=c.col.dtype)])
    counts = np.concatenate([c.data, np.zeros(every.size, dtype=c.data.dtype)])
    cells = np.array(table.categories.ids[table.categories.leaves].tolist(), dtype=object)
    frame = pd.DataFrame(
        {
            "geocode": [b[:5] + b[6:] for b in every[rows]],  # the GEOID: no primitive digit
            "category": cells[cols],
            "count": counts,
        }
    )
    frame.to_parquet(tmp_path / "blocks.parquet")
    run = tmp_path / "run"
    args = ["measure", "--input", str(tmp_path / "blocks.parquet"), "--strategy"]
    args += ["dhc-2020-persons", "--study", "--seed", "7", "--output-dir", str(run), "--quiet"]
    assert main(args) == 0
    for level in ("Tract_Subset_Group", "Block"):
        ours = pq.read_table(run / f"{level}.parquet" / "DPQuery")
        theirs = pq.read_table(dhc_run / f"{level}.parquet" / "DPQuery")
        key = [("geocode", "ascending"), ("query_name", "ascending")]
        ours, theirs = ours.sort_by(key), theirs.sort_by(key)
        assert ours.column("geocode").equals(theirs.column("geocode"))
        assert ours.column("value").equals(theirs.column("value")), level
    # the facilities by detailed type are derived from a synthetic population only
    args[args.index(str(run))] = str(tmp_path / "other")
    capsys.readouterr()
    assert main([*args, "--facilities", "synthetic"]) == 2
    err = capsys.readouterr().err
    assert "--facilities 'synthetic'" in err and "give a facilities file by detailed" in err
    assert err.count("\n") == 1 and not (tmp_path / "other").exists()


def test_a_facilities_file_by_detailed_type_bounds_a_dhc_run(tmp_path, capsys, spy):
    """``--facilities FILE`` of a DHC run: block GEOIDs and the 24 detailed types' columns
    (``DHC_FACILITY_COLUMNS``, the relgq levels' codes). The run's Constraint rows are the
    library's bounds of the same counts at every geounit (a block the file lacks left
    unbounded, and so are its ancestors' upper bounds); a PL94 facilities file (7 major
    types) is refused by its missing columns, one line, exit 2, nothing drawn."""
    import pandas as pd

    from postdp.data import (
        DHC_FACILITY_COLUMNS,
        dhc_facility_bounds,
        synthetic_dhc_facilities,
    )
    from postdp.tables import dhc_schema

    codes = [level.split()[0] for level in dhc_schema().attributes[0].levels[18:]]
    assert list(DHC_FACILITY_COLUMNS) == codes
    truth = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    geo = truth.geography
    counts = synthetic_dhc_facilities(truth)
    counts[:, codes.index("GQ301")] += 1  # a nursing facility in every block
    leaves = [str(i) for i in geo.ids[geo.leaves]]
    frame = pd.DataFrame(counts, columns=codes)
    frame.insert(0, "geocode", [b[:5] + b[6:] for b in leaves])  # the tabulation GEOID
    frame.iloc[1:].to_csv(tmp_path / "f.csv", index=False)  # the first block left out
    args = ["measure", "--synthetic", "11", "--population-scale", "0.0002", "--strategy"]
    args += ["dhc-2020-persons", "--study", "--seed", "1", "--quiet"]
    assert main([*args, "--facilities", str(tmp_path / "f.csv"),
                 "--output-dir", str(tmp_path / "run")]) == 0  # fmt: skip
    (got,) = nmf.read(tmp_path / "run").bounds
    known = np.ones(geo.leaves.size, dtype=bool)
    known[0] = False
    want = dhc_facility_bounds(counts, geo, known=known)
    rows = nmf.read(tmp_path / "run").table.geography.index([str(i) for i in geo.ids])
    np.testing.assert_array_equal(got.lower[rows], want.lower)
    np.testing.assert_array_equal(got.upper[rows], want.upper)
    assert np.isinf(got.upper[rows[geo.leaves[0]]]).all()  # unknown: unbounded
    assert (want.upper[geo.leaves[1:], 18:] == 0).any()  # and the known ones are bounded
    assert want.lower[geo.root, 18 + codes.index("GQ301")] == counts[1:, codes.index("GQ301")].sum()
    capsys.readouterr()
    spy.clear()
    (tmp_path / "pl94.csv").write_text("geocode,housing_units,nursing\n")
    assert main([*args, "--facilities", str(tmp_path / "pl94.csv"),
                 "--output-dir", str(tmp_path / "r")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--facilities" in err and "missing columns ['GQ101'" in err and err.count("\n") == 1
    assert spy == [] and not (tmp_path / "r").exists()


def test_a_dhc_run_is_measured_in_subtrees_of_at_most_its_own_cut(dhc_run, tmp_path, monkeypatch):
    """``--cut-blocks`` defaults to :data:`~postdp.nmf.runs.DHC_CUT_BLOCKS` for the DHC
    (a geounit's answers are some 1.9 million values): with it lowered to one block, the
    state is measured subtree by subtree, a file each, which read back as one run of the
    same geounits and measurements as the whole state's."""
    import postdp.nmf.runs as runs

    monkeypatch.setattr(runs, "DHC_CUT_BLOCKS", 1)
    run = tmp_path / "cut"
    args = ["measure", "--synthetic", "11", "--population-scale", "0.0002", "--strategy"]
    args += ["dhc-2020-persons", "--study", "--seed", "7", "--output-dir", str(run), "--quiet"]
    assert main(args) == 0
    whole = {p.name for p in (dhc_run / "Block.parquet").rglob("*.parquet")}
    parts = {p.name for p in (run / "Block.parquet").rglob("*.parquet")}
    assert whole == {"part-0.parquet"}  # the state whole
    assert parts and "part-0.parquet" not in parts  # a file a subtree (part-<geocode>)
    a, b = nmf.read(dhc_run), nmf.read(run)
    assert list(a.table.geography.ids) == list(b.table.geography.ids)
    assert [m.query.name for m in a.workload.measurements] == [
        m.query.name for m in b.workload.measurements
    ]

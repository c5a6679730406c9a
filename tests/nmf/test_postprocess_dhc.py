"""``postdp postprocess --held`` on a run of the DHC persons design (issue 46, part 3): the
run held to the PL94 release of the same persons, as the 2020 production held the DHC to the
redistricting data (``dhc-2020-design.md`` section 4.2), end to end through the noisy
measurement files, in process and by cut subtrees on Dask, and every refusal before any
output."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from postdp import nmf
from postdp.cli import main
from postdp.data import dhc_facility_bounds, synthetic_dhc_facilities
from postdp.errors import ValidationError
from postdp.tables import Marginal, dhc_schema, dhc_structural_zeros
from postdp.tables.strategies import PL94_IN_DHC
from tests._dask import dask_client

SCALE = "0.0002"  # the District of Columbia: 138 persons, 10 geounits on the DHC spine
LEVELS = ("US", "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset")
LEVELS += ("Block_Group", "Block")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A DHC run (with the synthetic facilities by detailed type) and the PL94 release of
    the same persons (a PL94 run with the synthetic facilities' bounds, post-processed by
    topdown-2020), and the DHC run post-processed by the CLI held to it."""
    root = tmp_path_factory.mktemp("dhc-held")
    dhc, pl94, release, out = (root / n for n in ("dhc", "pl94", "release", "out"))
    common = ["measure", "--synthetic", "11", "--population-scale", SCALE, "--study", "--quiet"]
    assert main([*common, "--strategy", "dhc-2020-persons", "--facilities", "synthetic",
                 "--seed", "7", "--output-dir", str(dhc)]) == 0  # fmt: skip
    assert main([*common, "--strategy", "pl94-2020-persons", "--facilities", "synthetic",
                 "--seed", "8", "--output-dir", str(pl94)]) == 0  # fmt: skip
    args = ["postprocess", str(pl94), "--method", "topdown-2020", "--quiet"]
    assert main([*args, "--output-dir", str(release)]) == 0
    args = ["postprocess", str(dhc), "--method", "topdown-2020", "--held", str(release)]
    assert main([*args, "--output-dir", str(out), "--quiet"]) == 0
    return {"dhc": dhc, "pl94": pl94, "release": release, "out": out, "root": root}


def _histograms(out, level: str) -> dict[str, np.ndarray]:
    """Each geounit's detailed histogram in a DHC long form (by attributes)."""
    schema = dhc_schema()
    frame = pd.read_parquet(out / "long" / f"{level}.parquet")
    codes = [
        pd.Categorical(frame[a.name].astype(str), categories=list(a.levels)).codes
        for a in schema.attributes
    ]
    assert all((c >= 0).all() for c in codes)
    cells = np.ravel_multi_index(tuple(codes), schema.shape)
    out_ = {}
    for g, rows in frame.groupby("geocode").indices.items():
        h = np.zeros(schema.size, dtype=np.int64)
        np.add.at(h, cells[rows], frame["estimate"].to_numpy()[rows])
        out_[str(g)] = h
    return out_


def test_the_dhc_run_is_held_to_its_pl94_release_at_every_geounit(runs):
    """The long form alone, a column per attribute; whole positive counts; every parent its
    children's sum; no person in a cell an edit forbids; the public total exact; and every
    block's PL94 histogram the release's block's (its geocode without the primitive
    geounit's digit), so every geounit's is the sum of its blocks' in the release."""
    out = runs["out"]
    assert sorted(p.name for p in out.iterdir()) == [
        "long", "postdp-manifest.json", "postdp-postprocess.json"
    ]  # fmt: skip
    levels = sorted(p.name for p in (out / "long").iterdir())
    assert levels == sorted(f"{n}.parquet" for n in LEVELS)
    block_file = next((out / "long" / "Block.parquet").rglob("*.parquet"))
    assert pq.read_schema(block_file).names == [
        "geocode", "relgq", "sex", "age", "hispanic", "cenrace", "estimate"
    ]  # fmt: skip
    truth = nmf.synthetic_truth(runs["dhc"])
    geo = truth.geography
    by_level = [_histograms(out, name) for name in LEVELS]
    c = dhc_schema().size
    released = np.zeros((geo.n, c), dtype=np.int64)
    for d, histograms in enumerate(by_level):
        for node in geo.levels[d]:
            code = "" if d == 0 else "0" + str(geo.ids[node])
            released[node] = histograms.pop(code, np.zeros(c, dtype=np.int64))
        assert histograms == {}  # no geounit the run lacks
    assert (released >= 0).all()
    assert np.array_equal(geo.aggregate(released.T).T, released)
    assert not released[:, dhc_structural_zeros()].any()
    assert released[geo.root].sum() == truth.cells.sum()  # the invariant
    # the group-quarters bounds the run's files carry (record switching's), met everywhere
    (bounds,) = nmf.read(runs["dhc"], levels=2).bounds
    assert bounds.query == "relgq" and bounds.name == "hhgq_total"
    expected = dhc_facility_bounds(synthetic_dhc_facilities(truth), geo)
    persons = Marginal(dhc_schema(), "relgq").apply(released.astype(float))
    assert (persons >= expected.lower).all() and (persons <= expected.upper).all()
    # so the manifest says no geounit is left outside its bounds, and so does every file
    manifest = json.loads((out / "postdp-manifest.json").read_text())
    assert manifest["bounds_unmet"] == dict.fromkeys(LEVELS, 0)
    files = [f for f in sorted((out / "long").rglob("*.parquet")) if f.is_file()]
    assert files and all(pq.read_schema(f).metadata[b"postdp.bounds_unmet"] == b"0" for f in files)
    pl94 = Marginal(dhc_schema(), PL94_IN_DHC)
    frame = pd.read_parquet(runs["release"] / "long" / "Block.parquet")
    index = {name: k for k, name in enumerate(pl94.labels)}
    held = {}
    for g, rows in frame.groupby("geocode").indices.items():
        h = np.zeros(pl94.size, dtype=np.int64)
        cats = frame["category"].astype(str).to_numpy()[rows]
        h[[index[x] for x in cats]] = frame["estimate"].to_numpy()[rows]
        held[str(g)] = h
    for node in geo.leaves:
        code = "0" + str(geo.ids[node])
        expected = held.get(code[:6] + code[7:], np.zeros(pl94.size, dtype=np.int64))
        assert np.array_equal(pl94.apply(released[node].astype(float)), expected)
    assert released.sum() > 0 and (released != 0).sum() > pl94.size // 100


def test_cut_subtrees_on_dask_give_the_same_files(runs, tmp_path):
    """Every subtree cut for tasks of one block (a cut task at each level from the state to
    the tract subset, each reading its own held histograms and its root from the long form
    the task above wrote; the block group's family one task), run on a Dask worker: the same
    numbers as in process."""
    out = tmp_path / "cut"
    with dask_client() as client:
        nmf.postprocess(runs["dhc"], out, method="topdown-2020", held=runs["release"],
                        cut_blocks=1, scheduler=client)  # fmt: skip
    for name in LEVELS[3:]:  # each written by the cut task of the level above it
        (part,) = (out / "long" / f"{name}.parquet" / "011").iterdir()
        assert part.name != "part-0.parquet"
    for name in LEVELS:
        a, b = (pd.read_parquet(o / "long" / f"{name}.parquet") for o in (runs["out"], out))
        keys = list(a.columns[:-1])
        a, b = (x.astype(dict.fromkeys(keys, str)).sort_values(keys, ignore_index=True)
                for x in (a, b))  # fmt: skip
        pd.testing.assert_frame_equal(a, b)
    manifests = [json.loads((o / "postdp-manifest.json").read_text()) for o in (runs["out"], out)]
    assert manifests[0]["bounds_unmet"] == manifests[1]["bounds_unmet"]  # summed over parts


def _refused(capsys, args, out, *needles):
    assert main([*args, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(n in err for n in needles), err
    assert not out.exists()


def test_what_is_not_held_to_a_matching_pl94_release_is_refused_before_any_output(
    runs, tmp_path, capsys
):
    """One line naming the flag, exit 2, no output folder: no --held; --held of a folder
    that is not a finished post-processing, of a real-valued one, of another population's
    blocks, or of a release whose totals are not the run's invariants; --held for a PL94
    run; a method other than topdown-2020; --amc."""
    dhc, release = str(runs["dhc"]), str(runs["release"])
    out = tmp_path / "out"
    base = ["postprocess", dhc, "--method", "topdown-2020", "--quiet"]
    _refused(capsys, base, out, "--held:", "PL94 release")
    _refused(capsys, [*base, "--held", str(runs["pl94"])], out, "--held", "not a finished")
    _refused(capsys, [*base, "--held", str(tmp_path / "nowhere")], out, "no such folder")
    _refused(capsys, [*base, "--held", release, "--amc", "2"], out, "--amc 2")
    args = ["postprocess", dhc, "--method", "project", "--held", release, "--quiet"]
    _refused(capsys, args, out, "--method 'project'", "1,227,744", "restore_dhc")
    args = ["postprocess", str(runs["pl94"]), "--method", "topdown-2020", "--held", release]
    _refused(capsys, [*args, "--quiet"], out, f"--held {release!r}", "2,016 cells")
    # a real-valued post-processing of the PL94 run: no long form to hold
    real = tmp_path / "real"
    assert main(["postprocess", str(runs["pl94"]), "--method", "project", "--quiet",
                 "--output-dir", str(real)]) == 0  # fmt: skip
    _refused(capsys, [*base, "--held", str(real)], out, "'project' is not integral")
    # one block's count changed: the state's totals no longer the run's invariant
    edited = tmp_path / "edited"
    shutil.copytree(runs["release"], edited)
    (path,) = (edited / "long" / "Block.parquet").rglob("part-*.parquet")
    table = pq.read_table(path)
    estimate = table.column("estimate").to_numpy().copy()
    estimate[0] += 1
    table = table.set_column(table.column_names.index("estimate"), "estimate", pa.array(estimate))
    pq.write_table(table, path)
    _refused(capsys, [*base, "--held", str(edited)], out, "not the run's public totals")
    # a release of another population's blocks (the same state at another scale)
    other_run, other = tmp_path / "other-run", tmp_path / "other"
    assert main(["measure", "--synthetic", "11", "--population-scale", "0.0004", "--study",
                 "--seed", "1", "--strategy", "pl94-2020-persons", "--quiet",
                 "--output-dir", str(other_run)]) == 0  # fmt: skip
    assert main(["postprocess", str(other_run), "--method", "topdown-2020", "--quiet",
                 "--output-dir", str(other)]) == 0  # fmt: skip
    _refused(capsys, [*base, "--held", str(other)], out, "blocks of state 011 are not the run's")


def test_tabulate_makes_the_dhc_sex_by_age_tables_of_a_dhc_release(runs, tmp_path, capsys):
    """``postdp tabulate`` of a DHC release writes P12 and PCT12 (``dhc_tables``) at the
    levels that are tabulation geographies: each row the table of the geounit's released
    histogram (read here from the long form independently, cell by cell), GEOID the spine
    geocode without the primitive geounit's digit, names from the Census's; the P.L.
    94-171 tables are refused in one line, exit 2, writing nothing."""
    from postdp.data import dhc_tables

    out, folder = runs["out"], tmp_path / "tables"
    folder.mkdir()
    assert main(["tabulate", str(out), "--output-dir", str(folder)]) == 0
    assert "none is built for a release of the DHC persons design" in capsys.readouterr().err
    tables = dhc_tables()
    written = sorted(p.name for p in folder.iterdir())
    tabulated = ("US", "State", "County", "Tract_Subset", "Block_Group", "Block")
    assert written == sorted([f"{n}.{e}" for n in tabulated for e in ("csv", "parquet")]
                             + ["postdp-manifest.json", "variables.csv"])  # fmt: skip
    geo = nmf.synthetic_truth(runs["dhc"]).geography
    for level in ("County", "Block"):
        frame = pd.read_parquet(folder / f"{level}.parquet")
        assert list(frame.columns[:4]) == ["GEOID", "NAME", "AIAN_BRANCH", "GEOLEVEL"]
        histograms = _histograms(out, level)
        # every geounit of the run has its row, in geocode order; one the release leaves
        # empty (no long rows: its file names it) has zeros
        codes = sorted("0" + str(geo.ids[g]) for g in geo.levels[LEVELS.index(level)])
        assert frame["GEOID"].tolist() == [c[1:6] + c[7:] for c in codes]
        empty = [c for c in codes if c not in histograms]
        assert level == "County" or empty  # the scale leaves blocks with no one
        histograms.update({c: np.zeros(dhc_schema().size, dtype=np.int64) for c in empty})
        for geocode, h in histograms.items():
            geoid = geocode[1:6] + geocode[7:]  # the AIAN flag and the prim digit left out
            row = frame.loc[frame["GEOID"] == geoid]
            assert len(row) == 1, geoid
            for t in tables.values():
                np.testing.assert_array_equal(row[list(t.codes)].to_numpy()[0], t.apply(h))
    county = pd.read_parquet(folder / "County.parquet")
    assert county.loc[0, "GEOID"] == "11001" and county.loc[0, "NAME"].startswith("District")
    assert county["P12_001N"].iloc[0] == county["PCT12_001N"].iloc[0] > 0
    variables = pd.read_csv(folder / "variables.csv")
    assert len(variables) == 49 + 209 and variables["label"].iloc[2] == "Male: Under 5 years"
    capsys.readouterr()
    other = tmp_path / "other"
    assert main(["tabulate", str(out), "--output-dir", str(other), "--tables", "P1"]) == 2
    err = capsys.readouterr().err
    assert "--tables 'P1': table P1 is not made from a DHC" in err and "P12, PCT12" in err
    assert err.count("\n") == 1 and not other.exists()


def test_tabulate_reads_a_dhc_long_form_a_few_rows_at_a_time(runs, tmp_path, monkeypatch):
    """The DHC tables of a long form read 7 rows at a time (a geounit's rows spread over
    several batches, new geounits met batch by batch) are those read in one batch."""
    import postdp.nmf.tabulate as tab

    whole, batched = tmp_path / "whole", tmp_path / "batched"
    whole.mkdir()
    batched.mkdir()
    tab.tabulate(runs["out"], whole)
    rows = pq.ParquetFile(next((runs["out"] / "long" / "Block.parquet").rglob("*.parquet")))
    assert rows.metadata.num_rows > 7 * 3  # several batches
    monkeypatch.setattr(tab, "LONG_ROWS", 7)
    tab.tabulate(runs["out"], batched)
    for level in ("County", "Block_Group", "Block"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(whole / f"{level}.parquet"),
            pd.read_parquet(batched / f"{level}.parquet"),
        )


def test_held_belongs_to_dhc_runs_in_python_too(runs, tmp_path):
    """The library refuses what the CLI does: ``held`` for a PL94 run, none for a DHC run."""
    with pytest.raises(ValidationError, match="`held` is for a run of the DHC"):
        nmf.postprocess(runs["pl94"], tmp_path / "a", method="topdown-2020",
                        held=runs["release"])  # fmt: skip
    with pytest.raises(ValidationError, match="needs `held`"):
        nmf.postprocess(runs["dhc"], tmp_path / "b", method="topdown-2020")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_release_is_scored_against_the_truth_from_its_long_form(runs):
    """``nmf.evaluate`` of a DHC release: the summary metrics of each default query at every
    level, made from the long form's rows, never the detailed histograms; the total exact
    where it is invariant, and the blocks' single years of age by sex scored as a direct
    count from the detailed histograms scores them (MAE pooled over the size bins)."""
    metrics = nmf.evaluate(runs["out"])
    assert set(metrics["query"]) == {"total", "sex * age", "age", "relgq"}
    assert list(dict.fromkeys(metrics["level"])) == list(LEVELS)
    us = metrics[(metrics["level"] == "US") & (metrics["query"] == "total")]
    assert us["mae"].tolist() == [0.0]
    truth = nmf.synthetic_truth(runs["dhc"])
    geo = truth.geography
    age_sex = Marginal(dhc_schema(), "sex * age")
    released = _histograms(runs["out"], "Block")
    blocks = geo.levels[-1]
    mine = np.stack([released.get("0" + str(geo.ids[b]), np.zeros(dhc_schema().size))
                     for b in blocks])  # fmt: skip
    true = (age_sex.count_matrix() @ truth.level_detailed(len(LEVELS) - 1).T).toarray().T
    direct = np.abs(age_sex.apply(mine.astype(float)) - true).mean()
    rows = metrics[(metrics["level"] == "Block") & (metrics["query"] == "sex * age")]
    pooled = (rows["mae"] * rows["counts"]).sum() / rows["counts"].sum()
    assert rows["counts"].sum() == blocks.size * 232
    assert pooled == pytest.approx(direct, rel=1e-12)
    with pytest.raises(ValidationError, match="not an attribute or recode"):
        nmf.evaluate(runs["out"], queries=["shoe size"])

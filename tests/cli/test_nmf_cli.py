"""``postdp measure`` and ``postdp postprocess``: one draw, written whole or not at all;
post-processing killed at any moment resumes to the same bytes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from postdp import nmf
from postdp import privacy as _ledger
from postdp.cli import main

from ..nmf.conftest import check_parts, small_table
from ._helpers import postdp_command, run_postdp


def _killed(args, cwd, delay, after=None):
    """The command started, then killed ``delay`` seconds later, or ``delay`` seconds after
    ``after()`` first holds (polled; at once if the command ends before)."""
    proc = subprocess.Popen(
        [*postdp_command(), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while after is not None and not after() and proc.poll() is None:
        assert time.monotonic() < deadline, "the command never got there"
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    return proc.returncode


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from postdp.tables import load_strategy, measure

    t = small_table()
    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=2)
    return nmf.write(m, tmp_path_factory.mktemp("nmf") / "run")


def test_measure_writes_a_run_once(tmp_path, capsys):
    args = ["measure", "--synthetic", "11", "--population-scale", "0.05", "--study", "--seed"]
    args += ["4", "--output-dir"]
    assert main([*args, str(tmp_path / "run"), "--quiet"]) == 0
    m = nmf.read(tmp_path / "run")
    assert m.secure is False and m.table.geography.levels[5].size == 841  # a twentieth of DC's
    record = json.loads((tmp_path / "run" / "postdp-nmf.json").read_text())["synthetic"]
    assert (record["population_seed"], record["population_scale"]) == (0, 0.05)
    statement = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert statement["epsilon_at_delta"]["epsilon"] == pytest.approx(17.14, abs=0.005)
    assert statement["path"].startswith("study")
    assert "bounded" in statement["neighbouring_relation"]
    sigmas = {(r["level"], r["query"]): r["sigma"] for r in statement["sigma_per_query"]}
    assert sigmas[("Block", "detailed")] == pytest.approx(3.18, abs=0.005)
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    capsys.readouterr()
    assert main([*args, str(tmp_path / "run")]) == 2  # never a second draw into a run
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--output-dir" in err and "exists" in err
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--synthetic", "11", "--seed", "1"], "--seed"),
        (["--synthetic", "11", "--study"], "--study"),
        (["--synthetic", "99", "--study", "--seed", "1"], "--synthetic '99'"),
        (["--synthetic", "11,11", "--study", "--seed", "1"], "twice"),
        (["--synthetic", "11", "--strategy", "x", "--study", "--seed", "1"], "--strategy 'x'"),
        (
            ["--synthetic", "11", "--strategy", "pl94-2020-units", "--study", "--seed", "1"],
            "--strategy 'pl94-2020-units': the synthetic population is of persons",
        ),
        (["--synthetic", "11", "--study", "--seed", "1", "--ledger", "l.jsonl"], "--ledger"),
        (["--synthetic", "11", "--study", "--seed", "1", "--cut-blocks", "0"], "--cut-blocks"),
        (["--synthetic", "11", "--study", "--seed", "1", "--cut-blocks", "x"], "--cut-blocks"),
        *(
            (
                ["--synthetic", "11", "--study", "--seed", "1", "--population-scale", v],
                f"--population-scale: must be in (0, 1]; got {v!r}",
            )
            for v in ("0", "1.5", "-0.1")
        ),
        (
            ["--synthetic", "11", "--study", "--seed", "1", "--population-scale", "nan"],
            "--population-scale: must be a finite number; got 'nan'",
        ),
        (
            ["--input", "x.parquet", "--study", "--seed", "1", "--population-scale", "0.5"],
            "--population-scale 0.5: scales the synthetic population",
        ),
    ],
)
def test_measure_refuses_bad_options_before_drawing(tmp_path, capsys, spy, argv, needle):
    status = main(["measure", *argv, "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 2 and needle in err and err.count("\n") == 1
    assert spy == [] and not (tmp_path / "run").exists()


def test_a_secure_measure_records_one_draw(tmp_path, monkeypatch, capsys):
    """The ledger gets one line per run (OpenDP's sampler stood in by a fast integer
    draw: this test is about the bookkeeping, not the sampler)."""
    pytest.importorskip("opendp")
    from postdp.mechanisms import _base

    rng = np.random.default_rng(0)
    monkeypatch.setattr(
        _base.NoiseMechanism,
        "release",
        lambda self, x: np.asarray(x) + rng.integers(-3, 4, size=np.shape(x)),
    )
    ledger = tmp_path / "ledger.jsonl"
    args = ["measure", "--synthetic", "11", "--population-scale", "0.05", "--ledger", str(ledger)]
    args.append("--quiet")
    assert main([*args, "--output-dir", str(tmp_path / "run")]) == 0
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    # reserved before the draw, published after it: one draw, counted once
    assert [r["status"] for r in records] == ["reserved", "published"]
    assert len({r["reservation"] for r in records}) == 1
    assert records[1]["budget"]["rho"] == pytest.approx(293764 / 114921)
    spent = _ledger.spent_on(records, records[0]["input_sha256"])
    assert spent.releases == 1 and spent.rho == pytest.approx(293764 / 114921)
    assert nmf.read(tmp_path / "run").secure is True
    assert main([*args, "--output-dir", str(tmp_path / "run")]) == 2
    assert len(ledger.read_text().splitlines()) == 2


def test_a_killed_measure_leaves_nothing_or_a_complete_run(tmp_path):
    """A ``postdp measure`` process killed (SIGKILL) before it writes anything, and at
    three moments of its writing (timed from when its hidden temporary folder appears,
    over the time the run never killed took from then to its end; the last may come after
    the end): nothing but a hidden temporary folder, or the complete run, the same
    numbers as the run never killed. A twentieth of DC: what is written, and how, does not
    depend on the size."""
    args = ["measure", "--synthetic", "11", "--population-scale", "0.05", "--study", "--seed"]
    args += ["2", "--output-dir", "run"]

    def writing(folder):
        return lambda: any(p.name.startswith(".run.") for p in folder.iterdir())

    start = time.perf_counter()
    proc = subprocess.Popen(
        [*postdp_command(), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    while not writing(tmp_path)() and proc.poll() is None:
        time.sleep(0.005)
    began = time.perf_counter() - start
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    window = time.perf_counter() - start - began
    reference = nmf.read(tmp_path / "run")
    kills = [(0.5 * began, False), *((f * window, True) for f in (0.2, 0.6, 0.95))]
    for k, (delay, polled) in enumerate(kills):
        folder = tmp_path / f"k{k}"
        folder.mkdir()
        _killed(args, folder, delay, after=writing(folder) if polled else None)
        if (folder / "run").exists():  # finished before the kill: complete and the same
            got = nmf.read(folder / "run")
            assert all(
                np.array_equal(a, b) for a, b in zip(got.values, reference.values, strict=True)
            )
        else:  # nothing but a hidden temporary folder; a new measure may draw
            assert [p.name for p in folder.iterdir() if not p.name.startswith(".")] == []
            assert any(folder.iterdir()) or not polled  # killed while writing: its temporary


def test_a_killed_postprocess_resumes_to_the_same_bytes(small_run, tmp_path):
    """A ``postdp postprocess`` process killed (SIGKILL) at a random moment of its work,
    one in each third of it, then given again: the same files, byte for byte, as a run
    never killed. The moments are timed from when the process writes its plan (what it
    did before, importing numpy, pandas and scipy, writes nothing) over the time the run
    never killed (made in this process: the same work, nothing to import) took from its
    plan to its manifest."""
    args = ["postprocess", str(small_run), "--method", "topdown-2020", "--quiet"]
    assert run_postdp([*args, "--output-dir", "full"], tmp_path).returncode == 0
    full = tmp_path / "full"
    work = (full / "postdp-manifest.json").stat().st_mtime
    work -= (full / "postdp-postprocess.json").stat().st_mtime
    expected = json.loads((full / "postdp-manifest.json").read_text())["files"]
    moments = (np.arange(3) + np.random.default_rng(11).uniform(size=3)) / 3 * work
    partial = 0
    for k, delay in enumerate(moments):
        out = f"cut{k}"
        plan = tmp_path / out / "postdp-postprocess.json"
        _killed([*args, "--output-dir", out], tmp_path, delay, after=plan.exists)
        assert plan.is_file()  # the process got to its work (else it failed before)
        partial += not (tmp_path / out / "postdp-manifest.json").exists()
        resumed = run_postdp([*args, "--output-dir", out], tmp_path)  # resumed in-process
        assert resumed.returncode == 0, resumed.stderr
        got = json.loads((tmp_path / out / "postdp-manifest.json").read_text())["files"]
        assert got == expected, delay
        assert not list((tmp_path / out).rglob(".*"))  # no temporary file left
    assert partial >= 2  # most kills landed before the end


def _person_records(table):
    """Person records (PPMF columns) of a table with tabulation GEOIDs."""
    import pandas as pd

    geo, cells = table.geography, table.dense_cells()
    rows = []
    for block, row in zip(geo.ids[geo.leaves], cells, strict=True):
        b = str(block)
        for cell in np.flatnonzero(row):
            rows += [(b[:2], b[2:5], b[5:11], b[11], b[11:], cell)] * int(row[cell])
    frame = pd.DataFrame(rows, columns=["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE",
                                        "TABBLK", "cell"])  # fmt: skip
    frame["GQTYPE_PL"] = frame["cell"] // 252
    frame["VOTING_AGE"] = (frame["cell"] // 126) % 2 + 1
    frame["CENHISP"] = (frame["cell"] // 63) % 2 + 1
    frame["CENRACE"] = frame["cell"] % 63 + 1
    return frame.drop(columns="cell")


def test_measure_reads_person_records(tmp_path, capsys, spy):
    table = small_table(4)
    _person_records(table).to_parquet(tmp_path / "persons.parquet")
    args = ["measure", "--input", str(tmp_path / "persons.parquet"), "--study", "--seed", "1"]
    assert main([*args, "--output-dir", str(tmp_path / "run"), "--quiet"]) == 0
    m = nmf.read(tmp_path / "run")
    for a, b in zip(m.table.geography.levels, table.geography.levels, strict=True):
        assert sorted(map(str, m.table.geography.ids[a])) == sorted(
            map(str, table.geography.ids[b])
        )
    i = next(k for k, x in enumerate(m.workload.measurements) if x.public and x.level == 1)
    assert sorted(m.values[i][:, 0]) == sorted(table.counts()[table.geography.levels[1], 0])
    bad = _person_records(table)
    bad.loc[5, "CENRACE"] = 64
    bad.to_parquet(tmp_path / "bad.parquet")
    spy.clear()
    assert main(["measure", "--input", str(tmp_path / "bad.parquet"), "--study", "--seed", "1",
                 "--output-dir", str(tmp_path / "r2")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--input" in err and "CENRACE" in err and err.count("\n") == 1
    assert spy == [] and not (tmp_path / "r2").exists()


def test_measure_reads_block_histograms(tmp_path, capsys, spy):
    """The wide form of a state's histograms draws what the synthetic population does (same
    study seed: the same table, so the same answers); a units histogram is measured with
    the units preset, whose totals are invariant at every level; person records with the
    units preset, or a file that is neither, are refused before any draw."""
    import pandas as pd

    from postdp.nmf import synthetic_population
    from postdp.tables import pl94_schema

    t = synthetic_population(states=["11"], seed=3, scale=0.05)
    geo = t.geography
    wide = pd.DataFrame(t.dense_cells(), columns=list(pl94_schema().cells))
    wide.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    wide.to_parquet(tmp_path / "dc.parquet")
    study = ["--study", "--seed", "1", "--quiet"]
    assert main(["measure", "--input", str(tmp_path / "dc.parquet"), *study,
                 "--output-dir", str(tmp_path / "a")]) == 0  # fmt: skip
    assert main(["measure", "--synthetic", "11", "--population-seed", "3",
                 "--population-scale", "0.05", *study,
                 "--output-dir", str(tmp_path / "b")]) == 0  # fmt: skip
    a, b = nmf.read(tmp_path / "a"), nmf.read(tmp_path / "b")
    assert np.array_equal(a.table.geography.ids, b.table.geography.ids)
    for x, y in zip(a.values, b.values, strict=True):
        np.testing.assert_array_equal(x, y)
    units = pd.DataFrame({"geocode": wide["geocode"], "vacant": 1, "occupied": 2})
    units.to_parquet(tmp_path / "units.parquet")
    assert main(["measure", "--input", str(tmp_path / "units.parquet"), "--strategy",
                 "pl94-2020-units", *study, "--output-dir", str(tmp_path / "u")]) == 0  # fmt: skip
    m = nmf.read(tmp_path / "u")
    public = [v for x, v in zip(m.workload.measurements, m.values, strict=True) if x.public]
    assert len(public) == 6 and public[-1].sum() == 3 * len(units)
    _person_records(small_table(4)).to_parquet(tmp_path / "persons.parquet")
    capsys.readouterr()
    spy.clear()
    for path, needle in [
        ("persons.parquet", "--strategy 'pl94-2020-units': person records tabulate"),
        ("neither.parquet", "neither person records"),
    ]:
        pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "neither.parquet")
        units_run = ["--strategy", "pl94-2020-units", *study, "--output-dir", str(tmp_path / "r")]
        assert main(["measure", "--input", str(tmp_path / path), *units_run]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert spy == [] and not (tmp_path / "r").exists()


def test_the_p1_preset_measures_persons_on_the_race_cells(tmp_path, capsys, spy):
    """``--strategy pl94-2020-p1``: person records and the synthetic population tabulated to
    the 63 race cells (the same answers from both when their tables agree); topdown-2020
    then releases integral, consistent race histograms with the state totals exact."""
    import pandas as pd

    from postdp.tables import load_strategy

    p1 = load_strategy("pl94-2020-p1")
    table = small_table(4)
    _person_records(table).to_parquet(tmp_path / "persons.parquet")
    study = ["--strategy", "pl94-2020-p1", "--study", "--seed", "1", "--quiet"]
    assert main(["measure", "--input", str(tmp_path / "persons.parquet"), *study,
                 "--output-dir", str(tmp_path / "run")]) == 0  # fmt: skip
    m = nmf.read(tmp_path / "run")
    assert m.table.categories.n == p1.schema.categories().n
    assert {x.query.name for x in m.workload.measurements} == {"total", "detailed"}
    truth = p1.tabulate(table)
    i = next(k for k, x in enumerate(m.workload.measurements) if x.public and x.level == 1)
    states = truth.geography.levels[1]
    assert sorted(m.values[i][:, 0]) == sorted(truth.counts()[states, 0])
    assert main(["postprocess", str(tmp_path / "run"), "--method", "topdown-2020",
                 "--output-dir", str(tmp_path / "out"), "--quiet"]) == 0  # fmt: skip
    wide = {
        level: pd.read_parquet(tmp_path / "out" / "wide" / f"{level}.parquet")
        for level in ("State", "County", "Block")
    }
    assert list(wide["Block"].columns) == ["geocode", "total", *p1.schema.cells]
    cells = list(p1.schema.cells)
    assert (wide["Block"][cells].to_numpy() >= 0).all()
    for upper, lower in (("State", "County"), ("County", "Block")):
        mine = wide[upper].set_index("geocode")[cells]
        keys = wide[lower]["geocode"].str[: len(mine.index[0])].to_numpy()
        sums = wide[lower][cells].groupby(keys).sum()
        pd.testing.assert_frame_equal(sums.sort_index(), mine.sort_index(), check_names=False)
    released = wide["State"].set_index("geocode")[cells].sum(axis=1)
    assert sorted(released) == sorted(truth.counts()[states, 0])


def test_postprocess_amc_writes_margins(small_run, tmp_path, capsys):
    import pandas as pd

    args = ["postprocess", str(small_run), "--method", "topdown-2020", "--quiet"]
    assert main([*args, "--output-dir", str(tmp_path / "o"), "--amc", "2", "--seed", "3"]) == 0
    totals = pd.read_parquet(tmp_path / "o" / "amc" / "totals.parquet")
    assert {"geo_id", "level", "moe"} <= set(totals.columns)
    assert main([*args[:3], "project", "--output-dir", str(tmp_path / "p"), "--amc", "2"]) == 2
    assert "--amc 2" in capsys.readouterr().err


def test_postprocess_refuses_bad_options(small_run, tmp_path, capsys):
    base = ["postprocess", str(small_run), "--output-dir", str(tmp_path / "o")]
    cases = [
        (["--method", "nope"], "--method 'nope'"),
        (["--method", "project", "--seed", "2"], "--seed"),
        (["--method", "project", "--scheduler", "local"], "--scheduler"),
        (["--method", "topdown-2020", "--cut-blocks", "0"], "--cut-blocks"),
    ]
    for extra, needle in cases:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert (
        main(["postprocess", str(tmp_path / "none"), "--method", "project", "--output-dir", "o"])
        == 2
    )
    assert "RUN" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main([*base, "--method", "topdown-2020", "--cut-blocks", "1", "--quiet"]) == 0
    plan = json.loads((tmp_path / "o" / "postdp-postprocess.json").read_text())
    assert plan["cut_blocks"] == 1
    assert check_parts(tmp_path / "o" / "wide" / "Block.parquet") == {13}  # block groups


def test_measure_writes_the_facility_constraints_and_topdown_holds_them(tmp_path, capsys, spy):
    """``--facilities FILE`` (issue 25): the run's Constraint rows hold the 2020 structural
    bounds, read back as the library computes them from the same counts (a block the file
    lacks left unconstrained); ``postdp postprocess --method topdown-2020`` releases
    histograms that meet them at every geounit; bad facility inputs are refused (one line
    naming --facilities, exit 2) before anything is drawn."""
    import pandas as pd

    from postdp.data import FACILITY_COLUMNS, facility_bounds, synthetic_facilities
    from postdp.tables import pl94_schema

    t = small_table(5)
    geo = t.geography
    wide = pd.DataFrame(t.dense_cells(), columns=list(pl94_schema().cells))
    wide.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    wide.to_parquet(tmp_path / "h.parquet")
    counts = synthetic_facilities(t, seed=5)
    counts[:, 3] = 1  # a nursing facility everywhere: its minors' zero has cells to hold
    frame = pd.DataFrame(counts, columns=list(FACILITY_COLUMNS))
    frame.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    frame.iloc[1:].to_csv(tmp_path / "f.csv", index=False)  # the first block left out
    args = ["measure", "--input", str(tmp_path / "h.parquet"), "--study", "--seed", "3"]
    assert main([*args, "--facilities", str(tmp_path / "f.csv"), "--quiet",
                 "--output-dir", str(tmp_path / "run")]) == 0  # fmt: skip
    m = nmf.read(tmp_path / "run")
    known = np.ones(geo.leaves.size, dtype=bool)
    known[0] = False
    want = facility_bounds(counts, geo, known=known)
    rows = m.table.geography.index([str(i) for i in geo.ids])
    assert [b.name for b in m.bounds] == ["hhgq_total", "nurse_nva_0"]
    for got, expected in zip(m.bounds, want, strict=True):
        np.testing.assert_array_equal(got.lower[rows], expected.lower)
        np.testing.assert_array_equal(got.upper[rows], expected.upper)
    assert np.isinf(m.bounds[0].upper[rows[geo.leaves[0]]]).all()  # unknown: unbounded
    out = tmp_path / "out"
    assert main(["postprocess", str(tmp_path / "run"), "--method", "topdown-2020", "--quiet",
                 "--output-dir", str(out)]) == 0  # fmt: skip
    schema = pl94_schema()
    histograms = _long_histograms(out, m.table.geography, schema)
    assert histograms.sum() > 0
    for b in m.bounds:
        assert b.violation(schema, histograms) == 0, b.name
    other = tmp_path / "out2"  # the BLUE restored and rounded family by family holds them too
    assert main(["postprocess", str(tmp_path / "run"), "--method", "blue-restore-2020",
                 "--quiet", "--output-dir", str(other)]) == 0  # fmt: skip
    restored = _long_histograms(other, m.table.geography, schema)
    assert (restored == np.rint(restored)).all() and restored.sum() == histograms.sum()
    for b in m.bounds:
        assert b.violation(schema, restored) == 0, b.name
    capsys.readouterr()
    spy.clear()
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"geocode": wide["geocode"], "vacant": 1, "occupied": 2}).to_parquet(
        tmp_path / "units.parquet"
    )
    units = ["measure", "--input", str(tmp_path / "units.parquet"), *args[3:]]
    units += ["--strategy", "pl94-2020-units"]
    cases = [
        ([*args, "--facilities", "synthetic"], "--facilities 'synthetic'"),
        ([*args, "--facilities", str(tmp_path / "none.csv")], "no such file"),
        ([*args, "--facilities", str(bad)], "missing columns"),
        ([*units, "--facilities", str(tmp_path / "f.csv")], "persons preset"),
    ]
    pd.DataFrame({"geocode": ["110010000001001"]}).to_csv(bad, index=False)
    for argv, needle in cases:
        assert main([*argv, "--output-dir", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert "--facilities" in err and needle in err and err.count("\n") == 1, err
    negative = frame.iloc[:2].copy()
    negative.loc[0, "nursing"] = -1
    for broken, needle in [
        (negative, "whole numbers"),
        (pd.concat([frame.iloc[:1]] * 2), "two rows"),
    ]:
        broken.to_csv(bad, index=False)
        assert main([*args, "--facilities", str(bad), "--output-dir", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert "--facilities" in err and needle in err and err.count("\n") == 1, err
    assert spy == [] and not (tmp_path / "r").exists()


def test_postprocess_names_the_geounits_a_release_leaves_outside_their_bounds(
    tmp_path, capsys, monkeypatch
):
    """A run with structural bounds solved by ``topdown-2020`` in tasks: every estimates
    file records how many of its geounits break their bounds, the manifest sums them by
    level, and the command's last line names them. Met (the solver's own release): 0 at
    every level and no line. Broken on purpose (a person added, in every task, to the first
    block's group quarters of a type it has no facility of, as a best-effort repair may
    leave it): the counts are those of the released files against the run's bounds, with
    the run cut into several tasks (several files per level)."""
    import pandas as pd

    from postdp import postprocess as pp
    from postdp.data import FACILITY_COLUMNS, synthetic_facilities
    from postdp.tables import Marginal, pl94_schema

    t = small_table(6)
    geo = t.geography
    wide = pd.DataFrame(t.dense_cells(), columns=list(pl94_schema().cells))
    wide.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    wide.to_parquet(tmp_path / "h.parquet")
    frame = pd.DataFrame(synthetic_facilities(t, seed=6), columns=list(FACILITY_COLUMNS))
    frame.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    frame.to_csv(tmp_path / "f.csv", index=False)
    assert main(["measure", "--input", str(tmp_path / "h.parquet"), "--study", "--seed", "4",
                 "--facilities", str(tmp_path / "f.csv"), "--quiet",
                 "--output-dir", str(tmp_path / "run")]) == 0  # fmt: skip
    run = nmf.read(tmp_path / "run")
    levels = nmf.LEVELS_2020[: run.table.geography.n_levels]
    args = ["postprocess", str(tmp_path / "run"), "--method", "topdown-2020"]
    capsys.readouterr()
    assert main([*args, "--output-dir", str(tmp_path / "met")]) == 0
    manifest = json.loads((tmp_path / "met" / "postdp-manifest.json").read_text())
    assert manifest["bounds_unmet"] == dict.fromkeys(levels, 0)
    assert "note:" not in capsys.readouterr().err

    schema = pl94_schema()
    gq = Marginal(schema, "hhgq")
    solve = pp.top_down_2020

    def broken(m, **options):
        """The solver's release, in a task solved down to the blocks, with one person
        added to the first block's group quarters of a type without a facility there
        (upper bound 0), if it has one."""
        x = solve(m, **options)
        sub = m.table.geography
        block = int(sub.leaves[0])
        (bound,) = [b for b in m.bounds if b.name == "hhgq_total"]
        empty = np.flatnonzero(bound.upper[block] == 0)
        if "root" in options and not options.get("cut") and empty.size:
            cell = int(np.flatnonzero(gq.count_matrix()[[empty[0]]].toarray()[0])[0])
            x = x.copy()
            for node in [block, *_ancestors(sub, block)]:
                x[node, cell] += 1
        return x

    monkeypatch.setattr(pp, "top_down_2020", broken)
    out = tmp_path / "broken"
    assert main([*args, "--cut-blocks", "2", "--output-dir", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    histograms = _long_histograms(out, run.table.geography, schema)
    rows = {n: run.table.geography.levels[d] for d, n in enumerate(levels)}
    expected = {}
    for name, nodes in rows.items():
        broke = np.zeros(nodes.size, dtype=bool)
        for b in run.bounds:
            counts = Marginal(schema, b.query).apply(histograms[nodes])
            broke |= ((counts < b.lower[nodes]) | (counts > b.upper[nodes])).any(axis=1)
        expected[name] = int(broke.sum())
    assert expected["Block"] > 0  # the breakage reached the files
    manifest = json.loads((out / "postdp-manifest.json").read_text())
    assert manifest["bounds_unmet"] == expected
    assert len(list((out / "wide" / "Block.parquet").rglob("*.parquet"))) > 2  # several tasks
    where = ", ".join(f"{n} at {level}" for level, n in expected.items() if n)
    assert err[-1].startswith(f"note: geounits left outside their structural bounds: {where} (")


def _ancestors(geo, node):
    while geo.parent[node] >= 0:
        node = int(geo.parent[node])
        yield node


def _long_histograms(out, geo, schema):
    """Every geounit's released histogram (rows in ``geo``'s id order) from an integral
    release's long form: its nonzero cells, the wide form's numbers in three columns (the
    wide form's 2,000 columns cost 20 times as much to read); every geounit of the wide
    form found there (only its ``geocode`` column read)."""
    import pyarrow.parquet as pq

    ids = {("" if g == geo.root else "0" + str(geo.ids[g])): g for g in range(geo.n)}
    cells = {c: j for j, c in enumerate(schema.cells)}
    found = set()
    for path in sorted((out / "wide").rglob("part-*.parquet")):
        found |= set(pq.read_table(path, columns=["geocode"])["geocode"].to_pylist())
    assert found == set(ids)
    histograms = np.zeros((geo.n, schema.size))
    for path in sorted((out / "long").rglob("part-*.parquet")):
        part = pq.read_table(path).to_pydict()
        rows = [ids[g] for g in part["geocode"]]
        histograms[rows, [cells[c] for c in part["category"]]] = part["estimate"]
    return histograms


def test_a_dead_dask_worker_is_one_line_and_the_run_resumable(
    small_run, tmp_path, capsys, monkeypatch
):
    """Dask's KilledWorker (a worker out of memory) is reported on one line naming
    --cut-blocks, exit 2, no traceback; what was written stays for a resume."""

    class KilledWorker(Exception):  # noqa: N818  # stands in for dask.distributed's
        pass

    def dies(*args, **kwargs):
        raise KilledWorker("('topdown-county-11001', <WorkerState>)")

    monkeypatch.setattr(nmf, "postprocess", dies)
    argv = ["postprocess", str(small_run), "--method", "topdown-2020", "--quiet"]
    assert main([*argv, "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cut-blocks 50000" in err and "resume" in err
    assert "Traceback" not in err


def test_measure_bypass_writes_the_spines_budgets_and_postprocess_reads_them(tmp_path, capsys):
    """``--bypass`` (issue 25): each tract's one block group answers no query (Constraint
    only, as the Census writes bypassed geounits); its tract carries its budget (variances
    divided by the factor); each state's one county keeps its own (the production optimised
    each county apart); the privacy statement says so; ``postprocess`` releases the
    parent's histogram for each bypassed geounit."""
    import pandas as pd

    from postdp.tables import load_strategy, pl94_schema, single_child_bypass

    t = small_table(2)
    geo = t.geography
    wide = pd.DataFrame(t.dense_cells(), columns=list(pl94_schema().cells))
    wide.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    wide.to_parquet(tmp_path / "h.parquet")
    run = tmp_path / "run"
    assert main(["measure", "--input", str(tmp_path / "h.parquet"), "--study", "--seed", "3",
                 "--bypass", "--quiet", "--output-dir", str(run)]) == 0  # fmt: skip
    assert "single-child bypass" in json.loads((run / "privacy.json").read_text())["spine"]
    assert set(pd.read_parquet(run / "County.parquet" / "DPQuery")["geocode"]) == {
        "010001",
        "011001",
    }
    lone = {
        "0" + str(geo.ids[geo.parent == t][0])
        for t in geo.levels[3]
        if (geo.parent == t).sum() == 1
    }
    assert len(lone) == 2
    bg = pd.read_parquet(run / "Block_Group.parquet" / "DPQuery")
    assert not lone & set(bg["geocode"]) and len(set(bg["geocode"])) == 4
    constraint = pd.read_parquet(run / "Block_Group.parquet" / "Constraint")
    assert lone <= set(constraint.loc[constraint["query_name"] == "total_nonneg_con", "geocode"])
    m = nmf.read(run)
    want = single_child_bypass(t, load_strategy("pl94-2020-persons").workload(t))
    rows = m.table.geography.index([str(i) for i in geo.ids])
    np.testing.assert_allclose(m.budget_scale[rows], want, rtol=1e-9)
    out = tmp_path / "out"
    assert main(["postprocess", str(run), "--method", "topdown-2020", "--quiet",
                 "--output-dir", str(out)]) == 0  # fmt: skip
    released = _long_histograms(out, m.table.geography, pl94_schema())
    for g in np.flatnonzero(want == 0):
        assert np.array_equal(released[rows[g]], released[rows[geo.parent[g]]])
    capsys.readouterr()
    assert main(["postprocess", str(run), "--method", "topdown", "--quiet",
                 "--output-dir", str(tmp_path / "o2")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--method 'topdown'" in err[0] and "own budgets" in err[0]
    assert not (tmp_path / "o2").exists()


def test_measure_builds_each_states_table_once(tmp_path, monkeypatch):
    """The first state's table, built to check the design before any draw, is the one
    measured (not built a second time)."""
    import postdp.nmf

    real = postdp.nmf.synthetic_population
    built = []

    def counted(*args, **kwargs):
        built.append(kwargs.get("states"))
        return real(*args, **kwargs)

    monkeypatch.setattr(postdp.nmf, "synthetic_population", counted)
    args = ["measure", "--synthetic", "11", "--population-scale", "0.05", "--study", "--seed"]
    args += ["1", "--quiet"]
    assert main([*args, "--output-dir", str(tmp_path / "run")]) == 0
    assert built == [["11"]]


def _wide(out, levels=("*",)):
    """{geocode: row of cells} of an output folder's wide form (of its ``levels``' names
    only, given)."""
    import pandas as pd

    paths = [p for x in levels for p in (out / "wide").glob(f"{x}.parquet/**/part-*.parquet")]
    frame = pd.concat([pd.read_parquet(p) for p in sorted(paths)], ignore_index=True)
    cells = frame.drop(columns=["geocode", "total"]).to_numpy()
    scale = max(1.0, float(np.abs(cells).max(initial=0)))
    np.testing.assert_allclose(frame["total"], cells.sum(axis=1), rtol=0, atol=1e-9 * scale)
    return dict(zip(frame["geocode"], cells, strict=True))


def _states_only_run(folder):
    """A run of the nation and three states only (two geolevels), exact shares."""
    from postdp import Hierarchy
    from postdp.tables import Table, Workload, measure, pl94_schema

    geo = Hierarchy.from_parents(["US", "10", "11", "24"], [None, "US", "US", "US"])
    schema = pl94_schema()
    rng = np.random.default_rng(3)
    cells = np.zeros((3, schema.size), dtype=np.int64)
    for row in range(3):
        cells[row, rng.choice(schema.size, size=12)] += rng.integers(1, 40, size=12)
    table = Table(geo, schema.categories(), cells)
    queries = {"total": "1/4", "hispanic * cenrace": "1/4", "detailed": "1/2"}
    work = Workload.from_shares(
        {0: ("1/2", queries), 1: ("1/2", queries)}, total="2", schema=schema,
        public=[(0, "total")],
    )  # fmt: skip
    return nmf.write(measure(table, work, secure=False, rng=4), folder)


@pytest.mark.parametrize("method", ["project", "project,round", "blue-restore", "topdown-2020"])
def test_postprocess_of_a_run_of_the_nation_and_its_states(tmp_path, method):
    """Two geolevels, no level below the states: the top is the whole run, written as the
    top partition, the same numbers as the method on the run in memory."""
    from postdp.analysis import ReleaseDesign
    from postdp.nmf.runs import one_thread
    from postdp.postprocess import top_down_2020

    run = _states_only_run(tmp_path / "run")
    args = ["postprocess", str(run), "--method", method, "--quiet"]
    seed = ["--seed", "5"] if "round" in method else []
    assert main([*args, *seed, "--output-dir", str(tmp_path / "out")]) == 0
    got = _wide(tmp_path / "out")
    m = nmf.read(run)
    with one_thread():
        if method == "topdown-2020":
            estimate = top_down_2020(m)
        else:
            estimate = ReleaseDesign(m.table, m.workload, method).solve(m, rng=5 if seed else None)
    geo = m.table.geography
    assert sorted(got) == ["", "010", "011", "024"]
    scale = max(1.0, float(np.abs(estimate).max()))
    for g in range(geo.n):
        code = "" if g == geo.root else "0" + str(geo.ids[g])
        if method in ("project", "blue-restore"):
            np.testing.assert_allclose(got[code], estimate[g], rtol=0, atol=1e-9 * scale)
        else:
            assert np.array_equal(got[code], estimate[g]), code


def test_an_unseeded_round_records_its_seed_and_resumes_to_the_same_bytes(
    small_run, tmp_path, capsys
):
    """``blue-restore,round`` without --seed: a seed drawn from OS entropy is recorded in
    the plan; a run killed after some partitions (one state's files and the manifest
    deleted) and resumed by the same command is the uninterrupted run, byte for byte (every
    state still the sum of its counties), and so is a run given the recorded seed."""
    import shutil

    args = ["postprocess", str(small_run), "--method", "blue-restore,round"]
    assert main([*args, "--output-dir", str(tmp_path / "a")]) == 0
    plan = json.loads((tmp_path / "a" / "postdp-postprocess.json").read_text())
    seed = plan["seed"]
    assert isinstance(seed, int) and 0 <= seed < 2**63 and plan["seed_drawn"] is True
    assert f"seed {seed} drawn" in capsys.readouterr().err
    files = json.loads((tmp_path / "a" / "postdp-manifest.json").read_text())["files"]
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "postdp-manifest.json").unlink()
    killed = [p for p in (tmp_path / "b").rglob("part-0.parquet") if "011" in p.parts]
    assert len(killed) == 2 * 5  # long and wide of the state and its 4 levels below
    for path in killed:
        path.unlink()
    assert main([*args, "--quiet", "--output-dir", str(tmp_path / "b")]) == 0
    for name in files:
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name
    resumed = json.loads((tmp_path / "b" / "postdp-manifest.json").read_text())
    assert resumed["files"] == files and resumed["seed"] == seed
    wide = _wide(tmp_path / "b", levels=("State", "County"))
    for state in ("010", "011"):
        county = [g for g in wide if len(g) == 6 and g.startswith(state)]
        assert np.array_equal(sum(wide[g] for g in county), wide[state])
    seeded = ["--quiet", "--seed", str(seed), "--output-dir", str(tmp_path / "c")]
    assert main([*args, *seeded]) == 0
    again = json.loads((tmp_path / "c" / "postdp-manifest.json").read_text())["files"]
    assert again == files


@pytest.mark.parametrize("method", ["topdown-2020", "project", "blue-restore"])
def test_a_damaged_run_is_blamed_on_the_run_and_leaves_no_output(
    small_run, tmp_path, capsys, monkeypatch, method
):
    """A file of the run deleted (a state's tracts): exit 2, one line that names the run as
    typed (not --output-dir), and no output folder (nor the parents the command made); the
    run repaired, the same command succeeds into the same --output-dir."""
    import shutil

    shutil.copytree(small_run, tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    damaged = tmp_path / "run" / "Tract.parquet" / "DPQuery" / "State=011" / "part-0.parquet"
    kept = damaged.read_bytes()
    damaged.unlink()
    argv = ["postprocess", "run", "--method", method, "--quiet", "--output-dir", "new/out"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("postdp postprocess: error: RUN 'run': ") and err.count("\n") == 1, err
    assert "--output-dir" not in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()
    damaged.write_bytes(kept)
    assert main(argv) == 0
    assert (tmp_path / "new" / "out" / "postdp-manifest.json").is_file()


@pytest.mark.processes
def test_ctrl_c_while_the_dask_workers_start_is_one_line(small_run, tmp_path):
    """SIGINT to the whole process group (as a terminal's Ctrl-C) once the LocalCluster's
    first worker process exists: exit 130 and postdp's one line, no worker's traceback nor
    Dask's logs."""
    pytest.importorskip("dask.distributed")
    psutil = pytest.importorskip("psutil")
    import postdp

    here = str(Path(postdp.__file__).resolve().parents[1])  # this postdp, from any folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [*postdp_command(), "postprocess", str(small_run), "--method", "topdown-2020",
         "--scheduler", "local", "--workers", "2", "--quiet", "--output-dir", "o"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=env,
    )  # fmt: skip
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    started = False
    while not started and proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            started = any("spawn_main" in " ".join(c.cmdline()) for c in parent.children(True))
        time.sleep(0.02)
    assert started, "no Dask worker process started"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and err.startswith("postdp: interrupted while "), err


@pytest.mark.parametrize("typed", [["10,11"], ["10", "11"], ["10", "11,24"]])
def test_measure_takes_synthetic_states_by_commas_or_spaces(tmp_path, monkeypatch, typed):
    """``--synthetic 10,11`` and ``--synthetic 10 11`` name the same states (the library
    call stood in by one that records them, so nothing is drawn)."""
    import postdp.nmf

    seen = []

    def record(tables, states, run_dir, **kwargs):
        seen.append(list(states))
        raise postdp.errors.ValidationError("stopped by the test")

    monkeypatch.setattr(postdp.nmf, "measure_by_state", record)
    argv = ["measure", "--synthetic", *typed, "--study", "--seed", "1", "--quiet"]
    assert main([*argv, "--output-dir", str(tmp_path / "run")]) == 2
    assert seen == [["10", "11", "24"][: 2 + (len(typed) == 2 and "," in typed[1])]]


@pytest.mark.parametrize("typed", [["11", "99"], ["11", "x1"], ["11,"]])
def test_measure_refuses_a_bad_synthetic_state_in_one_line(tmp_path, capsys, spy, typed):
    argv = ["measure", "--synthetic", *typed, "--study", "--seed", "1"]
    assert main([*argv, "--output-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--synthetic" in err and "Traceback" not in err
    assert spy == [] and not (tmp_path / "run").exists()


def test_progress_in_a_log_is_one_plain_line_per_partition(small_run, tmp_path, capsys):
    """Standard error not a terminal (here captured, as a log file): no bar, no carriage
    return or escape sequence, one line per state measured and per partition solved, and
    the last line says what was written where."""
    argv = ["measure", "--synthetic", "11", "--population-scale", "0.05", "--study", "--seed", "1"]
    assert main([*argv, "--output-dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    lines = err.splitlines()
    assert lines[:-1] == ["State 011: done (1/1)"]
    assert lines[-1].startswith(f"wrote {tmp_path / 'run'}: ")
    argv = ["postprocess", str(small_run), "--method", "topdown-2020"]
    assert main([*argv, "--output-dir", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    assert err.splitlines() == [
        "nation and states: done (1/3)",
        "subtrees: done (1/2)",
        "subtrees: done (2/2)",
        f"wrote {tmp_path / 'out'}: long/, wide/ (3 partitions), --method topdown-2020",
    ]

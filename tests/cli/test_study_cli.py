"""``postdp study``: the accuracy study of the 2020 persons design on a synthetic
population, as a command (issue 44)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postdp.cli import main

pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

SMALL = ["--synthetic", "11", "--population-scale", "0.05", "--quiet"]


@pytest.mark.processes
def test_a_study_writes_its_tables_figures_manifest_and_page(tmp_path, monkeypatch, capsys):
    """Two estimators, two draws, the production facility bounds (synthetic), the draws
    scored on a Dask cluster (--scheduler ADDRESS): the folder holds the tables (levels,
    summary, per draw, paired differences, reliability), the figures and the manifest; the
    page states a verdict and the bounds; the numbers are those of
    postdp.analysis.accuracy_study in this process on the same options and bounds, to the
    last bit (each draw has its own streams, wherever it runs)."""
    from tests._dask import dask_client

    monkeypatch.chdir(tmp_path)
    args = ["study", *SMALL, "--population-scale", "0.02", "--draws", "2", "--seed", "5"]
    args += ["--queries", "total;hispanic"]
    args += ["--estimators", "topdown-2020;project", "--output-dir", "st", "--report", "st.html"]
    args += ["--facilities", "synthetic"]
    with dask_client() as client:
        assert main([*args, "--scheduler", client.scheduler.address]) == 0
        assert len(client.scheduler_info()["workers"]) == 1  # the command left it running
    out = capsys.readouterr().out
    assert "project vs topdown-2020: MAE of total" in out and "wrote:" in out
    files = {p.name for p in (tmp_path / "st").iterdir()}
    assert files >= {
        "levels.csv", "summary.csv", "per_draw.csv", "differences.csv", "level_differences.csv",
        "reliability.csv", "tally.csv", "mae_by_level.png", "differences.png",
        "postdp-manifest.json",
    }  # fmt: skip
    assert "project vs topdown-2020: every metric, query, level and size bin: worse" in out
    manifest = json.loads((tmp_path / "st" / "postdp-manifest.json").read_text())
    assert manifest["estimators"] == ["topdown-2020", "project"] and manifest["draws"] == 2
    assert manifest["facilities"] == "synthetic"
    html = (tmp_path / "st.html").read_text(encoding="utf-8")
    assert "Paired differences to topdown-2020" in html and html.count("<img") == 2
    assert "facility bounds (synthetic): hhgq_total, nurse_nva_0" in html

    from postdp.analysis import accuracy_study
    from postdp.data import facility_bounds, level_names, synthetic_facilities
    from postdp.nmf import synthetic_population
    from postdp.tables import load_strategy

    strategy = load_strategy("pl94-2020-persons")
    truth = strategy.tabulate(synthetic_population(["11"], seed=0, scale=0.02))
    bounds = facility_bounds(synthetic_facilities(truth, seed=0), truth.geography)
    study = accuracy_study(
        truth, strategy.workload(truth), ["topdown-2020", "project"], schema=strategy.schema,
        draws=2, rng=5, queries=["total", "hispanic"], levels=level_names(truth.geography),
        bounds=bounds,
    )  # fmt: skip
    written = pd.read_csv(tmp_path / "st" / "per_draw.csv", dtype={"level": str})
    np.testing.assert_array_equal(written["mae"], study.per_draw["mae"])
    np.testing.assert_array_equal(written["mse"], study.per_draw["mse"])
    assert list(written["level"].unique()) == level_names(truth.geography)


def test_by_state_writes_one_study_per_state(tmp_path, monkeypatch, capsys):
    """--by-state: each state studied on its own (a nation of one state), its folder DIR/SS
    and its page FILE-SS.html; a state's numbers are those of the study of that state alone
    (postdp.analysis.accuracy_study on its own truth)."""
    monkeypatch.chdir(tmp_path)
    args = ["study", "--synthetic", "11,44", "--population-scale", "0.01", "--quiet"]
    args += ["--draws", "2", "--seed", "3", "--queries", "total", "--no-figures"]
    args += ["--estimators", "project;topdown-2020", "--by-state"]
    args += ["--output-dir", "st", "--report", "st.html"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "state 11: studied project, topdown-2020 over 2 draws" in out
    assert "state 44: studied project, topdown-2020 over 2 draws" in out
    assert {p.name for p in (tmp_path / "st").iterdir()} == {"11", "44"}
    assert (tmp_path / "st-11.html").is_file() and (tmp_path / "st-44.html").is_file()
    assert not (tmp_path / "st.html").exists()
    manifest = json.loads((tmp_path / "st" / "44" / "postdp-manifest.json").read_text())
    assert manifest["synthetic"] == ["44"]

    from postdp.analysis import accuracy_study
    from postdp.data import level_names
    from postdp.nmf import synthetic_population
    from postdp.tables import load_strategy

    strategy = load_strategy("pl94-2020-persons")
    truth = strategy.tabulate(synthetic_population(["44"], seed=0, scale=0.01))
    study = accuracy_study(
        truth, strategy.workload(truth), ["project", "topdown-2020"], schema=strategy.schema,
        draws=2, rng=3, queries=["total"], levels=level_names(truth.geography),
    )  # fmt: skip
    written = pd.read_csv(tmp_path / "st" / "44" / "per_draw.csv", dtype={"level": str})
    np.testing.assert_array_equal(written["mae"], study.per_draw["mae"])
    assert written.loc[written["level"] == "State", "geounits"].unique().tolist() == [1]
    # the next run refuses to replace one state's folder, before any draw
    assert main(args) == 2
    assert "--output-dir 'st/11': holds an earlier run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--estimators", "none"], "--estimators 'none': releases no table"),
        (["--estimators", "clamp"], "--estimators 'clamp'"),
        (["--estimators", "project;project"], "distinct names"),
        (["--queries", "total;nope"], "--queries 'total;nope': unknown ['nope']"),
        (["--report", "x.txt"], "--report 'x.txt'"),
        (["--draws", "1"], "--draws"),
        (["--workers", "0"], "--workers"),
        (["--seed", "-1"], "--seed"),
        (["--population-scale", "2"], "--population-scale"),
        (["--population-seed", "x"], "--population-seed"),
        (["--synthetic", "99"], "--synthetic '11,99'"),
        (["--facilities", "none.csv"], "--facilities 'none.csv': no such file"),
        (["--scheduler", "local", "--workers", "0"], "--workers"),
        (["--synthetic", "11"], "--synthetic '11,11': a state is named twice"),
        # the DHC persons design's study (a tiny population: its design is checked first)
        (["--strategy", "dhc"], "argument --strategy: invalid choice: 'dhc'"),
        (
            ["--strategy", "dhc-2020-persons", "--queries", "total;shoe size"],
            "--queries 'total;shoe size': 'shoe size' is not",
        ),
        (
            [
                "--strategy",
                "dhc-2020-persons",
                "--population-scale",
                "0.0002",
                "--estimators",
                "topdown",
            ],
            "--estimators 'topdown': topdown is not built for",
        ),
        (
            ["--strategy", "dhc-2020-persons", "--facilities", "f.csv"],
            "--facilities 'f.csv': a DHC study's facilities are 'synthetic'",
        ),
    ],
)
def test_bad_options_fail_in_one_line_before_any_draw(
    extra, message, tmp_path, monkeypatch, capsys
):
    import postdp.analysis

    def no_draw(*args, **kwargs):
        raise AssertionError("drew before the options were checked")

    monkeypatch.setattr(postdp.analysis, "accuracy_study", no_draw)
    monkeypatch.chdir(tmp_path)
    assert main(["study", *SMALL, "--output-dir", "st", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "st").exists()


def test_an_unreachable_scheduler_fails_in_one_line_before_any_draw(tmp_path, monkeypatch, capsys):
    """--scheduler ADDRESS that cannot be reached: one line naming the flag and the address,
    exit 2, nothing drawn, no folder (the connection refused at once here, not after
    Dask's ten seconds of retries)."""
    distributed = pytest.importorskip("dask.distributed")
    import postdp.analysis

    def refused(*args, **kwargs):
        raise OSError("Timed out trying to connect to tcp://10.0.0.1:8786")

    def no_draw(*args, **kwargs):
        raise AssertionError("drew before the scheduler was reached")

    monkeypatch.setattr(distributed, "Client", refused)
    monkeypatch.setattr(postdp.analysis, "accuracy_study", no_draw)
    monkeypatch.chdir(tmp_path)
    args = ["study", *SMALL, "--output-dir", "st", "--scheduler", "tcp://10.0.0.1:8786"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--scheduler 'tcp://10.0.0.1:8786': cannot connect" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "st").exists()


def test_an_existing_folder_is_kept_without_overwrite(tmp_path, monkeypatch, capsys):
    import postdp.analysis

    monkeypatch.setattr(postdp.analysis, "accuracy_study", lambda *a, **k: 1 / 0)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "mine.txt").write_text("keep")
    assert main(["study", *SMALL, "--output-dir", "st"]) == 2
    assert "--output-dir 'st'" in capsys.readouterr().err
    assert (tmp_path / "st" / "mine.txt").read_text() == "keep"

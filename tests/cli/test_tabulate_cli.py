"""``postdp tabulate``: the P.L. 94-171 tables of a release, written whole or not at all."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from postdp import nmf
from postdp.cli import main

from ..nmf.conftest import small_table


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from postdp.tables import load_strategy, measure

    tmp = tmp_path_factory.mktemp("tabulate-cli")
    t = small_table()
    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=2)
    run = nmf.write(m, tmp / "run")
    return nmf.postprocess(run, tmp / "out", method="topdown-2020")


def test_tabulate_writes_every_level_and_a_manifest(release, tmp_path, capsys):
    tables = tmp_path / "tables"
    assert main(["tabulate", str(release), "--output-dir", str(tables), "--tables", "P1,P5"]) == 0
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"wrote {tables}: 6 geolevels")
    manifest = json.loads((tables / "postdp-manifest.json").read_text())
    assert manifest["command"] == "postdp tabulate" and manifest["tables"] == ["P1", "P5"]
    assert set(manifest["files"]) == {
        "variables.csv",
        *(f"{level}.{ext}" for level in nmf.LEVELS_2020 for ext in ("csv", "parquet")),
    }
    county = pd.read_parquet(tables / "County.parquet")
    assert county["GEOID"].tolist() == ["10001", "11001"]
    assert [c for c in county.columns if c.startswith("P5")] == [
        f"P5_{k:03d}N" for k in range(1, 11)
    ]
    assert not any(c.startswith("P2") for c in county.columns)
    # a second call into the same folder needs --overwrite, and then replaces it
    assert main(["tabulate", str(release), "--output-dir", str(tables), "--quiet"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    args = ["tabulate", str(release), "--output-dir", str(tables), "--quiet", "--overwrite"]
    assert main(args) == 0
    assert "P2_001N" in pd.read_parquet(tables / "State.parquet").columns


def test_tabulate_refuses_bad_input_in_one_line_before_writing(release, tmp_path, capsys):
    out = str(tmp_path / "t")
    cases = [
        (["tabulate", str(release), "--output-dir", out, "--tables", "P9"], "--tables 'P9'"),
        (["tabulate", str(release), "--output-dir", out, "--tables", ","], "--tables ','"),
        (
            ["tabulate", str(release), "--output-dir", out, "--tables", "H1"],
            "--tables 'H1': table H1 is made from the housing",
        ),
        (["tabulate", str(tmp_path), "--output-dir", out], "not a postdp post-processing"),
        (["tabulate", str(release), "--output-dir", str(release / "x")], "--output-dir"),
    ]
    for args, needle in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "t").exists()
    assert not list(release.glob("x*"))


def test_progress_in_a_log_is_one_plain_line_per_partition(release, tmp_path, capsys):
    """stderr is not a terminal under pytest: no bar, no escape codes, a line per file."""
    assert main(["tabulate", str(release), "--output-dir", str(tmp_path / "t")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    lines = err.strip().splitlines()
    assert lines[:3] == ["US: done (1/1)", "State: done (1/2)", "State: done (2/2)"]
    assert len(lines) == 1 + 5 * 2 + 1 and lines[-1].startswith("wrote ")

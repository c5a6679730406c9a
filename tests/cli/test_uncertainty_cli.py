"""``postdp release --uncertainty replicates``: intervals for any post-processing chain."""

import numpy as np
import pandas as pd
import pytest

from postdp.cli import main
from tests.cli._helpers import TRUE_COUNTS, write_inputs


@pytest.mark.parametrize("secure", [False, True])
def test_replicate_intervals_on_every_row(secure, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "t.csv", "--epsilon", "1", "-o", "r.csv"]
    args += ["--postprocess", "project-nonneg,round", "--uncertainty", "replicates"]
    args += ["--replicates", "50", "--ci-level", "0.8"]
    if not secure:
        args += ["--study", "--seed", "3"]
    assert main(args) == 0
    out = pd.read_csv(tmp_path / "r.csv")
    assert {"ci_low", "ci_high", "ci_level"} <= set(out.columns)
    assert (out["ci_low"] <= out["ci_high"]).all() and (out["ci_level"] == 0.8).all()
    # moe: half the interval's width, beside ci_low and ci_high (as ACS tables give it)
    cols = list(out.columns)
    assert cols[cols.index("ci_low") : cols.index("ci_low") + 4] == [
        "ci_low",
        "ci_high",
        "moe",
        "ci_level",
    ]
    np.testing.assert_allclose(out["moe"], (out["ci_high"] - out["ci_low"]) / 2, atol=1e-6)
    inside = (out["ci_low"] <= out["released_count"]) & (out["released_count"] <= out["ci_high"])
    assert inside.mean() > 0.5
    assert not any(c in capsys.readouterr().out for c in TRUE_COUNTS)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--replicates", "5"], "--replicates"),
        (["--table", "p1-us-county", "--replicates", "200000"], "--replicates"),
        (["--table", "p1-us-county", "--format", "wide"], "need --format long"),
    ],
)
def test_bad_replicate_requests_draw_nothing(extra, message, tmp_path, monkeypatch, capsys, spy):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--epsilon", "1", "-o", "new.csv", "--uncertainty", "replicates"]
    if "--table" not in extra:
        args += ["--input", "t.csv", "--postprocess", "project"]
    else:
        args += ["--postprocess", "project"]
    assert main([*args, *extra]) == 2
    assert message in capsys.readouterr().err
    assert spy == [] and not (tmp_path / "new.csv").exists()


def test_bayes_release_with_posterior_intervals(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "t.csv", "--epsilon", "1", "-o", "b.csv", "--study"]
    args += ["--seed", "4", "--postprocess", "bayes", "--uncertainty", "posterior"]
    assert main(args) == 0
    out = pd.read_csv(tmp_path / "b.csv")
    assert (out["released_count"] >= 0).all()
    assert (out["ci_low"] <= out["released_count"]).all()
    assert (out["released_count"] <= out["ci_high"]).all()
    text = capsys.readouterr().out
    assert "post-processing: bayes" in text and "is consistent" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--postprocess", "project", "--uncertainty", "posterior"], "for --postprocess bayes"),
        (["--postprocess", "bayes", "--uncertainty", "replicates"], "use --uncertainty posterior"),
        (["--postprocess", "bayes", "--mechanism", "laplace"], "needs --mechanism geometric"),
        (["--postprocess", "bayes", "--public", "root"], "public nodes are not supported"),
        (["--postprocess", "bayes", "--weights", "inverse-variance"], "--weights"),
        (["--postprocess", "project,bayes"], "--postprocess 'project,bayes': 'bayes' runs alone"),
        (["--postprocess", "bayes,round"], "--postprocess 'bayes,round': 'bayes' runs alone"),
    ],
)
def test_bad_bayes_requests_draw_nothing(extra, message, tmp_path, monkeypatch, capsys, spy):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "t.csv", "--epsilon", "1", "-o", "new.csv", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert spy == [] and not (tmp_path / "new.csv").exists()


def test_table_replicate_intervals_on_every_row(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["release", "--table", "p1-us-county", "--epsilon", "1", "--public", "root"]
    args += ["--postprocess", "topdown", "--uncertainty", "replicates", "--replicates", "10"]
    assert main([*args, "--study", "--seed", "2", "-o", "t.csv"]) == 0
    out = pd.read_csv(tmp_path / "t.csv", dtype={"geo_id": str, "parent": str})
    assert {"ci_low", "ci_high", "ci_level"} <= set(out.columns)
    assert (out["ci_low"] <= out["ci_high"] + 1e-9).all()


def test_table_replicate_intervals_on_the_secure_path(tmp_path, monkeypatch):
    """The replicates of a secure table release draw OpenDP noise too (issue 22: this
    failed after the release with a message about the study path's arguments)."""
    from tests.cli.test_tables_cli import _inputs

    monkeypatch.chdir(tmp_path)
    _inputs(tmp_path)
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--epsilon", "1"]
    args += ["--postprocess", "project", "--uncertainty", "replicates", "--replicates", "10"]
    assert main([*args, "-o", "t.csv"]) == 0
    out = pd.read_csv(tmp_path / "t.csv", dtype={"geo_id": str, "parent": str})
    assert set(out["path"]) == {"secure"} and len(out) == 5 * 5
    assert (out["ci_low"] <= out["ci_high"] + 1e-9).all()

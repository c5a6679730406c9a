"""``postdp plan``: a budget split written as a table, and its bad inputs."""

import pandas as pd
import pytest

from postdp.cli import main
from tests.cli._helpers import TRUE_COUNTS, write_inputs


def test_plan_of_a_users_hierarchy(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["plan", "--input", "t.csv", "--total", "2", "--mechanism", "gaussian"]
    assert main([*args, "--weights", "0,1,1", "--compare", "1,0.5,0.5", "-o", "p.csv"]) == 0
    out = capsys.readouterr().out
    assert "split of rho = 2 over 3 levels" in out and "--compare split" in out
    plan = pd.read_csv(tmp_path / "p.csv")
    assert list(plan.columns) == ["level", "nodes", "budget", "share", "mean_variance"]
    assert plan["budget"].sum() == pytest.approx(2.0) and plan["share"].sum() == pytest.approx(1)
    assert plan["nodes"].tolist() == [1, 2, 2]
    assert not any(count in out for count in TRUE_COUNTS)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--total", "0"], "--total: must be positive"),
        (["--total", "1", "--weights", "1,1"], "--weights '1,1': needs one value per level (3)"),
        (["--total", "1", "--weights", "0,0,0"], "must be nonnegative and not all zero"),
        (["--total", "1", "--weights", "1,-2,1"], "must be nonnegative and not all zero"),
        (["--total", "1", "--compare", "1,1"], "--compare '1,1': needs one value per level"),
        # a split spending more than the total would print "better than the optimum"
        (["--total", "1", "--compare", "1,1,1"], "--compare '1,1,1': spends 3, not --total 1"),
        (["--total", "1", "--postprocess", "clamp"], "--postprocess 'clamp': applies to --obj"),
        (["--total", "1", "--draws", "50"], "--draws 50: applies to --objective mae only"),
        (["--total", "1", "--count", "count"], "--count 'count': applies to --objective mae"),
        (["--total", "1", "--mechanism", "cauchy"], "--mechanism"),
        (["--total", "1", "--input", "nowhere.csv"], "--input 'nowhere.csv': no such file"),
        (["--total", "1", "--input", "t.csv", "--parent", "up"], "--parent 'up': no such column"),
        (["--total", "1", "--input", "dup.csv"], "duplicate ids"),
        (["--total", "1", "-o", "existing.csv"], "-o 'existing.csv': already exists"),
        (["--total", "1", "-o", "t.csv", "--input", "t.csv", "--overwrite"], "t.csv"),
    ],
)
def test_bad_plans_write_nothing(extra, message, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    output = [] if "-o" in extra else ["-o", "new.csv"]
    assert main(["plan", *extra, *output]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "t.csv").read_text().startswith("id,parent,count")


def test_plan_frontier_table_and_figure(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["plan", "--input", "t.csv", "--total", "1", "--weights", "0,1,1"]
    args += ["--frontier", "0.5,2", "--frontier-output", "f.csv", "--figure", "f.png"]
    assert main(args) == 0
    frontier = pd.read_csv(tmp_path / "f.csv")
    assert frontier["total"].tolist() == [0.5, 2.0]
    assert (frontier["optimal"] <= frontier["equal"] * (1 + 1e-9)).all()
    assert (tmp_path / "f.png").stat().st_size > 1000
    assert "total 0.5: planned" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--figure", "f.png"], "--figure: draws the frontier; give --frontier totals too"),
        (["--frontier", "1,x"], "--frontier"),
        (["--frontier", "1", "--figure", "f.gif"], "must end in .png, .svg or .pdf"),
        (["--frontier", "1", "--frontier-output", "existing.csv"], "already exists"),
        (["--frontier", "1", "--frontier-output", "new.csv"], "the same file as -o"),
    ],
)
def test_bad_frontiers_write_nothing(extra, message, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["plan", "--input", "t.csv", "--total", "1", "-o", "new.csv", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_plan_for_the_mae_of_a_nonlinear_chain(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["plan", "--input", "t.csv", "--total", "1", "--mechanism", "laplace"]
    args += ["--objective", "mae", "--postprocess", "project-nonneg,round", "--draws", "40"]
    assert main([*args, "--weights", "0,1,1", "-o", "m.csv"]) == 0
    out = capsys.readouterr().out
    assert "size-binned MAE of project-nonneg,round (40 common random draws)" in out
    plan = pd.read_csv(tmp_path / "m.csv")
    assert plan["share"].sum() == pytest.approx(1.0)
    assert not any(count in out for count in TRUE_COUNTS)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mechanism", "geometric"], "--objective mae needs continuous noise"),
        (["--mechanism", "laplace", "--postprocess", "bogus"], "--postprocess"),
        (["--mechanism", "laplace", "--count", "pop"], "--count 'pop': no such column"),
        (["--mechanism", "laplace", "--frontier", "1,2"], "leave out --objective mae"),
        (["--mechanism", "laplace", "--draws", "3"], "--draws"),
    ],
)
def test_bad_mae_plans_write_nothing(extra, message, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = ["plan", "--input", "t.csv", "--total", "1", "--objective", "mae", "-o", "new.csv"]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before

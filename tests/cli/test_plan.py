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
    assert list(plan.columns) == ["level", "nodes", "share", "mean_variance"]
    assert plan["share"].sum() == pytest.approx(2.0)
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

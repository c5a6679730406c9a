"""Every release writes a privacy statement beside its output: ``<output>.privacy.json``."""

import itertools
import json

import pytest

from postdp.cli import main
from postdp.mechanisms import Budget
from tests.cli._helpers import mentions_true_count, write_inputs


def test_statement_of_a_secure_hierarchy_release(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "t.csv", "--mechanism", "gaussian", "--rho", "0.1,0.2,0.3"]
    assert main([*args, "--postprocess", "project", "--public", "root", "-o", "r.csv"]) == 0
    text = (tmp_path / "r.csv.privacy.json").read_text()
    statement = json.loads(text)
    assert statement["path"] == "secure"
    assert "add or remove one person" in statement["neighbouring_relation"]
    assert [lvl["rho"] for lvl in statement["levels"]] == [0.1, 0.2, 0.3]
    curve = statement["epsilon_delta"]
    assert [c["delta"] for c in curve] == [1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12]
    budget = Budget(rho=0.6)
    for point in curve:
        assert point["epsilon"] == pytest.approx(budget.to_approx_dp(point["delta"]))
    assert all(a["epsilon"] < b["epsilon"] for a, b in itertools.pairwise(curve))
    assert statement["public_invariants"]["published_exactly"] == ["US"]  # --public root
    ledger = json.loads((tmp_path / "postdp-ledger.jsonl").read_text().splitlines()[0])
    assert statement["output_sha256"] == ledger["output_sha256"]
    assert statement["opendp_version"] == ledger["opendp_version"] != ""
    assert not mentions_true_count(text)


def test_statement_of_a_study_table_release(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    design = {
        "measurements": [
            {"level": 0, "query": "total", "public": True},
            {"level": 1, "query": "detailed", "epsilon": 0.5},
            {"level": 2, "query": "detailed", "mechanism": "gaussian", "rho": 0.25},
        ]
    }
    (tmp_path / "d.json").write_text(json.dumps(design))
    args = ["release", "--table", "p1-us-county", "--design", "d.json", "--study", "--seed", "1"]
    assert main([*args, "-o", "t.csv"]) == 0
    statement = json.loads((tmp_path / "t.csv.privacy.json").read_text())
    assert statement["path"].startswith("study")
    assert statement["budget"] == {"epsilon": 0.5, "rho": 0.25}
    assert statement["public_invariants"]["published_exactly"] == ["query total at level 0"]
    assert [m["query"] for m in statement["measurements"]] == ["total", "detailed", "detailed"]


def test_an_existing_statement_is_refused_before_any_draw(spy, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.csv.privacy.json").write_text("an earlier statement\n")
    assert main(["release", "--input", "t.csv", "-o", "r.csv"]) == 2
    err = capsys.readouterr().err
    assert "-o (its privacy statement) " in err and "already exists" in err
    assert spy == [] and not (tmp_path / "r.csv").exists()
    assert main(["release", "--input", "t.csv", "-o", "r.csv", "--overwrite"]) == 0
    assert json.loads((tmp_path / "r.csv.privacy.json").read_text())["path"] == "secure"

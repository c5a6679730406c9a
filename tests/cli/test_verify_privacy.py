"""``postdp verify-privacy``: the privacy audit on the command line, and its bad inputs."""

import json

import pytest

from postdp.cli import main
from tests.cli._helpers import TRUE_COUNTS, mentions_true_count, write_inputs


def test_a_correct_design_is_consistent_with_its_claim(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["verify-privacy", "--input", "t.csv", "--epsilon", "0.5", "--trials", "3000"]
    assert (
        main([*args, "--postprocess", "project-nonneg,round", "--seed", "2", "-o", "v.json"]) == 0
    )
    out = capsys.readouterr().out
    assert "consistent with the claimed epsilon 1.500" in out
    assert not any(count in out for count in TRUE_COUNTS)
    record = json.loads((tmp_path / "v.json").read_text())
    assert record["flagged"] is False and record["claimed_epsilon"] == pytest.approx(1.5)
    assert record["path"] == "study (numpy)" and record["trials"] == 3000
    assert not mentions_true_count(json.dumps(record))


def test_a_public_root_is_audited_with_a_move(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    base = ["verify-privacy", "--input", "t.csv", "--epsilon", "1", "--public", "root"]
    base += ["--postprocess", "project"]
    assert main([*base, "--trials", "500", "--seed", "1"]) == 2
    assert "the neighbour changes a public node" in capsys.readouterr().err
    assert main([*base, "--neighbour", "move", "--trials", "2000", "--seed", "1"]) == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trials", "10"], "--trials"),
        (["--trials", "1e5"], "--trials"),
        (["--alpha", "2"], "--alpha"),
        (["--delta", "1.5"], "--delta 1.5: must lie in [0, 1)"),
        (["--secure", "--seed", "1"], "--seed: the release path (--secure) takes no seed"),
        (["--leaf", "nowhere"], "--leaf 'nowhere'"),
        (["--leaf", "US"], "--leaf 'US': not a leaf"),
        (["--to", "01001"], "--to: only with --neighbour move"),
        (["--mechanism", "gaussian", "--rho", "0.5"], "--delta 0: a zCDP design"),
        (["--postprocess", "bogus"], "--postprocess"),
        (["-o", "existing.csv"], "-o 'existing.csv': already exists"),
        (["-o", "t.csv", "--overwrite"], "t.csv"),
    ],
)
def test_bad_audits_write_nothing(extra, message, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    base = ["verify-privacy", "--input", "t.csv"]
    if "--rho" not in extra:
        base += ["--epsilon", "1"]
    assert main([*base, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_secure_audit_shows_its_size_and_progress(tmp_path, monkeypatch, capsys):
    """A long --secure audit says up front how many releases it runs and shows a bar with
    the rate and the time left (tqdm); --quiet silences both."""
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["verify-privacy", "--input", "t.csv", "--epsilon", "1", "--trials", "100"]
    assert main([*args, "--secure"]) == 0
    err = capsys.readouterr().err
    assert "4 x 100 = 400 releases (OpenDP release path, one release at a time)" in err
    assert "releases:" in err and "release/s" in err  # the bar, with its rate
    assert main([*args, "--secure", "--quiet"]) == 0
    assert capsys.readouterr().err == ""

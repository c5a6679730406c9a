"""Options whose value cannot be honoured are refused in one line naming the flag as typed
and its value, before anything is computed or written (issue 41)."""

from __future__ import annotations

from postdp.cli import main


def test_fairness_refuses_an_amount_its_statistics_cannot_hold(tmp_path, capsys):
    argv = ["fairness", "title1", "--state", "RI", "--draws", "10", "--no-figures"]
    argv += ["--output-dir", str(tmp_path / "F")]
    assert main([*argv, "--amount", "1e308"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--amount" in err and "'1e308'" in err
    assert "at most 1e+15" in err
    assert not (tmp_path / "F").exists()


def test_audit_refuses_a_memory_budget_it_cannot_keep_to(tmp_path, capsys):
    # the bundled counties (3,221 nodes) need about 41 MB even with 8 bins: 1M is refused,
    # not silently passed with the histograms cut to 8 bins
    argv = ["audit", "--draws", "10", "--no-figures", "--output-dir", str(tmp_path / "A")]
    assert main([*argv, "--max-memory", "1M"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("postdp audit: error: --max-memory 1M:")
    assert "needs about" in err and "give e.g. --max-memory" in err
    assert not (tmp_path / "A").exists()
    suggested = err.rsplit("--max-memory ", 1)[1].strip()
    assert main([*argv, f"--max-memory={suggested}"]) == 0  # the size it names is enough

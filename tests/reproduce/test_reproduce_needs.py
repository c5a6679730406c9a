"""``postdp reproduce`` asks for scikit-learn only where a reproduction uses it (issue 22)."""

from __future__ import annotations

import importlib.util

import pytest

from postdp.cli import main
from postdp.reproduce import reproductions, requirements

pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")


@pytest.fixture
def without_sklearn(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] == "sklearn" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_only_the_learned_proxies_need_scikit_learn():
    needing = {name for name in reproductions() if requirements(name)}
    assert needing == {"seed002-fig7"} and requirements("seed002-fig7") == ("sklearn",)


def test_without_scikit_learn_other_reproductions_run(without_sklearn, tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["reproduce", "seed003-table3", "--output-dir", str(out), "--quiet"]) == 0
    assert (out / "comparison.csv").exists()
    capsys.readouterr()
    for name in ("seed002-fig7", "all"):
        assert main(["reproduce", name, "--output-dir", str(tmp_path / "x"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "seed002-fig7 needs sklearn: pip install 'postdp[learn]'" in err
    assert not (tmp_path / "x").exists()

"""The documentation (and the README) is true to the code: every Python block of every page
runs (a page's
blocks in order, in one namespace, in a temporary folder), every ``$ postdp ...`` command
exits 0, and every function and test the theory page names exists."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

from postdp.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = [
    *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts),
    DOCS.parent / "README.md",
]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)

pytest.importorskip("matplotlib")


def _blocks(page: Path, language: str) -> list[str]:
    return [
        body for lang, body in FENCE.findall(page.read_text(encoding="utf-8")) if lang == language
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS.parent)))
def test_page_examples_run(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for block in _blocks(page, "python"):
        exec(compile(block, str(page), "exec"), namespace)  # our own pages
    for block in _blocks(page, "console"):
        for line in block.splitlines():
            if not line.startswith("$ postdp "):
                continue  # installs and other shell lines are not ours to run here
            status = main(shlex.split(line)[2:])
            assert status == 0, (line, capsys.readouterr().err)
    # issue 42: no example is one the tool itself warns against
    assert "at a corner" not in capsys.readouterr().out, page


def test_pages_have_examples():
    guides = [p for p in PAGES if p.parent.name == "guides"]
    assert len(guides) == 9
    for page in guides:
        assert _blocks(page, "python") or _blocks(page, "console"), page


def _theory_rows():
    text = (DOCS / "theory.md").read_text(encoding="utf-8")
    functions = sorted(set(re.findall(r"`(postdp(?:\.\w+)+)`", text)))
    tests = sorted(set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", text)))
    return functions, tests


def test_theory_page_names_real_functions_and_tests():
    functions, tests = _theory_rows()
    assert len(functions) >= 25 and len(tests) >= 25
    for dotted in functions:
        module, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), name), dotted
    root = DOCS.parent
    for path, name in tests:
        source = (root / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{path}::{name}"

"""Imports that show the layout: no package reaches into another's private modules or
names, and benchmarks and the documentation's code use public names only."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "postdp"

#: Benchmarks that still import private modules, with the issue that rewrites them.
KNOWN: dict[str, str] = {}


def _imports(tree):
    """(module, name) of every ``from postdp... import name`` and ``import postdp...``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("postdp"):
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("postdp"):
                    yield alias.name, None


def _private(part):
    return part.startswith("_") and not part.startswith("__")


def _cross_package(path):
    """Private imports of ``path`` (a module of postdp) from another package."""
    rel = path.relative_to(SRC).parts
    own = rel[0] if len(rel) > 1 else None  # top-level modules belong to no subpackage
    bad = []
    for module, name in _imports(ast.parse(path.read_text())):
        parts = module.split(".")[1:]
        if not parts:  # ``from postdp import x``: the root's modules and names
            if name and _private(name) and not (SRC / f"{name}.py").exists():
                bad.append(f"postdp.{name}")
            continue
        if parts[0] == own or _private(parts[0]):
            continue  # its own package, or the root's shared private modules
        if any(_private(p) for p in parts[1:]) or (name and _private(name)):
            bad.append(f"{module}:{name}")
    return bad


def test_no_package_imports_a_private_name_of_another():
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        bad = _cross_package(path)
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    assert not found, found


def _public_only(tree):
    bad = []
    for module, name in _imports(tree):
        if any(_private(p) for p in module.split(".")) or (name and _private(name)):
            bad.append(f"{module}:{name}")
    return bad


def test_benchmarks_use_public_names_only():
    found = {}
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        bad = _public_only(ast.parse(path.read_text()))
        if bad:
            found[path.name] = bad
    assert set(found) == set(KNOWN), found  # a fixed benchmark leaves KNOWN too


def test_the_documentations_code_uses_public_names_only():
    found = {}
    pages = [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    for page in pages:
        blocks = re.findall(r"```(?:python|pycon)\n(.*?)```", page.read_text(), flags=re.S)
        for code in blocks:
            code = "\n".join(line.removeprefix(">>> ") for line in code.splitlines())
            bad = _public_only(ast.parse(code))
            if bad:
                found.setdefault(str(page.relative_to(ROOT)), []).extend(bad)
    assert not found, found


def test_the_walker_sees_a_private_import():
    """The checks above would catch one (so they can fail)."""
    tree = ast.parse("from postdp.postprocess._kkt import kkt_report\nfrom postdp import _rng\n")
    assert _public_only(tree) == ["postdp.postprocess._kkt:kkt_report", "postdp:_rng"]

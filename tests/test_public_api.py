"""Meta-tests: the public names, their documentation, and the one-way layering of modules."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import postdp

PUBLIC_MODULES = [
    "postdp",
    "postdp.mechanisms",
    "postdp.hierarchy",
    "postdp.postprocess",
    "postdp.bayes",
    "postdp.analysis",
    "postdp.decisions",
    "postdp.data",
    "postdp.errors",
    "postdp.plots",
]


def _public_objects():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{module_name}.{name}", obj


@pytest.mark.parametrize(
    ("name", "obj"), list(_public_objects()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_public_name_is_documented(name, obj):
    doc = inspect.getdoc(obj)
    assert doc, f"{name} has no docstring"
    if obj.__module__ == "postdp.errors":
        return  # exception classes: one-line docstrings
    if name.endswith("Mechanism"):
        return  # protocol / abstract base
    assert "Examples" in doc, f"{name} has no Examples section"
    if inspect.isfunction(obj):
        assert "Parameters" in doc and "Returns" in doc, f"{name} lacks Parameters/Returns"


def test_spec_entry_points_exist():
    for name in ("Hierarchy", "Geometric", "Laplace", "Gaussian", "DiscreteGaussian", "Budget"):
        assert hasattr(postdp, name)
    assert callable(postdp.data.load_county_populations)
    assert postdp.__version__


# Layers, lowest first; a module may import only from its own layer or the ones before it
# (STYLE.md). Checked statically, on the import statements of every source file.
LAYERS = [
    ["postdp._rng", "postdp._validation", "postdp.errors", "postdp._typing"],
    ["postdp.mechanisms"],
    ["postdp.hierarchy"],
    ["postdp.postprocess"],
    ["postdp.bayes"],
    ["postdp.analysis"],
    ["postdp.decisions"],
    ["postdp.data"],
    ["postdp.plots"],
    ["postdp.cli", "postdp.__main__", "postdp"],
]
SRC = Path(postdp.__file__).parent


def _layer(module: str) -> int:
    best, length = None, -1
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            nested = module.startswith(prefix + ".") and prefix != "postdp"
            if (module == prefix or nested) and len(prefix) > length:
                best, length = index, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if _is_module(full) else node.module


def _is_module(name: str) -> bool:
    if not name.startswith("postdp."):
        return False
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_layering(path):
    own = _module_name(path)
    own_layer = _layer(own)
    for imported in _imports(path):
        drawing = own.startswith(("postdp.plots", "postdp.report"))
        if imported.startswith("matplotlib") and not drawing:
            pytest.fail(f"{own} imports matplotlib (only plots/report may, lazily)")
        if imported == "postdp" or imported.startswith("postdp."):
            assert _layer(imported) <= own_layer, f"{own} imports {imported} from a later layer"


@pytest.mark.parametrize("path", sorted((SRC / "plots").glob("*.py")), ids=lambda p: p.name)
def test_plots_import_matplotlib_only_lazily(path):
    tree = ast.parse(path.read_text())
    top_level = [
        alias.name
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    modules = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module]
    assert not any(m.startswith("matplotlib") for m in [*top_level, *modules])


def test_layering_check_catches_an_upward_import():
    assert _layer("postdp.cli") > _layer("postdp.mechanisms.laplace")
    assert _layer("postdp.hierarchy._tree") > _layer("postdp._rng")

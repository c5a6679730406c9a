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
    "postdp.tables",
    "postdp.postprocess",
    "postdp.bayes",
    "postdp.analysis",
    "postdp.decisions",
    "postdp.data",
    "postdp.errors",
    "postdp.plots",
    "postdp.references",
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


def test_spec_entry_points_exist_and_work():
    """Every name of SPEC.md's "Public entry points", used the way the spec writes it"""
    import numpy as np

    df = postdp.data.load_county_populations()
    assert list(df.columns)[:5] == ["id", "parent", "name", "level", "count"]
    assert {"US", "01", "01001"} <= set(df["id"])
    h = postdp.Hierarchy.from_frame(df, id="id", parent="parent", count="count")
    assert (h.n, h.ids.shape, h.counts.shape) == (3195, (3195,), (3195,))
    m = postdp.Geometric(epsilon=1.0, sensitivity=1)
    for other in (
        postdp.Laplace(epsilon=1.0),
        postdp.Gaussian(rho=0.5),
        postdp.DiscreteGaussian(rho=0.5),
    ):
        assert other.variance() > 0 and other.privacy_cost()
    noisy = m.sample(h.counts, rng=0, size=3)
    assert noisy.shape == (3, h.n)
    secure = m.release(h.counts[:5])
    assert secure.shape == (5,)
    assert m.pmf(0) > 0 and postdp.Laplace(epsilon=1.0).pdf(0.0) > 0
    assert m.variance() > 0 and m.privacy_cost() == postdp.Budget.pure(1.0)
    v = postdp.project(noisy, h, nonneg=True, public={"US": 308745538}, method="project-nonneg")
    assert np.allclose(v[:, 0], 308745538)
    assert postdp.project(noisy, h, method="topdown").shape == noisy.shape
    x = np.array([-1.0, 2.5])
    assert postdp.clamp(x, lower=0).tolist() == [0.0, 2.5]
    assert postdp.translated_ramp(x, 0.5).tolist() == [0.0, 2.0]
    alpha = postdp.optimal_ramp_shift(postdp.Laplace(epsilon=1.0))
    assert alpha == postdp.optimal_ramp_shift(1.0)  # a bare Laplace scale also accepted
    assert postdp.stochastic_round(x, rng=0).dtype == np.int64
    assert postdp.round_consistent(v, h, rng=0).dtype == np.int64
    assert postdp.finucan_mode([10], [[0.5, 0.5]]).tolist() == [[5, 5]]
    design = postdp.ReleaseDesign(h, m, "project-nonneg,round", public="root")
    result = postdp.simulate(design, n_draws=20, rng=0)
    assert len(result.to_frame()) == h.n
    for module in ("analysis", "decisions", "plots"):
        assert getattr(postdp, module).__name__ == f"postdp.{module}"
    assert postdp.__version__


def test_every_public_subpackage_is_an_attribute_of_postdp():
    """``import postdp; postdp.tables`` works for every subpackage and module of src/postdp
    whose name has no leading underscore, through the lazy hook (asked directly, since this
    session has imported most of them already), and each is in ``__all__``."""
    root = Path(postdp.__file__).parent
    names = sorted(
        p.stem if p.suffix == ".py" else p.name
        for p in root.iterdir()
        if not p.name.startswith("_")
        and (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").is_file()))
    )
    assert {"tables", "report", "reproduce", "nmf", "plots"} <= set(names)
    for name in names:
        assert postdp.__getattr__(name).__name__ == f"postdp.{name}"
        assert name in postdp.__all__ and name in dir(postdp)


def test_import_postdp_is_light():
    """``import postdp`` loads no scipy, pandas, matplotlib or OpenDP (names load on use)."""
    import subprocess
    import sys

    code = (
        "import sys, postdp; heavy = [m for m in ('scipy', 'pandas', 'matplotlib', 'opendp', "
        "'dask', 'sklearn', 'numba') if m in sys.modules]; print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_command_lines_parser_is_light():
    """Building every command's parser (``postdp --help``) reads the estimator registry but
    loads no scipy, pandas or numba (the solvers load on use; issue 43 had made every
    command start 2 s slower)."""
    import subprocess
    import sys

    code = (
        "import sys; from postdp.cli import build_parser; build_parser(); "
        "heavy = [m for m in ('scipy', 'pandas', 'matplotlib', 'opendp', 'dask', 'sklearn', "
        "'numba') if m in sys.modules]; print(','.join(heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


# Layers, lowest first; a module may import only from its own layer or the ones before it
# (CONTRIBUTING.md, "Layers"). Checked statically, on the import statements of every source file.
LAYERS = [
    [
        "postdp._files",
        "postdp._rng",
        "postdp._validation",
        "postdp.errors",
        "postdp.references",
        "postdp._typing",
        "postdp._intervals",
        "postdp._moments",
        "postdp._kernels",
        "postdp._threads",
    ],
    ["postdp.mechanisms", "postdp.privacy"],  # a release and its accounting, together
    ["postdp.hierarchy"],
    ["postdp.tables"],
    ["postdp.data"],
    ["postdp.postprocess"],
    ["postdp.bayes"],
    ["postdp.analysis"],
    ["postdp.decisions"],
    ["postdp.nmf"],
    ["postdp.plots"],
    ["postdp.report"],
    ["postdp.reproduce"],
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
        drawing = own.startswith(("postdp.plots", "postdp.report", "postdp.reproduce"))
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
    # data holds data: it sits just above the tables it returns, below every algorithm
    assert _layer("postdp.tables") < _layer("postdp.data") < _layer("postdp.postprocess")
    assert _layer("postdp.hierarchy._tree") > _layer("postdp._rng")


# -- the signature rule (CONTRIBUTING.md) -------------------------------------------------
# Records built by postdp (results, value objects): their fields are data, in any order.
RECORDS = {
    "Budget",
    "Strategy",
    "RoundingPlan",
    "BudgetPlan",
    "Table",
    "TableMeasurements",
    "Measurement",
    "Query",
    "Workload",
    "NoisyCounts",
    "Hierarchy",
    "MonteCarloResult",
    "Step",
    "FairnessReport",
    "ExactPosterior",
    "PosteriorSamples",
    "TemperatureSearch",
    "BiasBound",
    "ProjectionReport",
    "SumLaw",
    "BayesRelease",
    "ConfidenceInterval",
    "PublicNodes",
}
# Positional parameters come in this order: data, then structure and noise, then steps.
RANK = {
    "hierarchy": 1,
    "table": 1,
    "geography": 1,
    "categories": 1,
    "workload": 1,
    "mechanism": 1,
    "mechanisms": 1,
    "total_mechanism": 1,
    "component_mechanisms": 1,
    "rule": 1,
    "postprocess": 2,
    "steps": 2,
    "estimators": 2,  # the post-processings an accuracy study compares
}
BARE_NOISE = {"scale", "sigma", "epsilon", "rho", "lam", "b"}
# Optional data that may still be given by position: a hierarchy's counts, a design's truth.
OPTIONAL_DATA = {"counts", "truth", "hierarchy"}  # project(): table measurements carry theirs
NOISE_CLASSES = {"Laplace", "Geometric", "Gaussian", "DiscreteGaussian", "LogLaplace", "Budget"}
# Parameters named like noise that are not noise: the synthetic population's size factor.
NOT_NOISE = {"synthetic_population": {"scale"}, "synthetic_dhc_population": {"scale"}}


def _callables():
    seen = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj, "function"
                continue
            if issubclass(obj, BaseException) or name.endswith("Mechanism"):
                continue
            yield f"{module_name}.{name}", obj, "record" if name in RECORDS else "class"
            for attr, value in vars(obj).items():
                raw = value.__func__ if isinstance(value, classmethod | staticmethod) else value
                if not attr.startswith("_") and inspect.isfunction(raw):
                    kind = "builder" if isinstance(value, classmethod) else "method"
                    yield f"{module_name}.{name}.{attr}", raw, kind


def _problems(obj, kind, owner):
    params = [
        p for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")
    ]
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    found = []
    if any(p.name == "rng" and p.kind is not p.KEYWORD_ONLY for p in params):
        found.append("`rng` must be keyword-only")
    ranks = [RANK.get(p.name, 0) for p in positional]
    if ranks != sorted(ranks):
        found.append("positional order must be data, hierarchy/mechanism, steps")
    if kind in ("function", "class", "builder"):
        late = [
            p.name
            for p in positional[1:]
            if p.default is not p.empty
            and p.name not in OPTIONAL_DATA
            and RANK.get(p.name) != 2  # the steps of a design may follow it by position
        ]
        if late:
            found.append(f"options must be keyword-only: {', '.join(late)}")
    if kind == "function" or (kind in ("class", "builder") and owner not in NOISE_CLASSES):
        bare = [
            p.name
            for p in params
            if p.name in BARE_NOISE and p.name not in NOT_NOISE.get(owner, set())
        ]
        if bare:
            found.append(f"noise must be a mechanism object, not {', '.join(bare)}")
    return found


@pytest.mark.parametrize(
    ("name", "obj", "kind"), list(_callables()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_signature_rule(name, obj, kind):
    """Data first, then the hierarchy or mechanism, options keyword-only, `rng` keyword-only,
    noise as a mechanism object; the first parameter alone may be optional data."""
    owner = name.split(".")[-2] if kind in ("builder", "method") else name.split(".")[-1]
    if kind == "record":
        return
    assert _problems(obj, kind, owner) == [], name


def test_signature_rule_catches_violations():
    def bad(x, mechanism, lower=0.0, rng=None):
        """A deliberately bad signature."""

    def bare(x, scale):
        """A bare noise scale."""

    def flipped(mechanism, x):
        """Data after the mechanism."""

    assert _problems(bad, "function", "bad") == [
        "`rng` must be keyword-only",
        "positional order must be data, hierarchy/mechanism, steps",
        "options must be keyword-only: lower, rng",
    ]
    assert _problems(bare, "function", "bare") == ["noise must be a mechanism object, not scale"]
    assert _problems(flipped, "function", "flipped") == [
        "positional order must be data, hierarchy/mechanism, steps"
    ]


RESULTS = {
    "MonteCarloResult",
    "FairnessReport",
    "ExactPosterior",
    "PosteriorSamples",
    "TemperatureSearch",
    "BiasBound",
    "ProjectionReport",
    "SumLaw",
    "BayesRelease",
    "NoisyCounts",
    "ConfidenceInterval",
}


def test_every_result_has_to_frame_and_typed_fields():
    import dataclasses

    found = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if name in RESULTS:
                found.add(name)
                assert callable(getattr(obj, "to_frame", None)), f"{name} has no to_frame()"
                untyped = [f.name for f in dataclasses.fields(obj) if "Any" in str(f.type)]
                assert untyped == [], f"{name} has untyped fields {untyped}"
    assert found == RESULTS


def _all_imports(path: Path):
    """Imports of a source file, nested ones included, except under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if _is_module(full) else node.module


def test_no_import_cycles_even_inside_functions():
    """Issue 11: hidden cycles (mechanisms._base <-> release, projections <-> topdown)."""
    graph = {}
    for path in SRC.rglob("*.py"):
        own = _module_name(path)
        graph[own] = {
            m
            for m in _all_imports(path)
            if m.startswith("postdp.") and m != own and not own.startswith(m + ".")
        }
    assert _find_cycle(graph) is None, _find_cycle(graph)


def _find_cycle(graph):
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*trail, node, nxt]
            if nxt not in state:
                found = visit(nxt, [*trail, node])
                if found:
                    return found
        state[node] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [])
            if found:
                return found
    return None


def test_cycle_finder_finds_cycles():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None

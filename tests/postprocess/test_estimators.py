"""The registry of estimators: the only spelling of a method name, and records that hold."""

from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Geometric, Hierarchy, Laplace
from postdp.errors import ValidationError
from postdp.postprocess import (
    PostProcessChain,
    estimator,
    estimators,
    is_consistent,
    parse_steps,
    parse_table_method,
)
from postdp.postprocess.chain import ELEMENTWISE_STEPS, STEP_NAMES
from postdp.postprocess.estimators import method_help, resolve_projection
from postdp.tables import Measurement, Query, Table, Workload, measure

SRC = Path(postdp.__file__).parent
REGISTRY = SRC / "postprocess" / "estimators.py"
#: postdp's public subpackages and modules: a method name may also name one (``bayes``).
PACKAGES = frozenset(
    p.stem
    for p in SRC.iterdir()
    if not p.name.startswith("_") and ((p / "__init__.py").exists() or p.suffix == ".py")
)


def _module_path(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("postdp.")
    )


def _package_list(node: ast.AST) -> bool:
    """A list, tuple or set of two or more strings, each the name of a postdp subpackage or
    module (``_SUBPACKAGES = ("analysis", "bayes", ...)``): package names, not method
    names."""
    return (
        isinstance(node, ast.List | ast.Tuple | ast.Set)
        and len(node.elts) >= 2
        and all(
            isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in PACKAGES
            for c in node.elts
        )
    )


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (of a module, class or function),
    entries of ``__all__``, keys of a name -> module map (``{"round":
    "postdp.postprocess"}``) or entries of a list of subpackages: Python names such as
    ``project`` or ``bayes``, not method names."""
    out = set()
    for node in ast.walk(tree):
        if _package_list(node):
            out.update(id(c) for c in node.elts)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            out.update(id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant))
        if isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values, strict=True)
            out.update(id(k) for k, v in pairs if _module_path(v))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def method_literals(text: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, name) of each method name spelled in code: a string constant that is a name,
    or holds one quoted ('name', "name" or `name`). Docstrings and comments may mention
    names (they document them); f-string parts count as strings."""
    tree = ast.parse(text)
    docs = _docstrings(tree)
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    quoted = re.compile(rf"(['\"`])(?:{alternatives})\1")
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in docs:
            continue
        value = node.value
        if value.strip() in names:
            found.append((node.lineno, value.strip()))
        for m in quoted.finditer(value):
            found.append((node.lineno, m.group(0)[1:-1]))
    return found


def test_no_method_name_is_spelled_outside_the_registry():
    names = [e.name for e in estimators()]
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == REGISTRY:
            continue
        for _, name in method_literals(path.read_text(encoding="utf-8"), names):
            found.setdefault(path.relative_to(SRC).as_posix(), set()).add(name)
    assert not found, f"method names spelled outside the registry: {found}"


def test_the_literal_finder_finds_what_it_must_and_spares_docstrings():
    code = '''
"""Module doc: 'project' may be named here."""
def f(x="project"):
    """Function doc: "topdown"."""
    # a comment: 'round'
    if x == 'topdown-2020':
        raise ValueError(f"`method` must be 'blue-restore' or `clamp`; got {x!r}")
    return {"projection": 1, "roundabout": 2}
LAZY = {"round": "postdp.postprocess", "topdown": 3}
'''
    names = [e.name for e in estimators()]
    got = sorted(n for _, n in method_literals(code, names))
    assert got == ["blue-restore", "clamp", "project", "topdown", "topdown-2020"]


def test_the_literal_finder_spares_package_lists_but_not_a_method_named_like_a_package():
    alone = next(e.name for e in estimators() if e.alone)
    assert alone in PACKAGES  # "bayes" is both a method and postdp.bayes
    code = f'''
from postdp.{alone} import bayes_release_hierarchy
_SUBPACKAGES = ("analysis", "{alone}", "cli")
__all__ = ["{alone}", "cli"]
def run(text):
    if text.replace(" ", "") == "{alone}":
        return importlib.import_module("postdp.{alone}")
    steps = ("{alone}",)
    mixed = ["{alone}", "project"]
    raise ValueError(f"--postprocess {{text!r}}: use '{alone}' alone")
'''
    names = [e.name for e in estimators()]
    got = sorted(n for _, n in method_literals(code, names))
    assert got == [alone, alone, alone, alone, "project"]


def test_every_name_is_unique_and_lookups_return_the_record():
    names = [e.name for e in estimators()]
    assert len(set(names)) == len(names)
    for e in estimators():
        assert estimator(e.name) is e
        assert e.summary and "\n" not in e.summary
        assert "; " not in e.summary, "method_help joins the summaries with '; '"
        assert set(e.models) <= {"hierarchy", "table"} and e.models


def test_unknown_name_is_one_line_listing_every_known_one():
    with pytest.raises(ValidationError) as info:
        estimator("blue")
    message = str(info.value)
    assert "\n" not in message and "'blue'" in message
    for e in estimators():
        assert e.name in message
    with pytest.raises(ValidationError, match="unknown post-processing method 'exact'"):
        postdp.project(np.zeros(3), Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"]),
                       method="exact")  # fmt: skip


def test_model_filter():
    table = {e.name for e in estimators("table")}
    hierarchy = {e.name for e in estimators("hierarchy")}
    assert table | hierarchy == {e.name for e in estimators()}
    assert all("table" in estimator(n).models for n in table)
    with pytest.raises(ValidationError, match="`model`"):
        estimators("cube")


def test_table_grammar_comes_from_the_registry():
    solver = next(e for e in estimators("table") if not e.finisher and not e.integral)
    finisher = next(e for e in estimators("table") if e.finisher)
    integral = next(e for e in estimators("table") if not e.finisher and e.integral)
    m = parse_table_method(f"{solver.name}, {finisher.name}")
    assert (m.step, m.finish, m.rounded, m.integral) == (solver, finisher, True, True)
    assert parse_table_method("none").step is None
    with pytest.raises(ValidationError, match="already integral"):
        parse_table_method(f"{integral.name},{finisher.name}")
    hierarchy_only = [e for e in estimators("hierarchy") if "table" not in e.models]
    for bad in ["zzz", f"{finisher.name}", f"{solver.name},{solver.name}"] + [
        e.name for e in hierarchy_only
    ]:
        with pytest.raises(ValidationError) as info:
            parse_table_method(bad)
        assert "\n" not in str(info.value)


def test_cli_choices_and_help_come_from_the_registry(capsys):
    from postdp.cli import main

    with contextlib.suppress(SystemExit):
        main(["postprocess", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for e in estimators("table"):
        if not e.finisher:
            assert e.name in text and " ".join(e.summary.split()) in text


def test_cli_unknown_method_exits_2_naming_the_flag(tmp_path, capsys):
    from postdp.cli import main

    code = main(["postprocess", str(tmp_path), "--method", "blue", "--output-dir",
                 str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "--method" in err and "'blue'" in err and len(err.splitlines()) == 1
    for e in estimators("table"):
        if not e.finisher:
            assert e.name in err


# -- every record's declared properties hold on a small table and a small hierarchy ---------
def _table():
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    return Table(geo, cat, [[3, 0], [1, 5]])


def _schema_table():
    from postdp.tables import Attribute, Schema

    s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
    t = Table(geo, s.categories(), [[1, 0, 3, 4], [0, 6, 2, 8]])
    w = Workload(
        [Measurement(d, Query.marginal(s, q), Gaussian(rho=0.5)) for d in range(2)
         for q in ("total", "detailed")]
    )  # fmt: skip
    return t, w


def _check(e, values, consistent):
    if e.integral:
        assert np.array_equal(values, np.rint(values)), e.name
    if e.nonnegative:
        assert values.min() >= -1e-9, e.name
    if e.consistent:
        assert consistent, e.name


@pytest.mark.parametrize("name", [e.name for e in estimators("table") if not e.finisher])
def test_table_records_hold(name):
    e = estimator(name)
    t, w = _schema_table()
    for rng in range(3):
        m = measure(t, w, secure=False, rng=rng)
        e.check_design(t, w)
        cells = e.table_solver(t, w)(m)
        geo = t.geography
        leaves_sum = cells[geo.leaves].sum(axis=0)
        consistent = np.allclose(cells[geo.root], leaves_sum, atol=1e-6)
        _check(e, cells, consistent)
        # the same through postdp.project(method=...) for a solver
        if e.solver:
            np.testing.assert_allclose(postdp.project(m, method=name), cells, atol=1e-9)


STEPS = [e.name for e in estimators("hierarchy") if not e.alone]


def _release_rules():
    """The implementation of every release rule that runs alone (they live above the
    registry's layer; the CLI maps the same records)."""
    from postdp.bayes import bayes_release_hierarchy
    from postdp.postprocess.estimators import BAYES

    return {BAYES.name: bayes_release_hierarchy}


@pytest.mark.parametrize("name", STEPS)
def test_hierarchy_records_hold(name):
    e = estimator(name)
    h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "T"], [9, 2, 0, 7])
    steps = f"{name}:T=1" if "T" in e.required else name
    chain = PostProcessChain(h, [Laplace(1.0)] * 2, steps)
    noisy = h.counts + np.random.default_rng(0).laplace(0, 3.0, size=(50, h.n))
    out = np.asarray(chain(noisy, rng=1))
    _check(e, out.astype(np.float64), is_consistent(out, h))
    if e.random:  # draws randomness: two seeds differ somewhere
        assert not np.array_equal(out, chain(noisy, rng=2))
    else:
        np.testing.assert_array_equal(out, chain(noisy, rng=2))
    assert [s.name for s in parse_steps(steps)] == [name]


def test_a_lying_record_fails_the_property_check():
    import dataclasses

    e = dataclasses.replace(estimator(next(e.name for e in estimators() if e.solver)),
                            integral=True)  # fmt: skip
    with pytest.raises(AssertionError):
        _check(e, np.array([0.5, 1.0]), True)


def test_streams_and_per_geounit_flags_match_their_callers():
    from postdp.postprocess import project_by_subtree

    t = _table()
    w = Workload([Measurement(d, Query.detailed(t.categories), Geometric(1.0)) for d in range(2)])
    m = measure(t, w, secure=False, rng=0)
    for e in estimators("table"):
        if e.finisher or e.streams:
            continue
        with pytest.raises(ValidationError, match="not solved by subtree"):
            next(iter(project_by_subtree(m, lambda k: m, method=e.name)))


def test_every_release_rule_that_runs_alone_has_an_implementation():
    alone = [e.name for e in estimators() if e.alone]
    assert alone and sorted(alone) == sorted(_release_rules())


@pytest.mark.parametrize("name", sorted(_release_rules()))
def test_release_rules_hold_on_a_hierarchy_with_geometric_noise(name):
    e = estimator(name)
    assert e.models == ("hierarchy",) and not e.solver and not e.elementwise
    h = Hierarchy.from_parents(
        ["T", "a", "b", "c", "a1", "a2", "c1"],
        [None, "T", "T", "T", "a", "a", "c"],
        [9, 2, 0, 7, 1, 1, 7],
    )
    mechs = [Geometric(0.5)] * h.n_levels
    noise = np.random.default_rng(0).geometric(1 - np.exp(-0.5), size=(2, 40, h.n))
    noisy = h.counts + noise[0] - noise[1]  # double geometric: some counts go negative
    assert noisy.min() < 0
    out = np.asarray(_release_rules()[name](noisy, h, mechs))
    assert out.shape == noisy.shape
    _check(e, out.astype(np.float64), is_consistent(out, h))
    assert e.integral and e.nonnegative and e.consistent
    if not e.random:
        np.testing.assert_array_equal(out, _release_rules()[name](noisy, h, mechs))


def test_bayes_record():
    e = estimator("bayes")
    assert (e.models, e.integral, e.nonnegative, e.consistent) == (("hierarchy",), True, True, True)
    assert e.alone and not e.random and not e.solver and not e.finisher and not e.options
    assert e.name not in STEP_NAMES and e.name not in ELEMENTWISE_STEPS
    assert [s.name for s in parse_steps(" bayes ")] == ["bayes"]  # alone, for its callers


@pytest.mark.parametrize("steps", ["project,bayes", "bayes,round", "clamp, bayes", "bayes"])
def test_a_chain_refuses_a_rule_that_runs_alone_in_one_line(steps):
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [3, 1, 2])
    with pytest.raises(ValidationError) as info:
        PostProcessChain(h, [Geometric(1.0)] * 2, steps)
    message = str(info.value)
    assert "\n" not in message and "runs alone" in message
    assert "postdp release --postprocess bayes" in message
    assert "postdp.bayes.bayes_release_hierarchy" in message
    if "," in steps:  # among other steps: refused already when parsed
        with pytest.raises(ValidationError, match="runs alone"):
            parse_steps(steps)


def test_a_rule_that_runs_alone_is_no_projection_and_no_table_method():
    for e in estimators():
        if e.alone:
            with pytest.raises(ValidationError, match="does not project"):
                resolve_projection(e.name, None, "hierarchy")
            with pytest.raises(ValidationError, match="a table post-processing is one of"):
                parse_table_method(e.name)
            with pytest.raises(ValidationError, match="runs alone"):
                postdp.ReleaseDesign(Hierarchy.from_parents(["T", "a"], [None, "T"], [1, 1]),
                                     [Geometric(1.0)] * 2, e.name)  # fmt: skip


def test_method_help_splits_chain_steps_from_rules_that_run_alone():
    def lines(records):
        return "; ".join(f"{e.name}: {e.summary}" for e in records)

    hierarchy = estimators("hierarchy")
    assert method_help("hierarchy", alone=False) == lines(e for e in hierarchy if not e.alone)
    assert method_help("hierarchy", alone=True) == lines(e for e in hierarchy if e.alone)
    assert method_help("hierarchy") == lines(hierarchy)
    assert [e.name for e in hierarchy if not e.alone] == STEPS and len(STEPS) < len(hierarchy)


def test_release_help_lists_the_rules_that_run_alone_from_the_registry(capsys):
    from postdp.cli import main

    with contextlib.suppress(SystemExit):
        main(["release", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for e in estimators("hierarchy"):
        assert f"{e.name}: {' '.join(e.summary.split())}" in text
    alone = text.index("as the only step:")
    for e in estimators("hierarchy"):
        assert (text.index(f"{e.name}: ") > alone) == e.alone, e.name

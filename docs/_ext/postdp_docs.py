"""Generated pages of the postdp documentation: the API reference from each package's
``__all__`` and the command-line reference from the argument parser (private)."""

from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path
from typing import Any

#: The documented packages, in the order of the layers (mechanisms first).
PACKAGES = (
    "mechanisms",
    "hierarchy",
    "tables",
    "data",
    "postprocess",
    "bayes",
    "analysis",
    "decisions",
    "nmf",
    "plots",
    "report",
    "reproduce",
    "errors",
)


def _write(path: Path, text: str) -> None:
    """Write only when the text changed (Sphinx then rebuilds only what changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _title(text: str) -> str:
    return f"{text}\n{'=' * len(text)}\n"


#: The properties of an estimator shown in the API reference's table, in column order.
PROPERTIES = (
    "integral",
    "nonnegative",
    "random",
    "streams",
    "variances",
    "per_geounit",
    "alone",
)


def estimator_table() -> list[str]:
    """The registered estimators (:func:`postdp.postprocess.estimators`) as a table of
    their names, models, properties and summaries: generated, so it lists every record."""
    from postdp.postprocess import estimators

    head = ["name", "runs on", *(p.replace("_", " ") for p in PROPERTIES), "what it is"]
    lines = ["Registered estimators", "---------------------", "",
             "Every post-processing method, one record each (``postdp.postprocess.estimators()``"
             "); a name here is its only spelling in ``method=``, chains, ``--postprocess`` "
             "and ``--method``.", "", ".. list-table::", "   :header-rows: 1", ""]  # fmt: skip
    rows = [head] + [
        [f"``{e.name}``", ", ".join(e.models),
         *("yes" if getattr(e, p) else "" for p in PROPERTIES), e.summary]
        for e in estimators()
    ]  # fmt: skip
    for row in rows:
        lines += [f"   * - {row[0]}"] + [f"     - {cell}".rstrip() for cell in row[1:]]
    return [*lines, ""]


def api_pages(out: Path) -> None:
    """One page per package: its docstring, then every name of its ``__all__`` once (an
    object re-exported by a later package links to where it is documented)."""
    import postdp

    documented: dict[int, str] = {}
    index = [_title("API reference"), "", ".. toctree::", "   :maxdepth: 1", ""]
    for name in PACKAGES:
        module = importlib.import_module(f"postdp.{name}")
        lines = [_title(f"postdp.{name}"), f".. automodule:: postdp.{name}", "   :no-members:", ""]
        if name == "postprocess":
            lines += estimator_table()
        for item in sorted(getattr(module, "__all__", [])):
            obj = getattr(module, item)
            target = f"postdp.{name}.{item}"
            if id(obj) in documented:
                lines += [f"- ``{item}``: see :py:obj:`{documented[id(obj)]}`", ""]
                continue
            documented[id(obj)] = target
            if inspect.isclass(obj):
                kind = "exception" if issubclass(obj, BaseException) else "class"
                lines += [f".. auto{kind}:: {target}", "   :members:", ""]
            elif callable(obj):
                lines += [f".. autofunction:: {target}", ""]
            else:
                lines += [f".. autodata:: {target}", "   :annotation:", ""]
        _write(out / f"{name}.rst", "\n".join(lines))
        index.append(f"   {name}")
    top = [_title("postdp (top level)"), ".. automodule:: postdp", "   :no-members:", ""]
    top += ["The top-level names are shortcuts to these objects:", ""]
    for item in sorted(postdp.__all__):
        obj = getattr(postdp, item)
        if inspect.ismodule(obj):
            top.append(f"- ``postdp.{item}``: :doc:`{item}`" if item in PACKAGES else "")
        elif id(obj) in documented:
            top.append(f"- ``postdp.{item}``: :py:obj:`{documented[id(obj)]}`")
    _write(out / "postdp.rst", "\n".join([*top, ""]))
    index.insert(5, "   postdp")
    _write(out / "index.rst", "\n".join([*index, ""]))


def _usage(parser: argparse.ArgumentParser) -> str:
    return parser.format_help()


def cli_page(out: Path) -> None:
    """The ``--help`` of ``postdp`` and of every subcommand, verbatim from the parser."""
    from postdp.cli import build_parser

    parser = build_parser()
    lines = [
        _title("Command-line reference"),
        "Generated from the parser: this is what ``postdp COMMAND --help`` prints.",
        "",
        ".. code-block:: text",
        "",
    ]
    lines += ["   " + line for line in _usage(parser).splitlines()] + [""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        lines += [f"postdp {name}", "-" * len(f"postdp {name}"), "", ".. code-block:: text", ""]
        lines += ["   " + line for line in _usage(command).splitlines()] + [""]
    _write(out / "cli.rst", "\n".join(lines))


def generate(app: Any) -> None:
    """Write the generated pages into ``_generated`` of the source folder."""
    import os

    os.environ.setdefault("COLUMNS", "100")  # the parser's help is wrapped to this width
    out = Path(app.srcdir) / "_generated"
    api_pages(out / "api")
    cli_page(out)


def escape_bars(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Docstrings write absolute values as |x|, which reStructuredText would read as a
    substitution: escape the bars outside doctest lines and literal blocks."""
    literal = False
    for k, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith((">>>", "...")):
            continue
        if literal and stripped and not line.startswith(" "):
            literal = False
        if not literal and "|" in line:
            lines[k] = line.replace("|", "\\|")
        if stripped.endswith("::"):
            literal = True


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-docstring", escape_bars, priority=1000)
    return {"parallel_read_safe": True, "version": "1"}

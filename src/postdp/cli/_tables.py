"""Tables on the command line (private): reading a table, its workload, and the long and wide
forms of a release. Everything here runs before any noise is drawn, except ``long_form`` and
``wide_form``, which only arrange arrays already computed."""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from postdp.cli._common import mechanisms_for
from postdp.cli._io import read_table, read_text
from postdp.cli._options import _QUERY_HELP, BUNDLED_TABLES, CliError, flag


@dataclass(frozen=True)
class LoadedTable:
    """A table read and checked, with where it came from."""

    table: Any  # postdp.tables.Table (holds the true counts)
    paths: list[Path]
    sha256: str
    source: str


def load_table(args: argparse.Namespace) -> LoadedTable:
    """The bundled table or a wide CSV with its category tree, checked."""
    from postdp.hierarchy import Hierarchy
    from postdp.tables import Table

    if args.table is not None:
        if args.input is not None or args.categories is not None:
            raise CliError(f"--table {args.table}: give either --table or --input/--categories")
        from postdp.data import P1_TABLES, load_p1

        name = BUNDLED_TABLES[args.table]
        source = resources.files("postdp.data") / "_files" / P1_TABLES[name]
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        return LoadedTable(load_p1(name), [], digest, f"bundled:{args.table}")
    if args.input is None:
        raise CliError(f"--categories {args.categories!r}: needs the wide table as --input")
    tree, tree_path, tree_sha = read_table(args.categories, "--categories", args.encoding)
    for column in ("code", "parent"):
        if column not in tree.columns:
            raise CliError(f"--categories {args.categories!r}: needs a column {column!r}")
    with flag("--categories", args.categories):
        categories = Hierarchy.from_frame(tree, id="code", parent="parent", count=None)
    labels = dict(zip(tree["code"], tree["label"], strict=True)) if "label" in tree else {}
    frame, path, digest = read_table(args.input, "--input", args.encoding)
    for option in ("--id", "--parent"):
        if getattr(args, option[2:]) not in frame.columns:
            raise CliError(f"{option} {getattr(args, option[2:])!r}: no such column in --input")
    with flag("--input", args.input):
        geography = Hierarchy.from_frame(frame, id=args.id, parent=args.parent, count=None)
    named = getattr(args, "ignore_columns", None) or ""
    ignored = [c.strip() for c in named.split(",") if c.strip()]
    for column in ignored:
        if column not in frame.columns:
            raise CliError(f"--ignore-columns {args.ignore_columns!r}: no column {column!r}")
    known = {*(str(c) for c in categories.ids), args.id, args.parent, *ignored}
    unknown = [str(c) for c in frame.columns if str(c) not in known]
    if unknown:
        raise CliError(
            f"--input {args.input!r}: column {unknown[0]!r} is not a category of --categories "
            "(a mistyped code would drop its people from every total); name columns without "
            "counts in --ignore-columns"
        )
    with flag("--input", args.input):
        table = Table.from_wide(
            frame, geography, categories, id=args.id, labels=labels, ignore=[args.parent, *ignored]
        )
    combined = hashlib.sha256((digest + tree_sha).encode()).hexdigest()
    return LoadedTable(table, [path, tree_path], combined, str(path))


def workload(args: argparse.Namespace, table: Any) -> Any:
    """The workload from --design, or the detailed cells at every level from the flags."""
    from postdp.tables import Measurement, Query, Workload

    geo = table.geography
    if args.design is None:
        mechanisms = mechanisms_for(args, geo.n_levels)
        detailed = Query.detailed(table.categories)
        items = [Measurement(d, detailed, m) for d, m in enumerate(mechanisms)]
        if args.public is not None:
            if args.public != ["root"]:
                raise CliError(
                    f"--public {','.join(args.public)!r}: for a table, --public root keeps the "
                    "root's total; other invariants go in --design"
                )
            total = Query("total", [[str(table.categories.ids[table.categories.root])]])
            items.append(Measurement(0, total, None))
        with flag("--epsilon" if mechanisms[0].family == "laplace" else "--rho", "per level"):
            return Workload(items)
    if args.public is not None:
        raise CliError("--public: with --design, declare invariants in the design file")
    text, _, _ = read_text(args.design, "--design", "utf-8")
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--design {args.design!r}: not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    entries = spec.get("measurements") if isinstance(spec, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CliError(f"--design {args.design!r}: needs a non-empty list 'measurements'")
    items = []
    for k, entry in enumerate(entries, start=1):
        with flag("--design", f"{args.design} (measurement {k})"):
            items.append(_measurement(entry, table, geo.n_levels))
    with flag("--design", args.design):
        return Workload(items)


def _measurement(entry: Any, table: Any, n_levels: int) -> Any:
    from postdp.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace
    from postdp.tables import Measurement, Query

    if not isinstance(entry, dict):
        raise CliError("each measurement must be an object")
    known = {"level", "query", "public", "mechanism", "epsilon", "rho", "weight"}
    extra = sorted(set(entry) - known)
    if extra:
        raise CliError(f"unknown keys {', '.join(extra)} (known: {', '.join(sorted(known))})")
    level = entry.get("level")
    if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level < n_levels:
        raise CliError(f"'level' must be an integer from 0 to {n_levels - 1}; got {level!r}")
    raw = entry.get("query", "detailed")
    cat = table.categories
    if raw == "detailed":
        query = Query.detailed(cat)
    elif raw == "total":
        query = Query("total", [[str(cat.ids[cat.root])]])
    elif isinstance(raw, list) and raw and all(isinstance(c, str) for c in raw):
        query = Query.nodes(raw)
    elif isinstance(raw, dict) and isinstance(raw.get("groups"), list):
        query = Query(str(raw.get("name", "groups")), raw["groups"])
    else:
        raise CliError(f"'query' must be {_QUERY_HELP}; got {raw!r}")
    query.matrix(cat)  # unknown codes and overlapping groups fail here
    if entry.get("public", False) is True:
        if any(key in entry for key in ("mechanism", "epsilon", "rho")):
            raise CliError("a public query has no mechanism, epsilon or rho")
        return Measurement(level, query, None)
    name = entry.get("mechanism", "geometric")
    classes: dict[str, Any] = {
        "geometric": Geometric,
        "laplace": Laplace,
        "gaussian": Gaussian,
        "discrete-gaussian": DiscreteGaussian,
    }
    if name not in classes:
        raise CliError(f"'mechanism' must be one of {', '.join(classes)}; got {name!r}")
    key = "epsilon" if name in ("geometric", "laplace") else "rho"
    value = entry.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise CliError(f"mechanism {name} needs a number {key!r}; got {value!r}")
    weight = entry.get("weight")
    return Measurement(level, query, classes[name](**{key: float(value)}), weight=weight)


def check_steps(text: str) -> tuple[str | None, bool]:
    """The post-processing of a table release or audit (validated): the step or None, and
    whether ``round`` follows it (:func:`postdp.postprocess.parse_table_method`)."""
    from postdp.errors import ValidationError
    from postdp.postprocess import parse_table_method

    try:
        method = parse_table_method(text)
        return (None if method.step is None else method.step.name), method.rounded
    except ValidationError as exc:
        raise CliError(f"--postprocess {text!r}: {exc}") from None


def check_step_fits(
    args: argparse.Namespace,
    table: Any,
    work: Any,
    step: str | None,
    *,
    option: str = "--postprocess",
) -> None:
    """The post-processing's own checks of the workload, before anything is drawn: an error
    names ``option`` as typed (the workload itself was checked with its own flags)."""
    from postdp.postprocess import check_step

    if step is None:
        return
    with flag(option, getattr(args, option[2:].replace("-", "_"))):
        check_step(step, table, work)


def long_form(table: Any, measurements: Any, released: Any, *, secure: bool) -> Any:
    """One row per (geounit, category node): measured and released counts."""
    import pandas as pd

    frame = table.to_frame(name="noisy_count")
    noisy = np.full(table.shape, np.nan)
    cat = table.categories
    node_of = _category_nodes(cat)
    geo = table.geography
    for m, values in zip(measurements.workload.measurements, measurements.values, strict=True):
        A = m.query.matrix(cat)
        for g, row in enumerate(A):
            for node in node_of.get(frozenset(np.flatnonzero(row).tolist()), []):
                noisy[np.ix_(geo.levels[m.level], [node])] = values[:, g : g + 1]
    frame["noisy_count"] = pd.array(np.round(noisy.reshape(-1), 6), dtype="Float64")
    if released is not None:
        frame["released_count"] = np.asarray(released).reshape(-1)
    frame["path"] = "secure" if secure else "study"
    return frame


def wide_form(table: Any, measurements: Any, released: Any, *, secure: bool) -> Any:
    """One row per geounit, one column per category node."""
    if released is None:
        long = long_form(table, measurements, None, secure=secure)
        values = long["noisy_count"].to_numpy(dtype=float, na_value=np.nan).reshape(table.shape)
    else:
        values = np.asarray(released)
    frame = table.to_wide(values)
    frame["path"] = "secure" if secure else "study"
    return frame


def _category_nodes(cat: Any) -> dict[frozenset[int], list[int]]:
    """Detailed-cell set (as column positions) -> the category nodes with exactly those
    cells (a node with one child has the same cells as the child)."""
    from postdp.tables import category_matrix

    out: dict[frozenset[int], list[int]] = {}
    for node, row in enumerate(category_matrix(cat)):
        out.setdefault(frozenset(np.flatnonzero(row).tolist()), []).append(node)
    return out


def flag_design(args: argparse.Namespace) -> Any:
    """Errors of a table's design name --design as typed, or --epsilon/--rho (the detailed
    cells per level) when no design file was given."""
    return flag("--design" if args.design else "--epsilon/--rho", args.design or "per level")

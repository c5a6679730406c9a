"""``postdp audit``: bias, variance and error laws of a release design, by Monte Carlo."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postdp.cli._common import check_values, prepare, public_ids
from postdp.cli._io import RunState, check_output_dir
from postdp.cli._options import (
    CliError,
    add_mechanism_options,
    add_output_options,
    add_postprocess_options,
    add_table_flags,
    add_table_options,
    byte_size,
    check_weights,
    flag,
    ids,
    int_list,
    refuse_hierarchy_options,
    run_bars,
    table_solvers,
    typed,
    wants_table,
    whole,
)
from postdp.cli._report import add_report_option, check_report, print_written, write_study
from postdp.postprocess.estimators import PROJECT

__all__ = ["add_parser", "run"]

DESCRIPTION = f"""\
Run a release design (noise per level + post-processing chain) many times on the true
counts (the bundled 2010 counties by default, or a CSV) on the reproducible study path, and
write per-node error statistics (bias, variance, MSE, MAE with confidence intervals,
quantiles), the bias on shifted counts ([zhu2021] Fig. 4), the Wasserstein distance of the
errors to the Laplace noise by family size (Fig. 5), and figures, including error
histograms before and after post-processing for chosen nodes (Fig. 1).

With --table (or --input WIDE.csv --categories TREE.csv), audit a table design instead
(--postprocess one of {table_solvers()},
optionally ",round"): per (geounit,
category) bias, SE, RMSE and MAE (table_audit), a summary per level and category, the
Census Bureau's metrics by level and population size (table_metrics: MAE, RMSE, MAPE,
signed percent error, share over 10%, TVD, largest group within 5 points) and by diversity
quintile (table_diversity), and figures of errors against size and by diversity.

With --report FILE.html, also write one self-contained HTML page of the audit (design,
privacy statement, headline numbers with intervals, sortable and filterable tables, the
figures), for hierarchies and tables alike.

The folder is written under a temporary name and renamed into place when complete, with a
manifest (postdp-manifest.json) listing its files; an existing folder is replaced only with
--overwrite and only if postdp wrote it.
"""


def add_parser(commands: Any) -> None:
    """Register the ``audit`` subcommand."""
    parser = commands.add_parser(
        "audit",
        help="measure the bias, variance and error law of a release design by Monte Carlo",
        description=DESCRIPTION,
    )
    add_table_options(parser)
    add_mechanism_options(parser)
    add_postprocess_options(parser)
    parser.add_argument(
        "--draws", type=whole(2, 10**9), default=2000, help="number of simulated releases"
    )
    parser.add_argument(
        "--batch",
        type=whole(1, 10**9),
        default=1000,
        help="draws processed at once (bounds memory; results do not depend on it)",
    )
    parser.add_argument(
        "--workers",
        type=whole(1, 256),
        default=1,
        help="local processes (results do not depend on it)",
    )
    parser.add_argument(
        "--seed", type=whole(0, 2**63 - 1), default=0, help="seed of the whole simulation"
    )
    parser.add_argument(
        "--bins",
        type=whole(2, 100_000),
        default=400,
        help="histogram bins per node (quantiles and Wasserstein distances)",
    )
    parser.add_argument(
        "--max-memory",
        type=byte_size,
        default=768 << 20,
        metavar="SIZE",
        help="memory the statistics and batches may take, e.g. 512M or 2G; the batch (and for "
        "very large tables the bins) are cut to fit; a size that even the fewest bins and the "
        "smallest batch do not fit is refused. Default: 768M",
    )
    parser.add_argument(
        "--entities",
        type=ids,
        metavar="ID[,ID...]",
        help="nodes whose error histograms before/after post-processing are drawn (the three "
        "smallest leaves when not given)",
    )
    parser.add_argument(
        "--shifts",
        type=int_list(allow_empty=True),
        default=[0, 10, 100],
        metavar="S[,S...]",
        help="add these whole numbers to every leaf's true count and re-run (bias against "
        "the count); '' for none. Default: 0,10,100",
    )
    parser.add_argument(
        "--output-dir", default="audit", metavar="DIR", help="folder for the tables and figures"
    )
    parser.add_argument(
        "--format",
        default="csv",
        choices=["csv", "parquet"],
        help="table format (parquet needs pyarrow)",
    )
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    add_table_flags(parser, formats=False)
    add_report_option(parser)
    add_output_options(parser)
    parser.set_defaults(func=run)


def _check_extras(args: argparse.Namespace) -> None:
    if args.format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise CliError("--format 'parquet': needs pyarrow; pip install 'postdp[parquet]'")
    if not args.no_figures and importlib.util.find_spec("matplotlib") is None:
        raise CliError(
            "figures need matplotlib (pip install 'postdp[plots]'); or pass --no-figures"
        )


@dataclass
class _Subject:
    """What an audit needs of its input, hierarchy or table: the design, the input files
    (never overwritten), the audit's own options, and the parts of the output that differ by
    kind (the manifest, the report's sources, the closing summary, the memory estimate and
    the stream it goes to)."""

    design: Any
    inputs: list[Path]
    options: dict[str, Any]
    manifest: dict[str, Any]
    report_options: Callable[[Path], dict[str, Any]]
    summary: Callable[[Any], None]
    memory: str
    memory_stream: Any = None


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate everything, check the folder, simulate, then write the folder at once."""
    _check_extras(args)
    check_weights(args)
    if wants_table(args):
        refuse_hierarchy_options(args, "audit")
        subject = _table(args, state)
    else:
        subject = _hierarchy(args, state)
    out_dir = check_output_dir(
        args.output_dir, "--output-dir", inputs=subject.inputs, overwrite=args.overwrite
    )
    report_path = check_report(args, inputs=subject.inputs, folder=out_dir)
    print(subject.memory, file=subject.memory_stream or sys.stdout, flush=True)
    from postdp.report import audit

    state.phase = "simulating"
    with run_bars(state, quiet=args.quiet) as tick:
        audited = audit(
            subject.design,
            n_draws=args.draws,
            rng=args.seed,
            batch=args.batch,
            workers=args.workers,
            max_memory=args.max_memory,
            progress=tick,
            **subject.options,
        )
    shown = write_study(
        args,
        state,
        out_dir,
        report_path,
        audited,
        manifest=subject.manifest,
        report_options=subject.report_options(out_dir),  # no machine path on a shared page
    )
    subject.summary(audited)
    print_written(shown)
    return 0


def _hierarchy(args: argparse.Namespace, state: RunState) -> _Subject:
    """A hierarchy's design and audit options, every one checked before anything is drawn
    (the shifted counts, the entities, the memory the runs need)."""
    import numpy as np

    from postdp.analysis import ReleaseDesign, memory_plan

    loaded, mechanisms = prepare(args, state)
    h = loaded.hierarchy
    counts = h.counts
    for shift in args.shifts:  # checked here, before anything is drawn
        truth = h.aggregate(np.where(h.is_leaf, counts + shift, 0))
        check_values(h, mechanisms, truth, "--shifts")
    with flag("--postprocess", args.postprocess):
        design = ReleaseDesign(
            h, mechanisms, args.postprocess, public=public_ids(args, h), weights=args.weights
        )
    if args.entities:
        entities = args.entities
        with flag("--entities", ",".join(entities)):
            h.index(entities)
    else:
        smallest = h.leaves[np.argsort(counts[h.leaves], kind="stable")[:3]]
        entities = [str(h.ids[i]) for i in smallest]
    plan = memory_plan(
        h.n,
        bins=args.bins,
        n_draws=args.draws,
        batch=args.batch,
        workers=args.workers,
        max_memory=args.max_memory,
    )
    if not plan.fits:
        raise CliError(_over_memory(args, plan, h.n))
    note = "" if plan.bins == args.bins else f" (histograms cut to {plan.bins} bins to fit)"
    simulations = 1 + len([s for s in args.shifts if s])

    def summary(audited: Any) -> None:
        base = audited.result
        worst = int(np.argmax(np.abs(base.bias) / np.maximum(base.bias_se, 1e-300)))
        print(
            f"audited {h.n} nodes over {base.n_draws} draws (study path, seed {args.seed}); "
            f"design: {args.mechanism} noise, post-processing "
            f"{','.join(map(str, design.steps)) or 'none'}; budget {design.budget}"
        )
        print(
            f"largest |bias|/SE: node {h.ids[worst]!r}, bias {base.bias[worst]:.4g} "
            f"(SE {base.bias_se[worst]:.2g}); mean MSE {base.mse.mean():.4g}"
        )

    suffix = ".parquet" if args.format == "parquet" else ".csv"
    return _Subject(
        design,
        [loaded.path] if loaded.path is not None else [],
        {
            "shifts": args.shifts,
            "entities": entities,
            "bins": args.bins,
            "names": _names(loaded, args.id),
        },
        {
            "command": "postdp audit",
            "mechanism": args.mechanism,
            "budget": str(design.budget),
            "postprocess": args.postprocess,
            "draws": args.draws,
            "seed": args.seed,
            "input": "bundled" if loaded.bundled else str(loaded.path),
        },
        lambda out_dir: {"source": f"{out_dir.name}/audit{suffix}"},
        summary,
        f"memory: about {plan.peak_bytes / 2**20:,.0f} MB for the statistics and batches of "
        f"each of {simulations} simulations{note}",
    )


def _table(args: argparse.Namespace, state: RunState) -> _Subject:
    """A table's design (``--postprocess`` one step, optionally ``,round``) and audit
    options, checked before anything is drawn. The draws run through the same
    :func:`postdp.report.audit` and streaming engine as a hierarchy's, so the results
    depend on --seed alone (not on --batch or --workers) and memory is bounded by
    --max-memory."""
    import numpy as np

    from postdp.analysis import ReleaseDesign, memory_plan
    from postdp.cli._tables import (
        check_step_fits,
        check_steps,
        flag_design,
        load_table,
        workload,
    )

    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    step = step or PROJECT.name
    check_step_fits(args, table, work, step)
    with flag_design(args):
        design = ReleaseDesign(table, work, step + (",round" if rounded else ""))
    geo, cat = table.geography, table.categories
    plan = memory_plan(
        design,
        n_draws=args.draws,
        batch=args.batch,
        bins=args.bins,
        workers=args.workers,
        max_memory=args.max_memory,
    )
    if plan.peak_bytes > args.max_memory:
        raise CliError(
            f"--max-memory {args.max_memory}: a table audit of {geo.n:,} geounits x {cat.n} "
            f"categories needs about {plan.peak_bytes / 2**20:,.0f} MB"
        )

    def summary(audited: Any) -> None:
        result, cells, summary, by_size = (
            audited.result,
            audited.cells,
            audited.summary,
            audited.by_size,
        )
        z = np.abs(result.bias) / np.maximum(result.bias_se, 1e-300)
        worst = int(np.argmax(np.where(result.bias_se > 0, z, 0.0)))
        row = cells.iloc[worst]
        print(
            f"audited table {loaded.source}: {geo.n:,} geounits x {cat.n} categories over "
            f"{args.draws} draws (study path, seed {args.seed}); post-processing "
            f"{design.postprocess}; budget {work.budget}"
        )
        print(
            f"largest |bias|/SE: {row['geo_id']} {row['category']}, bias {row['bias']:.4g} "
            f"(SE {row['bias_se']:.2g})"
        )
        per_level = summary.groupby("level")["rmse"].apply(lambda r: float(np.sqrt((r**2).mean())))
        print("RMSE by level: " + ", ".join(f"{d}: {v:.4g}" for d, v in per_level.items()))
        small = by_size[by_size["level"] == by_size["level"].max()].iloc[0]
        print(
            f"smallest geounits at the deepest level ({small['size']} people): MAE "
            f"{small['mae']:.3g}, MAPE {small['mape']:.3g}%, mean TVD {small['tvd']:.3g}"
        )

    return _Subject(
        design,
        loaded.paths,
        {"bins": plan.bins},
        {
            "command": "postdp audit --table",
            "input": loaded.source,
            "budget": str(work.budget),
            "postprocess": design.postprocess,
            "draws": args.draws,
            "seed": args.seed,
        },
        lambda out_dir: {
            "table_name": Path(loaded.source).name,
            "source": f"{out_dir.name}/table_audit.csv",
        },
        summary,
        f"estimated memory: {plan.peak_bytes / 2**20:,.0f} MB ({geo.n:,} geounits x "
        f"{cat.n} categories, {args.workers} process(es))",
        sys.stderr,
    )


def _over_memory(args: argparse.Namespace, plan: Any, n: int) -> str:
    """The message for a --max-memory the audit cannot keep to, even with the fewest
    histogram bins and the smallest batch (it would be passed, not honoured)."""
    from postdp.analysis import memory_plan

    enough = args.max_memory
    while enough < 1 << 50:
        enough *= 2
        if memory_plan(
            n,
            bins=args.bins,
            n_draws=args.draws,
            batch=args.batch,
            workers=args.workers,
            max_memory=enough,
        ).fits:
            break
    return (
        f"{typed(args, '--max-memory')} {_typed_value(args, '--max-memory')}: too small for "
        f"an audit of {n:,} nodes, which needs about {plan.peak_bytes / 2**20:,.0f} MB "
        f"({plan.bins} histogram bins, the smallest batch); give e.g. --max-memory "
        f"{-(-enough // 2**20)}M"
    )


def _typed_value(args: argparse.Namespace, name: str) -> str:
    """The value of a flag as the user typed it (``--max-memory 1M`` or ``--max-memory=1M``)."""
    words = [str(w) for w in getattr(args, "_words", [])]
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return str(getattr(args, name.lstrip("-").replace("-", "_")))


def _names(loaded: Any, id_column: str) -> Any:
    """The nodes' display names when the input has a ``name`` column (the bundled counties
    do), in the hierarchy's node order; else None."""
    frame = loaded.frame
    if "name" not in frame.columns or id_column not in frame.columns:
        return None
    ids = frame[id_column].astype(str).str.strip()
    by_id = dict(zip(ids, frame["name"].astype(str), strict=True))
    return [by_id.get(str(i), str(i)) for i in loaded.hierarchy.ids]

"""``postdp plan``: the per-level split of a privacy budget that minimises (P)'s variance."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postdp.cli._io import RunState, check_output_file, read_table, write_atomic
from postdp.cli._options import (
    MECHANISMS,
    CliError,
    add_output_options,
    add_table_flags,
    encoding,
    flag,
    float_list,
    positive_float,
    progress,
    typed,
    whole,
)
from postdp.cli._plan_report import objective_name as _objective
from postdp.cli._plan_report import plan_report as _report
from postdp.cli._plan_report import unit_name as _unit
from postdp.cli._report import add_report_option, check_report, write_report
from postdp.postprocess.estimators import PROJECT_NONNEG

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Choose how to split a total privacy budget (epsilon, or rho for the Gaussian mechanisms)
across the levels of a hierarchy (the bundled nation > state > county tree by default, or
the id/parent columns of --input; counts are not read) so that a weighted sum of the levels'
mean (P) variances is smallest. The variances are exact (generalised least squares, computed
from the design alone), so planning costs no privacy. Prints the split, its objective
against the equal split (and against --compare), and writes one row per level to --output;
--report FILE.html adds a self-contained HTML page of the plan.
"""


def add_parser(commands: Any) -> None:
    """Register the ``plan`` subcommand."""
    parser = commands.add_parser(
        "plan",
        help="split a privacy budget across levels to minimise the (P) variance",
        description=DESCRIPTION,
    )
    parser.add_argument("--input", metavar="CSV", help="hierarchy (id and parent columns)")
    parser.add_argument("--id", default="id", metavar="COL", help="column of node ids")
    parser.add_argument("--parent", default="parent", metavar="COL", help="column of parents")
    parser.add_argument(
        "--count", metavar="COL", help="with --objective mae: column of counts (default count)"
    )
    parser.add_argument(
        "--encoding", type=encoding, default="utf-8", help="text encoding of --input"
    )
    parser.add_argument(
        "--total", type=positive_float, required=True, help="the budget to split (epsilon or rho)"
    )
    parser.add_argument("--mechanism", default="geometric", choices=MECHANISMS, help="noise")
    parser.add_argument(
        "--weights",
        type=float_list(positive=False),
        metavar="W[,W...]",
        help="weight of each level's mean variance, root first (only the deepest level when "
        "not given)",
    )
    parser.add_argument(
        "--public", choices=["root"], help="the root's count is an invariant (published exactly)"
    )
    parser.add_argument(
        "--compare",
        type=float_list(),
        metavar="B[,B...]",
        help="a split to evaluate too, root first; it must add up to --total (--frontier "
        "scales it to each of its totals)",
    )
    parser.add_argument("--output", "-o", default="plan.csv", metavar="CSV", help="the plan")
    parser.add_argument(
        "--frontier",
        type=float_list(),
        metavar="T[,T...]",
        help="also plan for these totals and write the objective against the total",
    )
    parser.add_argument(
        "--frontier-output",
        default="frontier.csv",
        metavar="CSV",
        help="where --frontier writes its table",
    )
    parser.add_argument(
        "--figure", metavar="PNG", help="with --frontier: draw it (png, svg or pdf; plots extra)"
    )
    parser.add_argument(
        "--objective",
        choices=["variance", "mae"],
        default="variance",
        help="variance: the exact (P) variance (default; counts not read); mae: the "
        "size-binned mean absolute error of --postprocess by Monte Carlo on the true counts "
        "(laplace or gaussian; a study: the plan then depends on the data)",
    )
    parser.add_argument(
        "--postprocess",
        metavar="STEP[,STEP...]",
        help="with --objective mae: the chain whose error is planned (default project-nonneg)",
    )
    parser.add_argument(
        "--draws",
        type=whole(10, 100_000),
        help="with --objective mae: common random draws (default 200)",
    )
    add_table_flags(parser, formats=False)
    add_report_option(parser)
    add_output_options(parser, quiet=False)
    parser.set_defaults(func=run)


@dataclass
class _Subject:
    """What a plan needs of its input, hierarchy or table: what is planned over (passed to
    the planners), its geography, the input files, the parts the budget is split over (the
    levels, or a table's measured queries) and how the options and the output name them."""

    over: Any
    geography: Any
    inputs: list[Path]
    n_parts: int
    parts: str  # "level (3), root first" or "measured query (3), in the order of ..."
    variance: dict[str, Any]  # options of plan_budget
    mae: dict[str, Any]  # options of plan_mae_budget
    probe: Callable[[Any], Any]  # the design of --postprocess with a given mechanism
    frame: Callable[[Any], Any]  # the plan's table (one row per part)
    heading: str  # "over 3 levels", "over 3 measured queries of SOURCE"
    about: tuple[str, str] | None = None  # a table's description on the report


def run(args: argparse.Namespace, state: RunState) -> int:
    """Check everything, plan, write the plan atomically."""
    _check_objective_options(args)
    table = args.table is not None or args.categories is not None or args.design is not None
    subject = _table(args, state) if table else _hierarchy(args, state)
    if args.objective == "mae" and args.mechanism not in ("laplace", "gaussian"):
        raise CliError(
            f"--mechanism {args.mechanism}: --objective mae needs continuous noise "
            "(laplace or gaussian)"
        )
    if args.objective == "mae" and args.frontier is not None:
        raise CliError("--frontier: plots the variance objective; leave out --objective mae")
    for option, values in (("--weights", args.weights), ("--compare", args.compare)):
        if values is not None and len(values) != subject.n_parts:
            shown = ",".join(f"{v:g}" for v in values)
            raise CliError(f"{option} {shown!r}: needs one value per {subject.parts}")
    if args.compare is not None and abs(sum(args.compare) - args.total) > 1e-9 * args.total:
        shown = ",".join(f"{v:g}" for v in args.compare)
        raise CliError(
            f"--compare {shown!r}: spends {sum(args.compare):.6g}, not --total "
            f"{args.total:g}; a split to compare must spend the same budget"
        )
    if args.weights is not None and (min(args.weights) < 0 or sum(args.weights) <= 0):
        shown = ",".join(f"{v:g}" for v in args.weights)
        raise CliError(f"--weights {shown!r}: must be nonnegative and not all zero")
    inputs = subject.inputs
    output = check_output_file(
        args.output, typed(args, "--output", "-o"), inputs=inputs, overwrite=args.overwrite
    )
    frontier_out = figure = None
    if args.figure is not None and args.frontier is None:
        raise CliError("--figure: draws the frontier; give --frontier totals too")
    if args.frontier is not None:
        frontier_out = check_output_file(
            args.frontier_output, "--frontier-output", inputs=inputs, overwrite=args.overwrite
        )
        if frontier_out == output:
            raise CliError(f"--frontier-output {args.frontier_output!r}: the same file as -o")
    if args.figure is not None:
        import importlib.util

        if Path(args.figure).suffix.lower() not in (".png", ".svg", ".pdf"):
            raise CliError(f"--figure {args.figure!r}: must end in .png, .svg or .pdf")
        if importlib.util.find_spec("matplotlib") is None:
            raise CliError("--figure: needs matplotlib (pip install 'postdp[plots]')")
        figure = check_output_file(args.figure, "--figure", inputs=inputs, overwrite=args.overwrite)
        if figure in (output, frontier_out):
            raise CliError(f"--figure {args.figure!r}: the same file as another output")
    outputs = [p for p in (output, frontier_out, figure) if p is not None]
    report_path = check_report(args, inputs=inputs, others=outputs)
    from postdp.analysis import plan_budget, plan_mae_budget

    if args.objective == "mae":
        from postdp.mechanisms import Gaussian, Laplace

        probe = Laplace(1.0) if args.mechanism == "laplace" else Gaussian(rho=1.0)
        with flag("--postprocess", args.postprocess):  # checked before any draw
            subject.probe(probe)
    state.phase = "planning"
    if args.objective == "mae":
        with (
            flag("--total", f"{args.total:g}"),
            progress("planning", None, quiet=False, unit="split") as bar,
        ):
            plan = plan_mae_budget(
                subject.over,
                args.postprocess,
                total=args.total,
                mechanism=args.mechanism,
                weights=args.weights,
                draws=args.draws,
                compare=args.compare,
                progress=bar.update,
                **subject.mae,
            )
    else:
        with flag("--total", f"{args.total:g}"):
            plan = plan_budget(
                subject.over,
                total=args.total,
                mechanism=args.mechanism,
                weights=args.weights,
                compare=args.compare,
                **subject.variance,
            )
    frontier = None
    if args.frontier is not None:
        from postdp.analysis import budget_frontier

        state.phase = "planning the frontier"
        with flag("--frontier", ",".join(f"{t:g}" for t in args.frontier)):
            frontier = budget_frontier(
                args.frontier,
                subject.over,
                mechanism=args.mechanism,
                weights=args.weights,
                compare=args.compare,
                **subject.variance,
            )
    table_out = subject.frame(plan)
    report = None
    if report_path is not None:
        report = _report(args, subject.geography, plan, table_out, frontier, subject.about)
    state.phase = f"writing {output}"
    write_atomic(output, lambda tmp: table_out.to_csv(tmp, index=False), overwrite=args.overwrite)
    state.written.append(str(output))
    if frontier is not None and frontier_out is not None:
        write_atomic(
            frontier_out,
            lambda tmp: frontier.to_csv(tmp, index=False),
            overwrite=args.overwrite,
        )
        state.written.append(str(frontier_out))
    if frontier is not None and figure is not None:
        from postdp.plots import plot_budget_frontier, save_figure

        ax = plot_budget_frontier(frontier)
        write_atomic(
            figure,
            lambda tmp: save_figure(ax, tmp, format=figure.suffix[1:]),
            overwrite=args.overwrite,
        )
        state.written.append(str(figure))
    write_report(report_path, report, state, overwrite=args.overwrite)
    out = sys.stdout
    print(
        f"split of {_unit(args)} = {args.total:g} {subject.heading} ({args.mechanism}):",
        file=out,
    )
    if subject.about is None:
        print("  " + ", ".join(f"level {d}: {s:.4g}" for d, s in enumerate(plan.shares)), file=out)
    else:
        for row in table_out.itertuples():
            print(f"  level {row.level} {row.query}: {row.budget:.4g} ({row.share:.1%})", file=out)
    ratio = plan.equal_objective / plan.objective if plan.objective > 0 else float("inf")
    print(
        f"{_objective(args)} {plan.objective:.4g}; equal split {plan.equal_objective:.4g}"
        f" ({ratio:.2f}x the plan)",
        file=out,
    )
    if plan.given_objective is not None:
        print(f"--compare split: {plan.given_objective:.4g}", file=out)
    print(plan.verdict(), file=out)
    if frontier is not None:
        for row in frontier.itertuples():
            print(
                f"  total {row.total:g}: planned {row.optimal:.4g}, equal split {row.equal:.4g}",
                file=out,
            )
    print(f"wrote {', '.join(state.written)}", file=out)
    return 0


def _hierarchy(args: argparse.Namespace, state: RunState) -> _Subject:
    """A hierarchy's levels (the bundled counties, or --input's id and parent columns; its
    counts too with --objective mae)."""
    from postdp.hierarchy import Hierarchy

    if args.ignore_columns is not None:
        raise CliError("--ignore-columns: applies to a table given as --input with --categories")
    state.phase = "reading the hierarchy"
    if args.input is None:
        from postdp.data import county_hierarchy

        h, inputs = county_hierarchy(), []
    else:
        frame, path, _ = read_table(args.input, "--input", args.encoding)
        for option in ("--id", "--parent"):
            if getattr(args, option[2:]) not in frame.columns:
                raise CliError(f"{option} {getattr(args, option[2:])!r}: no such column")
        count = args.count if args.objective == "mae" else None
        if count is not None and count not in frame.columns:
            raise CliError(f"--count {count!r}: no such column (--objective mae reads counts)")
        with flag("--input", args.input):
            h = Hierarchy.from_frame(frame, id=args.id, parent=args.parent, count=count)
        inputs = [path]
    public = None if args.public is None else [str(h.ids[h.root])]

    def probe(mechanism: Any) -> Any:
        from postdp.analysis import ReleaseDesign

        return ReleaseDesign(h, mechanism, args.postprocess, public=public)

    def frame_of(plan: Any) -> Any:
        out = plan.to_frame()
        out.insert(1, "nodes", [lvl.size for lvl in h.levels])
        return out

    L = h.n_levels
    return _Subject(
        h,
        h,
        inputs,
        L,
        f"level ({L}), root first",
        {"public_root": args.public == "root"},
        {"public": public},
        probe,
        frame_of,
        f"over {L} levels",
    )


def _table(args: argparse.Namespace, state: RunState) -> _Subject:
    """A table's measured queries: the detailed cells at every level (with --public root,
    the root's total held exactly), or the noisy measurements of --design."""
    from postdp.cli._tables import load_table, workload
    from postdp.mechanisms import Geometric
    from postdp.tables import Measurement, Query, Workload

    given = {"--frontier": args.frontier, "--figure": args.figure}
    option = next((o for o, value in given.items() if value), None)
    if option is not None:
        raise CliError(f"{option}: draws a hierarchy's frontier; not for a table")
    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    if args.design is not None:
        queries: Any = workload(args, table)
        noisy = [(m.level, m.query) for m in queries.measurements if not m.public]
    else:
        detailed = Query.detailed(table.categories)
        noisy = [(d, detailed) for d in range(table.geography.n_levels)]
        queries = noisy
        if args.public == "root":
            root = str(table.categories.ids[table.categories.root])
            items = [Measurement(d, q, Geometric(1.0)) for d, q in noisy]
            queries = Workload([*items, Measurement(0, Query("total", [[root]]), None)])
    public = [(m.level, m.query) for m in getattr(queries, "measurements", []) if m.public]

    def probe(mechanism: Any) -> Any:
        from postdp.analysis import ReleaseDesign

        work = Workload([*(Measurement(d, q, mechanism) for d, q in noisy),
                         *(Measurement(d, q, None) for d, q in public)])  # fmt: skip
        return ReleaseDesign(table, work, args.postprocess)

    def frame_of(plan: Any) -> Any:
        out = plan.to_frame()
        out["level"] = [d for d, _ in noisy]
        out.insert(1, "query", [q.name for _, q in noisy])
        out.insert(2, "geounits", [table.geography.levels[d].size for d, _ in noisy])
        return out

    geo = table.geography
    return _Subject(
        table,
        geo,
        loaded.paths,
        len(noisy),
        f"measured query ({len(noisy)}), in the order of the levels (root first) and of --design",
        {"queries": queries},
        {"public": public, "queries": noisy},
        probe,
        frame_of,
        f"over {len(noisy)} measured queries of {loaded.source}",
        (
            f"{loaded.source}: {geo.n:,} geounits in {geo.n_levels} levels x "
            f"{table.categories.n} categories",
            f"the {len(noisy)} measured queries of table {loaded.source}",
        ),
    )


def _check_objective_options(args: argparse.Namespace) -> None:
    """Options of the Monte Carlo objective are refused with the exact one (not ignored);
    the defaults of the Monte Carlo objective are filled in."""
    if args.objective == "variance":
        for option, value in (
            ("--postprocess", args.postprocess),
            ("--draws", args.draws),
            ("--count", args.count),
        ):
            if value is not None:
                raise CliError(
                    f"{option} {value!r}: applies to --objective mae only; the variance "
                    "objective is the exact (P) variance, which reads no counts, draws no "
                    "noise and has no post-processing chain to choose"
                )
        return
    args.postprocess = PROJECT_NONNEG.name if args.postprocess is None else args.postprocess
    args.draws = 200 if args.draws is None else args.draws
    args.count = "count" if args.count is None else args.count

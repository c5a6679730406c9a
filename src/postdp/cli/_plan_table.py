"""``postdp plan`` of a table (private): the split over its measured queries."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from postdp.cli._io import RunState, check_output_file, write_atomic
from postdp.cli._options import CliError, flag, typed
from postdp.cli._plan_report import objective_name, plan_report, unit_name
from postdp.cli._report import check_report, write_report

__all__ = ["run_table"]


def run_table(args: argparse.Namespace, state: RunState) -> int:
    """Plan a table: the split over its measured (level, query) pairs that minimises the
    weighted mean exact (P) variance, or with --objective mae the size-binned MAE of
    --postprocess by Monte Carlo (the detailed cells at every level, or --design)."""
    from postdp.analysis import plan_budget, plan_mae_budget
    from postdp.cli._tables import load_table, workload
    from postdp.mechanisms import Geometric
    from postdp.tables import Measurement, Query, Workload

    given = {"--frontier": args.frontier, "--figure": args.figure}
    option = next((o for o, value in given.items() if value), None)
    if option is not None:
        raise CliError(f"{option}: draws a hierarchy's frontier; not for a table")
    mae = args.objective == "mae"
    if mae and args.mechanism not in ("laplace", "gaussian"):
        raise CliError(
            f"--mechanism {args.mechanism}: --objective mae needs continuous noise (laplace or "
            "gaussian)"
        )
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
    for option, values in (("--weights", args.weights), ("--compare", args.compare)):
        if values is not None and len(values) != len(noisy):
            shown = ",".join(f"{v:g}" for v in values)
            raise CliError(
                f"{option} {shown!r}: needs one value per measured query ({len(noisy)}), in "
                "the order of the levels (root first) and of --design"
            )
    if args.compare is not None and abs(sum(args.compare) - args.total) > 1e-9 * args.total:
        raise CliError(f"--compare: spends {sum(args.compare):.6g}, not --total {args.total:g}")
    output = check_output_file(
        args.output, typed(args, "--output", "-o"), inputs=loaded.paths, overwrite=args.overwrite
    )
    report_path = check_report(args, inputs=loaded.paths, others=[output])
    public = [(m.level, m.query) for m in getattr(queries, "measurements", []) if m.public]
    if mae:
        from postdp.analysis import TableDesign
        from postdp.mechanisms import Gaussian, Laplace

        probe = Laplace(1.0) if args.mechanism == "laplace" else Gaussian(rho=1.0)
        work = Workload([*(Measurement(d, q, probe) for d, q in noisy),
                         *(Measurement(d, q, None) for d, q in public)])  # fmt: skip
        with flag("--postprocess", args.postprocess):  # checked before any draw
            TableDesign(table, work, args.postprocess)
    state.phase = "planning"
    if mae:
        from postdp.cli._options import progress

        with (
            flag("--total", f"{args.total:g}"),
            progress("planning", None, quiet=False, unit="split") as bar,
        ):
            plan = plan_mae_budget(
                table,
                args.postprocess,
                total=args.total,
                mechanism=args.mechanism,
                weights=args.weights,
                public=public,
                queries=noisy,
                draws=args.draws,
                compare=args.compare,
                progress=bar.update,
            )
    else:
        with flag("--total", f"{args.total:g}"):
            plan = plan_budget(
                table,
                total=args.total,
                mechanism=args.mechanism,
                weights=args.weights,
                queries=queries,
                compare=args.compare,
            )
    frame = plan.to_frame()
    frame["level"] = [d for d, _ in noisy]
    frame.insert(1, "query", [q.name for _, q in noisy])
    frame.insert(2, "geounits", [table.geography.levels[d].size for d, _ in noisy])
    geo = table.geography
    about = (
        f"{loaded.source}: {geo.n:,} geounits in {geo.n_levels} levels x "
        f"{table.categories.n} categories",
        f"the {len(noisy)} measured queries of table {loaded.source}",
    )
    report = None if report_path is None else plan_report(args, geo, plan, frame, None, about)
    state.phase = f"writing {output}"
    write_atomic(output, lambda tmp: frame.to_csv(tmp, index=False), overwrite=args.overwrite)
    state.written.append(str(output))
    write_report(report_path, report, state, overwrite=args.overwrite)
    out = sys.stdout
    print(
        f"split of {unit_name(args)} = {args.total:g} over {len(noisy)} measured queries "
        f"of {loaded.source} ({args.mechanism}):",
        file=out,
    )
    for row in frame.itertuples():
        print(f"  level {row.level} {row.query}: {row.budget:.4g} ({row.share:.1%})", file=out)
    ratio = plan.equal_objective / plan.objective if plan.objective > 0 else float("inf")
    what = objective_name(args)
    print(
        f"{what} {plan.objective:.4g}; equal split {plan.equal_objective:.4g} "
        f"({ratio:.2f}x the plan)",
        file=out,
    )
    print(plan.verdict(), file=out)
    print(f"wrote {', '.join(state.written)}", file=out)
    return 0

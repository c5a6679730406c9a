"""``postdp audit --table``: the errors of a table release design by Monte Carlo (private;
called by :mod:`postdp.cli.audit`). Study path only. The draws run through
:func:`postdp.simulate` on a :class:`postdp.analysis.TableDesign`: the same streaming engine
as a hierarchy's audit, so the results depend on --seed alone (not on --batch or
--workers) and memory is bounded by --max-memory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from postdp.cli._io import RunState, check_output_dir
from postdp.cli._options import CliError, progress
from postdp.cli._release_table import flag_design
from postdp.cli._report import check_report, print_written, write_study
from postdp.cli._tables import check_step_fits, check_steps, load_table, workload
from postdp.postprocess.estimators import PROJECT


def run_table_audit(args: argparse.Namespace, state: RunState) -> int:
    """Check, simulate ``--draws`` releases of the table design, write errors and metrics."""
    from postdp.analysis import TableDesign, memory_plan

    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    step = step or PROJECT.name
    check_step_fits(args, table, work, step)
    with flag_design(args):
        design = TableDesign(table, work, step + (",round" if rounded else ""))
    out_dir = check_output_dir(
        args.output_dir, "--output-dir", inputs=loaded.paths, overwrite=args.overwrite
    )
    report_path = check_report(args, inputs=loaded.paths, folder=out_dir)
    geo, cat = table.geography, table.categories
    plan = memory_plan(
        design,
        n_draws=args.draws,
        batch=args.batch,
        bins=args.bins,
        workers=args.workers,
        max_memory=args.max_memory,
    )
    bins, estimate, solve_bytes = plan.bins, plan.peak_bytes - plan.solve_bytes, plan.solve_bytes
    if estimate + solve_bytes > args.max_memory:
        raise CliError(
            f"--max-memory {args.max_memory}: a table audit of {geo.n:,} geounits x {cat.n} "
            f"categories needs about {(estimate + solve_bytes) / 2**20:,.0f} MB"
        )
    print(
        f"estimated memory: {(estimate + solve_bytes) / 2**20:,.0f} MB ({geo.n:,} geounits x "
        f"{cat.n} categories, {args.workers} process(es))",
        file=sys.stderr,
    )
    from postdp.report import TableAudit, audit

    state.phase = "simulating"
    with progress("audit", 1, quiet=args.quiet) as bar:

        def tick(label: str, done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        audited = audit(
            design,
            n_draws=args.draws,
            batch=args.batch,
            workers=args.workers,
            rng=args.seed,
            bins=bins,
            progress=tick,
            max_memory=args.max_memory,
        )
    assert isinstance(audited, TableAudit)
    result, cells, summary = audited.result, audited.cells, audited.summary
    by_size = audited.by_size
    shown = write_study(
        args,
        state,
        out_dir,
        report_path,
        audited,
        manifest={
            "command": "postdp audit --table",
            "input": loaded.source,
            "budget": str(work.budget),
            "postprocess": design.postprocess,
            "draws": args.draws,
            "seed": args.seed,
        },
        report_options={  # no machine path on a shared page
            "source": Path(loaded.source).name,
            "cells_source": f"{out_dir.name}/table_audit.csv",
        },
    )
    mean, se = result.bias, result.bias_se
    z = np.abs(mean) / np.maximum(se, 1e-300)
    worst = int(np.argmax(np.where(se > 0, z, 0.0)))
    row = cells.iloc[worst]
    print(
        f"audited table {loaded.source}: {geo.n:,} geounits x {cat.n} categories over "
        f"{args.draws} draws (study path, seed {args.seed}); post-processing "
        f"{design.postprocess}; "
        f"budget {work.budget}"
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
    print_written(shown)
    return 0

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

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import CliError, progress
from postdp.cli._release_table import flag_design
from postdp.cli._report import check_report, figures_from, write_report
from postdp.cli._tables import check_steps, load_table, workload


def run_table_audit(args: argparse.Namespace, state: RunState) -> int:
    """Check, simulate ``--draws`` releases of the table design, write errors and metrics."""
    from postdp.analysis import TableDesign, memory_plan
    from postdp.cli._report import command_line
    from postdp.plots import save_figure
    from postdp.report.table_auditing import CAPTIONS

    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    step = step or "project"
    with flag_design(args):
        design = TableDesign(table, work, step + (",round" if rounded else ""))
    out_dir = check_output_dir(
        args.output_dir, "--output-dir", inputs=loaded.paths, overwrite=args.overwrite
    )
    report_path = check_report(args, inputs=loaded.paths, folder=out_dir)
    figures = not args.no_figures
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
    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state, overwrite=args.overwrite)
    try:
        suffix = ".parquet" if args.format == "parquet" else ".csv"
        for name, frame in audited.tables().items():
            path = folder.file(name + suffix)
            if suffix == ".parquet":
                frame.to_parquet(path, index=False)
            else:
                frame.to_csv(path, index=False)
        drawn = []
        if figures:
            for name, ax in audited.figures().items():
                drawn.append(f"{name}.png")
                save_figure(ax, folder.file(drawn[-1]))
        report = None
        if report_path is not None:
            report = audited.report(
                figures=figures_from(folder.tmp, drawn, CAPTIONS),
                source=Path(loaded.source).name,  # no machine path on a shared page
                command=command_line(args),
                cells_source=f"{folder.path.name}/table_audit.csv",
            )
        written = folder.commit(
            {
                "command": "postdp audit --table",
                "input": loaded.source,
                "budget": str(work.budget()),
                "postprocess": design.postprocess,
                "draws": args.draws,
                "seed": args.seed,
            }
        )
    except BaseException:
        folder.discard()
        raise
    state.written = [str(out_dir)]
    write_report(report_path, report, state, overwrite=args.overwrite)
    mean, se = result.bias, result.bias_se
    z = np.abs(mean) / np.maximum(se, 1e-300)
    worst = int(np.argmax(np.where(se > 0, z, 0.0)))
    row = cells.iloc[worst]
    print(
        f"audited table {loaded.source}: {geo.n:,} geounits x {cat.n} categories over "
        f"{args.draws} draws (study path, seed {args.seed}); post-processing "
        f"{design.postprocess}; "
        f"budget {work.budget()}"
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
    shown = [*written, *([report_path] if report_path is not None else [])]
    print("wrote: " + ", ".join(str(p) for p in shown))
    return 0

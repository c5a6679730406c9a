"""``postdp audit --table``: the errors of a table release design by Monte Carlo (private;
called by :mod:`postdp.cli.audit`). Study path only. The draws run through
:func:`postdp.simulate` on a :class:`postdp.analysis.TableDesign`: the same streaming engine
as a hierarchy's audit, so the results depend on --seed alone (not on --batch or
--workers) and memory is bounded by --max-memory."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import CliError, progress
from postdp.cli._release_table import flag_design
from postdp.cli._report import check_report, figures_from, write_report
from postdp.cli._tables import check_steps, load_table, workload


def run_table_audit(args: argparse.Namespace, state: RunState) -> int:
    """Check, simulate ``--draws`` releases of the table design, write errors and metrics."""
    from postdp.analysis import TableDesign, memory_plan, simulate

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
    state.phase = "simulating"
    with progress("audit", 1, quiet=args.quiet) as bar:

        def tick(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        result = simulate(
            design,
            n_draws=args.draws,
            batch=args.batch,
            workers=args.workers,
            rng=args.seed,
            bins=bins,
            progress=tick,
            max_memory=args.max_memory,
        )
    cells = design.frame(result)
    cells.insert(3, "label", np.tile([table.labels.get(str(c), "") for c in cat.ids], geo.n))
    cells["bias_se"] = result.bias_se
    cells["rmse"] = np.sqrt(result.mse)
    summary = cells.groupby(["level", "category", "label"], as_index=False, sort=False).agg(
        geounits=("geo_id", "size"),
        mean_abs_bias=("bias", lambda b: b.abs().mean()),
        rmse=("rmse", lambda r: float(np.sqrt((r**2).mean()))),
        mae=("mae", "mean"),
    )
    by_size, by_diversity = design.metrics(result)
    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state, overwrite=args.overwrite)
    try:
        suffix = ".parquet" if args.format == "parquet" else ".csv"
        for name, frame in (
            ("table_audit", cells),
            ("table_summary", summary),
            ("table_metrics", by_size),
            ("table_diversity", by_diversity),
        ):
            path = folder.file(name + suffix)
            if suffix == ".parquet":
                frame.to_parquet(path, index=False)
            else:
                frame.to_csv(path, index=False)
        drawn = _figures(folder, design, result, by_size, by_diversity) if figures else []
        report = None
        if report_path is not None:
            pieces = (cells, summary, by_size, by_diversity)
            report = _report(args, loaded.source, design, work, result, pieces, folder, drawn)
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


def _figures(
    folder: OutputDir, design: Any, result: Any, by_size: Any, by_diversity: Any
) -> list[str]:
    """The audit's figures: each geounit's total-population error against its size, per
    level, and the signed error by diversity quintile; returns their file names."""
    from postdp.plots import plot_diversity_errors, plot_errors_by_size, save_figure

    names = ["errors_by_size.png"]
    save_figure(plot_errors_by_size(result, by_size, design.table), folder.file(names[0]))
    if len(by_diversity):
        names.append("diversity_errors.png")
        save_figure(plot_diversity_errors(by_diversity), folder.file(names[1]))
    return names


_CAPTIONS = {
    "errors": (
        "Error of each geounit's total against its size, by level",
        "Absolute error of the released total population of every geounit against its true "
        "size, one panel per geographic level, with the size-bin means.",
        "Each point is a geounit's mean absolute error over the simulated releases; the line "
        "is the mean per size bin (table_metrics). Post-processing errors are relatively "
        "largest in small geounits. With n draws each point is itself known to about "
        "1.96·sd/√n.",
    ),
    "diversity": (
        "Signed error by diversity quintile",
        "Mean signed error of the released counts by quintile of the geounits' diversity.",
        "Nonnegativity moves counts from common categories to rare ones, so diverse and "
        "homogeneous geounits are biased in opposite directions. The bars are means of "
        "Monte Carlo estimates; their error bars are ±1.96 SE where drawn.",
    ),
}


def _report(
    args: argparse.Namespace,
    source: str,
    design: Any,
    work: Any,
    result: Any,
    pieces: tuple[Any, Any, Any, Any],
    folder: OutputDir,
    drawn: list[str],
) -> Any:
    """The table audit's HTML report (built before the folder is moved into place)."""
    from postdp.cli._report import command_line
    from postdp.report import Headline, Report, ReportTable, budget_statement, format_value

    cells, summary, by_size, by_diversity = pieces
    geo, cat = design.table.geography, design.table.categories
    z = np.abs(result.bias) / np.maximum(result.bias_se, 1e-300)
    z = np.where(result.bias_se > 0, z, 0.0)
    order = np.argsort(-z, kind="stable")
    worst = cells.iloc[int(order[0])]
    floor = 1.96 * float(np.median(result.bias_se))
    deepest = by_size[by_size["level"] == by_size["level"].max()].iloc[0]
    public = [f"{m.query.name} at level {m.level}" for m in work.measurements if m.public]
    names = (cells["geo_id"].astype(str) + ", " + cells["label"].astype(str)).to_numpy()
    verdict = str(result.bias_verdict(names=names)).split(": ", 1)
    headline = [
        Headline("verdict", verdict[0], verdict[-1]),
        Headline(
            "largest |bias| / SE",
            f"{format_value(float(worst['bias']))} at {worst['geo_id']} {worst['category']}",
            f"95% interval ± {1.96 * float(worst['bias_se']):.3g}; |bias|/SE = {z[order[0]]:.3g}",
        ),
        Headline(
            "Monte Carlo floor of a bias",
            f"± {format_value(floor)}",
            f"1.96 × the median SE over {args.draws:,} draws",
        ),
        Headline(
            "cells with a significant bias",
            f"{int((z > 1.96).sum()):,} of {z.size:,}",
            "|bias| > 1.96 SE; about 5% are expected by chance when there is no bias",
        ),
        Headline(
            f"smallest geounits at level {deepest['level']} ({deepest['size']} people)",
            f"MAE {deepest['mae']:.3g}",
            f"MAPE {deepest['mape']:.3g}%, mean TVD {deepest['tvd']:.3g}",
        ),
    ]
    tables = [
        ReportTable(
            "Errors by level and size (Census Bureau metrics)",
            by_size,
            "Per geographic level and population-size bin: MAE, RMSE, MAPE, signed percent "
            "error, share over 10%, TVD and agreement of the largest group.",
        ),
        ReportTable(
            "Budget by level and query", work.cost_frame(), "Each measurement and its cost."
        ),
        ReportTable("Errors by level and category", summary, "Mean |bias|, RMSE and MAE."),
        ReportTable(
            "Cells",
            cells.iloc[order].reset_index(drop=True),
            "One row per (geounit, category), the largest |bias|/SE first.",
            source=str(folder.path / "table_audit.csv"),
        ),
    ]
    if len(by_diversity):
        tables.insert(2, ReportTable("Errors by diversity", by_diversity, ""))
    return Report(
        title="Audit of a table release design",
        summary=(
            f"{args.draws:,} simulated releases of table {source}: {geo.n:,} geounits x "
            f"{cat.n} categories, post-processing {design.postprocess}."
        ),
        design={
            "table": f"{source}: {geo.n:,} geounits in {geo.n_levels} levels, {cat.n} categories",
            "measurements": f"{len(work.measurements)} (see the budget table)",
            "budget": str(work.budget()),
            "post-processing": design.postprocess,
            "draws": f"{args.draws:,}",
        },
        privacy=budget_statement(work.budget(), published=False, public=public),
        headline=headline,
        tables=tables,
        figures=figures_from(folder.tmp, drawn, _CAPTIONS),
        notes=(
            "Biases and errors are Monte Carlo estimates with standard errors; a bias within "
            "the floor above is not distinguishable from zero at this number of draws.",
            "The size bins and metrics follow the Census Bureau's published error metrics "
            "for the 2020 redistricting data.",
        ),
        command=command_line(args),
    )

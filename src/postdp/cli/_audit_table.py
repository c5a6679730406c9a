"""``postdp audit --table``: the errors of a table release design by Monte Carlo (private;
called by :mod:`postdp.cli.audit`). Study path only: the draws come from numpy, in blocks of
``BLOCK`` draws each with its own seed spawned from --seed, so the results do not depend on
--batch or --workers (which a table audit does not use); memory is one block plus the
running sums, checked against --max-memory before anything is drawn."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import CliError, progress
from postdp.cli._release_table import flag_design
from postdp.cli._tables import TableSolver, check_steps, load_table, workload

#: Draws per block; each block has its own seed, so results depend on --seed alone.
BLOCK = 4


def run_table_audit(args: argparse.Namespace, state: RunState) -> int:
    """Check, simulate ``--draws`` releases of the table design, write per-cell errors."""
    from postdp._moments import Accumulator
    from postdp.analysis import table_error_metrics
    from postdp.tables import expand, measure

    if args.format == "parquet":
        raise CliError("--format 'parquet': table audits write CSV")
    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    step = step or "project"
    solve = TableSolver(table, work, step, rounded, flag_design(args))
    out_dir = check_output_dir(
        args.output_dir, "--output-dir", inputs=loaded.paths, overwrite=args.overwrite
    )
    geo, cat = table.geography, table.categories
    per_draw = geo.n * cat.n * 8 * 12  # the arrays one draw needs while it is solved
    n_blocks = -(-args.draws // BLOCK)
    estimate = BLOCK * per_draw + 3 * geo.n * cat.n * 8  # a block + the running sums
    if estimate > args.max_memory:
        raise CliError(
            f"--max-memory {args.max_memory}: a table audit of {geo.n:,} geounits x {cat.n} "
            f"categories needs about {estimate / 2**20:,.0f} MB"
        )
    print(
        f"estimated memory: {estimate / 2**20:,.0f} MB ({BLOCK} draws at a time, "
        f"{geo.n:,} geounits x {cat.n} categories)",
        file=sys.stderr,
    )
    seeds = np.random.SeedSequence(args.seed).spawn(n_blocks)
    truth = table.counts().astype(float).reshape(-1)
    acc = Accumulator()
    state.phase = "simulating"
    bar = progress("draws", args.draws, quiet=args.quiet)
    done = 0
    metric_parts: list[tuple[int, Any, Any]] = []
    for seed in seeds:
        size = min(BLOCK, args.draws - done)
        draws = measure(table, work, secure=False, rng=seed, size=size)
        detailed = solve(draws, seed.spawn(1)[0])
        full = expand(detailed[..., geo.leaves, :], geo, cat)
        acc.add(full.reshape(size, -1) - truth)
        metric_parts.append((size, *table_error_metrics(detailed, table)))
        done += size
        bar.update(size)
    bar.close()
    mean, se, mae = acc.mean_and_se()
    assert acc.total is not None
    rmse = np.sqrt(acc.total["s2"] / acc.count)
    cells = table.to_frame(name="truth")
    cells["bias"] = mean
    cells["bias_se"] = se
    cells["rmse"] = rmse
    cells["mae"] = mae
    summary = cells.groupby(["level", "category", "label"], as_index=False, sort=False).agg(
        geounits=("geo_id", "size"),
        mean_abs_bias=("bias", lambda b: b.abs().mean()),
        rmse=("rmse", lambda r: float(np.sqrt((r**2).mean()))),
        mae=("mae", "mean"),
    )
    by_size, by_diversity = _combine(metric_parts)
    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state)
    try:
        cells.to_csv(folder.file("table_audit.csv"), index=False)
        summary.to_csv(folder.file("table_summary.csv"), index=False)
        by_size.to_csv(folder.file("table_metrics.csv"), index=False)
        by_diversity.to_csv(folder.file("table_diversity.csv"), index=False)
        written = folder.commit(
            {
                "command": "postdp audit --table",
                "input": loaded.source,
                "budget": str(work.budget()),
                "postprocess": step,
                "draws": args.draws,
                "seed": args.seed,
            }
        )
    except BaseException:
        folder.discard()
        raise
    state.written = [str(out_dir)]
    z = np.abs(mean) / np.maximum(se, 1e-300)
    worst = int(np.argmax(np.where(se > 0, z, 0.0)))
    row = cells.iloc[worst]
    print(
        f"audited table {loaded.source}: {geo.n:,} geounits x {cat.n} categories over "
        f"{args.draws} draws (study path, seed {args.seed}); post-processing {step}; "
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
    print("wrote: " + ", ".join(str(p) for p in written))
    return 0


def _combine(parts: list[tuple[int, Any, Any]]) -> tuple[Any, Any]:
    """Average the per-block metrics over all draws (RMSE through its square)."""
    import pandas as pd

    out = []
    diversity_keys = ["level", "quintile", "geounits", "blau_low", "blau_high"]
    for which, keys in ((1, ["level", "size", "geounits"]), (2, diversity_keys)):
        frames = []
        for size, *tables in parts:
            frame = tables[which - 1].copy()
            if "rmse" in frame:
                frame["rmse"] = frame["rmse"] ** 2
            frame["_draws"] = size
            frames.append(frame)
        stacked = pd.concat(frames, ignore_index=True)
        values = [c for c in stacked.columns if c not in (*keys, "_draws")]
        weighted = stacked[values].mul(stacked["_draws"], axis=0)
        weighted[keys] = stacked[keys]
        weighted["_draws"] = stacked["_draws"]
        total = weighted.groupby(keys, sort=False, as_index=False).sum(min_count=1)
        total[values] = total[values].div(total["_draws"], axis=0)
        if "rmse" in total:
            total["rmse"] = total["rmse"] ** 0.5
        out.append(total.drop(columns="_draws"))
    return out[0], out[1]

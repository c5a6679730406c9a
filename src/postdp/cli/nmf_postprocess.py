"""``postdp postprocess``: estimate every geounit's histogram from a run of noisy
measurement files (no privacy cost), partition by partition, resumable."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from postdp.cli import _dask
from postdp.cli._io import RunState
from postdp.cli._options import CliError, flag, progress, whole

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Post-process a run of noisy measurement files (written by `postdp measure`, by
postdp.nmf.write, or published by the Census Bureau) into every geounit's detailed
histogram. Costs no privacy: it reads only the noisy measurements.

--method: one of the table estimators below, each optionally followed by ",round"
(seeded by --seed; without --seed a seed is drawn from the operating system's entropy and
recorded in OUT/postdp-postprocess.json, and a resume reuses it):

{methods}

Writes, for every geolevel, the wide form OUT/wide/<Geolevel>.parquet/NNN/part-0.parquet
(geocode, total, one column per cell: every cell of every geounit; NNN the subtree's code,
the folder named without the run's State= so that pandas.read_parquet of a level's folder
reads geocode as the string it is and adds no partition column) and, for an integral
method ({integral}, any step with ',round'), the long form OUT/long/... (geocode,
category, estimate; the cells of estimate 0 left out: a cell not listed is 0). A
real-valued method writes no long form: its wide form holds every cell. One partition
for the nation and the states and one per state subtree,
each file written under a temporary name and renamed into place; OUT/postdp-manifest.json
(every file's SHA-256) is written last.

Margins of error ("moe") are 90%: 1.645 standard errors. A method with known variances
({variances}) adds its exact ones (from the design alone, no privacy cost): OUT/moe/...
in the wide form's partitions (geocode and
<variable>_moe for every row of the P.L. 94-171 tables over the run's schema: P1_001N_moe ...
P5_010N_moe for a persons run, H1_001N_moe ... for a units run; each row's variance from its
cells' covariances; 0 for an invariant), and OUT/std_dev/... (geocode, query_name,
query_shape, std_dev: the standard deviations of every measured marginal, a row per geounit
and query, in the measurement files' layout). An integral method gets the same OUT/moe/...
from --amc K (the replicates' root mean square error around the release, times 1.645). A
run of another schema has no moe form; `postdp tabulate OUT` makes the tables with their
margins. Progress: a bar on a terminal; when standard error is not a terminal (a log), one
plain line per partition solved; the last line says what was written where. A run
killed at any moment is resumed by the same command: finished partitions are kept and the
result is the same, byte for byte. {tasks} solves the subtrees one at a time (one
state's measurements in memory), or as Dask tasks with --scheduler (local: a LocalCluster
of --workers processes; or a scheduler's address), with the same result.

A run of the DHC persons design (postdp measure --strategy dhc-2020-persons: 1,227,744
cells) is held to a PL94 release, as the 2020 production held it to the redistricting
data: --held names the output folder of a finished integral postdp postprocess of the
pl94-2020-persons run of the same persons and blocks, and every DHC geounit's PL94
histogram is held exactly to the sum of its blocks' there. It takes --method topdown-2020
only and writes the long form only, with a column per attribute (relgq, sex, age,
hispanic, cenrace) in place of category; its tasks hold at most --cut-blocks geounits
(default 100: some 25 MB per geounit in a task). Its group-quarters bounds are met by
record switching, required down to Tract_Subset and best effort at Block_Group and Block;
a run with structural bounds solved by {tasks} records, by level, how many geounits the
release leaves outside them (OUT/postdp-manifest.json, "bounds_unmet"; each estimates
file says its own in its metadata, "postdp.bounds_unmet"), and a last line names any.
"""


def _description() -> str:
    """The description, its lists of methods from the estimator registry."""
    from postdp.postprocess import estimators

    table = estimators("table")

    def names(keep: Any) -> str:
        return ", ".join(e.name for e in table if keep(e))

    methods = "\n".join(f"  {e.name}: {e.summary}" for e in table if not e.finisher)
    return DESCRIPTION.format(
        methods=methods,
        integral=names(lambda e: e.integral and not e.finisher),
        variances=names(lambda e: e.variances),
        tasks=names(lambda e: e.tasks),
    )


def add_parser(commands: Any) -> None:
    """Register the ``postprocess`` subcommand."""
    parser = commands.add_parser(
        "postprocess",
        help="estimate histograms from noisy measurement files (no privacy cost)",
        description=_description(),
    )
    parser.add_argument("run_dir", metavar="RUN", help="the run's folder")
    parser.add_argument(
        "--method", required=True, help="a table estimator (listed above), optionally ',round'"
    )
    parser.add_argument("--output-dir", required=True, metavar="OUT", help="the estimates' folder")
    parser.add_argument(
        "--seed",
        type=whole(0, 2**63 - 1),
        help="seed of a ',round' step or --amc; default: drawn from the operating system's "
        "entropy and recorded in OUT/postdp-postprocess.json (a resume reuses it)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the subtree tasks (of a method that has them, see above) on Dask: "
        "'local' (a LocalCluster, whose workers' "
        "own output is not shown: postdp reports a failed task, a dead worker or Ctrl-C in "
        "one line) or a scheduler address such as tcp://host:8786",
    )
    parser.add_argument("--workers", type=whole(1, 1024), default=2, help="LocalCluster processes")
    parser.add_argument(
        "--amc",
        type=whole(2, 10_000),
        metavar="K",
        help="approximate Monte Carlo margins of error (90%%) of an integral method: the "
        "release taken as the truth, measured and post-processed again K times (numpy, "
        "seeded by --seed; in memory, for a state or a few); writes OUT/moe/... (every "
        "P1-P5 or H1 row's <variable>_moe, each geounit), OUT/amc/summary.parquet and "
        "OUT/amc/totals.parquet (each geounit's total's moe)",
    )
    parser.add_argument(
        "--cut-blocks",
        type=whole(1, 10**9),
        metavar="N",
        help="a method solved in subtree tasks: a state with more than N geounits (its "
        "blocks and those above them) is cut at its counties, a county still above N at "
        "its tracts, and so on; the other counties (tracts, ...) go in tasks of "
        "consecutive ones of at most N geounits in all, each with everything below it "
        "(memory per task: at most N geounits or one family: a worker of 5.6 GB on "
        "synthetic California at the default); the numbers are the same (default 50000; "
        "100 for a DHC run, whose geounits hold some 25 MB each in a task)",
    )
    parser.add_argument(
        "--held",
        metavar="PL94_OUT",
        help="a run of the DHC persons design (postdp measure --strategy dhc-2020-persons), "
        "and only there, where it is needed: the PL94 release it is held to, as the "
        "production held the redistricting data -- the output folder of a finished "
        "integral postdp postprocess of the pl94-2020-persons run of the same persons and "
        "blocks; every DHC geounit's PL94 histogram is held to the sum of its blocks'. "
        "Such a run takes --method topdown-2020 and writes the long form only, a column "
        "per attribute (relgq, sex, age, hispanic, cenrace) in place of category",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Check the run, the method and the folder; then post-process, partition by partition."""
    from postdp.nmf import read, subtrees
    from postdp.postprocess import parse_table_method

    state.phase = "checking the options"
    with flag("--method", args.method):
        method = parse_table_method(args.method)
        if method.step is None:
            raise ValueError("name a post-processing step")
    step, rounded = method.step.name, method.rounded
    if args.seed is not None and not rounded and args.amc is None:
        raise CliError(
            f"--seed: seeds a ',round' step or --amc; --method {args.method!r} is neither"
        )
    if args.amc is not None and not method.integral:
        raise CliError(
            f"--amc {args.amc}: takes the release as the truth, which must be whole numbers; "
            f"--method {args.method!r} is not (add ',round')"
        )
    if args.scheduler is not None and (rounded or not method.step.tasks):
        raise CliError(
            f"--scheduler: runs the subtree tasks of a method that has them; --method "
            f"{args.method!r} has none"
        )
    run_dir = Path(args.run_dir).expanduser()
    with flag("RUN", args.run_dir):
        codes = subtrees(run_dir)
        top = read(run_dir, levels=2)
    out = Path(args.output_dir).expanduser()
    if out.resolve() == run_dir.resolve() or run_dir.resolve() in out.resolve().parents:
        raise CliError(f"--output-dir {args.output_dir!r}: inside the run; name another folder")
    from postdp.nmf.runs import (
        check_budgets,
        check_fits,
        held_top,
        run_levels,
        task_method,
        wide_form,
    )

    cells = top.table.categories.leaves.size
    if args.held is not None and wide_form(cells):
        raise CliError(
            f"--held {args.held!r}: for a run of the DHC persons design; RUN's table has "
            f"{cells:,} cells"
        )
    if not wide_form(cells):
        if not method.step.tasks or rounded:
            raise CliError(
                f"--method {args.method!r}: a run of {cells:,} detailed cells (the DHC "
                f"persons design) is post-processed by {task_method()} held to a PL94 release "
                "(its BLUE and restoration: postdp.postprocess.restore_dhc, in Python)"
            )
        if args.held is None:
            raise CliError(
                "--held: a run of the DHC persons design is held to a PL94 release (the "
                "output folder of a finished postdp postprocess of its PL94 run)"
            )
        if args.amc is not None:
            raise CliError(f"--amc {args.amc}: not built for a run of the DHC persons design")
    from postdp.nmf.runs import CUT_BLOCKS, DHC_CUT_BLOCKS

    if args.cut_blocks is None:
        args.cut_blocks = CUT_BLOCKS if wide_form(cells) else DHC_CUT_BLOCKS
    from postdp.nmf.runs import RunError

    try:
        with flag("--held", args.held):
            names = run_levels(run_dir)
            _, top_held = held_top(run_dir, top, codes, names, args.held)
            if top_held is not None:
                check_fits(step, top, top_held)
    except CliError as exc:
        if isinstance(exc.__cause__, RunError):  # the run's files, not the release held
            raise CliError(f"RUN {args.run_dir!r}: {exc.__cause__.problem}") from None
        raise
    if top_held is None:
        from postdp.cli._tables import check_step_fits

        check_step_fits(args, top.table, top.workload, step, option="--method")
    with flag("--method", args.method):
        check_budgets(run_dir, top, step)
    if args.scheduler is not None:
        state.phase = "starting the Dask workers (--scheduler)"
    client, cluster = _dask.connect(args)
    from postdp.nmf import MANIFEST_FILE, PLAN_FILE, postprocess
    from postdp.nmf.runs import BOUNDS_UNMET

    state.phase = "post-processing"
    state.pending = [str(out)]
    bars: dict[str, Any] = {}

    def tick(stage: str, done: int, total: int) -> None:
        if stage not in bars:  # in a log: a line per solve done, "subtrees: done (2/51)"
            label = STAGES.get(stage, stage)
            bars[stage] = progress(label, total, quiet=args.quiet, unit="partition", lines=True)
        bars[stage].total = total  # grows when a large state is cut into its counties
        bars[stage].n = done
        bars[stage].refresh()

    try:
        with flag("--output-dir", args.output_dir):
            try:
                postprocess(
                    run_dir,
                    out,
                    method=args.method,
                    seed=args.seed,
                    scheduler=client,
                    amc=args.amc or 0,
                    cut_blocks=args.cut_blocks,
                    held=args.held,
                    progress=tick,
                )
            except RunError as exc:  # the run's files, not the output folder
                raise CliError(f"RUN {args.run_dir!r}: {exc.problem}") from None
    except Exception as exc:
        if type(exc).__name__ != "KilledWorker":  # dask.distributed's: a worker died
            raise
        raise CliError(
            f"--cut-blocks {args.cut_blocks}: a Dask worker died running a task (out of "
            "memory?); the partitions written are kept: give the workers more memory and run "
            "the same command to resume, or start again into a new --output-dir with a "
            "smaller --cut-blocks"
        ) from None
    finally:
        for bar in bars.values():
            bar.close()
        _dask.close_quietly(client, cluster)  # after an interrupt too: postdp's one line only
    state.pending = []
    state.written.append(str(out))
    if not args.quiet:
        plan = json.loads((out / PLAN_FILE).read_text(encoding="utf-8"))
        drawn = ""
        if args.seed is None and (rounded or args.amc is not None):
            drawn = f" (seed {plan['seed']} drawn, recorded in {out / PLAN_FILE})"
        forms = [f"{f}/" for f in plan["forms"]] + (["amc/"] if args.amc else [])
        print(
            f"wrote {out}: {', '.join(forms)} ({len(codes) + 1} partitions), --method "
            f"{args.method}{drawn}",
            file=sys.stderr,
        )
        manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
        unmet = {k: v for k, v in manifest.get(BOUNDS_UNMET, {}).items() if v}
        if unmet:  # the DHC's group-quarters bounds are best effort at its lowest levels
            where = ", ".join(f"{n:,} at {level}" for level, n in unmet.items())
            print(
                f"note: geounits left outside their structural bounds: {where} (by level in "
                f"{out / MANIFEST_FILE}, {BOUNDS_UNMET!r})",
                file=sys.stderr,
            )
    return 0


#: What each stage of :func:`postdp.nmf.postprocess` reports, as its progress shows it.
STAGES = {"top": "nation and states", "subtrees": "subtrees", "amc": "AMC replicates"}

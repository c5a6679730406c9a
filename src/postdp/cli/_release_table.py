"""``postdp release --table``: a table measured by a workload, post-processed, recorded
(private; called by :mod:`postdp.cli.release`)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np

from postdp.cli import _ledger
from postdp.cli._common import add_interval, interval_seed
from postdp.cli._io import RunState
from postdp.cli._options import CliError
from postdp.cli._tables import (
    check_step_fits,
    check_steps,
    load_table,
    long_form,
    wide_form,
    workload,
)
from postdp.postprocess.estimators import estimator, estimators


def run_table(args: argparse.Namespace, state: RunState, check_cap: Any) -> int:
    """Validate, check outputs, measure, project, record and write a table release."""
    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    from postdp.analysis import TableDesign

    check_step_fits(args, table, work, step)
    with flag_design(args):
        design = TableDesign(table, work, args.postprocess)
    if rounded and args.uncertainty is not None:
        raise CliError(
            f"--uncertainty {args.uncertainty}: the intervals are for real-valued releases; "
            "drop ',round' from --postprocess to get them"
        )
    margin = _margins(args, step, design.projector, work, (table.geography.n, table.categories.n))
    secure = not args.study
    opendp = ""
    if secure:
        from postdp.mechanisms.release import opendp_version

        opendp = opendp_version()
    content = _ledger.table_content(table) if secure else None
    output, ledger = _ledger.release_outputs(
        args, loaded.paths, loaded.sha256, secure=secure, state=state, content=content
    )
    if ledger is not None:
        check_cap(args, ledger, [m.mechanism for m in work.measurements if m.mechanism])

    from postdp.tables import category_matrix, measure

    state.phase = "drawing the noise"
    measured = measure(table, work, secure=secure, rng=None if secure else args.seed)
    released = None
    if step is not None:
        state.phase = "post-processing"
        rounding = None if secure else np.random.SeedSequence([int(args.seed), 2])
        full = design.solve(measured, rng=rounding) @ category_matrix(table.categories).T
        released = np.rint(full).astype(np.int64) if rounded else full.round(6)
    shaped = long_form if args.format == "long" else wide_form
    frame = shaped(table, measured, released, secure=secure)
    if args.uncertainty == "replicates" and released is not None:
        from postdp.analysis import replicate_intervals

        state.phase = "replicating the release"
        ci = replicate_intervals(
            released,
            design,
            replicates=args.replicates,
            level=args.ci_level,
            secure=secure,
            rng=interval_seed(args, secure),
        )
        low, high = ci.low.round(6).reshape(-1), ci.high.round(6).reshape(-1)
        add_interval(frame, "released_count", low, high, args.ci_level)
    if margin is not None and released is not None:
        low = (released - margin).round(6).reshape(-1)
        high = (released + margin).round(6).reshape(-1)
        add_interval(frame, "released_count", low, high, args.ci_level)

    state.phase = f"writing {output}"
    state.pending = [str(output)]

    _ledger.publish(
        output,
        frame,
        ledger,
        lambda digest: _record(args, loaded, work, output, digest, opendp, content),
        lambda entry: _ledger.statement(entry, secure=secure, derived=[], ledger=ledger),
        done=lambda: state.written_now(str(output)),
        overwrite=args.overwrite,
    )
    _report(args, loaded, work, output, secure, ledger)
    return 0


def _margins(
    args: argparse.Namespace,
    step: str | None,
    projector: Any,
    work: Any,
    shape: tuple[int, int],
) -> Any:
    """Half-widths of the --uncertainty gls intervals (from the design alone), or None; the
    other methods are checked here, before anything is drawn."""
    if args.uncertainty is None:
        return None
    if args.uncertainty == "posterior":
        raise CliError("--uncertainty posterior: for hierarchies released with bayes only")
    if args.format != "long":
        raise CliError(f"--uncertainty {args.uncertainty}: the intervals need --format long")
    if args.uncertainty == "replicates":
        if step is None:
            raise CliError("--uncertainty replicates: needs a --postprocess for a table")
        need = args.replicates * shape[0] * shape[1] * 4
        if need > 2 << 30:
            raise CliError(
                f"--replicates {args.replicates}: would hold {need / 2**30:.1f} GiB of replicate "
                "errors (replicates x geounits x categories x 4 bytes); use fewer"
            )
        return None
    if step is None or not estimator(step).variances:
        raise CliError(
            f"--uncertainty {args.uncertainty}: exact GLS margins are for --postprocess "
            f"{' or '.join(e.name for e in estimators('table') if e.variances)} (the "
            "least-squares estimate)"
        )
    if any(m.weight is not None for m in work.measurements):
        raise CliError(
            f"--uncertainty {args.uncertainty}: GLS margins need the inverse-variance weights "
            "(remove 'weight' from --design)"
        )
    from scipy import stats

    z = float(stats.norm.isf((1 - args.ci_level) / 2))
    return z * np.sqrt(projector.variances())


def flag_design(args: argparse.Namespace) -> Any:
    from postdp.cli._options import flag

    return flag("--design" if args.design else "--epsilon/--rho", args.design or "per level")


def _record(
    args: argparse.Namespace,
    loaded: Any,
    work: Any,
    output: Path,
    digest: str,
    opendp: str,
    content: str | None = None,
) -> dict[str, Any]:
    from postdp import __version__

    budget = work.budget
    return {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "input": loaded.source,
        "input_sha256": loaded.sha256,
        **({} if content is None else {_ledger.CONTENT_KEY: content}),
        "measurements": [
            {
                "level": m.level,
                "query": m.query.name,
                "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                "epsilon": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().epsilon,
                "rho": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().rho,
            }
            for m in work.measurements
        ],
        "budget": {"epsilon": budget.epsilon, "rho": budget.rho},
        "postprocess": args.postprocess,
        "output": str(output),
        "output_sha256": digest,
        "postdp_version": __version__,
        "opendp_version": opendp,
    }


def _report(
    args: argparse.Namespace,
    loaded: Any,
    work: Any,
    output: Path,
    secure: bool,
    ledger: _ledger.LedgerUse | None,
) -> None:
    table = loaded.table
    n_cells = table.geography.n * table.categories.n
    if secure:
        print(f"released table {loaded.source} ({n_cells:,} counts, secure path) to {output}")
    else:
        print(
            f"study-path draw of table {loaded.source} ({n_cells:,} counts) to {output}: NOT a "
            "private release, do not publish it (its rows say path = study)"
        )
    step, rounded = check_steps(args.postprocess)
    if step is not None:
        what = estimator(step).summary
        if rounded:
            what += ", then rounded to integers (unbiased)"
        print(
            f"post-processing: {step} ({what}); column released_count is consistent across "
            "geography and categories"
        )
    heading = "privacy budget spent" if secure else "budget this design would spend"
    print(f"{heading}: {work.budget}")
    costs = work.cost_frame()
    for _, row in costs[costs["query"] == "*"].iterrows():
        print(f"  level {row['level']}: epsilon {row['epsilon']:g}, rho {row['rho']:g}")
    if ledger is not None:
        from postdp.mechanisms import Budget

        spent, this = ledger.spent, work.budget
        total = Budget(epsilon=spent.epsilon + this.epsilon, rho=spent.rho + this.rho)
        at = "" if total.rho == 0 else f" at delta = {args.delta:g}"
        print(
            f"ledger {ledger.path}: {spent.releases} earlier release(s) of this input; "
            f"cumulative budget now epsilon = {total.to_approx_dp(args.delta):.6g}{at}"
        )

"""``postdp measure``: draw a table's noisy measurements once and write them as a run of
noisy measurement files (the Census NMF layout)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from postdp import privacy
from postdp._files import current_umask, sigint_held
from postdp.cli import _dask, _measure_inputs
from postdp.cli._io import RunState
from postdp.cli._options import CliError, flag, fraction, ids, probability, whole
from postdp.privacy import NotRecordedError, Reservation, holder_of, reserve

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Draw the noisy measurements of a release design once -- the only step of a release that
costs privacy -- and write them in the Census Bureau's noisy measurement file layout:
RUN/<Geolevel>.parquet/{DPQuery,Constraint}/State=NNN/part-0.parquet, with
RUN/postdp-nmf.json (the manifest) and RUN/privacy.json (the privacy statement). Post-process
them as often as needed with `postdp postprocess RUN` (no privacy cost).

The input is person records (--input: Parquet with the 2020 PPMF columns, read and tabulated
one state at a time), block histograms (--input: Parquet with a 'geocode' column and the
cells of the strategy's schema, wide or long, as postdp postprocess writes them) or a
synthetic persons population (--synthetic 11,10 or --synthetic 11 10: state FIPS codes; no
confidential data exists here; with --strategy dhc-2020-persons its persons have ages,
sexes and relationships too), measured with a 2020 preset (--strategy; persons are
tabulated to its cells). Every option and every record is checked, and the output folder,
before anything is drawn. The run is written under a temporary name and renamed into place
when complete: a run killed part-way leaves no RUN, and an existing RUN is never drawn into
again; the temporary folders of earlier measures into the same place that were killed are
removed once this one is in place. Without --study the noise comes from postdp's exact
integer sampler on the operating system's CSPRNG (--sampler opendp: OpenDP's; the privacy
statement names the sampler and its version) and the draw is recorded in the ledger (see
postdp release --ledger): its budget is reserved there before the draw (a 'reserved' line,
counted by every release and measure of the same input at once), the ledger's lock is not
held while drawing, and the outcome is appended at the end: 'published', 'drawn, not
published' (its budget still counts) or 'withdrawn' (nothing was drawn). A measure killed
outright leaves its reservation, which keeps counting: noise may have been drawn and seen.
The input is known to the ledger by its bytes and by its content (the records or counts in
any order or partitioning, read once more before the draw to compute it). With --study
--seed N the draw is reproducible on numpy's generator: for studies only.
"""


def add_parser(commands: Any) -> None:
    """Register the ``measure`` subcommand."""
    parser = commands.add_parser(
        "measure",
        help="draw noisy measurements once and write them as noisy measurement files",
        description=DESCRIPTION,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--synthetic",
        type=ids,
        nargs="+",
        action="extend",
        metavar="STATES",
        help="state FIPS codes of the synthetic persons population, separated by commas or "
        "spaces (--synthetic 10,11 or --synthetic 10 11)",
    )
    source.add_argument(
        "--input",
        metavar="PARQUET",
        help="a Parquet file or folder (any Hive partitioning) of person records with the "
        "2020 PPMF columns TABBLKST, TABBLKCOU, TABTRACTCE, TABBLKGRPCE, TABBLK, GQTYPE_PL, "
        "VOTING_AGE, CENHISP, CENRACE, or of block histograms: 'geocode' (the block's "
        "GEOID) with one column per cell of the strategy's schema (wide) or 'category' and "
        "'count' (long), as postdp postprocess writes them; every row is checked before "
        "anything is drawn, then each state is read and tabulated in turn",
    )
    parser.add_argument(
        "--population-seed",
        type=whole(0, 2**32 - 1),
        default=0,
        help="seed of the synthetic population (not of the noise; default 0)",
    )
    parser.add_argument(
        "--population-scale",
        type=fraction,
        metavar="FRACTION",
        help="a miniature synthetic population for quick trials, in (0, 1]: every county's "
        "2020 population times FRACTION, its geounits fewer in proportion (default 1, the "
        "whole population); recorded in the run's manifest",
    )
    parser.add_argument(
        "--strategy",
        default="pl94-2020-persons",
        help="the measurement preset: pl94-2020-persons (the 2020 persons run; default), "
        "pl94-2020-units (block histograms input only), pl94-2020-p1 (the persons budget "
        "on table P1's 63 race cells; person records and the synthetic population are "
        "tabulated to them) or dhc-2020-persons (the 2020 DHC persons run, 1,227,744 cells: "
        "block histograms of its schema, or --synthetic: the synthetic persons with ages, "
        "sexes and relationships)",
    )
    parser.add_argument("--output-dir", required=True, metavar="RUN", help="a new folder")
    parser.add_argument("--study", action="store_true", help="numpy draws: NOT a private release")
    parser.add_argument("--seed", type=whole(0, 2**63 - 1), help="study-path seed (needs --study)")
    parser.add_argument("--ledger", metavar="JSONL", help="release ledger (see postdp release)")
    parser.add_argument(
        "--sampler",
        choices=("postdp", "opendp"),
        help="the secure path's noise: postdp's exact discrete Gaussian/Laplace on the "
        "operating system's CSPRNG, with the design's exact rational shares (default for "
        "integer noise), or OpenDP's samplers (the 'release' extra; default for real-valued "
        "noise); not with --study",
    )
    parser.add_argument(
        "--delta",
        type=probability,
        default=1e-10,
        help="delta at which the zCDP budget is also printed as (epsilon, delta)",
    )
    parser.add_argument(
        "--cut-blocks",
        type=whole(1, 10**9),
        default=None,
        metavar="N",
        help="a state with more than N blocks is measured county by county, a county still "
        "above N tract by tract (one such subtree's answers in memory; the same design), a "
        "file per subtree in its state's partition (default 100000; 100 for "
        "dhc-2020-persons, whose geounits hold some 1.9 million answers each)",
    )
    parser.add_argument(
        "--facilities",
        metavar="SOURCE",
        help="the 2020 structural constraints (persons preset): block housing units and "
        "group-quarters facilities, as 'synthetic' (derived from the --synthetic population) "
        "or a CSV/Parquet file with 'geocode' and the columns housing_units, "
        "adult_correctional, juvenile, nursing, other_institutional, college_housing, "
        "military_quarters, other_noninstitutional (a block it lacks is left "
        "unconstrained); written as Constraint rows "
        "(hhgq_total_lb_con, hhgq_total_ub_con, nurse_nva_0_con) that topdown-2020 and "
        "blue-restore hold; with --strategy dhc-2020-persons, by the 24 detailed "
        "group-quarters types: 'synthetic' (one facility of each type a block's residents "
        "live in) or a file with 'geocode' and the columns GQ101 ... GQ997 (the relgq "
        "levels' codes, postdp.data.DHC_FACILITY_COLUMNS), written as hhgq_total_lb_con and "
        "hhgq_total_ub_con on relgq, which topdown-2020 meets by record switching",
    )
    parser.add_argument(
        "--bypass",
        action="store_true",
        help="the production spine's single-child bypass from the counties down: a chain "
        "of only children (a county with one tract, a block group with one block) measured "
        "once, at its top, with the chain's budget; the geounits below have no DPQuery rows "
        "(the same privacy cost)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="measure the states as Dask tasks (and the counties and tracts of a state cut "
        "at --cut-blocks), the noise drawn on the workers: "
        "'local' (a LocalCluster of --workers processes) or a scheduler address such as "
        "tcp://host:8786 (its workers must see --output-dir's folder); the same run, ledger "
        "record and privacy statement as in one process (on the study path, the same "
        "draws)",
    )
    parser.add_argument("--workers", type=whole(1, 1024), default=2, help="LocalCluster processes")
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate, check the folder, draw, write the run, record it."""
    if args.synthetic is not None:  # each word typed, split at its commas: one list
        args.synthetic = [code for word in args.synthetic for code in word]
    if args.seed is not None and not args.study:
        raise CliError("--seed: only with --study (the release path cannot be seeded)")
    if args.study and args.seed is None:
        raise CliError("--study: give --seed N so the study draw can be reproduced")
    if args.study and args.ledger:
        raise CliError("--ledger: records secure draws; --study draws are not recorded")
    if args.study and args.sampler is not None:
        raise CliError(f"--sampler {args.sampler}: the secure path's; --study draws with numpy")

    state.phase = "checking the options"
    from postdp.tables import load_strategy

    with flag("--strategy", args.strategy):
        strategy = load_strategy(args.strategy)
    if args.cut_blocks is None:
        from postdp.nmf.runs import DHC_CUT_BLOCKS, wide_form

        args.cut_blocks = 100_000 if wide_form(strategy.schema.size) else DHC_CUT_BLOCKS
    states, tables, source, digest, content = _measure_inputs.source(args, strategy)
    with flag("--strategy", args.strategy):
        first = tables(states[0])
        work = strategy.workload(first)  # made again, one state at a time
    if args.scheduler is None:  # else each task builds its own state's table
        tables = _built_once(tables, states[0], first)
    del first  # held by `tables` until the run takes it, then freed
    bounds = _measure_inputs.facilities(args, strategy)
    run_dir = _check_run(args.output_dir)
    if args.input and Path(args.input).expanduser().resolve() in (run_dir, *run_dir.parents):
        raise CliError(f"--output-dir {args.output_dir!r}: inside the input")
    secure = not args.study
    ledger = None
    reservation = None
    began: list[bool] = []  # set once the draw begins
    if secure:
        from postdp.mechanisms.release import pick_samplers

        with flag("--sampler", args.sampler or "postdp"):  # before the draw: OpenDP's extra,
            mechanisms = [m.mechanism for m in work.measurements]  # integer noise for postdp
            _, args.sampler_name = pick_samplers(mechanisms, args.sampler)
        path = Path(args.ledger).expanduser().resolve() if args.ledger else privacy.default_path()
        privacy.check_writable(path, "--ledger")
        state.phase = "reserving the budget in the ledger"
        reserved = _record(args, source, digest, work, run_dir, content=content)
        reservation, spent = reserve(
            path,
            reserved,
            holder_of(args),
            target=str(run_dir),
            busy=lambda r: (
                f"--output-dir {args.output_dir!r}: another postdp measure (pid "
                f"{r.get('pid')}, reserved {r.get('time')}) is drawing into it; nothing "
                "was drawn"
            ),
            keep=lambda held: state.cleanup.append(lambda: _settle(held, began)),
        )
        ledger = privacy.LedgerUse(path, spent, [])

    from postdp._files import remove_stale_temporaries, temporary_prefix
    from postdp.cli._options import progress
    from postdp.nmf import measure_by_state

    state.phase = "drawing the noise and writing it, state by state"
    state.pending = [str(run_dir)]
    tmp = Path(
        tempfile.mkdtemp(dir=run_dir.parent, prefix=temporary_prefix(run_dir), suffix=".tmp")
    )
    os.chmod(tmp, 0o777 & ~current_umask())
    clients: list[Any] = []
    bar = progress(
        "states",
        len(states),
        quiet=args.quiet,
        unit="state",
        lines=True,  # in a log: "State 011: done (1/2)" as each state is written
        name=lambda done: f"State 0{states[done - 1]}",
    )
    try:
        if args.scheduler is not None:  # before the draw: nothing drawn if it fails
            state.phase = "starting the Dask workers (--scheduler)"
        client, cluster = _dask.connect(args)
        clients.extend((client, cluster))
        state.phase = "drawing the noise and writing it, state by state"
        began.append(True)
        measure_by_state(
            tables,
            states,
            tmp,
            strategy=strategy,
            secure=secure,
            rng=None if secure else args.seed,
            cut_blocks=args.cut_blocks,
            bounds=bounds,
            bypass=args.bypass,
            progress=lambda stage, done, total: bar.update(done - bar.n),
            population_seed=args.population_seed if args.synthetic is not None else None,
            population_scale=args.population_scale or 1.0,
            sampler=args.sampler,
            scheduler=client,
        )
        bar.close()
        record = _record(args, source, digest, work, run_dir, content=content)
        statement = privacy.statement(record, secure=secure, derived=[], ledger=ledger)
        statement["strategy"] = strategy.name
        if work.neighbours == "bounded":
            statement["neighbouring_relation"] = (
                "change one person's record (bounded DP, as the 2020 Census): two counts of a "
                "query move by one, so each query costs twice its mechanism's rho"
            )
        statement["epsilon_at_delta"] = {
            "delta": args.delta,
            "epsilon": work.budget.to_approx_dp(args.delta),
        }
        statement["sigma_per_query"] = strategy.sigma_table().to_dict(orient="records")
        if args.bypass:
            statement["spine"] = (
                "single-child bypass from the counties down: a geounit that took its only "
                "child's budget has the sigma of its level divided by the square root of its "
                "budget factor (the DPQuery variance column); every block's path keeps the "
                "run's rho"
            )
        (tmp / "privacy.json").write_text(json.dumps(statement, indent=2) + "\n", encoding="utf-8")
        with sigint_held():  # recorded and placed together
            _place(args, tmp, run_dir, reservation, record)
            state.pending = []
            state.written.append(str(run_dir))
    finally:
        bar.close()
        if clients:  # after an interrupt too
            _dask.close_quietly(*clients)
        shutil.rmtree(tmp, ignore_errors=True)
    remove_stale_temporaries(run_dir)
    if not args.quiet:
        drawn = (
            f"secure ({args.sampler_name})" if secure else "STUDY (numpy, not a private release)"
        )
        print(
            f"wrote {run_dir}: {len(work.measurements)} measurements, {work.budget}, "
            f"epsilon {work.budget.to_approx_dp(args.delta):.2f} at delta {args.delta:g}; "
            f"{drawn}",
            file=sys.stderr,
        )
    return 0


def _place(
    args: argparse.Namespace,
    tmp: Path,
    run_dir: Path,
    reservation: Reservation | None,
    record: dict[str, Any],
) -> None:
    """Rename the finished run into place and (secure path) close its reservation as
    published; if the folder appeared meanwhile, the reservation is closed as drawn, not
    published, and the message says so (Ctrl-C held back by the caller)."""
    if reservation is None:
        try:
            os.rename(tmp, run_dir)
        except OSError as exc:
            raise CliError(
                f"--output-dir {args.output_dir!r}: appeared meanwhile ({exc.strerror}); "
                "nothing was written there"
            ) from None
        return
    try:
        reservation.publish(record, lambda: os.rename(tmp, run_dir))
    except NotRecordedError as exc:
        raise CliError(
            f"--ledger {str(reservation.path)!r}: could not record the draw "
            f"({exc.strerror or exc}); nothing was published (its reservation stays in the "
            "ledger and counts)"
        ) from None
    except OSError as exc:
        said = (
            "records this draw as drawn, not published"
            if reservation.closed == privacy.UNPUBLISHED
            else "keeps this draw's reservation"
        )
        raise CliError(
            f"--output-dir {args.output_dir!r}: appeared meanwhile ({exc.strerror}); nothing "
            f"was written there; the ledger {str(reservation.path)!r} {said} (its budget "
            "counts: the noise was drawn)"
        ) from None


def _settle(reservation: Reservation | None, began: list[bool]) -> None:
    """At the end of the command: close a reservation still open (the command failed or
    was interrupted): drawn, not published once the draw began, else withdrawn. A ledger
    that cannot be written keeps the reservation (it counts)."""
    if reservation is None or reservation.closed is not None:
        return
    with contextlib.suppress(OSError):
        reservation.close(privacy.UNPUBLISHED if began else privacy.WITHDRAWN)


def _built_once(tables: Any, state: str, table: Any) -> Any:
    """``tables`` that hands over the table already built for ``state`` (to check the
    design before drawing) instead of building it again."""
    held = {state: table}

    def build(code: str) -> Any:
        return held.pop(code) if code in held else tables(code)

    return build


def _check_run(text: str) -> Path:
    """The run's folder: new (an existing one, even empty, is refused: no second draw)."""
    path = Path(text).expanduser().resolve()
    if path.exists():
        raise CliError(
            f"--output-dir {text!r}: exists; a run is drawn once (post-process it with "
            "`postdp postprocess`, or name a new folder)"
        )
    parent = path.parent
    if not parent.is_dir():
        raise CliError(f"--output-dir {text!r}: its folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CliError(f"--output-dir {text!r}: its folder {str(parent)!r} cannot be written")
    return path


def _record(
    args: argparse.Namespace,
    source: str,
    digest: str,
    work: Any,
    run_dir: Path,
    *,
    content: str | None = None,
) -> dict[str, Any]:
    from postdp import __version__

    budget = work.budget
    return {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "input": source,
        "input_sha256": digest,
        **({} if content is None else {privacy.CONTENT_KEY: content}),
        "measurements": [
            {
                "level": m.level,
                "query": m.query.name,
                "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                "rho": 0.0 if m.mechanism is None else work.cost(m).rho,
            }
            for m in work.measurements
        ],
        "budget": {"epsilon": budget.epsilon, "rho": budget.rho},
        "output": str(run_dir),
        "postdp_version": __version__,
        **({"sampler": args.sampler_name} if getattr(args, "sampler_name", None) else {}),
    }

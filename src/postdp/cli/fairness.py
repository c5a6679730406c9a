"""``postdp fairness``: Title I dollars and Section 203 decisions on noisy data ([fioretto2021])."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from postdp.cli._io import RunState, check_output_dir
from postdp.cli._options import (
    CliError,
    add_output_options,
    flag,
    float_list,
    positive_float,
    run_bars,
    whole,
)
from postdp.cli._report import add_report_option, check_report, print_written, write_study
from postdp.postprocess.estimators import CLAMP

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Measure, by Monte Carlo on the bundled real data, how noise (and a nonnegativity
post-processing) shifts Title I basic-grant allotments between school districts (SAIPE
2019, USD) or flips Voting Rights Act Section 203 decisions (2016 determinations), per
entity, with the fairness bound alpha ([fioretto2021]). --sweep-epsilon runs several
epsilons and --postprocess given several times several post-processings: one tidy table
(a row per entity and setting, with state, mechanism, epsilon and postprocess columns) and
one figure side by side. Every epsilon is checked before the first simulation; the folder
is written only when every run has finished. --report FILE.html adds a self-contained HTML
page of the results.
"""


def add_parser(commands: Any) -> None:
    """Register the ``fairness`` subcommand."""
    parser = commands.add_parser(
        "fairness",
        help="bias and decision errors of Title I allotments or Section 203 decisions on DP data",
        description=DESCRIPTION,
    )
    parser.add_argument("problem", choices=["title1", "section203"])
    parser.add_argument(
        "--state",
        metavar="XX",
        help="one state's entities, by postal code, e.g. NY (the nation when not given)",
    )
    parser.add_argument(
        "--amount",
        type=_amount,
        default=6.5e9,
        help="Title I basic grants nationally, USD (a state gets its share); at most 1e15",
    )
    parser.add_argument(
        "--mechanism",
        default="geometric",
        choices=["geometric", "laplace"],
        help="noise (geometric, as every command; laplace as in [fioretto2021])",
    )
    epsilon = parser.add_mutually_exclusive_group()
    epsilon.add_argument(
        "--epsilon",
        type=float_list(),
        metavar="E",
        help="the noise's epsilon for one run (default 0.1)",
    )
    epsilon.add_argument(
        "--sweep-epsilon",
        type=float_list(),
        metavar="E[,E...]",
        help="one run per epsilon, side by side in the tables and the report",
    )
    parser.add_argument(
        "--postprocess",
        action="append",
        metavar="STEP[,STEP...]",
        help="element-wise post-processing applied to the noisy counts before the decision: "
        "none, clamp, ramp-optimal, modified:T=<t>, round (e.g. clamp,round; default clamp). "
        "Give it again to compare several: one run per epsilon and post-processing, side by "
        "side in one table and figure",
    )
    parser.add_argument("--draws", type=whole(2, 10**9), default=2000, help="Monte Carlo draws")
    parser.add_argument(
        "--seed", type=whole(0, 2**63 - 1), default=0, help="seed of the simulation"
    )
    parser.add_argument(
        "--output-dir", default="fairness", metavar="DIR", help="folder for the tables and figures"
    )
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    add_report_option(parser)
    add_output_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate every option and epsilon, check the folder, simulate all, then write."""

    from postdp.data import load_title1
    from postdp.mechanisms import Geometric, Laplace
    from postdp.postprocess import ElementwiseChain

    if args.epsilon is not None and len(args.epsilon) > 1:
        listed = ",".join(f"{e:g}" for e in args.epsilon)
        raise CliError(
            f"--epsilon '{listed}': one value (one run); --sweep-epsilon {listed} runs one "
            "per epsilon"
        )
    args.epsilon = args.sweep_epsilon or args.epsilon or [0.1]
    option = "--sweep-epsilon" if args.sweep_epsilon else "--epsilon"
    cls = Laplace if args.mechanism == "laplace" else Geometric
    mechanisms = []
    for e in args.epsilon:
        with flag(option, f"{e:g}"):
            mechanisms.append(cls(epsilon=e))
    args.postprocess = args.postprocess or [CLAMP.name]
    if len(set(args.postprocess)) != len(args.postprocess):
        raise CliError(f"--postprocess: each post-processing once; got {args.postprocess}")
    for post in args.postprocess:
        with flag("--postprocess", post):
            ElementwiseChain(mechanisms[0], post)  # checked before any simulation
    if args.problem == "section203" and "--amount" in _typed_flags(args):
        raise CliError("--amount: applies to title1, not to section203")
    if not args.no_figures and importlib.util.find_spec("matplotlib") is None:
        raise CliError("figures need matplotlib (pip install 'postdp[plots]'); or --no-figures")
    us = load_title1()
    states = sorted(set(us["state"]))
    if args.state is not None and args.state not in states:
        raise CliError(
            f"--state {args.state!r}: not a state of the data; one of {' '.join(states)}"
        )
    out_dir = check_output_dir(args.output_dir, "--output-dir", inputs=[], overwrite=args.overwrite)
    report_path = check_report(args, inputs=[], folder=out_dir)
    if args.problem == "section203" and args.state is not None:
        from postdp.data import load_section203

        fips = us.loc[us["state"] == args.state, "state_fips"].iloc[0]
        if not (load_section203()["state_fips"] == fips).any():
            raise CliError(f"--state {args.state!r}: no Section 203 records in that state")
    from postdp.report import fairness_study

    with run_bars(state, quiet=args.quiet) as tick:
        study = fairness_study(
            args.problem,
            epsilon=args.epsilon,
            state=args.state,
            mechanism=args.mechanism,
            postprocess=args.postprocess,
            amount=args.amount,
            n_draws=args.draws,
            rng=args.seed,
            progress=tick,
        )
    shown = write_study(
        args,
        state,
        out_dir,
        report_path,
        study,
        manifest={
            "command": f"postdp fairness {args.problem}",
            "state": args.state,
            "mechanism": args.mechanism,
            "epsilon": args.epsilon,
            "postprocess": args.postprocess,
            "draws": args.draws,
            "seed": args.seed,
        },
        tables=study.tables(),  # file names with their suffix, CSV always
    )
    for line in study.summary_lines():
        print(line)
    print_written(shown)
    return 0


#: The largest --amount: a thousand trillion dollars, far beyond any grant programme. The
#: study's statistics square dollar amounts, which stop being finite numbers above about
#: 1e154; a limit with this much room keeps every figure well inside double precision.
MAX_AMOUNT = 1e15


def _amount(text: str) -> float:
    """A positive amount of dollars, at most :data:`MAX_AMOUNT`."""
    value = positive_float(text)
    if value > MAX_AMOUNT:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_AMOUNT:g} USD (the study squares dollar amounts); got {text!r}"
        )
    return value


def _typed_flags(args: argparse.Namespace) -> set[str]:
    return set(getattr(args, "_typed", ()))

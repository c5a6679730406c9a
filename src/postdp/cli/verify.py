"""``postdp verify-privacy``: an empirical lower bound on a release design's ε."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from postdp.cli._common import prepare, public_ids
from postdp.cli._io import RunState, check_output_file, write_atomic
from postdp.cli._options import (
    CliError,
    add_mechanism_options,
    add_output_options,
    add_postprocess_options,
    add_table_options,
    flag,
    probability,
    progress,
    typed,
    whole,
)

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Check that a release design delivers the privacy it claims: run the whole pipeline (noise
on every level, every post-processing step) many times on the true counts and on a
neighbouring input (one person added to a leaf, or moved from one leaf to another), choose
the output event that best tells them apart on a first sample, and bound its probability
ratio on a second sample with exact Clopper-Pearson intervals. The result is a lower bound
on the pipeline's epsilon that holds with probability 1 - alpha; it is compared with the
accountant's epsilon for the same pair of inputs. Exit status 0: consistent with the
claim; 3: the claim is refuted (the design leaks more than it says). The study path
(numpy) runs by default; --secure draws every release with OpenDP (slow). Events are
reported relative to the true values, never as counts.
"""


def add_parser(commands: Any) -> None:
    """Register the ``verify-privacy`` subcommand."""
    parser = commands.add_parser(
        "verify-privacy",
        help="empirical lower bound on a release design's epsilon (a privacy audit)",
        description=DESCRIPTION,
    )
    add_table_options(parser)
    add_mechanism_options(parser)
    add_postprocess_options(parser)
    parser.add_argument(
        "--neighbour",
        choices=["add", "move"],
        default="add",
        help="one person added to --leaf, or moved from --leaf to --to (needed with --public)",
    )
    parser.add_argument("--leaf", metavar="ID", help="the leaf that changes (default: the first)")
    parser.add_argument("--to", metavar="ID", help="with --neighbour move: the receiving leaf")
    parser.add_argument(
        "--trials",
        type=whole(100, 10**8),
        default=50_000,
        help="releases per input on each of the two samples (default 50000)",
    )
    parser.add_argument(
        "--alpha", type=probability, default=0.05, help="the bound holds w.p. 1 - alpha"
    )
    parser.add_argument(
        "--delta", type=float, default=0.0, help="for (epsilon, delta) claims (zCDP designs)"
    )
    parser.add_argument("--secure", action="store_true", help="OpenDP samplers (release path)")
    parser.add_argument("--seed", type=whole(0), help="seed of the study path")
    parser.add_argument("--output", "-o", metavar="JSON", help="write the result as JSON")
    add_output_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Check everything (and the output path), audit, write the JSON atomically."""
    from postdp.analysis import ReleaseDesign, audit_privacy

    if args.secure and args.seed is not None:
        raise CliError("--seed: the release path (--secure) takes no seed")
    if not 0.0 <= args.delta < 1.0:
        raise CliError(f"--delta {args.delta!r}: must lie in [0, 1)")
    loaded, mechanisms = prepare(args, state)
    h = loaded.hierarchy
    for option, value in (("--leaf", args.leaf), ("--to", args.to)):
        if value is not None:
            with flag(option, value):
                index = h.index(value)
            if not h.is_leaf[index[0]]:
                raise CliError(f"{option} {value!r}: not a leaf of the hierarchy")
    if args.to is not None and args.neighbour != "move":
        raise CliError("--to: only with --neighbour move")
    with flag("--postprocess", args.postprocess):
        design = ReleaseDesign(
            h, mechanisms, args.postprocess, public=public_ids(args, h), weights=args.weights
        )
    if design.budget.rho > 0 and args.delta == 0.0:
        raise CliError("--delta 0: a zCDP design has no pure epsilon; give --delta > 0")
    output = None
    if args.output is not None:
        output = check_output_file(
            args.output,
            typed(args, "--output", "-o"),
            inputs=[loaded.path],
            overwrite=args.overwrite,
        )
    state.phase = "auditing"
    path = "OpenDP release path, one release at a time" if args.secure else "study path"
    if not args.quiet:
        print(
            f"verify-privacy: 4 x {args.trials:,} = {4 * args.trials:,} releases ({path}); "
            "the bar shows the rate and the time left",
            file=sys.stderr,
            flush=True,
        )
    with (
        flag("--neighbour", args.neighbour),
        progress("releases", 4 * args.trials, quiet=args.quiet, unit="release") as bar,
    ):

        def tick(done: int, total: int) -> None:
            bar.update(done - bar.n)

        result = audit_privacy(
            design,
            neighbour=args.neighbour,
            leaf=args.leaf,
            to=args.to,
            secure=args.secure,
            trials=args.trials,
            delta=args.delta,
            alpha=args.alpha,
            rng=args.seed,
            progress=tick,
        )
    record = {name: getattr(result, name) for name in result.__slots__}
    record["postprocess"] = args.postprocess
    record["path"] = "release (OpenDP)" if args.secure else "study (numpy)"
    if output is not None:
        state.phase = f"writing {output}"
        text = json.dumps(record, indent=2) + "\n"

        def write(tmp: Path) -> None:
            tmp.write_text(text, encoding="utf-8")

        write_atomic(output, write, overwrite=args.overwrite)
        state.written.append(str(output))
    out = sys.stdout
    verdict = "REFUTED: the pipeline leaks more than" if result.flagged else "consistent with"
    print(
        f"epsilon lower bound {result.epsilon_lower:.3f} ({1 - result.alpha:.0%} confidence, "
        f"{result.trials:,} releases per input and sample, {record['path']} path); "
        f"{verdict} the claimed epsilon {result.claimed_epsilon:.3f}",
        file=out,
    )
    print(
        f"best event: {result.statistic} {result.direction} true value "
        f"{result.offset:+.3f}; seen {result.hits_high:,} vs {result.hits_low:,} times",
        file=out,
    )
    if output is not None:
        print(f"wrote {output}", file=out)
    return 3 if result.flagged else 0

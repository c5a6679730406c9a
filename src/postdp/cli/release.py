"""``postdp release``: noisy counts of every node of a hierarchy, post-processed, recorded."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from postdp.cli import _ledger
from postdp.cli._common import add_interval, interval_seed, level_labels, prepare, public_ids
from postdp.cli._io import RunState
from postdp.cli._options import (
    CliError,
    add_mechanism_options,
    add_output_options,
    add_postprocess_options,
    add_table_flags,
    add_table_options,
    check_weights,
    flag,
    ids,
    positive_float,
    probability,
    refuse_hierarchy_options,
    wants_table,
    whole,
)
from postdp.postprocess.estimators import PROJECT

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Add differentially private noise to every count of a hierarchy (the bundled 2010 county
populations by default, or a CSV with id/parent/count columns), one mechanism per level,
and write the noisy table as CSV with a `path` column saying how it was drawn.

With --table (a bundled 2020 P1 table) or --input WIDE.csv --categories TREE.csv, release a
table instead: a histogram per geounit, measured by a workload (--design, or the detailed
cells at every level), written in long form (geo_id, parent, category, noisy_count and,
with --postprocess project, project-nonneg or topdown, each optionally followed by ",round",
released_count) or wide form (--format wide).

Every release also writes <output>.privacy.json: the budget per level (or query), the
(epsilon, delta) curve, the public invariants, hashes and versions.

Without --study the noise comes from OpenDP's exact, cryptographically seeded samplers
(needs the 'release' extra) and the release is recorded in a ledger (a JSON line per
release; one per user by default, see --ledger), which reports the budget already spent
on the same input (the same bytes or the same counts, in any row order or line ending,
wherever its outputs went) and enforces
--budget-cap; concurrent releases wait for each other on the ledger's lock. With --study
--seed N the draw is reproducible on numpy's generator: for studies only, never for
publishing.

Every option and the input are checked, and every output path, before anything is drawn;
the output is written to a temporary file and moved into place. The true counts are
written only with --audit.
"""


def add_parser(commands: Any) -> None:
    """Register the ``release`` subcommand."""
    parser = commands.add_parser(
        "release",
        help="add DP noise to a hierarchical count table and write the noisy table",
        description=DESCRIPTION,
    )
    add_table_options(parser)
    parser.add_argument(
        "--keep",
        type=ids,
        metavar="COLS",
        help="comma-separated columns to copy into the output (name,level for the bundled "
        "data; none for --input when not given)",
    )
    add_mechanism_options(parser)
    parser.add_argument(
        "--delta",
        type=probability,
        default=1e-10,
        help="delta at which a zCDP budget is also reported as (epsilon, delta)",
    )
    parser.add_argument(
        "--study",
        action="store_true",
        help="draw on the reproducible study path (numpy): NOT a private release",
    )
    parser.add_argument(
        "--seed", type=whole(0, 2**63 - 1), help="seed of the study path (needs --study)"
    )
    parser.add_argument(
        "--output", "-o", default="release.csv", metavar="CSV", help="the noisy table"
    )
    parser.add_argument(
        "--ledger",
        metavar="JSONL",
        help="release ledger to read and append to (default: $POSTDP_LEDGER, else "
        "postdp/ledger.jsonl in $XDG_DATA_HOME or ~/.local/share: one per user, so every "
        "release of an input is found wherever its outputs go)",
    )
    parser.add_argument(
        "--budget-cap",
        type=positive_float,
        metavar="EPS",
        help="refuse a secure release if the ledger's budget on this input plus this release "
        "would pass this epsilon (a zCDP budget counts as its epsilon at --delta)",
    )
    add_postprocess_options(parser)
    add_table_flags(parser)
    parser.add_argument(
        "--uncertainty",
        choices=["gls", "replicates", "posterior"],
        help="add ci_low, ci_high, moe (half the interval's width) and ci_level to every row: "
        "gls = exact margins of (P) from "
        "the design alone (--postprocess project; tables, or hierarchies with least-squares "
        "weights and at most --public root); replicates = the design re-run --replicates "
        "times on the released counts, for any --postprocess of a hierarchy or a table "
        "(noise from OpenDP, or numpy with --study); posterior = [wang2021]'s credible intervals, "
        "family by family, for --postprocess bayes (MCMC on the published counts only). "
        "None costs privacy",
    )
    parser.add_argument(
        "--replicates",
        type=whole(10, 100_000),
        default=200,
        help="re-runs for --uncertainty replicates (default 200)",
    )
    parser.add_argument(
        "--ci-level",
        type=probability,
        default=0.9,
        help="coverage of the --uncertainty intervals (the Census Bureau's margins are 90%%)",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="also write the true counts (column true_count; every row's path then says "
        "secure+audit or study+audit, and the privacy statement contains_true_counts): for "
        "auditing, never publishing",
    )
    add_output_options(parser, quiet=False)
    parser.set_defaults(func=run)


def _check_options(args: argparse.Namespace) -> None:
    if args.seed is not None and not args.study:
        raise CliError(
            f"--seed {args.seed}: draws on the study path, which is not a private release; "
            "add --study to confirm"
        )
    if args.study and args.budget_cap is not None:
        raise CliError("--budget-cap: applies to secure releases, not to --study draws")
    if args.study and args.ledger is not None:
        raise CliError("--ledger: records secure releases; --study draws are not recorded")
    # options that would otherwise be ignored without a word
    if args.replicates != 200 and args.uncertainty != "replicates":
        raise CliError(f"--replicates {args.replicates}: applies to --uncertainty replicates only")
    if args.ci_level != 0.9 and args.uncertainty is None:
        raise CliError(
            f"--ci-level {args.ci_level:g}: sets the coverage of --uncertainty intervals; "
            "give --uncertainty too"
        )
    table = wants_table(args)
    if args.format != "long" and not table:
        raise CliError(f"--format {args.format}: applies to table releases (--table, --categories)")
    if table:
        refuse_hierarchy_options(args, "release")
    check_weights(args)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate everything, check the outputs, draw, post-process, record and write."""
    _check_options(args)
    if wants_table(args):
        from postdp.cli._release_table import run_table

        return run_table(args, state, _check_cap)
    loaded, mechanisms = prepare(args, state)
    h = loaded.hierarchy
    frame = loaded.frame
    keep = (["name", "level"] if loaded.bundled else []) if args.keep is None else args.keep
    missing = [c for c in keep if c not in frame.columns]
    if missing:
        raise CliError(
            f"--keep {','.join(keep)!r}: no column {', '.join(map(repr, missing))} in the input"
        )
    if args.count in keep:
        raise CliError(f"--keep {','.join(keep)!r}: would copy the true counts ({args.count!r})")

    public = public_ids(args, h)
    from postdp.postprocess import PostProcessChain, inverse_variance_weights, is_consistent

    bayes = args.postprocess.replace(" ", "") == "bayes"
    chain: Any
    if bayes:
        chain = _bayes_chain(args, h, mechanisms, public)
    else:
        with flag("--postprocess", args.postprocess):
            weights = (
                inverse_variance_weights(h, mechanisms)
                if args.weights == "inverse-variance"
                else None
            )
            chain = PostProcessChain(
                h, mechanisms, args.postprocess, public=public, weights=weights
            )
    if args.uncertainty == "posterior" and not bayes:
        raise CliError(
            "--uncertainty posterior: the credible intervals are for --postprocess bayes"
        )
    if args.uncertainty == "replicates" and bayes:
        raise CliError("--uncertainty replicates: use --uncertainty posterior with bayes")
    margin = _margins(args, h, mechanisms, public) if args.uncertainty == "gls" else None
    design = None
    if args.uncertainty == "replicates":
        from postdp.analysis import ReleaseDesign

        with flag("--postprocess", args.postprocess):
            design = ReleaseDesign(
                h, mechanisms, args.postprocess, public=public, weights=args.weights
            )
    secure = not args.study
    opendp = ""
    if secure:
        from postdp.mechanisms.release import opendp_version

        opendp = opendp_version()  # fails here, not after drawing, if OpenDP is missing

    content = _ledger.hierarchy_content(h) if secure else None
    output, ledger = _ledger.release_outputs(
        args, [loaded.path], loaded.sha256, secure=secure, state=state, content=content
    )
    if ledger is not None:
        _check_cap(args, ledger, mechanisms)

    from postdp.hierarchy import add_noise

    state.phase = "drawing the noise"
    result = add_noise(h, mechanisms, secure=secure, rng=None if secure else args.seed)
    table = result.to_frame(include_truth=args.audit, study=args.study)
    consistent = None
    if chain.steps:
        state.phase = "post-processing"
        released = chain(result.values, rng=None if secure else args.seed)
        consistent = is_consistent(released, h)
        table.insert(list(table.columns).index("noisy_count") + 1, "released_count", released)
        if margin is not None:
            add_interval(
                table, "released_count", released - margin, released + margin, args.ci_level
            )
    if args.uncertainty == "posterior":
        from postdp.bayes import hierarchy_credible_intervals

        state.phase = "sampling the posterior"
        post = hierarchy_credible_intervals(
            table["released_count"].to_numpy(),
            h,
            mechanisms,
            level=args.ci_level,
            rng=interval_seed(args, secure),
        )
        add_interval(table, "released_count", post.low, post.high, args.ci_level)
    if design is not None:
        from postdp.analysis import replicate_intervals

        state.phase = "replicating the release"
        column = "released_count" if chain.steps else "noisy_count"
        ci = replicate_intervals(
            table[column].to_numpy(),
            design,
            replicates=args.replicates,
            level=args.ci_level,
            secure=secure,
            rng=interval_seed(args, secure),
        )
        add_interval(table, column, ci.low, ci.high, args.ci_level)
    for position, column in enumerate(keep, start=2):
        table.insert(position, column, frame[column].to_numpy())

    state.phase = f"writing {output}"
    state.pending = [str(output)]

    derived = []
    if public:
        from postdp.hierarchy import derived_public

        derived = derived_public(h, public=public)
    _ledger.publish(
        output,
        table,
        ledger,
        lambda digest: _record(
            args, loaded, mechanisms, result.budget, output, digest, opendp, content
        ),
        lambda entry: _ledger.statement(
            entry, secure=secure, derived=derived, public=list(public or []), ledger=ledger
        ),
        done=lambda: state.written_now(str(output)),
        overwrite=args.overwrite,
    )
    _report(args, loaded, mechanisms, result, chain, consistent, output, ledger)
    return 0


class _BayesChain:
    """Seed 003's release rule over the whole hierarchy, shaped like a post-processing chain
    for the release command (the chain layer cannot reach the Bayesian one)."""

    steps = ("bayes",)

    def __init__(self, h: Any, mechanisms: list[Any]) -> None:
        self.h, self.mechanisms = h, mechanisms

    def __call__(self, values: Any, *, rng: Any = None) -> Any:
        from postdp.bayes import bayes_release_hierarchy

        return bayes_release_hierarchy(values, self.h, self.mechanisms)


def _bayes_chain(args: argparse.Namespace, h: Any, mechanisms: list[Any], public: Any) -> Any:
    """Checks for --postprocess bayes, before anything is drawn."""
    from postdp.mechanisms import Geometric

    if not all(isinstance(m, Geometric) for m in mechanisms):
        raise CliError(
            f"--postprocess bayes: [wang2021]'s release needs --mechanism geometric; got "
            f"{args.mechanism}"
        )
    if public is not None:
        raise CliError("--postprocess bayes: public nodes are not supported by this release")
    if args.weights != "equal":
        raise CliError("--weights: applies to projections, not to --postprocess bayes")
    return _BayesChain(h, mechanisms)


def _margins(args: argparse.Namespace, h: Any, mechanisms: list[Any], public: Any) -> Any:
    """Half-widths of the exact GLS intervals of a hierarchy release, or None (checked
    before anything is drawn)."""
    if args.uncertainty is None:
        return None
    option = f"--uncertainty {args.uncertainty}"
    if args.postprocess.replace(" ", "") != PROJECT.name:
        raise CliError(f"{option}: exact GLS margins are for --postprocess {PROJECT.name} alone")
    variances = {m.variance() for m in mechanisms}
    if args.weights != "inverse-variance" and len(variances) > 1:
        raise CliError(
            f"{option}: the levels' noise differs, so (P) is least squares only with "
            "--weights inverse-variance"
        )
    root = str(h.ids[h.root])
    if public not in (None, [root]):
        raise CliError(f"{option}: margins allow --public root only")
    import numpy as np
    from scipy import stats

    from postdp.postprocess.table_variance import hierarchy_variances

    z = float(stats.norm.isf((1 - args.ci_level) / 2))
    return z * np.sqrt(hierarchy_variances(h, mechanisms, public_root=public is not None))


def _total_epsilon(epsilon: float, rho: float, delta: float) -> float:
    from postdp.mechanisms import Budget

    return Budget(epsilon=epsilon, rho=rho).to_approx_dp(delta)


def _check_cap(args: argparse.Namespace, ledger: _ledger.LedgerUse, mechanisms: list[Any]) -> None:
    if args.budget_cap is None:
        return
    spent = ledger.spent
    from postdp.mechanisms import Budget

    this = Budget.compose(m.privacy_cost() for m in mechanisms)
    total = _total_epsilon(spent.epsilon + this.epsilon, spent.rho + this.rho, args.delta)
    if total > args.budget_cap * (1 + 1e-12):
        raise CliError(
            f"--budget-cap {args.budget_cap:g}: the ledger {str(ledger.path)!r}"
            + "".join(f" and the older ledger {str(p)!r}" for p in ledger.also_read)
            + f" record {spent.releases} earlier release(s) of this input"
            + (f" ({spent.pending} of them still drawing or killed)" if spent.pending else "")
            + f"; with this one the budget would be epsilon = {total:.6g}"
        )


def _record(
    args: argparse.Namespace,
    loaded: Any,
    mechanisms: list[Any],
    budget: Any,
    output: Path,
    output_sha: str,
    opendp: str,
    content: str | None = None,
) -> dict[str, Any]:
    from postdp import __version__

    labels = level_labels(loaded.frame, loaded.hierarchy)
    return {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "input": "bundled:county_populations_2010" if loaded.bundled else str(loaded.path),
        "input_sha256": loaded.sha256,
        **({} if content is None else {_ledger.CONTENT_KEY: content}),
        "levels": [
            {
                "level": label,
                "mechanism": m.name,
                "epsilon": m.privacy_cost().epsilon,
                "rho": m.privacy_cost().rho,
                "sensitivity": m.sensitivity,
            }
            for label, m in zip(labels, mechanisms, strict=True)
        ],
        "budget": {"epsilon": budget.epsilon, "rho": budget.rho},
        "postprocess": args.postprocess,
        "public": args.public or [],
        "output": str(output),
        "contains_true_counts": bool(args.audit),
        "output_sha256": output_sha,
        "postdp_version": __version__,
        "opendp_version": opendp,
    }


def _report(
    args: argparse.Namespace,
    loaded: Any,
    mechanisms: list[Any],
    result: Any,
    chain: Any,
    consistent: bool | None,
    output: Path,
    ledger: _ledger.LedgerUse | None,
) -> None:
    h = loaded.hierarchy
    labels = level_labels(loaded.frame, h)
    costs = [m.privacy_cost() for m in mechanisms]
    parts = " + ".join(
        f"{label} {c.epsilon if c.rho == 0 else c.rho:g}"
        for label, c in zip(labels, costs, strict=True)
    )
    out = sys.stdout
    if args.study:
        seed = "a fresh seed" if args.seed is None else f"seed {args.seed}"
        print(
            f"study-path draw of {h.n} counts ({args.mechanism}, numpy, {seed}) to {output}: "
            "NOT a private release, do not publish it (its rows say path = study)",
            file=out,
        )
    else:
        print(
            f"released {h.n} noisy counts ({args.mechanism}, secure OpenDP release path) to "
            f"{output}",
            file=out,
        )
    if consistent is not None:
        print(
            f"post-processing: {','.join(map(str, chain.steps))}; column released_count is "
            + (
                "consistent (every parent = sum of its children)"
                if consistent
                else "NOT consistent (end the chain with a projection, or a projection and round)"
            ),
            file=out,
        )
    if args.public and args.allow_derived_public:
        from postdp.cli._common import public_ids
        from postdp.hierarchy import derived_public

        derived = derived_public(h, public=public_ids(args, h) or [])
        if derived:
            print(f"also published exactly (derived from --public): {', '.join(derived)}")
    if args.audit:
        print(
            f"postdp release: warning: --audit: {output} holds the TRUE counts (column "
            "true_count; its rows say path = ...+audit): confidential, never publish it",
            file=sys.stderr,
        )
    heading = "privacy budget spent" if not args.study else "budget this design would spend"
    print(f"{heading}: {result.budget}", file=out)
    print(f"  sequential composition over {h.n_levels} levels: {parts}", file=out)
    if result.budget.rho > 0:
        eps = result.budget.to_approx_dp(args.delta)
        print(f"  as (epsilon, delta)-DP: epsilon = {eps:.6g} at delta = {args.delta:g}")
    if ledger is not None:
        spent = ledger.spent
        total = _total_epsilon(
            spent.epsilon + result.budget.epsilon, spent.rho + result.budget.rho, args.delta
        )
        print(
            f"ledger {ledger.path}: {spent.releases} earlier release(s) of this input; "
            f"cumulative budget now epsilon = {total:.6g}"
            + ("" if result.budget.rho == 0 and spent.rho == 0 else f" at delta = {args.delta:g}")
        )

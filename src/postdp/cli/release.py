"""``postdp release``: noisy counts of every node of a hierarchy, post-processed, recorded."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from postdp import privacy
from postdp.cli import _ledger
from postdp.cli._common import add_interval, interval_seed, prepare, public_ids
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
    table_solvers,
    wants_table,
    whole,
)
from postdp.cli._release_margins import hierarchy_margins, table_margins
from postdp.cli._release_report import (
    check_cap,
    hierarchy_record,
    hierarchy_report,
    report_ledger,
    table_record,
    table_report,
)
from postdp.postprocess.estimators import BAYES, estimator

__all__ = ["add_parser", "run"]

DESCRIPTION = f"""\
Add differentially private noise to every count of a hierarchy (the bundled 2010 county
populations by default, or a CSV with id/parent/count columns), one mechanism per level,
and write the noisy table as CSV with a `path` column saying how it was drawn.

With --table (a bundled 2020 P1 table) or --input WIDE.csv --categories TREE.csv, release a
table instead: a histogram per geounit, measured by a workload (--design, or the detailed
cells at every level), written in long form (geo_id, parent, category, noisy_count and,
with --postprocess one of {table_solvers()},
optionally followed by ",round" (not after an integral one), released_count) or wide form
(--format wide).

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
        f"family by family, for --postprocess {BAYES.name} (MCMC on the published counts only). "
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


@dataclass
class _Release:
    """A release checked and ready to draw, hierarchy or table: its input files and their
    hash, the mechanisms its budget cap counts, and the parts that differ by kind (the
    content key of the ledger, the draw and the frame written, the ledger record, the
    public ids of the statement, the closing report)."""

    inputs: list[Any]
    sha256: str
    mechanisms: list[Any]
    content: Callable[[], str]
    draw: Callable[[bool], Any]  # secure -> the frame to write
    record: Callable[[Path, str, str, str | None], dict[str, Any]]
    report: Callable[[Path, bool, Any], None]
    budget: Callable[[], Any]  # the budget spent, once drawn
    derived: list[str] = field(default_factory=list)
    public: list[str] | None = None


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate every option and input, check every output path, draw, post-process,
    record and write atomically: nothing that can fail on the user's input fails after
    the noise is drawn."""
    _check_options(args)
    release = _table(args, state) if wants_table(args) else _hierarchy(args, state)
    secure = not args.study
    opendp = ""
    if secure:
        from postdp.mechanisms.release import opendp_version

        opendp = opendp_version()  # fails here, not after drawing, if OpenDP is missing
    content = release.content() if secure else None
    output, ledger = _ledger.release_outputs(
        args, release.inputs, release.sha256, secure=secure, state=state, content=content
    )
    if ledger is not None:
        check_cap(args, ledger, release.mechanisms)

    state.phase = "drawing the noise"
    frame = release.draw(secure)

    state.phase = f"writing {output}"
    state.pending = [str(output)]
    _ledger.publish(
        output,
        frame,
        ledger,
        lambda digest: release.record(output, digest, opendp, content),
        lambda entry: privacy.statement(
            entry,
            secure=secure,
            derived=release.derived,
            public=release.public,
            ledger=ledger,
        ),
        done=lambda: state.written_now(str(output)),
        overwrite=args.overwrite,
    )
    release.report(output, secure, ledger)
    if ledger is not None:
        report_ledger(args, ledger, release.budget())
    return 0


def _hierarchy(args: argparse.Namespace, state: RunState) -> _Release:
    """A hierarchy release: one mechanism per level, a post-processing chain (or the
    Bayesian rule that runs alone, :data:`~postdp.postprocess.estimators.BAYES`), --keep
    columns and the intervals, every one checked here."""
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
    from postdp.postprocess import (
        PostProcessChain,
        inverse_variance_weights,
        is_consistent,
        parse_steps,
    )

    with flag("--postprocess", args.postprocess):
        steps = parse_steps(args.postprocess)
    # a release rule that runs alone is the only step (parse_steps refuses it among others)
    bayes = len(steps) == 1 and estimator(steps[0].name) is BAYES
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
            f"--uncertainty posterior: the credible intervals are for --postprocess {BAYES.name}"
        )
    if args.uncertainty == "replicates" and bayes:
        raise CliError(f"--uncertainty replicates: use --uncertainty posterior with {BAYES.name}")
    margin = hierarchy_margins(args, h, mechanisms, public) if args.uncertainty == "gls" else None
    design = None
    if args.uncertainty == "replicates":
        from postdp.analysis import ReleaseDesign

        with flag("--postprocess", args.postprocess):
            design = ReleaseDesign(
                h, mechanisms, args.postprocess, public=public, weights=args.weights
            )
    drawn: dict[str, Any] = {}

    def draw(secure: bool) -> Any:
        from postdp.tables import add_noise

        result = add_noise(h, mechanisms, secure=secure, rng=None if secure else args.seed)
        drawn["result"] = result
        table = result.to_frame(include_truth=args.audit, study=args.study)
        if chain.steps:
            state.phase = "post-processing"
            released = chain(result.values, rng=None if secure else args.seed)
            drawn["consistent"] = is_consistent(released, h)
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
        return table

    derived = []
    if public:
        from postdp.hierarchy import derived_public

        derived = derived_public(h, public=public)
    return _Release(
        [loaded.path],
        loaded.sha256,
        mechanisms,
        lambda: privacy.hierarchy_content(h),
        draw,
        lambda output, digest, opendp, content: hierarchy_record(
            args, loaded, mechanisms, drawn["result"].budget, output, digest, opendp, content
        ),
        lambda output, secure, ledger: hierarchy_report(
            args,
            loaded,
            mechanisms,
            drawn["result"],
            chain,
            drawn.get("consistent"),
            output,
        ),
        lambda: drawn["result"].budget,
        derived,
        list(public or []),
    )


def _table(args: argparse.Namespace, state: RunState) -> _Release:
    """A table release: a histogram per geounit measured by a workload (--design, or the
    detailed cells at every level), one post-processing step (optionally ``,round``), the
    long or wide form, and the intervals, every one checked here."""
    import numpy as np

    from postdp.analysis import ReleaseDesign
    from postdp.cli._tables import (
        check_step_fits,
        check_steps,
        flag_design,
        load_table,
        long_form,
        wide_form,
        workload,
    )

    state.phase = "reading the table"
    loaded = load_table(args)
    table = loaded.table
    state.phase = "checking the options"
    work = workload(args, table)
    step, rounded = check_steps(args.postprocess)
    check_step_fits(args, table, work, step)
    with flag_design(args):
        design = ReleaseDesign(table, work, args.postprocess)
    if rounded and args.uncertainty is not None:
        raise CliError(
            f"--uncertainty {args.uncertainty}: the intervals are for real-valued releases; "
            "drop ',round' from --postprocess to get them"
        )
    shape = (table.geography.n, table.categories.n)
    margin = table_margins(args, step, design.projector, work, shape)

    def draw(secure: bool) -> Any:
        from postdp.tables import category_matrix, measure

        measured = measure(  # OpenDP, as the record says (postdp measure: the exact sampler)
            table, work, secure=secure, rng=None if secure else args.seed,
            sampler="opendp" if secure else None,
        )  # fmt: skip
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
        return frame

    return _Release(
        loaded.paths,
        loaded.sha256,
        [m.mechanism for m in work.measurements if m.mechanism],
        lambda: privacy.table_content(table),
        draw,
        lambda output, digest, opendp, content: table_record(
            args, loaded, work, output, digest, opendp, content
        ),
        lambda output, secure, ledger: table_report(args, loaded, work, output, secure),
        lambda: work.budget,
    )


class _BayesChain:
    """Seed 003's release rule over the whole hierarchy (the registry's
    :data:`~postdp.postprocess.estimators.BAYES`, run by
    :func:`postdp.bayes.bayes_release_hierarchy`), shaped like a post-processing chain for
    the release command (the chain layer cannot reach the Bayesian one)."""

    steps = (BAYES.name,)

    def __init__(self, h: Any, mechanisms: list[Any]) -> None:
        self.h, self.mechanisms = h, mechanisms

    def __call__(self, values: Any, *, rng: Any = None) -> Any:
        from postdp.bayes import bayes_release_hierarchy

        return bayes_release_hierarchy(values, self.h, self.mechanisms)


def _bayes_chain(args: argparse.Namespace, h: Any, mechanisms: list[Any], public: Any) -> Any:
    """Checks for the release rule :data:`~postdp.postprocess.estimators.BAYES`, before
    anything is drawn."""
    from postdp.mechanisms import Geometric

    name = BAYES.name
    if not all(isinstance(m, Geometric) for m in mechanisms):
        raise CliError(
            f"--postprocess {name}: [wang2021]'s release needs --mechanism geometric; got "
            f"{args.mechanism}"
        )
    if public is not None:
        raise CliError(f"--postprocess {name}: public nodes are not supported by this release")
    if args.weights != "equal":
        raise CliError(f"--weights: applies to projections, not to --postprocess {name}")
    return _BayesChain(h, mechanisms)

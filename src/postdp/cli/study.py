"""``postdp study``: the accuracy study of the 2020 persons design on a synthetic population
(study path; :func:`postdp.analysis.accuracy_study`)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

from postdp.cli import _dask, _measure_inputs
from postdp.cli._io import RunState, check_output_dir
from postdp.cli._options import (
    CliError,
    add_output_options,
    flag,
    fraction,
    ids,
    run_bars,
    whole,
)
from postdp.cli._report import add_report_option, check_report, print_written, write_study

__all__ = ["add_parser", "run"]

STRATEGY = "pl94-2020-persons"
#: The DHC persons design: each draw held to a PL94 release of its own of the same persons.
DHC = "dhc-2020-persons"


def _default_estimators() -> dict[str, str]:
    """The estimators of a study by default, per strategy (the DHC's BLUE-then-restore
    needs (P)'s design, some 6.6 GB on a county of 690 persons: named, not by default)."""
    from postdp.postprocess.estimators import BLUE_RESTORE_2020, TOPDOWN_2020

    both = f"{TOPDOWN_2020.name};{BLUE_RESTORE_2020.name}"
    return {STRATEGY: both, DHC: TOPDOWN_2020.name}


DESCRIPTION = """\
An accuracy study of the 2020 redistricting persons design (the production workload and
budget, pl94-2020-persons) on a synthetic population (--synthetic: state FIPS codes):
--draws independent noisy measurement sets on the study path (numpy's generator, seeded
by --seed; nothing is published), every estimator of --estimators run on the same draws,
and each release scored against the truth with the Census Bureau's summary metrics (MAE,
RMSE, mean algebraic error, MALPE, MAPE, median APE, share over 10%, TVD) by query,
geographic level and size bin, and the 5-point / 95% reliability threshold of the block
groups. The first estimator is the reference: differences.csv holds each other's paired
difference to it with its standard error and 95% interval. Every option is checked, the
truth built and every estimator prepared before the first draw; the folder is written only
when every draw is scored. --report FILE.html adds a page with a verdict per estimator.
The draws are scored one after another, on --workers local processes, or as Dask tasks
with --scheduler; each draw has its own streams, so the study is the same either way.
Several states are one study of those states under one nation, or with --by-state one
study per state (DIR/SS/), run one after another with one state's truth in memory.

With --strategy dhc-2020-persons the study is of the 2020 DHC persons design (1,227,744
cells a geounit) on the synthetic persons with ages, sexes and relationships: each draw
holds a PL94 release of its own of the same persons (the pl94-2020-persons design drawn on
the tabulation geography and post-processed by topdown-2020, as the production held the
published redistricting release), and the releases are scored on the DHC's marginals
(--queries: marginal expressions of its schema; default total, sex * age, age, relgq) at
its eight levels; the headlines and figures are of single years of age by sex. No
reliability threshold (the P2 groups are the redistricting file's). Memory: a draw's
noisy answers (1.9 million a geounit) and one release of 1.2 million cells a geounit.
"""


def add_parser(commands: Any) -> None:
    """Register the ``study`` subcommand."""
    parser = commands.add_parser(
        "study",
        help="accuracy of estimators on the same draws of the 2020 design (synthetic truth)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--synthetic",
        type=ids,
        nargs="+",
        action="extend",
        required=True,
        metavar="STATES",
        help="state FIPS codes of the synthetic persons population (--synthetic 10,11)",
    )
    parser.add_argument(
        "--population-seed", type=whole(0, 2**32 - 1), default=0, help="seed of the population"
    )
    parser.add_argument(
        "--population-scale",
        type=fraction,
        default=1.0,
        metavar="FRACTION",
        help="a miniature population, in (0, 1]: every county's population times FRACTION",
    )
    parser.add_argument(
        "--strategy",
        default=STRATEGY,
        choices=(STRATEGY, DHC),
        help=f"the design studied: {STRATEGY} (the 2020 redistricting persons design) or "
        f"{DHC} (the 2020 DHC persons design, each draw held to a PL94 release of its own "
        "of the same persons)",
    )
    parser.add_argument(
        "--estimators",
        metavar="NAME[;NAME...]",
        help="table estimators separated by ';', each optionally followed by ',round' "
        "(e.g. 'topdown-2020;blue-restore,round;project'); the first is the reference "
        f"(default {_default_estimators()[STRATEGY]}; with --strategy {DHC}, "
        f"{_default_estimators()[DHC]})",
    )
    parser.add_argument("--draws", type=whole(2, 10**6), default=20, help="measurement sets")
    parser.add_argument("--seed", type=whole(0, 2**63 - 1), default=0, help="the study's seed")
    parser.add_argument(
        "--queries",
        metavar="Q[;Q...]",
        help="summary queries separated by ';' (default all; e.g. 'total;hispanic'); with "
        f"--strategy {DHC}, marginals of its schema (default 'total;sex * age;age;relgq')",
    )
    parser.add_argument(
        "--facilities",
        metavar="SOURCE",
        help="the 2020 structural constraints every draw carries (the production facility "
        "bounds: group-quarters persons at least the facilities, none where there is no "
        "facility or housing unit, no minors in nursing facilities), as 'synthetic' (derived "
        "from the --synthetic population) or a CSV/Parquet file of block facilities as "
        "postdp measure reads it; held by topdown-2020 and the restorations "
        "(blue-restore...), ignored by the estimators that hold no bounds (default none); "
        f"with --strategy {DHC}, 'synthetic' only: the group-quarters bounds by the 24 "
        "detailed types, met by record switching, and the PL94 releases held carry the "
        "facility bounds of the same persons",
    )
    parser.add_argument(
        "--by-state",
        action="store_true",
        help="study each state of --synthetic on its own (a nation of that one state, as "
        "each of the headline studies), one after another with one state's truth in memory "
        "at a time: DIR/SS/ per state, and --report FILE.html writes FILE-SS.html per state "
        "(default: one study of the states together, under one nation)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="score the draws on Dask, one task per draw: 'local' (a LocalCluster of "
        "--workers processes) or a scheduler address such as tcp://host:8786; the study is "
        "the same for any scheduler",
    )
    parser.add_argument(
        "--workers",
        type=whole(1, 1024),
        default=1,
        help="processes, each scoring whole draws (local ones, or a LocalCluster's with "
        "--scheduler local)",
    )
    parser.add_argument("--output-dir", default="study", metavar="DIR", help="the study's folder")
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    add_report_option(parser)
    add_output_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Check every option, build the truth and the designs, check the folder, run the
    draws, then write."""
    from postdp.analysis import HeldRelease, ReleaseDesign, marginal_queries, summary_queries
    from postdp.data import synthetic_dhc_population
    from postdp.nmf import synthetic_population
    from postdp.tables import load_strategy
    from postdp.tables.strategies import DHC_LEVELS

    if not args.no_figures and importlib.util.find_spec("matplotlib") is None:
        raise CliError("figures need matplotlib (pip install 'postdp[plots]'); or --no-figures")
    args.synthetic = [code for word in args.synthetic for code in word]
    if len(set(args.synthetic)) != len(args.synthetic):
        raise CliError(f"--synthetic {','.join(args.synthetic)!r}: a state is named twice")
    dhc = args.strategy == DHC
    if args.estimators is None:
        args.estimators = _default_estimators()[args.strategy]
    names = [e.strip() for e in args.estimators.split(";")]
    if not all(names) or len(set(names)) != len(names):
        raise CliError(f"--estimators {args.estimators!r}: distinct names separated by ';'")
    strategy = load_strategy(args.strategy)
    queries = None
    if args.queries is not None:
        queries = [q.strip() for q in args.queries.split(";")]
        if dhc:
            with flag("--queries", args.queries):
                marginal_queries(strategy.schema, queries=queries)
        else:
            known = list(summary_queries(strategy.schema))
            unknown = [q for q in queries if q not in known]
            if unknown:
                raise CliError(
                    f"--queries {args.queries!r}: unknown {unknown}; choose from {'; '.join(known)}"
                )
    shown_query = "total"
    if dhc:
        chosen = [m.name for m in marginal_queries(strategy.schema, queries=queries)]
        shown_query = "sex * age" if "sex * age" in chosen else chosen[0]
    if dhc and args.facilities not in (None, "synthetic"):
        raise CliError(
            f"--facilities {args.facilities!r}: a DHC study's facilities are 'synthetic' "
            "(by the 24 detailed types, and their sums by major type for the PL94 releases "
            "each draw holds); a facilities file is for postdp measure"
        )
    bounding = _measure_inputs.facilities(args, strategy)  # the file checked now
    pl94 = load_strategy(STRATEGY)
    # a DHC study's PL94 releases hold the PL94 facility bounds of the same population
    held_bounding = _measure_inputs.facilities(args, pl94) if dhc else None
    groups = [[code] for code in args.synthetic] if args.by_state else [args.synthetic]
    outputs = []  # (the states, the folder, the page) of each study, checked before any draw
    for codes in groups:
        shown = str(Path(args.output_dir) / codes[0]) if args.by_state else args.output_dir
        out_dir = check_output_dir(shown, "--output-dir", inputs=[], overwrite=args.overwrite)
        own = args  # --by-state: FILE.html -> FILE-SS.html, one page per state
        if args.by_state and args.report is not None:
            own = argparse.Namespace(**{**vars(args), "report": _state_page(args.report, codes[0])})
        page = check_report(own, inputs=[], folder=out_dir)
        outputs.append((codes, out_dir, page))
    from postdp.analysis import accuracy_study
    from postdp.data import level_names

    def design_of(codes: list[str]) -> tuple[Any, Any, tuple[Any, ...], Any]:
        """The truth of ``codes``, its workload, its bounds and (the DHC's) the PL94
        release each draw holds (one state's or all's)."""
        state.phase = "building the synthetic population"
        seed, scale = args.population_seed, args.population_scale
        with flag("--synthetic", ",".join(codes)):
            persons = pl94.tabulate(synthetic_population(codes, seed=seed, scale=scale))
            truth = (
                strategy.tabulate(synthetic_dhc_population(codes, seed=seed, scale=scale))
                if dhc
                else persons
            )
        bounds: tuple[Any, ...] = ()
        held = None
        with flag("--facilities", args.facilities):
            if bounding is not None:
                bounds = tuple(bounding(truth))
            if dhc:
                own = () if held_bounding is None else tuple(held_bounding(persons))
                held = HeldRelease(persons, bounds=own)
        return truth, strategy.workload(truth), bounds, held

    first = design_of(groups[0])
    state.phase = "preparing the estimators"
    for name in names:
        with flag("--estimators", name):
            if ReleaseDesign(first[0], first[1], name, bounds=first[2]).step is None:
                raise CliError(f"--estimators {name!r}: releases no table; name an estimator")
    if args.scheduler is not None:
        state.phase = "starting the Dask workers (--scheduler)"
    client, cluster = _dask.connect(args)
    written_paths: list[str] = []
    try:
        for k, (codes, out_dir, page) in enumerate(outputs):
            truth, work, bounds, held = first if k == 0 else design_of(codes)
            first = (None, None, (), None)  # one state's truth in memory at a time
            levels = list(DHC_LEVELS) if dhc else level_names(truth.geography)
            block_groups = None  # the reliability threshold's P2 groups are PL94's
            if not dhc:
                block_groups = next(
                    (d for d, n in enumerate(levels) if n.lower() == "block group"), None
                )
            state.phase = "drawing" if len(outputs) == 1 else f"drawing state {codes[0]}"
            with run_bars(state, quiet=args.quiet) as tick:
                study = accuracy_study(
                    truth, work, names, schema=strategy.schema, draws=args.draws, rng=args.seed,
                    queries=queries, levels=levels, reliability_level=block_groups, bounds=bounds,
                    held=held, workers=1 if client is not None else args.workers, client=client,
                    progress=lambda done, total: tick("draws", done, total),
                )  # fmt: skip
            design = {
                "truth": f"synthetic population of {','.join(codes)} (seed "
                f"{args.population_seed}, scale {args.population_scale:g}): "
                f"{truth.geography.n:,} geounits",
                "workload": f"{args.strategy} ({strategy.budget})",
                "structural bounds": "none"
                if bounding is None
                else f"facility bounds ({args.facilities}): " + ", ".join(b.name for b in bounds),
                "seed": str(args.seed),
            }
            if held is not None:
                design["PL94 histograms held"] = (
                    f"a release per draw of the same persons ({STRATEGY}, topdown-2020"
                    + (", " + ", ".join(b.name for b in held.bounds) if held.bounds else "")
                    + ")"
                )
            del truth, work, bounds, held
            written = _Written(study, design, shown_query)
            shown = write_study(
                args,
                state,
                out_dir,
                page,
                written,
                manifest={
                    "command": "postdp study",
                    "synthetic": codes,
                    "population_seed": args.population_seed,
                    "population_scale": args.population_scale,
                    "strategy": args.strategy,
                    "estimators": names,
                    "draws": args.draws,
                    "seed": args.seed,
                    "queries": queries,
                    "facilities": args.facilities,
                },
            )
            written_paths += [str(p) for p in shown]
            state.written = list(written_paths)  # every state's folder, not the last one's
            prefix = f"state {codes[0]}: " if args.by_state else ""
            for line in written.summary_lines():
                print(prefix + line)
    finally:
        _dask.close_quietly(client, cluster)
    print_written([Path(p) for p in written_paths])
    return 0


def _state_page(report: str, code: str) -> str:
    """The page of one state of ``--by-state``: FILE.html -> FILE-SS.html."""
    path = Path(report)
    return str(path.with_name(f"{path.stem}-{code}{path.suffix}"))


class _Written:
    """What ``write_study`` writes of a study: its tables, figures and page."""

    def __init__(self, study: Any, design: dict[str, str], query: str = "total") -> None:
        from postdp.report import accuracy_captions

        self.study, self.design, self.query = study, design, query
        self.captions = accuracy_captions(study, query=query)

    def tables(self) -> dict[str, Any]:
        import pandas as pd

        study = self.study
        out = {
            "levels": study.summary(sizes=False),
            "summary": study.summary(),
            "per_draw": study.per_draw,
        }
        if len(study.estimators) > 1:
            out["differences"] = study.differences()
            out["level_differences"] = study.differences(sizes=False)
            out["tally"] = study.tally()
        if study.reliability:
            out["reliability"] = pd.concat(
                [r.by_bin.assign(estimator=e) for e, r in study.reliability.items()],
                ignore_index=True,
            )
        return out

    def figures(self) -> dict[str, Any]:
        from postdp.report import accuracy_figures

        return accuracy_figures(self.study, query=self.query)

    def report(self, *, figures: Any, command: str) -> Any:
        from postdp.report import accuracy_report

        return accuracy_report(
            self.study, query=self.query, design=self.design, figures=figures, command=command
        )

    def summary_lines(self) -> list[str]:
        from postdp.report import study_verdicts

        study = self.study
        lines = [
            f"studied {', '.join(study.estimators)} over {study.draws} draws (study path, "
            "synthetic truth; nothing published)"
        ]
        lines += [f"{h.label}: {h.value}" for h in study_verdicts(study, query=self.query)]
        lines += [f"reliability threshold, {e}: {r}" for e, r in study.reliability.items()]
        return lines

"""``postdp fairness``: Title I dollars and Section 203 decisions on noisy data (seed 002)."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import (
    CliError,
    add_output_options,
    flag,
    float_list,
    positive_float,
    progress,
    whole,
)
from postdp.cli._report import add_report_option, check_report, figures_from, write_report

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Measure, by Monte Carlo on the bundled real data, how noise (and a nonnegativity
post-processing) shifts Title I basic-grant allotments between school districts (SAIPE
2019, USD) or flips Voting Rights Act Section 203 decisions (2016 determinations), per
entity, with the fairness bound alpha (seed 002). Every epsilon is checked before the
first simulation; the folder is written only when every run has finished. --report
FILE.html adds a self-contained HTML page of the results.
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
        type=positive_float,
        default=6.5e9,
        help="Title I basic grants nationally, USD (a state gets its share)",
    )
    parser.add_argument(
        "--mechanism", default="laplace", choices=["laplace", "geometric"], help="noise"
    )
    parser.add_argument(
        "--epsilon",
        type=float_list(),
        default=[0.1],
        metavar="E[,E...]",
        help="one run per epsilon",
    )
    parser.add_argument(
        "--postprocess",
        default="clamp",
        metavar="STEP[,STEP...]",
        help="element-wise post-processing applied to the noisy counts before the decision: "
        "none, clamp, ramp-optimal, modified:T=<t>, round (e.g. clamp,round)",
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
    import numpy as np

    from postdp import decisions
    from postdp.data import load_section203, load_title1
    from postdp.mechanisms import Geometric, Laplace
    from postdp.postprocess import ElementwiseChain

    cls = Laplace if args.mechanism == "laplace" else Geometric
    mechanisms = []
    for e in args.epsilon:
        with flag("--epsilon", f"{e:g}"):
            mechanisms.append(cls(epsilon=e))
    with flag("--postprocess", args.postprocess):
        ElementwiseChain(mechanisms[0], args.postprocess)  # checked before any simulation
    post = args.postprocess
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
    scope = "nation" if args.state is None else args.state
    tables: dict[str, Any] = {}
    figures: list[tuple[str, Any]] = []
    lines: list[str] = []
    headlines: list[Any] = []
    if args.problem == "title1":
        table = us if args.state is None else load_title1(args.state)
        amount = args.amount * float(
            (table.poor_5_17 * table.weight).sum() / (us.poor_5_17 * us.weight).sum()
        )
        x = table.poor_5_17.to_numpy(dtype=float)
        w = table.weight.to_numpy()
        reports = []
        for e, mechanism in zip(args.epsilon, mechanisms, strict=True):
            state.phase = f"simulating Title I at epsilon {e:g}"
            with progress(f"title1 eps={e:g}", 1, quiet=args.quiet) as bar:
                rep = decisions.allotment_fairness(
                    x,
                    w,
                    mechanism,
                    amount=amount,
                    postprocess=post,
                    n_draws=args.draws,
                    rng=args.seed,
                    progress=_ticker(bar),
                )
            reports.append(rep)
            frame = rep.to_frame()
            frame.insert(0, "leaid", table.leaid.to_numpy())
            frame.insert(1, "name", table.name.to_numpy())
            frame.insert(2, "poor_5_17", x)
            tables[f"title1_{scope}_eps{e:g}.csv"] = frame
            big = int(np.argmax(x))
            headlines += _title1_headlines(e, rep, table.name.iloc[big], big)
            lines.append(
                f"Title I ({scope}, ${amount:,.0f}), {args.mechanism} eps = {e:g}, "
                f"post-processing {args.postprocess}, {args.draws} draws: alpha "
                f"${rep.alpha:,.0f}, cost of privacy ${rep.cost_of_privacy():,.0f}, largest "
                f"entity {table.name.iloc[big]!s} bias ${rep.bias[big]:,.0f}"
            )
        figures.append(("title1_bias", (reports, [f"eps = {e:g}" for e in args.epsilon], x)))
    else:
        s203 = load_section203()
        if args.state is not None:
            fips = us.loc[us["state"] == args.state, "state_fips"].iloc[0]
            s203 = s203[s203["state_fips"] == fips].reset_index(drop=True)
            if s203.empty:
                raise CliError(f"--state {args.state!r}: no Section 203 records in that state")
        data = {k: s203[k].to_numpy(dtype=float) for k in ("vacit_total", "vaclep", "illit")}
        rule = decisions.section203_rule()
        margin = decisions.section203_margin(data)
        truth = rule(data)
        for e, mechanism in zip(args.epsilon, mechanisms, strict=True):
            state.phase = f"simulating Section 203 at epsilon {e:g}"
            with progress(f"section203 eps={e:g}", 1, quiet=args.quiet) as bar:
                rep = decisions.decision_fairness(
                    data,
                    rule,
                    mechanism,
                    postprocess=post,
                    n_draws=args.draws,
                    rng=args.seed,
                    progress=_ticker(bar),
                )
            frame = rep.to_frame()
            frame.insert(0, "geoid", s203.geoid.to_numpy())
            frame.insert(1, "name", s203.name.to_numpy())
            frame.insert(2, "language", s203.language.to_numpy())
            frame.insert(3, "margin", margin)
            stem = f"section203_eps{e:g}" if args.state is None else f"section203_{scope}_eps{e:g}"
            tables[f"{stem}.csv"] = frame
            figures.append((stem, (margin, rep)))
            headlines += _section203_headlines(e, rep, truth)
            lines.append(
                f"Section 203 ({scope}), {args.mechanism} eps = {e:g}: {int(truth.sum())} true "
                f"positives of {truth.size}; mean decision error {np.abs(rep.bias).mean():.3f}, "
                f"alpha {rep.absolute_alpha:.3f}"
            )

    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state, overwrite=args.overwrite)
    try:
        for name, frame in tables.items():
            frame.to_csv(folder.file(name), index=False)
        drawn = [] if args.no_figures else _figures(folder, scope, figures)
        report = None
        if report_path is not None:
            report = _report(
                args, scope, tables, headlines, figures_from(folder.tmp, drawn, _CAPTIONS)
            )
        written = folder.commit(
            {
                "command": f"postdp fairness {args.problem}",
                "state": args.state,
                "mechanism": args.mechanism,
                "epsilon": args.epsilon,
                "postprocess": args.postprocess,
                "draws": args.draws,
                "seed": args.seed,
            }
        )
    except BaseException:
        folder.discard()
        raise
    state.written = [str(out_dir)]
    write_report(report_path, report, state, overwrite=args.overwrite)
    for line in lines:
        print(line)
    shown = [*written, *([report_path] if report_path is not None else [])]
    print("wrote: " + ", ".join(str(p) for p in shown))
    return 0


def _typed_flags(args: argparse.Namespace) -> set[str]:
    return set(getattr(args, "_typed", ()))


def _ticker(bar: Any) -> Any:
    def tick(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return tick


def _figures(folder: OutputDir, scope: str, figures: list[tuple[str, Any]]) -> list[str]:
    """Draw the figures into the folder; return their file names."""
    from postdp import plots

    names = []
    for name, payload in figures:
        if name == "title1_bias":
            ax = plots.plot_allotment_bias(*payload)
            ax.set_ylabel("bias of the allotment (USD)")
            names.append(f"title1_{scope}_bias.png")
        else:
            ax = plots.plot_decision_errors(*payload)
            names.append(f"{name}.png")
        plots.save_figure(ax, folder.file(names[-1]))
    return names


_CAPTIONS = {
    "title1": (
        "Bias of each district's allotment against its count of poor children (seed 002, Fig. 2)",
        "Bias in dollars of every school district's Title I allotment against its true "
        "count of poor children, one series per epsilon.",
        "A point above zero is a district that receives more on average than without noise. "
        "Nonnegativity post-processing moves money from large districts to small ones. "
        "Each bias is a Monte Carlo mean: its 95% interval is bias ± 1.96 SE (bias_lo, "
        "bias_hi in the table), so points within that band of zero show no detectable bias.",
    ),
    "section203": (
        "Decision error against the distance to the thresholds (seed 002, Fig. 3)",
        "Probability that the noisy Section 203 decision differs from the true one, against "
        "each record's margin to the nearest threshold.",
        "Errors concentrate near a margin of zero: records close to a threshold flip often, "
        "records far from it almost never. Each probability is a Monte Carlo frequency with "
        "standard error sqrt(p(1 - p)/draws).",
    ),
}


def _title1_headlines(e: float, rep: Any, name: str, big: int) -> list[Any]:
    import numpy as np

    from postdp.report import Headline

    floor = 1.96 * float(np.median(rep.bias_se))
    return [
        Headline(
            f"fairness bound α (ε = {e:g})",
            _dollars(rep.alpha),
            f"largest minus smallest bias of an allotment; a bias is known to ± ${floor:,.0f} "
            "(1.96 × median SE), so α below a few times that is simulation noise",
        ),
        Headline(
            f"dollars misallocated (ε = {e:g})",
            _dollars(rep.cost_of_privacy()),
            "sum of the expected losses of the districts that lose (cost of privacy, seed 002 "
            "Def. 4)",
        ),
        Headline(
            f"largest district (ε = {e:g})",
            _dollars(float(rep.bias[big])),
            f"{name}: bias ± ${1.96 * float(rep.bias_se[big]):,.0f} (95%)",
        ),
    ]


def _dollars(value: float) -> str:
    from postdp.report import format_value

    return ("−$" if value < 0 else "$") + format_value(abs(value))


def _section203_headlines(e: float, rep: Any, truth: Any) -> list[Any]:
    import numpy as np

    from postdp.report import Headline

    err = np.abs(rep.bias)
    return [
        Headline(
            f"mean decision error (ε = {e:g})",
            f"{err.mean():.3f}",
            f"probability a record's decision flips, averaged over {truth.size:,} records "
            f"({int(truth.sum()):,} covered)",
        ),
        Headline(
            f"fairness bound α (ε = {e:g})",
            f"{rep.absolute_alpha:.3f}",
            "largest minus smallest decision-error probability",
        ),
        Headline(
            f"records with errors above 0.1 (ε = {e:g})",
            f"{int((err > 0.1).sum()):,} of {truth.size:,}",
            "the ones close to a threshold",
        ),
    ]


def _report(
    args: argparse.Namespace,
    scope: str,
    tables: dict[str, Any],
    headlines: list[Any],
    figures: list[Any],
) -> Any:
    """The HTML report of a fairness run (built before the folder is moved into place)."""
    import pandas as pd

    from postdp.cli._report import command_line
    from postdp.report import Report, ReportTable

    frames = []
    for name, frame in tables.items():
        eps = name.rsplit("_eps", 1)[1].removesuffix(".csv")
        frames.append(frame.assign(epsilon=float(eps)))
    rows = pd.concat(frames, ignore_index=True)
    rows = rows.sort_values("abs_bias", ascending=False, kind="stable").reset_index(drop=True)
    title1 = args.problem == "title1"
    what = "Title I basic-grant allotments" if title1 else "Section 203 determinations"
    per = (
        "the Title I count of each district (one query, disjoint districts)"
        if title1
        else ("each of the three counts of each jurisdiction (three queries: 3 ε in all)")
    )
    return Report(
        title=f"Fairness of {what} on DP data",
        summary=(
            f"{args.draws:,} simulated releases of the bundled "
            f"{'2019 SAIPE school districts' if title1 else '2016 Section 203 records'} "
            f"({scope}), per ε; "
            "the bias of each entity's outcome with its 95% interval."
        ),
        design={
            "problem": what,
            "entities": scope,
            "mechanism": f"{args.mechanism}, ε = {', '.join(f'{e:g}' for e in args.epsilon)}",
            "post-processing": args.postprocess,
            "draws": f"{args.draws:,}",
            **({"amount": f"${args.amount:,.0f} nationally"} if title1 else {}),
        },
        privacy=(
            "Study run (numpy draws): nothing was published and no privacy was spent. Each ε "
            f"is its own design, with noise of that ε on {per}."
        ),
        headline=headlines,
        tables=[
            ReportTable(
                "Entities",
                rows,
                "One row per entity and ε, the largest |bias| first: the true outcome, its "
                "bias with the 95% interval, the disparity and the MAE.",
                source=", ".join(tables),
            )
        ],
        figures=figures,
        notes=(
            "An entity's bias is the mean of its noisy outcome minus its true outcome over "
            "the simulated releases (seed 002, Def. 2); α is the largest minus the smallest "
            "bias (Def. 3).",
            "α is a maximum over many Monte Carlo estimates, so simulation noise alone makes "
            "it positive: compare it with the floor in its card.",
        ),
        command=command_line(args),
    )

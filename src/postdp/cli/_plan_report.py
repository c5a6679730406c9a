"""The page and the words of a plan (private; ``postdp plan`` of a hierarchy or a table)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["objective_name", "plan_report", "unit_name"]


def unit_name(args: argparse.Namespace) -> str:
    """What the budget is counted in: rho for the Gaussian families, else epsilon."""
    return "rho" if args.mechanism in ("gaussian", "discrete-gaussian") else "epsilon"


def objective_name(args: argparse.Namespace) -> str:
    """The objective planned, in words."""
    if args.objective == "mae":
        return f"size-binned MAE of {args.postprocess} ({args.draws} common random draws)"
    return "weighted mean (P) variance"


def plan_report(
    args: argparse.Namespace,
    h: Any,
    plan: Any,
    table: Any,
    frontier: Any,
    subject: tuple[str, str] | None = None,
) -> Any:
    """The plan's HTML report (built before anything is written)."""
    from postdp.cli._report import command_line
    from postdp.data import level_names
    from postdp.mechanisms import Budget
    from postdp.report import Headline, Report, ReportFigure, ReportTable, budget_statement

    unit = unit_name(args)
    levels = level_names(h)
    error = "persons" if args.objective == "mae" else "persons²"
    table = table.assign(level=[levels[int(d)] for d in table["level"]])
    ratio = plan.equal_objective / plan.objective if plan.objective > 0 else float("inf")
    word, detail = plan.verdict().split(": ", 1)
    if not subject:  # a hierarchy's parts are its levels: say which is which
        detail += " (parts: " + ", ".join(f"{d} = {n}" for d, n in enumerate(levels)) + ")"
    headline = [
        Headline("verdict", word, detail),
        Headline(
            "planned split",
            ", ".join(f"{s:.3g}" for s in plan.shares),
            f"{unit} per "
            + ("query, in the order of the table below" if subject else "level, root first")
            + f"; they add up to {args.total:g}",
        ),
        Headline(
            objective_name(args),
            f"{plan.objective:.4g} {error}",
            f"the equal split gives {plan.equal_objective:.4g} {error} ({ratio:.2f}x the plan)",
        ),
    ]
    if plan.given_objective is not None:
        headline.append(Headline("--compare split", f"{plan.given_objective:.4g} {error}", ""))
    if args.objective == "mae":
        headline.append(
            Headline(
                "Monte Carlo objective",
                f"{args.draws} draws",
                "the MAE is estimated with common random draws for every split; splits whose "
                "objectives differ by less than its Monte Carlo error are equally good",
            )
        )
    tables = [
        ReportTable(
            "Plan by level",
            table,
            f"Each level's budget ({unit}), its share of the total (a fraction) and its term "
            f"of the objective at the plan ({error}).",
        )
    ]
    figures = []
    if frontier is not None:
        from postdp.plots import plot_budget_frontier

        tables.append(
            ReportTable(
                "Frontier",
                frontier,
                f"The objective ({error}) at the plan and at the equal split, by total; "
                f"budget_<d> is the {unit} the plan gives level d ("
                + ", ".join(f"{d} = {n}" for d, n in enumerate(levels))
                + ") at that total.",
            )
        )
        figures.append(
            ReportFigure.from_axes(
                plot_budget_frontier(frontier),
                title="Objective against the total budget",
                alt="The planned and the equal split's objective against the total budget.",
                caption="Exact (P) variances, no simulation: the gap between the curves is "
                "what planning buys at each total.",
            )
        )
    budget = Budget.zcdp(args.total) if unit == "rho" else Budget.pure(args.total)
    root = [str(h.ids[h.root])] if args.public == "root" else []
    return Report(
        title="Privacy budget plan",
        summary=(
            f"The split of {unit} = {args.total:g} over "
            + (subject[1] if subject else f"the {h.n_levels} levels of a {h.n:,}-node hierarchy")
            + f" ({args.mechanism} noise) that minimises the {objective_name(args)}."
        ),
        design={
            **(
                {"table": subject[0]}
                if subject
                else {"hierarchy": f"{h.n:,} nodes, {h.n_levels} levels"}
            ),
            "mechanism": args.mechanism,
            "total": f"{unit} = {args.total:g}",
            "objective": objective_name(args),
            "level weights": ", ".join(f"{w:g}" for w in args.weights)
            if args.weights
            else "the deepest level only",
            "public invariants": ", ".join(root) or "none",
        },
        privacy="Planning reads no counts"
        + (
            " (except --objective mae, a study on the true counts)"
            if args.objective == "mae"
            else ""
        )
        + " and spends nothing. "
        + budget_statement(budget, published=False, public=root).split(". ", 1)[1],
        headline=headline,
        tables=tables,
        figures=figures,
        notes=(
            "The (P) variances are exact: generalised least squares on the design, no simulation."
            if args.objective == "variance"
            else "The objective is a Monte Carlo estimate; see its card.",
        ),
        command=command_line(args),
    )

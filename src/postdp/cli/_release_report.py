"""What a release records and says (private; called by :mod:`postdp.cli.release`): the
budget cap, the ledger record, and the lines printed after a hierarchy or a table release."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from postdp import privacy
from postdp.cli._common import level_labels
from postdp.cli._options import CliError
from postdp.postprocess.estimators import estimator

__all__ = [
    "check_cap",
    "hierarchy_record",
    "hierarchy_report",
    "report_ledger",
    "table_record",
    "table_report",
    "total_epsilon",
]


def total_epsilon(epsilon: float, rho: float, delta: float) -> float:
    from postdp.mechanisms import Budget

    return Budget(epsilon=epsilon, rho=rho).to_approx_dp(delta)


def check_cap(args: argparse.Namespace, ledger: privacy.LedgerUse, mechanisms: list[Any]) -> None:
    if args.budget_cap is None:
        return
    spent = ledger.spent
    from postdp.mechanisms import Budget

    this = Budget.compose(m.privacy_cost() for m in mechanisms)
    total = privacy.over_cap(spent, this, args.budget_cap, args.delta)
    if total is not None:
        raise CliError(
            f"--budget-cap {args.budget_cap:g}: the ledger {str(ledger.path)!r}"
            + "".join(f" and the older ledger {str(p)!r}" for p in ledger.also_read)
            + f" record {spent.releases} earlier release(s) of this input"
            + (f" ({spent.pending} of them still drawing or killed)" if spent.pending else "")
            + f"; with this one the budget would be epsilon = {total:.6g}"
        )


def hierarchy_record(
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
        **({} if content is None else {privacy.CONTENT_KEY: content}),
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


def hierarchy_report(
    args: argparse.Namespace,
    loaded: Any,
    mechanisms: list[Any],
    result: Any,
    chain: Any,
    consistent: bool | None,
    output: Path,
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


def report_ledger(args: argparse.Namespace, ledger: privacy.LedgerUse, budget: Any) -> None:
    """The ledger's line of a secure release: earlier releases of the input and the budget
    spent on it with this one."""
    spent = ledger.spent
    total = total_epsilon(spent.epsilon + budget.epsilon, spent.rho + budget.rho, args.delta)
    print(
        f"ledger {ledger.path}: {spent.releases} earlier release(s) of this input; "
        f"cumulative budget now epsilon = {total:.6g}"
        + ("" if budget.rho == 0 and spent.rho == 0 else f" at delta = {args.delta:g}")
    )


def table_record(
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
        **({} if content is None else {privacy.CONTENT_KEY: content}),
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


def table_report(
    args: argparse.Namespace,
    loaded: Any,
    work: Any,
    output: Path,
    secure: bool,
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
    from postdp.cli._tables import check_steps

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

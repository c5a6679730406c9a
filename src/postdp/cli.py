"""The ``postdp`` command line.

Handlers only parse options, call the library and write files; the algorithms live in the
library. A rejected input (any :class:`postdp.errors.PostdpError`, a missing file or a
missing optional dependency) prints one line to stderr and exits with status 2; ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from postdp import __version__
from postdp.analysis import ReleaseDesign, simulate
from postdp.bayes import ExactPosterior, PosteriorSamples, exact_posterior, sample_posterior
from postdp.data import load_county_populations
from postdp.errors import PostdpError, ValidationError
from postdp.hierarchy import Hierarchy, add_noise
from postdp.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace, NoiseMechanism
from postdp.postprocess import PostProcessChain, inverse_variance_weights, is_consistent

_PURE = {"geometric": Geometric, "laplace": Laplace}
_ZCDP = {"gaussian": Gaussian, "discrete-gaussian": DiscreteGaussian}


def _values(option: str, text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise ValidationError(
            f"`{option}` must be a number or comma-separated numbers, one per level; got {text!r}"
        ) from None


def _mechanisms(args: argparse.Namespace, n_levels: int) -> list[NoiseMechanism]:
    name = args.mechanism
    if name in _PURE:
        if args.rho is not None:
            raise ValidationError(f"`--rho` applies to the Gaussian mechanisms, not to {name!r}")
        option, text = "--epsilon", args.epsilon or "1"
    else:
        if args.epsilon is not None:
            raise ValidationError(f"`--epsilon` applies to geometric and laplace, not to {name!r}")
        option, text = "--rho", args.rho or "0.5"
    params = _values(option, text)
    if len(params) == 1:
        params *= n_levels
    if len(params) != n_levels:
        raise ValidationError(
            f"`{option}` needs one value or one per level, root first ({n_levels}); "
            f"got {len(params)}: {text!r}"
        )
    sensitivity = args.sensitivity
    if name in _PURE:
        return [_PURE[name](epsilon=p, sensitivity=sensitivity) for p in params]
    return [_ZCDP[name](rho=p, sensitivity=sensitivity) for p in params]


def _read_table(args: argparse.Namespace) -> tuple[pd.DataFrame, list[str]]:
    requested = getattr(args, "keep", None)
    if args.input is None:
        table = load_county_populations()
        keep = ["name", "level"] if requested is None else requested
    else:
        path = Path(args.input)
        if not path.is_file():
            raise FileNotFoundError(f"`--input` file not found: {str(path)!r}")
        table = pd.read_csv(path, dtype={args.id: str, args.parent: str})
        keep = [] if requested is None else requested
    missing = [c for c in keep if c not in table.columns]
    if missing:
        raise ValidationError(
            f"`--keep` names columns not in the table: {', '.join(missing)}; "
            f"its columns are: {', '.join(map(str, table.columns))}"
        )
    if args.count in keep:
        raise ValidationError(f"`--keep` must not copy the true counts (column {args.count!r})")
    return table, keep


def _public(text: str | None, h: Hierarchy) -> list[str] | None:
    """Ids named by --public; "root" names the root unless a node is called that."""
    if text is None:
        return None
    root = str(h.ids[h.root])
    ids = set(map(str, h.ids))
    return [
        root if part == "root" and "root" not in ids else part for part in text.split(",") if part
    ]


def _level_labels(table: pd.DataFrame, h: Hierarchy) -> list[str]:
    labels = [f"level {d}" for d in range(h.n_levels)]
    if "level" in table.columns:
        for d, nodes in enumerate(h.levels):
            names = table["level"].iloc[nodes].astype(str).unique()
            if len(names) == 1:
                labels[d] = names[0]
    return labels


def _cmd_release(args: argparse.Namespace) -> int:
    table, keep = _read_table(args)
    h = Hierarchy.from_frame(table, id=args.id, parent=args.parent, count=args.count)
    mechanisms = _mechanisms(args, h.n_levels)
    secure = args.seed is None
    public = _public(args.public, h)
    weights = (
        inverse_variance_weights(h, mechanisms) if args.weights == "inverse-variance" else None
    )
    # prepared before any noise is drawn, so bad steps or an infeasible --public cost nothing
    chain = PostProcessChain(args.postprocess, h, mechanisms, public=public, weights=weights)
    if not secure:
        print(
            "postdp: warning: --seed draws the noise on the study path (numpy), which is "
            "reproducible but NOT safe for publishing; omit --seed for a secure release",
            file=sys.stderr,
        )
    result = add_noise(h, mechanisms, secure=secure, rng=args.seed)
    frame = result.to_frame(include_truth=args.audit)
    consistent = None
    if chain.steps:
        released = chain(result.values, rng=None if secure else args.seed)
        consistent = is_consistent(released, h)
        position = list(frame.columns).index("noisy_count") + 1
        frame.insert(position, "released_count", released)
    for position, column in enumerate(keep, start=2):
        frame.insert(position, column, table[column].to_numpy())
    output = Path(args.output)
    frame.to_csv(output, index=False)

    labels = _level_labels(table, h)
    costs = [m.privacy_cost() for m in mechanisms]
    parts = " + ".join(
        f"{label} {c.epsilon if c.rho == 0 else c.rho:g}"
        for label, c in zip(labels, costs, strict=True)
    )
    path_name = "secure OpenDP release path" if secure else "study path, seed " + str(args.seed)
    print(f"released {h.n} noisy counts ({args.mechanism}, {path_name}) to {output}")
    if consistent is not None:
        print(
            f"post-processing: {','.join(map(str, chain.steps))}; column released_count is "
            + (
                "consistent (every parent = sum of its children)"
                if consistent
                else "NOT consistent (end the chain with a projection, or a projection and round)"
            )
        )
    if args.audit:
        print("note: --audit wrote the true counts too (column true_count): do not publish it")
    print(f"privacy budget spent: {result.budget}")
    print(f"  sequential composition over {h.n_levels} levels: {parts}")
    if result.budget.rho > 0:
        eps = result.budget.to_approx_dp(args.delta)
        print(f"  as (epsilon, delta)-DP: epsilon = {eps:.6g} at delta = {args.delta:g}")
    return 0


def _progress(label: str) -> Callable[[int, int], None] | None:
    """A one-line progress bar on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        filled = round(30 * done / total)
        end = "\n" if done == total else ""
        print(
            f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    return report


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)  # needs pyarrow: pip install 'postdp[parquet]'
    else:
        frame.to_csv(path, index=False)


def _cmd_audit(args: argparse.Namespace) -> int:
    table, _ = _read_table(args)
    h = Hierarchy.from_frame(table, id=args.id, parent=args.parent, count=args.count)
    counts = h.counts
    assert counts is not None  # from_frame with a count column
    mechanisms = _mechanisms(args, h.n_levels)
    design = ReleaseDesign(
        h, mechanisms, args.postprocess, public=_public(args.public, h), weights=args.weights
    )
    entities = (
        [e for e in args.entities.split(",") if e]
        if args.entities
        else [str(h.ids[i]) for i in h.leaves[np.argsort(counts[h.leaves], kind="stable")[:3]]]
    )
    shifts = _values("--shifts", args.shifts) if args.shifts else []
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".parquet" if args.format == "parquet" else ".csv"
    options = {
        "n_draws": args.draws,
        "batch": args.batch,
        "workers": args.workers,
        "bins": args.bins,
    }
    base = simulate(design, rng=args.seed, raw=entities, progress=_progress("audit"), **options)
    frame = base.to_frame()
    frame.insert(1, "depth", h.depth)
    _write_table(frame, out / f"audit{suffix}")
    written = [out / f"audit{suffix}"]

    shifted_runs, labels = [], []
    for shift in shifts:
        truth = h.aggregate(counts + shift)  # shift the leaves; parents stay their sums
        run = base if shift == 0 else simulate(design, truth, rng=args.seed, **options)
        shifted_runs.append(run)
        labels.append(f"leaves + {shift:g}")
    if shifted_runs:
        rows = [
            pd.DataFrame(
                {
                    "id": list(r.ids),
                    "leaf_shift": sh,
                    "truth": r.truth,
                    "bias": r.bias,
                    "bias_lo": r.confidence_interval()[0],
                    "bias_hi": r.confidence_interval()[1],
                }
            )
            for r, sh in zip(shifted_runs, shifts, strict=True)
        ]
        _write_table(pd.concat(rows, ignore_index=True), out / f"shifted{suffix}")
        written.append(out / f"shifted{suffix}")

    family = None
    if all(m.family == "laplace" for m in mechanisms) and h.n_levels > 1:
        scales = np.array([m.noise_scale for m in mechanisms])[h.depth]
        w1 = base.wasserstein_to_laplace(scales)
        parents = h.parent[h.parent >= 0]
        kids = np.flatnonzero(h.parent >= 0)
        per_child = pd.DataFrame({"parent": parents, "w1": w1[kids], "scale": scales[kids]})
        fam = per_child.groupby("parent")
        family = pd.DataFrame(
            {
                "parent": [str(h.ids[p]) for p in fam.size().index],
                "n": fam.size().to_numpy(),
                "mean_w1": fam["w1"].mean().to_numpy(),
                "scale": fam["scale"].first().to_numpy(),
            }
        )
        _write_table(family, out / f"wasserstein{suffix}")
        written.append(out / f"wasserstein{suffix}")

    if not args.no_figures:
        from postdp import plots

        ax = plots.plot_residuals(base)
        plots.save_figure(ax, out / "residuals.png")
        written.append(out / "residuals.png")
        if shifted_runs:
            ax = plots.plot_bias_by_count(shifted_runs, labels)
            plots.save_figure(ax, out / "bias_by_count.png")
            written.append(out / "bias_by_count.png")
        if family is not None:
            leaf_scale = float(family["scale"].iloc[-1])
            ax = plots.plot_wasserstein(family["n"], family["mean_w1"], scale=leaf_scale)
            plots.save_figure(ax, out / "wasserstein.png")
            written.append(out / "wasserstein.png")

    worst = int(np.argmax(np.abs(base.bias) / np.maximum(base.bias_se, 1e-300)))
    print(
        f"audited {h.n} nodes over {base.n_draws} draws (study path, seed {args.seed}); "
        f"design: {args.mechanism} noise, post-processing "
        f"{','.join(map(str, design.steps)) or 'none'}; budget {design.budget}"
    )
    print(
        f"largest |bias|/SE: node {h.ids[worst]!r}, bias {base.bias[worst]:.4g} "
        f"(SE {base.bias_se[worst]:.2g}); mean MSE {base.mse.mean():.4g}"
    )
    print("wrote: " + ", ".join(str(p) for p in written))
    return 0


def _cmd_posterior(args: argparse.Namespace) -> int:
    components = [int(v) for v in _values("--components", args.components)]
    total = int(args.total) if args.total is not None else sum(components)
    eps_comp = _values("--epsilon", args.epsilon)
    if len(eps_comp) == 1:
        eps_comp *= len(components)
    if len(eps_comp) != len(components):
        raise ValidationError(
            f"`--epsilon` needs one value or one per component ({len(components)}); "
            f"got {len(eps_comp)}"
        )
    eps_total = float(args.epsilon_total) if args.epsilon_total is not None else eps_comp[0]
    g_total = Geometric(epsilon=eps_total)
    g_comp = [Geometric(epsilon=e) for e in eps_comp]
    method = args.method
    if method == "auto":
        method = "exact" if len(components) <= 3 else "mcmc"
    print(
        f"posterior of the true counts given released components {components} and total "
        f"{total} (epsilon: total {eps_total:g}, components "
        f"{', '.join(f'{e:g}' for e in eps_comp)}), {method}"
    )
    posterior: ExactPosterior | PosteriorSamples
    if method == "exact":
        posterior = exact_posterior(
            components,
            total,
            total_mechanism=g_total,
            component_mechanisms=g_comp,
            window=args.window,
        )
        top = posterior.top(args.top)
        print(f"{args.top} most probable configurations:")
        print(top.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        intervals = []
        for s in range(len(components)):
            values, probs = posterior.marginal(s)
            cum = np.cumsum(probs)
            tail = (1 - args.level) / 2
            intervals.append(
                (
                    values[np.searchsorted(cum, tail)],
                    values[min(np.searchsorted(cum, 1 - tail), values.size - 1)],
                )
            )
    else:
        posterior = sample_posterior(
            components,
            total,
            total_mechanism=g_total,
            component_mechanisms=g_comp,
            n_draws=args.draws,
            chains=args.chains,
            rng=args.seed,
        )
        print(
            f"MCMC: {args.chains} chains x {args.draws} draws; min ESS "
            f"{posterior.ess.min():.0f}, max R-hat {posterior.rhat.max():.3f}, "
            f"acceptance {posterior.acceptance:.2f}"
        )
        intervals = [tuple(row) for row in posterior.credible_intervals(args.level)]
    print(f"{args.level:.0%} credible intervals:")
    for s, (lo, hi) in enumerate(intervals):
        print(f"  N{s + 1}: [{lo:g}, {hi:g}]  (released {components[s]})")
    if args.plot:
        from postdp import plots

        axes = plots.plot_posterior(posterior, released=components)
        plots.save_figure(axes[0], args.plot)
        print(f"wrote {args.plot}")
    return 0


def _cmd_fairness(args: argparse.Namespace) -> int:
    from postdp import decisions
    from postdp.data import load_section203, load_title1
    from postdp.postprocess import clamp, modified_postprocess

    eps = _values("--epsilon", args.epsilon or "0.1")
    mechanism_cls = Laplace if args.mechanism == "laplace" else Geometric
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def post(values: np.ndarray) -> np.ndarray:
        if args.postprocess == "clamp":
            return np.asarray(clamp(values), dtype=np.float64)
        if args.postprocess.startswith("modified:T="):
            return modified_postprocess(values, float(args.postprocess.split("=", 1)[1]))
        return np.asarray(values, dtype=np.float64)

    if (
        args.postprocess != "none"
        and args.postprocess != "clamp"
        and not (args.postprocess.startswith("modified:T="))
    ):
        raise ValidationError(
            f"`--postprocess` must be none, clamp or modified:T=<t>; got {args.postprocess!r}"
        )
    if args.problem == "title1":
        us = load_title1()
        table = us if args.state is None else load_title1(args.state)
        scope = "nation" if args.state is None else args.state
        budget = args.budget * float(
            (table.poor_5_17 * table.weight).sum() / (us.poor_5_17 * us.weight).sum()
        )
        x = table.poor_5_17.to_numpy(dtype=float)
        w = table.weight.to_numpy()
        reports = []
        for e in eps:
            rep = decisions.allotment_fairness(
                x,
                w,
                mechanism_cls(epsilon=e),
                budget=budget,
                postprocess=post,
                n_draws=args.draws,
                rng=args.seed,
            )
            reports.append(rep)
            frame = rep.to_frame()
            frame.insert(0, "leaid", table.leaid.to_numpy())
            frame.insert(1, "name", table.name.to_numpy())
            frame.insert(2, "poor_5_17", x)
            path = out / f"title1_{scope}_eps{e:g}.csv"
            frame.to_csv(path, index=False)
            written.append(path)
            nyc = int(np.argmax(x))
            print(
                f"Title I ({scope}, ${budget:,.0f}), {args.mechanism} eps = {e:g}, "
                f"post-processing {args.postprocess}, {args.draws} draws: alpha ${rep.alpha:,.0f}, "
                f"cost of privacy ${rep.cost_of_privacy():,.0f}, largest entity "
                f"{table.name.iloc[nyc]!s} bias ${rep.bias[nyc]:,.0f}"
            )
        if not args.no_figures:
            from postdp import plots

            ax = plots.plot_allotment_bias(reports, [f"eps = {e:g}" for e in eps], x)
            ax.set_ylabel("bias of the allotment (USD)")
            plots.save_figure(ax, out / f"title1_{scope}_bias.png")
            written.append(out / f"title1_{scope}_bias.png")
    else:
        s203 = load_section203()
        data = {k: s203[k].to_numpy(dtype=float) for k in ("vacit_total", "vaclep", "illit")}
        rule = decisions.section203_rule()
        margin = decisions.section203_margin(data)
        for e in eps:
            rep = decisions.decision_fairness(
                rule,
                data,
                mechanism_cls(epsilon=e),
                postprocess=post,
                n_draws=args.draws,
                rng=args.seed,
            )
            frame = rep.to_frame()
            frame.insert(0, "geoid", s203.geoid.to_numpy())
            frame.insert(1, "name", s203.name.to_numpy())
            frame.insert(2, "language", s203.language.to_numpy())
            frame.insert(3, "margin", margin)
            path = out / f"section203_eps{e:g}.csv"
            frame.to_csv(path, index=False)
            written.append(path)
            truth = rule(data)
            print(
                f"Section 203, {args.mechanism} eps = {e:g}: {int(truth.sum())} true positives "
                f"of {truth.size}; mean decision error {np.abs(rep.bias).mean():.3f}, alpha "
                f"{rep.absolute_alpha:.3f}"
            )
            if not args.no_figures:
                from postdp import plots

                ax = plots.plot_decision_errors(margin, rep)
                plots.save_figure(ax, out / f"section203_eps{e:g}.png")
                written.append(out / f"section203_eps{e:g}.png")
    print("wrote: " + ", ".join(str(p) for p in written))
    return 0


def _table_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        metavar="CSV",
        help="count table (default: bundled 2010 Census nation > state > county populations)",
    )
    parser.add_argument("--id", default="id", metavar="COL", help="column of node ids")
    parser.add_argument(
        "--parent",
        default="parent",
        metavar="COL",
        help="column of parent ids (empty for the root)",
    )
    parser.add_argument("--count", default="count", metavar="COL", help="column of true counts")


def _mechanism_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mechanism", default="geometric", choices=[*_PURE, *_ZCDP], help="noise mechanism"
    )
    parser.add_argument(
        "--epsilon",
        metavar="E[,E...]",
        help="epsilon of geometric/laplace: "
        "one value for every level or one per level, root first (default 1)",
    )
    parser.add_argument(
        "--rho",
        metavar="R[,R...]",
        help="rho of the Gaussian mechanisms: one value or one per level, root first (default 0.5)",
    )
    parser.add_argument(
        "--sensitivity",
        type=float,
        default=1.0,
        help="sensitivity of each count (an integer for integer mechanisms)",
    )


def _postprocess_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--postprocess",
        default="none",
        metavar="STEP[,STEP...]",
        help="post-processing written to column released_count, steps applied in order: "
        "'project' (P, L2 projection onto parent = sum of children), 'project-nonneg' (P+, "
        "also v >= 0), 'topdown' (census TopDown: fix the root, project each family onto its "
        "parent level by level), 'clamp' (max(0, x)), 'ramp-optimal' (max(x - a*, 0), "
        "a* = b W(1/2)), 'modified:T=<t>' (seed 002 modified post-processing), 'round' "
        "(unbiased integers; consistent if the input is). Example: project-nonneg,round",
    )
    parser.add_argument(
        "--public",
        metavar="root|ID[,ID...]",
        help="nodes whose true counts are published as invariants (e.g. 'root' for the "
        "national total, or a list of state ids); the post-processing keeps them exactly",
    )
    parser.add_argument(
        "--weights",
        default="equal",
        choices=["equal", "inverse-variance"],
        help="weights of the projection: equal (the seeds' (P)/(P+)) or 1/Var of each level's "
        "noise (generalised least squares, better when levels get different budgets)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``postdp`` command (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="postdp",
        description="Publish differentially private counts over a hierarchy and audit them.",
    )
    parser.add_argument("--version", action="version", version=f"postdp {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    release = commands.add_parser(
        "release",
        help="add DP noise to a hierarchical count table and write the noisy table",
        description=(
            "Add differentially private noise to every count of a hierarchy (the bundled 2010 "
            "county populations by default, or a CSV with id/parent/count columns), one "
            "mechanism per level, and write the noisy table as CSV. The true counts are not "
            "written unless --audit is given. Without --seed the noise comes from OpenDP's "
            "exact, cryptographically seeded samplers (needs the 'release' extra)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _table_options(release)
    release.add_argument(
        "--keep",
        type=lambda s: [c for c in s.split(",") if c],
        metavar="COLS",
        help="comma-separated columns to copy into the output (default: "
        "name,level for the bundled data, none for --input)",
    )
    _mechanism_options(release)
    release.add_argument(
        "--delta",
        type=float,
        default=1e-10,
        help="delta at which a zCDP budget is also reported as (epsilon, delta)",
    )
    release.add_argument(
        "--seed",
        type=int,
        help="draw on the reproducible study path with this seed (not safe for publishing)",
    )
    release.add_argument(
        "--output",
        "-o",
        default="release.csv",
        metavar="CSV",
        help="where to write the noisy table",
    )
    _postprocess_options(release)
    release.add_argument(
        "--audit",
        action="store_true",
        help="also write the true counts (for auditing, never for publishing)",
    )
    release.set_defaults(func=_cmd_release)

    audit = commands.add_parser(
        "audit",
        help="measure the bias, variance and error law of a release design by Monte Carlo",
        description=(
            "Run a release design (noise per level + post-processing chain) many times on the "
            "true counts (the bundled 2010 counties by default, or a CSV) on the reproducible "
            "study path, and write per-node error statistics (bias, variance, MSE, MAE with "
            "confidence intervals, quantiles), the bias on shifted counts (seed 000 Fig. 4), "
            "the Wasserstein distance of the errors to the Laplace noise by family size "
            "(Fig. 5), and figures, including error histograms before and after "
            "post-processing for chosen nodes (Fig. 1)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _table_options(audit)
    _mechanism_options(audit)
    _postprocess_options(audit)
    audit.add_argument("--draws", type=int, default=2000, help="number of simulated releases")
    audit.add_argument(
        "--batch",
        type=int,
        default=1000,
        help="draws processed at once (bounds memory; results do not depend on it)",
    )
    audit.add_argument(
        "--workers", type=int, default=1, help="local processes (results do not depend on it)"
    )
    audit.add_argument("--seed", type=int, default=0, help="seed of the whole simulation")
    audit.add_argument(
        "--bins",
        type=int,
        default=400,
        help="histogram bins per node (quantiles and Wasserstein distances)",
    )
    audit.add_argument(
        "--entities",
        metavar="ID[,ID...]",
        help="nodes whose error histograms before/after post-processing are "
        "drawn (default: the three smallest leaves)",
    )
    audit.add_argument(
        "--shifts",
        default="0,10,100",
        metavar="S[,S...]",
        help="add these to every true count and re-run (bias vs count); '' for none",
    )
    audit.add_argument(
        "--output-dir", default="audit", metavar="DIR", help="folder for the tables and figures"
    )
    audit.add_argument(
        "--format",
        default="csv",
        choices=["csv", "parquet"],
        help="table format (parquet needs pyarrow)",
    )
    audit.add_argument("--no-figures", action="store_true", help="write the tables only")
    audit.set_defaults(func=_cmd_audit)

    posterior = commands.add_parser(
        "posterior",
        help="posterior of true counts given Bayesian-post-processed released counts",
        description=(
            "Given released components and their total produced by the Bayesian "
            "post-processing of Wang and Reiter (double geometric noise, independence "
            "flavor), compute the posterior of the true counts under uniform priors: exactly "
            "on a grid for a few components, or by MCMC (with ESS and R-hat) for many. Prints "
            "the most probable configurations and credible intervals; --plot draws the "
            "marginal posteriors."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    posterior.add_argument(
        "--components", required=True, metavar="N1[,N2...]", help="released component counts"
    )
    posterior.add_argument(
        "--total", type=int, help="released total (default: the sum of the components)"
    )
    posterior.add_argument(
        "--epsilon",
        default="1",
        metavar="E[,E...]",
        help="epsilon of the components' noise: one value or one per component",
    )
    posterior.add_argument(
        "--epsilon-total",
        metavar="E",
        help="epsilon of the total's noise (default: the first component's)",
    )
    posterior.add_argument(
        "--method",
        default="auto",
        choices=["auto", "exact", "mcmc"],
        help="exact grid (auto: up to 3 components) or MCMC",
    )
    posterior.add_argument(
        "--window",
        type=int,
        help="half-width of the exact grid around each released count (default: the noise's reach)",
    )
    posterior.add_argument("--draws", type=int, default=2000, help="MCMC draws per chain")
    posterior.add_argument("--chains", type=int, default=4, help="MCMC chains")
    posterior.add_argument("--seed", type=int, default=0, help="MCMC seed")
    posterior.add_argument("--top", type=int, default=10, help="configurations to print (exact)")
    posterior.add_argument("--level", type=float, default=0.95, help="credible level")
    posterior.add_argument("--plot", metavar="PNG", help="write the marginal posteriors here")
    posterior.set_defaults(func=_cmd_posterior)

    fairness = commands.add_parser(
        "fairness",
        help="bias and decision errors of Title I allotments or Section 203 decisions on DP data",
        description=(
            "Measure, by Monte Carlo on the bundled real data, how noise (and a nonnegativity "
            "post-processing) shifts Title I basic-grant allotments between school districts "
            "(SAIPE 2019, USD) or flips Voting Rights Act Section 203 decisions (2016 "
            "determinations), per entity, with the fairness bound alpha (seed 002)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    fairness.add_argument("problem", choices=["title1", "section203"])
    fairness.add_argument(
        "--state",
        metavar="XX",
        help="Title I: one state's districts, e.g. NY (default: the nation)",
    )
    fairness.add_argument(
        "--budget",
        type=float,
        default=6.5e9,
        help="Title I basic grants nationally, USD (a state gets its share)",
    )
    fairness.add_argument(
        "--mechanism",
        default="laplace",
        choices=["laplace", "geometric"],
        help="noise on each count",
    )
    fairness.add_argument("--epsilon", metavar="E[,E...]", help="one run per epsilon (default 0.1)")
    fairness.add_argument(
        "--postprocess",
        default="clamp",
        metavar="none|clamp|modified:T=t",
        help="applied to the noisy counts before the decision",
    )
    fairness.add_argument("--draws", type=int, default=2000, help="Monte Carlo draws")
    fairness.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    fairness.add_argument(
        "--output-dir", default="fairness", metavar="DIR", help="folder for the tables and figures"
    )
    fairness.add_argument("--no-figures", action="store_true", help="write the tables only")
    fairness.set_defaults(func=_cmd_fairness)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``postdp`` command line; return the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on a rejected input.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except (
        PostdpError,
        FileNotFoundError,
        ImportError,
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
    ) as exc:
        if args.debug:
            raise
        print(f"postdp: error: {exc}", file=sys.stderr)
        return 2
    return status

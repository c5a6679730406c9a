"""``postdp posterior``: the posterior of true counts behind Bayesian-post-processed counts."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from postdp.cli._io import RunState, check_output_file, write_atomic
from postdp.cli._options import (
    CliError,
    add_output_options,
    flag,
    float_list,
    int_list,
    positive_float,
    probability,
    whole,
)

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Given released components and their total produced by the Bayesian post-processing of
Wang and Reiter (double geometric noise, independence flavor), compute the posterior of the
true counts under uniform priors: exactly on a grid for a few components, or by MCMC (with
ESS and R-hat) for many. Prints the most probable configurations and credible intervals;
--plot draws the marginal posteriors.
"""


def add_parser(commands: Any) -> None:
    """Register the ``posterior`` subcommand."""
    parser = commands.add_parser(
        "posterior",
        help="posterior of true counts given Bayesian-post-processed released counts",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--components",
        required=True,
        type=int_list(),
        metavar="N1[,N2...]",
        help="released component counts (nonnegative whole numbers)",
    )
    parser.add_argument(
        "--total",
        type=whole(0),
        help="released total (the sum of the components when not given)",
    )
    parser.add_argument(
        "--epsilon",
        type=float_list(),
        default=[1.0],
        metavar="E[,E...]",
        help="epsilon of the components' noise: one value or one per component",
    )
    parser.add_argument(
        "--epsilon-total",
        type=positive_float,
        metavar="E",
        help="epsilon of the total's noise (the first component's when not given)",
    )
    parser.add_argument(
        "--method",
        default="auto",
        choices=["auto", "exact", "mcmc"],
        help="exact grid (auto: up to 3 components) or MCMC",
    )
    parser.add_argument(
        "--window",
        type=whole(1, 10**6),
        help="half-width of the exact grid around each released count (the noise's reach "
        "when not given)",
    )
    parser.add_argument("--draws", type=whole(10, 10**8), default=2000, help="MCMC draws per chain")
    parser.add_argument("--chains", type=whole(2, 1000), default=4, help="MCMC chains")
    parser.add_argument("--seed", type=whole(0, 2**63 - 1), default=0, help="MCMC seed")
    parser.add_argument(
        "--top", type=whole(1, 1000), default=10, help="configurations to print (exact)"
    )
    parser.add_argument("--level", type=probability, default=0.95, help="credible level")
    parser.add_argument("--plot", metavar="PNG", help="write the marginal posteriors here")
    add_output_options(parser, quiet=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Validate, check the plot path, compute, print, write the plot atomically."""

    from postdp.bayes import ExactPosterior, PosteriorSamples, exact_posterior, sample_posterior
    from postdp.mechanisms import Geometric

    components = args.components
    total = args.total if args.total is not None else sum(components)
    if total != sum(components):
        raise CliError(
            f"--total {total}: the released components add up to {sum(components)}; the "
            "Bayesian post-processing releases components that sum to the released total"
        )
    eps_comp = list(args.epsilon)
    if len(eps_comp) == 1:
        eps_comp *= len(components)
    if len(eps_comp) != len(components):
        raise CliError(
            f"--epsilon {','.join(f'{e:g}' for e in args.epsilon)!r}: needs one value or one per "
            f"component ({len(components)}); got {len(args.epsilon)}"
        )
    eps_total = args.epsilon_total if args.epsilon_total is not None else eps_comp[0]
    with flag("--epsilon-total", f"{eps_total:g}"):
        g_total = Geometric(epsilon=eps_total)
    g_comp = []
    for e in eps_comp:
        with flag("--epsilon", f"{e:g}"):
            g_comp.append(Geometric(epsilon=e))
    method = args.method
    if method == "auto":
        method = "exact" if len(components) <= 3 else "mcmc"
    if method == "exact" and len(components) > 6:
        raise CliError(
            f"--method exact: a grid over {len(components)} components is too large; use mcmc"
        )
    plot = None
    if args.plot:
        if importlib.util.find_spec("matplotlib") is None:
            raise CliError(f"--plot {args.plot!r}: needs matplotlib; pip install 'postdp[plots]'")
        plot = check_output_file(args.plot, "--plot", inputs=[], overwrite=args.overwrite)
        if plot.suffix.lower() not in ("", ".png", ".svg", ".pdf"):
            raise CliError(f"--plot {args.plot!r}: give a .png, .svg or .pdf file")

    state.phase = "computing the posterior"
    print(
        f"posterior of the true counts given released components {components} and total "
        f"{total} (epsilon: total {eps_total:g}, components "
        f"{', '.join(f'{e:g}' for e in eps_comp)}), {method}"
    )
    posterior: ExactPosterior | PosteriorSamples
    if method == "exact":
        with flag("--window", args.window):
            posterior = exact_posterior(
                components,
                total,
                total_mechanism=g_total,
                component_mechanisms=g_comp,
                window=args.window,
            )
        top = posterior.top(args.top)
        print(f"{len(top)} most probable configurations:")
        print(top.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        ci = posterior.credible_intervals(args.level)
        intervals = list(zip(ci.low, ci.high, strict=True))
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
        ci = posterior.credible_intervals(args.level)
        intervals = list(zip(ci.low, ci.high, strict=True))
    print(f"{100 * args.level:g}% credible intervals:")
    for s, (lo, hi) in enumerate(intervals):
        print(f"  N{s + 1}: [{lo:g}, {hi:g}]  (released {components[s]})")
    if plot is not None:
        from postdp import plots

        state.phase = f"writing {plot}"
        axes = plots.plot_posterior(posterior, released=components)
        kind = plot.suffix.lstrip(".").lower() or "png"
        write_atomic(
            plot,
            lambda tmp: plots.save_figure(axes[0], tmp, format=kind),
            overwrite=args.overwrite,
        )
        state.written.append(str(plot))
        print(f"wrote {plot}")
    return 0

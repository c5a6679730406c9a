"""Figures of the seeds' types, drawn with matplotlib (imported lazily; ``plots`` extra).

Every function takes ``ax=None`` (a new figure when omitted), draws, and returns the Axes;
none calls ``show()``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp._typing import ArrayLike
from postdp.analysis import MonteCarloResult, ps_wasserstein_to_laplace
from postdp.bayes import ExactPosterior, PosteriorSamples
from postdp.decisions import FairnessReport
from postdp.mechanisms import Geometric, Laplace, NoiseMechanism, Restriction
from postdp.postprocess import (
    clamp_bias,
    modified_bias,
    optimal_ramp_shift,
    translated_ramp_bias,
)

__all__ = [
    "plot_allotment_bias",
    "plot_bias_by_count",
    "plot_decision_errors",
    "plot_errors_by_group",
    "plot_fairness_comparison",
    "plot_nonneg_bias",
    "plot_posterior",
    "plot_residuals",
    "plot_wasserstein",
    "save_figure",
]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "plots need matplotlib; install it with: pip install 'postdp[plots]'"
        ) from exc
    _, new_ax = plt.subplots(figsize=(6.4, 4.0))
    return new_ax


def save_figure(
    ax: Any, path: str | os.PathLike[str], *, dpi: int = 110, format: str | None = None
) -> None:
    """Write the figure holding ``ax`` to ``path`` (format from the suffix) and close it.

    Parameters
    ----------
    ax : matplotlib Axes
    path : str or path-like
    dpi : int, default 110
    format : str, optional
        Image format (``"png"``, ``"svg"``, ``"pdf"``); from the suffix of ``path`` when
        not given.

    Returns
    -------
    None

    Examples
    --------
    >>> import tempfile, pathlib, matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_wasserstein([2, 4], [1.0, 0.5])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     save_figure(ax, pathlib.Path(d) / "w.png")
    ...     (pathlib.Path(d) / "w.png").exists()
    True
    """
    import matplotlib.pyplot as plt

    ax.figure.savefig(path, dpi=dpi, bbox_inches="tight", format=format)
    plt.close(ax.figure)


def plot_nonneg_bias(
    mechanism: NoiseMechanism,
    q: ArrayLike | None = None,
    *,
    temperatures: Sequence[float] = (0.5, 2.0),
    ax: Any = None,
) -> Any:
    """Bias against the true value for the nonnegativity steps (seed 004 §4, seed 002 Fig. 8).

    Draws the exact bias of the ramp max(0, x), the translated ramp at the optimal shift
    α* = b W(1/2), restriction (which costs 2ε, seed 004 Prop. 2) and the modified
    post-processing at each temperature T.

    Parameters
    ----------
    mechanism : Laplace or Geometric
    q : array_like, optional
        True values (default: 0 to 8 noise scales).
    temperatures : sequence of float, default (0.5, 2.0)
        Temperatures of the modified post-processing to draw.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from postdp import Laplace
    >>> ax = plot_nonneg_bias(Laplace.from_scale(2.0), temperatures=[1.0])
    >>> len(ax.get_lines())
    5
    """
    if not isinstance(mechanism, Laplace | Geometric):
        raise TypeError(
            f"the nonnegativity biases are for Laplace or Geometric noise; got "
            f"{type(mechanism).__name__}"
        )
    scale = float(mechanism.noise_scale)
    grid = (
        np.linspace(0.0, 8.0 * scale, 161)
        if q is None
        else np.asarray(q, dtype=np.float64).reshape(-1)
    )
    if mechanism.discrete:
        grid = np.unique(np.round(grid))
    star = optimal_ramp_shift(scale)
    ax = _axes(ax)
    ax.plot(grid, clamp_bias(grid, mechanism), label="ramp max(0, x)")
    ax.plot(
        grid, translated_ramp_bias(grid, mechanism, star), label=f"translated ramp, α* = {star:.3g}"
    )
    ax.plot(grid, Restriction(mechanism).bias(grid), label="restriction (costs 2ε)")
    for t in temperatures:
        ax.plot(
            grid,
            modified_bias(grid, mechanism, float(t)),
            linestyle="--",
            label=f"modified, T = {t:g}",
        )
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xlabel("true value q")
    ax.set_ylabel("bias  E[output] - q")
    ax.set_title(f"{type(mechanism).__name__} noise, scale {scale:g}")
    ax.legend(fontsize="small")
    return ax


def plot_residuals(result: MonteCarloResult, *, ax: Any = None) -> Any:
    """Error distributions before and after post-processing (seed 000 Fig. 1 type).

    One pair of step histograms per node in ``result.raw_ids`` (simulate with ``raw=``):
    the noise alone (dashed) and the released error (solid), as densities.

    Parameters
    ----------
    result : MonteCarloResult
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"], [4, 1, 3])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg", public="root"),
    ...                n_draws=500, rng=0, raw=["a"])
    >>> len(plot_residuals(res).get_lines())
    2
    """
    if not len(result.raw_ids):
        raise ValueError("`result` has no raw histograms: simulate with raw=[ids]")
    ax = _axes(ax)
    position = {str(i): k for k, i in enumerate(result.ids)}
    for k, node in enumerate(result.raw_ids):
        i = position[str(node)]
        edges = result.edges[i]
        width = edges[1] - edges[0]
        after = result.counts[i, 1:-1] / (result.n_draws * width)
        before = result.raw_counts[k, 1:-1] / (result.n_draws * width)
        (line,) = ax.step(edges[:-1], after, where="post", label=f"{node}: released")
        ax.step(
            edges[:-1],
            before,
            where="post",
            linestyle="--",
            color=line.get_color(),
            label=f"{node}: noise only",
        )
    lows, highs = [], []
    for node in result.raw_ids:  # zoom on the bins that were hit
        i = position[str(node)]
        hit = np.flatnonzero(result.counts[i, 1:-1] > 0)
        if hit.size:
            lows.append(result.edges[i, max(hit[0] - 2, 0)])
            highs.append(result.edges[i, min(hit[-1] + 3, result.edges.shape[1] - 1)])
    if lows:
        ax.set_xlim(min(lows), max(highs))
    ax.set_xlabel("error (released - true)")
    ax.set_ylabel("density")
    ax.set_title("Error before and after post-processing")
    ax.legend(fontsize="small")
    return ax


def plot_bias_by_count(
    results: Sequence[MonteCarloResult], labels: Sequence[str], *, ax: Any = None
) -> Any:
    """Bias of every node against its true count, one series per run (seed 000 Fig. 4 type).

    Parameters
    ----------
    results : sequence of MonteCarloResult
        E.g. the same design on counts shifted by 0, 10, 100 (bias fades as counts grow).
    labels : sequence of str
        One per result.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"], [4, 1, 3])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=500, rng=0)
    >>> len(plot_bias_by_count([res], ["shift 0"]).collections)
    1
    """
    if len(results) != len(labels):
        raise ValueError("`results` and `labels` must have the same length")
    ax = _axes(ax)
    for result, label in zip(results, labels, strict=True):
        ax.scatter(np.maximum(result.truth, 0.5), result.bias, s=6, alpha=0.6, label=label)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("true count")
    ax.set_ylabel("bias  E[released] - true")
    ax.set_title("Bias against true count")
    ax.legend(fontsize="small")
    return ax


def plot_wasserstein(
    sizes: ArrayLike, distances: ArrayLike, *, scale: float | None = None, ax: Any = None
) -> Any:
    """Wasserstein distance between errors and the Laplace noise against family size n
    (seed 000 Fig. 5 type), with the (P_S) theory curve when ``scale`` is given.

    Parameters
    ----------
    sizes : array_like
        n of each family (number of children sharing a parent's total).
    distances : array_like
        Measured W1 distances (e.g. mean over the family of
        ``MonteCarloResult.wasserstein_to_laplace``).
    scale : float, optional
        Laplace scale λ for the theory curve (Thm 12-14, :func:`ps_wasserstein_to_laplace`).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_wasserstein([2, 5, 20], [2.4, 1.1, 0.3], scale=10.0)
    >>> len(ax.get_lines())
    1
    """
    ax = _axes(ax)
    n = np.asarray(sizes, dtype=np.float64)
    ax.scatter(n, np.asarray(distances, dtype=np.float64), s=10, label="Monte Carlo")
    if scale is not None:
        grid = np.unique(np.geomspace(2, max(3.0, float(n.max())), 40).round()).astype(int)
        theory = [ps_wasserstein_to_laplace(int(k), float(scale), points=1 << 13) for k in grid]
        ax.plot(grid, theory, color="k", label="(P_S) theory, Thm 12")
    ax.set_xscale("log")
    ax.set_xlabel("family size n")
    ax.set_ylabel("W1(error, Laplace)")
    ax.set_title("Distance of the post-processed error to the Laplace noise")
    ax.legend(fontsize="small")
    return ax


def plot_posterior(
    posterior: ExactPosterior | PosteriorSamples,
    *,
    released: Sequence[int] | None = None,
    axes: Any = None,
) -> Any:
    """Marginal posteriors of each true count and of the total (seed 003 Fig. 2 type).

    Parameters
    ----------
    posterior : ExactPosterior or PosteriorSamples
    released : sequence of int, optional
        Released components, marked on their panels.
    axes : sequence of matplotlib Axes, optional
        One per component plus one for the total (a new row of panels when omitted).

    Returns
    -------
    ndarray of matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from postdp import Geometric
    >>> from postdp.bayes import exact_posterior
    >>> g = Geometric(1.0)
    >>> post = exact_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g, window=10)
    >>> plot_posterior(post, released=[3, 4]).shape
    (3,)
    """
    if isinstance(posterior, ExactPosterior):
        S = len(posterior.grids)
        panels = [posterior.marginal(s) for s in range(S)] + [posterior.total_marginal()]
    else:
        S = posterior.samples.shape[-1]
        panels = [posterior.marginal(s) for s in range(S)]
        totals = posterior.samples.sum(axis=-1).ravel()
        values, counts = np.unique(totals, return_counts=True)
        panels.append((values, counts / counts.sum()))
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, S + 1, figsize=(3.2 * (S + 1), 3.0), squeeze=False)
        axes = axes[0]
    axes = np.asarray(axes)
    names = [f"N{s + 1}" for s in range(S)] + ["N (total)"]
    for k, (ax, (values, probs)) in enumerate(zip(axes, panels, strict=True)):
        ax.bar(values, probs, width=0.9, color="0.35")
        seen = values[probs > 1e-4 * probs.max()]
        ax.set_xlim(seen.min() - 1.5, seen.max() + 1.5)
        if released is not None:
            mark = released[k] if k < S else sum(released)
            ax.axvline(mark, color="tab:red", linewidth=1, label="released")
        ax.set_xlabel(names[k])
        ax.set_ylabel("posterior probability" if k == 0 else "")
    axes[0].set_title("Marginal posteriors of the true counts", loc="left", fontsize="medium")
    return axes


def plot_allotment_bias(
    reports: Sequence[FairnessReport],
    labels: Sequence[str],
    sizes: ArrayLike,
    *,
    ax: Any = None,
) -> Any:
    """Bias of each entity's allotment against its size, one series per setting (seed 002
    Fig. 2 type: small districts over-allotted, large ones under-allotted).

    Parameters
    ----------
    reports : sequence of FairnessReport
        E.g. one per epsilon, with the bias in dollars.
    labels : sequence of str
    sizes : array_like, shape (n,)
        Entity sizes for the x axis (e.g. the formula children), sorted inside.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rep = FairnessReport(np.zeros(3), np.array([5.0, 0.0, -5.0]), np.ones(3), np.ones(3), 10)
    >>> len(plot_allotment_bias([rep], ["eps 0.1"], [1, 10, 100]).get_lines())  # + zero line
    2
    """
    if len(reports) != len(labels):
        raise ValueError("`reports` and `labels` must have the same length")
    ax = _axes(ax)
    order = np.argsort(np.asarray(sizes, dtype=np.float64), kind="stable")
    for rep, label in zip(reports, labels, strict=True):
        ax.plot(np.arange(order.size), rep.bias[order], linewidth=0.8, label=label)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xlabel("entities, smallest to largest")
    ax.set_ylabel("bias of the allotment")
    ax.set_title("Allotment bias by entity size")
    ax.legend(fontsize="small")
    return ax


def plot_decision_errors(margin: ArrayLike, report: FairnessReport, *, ax: Any = None) -> Any:
    """Decision-error probability against the distance to the rule's thresholds (seed 002
    Fig. 3 type: errors peak near the thresholds).

    Parameters
    ----------
    margin : array_like, shape (n,)
        Relative distance of each entity to flipping its true decision.
    report : FairnessReport
        From :func:`postdp.decisions.decision_fairness`.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rep = FairnessReport(np.ones(3), np.array([-0.4, -0.1, 0.0]), np.zeros(3),
    ...                      np.zeros(3), 10)
    >>> len(plot_decision_errors([0.01, 0.5, 3.0], rep).collections)
    1
    """
    ax = _axes(ax)
    ax.scatter(np.maximum(np.asarray(margin, dtype=np.float64), 1e-4), np.abs(report.bias), s=8)
    ax.set_xscale("log")
    ax.set_xlabel("relative distance to the threshold")
    ax.set_ylabel("decision-error probability |B|")
    ax.set_title("Decision errors against distance to the thresholds")
    return ax


def plot_fairness_comparison(
    labels: Sequence[str], reports: Sequence[FairnessReport], *, axes: Any = None
) -> Any:
    """Fairness bound α and mean absolute error of several mitigations side by side (seed 002
    Figs. 6 and 9 type).

    Parameters
    ----------
    labels : sequence of str
    reports : sequence of FairnessReport
    axes : pair of matplotlib Axes, optional

    Returns
    -------
    ndarray of two matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rep = FairnessReport(np.zeros(2), np.array([1.0, -1.0]), np.ones(2), np.ones(2), 10)
    >>> plot_fairness_comparison(["P", "proxy"], [rep, rep]).shape
    (2,)
    """
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 2, figsize=(8.0, 3.2))
    axes = np.asarray(axes)
    alphas = [r.alpha for r in reports]
    maes = [float(r.mae.mean()) for r in reports]
    axes[0].bar(labels, alphas, color="0.35")
    axes[0].set_ylabel("fairness bound α")
    axes[1].bar(labels, maes, color="0.6")
    axes[1].set_ylabel("mean absolute error")
    for ax, values in zip(axes, (alphas, maes), strict=True):
        for i, v in enumerate(values):
            ax.annotate(f"{v:.3g}", (i, v), ha="center", va="bottom", fontsize="small")
    return axes


def plot_errors_by_group(report: FairnessReport, groups: Sequence[str], *, ax: Any = None) -> Any:
    """Decision errors of entities grouped by the truth values of the composed predicates
    (seed 002 Figs. 4-5 type: for P1 ∧ P2 the (True, True) group pays most, Thm 7).

    Parameters
    ----------
    report : FairnessReport
        Of the composed rule.
    groups : sequence of str, length n
        Group label of each entity, e.g. "P1=T, P2=F".
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> rep = FairnessReport(np.ones(4), np.array([-0.3, -0.2, 0.1, 0.05]), np.zeros(4),
    ...                      np.zeros(4), 10)
    >>> ax = plot_errors_by_group(rep, ["TT", "TT", "FF", "FF"])
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['FF', 'TT']
    """
    labels = np.asarray(list(groups), dtype=object)
    if labels.size != report.bias.size:
        raise ValueError("`groups` needs one label per entity")
    ax = _axes(ax)
    names = sorted(set(labels.tolist()))
    for k, name in enumerate(names):
        values = np.abs(report.bias[labels == name])
        ax.scatter(np.full(values.size, k) + np.linspace(-0.15, 0.15, values.size), values, s=10)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("decision-error probability |B|")
    ax.set_title("Decision errors by truth values of the predicates")
    return ax

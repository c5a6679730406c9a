"""Figures of release audits: nonnegativity biases ([mcglinchey2020]), errors before and after
post-processing ([zhu2021] Fig. 1), bias against count (Fig. 4), Wasserstein distance by
family size (Fig. 5); for tables, errors against population size and by diversity, and
estimators compared level by level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike
from postdp.analysis import MonteCarloResult, ps_wasserstein_to_laplace
from postdp.errors import ValidationError
from postdp.mechanisms import Geometric, Laplace, NoiseMechanism, Restriction
from postdp.plots._common import _axes, _label
from postdp.postprocess import (
    clamp_bias,
    modified_bias,
    optimal_ramp_shift,
    translated_ramp_bias,
)

__all__ = [
    "plot_bias_by_count",
    "plot_diversity_errors",
    "plot_errors_by_size",
    "plot_estimator_comparison",
    "plot_nonneg_bias",
    "plot_residuals",
    "plot_wasserstein",
]


def plot_nonneg_bias(
    mechanism: NoiseMechanism,
    *,
    q: ArrayLike | None = None,
    temperatures: Sequence[float] = (0.5, 2.0),
    ax: Any = None,
) -> Any:
    """Bias against the true value for the nonnegativity steps ([mcglinchey2020] §4,
    [fioretto2021] Fig. 8).

    Draws the exact bias of the ramp max(0, x), the translated ramp at the optimal shift
    α* = b W(1/2), restriction (which costs 2ε, [mcglinchey2020] Prop. 2) and the modified
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
    star = optimal_ramp_shift(mechanism)
    ax = _axes(ax)
    ax.plot(grid, clamp_bias(grid, mechanism), label="ramp max(0, x)")
    ax.plot(
        grid,
        translated_ramp_bias(grid, mechanism, alpha=star),
        label=f"translated ramp, α* = {star:.3g}",
    )
    ax.plot(grid, Restriction(mechanism).bias(grid), label="restriction (costs 2ε)")
    for t in temperatures:
        ax.plot(
            grid,
            modified_bias(grid, mechanism, temperature=float(t)),
            linestyle="--",
            label=f"modified, T = {t:g}",
        )
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    _label(
        ax,
        "true value q",
        "bias  E[output] - q",
        f"{type(mechanism).__name__} noise, scale {scale:g}",
        legend=True,
    )
    return ax


def plot_residuals(result: MonteCarloResult, *, ax: Any = None) -> Any:
    """Error distributions before and after post-processing ([zhu2021] Fig. 1 type).

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
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"], [4, 1, 3])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg", public="root"),
    ...                n_draws=500, rng=0, raw=["a"])
    >>> len(plot_residuals(res).get_lines())
    2
    """
    if not len(result.raw_ids):
        raise ValidationError("`result` has no raw histograms: simulate with raw=[ids]")
    ax = _axes(ax)
    position = {str(i): k for k, i in enumerate(result.ids)}
    grid = np.linspace(-1.0, 1.0, result.counts.shape[1] - 1)  # bins equal bins, each node's
    for k, node in enumerate(result.raw_ids):  # range [-half_range, half_range]
        i = position[str(node)]
        edges = grid * result.half_range[i]
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
            lows.append(grid[max(hit[0] - 2, 0)] * result.half_range[i])
            highs.append(grid[min(hit[-1] + 3, grid.size - 1)] * result.half_range[i])
    if lows:
        ax.set_xlim(min(lows), max(highs))
    _label(
        ax,
        "error (released - true)",
        "density",
        "Error before and after post-processing",
        legend=True,
    )
    return ax


def plot_bias_by_count(
    results: Sequence[MonteCarloResult], labels: Sequence[str], *, ax: Any = None
) -> Any:
    """Bias against the true count, one series per run ([zhu2021] Fig. 4 type), as binned
    means with 95% intervals so that runs on shifted counts do not hide one another.

    The nodes of each run are grouped into bins of the true count (powers of 10^(1/3), with
    0 in the first); each point is a bin's mean bias at its mean count, with ±1.96 x the
    standard error of that mean (from the nodes' Monte Carlo SEs, taken as independent).

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
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"], [4, 1, 3])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=500, rng=0)
    >>> ax = plot_bias_by_count([res], ["shift 0"])
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['shift 0']
    """
    if len(results) != len(labels):
        raise ValidationError("`results` and `labels` must have the same length")
    ax = _axes(ax)
    for result, label in zip(results, labels, strict=True):
        truth = np.maximum(np.asarray(result.truth, dtype=np.float64), 0.5)
        bins = np.floor(3.0 * np.log10(truth)).astype(np.int64)
        _, which = np.unique(bins, return_inverse=True)
        size = np.bincount(which).astype(np.float64)
        x = np.bincount(which, weights=truth) / size
        mean = np.bincount(which, weights=result.bias) / size
        se = np.sqrt(np.bincount(which, weights=result.bias_se**2)) / size
        ax.errorbar(x, mean, yerr=1.96 * se, marker="o", markersize=3, capsize=2, label=label)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xscale("log")
    _label(
        ax,
        "true count (bins of 10^(1/3))",
        "mean bias  E[released] - true",
        "Bias against true count (binned means, 95% intervals)",
        legend=True,
    )
    return ax


def plot_wasserstein(
    sizes: ArrayLike,
    distances: ArrayLike,
    *,
    mechanism: Laplace | None = None,
    reference: bool = False,
    ax: Any = None,
) -> Any:
    """Wasserstein distance between errors and the Laplace noise against family size n
    ([zhu2021] Fig. 5 type), with the (P_S) theory curve when ``mechanism`` is given.

    Parameters
    ----------
    sizes : array_like
        n of each family (number of children sharing a parent's total).
    distances : array_like
        Measured W1 distances (e.g. mean over the family of
        ``MonteCarloResult.wasserstein_to_laplace``).
    mechanism : Laplace, optional
        The noise of the theory curve (Thm 12-14, :func:`ps_wasserstein_to_laplace`).
    reference : bool, default False
        The design does not meet the theorem's hypotheses ((P_S): each family projected on
        its parent's public total): draw the curve dashed and label it a reference for that
        other design, not a prediction for this one.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> ax = plot_wasserstein([2, 5, 20], [2.4, 1.1, 0.3], mechanism=Laplace.from_scale(10.0))
    >>> len(ax.get_lines())
    1
    """
    ax = _axes(ax)
    n = np.asarray(sizes, dtype=np.float64)
    ax.scatter(n, np.asarray(distances, dtype=np.float64), s=10, label="Monte Carlo")
    if mechanism is not None:
        grid = np.unique(np.geomspace(2, max(3.0, float(n.max())), 40).round()).astype(int)
        theory = [ps_wasserstein_to_laplace(int(k), mechanism, points=1 << 13) for k in grid]
        if reference:
            label = "reference: (P_S) with the parent public, Thm 12 (not this design)"
            ax.plot(grid, theory, color="0.45", linestyle="--", label=label)
        else:
            ax.plot(grid, theory, color="k", label="(P_S) theory, Thm 12")
    ax.set_xscale("log")
    _label(
        ax,
        "family size n",
        "W1(error, Laplace)",
        "Distance of the post-processed error to the Laplace noise",
        legend=True,
    )
    return ax


def plot_errors_by_size(result: Any, by_size: pd.DataFrame, table: Any, *, ax: Any = None) -> Any:
    """Each geounit's error of its total population against its true total, per level.

    One measure throughout, the mean absolute error: points are every geounit's MAE of
    its released total over the draws (a table design's :func:`postdp.simulate` result);
    lines join each level's MAE per size bin (from
    :meth:`postdp.analysis.ReleaseDesign.metrics`), drawn at the bin's median size. Both
    axes are logarithmic: a flat cloud means errors that do not grow with size, so relative
    errors fall as places grow.

    Parameters
    ----------
    result : MonteCarloResult
        Of a table :class:`~postdp.analysis.ReleaseDesign`.
    by_size : pandas.DataFrame
        The design's metrics by level and size bin.
    table : Table
        The table simulated.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy, simulate
    >>> from postdp.analysis import ReleaseDesign
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[30, 40], [5, 6]])
    >>> d = ReleaseDesign(t, Workload([Measurement(k, Query.detailed(cat), Geometric(epsilon=1.0))
    ...                               for k in range(2)]))
    >>> res = simulate(d, n_draws=50, rng=0)
    >>> len(plot_errors_by_size(res, d.metrics(res)[0], t).collections)  # one cloud per level
    2
    """
    geo, cat = table.geography, table.categories
    root = int(np.flatnonzero(cat.parent < 0)[0])
    total = table.counts()[:, root].astype(float)
    mae = np.asarray(result.mae, dtype=float).reshape(geo.n, cat.n)[:, root]
    if {"level", "size", "mae"} - set(by_size.columns):
        raise ValidationError("`by_size` lacks the columns level, size and mae")
    ax = _axes(ax)
    depth = geo.depth
    for d in range(geo.n_levels):
        level = (depth == d) & (total > 0)
        pick = level & (mae > 0)  # totals held exactly (public) have no error to draw
        exact = int((level & (mae == 0)).sum())
        if not pick.any():
            if exact:
                ax.plot([], [], " ", label=f"level {d}: {exact} total(s) exact (public)")
            continue
        points = ax.scatter(total[pick], mae[pick], s=6, alpha=0.4)
        note = f", {exact} exact (public)" if exact else ""
        points.set_label(f"level {d} geounits{note}")
        rows = by_size[by_size["level"] == d]
        if len(rows) > 1:
            mid = [
                float(np.median(total[pick & (_bin_of(total, label))]))
                if (pick & _bin_of(total, label)).any()
                else np.nan
                for label in rows["size"]
            ]
            ax.plot(mid, rows["mae"], color=points.get_facecolor()[0], alpha=0.9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _label(
        ax,
        "true total population of the geounit",
        "MAE of the released total over draws",
        "Mean absolute error against population size (lines: per size bin)",
        legend=True,
    )
    return ax


def _bin_of(total: Any, label: str) -> Any:
    """Geounits whose total falls in a size bin labelled 'lo-hi' or 'lo+'."""
    text = label.replace(",", "")
    if text.endswith("+"):
        return total >= float(text[:-1])
    lo, hi = (float(x) for x in text.split("-"))
    return (total >= lo) & (total <= hi)


def plot_diversity_errors(by_diversity: pd.DataFrame, *, ax: Any = None) -> Any:
    """Mean signed error of the total population by Blau-diversity quintile, per level.

    Bars above 0 mean places of that diversity are released too large on average, below 0
    too small; the Census Bureau watched this for its 2020 runs because post-processing can
    move people from diverse to homogeneous places.

    Parameters
    ----------
    by_diversity : pandas.DataFrame
        From :meth:`postdp.analysis.ReleaseDesign.metrics` or
        :func:`postdp.analysis.table_error_metrics`.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> frame = pd.DataFrame({"level": [1] * 5, "quintile": [1, 2, 3, 4, 5],
    ...                       "mean_signed_error": [0.2, 0.1, 0.0, -0.1, -0.3]})
    >>> len(plot_diversity_errors(frame).patches)
    5
    """
    if {"level", "quintile", "mean_signed_error"} - set(by_diversity.columns):
        raise ValidationError("`by_diversity` lacks the columns level, quintile, mean_signed_error")
    ax = _axes(ax)
    levels = sorted(by_diversity["level"].unique())
    width = 0.8 / max(1, len(levels))
    for k, d in enumerate(levels):
        rows = by_diversity[by_diversity["level"] == d]
        ax.bar(
            rows["quintile"] + (k - (len(levels) - 1) / 2) * width,
            rows["mean_signed_error"],
            width=width,
            label=f"level {d}",
        )
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_xticks([1, 2, 3, 4, 5], ["1 (least diverse)", "2", "3", "4", "5 (most)"])
    _label(
        ax,
        "quintile of the Blau diversity index of the true histogram",
        "mean signed error of the total",
        "Signed errors by diversity",
        legend=True,
    )
    return ax


def plot_estimator_comparison(
    metrics: pd.DataFrame, *, query: str = "total", measure: str = "mae", ax: Any = None
) -> Any:
    """One measure of one query by geographic level, a line per estimator (all sizes).

    Parameters
    ----------
    metrics : pandas.DataFrame
        :attr:`postdp.report.EstimatorComparison.metrics`: ``estimator``, ``query``,
        ``level``, ``size``, ``counts`` and the measure.
    query : str, default "total"
    measure : str, default "mae"
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> frame = pd.DataFrame({"estimator": ["a", "a", "b", "b"], "query": ["total"] * 4,
    ...                       "level": ["US", "State"] * 2, "size": ["0+"] * 4,
    ...                       "counts": [1, 2, 1, 2], "mae": [0.0, 1.5, 0.0, 2.0]})
    >>> len(plot_estimator_comparison(frame).lines)
    2
    """
    need = {"estimator", "query", "level", "counts", measure}
    if need - set(metrics.columns):
        raise ValidationError(f"`metrics` lacks the columns {sorted(need - set(metrics.columns))}")
    rows = metrics[metrics["query"] == query]
    if rows.empty:
        raise ValidationError(f"`metrics` holds no rows of query {query!r}")
    ax = _axes(ax)
    order = list(dict.fromkeys(rows["level"]))
    for name, part in rows.groupby("estimator", sort=False):
        square = measure == "rmse"  # pool the bins' mean squares, not their roots
        values = part[measure].to_numpy(dtype=float) ** (2 if square else 1)
        w = part["counts"].to_numpy(dtype=float)
        sums = pd.DataFrame({"level": part["level"], "wv": w * values, "w": w})
        pooled = sums.groupby("level", sort=False).sum()
        y = pooled["wv"] / pooled["w"]
        y = y.pow(0.5) if square else y
        y = y.reindex(order)
        ax.plot(range(len(order)), y.to_numpy(), marker="o", label=str(name))
    ax.set_xticks(range(len(order)), order)
    title = f"{measure.upper()} of {query} by level, every size (same draws for each estimator)"
    _label(ax, "geographic level", f"{measure.upper()} of {query}", title, legend=True)
    return ax

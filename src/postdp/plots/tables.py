"""Figures of a table audit: errors against population size, and by diversity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.plots._common import _axes, _label

__all__ = ["plot_diversity_errors", "plot_errors_by_size", "plot_estimator_comparison"]


def plot_errors_by_size(result: Any, by_size: pd.DataFrame, table: Any, *, ax: Any = None) -> Any:
    """Each geounit's error of its total population against its true total, per level.

    One measure throughout, the mean absolute error: points are every geounit's MAE of
    its released total over the draws (a table design's :func:`postdp.simulate` result);
    lines join each level's MAE per size bin (from
    :meth:`postdp.analysis.TableDesign.metrics`), drawn at the bin's median size. Both
    axes are logarithmic: a flat cloud means errors that do not grow with size, so relative
    errors fall as places grow.

    Parameters
    ----------
    result : MonteCarloResult
        Of a :class:`~postdp.analysis.TableDesign`.
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
    >>> from postdp.analysis import TableDesign
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[30, 40], [5, 6]])
    >>> d = TableDesign(t, Workload([Measurement(k, Query.detailed(cat), Geometric(epsilon=1.0))
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
        From :meth:`postdp.analysis.TableDesign.metrics` or
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

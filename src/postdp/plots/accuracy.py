"""Figures of an accuracy study (:func:`postdp.analysis.accuracy_study`): each estimator's
error by geographic level with its Monte Carlo interval, and each estimator's paired
difference to the reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.plots._common import _axes, _label

__all__ = ["plot_accuracy_differences", "plot_accuracy_levels"]

_Z = 1.96


def _rows(frame: pd.DataFrame, query: str, metric: str) -> pd.DataFrame:
    need = {"estimator", "query", "level", metric, f"{metric}_se"}
    if need - set(frame.columns):
        raise ValidationError(f"the frame lacks the columns {sorted(need - set(frame.columns))}")
    rows = frame[frame["query"] == query]
    if "size" in rows and rows["size"].nunique() > 1:
        raise ValidationError("give the frame with size bins pooled (sizes=False)")
    if rows.empty:
        raise ValidationError(f"the frame holds no rows of query {query!r}")
    return rows


def _bars(rows: pd.DataFrame, metric: str, ax: Any, *, linestyle: str) -> Any:
    """Each estimator's values by level with +-1.96 SE bars, side by side at each level."""
    order = list(dict.fromkeys(rows["level"]))
    names = list(dict.fromkeys(rows["estimator"]))
    shift = np.linspace(-0.12, 0.12, len(names))
    for k, name in enumerate(names):
        part = rows[rows["estimator"] == name].set_index("level").reindex(order)
        ax.errorbar(
            np.arange(len(order)) + shift[k], part[metric], yerr=_Z * part[f"{metric}_se"],
            marker="o", linestyle=linestyle, capsize=3, label=str(name),
        )  # fmt: skip
    ax.set_xticks(range(len(order)), order)
    if sum(len(str(level)) for level in order) > 48:  # long names (the DHC's): slanted
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    return ax


def plot_accuracy_levels(
    summary: pd.DataFrame, *, query: str = "total", metric: str = "mae", ax: Any = None
) -> Any:
    """One metric of one query by geographic level, a line per estimator, with +-1.96
    Monte Carlo standard errors.

    Parameters
    ----------
    summary : pandas.DataFrame
        :meth:`postdp.analysis.AccuracyStudy.summary` with ``sizes=False``.
    query : str, default "total"
    metric : str, default "mae"
        ``mae``, ``rmse`` or ``mean_error``.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> frame = pd.DataFrame({"estimator": ["a", "a", "b", "b"], "query": "total",
    ...     "level": ["State", "County"] * 2, "size": "all", "mae": [0.0, 2.0, 0.0, 1.5],
    ...     "mae_se": [0.0, 0.2, 0.0, 0.1]})
    >>> len(plot_accuracy_levels(frame).containers)
    2
    """
    ax = _bars(_rows(summary, query, metric), metric, _axes(ax), linestyle="-")
    title = f"{metric.upper()} of {query} by level (mean over draws, +-1.96 SE)"
    _label(ax, "geographic level", f"{metric.upper()} of {query}", title, legend=True)
    return ax


def plot_accuracy_differences(
    differences: pd.DataFrame, *, query: str = "total", metric: str = "mae", ax: Any = None
) -> Any:
    """Each estimator's paired difference to the reference in one metric of one query, by
    level, with its 95% interval; below zero the estimator is the more accurate.

    Parameters
    ----------
    differences : pandas.DataFrame
        :meth:`postdp.analysis.AccuracyStudy.differences` with ``sizes=False``.
    query : str, default "total"
    metric : str, default "mae"
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> frame = pd.DataFrame({"estimator": "b", "reference": "a", "query": "total",
    ...     "level": ["State", "County"], "size": "all", "mae": [0.0, -0.5],
    ...     "mae_se": [0.0, 0.1]})
    >>> len(plot_accuracy_differences(frame).containers)
    1
    """
    rows = _rows(differences, query, metric)
    ax = _bars(rows, metric, _axes(ax), linestyle="none")
    ax.axhline(0.0, color="0.4", linewidth=0.8)
    reference = str(rows["reference"].iloc[0]) if "reference" in rows else "the reference"
    title = f"{metric.upper()} of {query}: estimator - {reference} (95% intervals)"
    _label(ax, "geographic level", f"difference in {metric.upper()}", title, legend=True)
    return ax

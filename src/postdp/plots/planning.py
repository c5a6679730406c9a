"""Figures of budget planning: the accuracy-for-privacy frontier."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.plots._common import _axes, _label

__all__ = ["plot_budget_frontier"]


def plot_budget_frontier(frontier: pd.DataFrame, *, ax: Any = None) -> Any:
    """The planner's objective against the total budget, optimal and equal splits.

    Parameters
    ----------
    frontier : pandas.DataFrame
        From :func:`postdp.analysis.budget_frontier` (columns ``total``, ``optimal``,
        ``equal`` and, when a split was compared, ``given``).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> from postdp.analysis import budget_frontier
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> f = budget_frontier([0.5, 1.0, 2.0], h, mechanism="laplace", weights=[1.0, 1.0])
    >>> len(plot_budget_frontier(f).lines)
    2
    """
    missing = {"total", "optimal", "equal"} - set(frontier.columns)
    if missing:
        raise ValidationError(f"`frontier` lacks the columns {sorted(missing)}")
    ax = _axes(ax)
    ax.plot(frontier["total"], frontier["optimal"], marker="o", label="planned split")
    ax.plot(frontier["total"], frontier["equal"], marker="s", linestyle="--", label="equal split")
    if "given" in frontier.columns and np.isfinite(frontier["given"]).any():
        ax.plot(frontier["total"], frontier["given"], marker="^", linestyle=":", label="your split")
    ax.set_xscale("log")
    ax.set_yscale("log")
    totals = frontier["total"].to_numpy()
    ax.set_xticks(totals, [f"{t:g}" for t in totals])  # the planned totals, written plainly
    ax.minorticks_off()
    _label(
        ax,
        "total budget (epsilon or rho)",
        "weighted mean (P) variance",
        "Accuracy for privacy: the planner's frontier",
        legend=True,
    )
    return ax

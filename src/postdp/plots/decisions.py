"""Figures of decisions on noisy data ([fioretto2021] Figs. 2-10 types)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp._typing import ArrayLike
from postdp.decisions import FairnessReport
from postdp.errors import ValidationError
from postdp.plots._common import _axes, _label

__all__ = [
    "plot_allotment_bias",
    "plot_decision_errors",
    "plot_errors_by_group",
    "plot_fairness_comparison",
]


def plot_allotment_bias(
    reports: Sequence[FairnessReport],
    labels: Sequence[str],
    sizes: ArrayLike,
    *,
    ax: Any = None,
) -> Any:
    """Bias of each entity's allotment against its size, one series per setting ([fioretto2021]
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
    >>> rep = FairnessReport(np.zeros(3), np.array([5.0, 0.0, -5.0]), np.ones(3), np.ones(3), 10)
    >>> len(plot_allotment_bias([rep], ["eps 0.1"], [1, 10, 100]).get_lines())  # + zero line
    2
    """
    if len(reports) != len(labels):
        raise ValidationError("`reports` and `labels` must have the same length")
    ax = _axes(ax)
    order = np.argsort(np.asarray(sizes, dtype=np.float64), kind="stable")
    for rep, label in zip(reports, labels, strict=True):
        ax.plot(np.arange(order.size), rep.bias[order], linewidth=0.8, label=label)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    _label(
        ax,
        "entities, smallest to largest",
        "bias of the allotment",
        "Allotment bias by entity size",
        legend=True,
    )
    return ax


def plot_decision_errors(margin: ArrayLike, report: FairnessReport, *, ax: Any = None) -> Any:
    """Decision-error probability against the distance to the rule's thresholds ([fioretto2021]
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
    >>> rep = FairnessReport(np.ones(3), np.array([-0.4, -0.1, 0.0]), np.zeros(3),
    ...                      np.zeros(3), 10)
    >>> len(plot_decision_errors([0.01, 0.5, 3.0], rep).collections)
    1
    """
    ax = _axes(ax)
    ax.scatter(np.maximum(np.asarray(margin, dtype=np.float64), 1e-4), np.abs(report.bias), s=8)
    ax.set_xscale("log")
    _label(
        ax,
        "relative distance to the threshold",
        "decision-error probability |B|",
        "Decision errors against distance to the thresholds",
    )
    return ax


def plot_fairness_comparison(
    reports: Sequence[FairnessReport], labels: Sequence[str], *, axes: Any = None
) -> Any:
    """Fairness bound α and mean absolute error of several mitigations side by side ([fioretto2021]
    Figs. 6 and 9 type).

    Parameters
    ----------
    reports : sequence of FairnessReport
    labels : sequence of str
        One per report.
    axes : pair of matplotlib Axes, optional

    Returns
    -------
    ndarray of two matplotlib Axes

    Examples
    --------
    >>> rep = FairnessReport(np.zeros(2), np.array([1.0, -1.0]), np.ones(2), np.ones(2), 10)
    >>> plot_fairness_comparison([rep, rep], ["P", "proxy"]).shape
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
    ([fioretto2021] Figs. 4-5 type: for P1 ∧ P2 the (True, True) group pays most, Thm 7).

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
    >>> rep = FairnessReport(np.ones(4), np.array([-0.3, -0.2, 0.1, 0.05]), np.zeros(4),
    ...                      np.zeros(4), 10)
    >>> ax = plot_errors_by_group(rep, ["TT", "TT", "FF", "FF"])
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['FF', 'TT']
    """
    labels = np.asarray(list(groups), dtype=object)
    if labels.size != report.bias.size:
        raise ValidationError("`groups` needs one label per entity")
    ax = _axes(ax)
    names = sorted(set(labels.tolist()))
    for k, name in enumerate(names):
        values = np.abs(report.bias[labels == name])
        ax.scatter(np.full(values.size, k) + np.linspace(-0.15, 0.15, values.size), values, s=10)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("decision-error probability |B|")
    ax.set_title("Decision errors by truth values of the predicates")
    return ax

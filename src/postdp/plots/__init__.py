"""Figures of the seeds' types, drawn with matplotlib (imported lazily; ``plots`` extra).

Every function takes the data first (a result object or arrays), options keyword-only and
``ax=None`` (a new figure when omitted), draws, and returns the Axes; none calls ``show()``.
"""

from postdp.plots._common import save_figure
from postdp.plots.accuracy import plot_accuracy_differences, plot_accuracy_levels
from postdp.plots.audit import (
    plot_bias_by_count,
    plot_diversity_errors,
    plot_errors_by_size,
    plot_estimator_comparison,
    plot_nonneg_bias,
    plot_residuals,
    plot_wasserstein,
)
from postdp.plots.decisions import (
    plot_allotment_bias,
    plot_decision_errors,
    plot_errors_by_group,
    plot_fairness_comparison,
)
from postdp.plots.planning import plot_budget_frontier
from postdp.plots.posterior import plot_posterior

__all__ = [
    "plot_accuracy_differences",
    "plot_accuracy_levels",
    "plot_allotment_bias",
    "plot_bias_by_count",
    "plot_budget_frontier",
    "plot_decision_errors",
    "plot_diversity_errors",
    "plot_errors_by_group",
    "plot_errors_by_size",
    "plot_estimator_comparison",
    "plot_fairness_comparison",
    "plot_nonneg_bias",
    "plot_posterior",
    "plot_residuals",
    "plot_wasserstein",
    "save_figure",
]

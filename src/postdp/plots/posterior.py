"""Marginal posteriors of the true counts ([wang2021] Fig. 2 type)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp.bayes import ExactPosterior, PosteriorSamples

__all__ = ["plot_posterior"]


def plot_posterior(
    posterior: ExactPosterior | PosteriorSamples,
    *,
    released: Sequence[int] | None = None,
    axes: Any = None,
) -> Any:
    """Marginal posteriors of each true count and of the total ([wang2021] Fig. 2 type).

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

"""Figures of the seeds' types, drawn with matplotlib (imported lazily; ``plots`` extra).

Every function takes ``ax=None`` (a new figure when omitted), draws, and returns the Axes;
none calls ``show()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp._typing import ArrayLike
from postdp.mechanisms import Geometric, Laplace, NoiseMechanism
from postdp.postprocess import (
    Restriction,
    clamp_bias,
    modified_bias,
    optimal_ramp_shift,
    translated_ramp_bias,
)

__all__ = ["plot_nonneg_bias"]


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

"""Shared pieces of the figures: a new Axes on demand, labels, saving (private)."""

from __future__ import annotations

import os
from typing import Any, BinaryIO

__all__ = ["_axes", "_label", "save_figure"]


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


def _label(ax: Any, xlabel: str, ylabel: str, title: str, *, legend: bool = False) -> None:
    """Axis labels, title and (optionally) a small legend: the finish of every figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend:
        ax.legend(fontsize="small")


def save_figure(
    ax: Any,
    path: str | os.PathLike[str] | BinaryIO,
    *,
    dpi: int = 110,
    format: str | None = None,
) -> None:
    """Write the figure holding ``ax`` to ``path`` (format from the suffix) and close it.

    Parameters
    ----------
    ax : matplotlib Axes
    path : str, path-like or binary file object
        A file object needs ``format``.
    dpi : int, default 110
    format : str, optional
        Image format (``"png"``, ``"svg"``, ``"pdf"``); from the suffix of ``path`` when
        not given.

    Returns
    -------
    None

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from postdp.plots import plot_wasserstein
    >>> ax = plot_wasserstein([2, 4], [1.0, 0.5])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     save_figure(ax, pathlib.Path(d) / "w.png")
    ...     (pathlib.Path(d) / "w.png").exists()
    True
    """
    import matplotlib.pyplot as plt

    ax.figure.savefig(path, dpi=dpi, bbox_inches="tight", format=format)
    plt.close(ax.figure)

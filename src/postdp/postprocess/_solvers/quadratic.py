"""A level's information matrix and linear term for marginal queries (private), formed
from each cell's count index per query, never as a dense c x c product of query matrices."""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, IntArray

__all__ = ["LevelQuadratic"]


class LevelQuadratic:
    """A level's H and b for marginal queries, from each cell's count index per query.

    Parameters
    ----------
    groups : list of int arrays, shape (c,)
        For each noisy measurement, the count each detailed cell falls in (-1: none).
    weights : list of float
        Each measurement's weight 1 / variance.
    """

    def __init__(self, groups: list[IntArray], weights: list[float]) -> None:
        self.groups = [np.asarray(g, dtype=np.int64) for g in groups]
        self.weights = [float(w) for w in weights]

    def block(self, cells: IntArray) -> FloatArray:
        """H[cells, cells], shape (m, m)."""
        out = np.zeros((cells.size, cells.size))
        for g, w in zip(self.groups, self.weights, strict=True):
            gc = g[cells]
            same = (gc[:, None] == gc[None, :]) & (gc[:, None] >= 0)
            out += w * same
        return out

    def linear(self, answers: list[FloatArray], cells: IntArray) -> FloatArray:
        """b[:, cells] for children's answers (one (k, size_q) array per measurement)."""
        out = np.zeros((answers[0].shape[0], cells.size))
        for g, w, y in zip(self.groups, self.weights, answers, strict=True):
            gc = g[cells]
            inside = gc >= 0
            out[:, inside] += w * y[:, gc[inside]]
        return out

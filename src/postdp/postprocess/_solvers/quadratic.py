"""A level's information matrix and linear term for marginal queries (private), formed
from each cell's count index per query, never as a dense c x c product of query matrices;
and the sum of the children's padded blocks scattered into the parent's cells."""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, IntArray

__all__ = ["LevelQuadratic", "chunks", "scatter_blocks"]

_CHUNK = 1 << 22  # entries of a temporary over a chunk of the children's blocks (32 MB)


def chunks(rows: IntArray, width: int) -> list[IntArray]:
    """``rows`` in consecutive runs of at most ``_CHUNK / width^2`` (one at least): a
    chunk of children's (width, width) blocks."""
    step = max(1, _CHUNK // max(width * width, 1))
    return [rows[s : s + step] for s in range(0, rows.size, step)]


def scatter_blocks(idx: IntArray, Z: FloatArray, m: int) -> FloatArray:
    """sum_j E_j Z_j E_j' (m, m) for blocks ``Z`` (k, w, w) on cells ``idx`` (k, w; ``m``
    marks padding), a chunk of children at a time: the index temporaries stay under
    ``_CHUNK`` entries, never the size of every block."""
    out = np.zeros((m + 1) ** 2)
    for rows in chunks(np.arange(idx.shape[0]), idx.shape[1]):
        part = idx[rows[0] : rows[-1] + 1]
        flat = (part[:, :, None] * (m + 1) + part[:, None, :]).ravel()
        out += np.bincount(flat, Z[rows[0] : rows[-1] + 1].ravel(), minlength=out.size)
    return out.reshape(m + 1, m + 1)[:m, :m]


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
            code = np.where(gc >= 0, gc, np.nan)  # a cell outside every count equals none
            np.add(out, w, out=out, where=np.equal.outer(code, code))
        return out

    def linear(self, answers: list[FloatArray], cells: IntArray) -> FloatArray:
        """b[:, cells] for children's answers (one (k, size_q) array per measurement)."""
        out = np.zeros((answers[0].shape[0], cells.size))
        for g, w, y in zip(self.groups, self.weights, answers, strict=True):
            gc = g[cells]
            inside = gc >= 0
            out[:, inside] += w * y[:, gc[inside]]
        return out

"""Where the top-down family solver (:mod:`postdp.postprocess._solvers.family_nnls`) starts
its active set, and how it keeps every parent cell with a free child (private)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import linalg

from postdp._typing import FloatArray
from postdp.postprocess._solvers.simplex import project_families

BoolArray = npt.NDArray[np.bool_]

__all__ = ["cover", "start_free"]


def cover(free: BoolArray, x: FloatArray, fixed: BoolArray) -> None:
    """Free, in every cell no child is free in, the child (not held at 0 there) with the
    largest value."""
    bare = ~free.any(axis=0)
    if bare.any():
        cols = np.flatnonzero(bare)
        score = np.where(fixed[:, cols], -np.inf, x[:, cols])
        free[np.argmax(score, axis=0), cols] = True


def start_free(
    H: FloatArray, b: FloatArray, p: FloatArray, fixed: BoolArray, a: FloatArray | None
) -> BoolArray:
    """The cell-by-cell split's positive cells (exact when H is diagonal): each child's
    own estimate (a_j H)^-1 b_j, each cell's estimates projected onto the children's
    simplex {>= 0, adding up to the parent's cell}."""
    k, m = b.shape
    u = linalg.cho_solve(linalg.cho_factor(H), b.T).T
    if a is not None:
        u /= a[:, None]
    start = (
        project_families(
            u.T.reshape(1, -1),
            np.arange(m) * k,
            np.full(m, k),
            p[None, :],
            np.ones(m * k),
            np.ones(m * k, dtype=bool),
        )
        .reshape(m, k)
        .T
    )
    free: BoolArray = (start > 0) & ~fixed
    cover(free, start, fixed)
    return free

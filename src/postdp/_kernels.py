"""Compiled inner loops (private): streaming error statistics and the tree's two passes.

The Monte Carlo engine reduces every batch of errors (draws on axis 0, entities last) to
power sums, absolute sums, extremes and an integer histogram per entity. In numpy that takes
about ten passes over the batch, as long as drawing the noise itself; the two loops below
take one pass each (Numba, compiled on first use and cached on disk), so the statistics cost
a fraction of the noise floor. The two passes of the least-squares projection on a tree
(:mod:`postdp.postprocess._solvers.tree_solve`) run row by row over a flat list of families, each
draw's row staying in cache, instead of one numpy call per level and coefficient.

Summation order is fixed: entity ``j`` adds its errors row by row, in the order of the
batch, and nothing else (no fast-math reassociation). Results therefore depend only on the
rows and their order, never on threads or on how the caller groups its chunks.

Numba is imported when a kernel is first used, so ``import postdp`` does not pay for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray

__all__ = [
    "N_SUMS",
    "FlatTree",
    "add_histogram",
    "add_moments",
    "compiled",
    "path_sums_rows",
    "two_pass_masked_rows",
    "two_pass_rows",
]

#: Rows of the sums array: Σe, Σe², Σe³, Σe⁴, Σ|e|.
N_SUMS = 5


def _moments_loop(
    err: FloatArray, sums: FloatArray, lo: FloatArray, hi: FloatArray
) -> None:  # pragma: no cover - compiled
    rows, n = err.shape
    for i in range(rows):
        row = err[i]
        for j in range(n):
            x = row[j]
            x2 = x * x
            sums[0, j] += x
            sums[1, j] += x2
            sums[2, j] += x2 * x
            sums[3, j] += x2 * x2
            sums[4, j] += abs(x)
            if x < lo[j]:
                lo[j] = x
            if x > hi[j]:
                hi[j] = x


def _histogram_loop(
    err: FloatArray, scale: FloatArray, shift: float, hist: npt.NDArray[np.int32]
) -> None:  # pragma: no cover - compiled
    rows, n = err.shape
    top = hist.shape[0] - 1.0
    index = np.empty(n, dtype=np.int64)
    for i in range(rows):
        row = err[i]
        for j in range(n):  # bin of each entity (vectorisable), then the scatter
            pos = row[j] * scale[j] + shift
            if not pos >= 0.0:  # below the range (and NaN): the underflow bin
                pos = 0.0
            elif pos > top:
                pos = top
            index[j] = int(pos)
        for j in range(n):
            hist[index[j], j] += 1


def _two_pass_loop(
    Z: FloatArray,
    parent: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    size: npt.NDArray[np.int64],
    level: npt.NDArray[np.int64],
    own: FloatArray,
    kids: FloatArray,
    share: FloatArray,
) -> None:  # pragma: no cover - compiled
    rows = Z.shape[0]
    sums = np.empty(parent.size)
    depth = level.size - 1
    for b in range(rows):
        z = Z[b]
        for d in range(depth - 1, -1, -1):  # bottom up: combine each parent with its family
            for f in range(level[d], level[d + 1]):
                s = 0.0
                for k in range(start[f], start[f] + size[f]):
                    s += z[k]
                sums[f] = s
                p = parent[f]
                z[p] = own[f] * z[p] + kids[f] * s
        for d in range(depth):  # top down: hand each parent's gap back to its children
            for f in range(level[d], level[d + 1]):
                gap = z[parent[f]] - sums[f]
                for k in range(start[f], start[f] + size[f]):
                    z[k] += share[k] * gap


def _two_pass_masked_loop(
    Y: FloatArray,
    zero: npt.NDArray[np.bool_],
    fixed: npt.NDArray[np.bool_],
    fixed_values: FloatArray,
    var: FloatArray,
    parent: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    size: npt.NDArray[np.int64],
    level: npt.NDArray[np.int64],
    Z: FloatArray,
) -> None:  # pragma: no cover - compiled
    rows, n = Y.shape
    V = np.empty(n)
    sz = np.empty(parent.size)
    sv = np.empty(parent.size)
    depth = level.size - 1
    for b in range(rows):
        z = Z[b]
        for i in range(n):  # held leaves enter as exact zeros, fixed nodes as their values
            if fixed[i]:
                z[i] = fixed_values[i]
                V[i] = 0.0
            elif zero[b, i]:
                z[i] = 0.0
                V[i] = 0.0
            else:
                z[i] = Y[b, i]
                V[i] = var[i]
        for d in range(depth - 1, -1, -1):
            for f in range(level[d], level[d + 1]):
                s = 0.0
                w = 0.0
                for k in range(start[f], start[f] + size[f]):
                    s += z[k]
                    w += V[k]
                sz[f] = s
                sv[f] = w
                p = parent[f]
                vp = V[p]
                denom = vp + w
                if denom > 0:
                    z[p] = (w * z[p] + vp * s) / denom
                    V[p] = vp * w / denom
                else:
                    V[p] = 0.0
        for d in range(depth):
            for f in range(level[d], level[d + 1]):
                per_variance = (z[parent[f]] - sz[f]) / (sv[f] if sv[f] > 0 else 1.0)
                for k in range(start[f], start[f] + size[f]):
                    z[k] += V[k] * per_variance


def _path_sums_loop(
    C: FloatArray,
    parent: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    size: npt.NDArray[np.int64],
) -> None:  # pragma: no cover - compiled
    rows = C.shape[0]
    for b in range(rows):
        c = C[b]
        for f in range(parent.size):  # families top down: a parent is final before its kids
            base = c[parent[f]]
            for k in range(start[f], start[f] + size[f]):
                c[k] += base


@functools.cache
def compiled(loop: Callable[..., Any]) -> Callable[..., Any]:
    """``loop`` compiled by Numba (once per process; machine code cached on disk).

    Numba is imported here, on first use, so ``import postdp`` does not pay for it.
    """
    import numba

    return numba.njit(cache=True, nogil=True)(loop)


def add_moments(err: FloatArray, sums: FloatArray, lo: FloatArray, hi: FloatArray) -> None:
    """Add a batch of errors to running sums and extremes, in place.

    Parameters
    ----------
    err : ndarray of float64, shape (rows, n)
    sums : ndarray of float64, shape (N_SUMS, n)
        Σe, Σe², Σe³, Σe⁴ and Σ|e| per entity, updated in place.
    lo, hi : ndarray of float64, shape (n,)
        Running minimum and maximum, updated in place.

    Examples
    --------
    >>> e = np.array([[1.0, -2.0], [3.0, 0.5]])
    >>> s = np.zeros((N_SUMS, 2)); lo = np.full(2, np.inf); hi = -lo
    >>> add_moments(e, s, lo, hi)
    >>> s[:, 0].tolist(), lo.tolist(), hi.tolist()
    ([4.0, 10.0, 28.0, 82.0, 4.0], [1.0, -2.0], [3.0, 0.5])
    """
    compiled(_moments_loop)(np.ascontiguousarray(err, dtype=np.float64), sums, lo, hi)


def add_histogram(
    err: FloatArray, scale: FloatArray, shift: float, hist: npt.NDArray[np.int32]
) -> None:
    """Count each entity's errors into its bins, in place.

    The bin of error ``e`` of entity ``j`` is ``floor(e * scale[j] + shift)`` clipped to
    ``[0, bins - 1]``, where ``bins = hist.shape[0]``: the first and last bins take what falls
    below and above the range.

    Parameters
    ----------
    err : ndarray of float64, shape (rows, n)
    scale : ndarray of float64, shape (n,)
    shift : float
    hist : ndarray of int32, shape (bins, n)
        Bin-major counts (a row of errors scatters into nearby memory), updated in place.

    Examples
    --------
    >>> h = np.zeros((4, 1), dtype=np.int32)
    >>> add_histogram(np.array([[-9.0], [0.2], [1.7], [9.0]]), np.ones(1), 1.0, h)
    >>> h[:, 0].tolist()
    [1, 1, 1, 1]
    """
    compiled(_histogram_loop)(
        np.ascontiguousarray(err, dtype=np.float64), scale, float(shift), hist
    )


@dataclass(frozen=True, slots=True, eq=False)
class FlatTree:
    """The two passes' coefficients as flat arrays: family ``f`` (families of level ``d`` at
    ``level[d]:level[d + 1]``) has parent ``parent[f]`` and children
    ``start[f]:start[f] + size[f]`` (layout positions); ``share`` is per layout position."""

    parent: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]
    level: npt.NDArray[np.int64]
    own: FloatArray
    kids: FloatArray
    share: FloatArray


def two_pass_rows(Z: FloatArray, tree: FlatTree) -> None:
    """The two passes of the tree's least-squares projection on every row of ``Z``, in place.

    Parameters
    ----------
    Z : ndarray of float64, shape (B, n), C-contiguous
        Values in layout order; fixed nodes already hold their values.
    tree : FlatTree
    """
    compiled(_two_pass_loop)(
        Z, tree.parent, tree.start, tree.size, tree.level, tree.own, tree.kids, tree.share
    )


def two_pass_masked_rows(
    Y: FloatArray,
    zero: npt.NDArray[np.bool_],
    fixed: npt.NDArray[np.bool_],
    fixed_values: FloatArray,
    var: FloatArray,
    tree: FlatTree,
) -> FloatArray:
    """The two passes with some leaves held at 0 (an active set): each row's variances are
    recomputed, since a held leaf has variance 0. Returns a new array.

    Parameters
    ----------
    Y : ndarray of float64, shape (B, n)
        Noisy values in layout order.
    zero : ndarray of bool, shape (B, n)
        Leaves held at 0 in each row.
    fixed, fixed_values, var : ndarray, shape (n,)
        Public nodes and their values; each node's variance 1/w (0 where fixed).
    tree : FlatTree
    """
    Z = np.empty(Y.shape)
    compiled(_two_pass_masked_loop)(
        np.ascontiguousarray(Y, dtype=np.float64),
        np.ascontiguousarray(np.broadcast_to(zero, Y.shape)),
        fixed,
        fixed_values,
        var,
        tree.parent,
        tree.start,
        tree.size,
        tree.level,
        Z,
    )
    return Z


def path_sums_rows(C: FloatArray, tree: FlatTree) -> None:
    """C_i += C_parent(i) top down, in place: each entry becomes the sum over its path from
    the root (rows of ``C`` in layout order, C-contiguous)."""
    compiled(_path_sums_loop)(C, tree.parent, tree.start, tree.size)

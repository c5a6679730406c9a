"""Compiled inner loops (private): streaming error statistics and the tree's two passes.

The Monte Carlo engine reduces every batch of errors (draws on axis 0, entities last) to
power sums, absolute sums, extremes and an integer histogram per entity. In numpy that takes
about ten passes over the batch, as long as drawing the noise itself; the two loops below
take one pass each (Numba, compiled on first use and cached on disk), so the statistics cost
a fraction of the noise floor. The two passes of the least-squares projection on a tree
(:mod:`postdp.postprocess._solvers.tree_solve`) run row by row over a flat list of families, each
draw's row staying in cache, instead of one numpy call per level and coefficient.

The table post-processing has its own loops here too: the elementwise two passes of (P+)
when every level below the root measures single cells (:func:`table_up`,
:func:`table_down`), and the cycle walk of the unbiased table rounding
(:func:`cycle_round_rows`).

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
    "cycle_round_rows",
    "path_sums_rows",
    "table_down",
    "table_up",
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


# -- the table post-processing's loops ----------------------------------------------------


def _cycle_round_loop(
    tail: Any,
    head: Any,
    adj_start: Any,
    adj_edge: Any,
    offset: Any,
    uniform: Any,
    q: int,
    frozen: Any,
) -> None:  # pragma: no cover - compiled
    n_vertices = adj_start.size - 1
    n_edges = tail.size
    ptr = np.empty(n_vertices, dtype=np.int64)
    pos = np.full(n_vertices, -1, dtype=np.int64)
    path_v = np.empty(n_vertices + 1, dtype=np.int64)
    path_e = np.empty(n_vertices + 1, dtype=np.int64)
    blocked = np.empty(n_edges, dtype=np.bool_)
    for b in range(offset.shape[0]):
        o = offset[b]
        u = uniform[b]
        k = 0
        for v in range(n_vertices):
            ptr[v] = adj_start[v]
        for e in range(n_edges):
            blocked[e] = frozen[e]
        for e0 in range(n_edges):
            if o[e0] == 0 or o[e0] == q or blocked[e0]:
                continue
            v = tail[e0]
            depth = 0
            path_v[0] = v
            pos[v] = 0
            last = -1
            while True:
                e = -1
                i = ptr[v]
                while i < adj_start[v + 1]:
                    f = adj_edge[i]
                    if o[f] == 0 or o[f] == q or blocked[f]:  # never looked at again
                        if i == ptr[v]:
                            ptr[v] += 1
                    elif f != last:
                        e = f
                        break
                    i += 1
                if e < 0 and depth == 0:  # the walk's start: nothing left to round here
                    break
                if e < 0:  # a dead end (only beside frozen edges): the edge in is on no
                    blocked[last] = True  # cycle, now or later; step back
                    pos[v] = -1
                    depth -= 1
                    v = path_v[depth]
                    last = path_e[depth - 1] if depth > 0 else -1
                    continue
                w = head[e] if tail[e] == v else tail[e]
                path_e[depth] = e
                if pos[w] < 0:
                    depth += 1
                    path_v[depth] = w
                    pos[w] = depth
                    v = w
                    last = e
                    continue
                s = pos[w]  # a cycle: path_v[s] ... path_v[depth], then e back to w
                up = q
                down = q
                for t in range(s, depth + 1):
                    f = path_e[t]
                    if tail[f] == path_v[t]:
                        up = min(up, q - o[f])
                        down = min(down, o[f])
                    else:
                        up = min(up, o[f])
                        down = min(down, q - o[f])
                step = up if u[k] * (up + down) < down else -down
                k += 1
                for t in range(s, depth + 1):
                    f = path_e[t]
                    if tail[f] == path_v[t]:
                        o[f] += step
                    else:
                        o[f] -= step
                for t in range(s + 1, depth + 1):
                    pos[path_v[t]] = -1
                depth = s
                v = w
                last = path_e[s - 1] if s > 0 else -1
            for t in range(depth + 1):
                pos[path_v[t]] = -1


def _table_up_loop(
    own: FloatArray,
    info: FloatArray,
    node_level: Any,
    is_leaf: Any,
    held: Any,
    parent: Any,
    start: Any,
    size: Any,
    var: FloatArray,
    est: FloatArray,
    sum_var: FloatArray,
    sum_est: FloatArray,
) -> None:  # pragma: no cover - compiled
    n, c = own.shape
    for i in range(n):
        if is_leaf[i]:
            lv = node_level[i]
            for j in range(c):
                if held[i, j]:
                    var[i, j] = 0.0
                    est[i, j] = 0.0
                else:
                    var[i, j] = 1.0 / info[lv, j]
                    est[i, j] = own[i, j]
    for f in range(parent.size - 1, -1, -1):  # deepest families first
        p = parent[f]
        lv = node_level[p]
        for j in range(c):
            s = 0.0
            m = 0.0
            for k in range(start[f], start[f] + size[f]):
                s += var[k, j]
                m += est[k, j]
            sum_var[f, j] = s
            sum_est[f, j] = m
            if lv > 0:  # the root's own queries are combined by the caller
                w = info[lv, j]
                gain = s * w / (1.0 + s * w)
                var[p, j] = s - gain * s
                est[p, j] = m + gain * (own[p, j] - m)


def _table_down_loop(
    out: FloatArray,
    var: FloatArray,
    est: FloatArray,
    sum_var: FloatArray,
    sum_est: FloatArray,
    parent: Any,
    start: Any,
    size: Any,
) -> None:  # pragma: no cover - compiled
    c = out.shape[1]
    for f in range(parent.size):  # a parent is final before its children
        p = parent[f]
        for j in range(c):
            sv = sum_var[f, j]
            x = (out[p, j] - sum_est[f, j]) / sv if sv > 0 else 0.0
            for k in range(start[f], start[f] + size[f]):
                out[k, j] = est[k, j] + var[k, j] * x


def cycle_round_rows(
    tail: npt.NDArray[np.int64],
    head: npt.NDArray[np.int64],
    adj_start: npt.NDArray[np.int64],
    adj_edge: npt.NDArray[np.int64],
    offset: npt.NDArray[np.int64],
    uniform: FloatArray,
    q: int,
    frozen: npt.NDArray[np.bool_] | None = None,
) -> None:
    """Dependent rounding of a circulation, row by row, in place (``frozen``: edges left
    as they are; fractional edges that lead only to frozen ones are left fractional too).

    ``offset[b, e]`` is edge ``e``'s flow above its floor in units of 1/q, in [0, q];
    every vertex conserves flow modulo q. Repeatedly, a cycle of fractional edges is found
    by a walk and the circulation along it moves up (to the first edge that reaches 0 or
    q) with probability down/(up + down), else down: each step keeps every edge's mean,
    every edge within its [floor, ceiling] and makes at least one edge integral, so every
    offset ends at 0 or q. ``uniform`` holds one number in [0, 1) per possible step
    (n_edges per row).
    """
    if frozen is None:
        frozen = np.zeros(tail.size, dtype=np.bool_)
    compiled(_cycle_round_loop)(tail, head, adj_start, adj_edge, offset, uniform, q, frozen)


def table_up(
    own: FloatArray,
    info: FloatArray,
    node_level: npt.NDArray[np.int64],
    is_leaf: npt.NDArray[np.bool_],
    held: npt.NDArray[np.bool_],
    tree: FlatTree,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Upward pass of (P) on a table whose every level below the root measures single cells
    (diagonal information), cells held at 0 at leaf geounits; layout order. Returns each
    geounit's variance and estimate from its subtree and each family's summed ones."""
    n, c = own.shape
    var, est = np.empty((n, c)), np.empty((n, c))
    sum_var, sum_est = np.empty((tree.parent.size, c)), np.empty((tree.parent.size, c))
    compiled(_table_up_loop)(
        own,
        info,
        node_level,
        is_leaf,
        held,
        tree.parent,
        tree.start,
        tree.size,
        var,
        est,
        sum_var,
        sum_est,
    )
    return var, est, sum_var, sum_est


def table_down(
    out: FloatArray,
    var: FloatArray,
    est: FloatArray,
    sum_var: FloatArray,
    sum_est: FloatArray,
    tree: FlatTree,
) -> None:
    """Downward pass matching :func:`table_up`: ``out[root]`` set, the rest filled in place."""
    compiled(_table_down_loop)(out, var, est, sum_var, sum_est, tree.parent, tree.start, tree.size)

"""Compiled loops of the table post-processing (private): the elementwise two passes of
(P+) when every level below the root measures single cells, and the cycle walk of the
unbiased table rounding. Compiled on first use and cached on disk, as in
:mod:`postdp._kernels`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._kernels import FlatTree, compiled
from postdp._typing import FloatArray

__all__ = ["cycle_round_rows", "table_down", "table_up"]


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

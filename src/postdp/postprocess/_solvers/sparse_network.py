"""The rounding circulation of :func:`~postdp.round` on its fractional
counts only (private).

The circulation of :mod:`postdp.postprocess._solvers.dense_network` has an edge for every count
the rounding keeps within 1: the root's category tree, every (geounit, detailed cell), every
leaf geounit's category tree and every geounit's total. Dependent rounding only ever moves
flow along cycles of *fractional* edges; an edge whose count is already an integer stays.
So the walk needs only the fractional edges, and flow is still conserved modulo 1 at every
vertex without the others. A schema table after top-down holds a few dozen positive cells
per block out of 2,016, so this circulation has about (fractional leaf cells) x (depth of
the geography + depth of the categories) edges instead of geounits x categories: memory
and time follow the occupied cells, not the schema's size.

The fractional parts are the exact integers of the dense network (units of 1/Q, Q = 2**36),
summed up each tree level by level from the leaf cells that have one, modulo Q.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import IntArray
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.level_rounding import _Q

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class SparseNetwork:
    """The fractional edges as a circulation (private)."""

    tail: IntArray
    head: IntArray
    adj_start: IntArray
    adj_edge: IntArray
    offset: IntArray  # each edge's fractional part in units of 1/Q, in (0, Q)
    leaf_edge: IntArray  # the edge of each fractional leaf cell, in the input's order


def _combine(keys: IntArray, values: IntArray) -> tuple[IntArray, IntArray]:
    """Sum ``values`` over equal ``keys`` modulo Q; the keys that remain fractional."""
    unique, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros(unique.size, dtype=np.int64)
    np.add.at(sums, inverse, values)
    sums %= _Q
    keep = sums != 0
    return unique[keep], sums[keep]


def sparse_network(
    geo: Hierarchy, cat: Hierarchy, rows: IntArray, cols: IntArray, parts: IntArray
) -> SparseNetwork:
    """The circulation of the fractional counts, from the leaf cells' parts.

    Parameters
    ----------
    geo, cat : Hierarchy
        Geography and category tree of the table (each with more than one node).
    rows, cols, parts : ndarray of int64
        The leaf cells with a fractional part: position among ``geo.leaves``, detailed
        cell, and the part in units of 1/Q, in (0, Q); ``leaf_edge`` follows this order.
    """
    c, m, n = cat.leaves.size, cat.n, geo.n
    root, top = int(geo.root), int(cat.root)
    leaf_node = cat.leaves.astype(np.int64)  # category node of each detailed cell
    # vertex codes in disjoint ranges (made compact at the end): 0 and 1 close the circuit
    # at the root's total; family 1: root x category node, inner geounit x cell; family 2:
    # geounit totals, leaf geounit x inner category node
    base_geo = 2 + m
    base_tot = base_geo + n * c
    base_cat = base_tot + n

    def v1cat(a: IntArray) -> IntArray:
        out: IntArray = np.where(a == top, 0, 2 + a)
        return out

    def v1(g: IntArray, j: IntArray) -> IntArray:
        out: IntArray = np.where(g == root, v1cat(leaf_node[j]), base_geo + g * c + j)
        return out

    def v2tot(g: IntArray) -> IntArray:
        out: IntArray = np.where(g == root, 1, base_tot + g)
        return out

    def v2(g: IntArray, a: IntArray) -> IntArray:
        out: IntArray = np.where(a == top, v2tot(g), base_cat + g * m + a)
        return out

    tails: list[IntArray] = []
    heads: list[IntArray] = []
    offsets: list[IntArray] = []
    leaf_g = geo.leaves[rows].astype(np.int64)
    leaf_j = cols.astype(np.int64)
    leaf_v = parts.astype(np.int64)

    # family 1, down the geography: every (geounit, cell) with a fractional sum
    depth = geo.depth[leaf_g]
    pending = [
        (leaf_g[depth == d], leaf_j[depth == d], leaf_v[depth == d]) for d in range(geo.n_levels)
    ]
    leaf_edge = np.empty(rows.size, dtype=np.int64)
    order_of = {d: np.flatnonzero(depth == d) for d in range(geo.n_levels)}
    count = 0
    carried: tuple[IntArray, IntArray, IntArray] | None = None
    for d in range(geo.n_levels - 1, 0, -1):
        g, j, v = pending[d]
        n_leaf = g.size
        if carried is not None:
            g, j, v = (np.concatenate([a, b]) for a, b in zip((g, j, v), carried, strict=True))
        inner = ~geo.is_leaf[g]
        parent = geo.parent[g].astype(np.int64)
        tails.append(v1(parent, j))
        heads.append(np.where(inner, v1(g, j), v2(g, cat.parent[leaf_node[j]].astype(np.int64))))
        offsets.append(v)
        leaf_edge[order_of[d]] = count + np.arange(n_leaf)
        count += g.size
        keys, sums = _combine(parent * c + j, v)
        carried = (keys // c, keys % c, sums)
    root_cells = np.zeros(m, dtype=np.int64)
    if carried is not None:
        np.add.at(root_cells, leaf_node[carried[1]], carried[2])
    assert pending[0][0].size == 0  # the root is never a leaf here (n > 1)

    # the root's category tree (family 1) and its total closing the circuit
    root_counts = cat.aggregate(root_cells) % _Q  # every category node of the root
    nodes = np.flatnonzero((root_counts != 0) & (np.arange(m) != top))
    tails.append(v1cat(cat.parent[nodes].astype(np.int64)))
    heads.append(v1cat(nodes))
    offsets.append(root_counts[nodes])
    if root_counts[top]:
        tails.append(np.array([1]))
        heads.append(np.array([0]))
        offsets.append(root_counts[top : top + 1])

    # family 2: each leaf geounit's inner category nodes, up the category tree
    up = cat.parent[leaf_node[leaf_j]].astype(np.int64)
    cdepth = cat.depth[up]
    carried = None
    for e in range(cat.n_levels - 1, 0, -1):
        mask = cdepth == e
        g, a, v = leaf_g[mask], up[mask], leaf_v[mask]
        if carried is not None:
            g, a, v = (np.concatenate([x, y]) for x, y in zip((g, a, v), carried, strict=True))
        keys, sums = _combine(g * m + a, v)
        g, a = keys // m, keys % m
        parent = cat.parent[a].astype(np.int64)
        tails.append(v2(g, a))
        heads.append(v2(g, parent))
        offsets.append(sums)
        carried = (g, parent, sums)

    # family 2, up the geography: every geounit's total
    totals = np.zeros(n, dtype=np.int64)
    np.add.at(totals, leaf_g, leaf_v)
    totals = geo.aggregate(totals) % _Q
    kids = np.flatnonzero((geo.parent >= 0) & (totals != 0))
    tails.append(v2tot(kids))
    heads.append(v2tot(geo.parent[kids].astype(np.int64)))
    offsets.append(totals[kids])

    tail = np.concatenate(tails).astype(np.int64)
    head = np.concatenate(heads).astype(np.int64)
    offset = np.concatenate(offsets).astype(np.int64) % _Q
    codes, compact = np.unique(np.concatenate([tail, head]), return_inverse=True)
    ends = compact.astype(np.int64)
    E = tail.size
    order = np.argsort(ends, kind="stable")
    adj_start = np.zeros(codes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=codes.size), out=adj_start[1:])
    return SparseNetwork(
        tail=ends[:E],
        head=ends[E:],
        adj_start=adj_start,
        adj_edge=(order % E).astype(np.int64),
        offset=offset,
        leaf_edge=leaf_edge,
    )

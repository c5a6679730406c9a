"""The rounding circulation of a table (private): vertices and edges of the two laminar
families of counts that :func:`~postdp.round` keeps within 1, and the
exact fractional parts of its edges."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from postdp._typing import IntArray
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.level_rounding import _Q

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class _Network:
    """The circulation whose edges are the counts kept within 1 (private)."""

    tail: IntArray
    head: IntArray
    adj_start: IntArray
    adj_edge: IntArray
    sets: IntArray  # each edge's count as geounit * categories.n + category node
    element_edges: IntArray  # the edge of each (leaf geounit, detailed cell), row-major
    first_cell: int  # edges: the root's total, its category tree, then cells from here ...
    first_total: int  # ... and the geounits' totals (first-level geounits first) from here


@functools.lru_cache(maxsize=4)
def _network(geo: Hierarchy, cat: Hierarchy) -> _Network:
    """Vertices and edges of the two laminar families as one circulation.

    Family 1 (edges pointing down): the root's category tree, then each detailed cell down
    the geography. Family 2 (edges pointing up): each leaf geounit's category tree, then
    the totals up the geography. A (leaf geounit, detailed cell) is the edge from family 1
    into family 2; the root's total closes the circuit. Flow is conserved at every vertex,
    so every circulation is a consistent table.
    """
    n, m, c = geo.n, cat.n, cat.leaves.size
    gp, cp = geo.parent, cat.parent
    root, top = int(np.flatnonzero(gp < 0)[0]), int(np.flatnonzero(cp < 0)[0])
    inner_geo = ~geo.is_leaf & (gp >= 0)
    inner_cat = ~cat.is_leaf & (cp >= 0)
    used = [2]  # 0: the root total's head (family 1), 1: its tail (family 2)

    def ids(mask: npt.NDArray[np.bool_]) -> IntArray:
        out = np.full(mask.shape, -1, dtype=np.int64)
        k = int(mask.sum())
        out[mask] = used[0] + np.arange(k)
        used[0] += k
        return out

    v1cat = ids(np.arange(m) != top)  # root x category node
    v1cat[top] = 0
    v1geo = ids(np.repeat(inner_geo[:, None], c, axis=1))  # inner geounit x detailed cell
    v1geo[root] = v1cat[cat.leaves]
    v2tot = ids(gp >= 0)  # geounit total
    v2tot[root] = 1
    v2cat = ids(geo.is_leaf[:, None] & inner_cat[None, :])  # leaf geounit x inner category
    v2cat[:, top] = v2tot
    n_vertices = used[0]
    kids = np.flatnonzero(gp >= 0)
    cats = np.flatnonzero(cp >= 0)
    up_cat = cp[cat.leaves]  # category parent of each detailed cell
    g_kid = np.repeat(kids, c)
    j_kid = np.tile(np.arange(c), kids.size)
    cell_head = np.where(inner_geo[g_kid], v1geo[g_kid, j_kid], v2cat[g_kid, up_cat[j_kid]])
    lg, la = np.nonzero(geo.is_leaf[:, None] & inner_cat[None, :])
    parts = [  # (tail, head, geounit, category node)
        (np.array([1]), np.array([0]), np.array([root]), np.array([top])),
        (v1cat[cp[cats]], v1cat[cats], np.full(cats.size, root), cats),
        (v1geo[gp[g_kid], j_kid], cell_head, g_kid, cat.leaves[j_kid]),
        (v2cat[lg, la], v2cat[lg, cp[la]], lg, la),
        (v2tot[kids], v2tot[gp[kids]], kids, np.full(kids.size, top)),
    ]
    tail = np.concatenate([p[0] for p in parts])
    head = np.concatenate([p[1] for p in parts])
    sets = np.concatenate([p[2] * m + p[3] for p in parts])
    ends = np.concatenate([tail, head])
    order = np.argsort(ends, kind="stable")
    adj_start = np.zeros(n_vertices + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n_vertices), out=adj_start[1:])
    adj_edge = (order % tail.size).astype(np.int64)
    first_cell = 1 + cats.size
    edge_of = np.full((n, c), -1, dtype=np.int64)
    edge_of[g_kid, j_kid] = first_cell + np.arange(g_kid.size)
    return _Network(
        tail,
        head,
        adj_start,
        adj_edge,
        sets,
        edge_of[geo.leaves].reshape(-1),
        first_cell,
        int(tail.size - kids.size),
    )


def _offsets(q: IntArray, geo: Hierarchy, cat: Hierarchy, sets: IntArray) -> IntArray:
    """Each edge's fractional part in units of 1/Q, exactly, from the leaf cells' ``q``."""
    full = np.zeros((cat.leaves.size, geo.n), dtype=np.int64)
    full[:, geo.leaves] = q.T
    cells = geo.aggregate(full) % _Q  # (detailed cell, geounit); < leaves x Q before
    every = np.zeros((geo.n, cat.n), dtype=np.int64)
    every[:, cat.leaves] = cells.T
    every = cat.aggregate(every) % _Q
    out: IntArray = every.reshape(-1)[sets]
    return out

"""The rounding of :func:`~postdp.round` done state by state (private).

The dependent rounding moves flow along cycles of fractional edges of one circulation; any
order of moves gives a rounding with the same guarantees. So it can be split exactly:

1. Each first-level geounit's subtree (a state, for a national table) is rounded on its own
   part of the circulation, with the edges at its boundary -- its detailed cells and its
   total, which also belong to the national part -- frozen. What cannot be rounded there is
   a small forest of fractional edges that lead to the boundary.
2. The national part (the root's category tree and total) and every state's boundary
   edges and leftover forest form a small circulation, rounded last.

Step 1 runs one independent task per state (locally or as Dask tasks); only the small
leftovers travel. Memory is that of the largest state's circulation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from postdp._kernels import cycle_round_rows
from postdp._typing import IntArray
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.dense_network import _network, _offsets

__all__ = ["round_split"]


@dataclass(frozen=True)
class _Part:
    """One state's subtree as a geography of its own under a stand-in root (index 0)."""

    nodes: IntArray  # global geounit of each local node (the stand-in root: the root)
    geography: Hierarchy
    leaves: IntArray  # positions of the subtree's leaves among the global leaves


def _parts(geo: Hierarchy) -> list[_Part]:
    """The subtree of every first-level geounit, with a stand-in root above it."""
    root = int(np.flatnonzero(geo.parent < 0)[0])
    leaf_pos = np.full(geo.n, -1, dtype=np.int64)
    leaf_pos[geo.leaves] = np.arange(geo.leaves.size)
    top = np.flatnonzero(geo.parent == root)
    owner = np.full(geo.n, -1, dtype=np.int64)  # the first-level ancestor of every node
    owner[top] = np.arange(top.size)
    for d in range(2, geo.n_levels):
        nodes = geo.levels[d]
        owner[nodes] = owner[geo.parent[nodes]]
    order = np.argsort(owner, kind="stable")  # nodes grouped by state, breadth-first inside
    counts = np.bincount(owner[owner >= 0], minlength=top.size)
    starts = np.concatenate([[0], np.cumsum(counts)])
    first = int(np.searchsorted(owner[order], 0))
    parts = []
    for k in range(top.size):
        members = order[first + starts[k] : first + starts[k + 1]]
        nodes = np.concatenate([[root], members])
        local = np.full(geo.n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        parent = local[np.maximum(geo.parent[nodes], 0)]
        parent[0] = -1
        sub = Hierarchy([f"n{i}" for i in range(nodes.size)], parent)
        parts.append(_Part(nodes, sub, leaf_pos[nodes[sub.leaves]]))
    return parts


@functools.lru_cache(maxsize=2)
def _plan(geo: Hierarchy, cat: Hierarchy) -> tuple[list[_Part], list[Any], Any]:
    """The states' parts and circulations, and the nation's (built once per table)."""
    parts = _parts(geo)
    nets = [_network.__wrapped__(p.geography, cat) for p in parts]
    return parts, nets, _network.__wrapped__(Hierarchy(["root", "state"], [-1, 0]), cat)


def _state_step(
    part: _Part, net: Any, cat: Hierarchy, q: IntArray, seed: np.random.SeedSequence, unit: int
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Round one state's part with its boundary frozen. Returns its edges' offsets and,
    for the edges left fractional, their indices and endpoints (local vertex ids)."""
    offset = _offsets(q, part.geography, cat, net.sets)
    c = cat.leaves.size
    frozen = np.zeros(net.tail.size, dtype=np.bool_)
    frozen[: net.first_cell + c] = True  # the stand-in root's edges and the state's cells
    frozen[net.first_total] = True  # the state's total
    gen = np.random.default_rng(seed)
    uniform = gen.random((1, offset.size))
    cycle_round_rows(
        net.tail, net.head, net.adj_start, net.adj_edge, offset[None], uniform, unit, frozen
    )
    left = np.flatnonzero((offset > 0) & (offset < unit))
    left = left[left >= net.first_cell]  # the stand-in root's own edges are the nation's
    return offset, left, net.tail[left], net.head[left]


def round_split(
    q: IntArray,
    geo: Hierarchy,
    cat: Hierarchy,
    gen: np.random.Generator,
    unit: int,
    client: Any = None,
) -> IntArray:
    """0/1 round-ups of every leaf cell (leaves x cells), state by state, then the nation.

    ``q`` holds each leaf cell's fractional part in units of 1/``unit``."""
    parts, nets, top_net = _plan(geo, cat)
    seeds = np.random.SeedSequence(int(gen.integers(2**63))).spawn(len(parts) + 1)
    args = [
        (p, net, cat, q[p.leaves], s, unit) for p, net, s in zip(parts, nets, seeds, strict=False)
    ]
    if client is None:
        results = [_state_step(*a) for a in args]
    else:
        results = client.gather([client.submit(_state_step, *a, pure=False) for a in args])
    national_step(
        results, nation_offsets(q.sum(axis=0) % unit, cat, unit), top_net, seeds[-1], unit
    )
    ups = np.zeros(q.shape, dtype=np.int64)
    c = cat.leaves.size
    for part, net, (offset, _, _, _) in zip(parts, nets, results, strict=True):
        ups[part.leaves] = (offset[net.element_edges] == unit).reshape(-1, c)
    return ups


def national_step(
    results: list[tuple[IntArray, IntArray, IntArray, IntArray]],
    nation: IntArray,
    top_net: Any,
    seed: np.random.SeedSequence,
    unit: int,
) -> None:
    """Round the nation's edges (offsets ``nation``) together with every state's leftover
    fractional edges (from :func:`_state_step`), writing the states' offsets in place."""
    shared = top_net.first_cell  # vertices of the root's edges are the same in every part
    n_shared = int(max(top_net.tail[:shared].max(), top_net.head[:shared].max())) + 1
    tails, heads, offsets = [top_net.tail[:shared]], [top_net.head[:shared]], [nation]
    next_id = n_shared
    for offset, left, t, h in results:
        ends = np.concatenate([t, h])
        inner = np.unique(ends[ends >= n_shared])
        relabel = np.full(max(int(ends.max(initial=0)) + 1, n_shared), -1, dtype=np.int64)
        relabel[:n_shared] = np.arange(n_shared)
        relabel[inner] = next_id + np.arange(inner.size)
        next_id += inner.size
        tails.append(relabel[t])
        heads.append(relabel[h])
        offsets.append(offset[left])
    tail, head = np.concatenate(tails), np.concatenate(heads)
    ends = np.concatenate([tail, head])
    adj_start = np.zeros(next_id + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=next_id), out=adj_start[1:])
    adj_edge = (np.argsort(ends, kind="stable") % tail.size).astype(np.int64)
    flat = np.concatenate(offsets)
    uniform = np.random.default_rng(seed).random((1, flat.size))
    cycle_round_rows(tail, head, adj_start, adj_edge, flat[None], uniform, unit)
    at = nation.size
    for offset, left, _, _ in results:
        offset[left] = flat[at : at + left.size]
        at += left.size


def nation_offsets(cells: IntArray, cat: Hierarchy, unit: int) -> IntArray:
    """The nation's edges' fractional parts (its total, then its category tree, in the
    order of the circulation's first edges) from the national detailed cells' (mod unit)."""
    full = np.zeros(cat.n, dtype=np.int64)
    full[cat.leaves] = cells % unit
    every = cat.aggregate(full) % unit
    top = int(np.flatnonzero(cat.parent < 0)[0])
    cats = np.flatnonzero(cat.parent >= 0)
    return np.concatenate([[every[top]], every[cats]])

"""Breadth-first layouts of a tree in which every family is contiguous (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import FloatArray, IntArray

__all__ = ["Layout", "breadth_first_levels"]


@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """A breadth-first ordering of the nodes in which every family is contiguous.

    Position ``k`` of the layout holds node ``order[k]``; levels occupy the slices
    ``bounds[d]:bounds[d + 1]`` and, inside level ``d + 1``, the children of each parent of
    level ``d`` form one block, the blocks in the order of their parents. Tree algorithms work
    on arrays permuted into this order, where a family sum is one ``np.add.reduceat``.

    Attributes
    ----------
    order, position : ndarray of int, shape (n,)
        Layout position -> node index, and its inverse (one shared ``arange`` when the
        layout is the node order).
    bounds : ndarray of int, shape (n_levels + 1,)
    starts : tuple of ndarray
        ``starts[d]``: offsets, within level ``d + 1``, where each family begins.
    parents : tuple of ndarray
        ``parents[d]``: layout positions of the level-``d`` nodes that have children, in the
        order of their families.
    sizes : tuple of ndarray
        ``sizes[d]``: the number of children in each family of ``parents[d]``, so that
        ``np.repeat(per_family, sizes[d], axis=-1)`` spreads family values over level
        ``d + 1`` (much faster than fancy indexing with :meth:`family`).
    identity : bool
        Whether the layout order is the node order (then no permutation is needed).

    Memory: ``order`` and ``position`` (8 bytes per node each, one array when ``identity``)
    plus a few numbers per family.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "a1"], [None, "T", "T", "a"])
    >>> lay = h.layout
    >>> lay.bounds.tolist(), [s.tolist() for s in lay.sizes]
    ([0, 1, 3, 4], [[2], [1]])
    """

    order: IntArray
    position: IntArray
    bounds: IntArray
    starts: tuple[IntArray, ...]
    parents: tuple[IntArray, ...]
    sizes: tuple[IntArray, ...]
    identity: bool

    def family(self, d: int) -> IntArray:
        """For each node of level ``d + 1``, the index of its family in ``parents[d]``."""
        return np.repeat(np.arange(self.sizes[d].size), self.sizes[d])

    def family_gaps(self, values: FloatArray) -> FloatArray:
        """Largest |parent - sum of its children| of each row, for rows in layout order.

        The one consistency measure behind ``is_consistent``, ``round_consistent`` and the
        KKT report.
        """
        rows = values.reshape(-1, values.shape[-1])
        out = np.zeros(rows.shape[0])
        for d in range(len(self.starts)):
            c0, c1 = self.bounds[d + 1], self.bounds[d + 2]
            sums = np.add.reduceat(rows[:, c0:c1], self.starts[d], axis=1)
            np.maximum(out, np.abs(rows[:, self.parents[d]] - sums).max(axis=1), out=out)
        return out

    @classmethod
    def build(cls, parent: IntArray, levels: tuple[IntArray, ...]) -> Layout:
        """The layout of a tree given each node's parent and the nodes of each level.

        O(n) when the nodes are already in breadth-first order with families together
        (every builder of postdp makes them so); a stable sort per level otherwise.
        """
        n = parent.size
        bounds = np.cumsum([0] + [lvl.size for lvl in levels]).astype(np.int64)
        ordered = [levels[0]]
        starts, parents, sizes = [], [], []
        position: IntArray | None = None
        for d, nodes in enumerate(levels[1:]):
            above = ordered[-1]
            if position is None and np.array_equal(above, np.arange(bounds[d], bounds[d + 1])):
                keys = parent[nodes]  # the previous level sits at its own node numbers
            else:
                if position is None:
                    position = np.empty(n, dtype=np.int64)
                    position[np.concatenate(ordered)] = np.arange(bounds[d + 1])
                keys = position[parent[nodes]]
            if keys.size > 1 and (np.diff(keys) < 0).any():
                sort = np.argsort(keys, kind="stable")
                nodes, keys = nodes[sort], keys[sort]
            ordered.append(nodes)
            if position is not None:
                position[nodes] = bounds[d + 1] + np.arange(nodes.size)
            first = np.flatnonzero(np.diff(keys, prepend=-1))
            starts.append(first)
            parents.append(keys[first])
            sizes.append(np.diff(np.append(first, keys.size)))
        order = np.concatenate(ordered) if len(ordered) > 1 else ordered[0].copy()
        identity = bool(np.array_equal(order, np.arange(n)))
        if identity:
            order = position = np.arange(n, dtype=np.int64)
        elif position is None:
            position = np.empty(n, dtype=np.int64)
            position[order] = np.arange(n)
        return cls(order, position, bounds, tuple(starts), tuple(parents), tuple(sizes), identity)


def breadth_first_levels(parent: IntArray, root: int) -> list[IntArray]:
    """The nodes of each level, in increasing order, by breadth-first search from the root.

    Nodes in a cycle are never reached: the levels then hold fewer than ``parent.size``
    nodes. O(n) when ``parent`` is sorted (breadth-first order), O(n log n) otherwise.
    """
    n = parent.size
    ordered = n < 2 or bool((np.diff(parent) >= 0).all())
    order = None if ordered else np.argsort(parent, kind="stable")
    # the children of node i sit at order[starts[i]:starts[i + 1]]
    starts = np.cumsum(np.bincount(parent + 1, minlength=n + 1))
    frontier = np.array([root], dtype=np.int64)
    levels = []
    while frontier.size:
        levels.append(frontier)
        lo, hi = starts[frontier], starts[frontier + 1]
        if ordered and frontier[-1] - frontier[0] + 1 == frontier.size:
            frontier = np.arange(lo[0], hi[-1], dtype=np.int64)  # contiguous children
            continue
        sizes = hi - lo
        total = int(sizes.sum())
        offsets = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(total)
        frontier = offsets if order is None else order[offsets]
        if frontier.size > 1 and (np.diff(frontier) < 0).any():
            frontier = np.sort(frontier)
    return levels

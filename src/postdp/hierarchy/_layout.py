"""Breadth-first layouts of a tree in which every family is contiguous (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import FloatArray, IntArray

__all__ = ["Layout", "depths"]


@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """A breadth-first ordering of the nodes in which every family is contiguous (private).

    Position ``k`` of the layout holds node ``order[k]``; levels occupy the slices
    ``bounds[d]:bounds[d + 1]`` and, inside level ``d + 1``, the children of each parent of
    level ``d`` form one block, the blocks in the order of their parents. Tree algorithms work
    on arrays permuted into this order, where a family sum is one ``np.add.reduceat``.

    Attributes
    ----------
    order, position : ndarray of int, shape (n,)
        Layout position -> node index, and its inverse.
    bounds : ndarray of int, shape (n_levels + 1,)
    parent : ndarray of int, shape (n,)
        Layout position of each position's parent (-1 for the root).
    starts : tuple of ndarray
        ``starts[d]``: offsets, within level ``d + 1``, where each family begins.
    parents : tuple of ndarray
        ``parents[d]``: layout positions of the level-``d`` nodes that have children, in the
        order of their families.
    family : tuple of ndarray
        ``family[d]``: for each node of level ``d + 1``, the index of its family in
        ``parents[d]``.
    sizes : tuple of ndarray
        ``sizes[d]``: the number of children in each family of ``parents[d]``, so that
        ``np.repeat(per_family, sizes[d], axis=-1)`` spreads family values over level
        ``d + 1`` (much faster than fancy indexing with ``family[d]``).
    identity : bool
        Whether the layout order is the node order (then no permutation is needed).
    """

    order: IntArray
    position: IntArray
    bounds: IntArray
    parent: IntArray
    starts: tuple[IntArray, ...]
    parents: tuple[IntArray, ...]
    family: tuple[IntArray, ...]
    sizes: tuple[IntArray, ...]
    identity: bool

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
        n = parent.size
        position = np.empty(n, dtype=np.int64)
        ordered = [levels[0]]
        position[levels[0]] = 0
        offset = levels[0].size
        for nodes in levels[1:]:
            keys = position[parent[nodes]]
            sorted_nodes = nodes[np.argsort(keys, kind="stable")]
            position[sorted_nodes] = offset + np.arange(sorted_nodes.size)
            ordered.append(sorted_nodes)
            offset += sorted_nodes.size
        order = np.concatenate(ordered)
        bounds = np.cumsum([0] + [lvl.size for lvl in levels]).astype(np.int64)
        lay_parent = np.where(parent[order] >= 0, position[np.maximum(parent[order], 0)], -1)
        starts, parents, family = [], [], []
        for d in range(len(levels) - 1):
            child_parents = lay_parent[bounds[d + 1] : bounds[d + 2]]
            uniq, first, inverse = np.unique(child_parents, return_index=True, return_inverse=True)
            parents.append(uniq.astype(np.int64))
            starts.append(first.astype(np.int64))
            family.append(inverse.astype(np.int64).reshape(-1))
        return cls(
            order,
            position,
            bounds,
            lay_parent.astype(np.int64),
            tuple(starts),
            tuple(parents),
            tuple(family),
            tuple(
                np.diff(np.append(st, bounds[d + 2] - bounds[d + 1])).astype(np.int64)
                for d, st in enumerate(starts)
            ),
            bool((order == np.arange(n)).all()),
        )


def depths(parent: IntArray, root: int) -> IntArray:
    """Depth of every node by breadth-first search from the root; -1 where unreachable."""
    n = parent.size
    order = np.argsort(parent, kind="stable")
    starts = np.searchsorted(parent[order], np.arange(n + 1))
    depth = np.full(n, -1, dtype=np.int64)
    frontier = np.array([root], dtype=np.int64)
    d = 0
    while frontier.size:
        depth[frontier] = d
        lo, hi = starts[frontier], starts[frontier + 1]
        sizes = hi - lo
        if not sizes.sum():
            break
        offsets = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        frontier = order[offsets]
        d += 1
    return depth

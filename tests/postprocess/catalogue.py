"""A catalogue of hard hierarchies for the projection tests (mbi's catalogue idea)."""

from __future__ import annotations

import numpy as np

from postdp import Hierarchy


def _tree(parents, leaf_counts=None, rng=None):
    """Hierarchy from a parent-index list; true counts built bottom-up from leaf counts."""
    n = len(parents)
    ids = [f"n{i}" for i in range(n)]
    parent_ids = [None if p < 0 else ids[p] for p in parents]
    is_leaf = np.ones(n, dtype=bool)
    for p in parents:
        if p >= 0:
            is_leaf[p] = False
    rng = np.random.default_rng(0) if rng is None else rng
    leaf = rng.integers(0, 40, n) if leaf_counts is None else np.asarray(leaf_counts)
    counts = np.where(is_leaf, leaf, 0).astype(np.int64)
    for i in range(n - 1, 0, -1):  # parents precede children in these lists
        counts[parents[i]] += counts[i]
    return Hierarchy.from_parents(ids, parent_ids, counts)


def single():
    return _tree([-1], [7])


def star(k=8):
    return _tree([-1] + [0] * k)


def chain(depth=30):
    return _tree([-1, *range(depth - 1)])


def unequal():
    # root: a (5 kids), b (1 kid), c (leaf), d (3 kids, the first with 2 kids)
    parents = [-1, 0, 0, 0, 0] + [1] * 5 + [2] + [4] * 3 + [11, 11]
    return _tree(parents)


def zeros():
    parents = [-1, 0, 0, 1, 1, 1, 2, 2]
    return _tree(parents, [0, 0, 0, 0, 0, 1, 0, 0])


CATALOGUE = {
    "single": single,
    "star": star,
    "chain": chain,
    "unequal": unequal,
    "zeros": zeros,
}


def random_tree(rng, n):
    """A random tree on n nodes: node i's parent is uniform on 0..i-1."""
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    return _tree(parents, rng=rng)

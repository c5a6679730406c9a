"""Consistent, unbiased integer rounding of a table too large to hold, one subtree at a time.

:func:`~postdp.round` (``split=True``) rounds a table state by state, but needs the whole
table's values in memory. :func:`round_by_subtree` asks for one subtree's values at a time
(as :func:`~postdp.postprocess.project_by_subtree` produces them), so a national block-level
table is rounded holding one state and small leftovers:

1. each subtree's part of the rounding circulation is rounded with its boundary (its
   detailed cells and total, which also belong to the national part) frozen, from its own
   seed; what is left is a small forest of fractional edges leading to the boundary;
2. the national part -- the root's category tree and total, every subtree's boundary and
   leftover forest -- is rounded last;
3. each subtree is rounded again from the same seed (the same result) and its leftover
   edges set from step 2: its integer histograms.

Every subtree's values are asked for twice (steps 1 and 3); they must be the same both
times. The guarantees are :func:`~postdp.round`'s, in law the same as rounding the whole
table at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from postdp import _rng
from postdp._typing import FloatArray, IntArray, RNGLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.dense_network import _network
from postdp.postprocess._solvers.level_rounding import _Q
from postdp.postprocess._solvers.rounding_split import (
    _Part,
    _state_step,
    nation_offsets,
    national_step,
)
from postdp.postprocess.rounding import _SPARSE_CELLS, _with_parents
from postdp.tables import Table

__all__ = ["round_by_subtree"]


def round_by_subtree(
    values: FloatArray,
    over: Table,
    subtree: Callable[[int], tuple[Table, FloatArray]],
    *,
    rng: RNGLike = None,
    atol: float = 1e-6,
) -> Iterator[IntArray]:
    """Round a table cut at its first level, subtree by subtree (see the module notes).

    Parameters
    ----------
    values : ndarray, shape (top geounits, n_detailed)
        The top's real detailed histograms (the root and the first-level geounits, rows in
        ``over.geography.ids`` order), consistent: the root the sum of its children.
    over : Table
        The top (root > first-level geounits, e.g. ``table.split_at(1)[0]``); its counts
        are not read.
    subtree : callable
        ``subtree(k)`` returns ``(table, values)`` for the k-th leaf of ``over.geography``
        (in ``geography.leaves`` order): its subtree as a table rooted at it (counts not
        read) and every geounit's real detailed histogram, rows in its ``geography.ids``
        order, consistent, its root's row equal to ``values``' row for it. Called twice
        per subtree, the same answer each time.
    rng : int, numpy.random.Generator, SeedSequence or None
    atol : float, default 1e-6
        Tolerance of the consistency checks, relative to max(1, max |values|).

    Returns
    -------
    iterator of ndarray of int64
        Each subtree's integer histograms, (its geounits, n_detailed), k = 0, 1, ..., then
        the top's (top geounits, n_detailed). Every parent the exact sum of its children;
        every detailed cell and total of every geounit the floor or ceiling of its input;
        every count unbiased.

    Raises
    ------
    ValidationError
        For a table of 256 or more detailed cells (its rounding follows the fractional
        cells only: :func:`~postdp.round` holds a state's worth at a time already), or
        values that are not consistent.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> geo = Hierarchy.from_parents(["S", "a", "b", "a1", "a2", "b1"],
    ...                              [None, "S", "S", "a", "a", "b"])
    >>> t = Table(geo, cat, [[0, 0], [0, 0], [0, 0]])
    >>> top, subs = t.split_at(1)
    >>> real = {"a": np.array([[1.5, 1.0], [0.7, 0.2], [0.8, 0.8]]),
    ...         "b": np.array([[0.5, 1.0], [0.5, 1.0]])}
    >>> parts = list(round_by_subtree(np.array([[2.0, 2.0], [1.5, 1.0], [0.5, 1.0]]), top,
    ...                               lambda k: (subs[k], real["ab"[k]]), rng=0))
    >>> [p.shape for p in parts], bool((parts[0][0] == parts[0][1] + parts[0][2]).all())
    ([(3, 2), (2, 2), (3, 2)], True)
    """
    if not isinstance(over, Table):
        raise TypeError(f"`over` must be a Table; got {type(over).__name__}")
    geo, cat = over.geography, over.categories
    c = cat.leaves.size
    if c >= _SPARSE_CELLS:
        raise ValidationError(
            f"a table of {c} detailed cells is rounded on its fractional cells only; use "
            "postdp.round on each state's values"
        )
    if geo.n_levels != 2:
        raise ValidationError("`over` must be the top: a root and its children (split_at(1))")
    top = np.asarray(values, dtype=np.float64)
    if top.shape != (geo.n, c):
        raise ValidationError(f"`values` must have shape {(geo.n, c)}; got {top.shape}")
    scale = max(1.0, float(np.abs(top).max(initial=0.0)))
    gap = np.abs(top[geo.root] - top[geo.leaves].sum(axis=0)).max(initial=0.0)
    if gap > atol * scale:
        raise ValidationError(f"`values`: the root is not the sum of its children (gap {gap:g})")
    seeds = np.random.SeedSequence(int(_rng.as_generator(rng).integers(2**63))).spawn(
        geo.leaves.size + 1
    )
    return _rounds(top, geo, cat, subtree, seeds, atol * scale)


def _rounds(
    top: FloatArray,
    geo: Hierarchy,
    cat: Hierarchy,
    subtree: Callable[[int], tuple[Table, FloatArray]],
    seeds: list[np.random.SeedSequence],
    tol: float,
) -> Iterator[IntArray]:
    results = []
    cells_mod = np.zeros(cat.leaves.size, dtype=np.int64)
    for k in range(geo.leaves.size):  # step 1: each subtree's part, its boundary frozen
        step = _StateStep(subtree, k, top[geo.leaves[k]], cat, seeds[k], tol)
        cells_mod = (cells_mod + step.q.sum(axis=0)) % _Q
        offset, left, tails, heads = step.result
        results.append((offset[left].copy(), np.arange(left.size), tails, heads))
        del step
    top_net = _network.__wrapped__(Hierarchy(["root", "state"], [-1, 0]), cat)
    national_step(results, nation_offsets(cells_mod, cat, _Q), top_net, seeds[-1], _Q)
    rows = np.zeros((geo.n, cat.leaves.size), dtype=np.int64)
    for k in range(geo.leaves.size):  # step 3: the same rounding, its leftovers now set
        step = _StateStep(subtree, k, top[geo.leaves[k]], cat, seeds[k], tol)
        offset, left, _, _ = step.result
        offset[left] = results[k][0]
        ups = (offset[step.net.element_edges] == _Q).reshape(step.low.shape)
        out = _with_parents(step.low + ups, step.geography)
        rows[geo.leaves[k]] = out[step.geography.root]
        yield out
    rows[geo.root] = rows[geo.leaves].sum(axis=0)
    yield rows


class _StateStep:
    """One subtree's part of the circulation, rounded from its seed."""

    def __init__(
        self,
        subtree: Callable[[int], tuple[Table, FloatArray]],
        k: int,
        root_row: FloatArray,
        cat: Hierarchy,
        seed: np.random.SeedSequence,
        tol: float,
    ) -> None:
        table, values = subtree(k)
        if not isinstance(table, Table):
            raise TypeError(f"subtree({k}) must return (Table, values)")
        geo = table.geography
        real = np.asarray(values, dtype=np.float64)
        if real.shape != (geo.n, cat.leaves.size):
            raise ValidationError(
                f"subtree({k}): values must have shape {(geo.n, cat.leaves.size)}; got {real.shape}"
            )
        if np.abs(real[geo.root] - root_row).max(initial=0.0) > tol:
            raise ValidationError(f"subtree({k}): its root's values differ from the top's")
        leaves = geo.leaves
        low = np.floor(real[leaves])
        q = np.rint((real[leaves] - low) * _Q).astype(np.int64)
        self.low = low.astype(np.int64) + (q == _Q)
        q[q == _Q] = 0
        self.q = q
        part_geo = Hierarchy(
            ["stand-in", *(f"n{i}" for i in range(geo.n))], np.concatenate([[-1], geo.parent + 1])
        )
        part = _Part(np.arange(geo.n + 1), part_geo, np.arange(leaves.size))
        self.net = _network.__wrapped__(part_geo, cat)
        self.geography = geo
        self.result = _state_step(part, self.net, cat, q, seed, _Q)

"""The Census Bureau's rounder for one family, exactly: integer children closest in L1 to
their least-squares values over nested queries, as a minimum-cost flow (private).

Each child's cell is its least-squares value's floor plus 0 or 1 (the 2020 TopDown's
``MultipassRounder``). The objective is the weighted L1 distance, over the queries of the
pass, between each child's rounded and least-squares counts; the constraints are the
parent's cells (the children add up to them) and, when fixed by an earlier pass, each child's
total. When the queries nest (total > hhgq > hhgq x hispanic > ... > detailed, the production
list), the problem is a minimum-cost flow: source -> child (its total) -> its hhgq groups ->
... -> its cells -> the parent's cells (or one sink at the root). A count's cost
w |base + flow - target| is convex in its flow with its kink at a fraction, so at the
integers it equals the convex piecewise-linear function with kinks at the integers, which
three parallel arcs carry (cost -w up to the floor of the gap, the step across the fraction,
then +w). Network matrices are totally unimodular, so the linear program's optimal vertex is
integral: HiGHS (through ``scipy.optimize.linprog``; no commercial solver) solves it, and the
answer is certified by the integral flow's L1 cost equalling the linear program's optimum, a
lower bound on every integer solution's cost.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError, ValidationError

__all__ = ["RoundedFamily", "check_nesting", "round_nested"]


@dataclass(frozen=True)
class RoundedFamily:
    """Integer children (k, m), their L1 cost and the linear program's lower bound."""

    x: IntArray
    cost: float
    bound: float


class _Network:
    """Arcs (tail, head, low, high, cost) of a flow network, collected as lists."""

    def __init__(self) -> None:
        self.n = 0
        self.tail: list[int] = []
        self.head: list[int] = []
        self.low: list[float] = []
        self.high: list[float] = []
        self.cost: list[float] = []
        self.offset = 0.0

    def nodes(self, count: int) -> IntArray:
        out = np.arange(self.n, self.n + count)
        self.n += count
        return out

    def arc(self, tail: int, head: int, low: float, high: float, cost: float) -> int:
        self.tail.append(tail)
        self.head.append(head)
        self.low.append(low)
        self.high.append(high)
        self.cost.append(cost)
        return len(self.tail) - 1

    def l1(self, tail: int, head: int, gap: float, size: int, weight: float) -> None:
        """Arcs carrying w |flow - gap| for integer flow in [0, size]."""
        self.offset += weight * gap
        if weight == 0:
            self.arc(tail, head, 0, size, 0.0)
            return
        below = min(int(np.floor(gap)), size)
        if below > 0:
            self.arc(tail, head, 0, below, -weight)
        if below < size:
            step = weight * (abs(below + 1 - gap) - abs(below - gap))
            self.arc(tail, head, 0, 1, step)
            if below + 1 < size:
                self.arc(tail, head, 0, size - below - 1, weight)


def round_nested(
    x: FloatArray,
    chain: Sequence[tuple[IntArray, float]],
    *,
    cell_weight: float,
    parent: IntArray | None = None,
    totals: IntArray | None = None,
    total_weight: float = 0.0,
) -> RoundedFamily:
    """Round one family's least-squares cells to integers, L1-closest over nested queries.

    Parameters
    ----------
    x : ndarray, shape (k, m)
        The children's least-squares cells (>= 0; tiny negatives are read as 0).
    chain : sequence of (groups, weight)
        The pass's queries between the total and the cells, coarse to fine: each cell's
        group (shape (m,)) and the query's weight; each query's groups must lie inside the
        previous one's.
    cell_weight : float
        Weight of the cells' own distance (the detailed query, counted once per query of
        the pass that equals it).
    parent : ndarray of int, shape (m,), optional
        The parent's cells the children add up to (None at the root: one child).
    totals : ndarray of int, shape (k,), optional
        Each child's total when an earlier pass fixed it; else the total is rounded here,
        with ``total_weight``.
    total_weight : float, default 0

    Returns
    -------
    RoundedFamily

    Raises
    ------
    ValidationError
        If the queries do not nest.
    ConvergenceError
        If HiGHS does not return an integral optimum (please report the input).
    """
    x = np.maximum(np.asarray(x, dtype=np.float64), 0.0)
    k, m = x.shape
    base = np.floor(x).astype(np.int64)
    net = _Network()
    source = int(net.nodes(1)[0])
    if parent is not None:
        ends = net.nodes(m)
        need = np.asarray(parent, dtype=np.int64) - base.sum(axis=0)
        if (need < 0).any() or (need > k).any():
            raise ConvergenceError("the least-squares cells do not add up to the parent's")
    else:
        ends = np.full(m, net.nodes(1)[0])
        need = None
    levels = [np.asarray(g, dtype=np.int64) for g, _ in chain]
    check_nesting(levels)
    cell_arcs = np.zeros((k, m), dtype=np.int64)
    for j in range(k):
        child = int(net.nodes(1)[0])
        gap_total = float(x[j].sum() - base[j].sum())
        if totals is not None:
            fixed = int(totals[j]) - int(base[j].sum())
            if not 0 <= fixed <= m:
                raise ConvergenceError("a child's fixed total is out of reach of its cells")
            net.arc(source, child, fixed, fixed, 0.0)
        else:
            net.l1(source, child, gap_total, m, total_weight)
        above = np.full(m, child)
        for groups, (_, weight) in zip(levels, chain, strict=True):
            ids, inverse = np.unique(groups, return_inverse=True)
            here = net.nodes(ids.size)
            gaps = np.bincount(inverse, x[j] - base[j], minlength=ids.size)
            sizes = np.bincount(inverse, minlength=ids.size)
            first = np.zeros(ids.size, dtype=np.int64)
            first[inverse[::-1]] = np.arange(m)[::-1]
            for g in range(ids.size):
                net.l1(int(above[first[g]]), int(here[g]), float(gaps[g]), int(sizes[g]), weight)
            above = here[inverse]
        for c in range(m):
            gap = float(x[j, c] - base[j, c])
            net.offset += cell_weight * gap
            cell_arcs[j, c] = net.arc(
                int(above[c]), int(ends[c]), 0, 1, cell_weight * (abs(1 - gap) - gap)
            )
    flow, bound = _solve(net, source, ends, need)
    z = np.rint(flow[cell_arcs]).astype(np.int64)
    out = base + z
    cost = _cost(out, x, levels, chain, cell_weight, total_weight if totals is None else 0.0)
    if cost > bound + 1e-7 * (1.0 + abs(bound)):
        raise ConvergenceError(
            f"the rounder's integral solution is not certified optimal (cost {cost:.9g}, "
            f"bound {bound:.9g}); please report the input"
        )
    return RoundedFamily(out, cost, bound)


def check_nesting(levels: list[IntArray]) -> None:
    """Refuse groupings (coarse to fine) where a group is not inside one group above."""
    for coarse, fine in itertools.pairwise(levels):
        pairs = np.unique(np.stack([fine, coarse]), axis=1)
        if np.unique(pairs[0]).size != pairs.shape[1]:
            raise ValidationError("the rounder's queries must nest (each group inside one above)")


def _solve(
    net: _Network, source: int, ends: IntArray, need: IntArray | None
) -> tuple[FloatArray, float]:
    """The flow's integral optimal vertex and the linear program's optimum (+ offset)."""
    n_arcs = len(net.tail)
    rows = np.concatenate([net.tail, net.head])
    signs = np.concatenate([-np.ones(n_arcs), np.ones(n_arcs)])
    A = sparse.csr_array(
        (signs, (rows, np.concatenate([np.arange(n_arcs)] * 2))), shape=(net.n, n_arcs)
    )
    b = np.zeros(net.n)
    keep = np.ones(net.n, dtype=bool)
    if need is not None:
        b[ends] = need
        b[source] = -need.sum()
    else:  # the root: the sink takes whatever the source sends
        keep[[source, int(ends[0])]] = False
    res = optimize.linprog(  # type: ignore[call-overload]  # sparse A_eq is supported
        np.asarray(net.cost),
        A_eq=A[keep],
        b_eq=b[keep],
        bounds=np.column_stack([net.low, net.high]),
        method="highs",
    )
    if res.status != 0:
        raise ConvergenceError(f"the rounder's flow problem failed: {res.message}")
    flow = np.asarray(res.x)
    if np.abs(flow - np.rint(flow)).max(initial=0.0) > 1e-6:
        raise ConvergenceError("the rounder's flow is not integral; please report the input")
    return flow, float(res.fun) + net.offset


def _cost(
    out: IntArray,
    x: FloatArray,
    levels: list[IntArray],
    chain: Sequence[tuple[IntArray, float]],
    cell_weight: float,
    total_weight: float,
) -> float:
    """The weighted L1 distance of the rounded children to their least-squares values."""
    err = out - x
    cost = cell_weight * float(np.abs(err).sum()) + total_weight * float(np.abs(err.sum(1)).sum())
    for groups, (_, weight) in zip(levels, chain, strict=True):
        ids, inverse = np.unique(groups, return_inverse=True)
        sums = np.stack([np.bincount(inverse, e, minlength=ids.size) for e in err])
        cost += weight * float(np.abs(sums).sum())
    return cost

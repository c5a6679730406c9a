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
integral: HiGHS solves it (no commercial solver; called directly, one solver per thread, see
:mod:`postdp.postprocess._solvers.highs`), and the answer is certified by the integral
flow's L1 cost equalling the linear program's optimum, a lower bound on every integer
solution's cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError, ValidationError
from postdp.postprocess._solvers.highs import solve_equalities
from postdp.tables.schema import Marginal, Schema

__all__ = ["RoundedFamily", "check_nesting", "round_nested", "rounder_chain"]


@dataclass(frozen=True)
class RoundedFamily:
    """Integer children (k, m), their L1 cost and the linear program's lower bound."""

    x: IntArray
    cost: float
    bound: float


class _Network:
    """Arcs (tail, head, low, high, cost) of a flow network, collected in blocks."""

    def __init__(self) -> None:
        self.n = 0
        self.blocks: list[tuple[IntArray, IntArray, FloatArray, FloatArray, FloatArray]] = []
        self.count = 0
        self.offset = 0.0

    def nodes(self, count: int) -> IntArray:
        out = np.arange(self.n, self.n + count)
        self.n += count
        return out

    def arcs(self, tail: Any, head: Any, low: Any, high: Any, cost: Any) -> IntArray:
        """Add arcs (arrays of one length, or scalars broadcast); their indices."""
        tail, head, low, high, cost = np.broadcast_arrays(tail, head, low, high, cost)
        self.blocks.append((tail, head, low, high, cost))
        out = np.arange(self.count, self.count + tail.size)
        self.count += tail.size
        return out

    def l1(self, tail: Any, head: Any, gap: Any, size: Any, weight: float) -> None:
        """Arcs carrying w |flow - gap| for integer flow in [0, size], for each entry: cost -w
        up to the floor of the gap, the step across its fraction, then +w."""
        self.offset += weight * float(np.sum(gap))
        if weight == 0:
            self.arcs(tail, head, 0.0, size.astype(float), 0.0)
            return
        below = np.minimum(np.floor(gap), size)
        down = below > 0
        self.arcs(tail[down], head[down], 0.0, below[down], -weight)
        cross = below < size
        step = weight * (np.abs(below + 1 - gap) - np.abs(below - gap))
        self.arcs(tail[cross], head[cross], 0.0, 1.0, step[cross])
        up = below + 1 < size
        self.arcs(tail[up], head[up], 0.0, (size - below - 1)[up], weight)

    def arrays(self) -> tuple[IntArray, IntArray, FloatArray, FloatArray, FloatArray]:
        parts = list(zip(*self.blocks, strict=True))
        t, h, lo, hi, c = (np.concatenate(p) for p in parts)
        return t.astype(np.int64), h.astype(np.int64), lo, hi, c


def round_nested(
    x: FloatArray,
    chain: Sequence[tuple[IntArray, float]],
    *,
    cell_weight: float,
    parent: IntArray | None = None,
    totals: IntArray | None = None,
    total_weight: float = 0.0,
    bounds: Sequence[tuple[FloatArray, FloatArray] | None] | None = None,
    fixed: Any = None,
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
    bounds : sequence of (lo, hi) or None, optional
        Per chain query, each child's bounds on its rounded counts (k, n) by group label
        (e.g. group-quarters counts at least the facilities, 0 where there is none): the
        group's arc then carries at least lo - floor sum and at most hi - floor sum.
    fixed : ndarray of bool, shape (k, m), optional
        Cells held at their floor (e.g. a structural zero).

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
    grouped = [np.unique(g, return_inverse=True) for g in levels]
    _check_nesting(levels, grouped)
    children = net.nodes(k)
    gaps = x - base
    if totals is not None:
        ups = (np.asarray(totals, dtype=np.int64) - base.sum(axis=1)).astype(float)
        if (ups < 0).any() or (ups > m).any():
            raise ConvergenceError("a child's fixed total is out of reach of its cells")
        net.arcs(np.full(k, source), children, ups, ups, 0.0)
    else:
        net.l1(np.full(k, source), children, gaps.sum(axis=1), np.full(k, m), total_weight)
    above = np.repeat(children[:, None], m, axis=1)  # (k, m): each cell's node one level up
    limits = list(bounds) if bounds is not None else [None] * len(levels)
    for (ids, inverse), (_, weight), limit in zip(grouped, chain, limits, strict=True):
        n_g = ids.size
        here = net.nodes(k * n_g).reshape(k, n_g)
        sums = np.zeros((n_g, k))
        np.add.at(sums, inverse, gaps.T)
        sums = sums.T
        sizes = np.bincount(inverse, minlength=n_g)
        first = np.zeros(n_g, dtype=np.int64)
        first[inverse[::-1]] = np.arange(m)[::-1]
        if limit is None:
            net.l1(above[:, first].ravel(), here.ravel(), sums.ravel(), np.tile(sizes, k), weight)
        else:  # the group's flow passes one more arc, bounded
            gate = net.nodes(k * n_g).reshape(k, n_g)
            net.l1(above[:, first].ravel(), gate.ravel(), sums.ravel(), np.tile(sizes, k), weight)
            slots = (np.arange(k)[:, None] * n_g + inverse).ravel()  # (child, group)
            floors = np.bincount(slots, base.ravel(), minlength=k * n_g).reshape(k, n_g)
            low = np.maximum(np.asarray(limit[0], dtype=float)[:, ids] - floors, 0.0)
            high = np.minimum(np.asarray(limit[1], dtype=float)[:, ids] - floors, sizes)
            if (high < low).any():
                raise ConvergenceError("a child's group bounds are out of reach of its cells")
            net.arcs(gate.ravel(), here.ravel(), low.ravel(), high.ravel(), 0.0)
        above = here[:, inverse]
    net.offset += cell_weight * float(gaps.sum())
    cap = 1.0 if fixed is None else np.where(np.asarray(fixed, dtype=bool), 0.0, 1.0).ravel()
    cell_arcs = net.arcs(
        above.ravel(), np.tile(ends, k), 0.0, cap, (cell_weight * (1 - 2 * gaps)).ravel()
    ).reshape(k, m)
    flow, bound = _solve(net, source, ends, need)
    z = np.rint(flow[cell_arcs]).astype(np.int64)
    out = base + z
    cost = _cost(out, x, grouped, chain, cell_weight, total_weight if totals is None else 0.0)
    if cost > bound + 1e-7 * (1.0 + abs(bound)):
        raise ConvergenceError(
            f"the rounder's integral solution is not certified optimal (cost {cost:.9g}, "
            f"bound {bound:.9g}); please report the input"
        )
    return RoundedFamily(out, cost, bound)


def check_nesting(levels: list[IntArray]) -> None:
    """Refuse groupings (coarse to fine) where a group is not inside one group above."""
    levels = [np.asarray(g, dtype=np.int64) for g in levels]
    _check_nesting(levels, [np.unique(g, return_inverse=True) for g in levels])


def _check_nesting(levels: list[IntArray], grouped: list[tuple[IntArray, IntArray]]) -> None:
    """:func:`check_nesting` given each level's ``np.unique(..., return_inverse=True)``: a
    fine group nests when every one of its cells has the coarse label of its first cell."""
    for coarse, (ids, inverse) in zip(levels[:-1], grouped[1:], strict=True):
        first = np.zeros(ids.size, dtype=np.int64)
        first[inverse[::-1]] = np.arange(inverse.size)[::-1]
        if (coarse != coarse[first][inverse]).any():
            raise ValidationError("the rounder's queries must nest (each group inside one above)")


def _solve(
    net: _Network, source: int, ends: IntArray, need: IntArray | None
) -> tuple[FloatArray, float]:
    """The flow's integral optimal vertex and the linear program's optimum (+ offset)."""
    tail, head, low, high, cost = net.arrays()
    b = np.zeros(net.n)
    keep = np.ones(net.n, dtype=bool)
    if need is not None:
        b[ends] = need
        b[source] = -need.sum()
    else:  # the root: the sink takes whatever the source sends
        keep[[source, int(ends[0])]] = False
    live = _live_arcs(net.n, tail, head, low, high, b != 0, ~keep)
    ends_of = np.stack([tail[live], head[live]], axis=1)  # (arcs, 2): each column's rows
    n_arcs = ends_of.shape[0]
    keep &= (np.bincount(ends_of.ravel(), minlength=net.n) > 0) | (b != 0)  # empty rows: 0 = 0
    flow = np.zeros(tail.size)
    if n_arcs == 0:  # nothing can move (a family of zeros): feasible only if nothing must
        if (b[keep] != 0).any():
            raise ConvergenceError("the rounder's flow problem failed: it is infeasible")
        return flow, net.offset
    A = _incidence(ends_of, keep)
    res = solve_equalities(cost[live], A, b[keep], low[live], high[live])
    if not res.optimal:
        raise ConvergenceError(f"the rounder's flow problem failed: {res.message}")
    flow[live] = res.x
    if np.abs(flow - np.rint(flow)).max(initial=0.0) > 1e-6:
        raise ConvergenceError("the rounder's flow is not integral; please report the input")
    return flow, res.fun + net.offset


def _incidence(ends_of: IntArray, keep: Any) -> Any:
    """The node-arc incidence matrix (CSC, rows sorted in each column) of arcs ``ends_of``
    (tail, head) on the rows ``keep`` (renumbered in order): -1 at the tail, +1 at the
    head, an end on a row not kept left out. Built straight from the arcs, the same matrix
    as a sparse matrix's rows picked and converted, in a fraction of the time."""
    value = np.broadcast_to(np.array([-1.0, 1.0]), ends_of.shape)
    order = ends_of[:, 0] > ends_of[:, 1]  # each column's rows ascending
    rows = np.where(order[:, None], ends_of[:, ::-1], ends_of)
    value = np.where(order[:, None], value[:, ::-1], value)
    kept = keep[rows]
    renumber = np.cumsum(keep) - 1
    start = np.zeros(rows.shape[0] + 1, dtype=np.int32)
    np.cumsum(kept.sum(axis=1), out=start[1:])
    return sparse.csc_array(
        (value[kept], renumber[rows[kept]].astype(np.int32), start),
        shape=(int(keep.sum()), rows.shape[0]),
    )


def _live_arcs(
    n: int,
    tail: IntArray,
    head: IntArray,
    low: FloatArray,
    high: FloatArray,
    supplied: Any,
    free: Any,
) -> Any:
    """The arcs that can carry flow (an exact reduction, lower bounds being >= 0): not those
    capped at 0, nor, repeatedly, an arc (with no lower bound) into a node that balances to 0
    (not ``supplied``, not ``free`` of its balance) and has no live arc out, since what
    enters such a node must be 0. A block's family has most cells at 0 in its parent, so
    most of its cell arcs and fine groups drop out before the linear program."""
    live = high > 0
    while True:
        exits = np.bincount(tail[live], minlength=n) > 0
        dead_end = ~exits & ~supplied & ~free
        cut = live & dead_end[head] & (low <= 0)
        if not cut.any():
            return live
        live &= ~cut


def _cost(
    out: IntArray,
    x: FloatArray,
    grouped: list[tuple[IntArray, IntArray]],
    chain: Sequence[tuple[IntArray, float]],
    cell_weight: float,
    total_weight: float,
) -> float:
    """The weighted L1 distance of the rounded children to their least-squares values
    (``grouped``: each query's ``np.unique(groups, return_inverse=True)``)."""
    err = out - x
    k = err.shape[0]
    cost = cell_weight * float(np.abs(err).sum()) + total_weight * float(np.abs(err.sum(1)).sum())
    for (ids, inverse), (_, weight) in zip(grouped, chain, strict=True):
        slots = (np.arange(k)[:, None] * ids.size + inverse).ravel()  # (child, group)
        sums = np.bincount(slots, err.ravel(), minlength=k * ids.size)
        cost += weight * float(np.abs(sums).sum())
    return cost


#: The 2020 production rounder's second pass (``total`` is its first).
PRODUCTION_ROUNDERS = (
    "hhgq",
    "hhgq * hispanic",
    "hhgq * hispanic * cenrace",
    "hhgq * votingage * hispanic * cenrace",
    "detailed",
)


def schema_rounders(schema: Schema) -> tuple[str, ...]:
    """The production rounder queries on ``schema``: each without the attributes the
    schema lacks (``"detailed"`` when what is left is every attribute), those left empty
    dropped, repeats once (for the persons schema, the production list itself; for the
    63-cell race schema, ``("detailed",)``)."""
    out: list[str] = []
    for query in PRODUCTION_ROUNDERS:
        every = query.split(" * ")
        terms = [t for t in every if t in schema.names]
        if query == "detailed" or terms == every:
            name = query  # kept as production names it
        elif not terms:
            continue
        else:
            name = "detailed" if set(terms) == set(schema.names) else " * ".join(terms)
        if name not in out:
            out.append(name)
    return tuple(out)


def rounder_chain(
    schema: Schema, rounders: Sequence[str] | None
) -> tuple[list[tuple[IntArray, float]], float]:
    """The rounder's nested groups coarse to fine (marginal names or ``"detailed"``;
    ``None``: :func:`schema_rounders`), and the weight of the cells themselves (every query
    that is one count per cell)."""
    chain: list[tuple[IntArray, float]] = []
    cell_weight = 0.0
    for name in schema_rounders(schema) if rounders is None else rounders:
        if name == "detailed":
            cell_weight += 1.0
            continue
        groups = Marginal(schema, name).cell_groups()
        if np.unique(groups).size == schema.size:
            cell_weight += 1.0
            continue
        chain.append((groups, 1.0))
    chain.sort(key=lambda item: np.unique(item[0]).size)
    check_nesting([groups for groups, _ in chain])
    return chain, cell_weight

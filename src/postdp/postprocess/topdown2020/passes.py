"""The passes of the 2020 TopDown's families (private): least-squares pass 0 (the
children's totals closest to their noisy totals, a weighted simplex projection), the later
least-squares passes (a family's split with its public totals, total boxes and structural
rows, certified by its KKT residual), the rounder's first guess at the totals (largest
remainders), and the two passes after pass 0 as the 2020 production ordered them
(``totals_first``, ``round_totals_first``), shared by ``topdown-2020`` and the
restoration (:mod:`postdp.postprocess.restore`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.simplex import weighted_simplex
from postdp.postprocess.topdown2020.family import LevelQuadratic, solve_family
from postdp.postprocess.topdown2020.family_box import solve_family_box
from postdp.postprocess.topdown2020.rounding import round_nested
from postdp.postprocess.topdown2020.structural import FamilyRows, min_tolerance, rounder_limits
from postdp.tables import Measurement

#: How far pass 1 may move a child's total from pass 0's (the production opt_tol_slack).
SLACK = 0.1

__all__ = [
    "SLACK",
    "certified",
    "child_weight",
    "families",
    "largest_remainders",
    "level_quadratic",
    "pass_zero",
    "round_totals_first",
    "solve_pass",
    "total_rows",
    "totals_first",
    "weighted",
]


def solve_pass(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    G: FloatArray | None,
    g: FloatArray | None,
    box: tuple[FloatArray, FloatArray] | None,
    bound: FamilyRows | None,
    a: FloatArray | None = None,
) -> FloatArray:
    """A family's least-squares pass: public rows G x_j = g_j, each child's total in
    ``box`` and the structural rows within their bounds (each optional); child j's
    information a_j H (``a`` None: all 1)."""
    if box is None and bound is None:
        return certified(solve_family, H, b, p, G=G, g=g, weight=a)
    rows, lo, hi = [], [], []
    if box is not None:
        rows.append(np.ones((1, p.size)))
        lo.append(box[0][:, None])
        hi.append(box[1][:, None])
    if bound is not None:
        rows.append(bound.C)
        lo.append(bound.lo)
        hi.append(bound.hi)
    return certified(
        solve_family_box,
        H,
        b,
        p,
        G=G,
        g=g,
        c=np.concatenate(rows),
        lo=np.concatenate(lo, axis=1),
        hi=np.concatenate(hi, axis=1),
        weight=a,
    )


def level_quadratic(items: list[tuple[int, Measurement]]) -> LevelQuadratic:
    return LevelQuadratic(
        [m.query.marginal_of.cell_groups() for _, m in items],  # type: ignore[union-attr]
        [1.0 / m.variance for _, m in items],
    )


def total_rows(public: FloatArray | None, m: int) -> tuple[FloatArray | None, FloatArray | None]:
    if public is None:
        return None, None
    return np.ones((1, m)), np.asarray(public, dtype=np.float64)[:, None]


def certified(solver: object, H: Any, b: FloatArray, p: FloatArray, **rows: object) -> FloatArray:
    """A family's least-squares split, its KKT certificate checked at 1e-9 of the scale
    (``H`` the (m, m) matrix or a matrix-free one with its ``diagonal()``)."""
    a: Any = rows.get("weight")
    h = float(H.diagonal().max()) * (1.0 if a is None else float(np.max(a)))
    scale = max(1.0, float(np.abs(b).max(initial=0.0)), float(p.max()) * h)
    result = solver(H, b, p, tol=1e-11 * scale, **rows)  # type: ignore[operator]
    worst = result.worst
    if worst > 1e-9 * scale:
        raise ConvergenceError(
            f"a topdown-2020 family is not certified (KKT residual {worst:.3g} of scale "
            f"{scale:.3g}); please report the input"
        )
    x: FloatArray = np.maximum(result.x, 0.0)
    return x


def families(kids: IntArray, above: IntArray) -> list[tuple[int, IntArray]]:
    """A level's families: each parent in ``above`` (the geounit above each of ``kids``)
    with its children, in the children's order."""
    parents, up = np.unique(above, return_inverse=True)
    order = np.argsort(up, kind="stable")
    edges = np.searchsorted(up[order], np.arange(parents.size + 1))
    return [(int(p), kids[order[edges[f] : edges[f + 1]]]) for f, p in enumerate(parents)]


def child_weight(scale: FloatArray | None, geounits: IntArray) -> FloatArray | None:
    """The children's budget factors (``scale`` per geounit), None when all are 1."""
    a = None if scale is None else scale[geounits]
    return None if a is None or (a == 1.0).all() else a


def weighted(b: FloatArray, a: FloatArray | None) -> FloatArray:
    return b if a is None else b * a[:, None]


def pass_zero(
    totals: list[tuple[int, Measurement]],
    values: list[FloatArray],
    rows: IntArray,
    total: float,
    a: FloatArray | None = None,
) -> FloatArray:
    """Least-squares pass 0: children's totals >= 0 adding up to ``total``, closest to their
    noisy totals (several measurements of the total combined by their weights; child j's
    distance weighted by a_j)."""
    weight = sum(1.0 / m.variance for _, m in totals)
    y = sum(values[i][rows, 0] / m.variance for i, m in totals) / weight
    h = np.ones(rows.size) if a is None else a
    return weighted_simplex(np.asarray(y, dtype=np.float64), h, total)


def largest_remainders(t: FloatArray, total: int) -> IntArray:
    """Integers, each the floor or ceiling of t, adding up to ``total``, L1-closest to t."""
    base = np.floor(t).astype(np.int64)
    extra = total - int(base.sum())
    if not 0 <= extra <= t.size:
        raise ConvergenceError("the children's totals do not add up to the parent's")
    order = np.argsort(-(t - base), kind="stable")
    base[order[:extra]] += 1
    return base


def totals_first(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    first: FloatArray,
    bound: FamilyRows | None,
    a: FloatArray | None,
    slack: float,
) -> FloatArray:
    """Least-squares pass 1 after pass 0's totals ``first``: nonnegative cells adding up to
    the parent's ``p``, each child's total within tau + ``slack`` of ``first`` (tau the
    smallest tolerance at which the bounds let those totals be held, 0 without bounds)."""
    tau = 0.0 if bound is None else min_tolerance(first, p, bound)
    return solve_pass(H, b, p, None, None, (first - tau - slack, first + tau + slack), bound, a)


def round_totals_first(
    x: FloatArray,
    chain: list[tuple[IntArray, float]],
    cell_weight: float,
    parent: IntArray,
    bound: FamilyRows | None,
) -> IntArray:
    """The two rounder passes after :func:`totals_first`: the children's totals by largest
    remainders (rounder pass 0), then the cells with those totals fixed, L1-closest over
    ``chain`` (pass 1). Where the bounds cannot be held with those totals, pass 0 rounds
    the totals by a flow that meets them (slow on large families: a flow over every cell
    with no cost on them) and pass 1 runs again."""
    limits = rounder_limits(bound)
    totals = largest_remainders(x.sum(axis=1), int(parent.sum()))
    try:
        out: IntArray = round_nested(
            x, chain, cell_weight=cell_weight, parent=parent, totals=totals, **limits
        ).x
        return out
    except ConvergenceError:
        zero = [(groups, 0.0) for groups, _ in chain]
        totals = round_nested(
            x, zero, cell_weight=0.0, parent=parent, total_weight=1.0, **limits
        ).x.sum(axis=1)
        out = round_nested(
            x, chain, cell_weight=cell_weight, parent=parent, totals=totals, **limits
        ).x
        return out

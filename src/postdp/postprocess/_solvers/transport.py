"""Feasible starting points for a family split (private): a transportation plan with given
margins, filled north-west corner first (the family solver's primal fallback starts there);
for rows that overlap (a child's total and its group sums), a vertex of the linear
feasibility problem found by HiGHS."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import optimize, sparse

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError

BoolArray = npt.NDArray[np.bool_]

__all__ = ["feasible_rows", "feasible_split", "north_west"]


def feasible_split(
    p: FloatArray,
    G: FloatArray,
    g: FloatArray,
    active: BoolArray,
    x: FloatArray,
    free: BoolArray,
    fixed: BoolArray | None = None,
) -> FloatArray:
    """A point >= 0 with the parent's sums and the children's public rows, near ``x``:
    without public rows, the free part of x rescaled per cell; with public rows that do not
    overlap, each row's cells filled by the north-west corner rule (a transportation
    problem with the cells' and the children's totals)."""
    k = x.shape[0]
    if fixed is not None and fixed.any():  # cells held at 0: the linear program
        lo = np.where(active, g, -np.inf)
        return feasible_rows(p, G, lo, np.where(active, g, np.inf), x, zero=fixed)
    xp = np.where(free, np.maximum(x, 0.0), 0.0)
    sums = xp.sum(axis=0)
    xp = np.where(sums > 0, xp * (p / np.where(sums > 0, sums, 1.0)), p / k)
    if not G.shape[0]:
        return xp
    member = G != 0
    if (member.sum(axis=0) > 1).any() or not np.isin(G, (0.0, 1.0)).all():
        lo = np.where(active, g, -np.inf)
        return feasible_rows(p, G, lo, np.where(active, g, np.inf), xp)
    for r in range(G.shape[0]):
        cells = np.flatnonzero(member[r])
        on = active[:, r]
        demand = np.where(on, np.maximum(g[:, r], 0.0), 0.0)
        if not on.all():  # children free of this row share what the others leave
            left = float(p[cells].sum() - demand.sum())
            if left < 0:
                raise ConvergenceError(
                    "top-down's family split stalled with infeasible row bounds; please "
                    "report the input"
                )
            demand[~on] = left / int((~on).sum())
        xp[:, cells] = north_west(p[cells], demand)
    return xp


def north_west(supply: FloatArray, demand: FloatArray) -> FloatArray:
    """A transportation plan (len(demand), len(supply)) with these margins (their totals
    agree), filled corner first."""
    out = np.zeros((demand.size, supply.size))
    s, d = supply.astype(float).copy(), demand.astype(float).copy()
    d *= s.sum() / d.sum() if d.sum() > 0 else 0.0  # exact up to rounding
    i = j = 0
    while i < s.size and j < d.size:
        amount = min(s[i], d[j])
        out[j, i] = amount
        s[i] -= amount
        d[j] -= amount
        if s[i] <= d[j]:
            i += 1
        else:
            j += 1
    return out


def feasible_rows(
    p: FloatArray,
    C: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    near: FloatArray,
    *,
    zero: BoolArray | None = None,
) -> FloatArray:
    """The point x >= 0 (k, m) with sum_j x_j = p and lo_j <= C x_j <= hi_j (and x = 0
    where ``zero``) closest to ``near`` in L1, by HiGHS (a linear program: x - near =
    e_plus - e_minus)."""
    k, m = near.shape
    n = k * m
    eye = sparse.eye(n, format="csr")
    parent = sparse.hstack(
        [sparse.kron(np.ones((1, k)), sparse.eye(m)), sparse.csr_array((m, 2 * n))]
    )
    split = sparse.hstack([eye, -eye, eye])  # x - e_plus + e_minus = near
    block = sparse.csr_array(
        sparse.hstack(
            [
                sparse.kron(sparse.eye(k), sparse.csr_array(C)),
                sparse.csr_array((k * C.shape[0], 2 * n)),
            ]
        )
    )
    top, bottom = hi.ravel(), lo.ravel()
    up, down = np.isfinite(top), np.isfinite(bottom)
    top_x = np.where(zero.ravel(), 0.0, np.inf) if zero is not None else np.full(n, np.inf)
    res = optimize.linprog(  # type: ignore[call-overload]  # sparse A is supported
        np.concatenate([np.zeros(n), np.ones(2 * n)]),
        A_ub=sparse.vstack([block[up], -block[down]], format="csr"),
        b_ub=np.concatenate([top[up], -bottom[down]]),
        A_eq=sparse.vstack([parent, split], format="csr"),
        b_eq=np.concatenate([p, near.ravel()]),
        bounds=np.column_stack([np.zeros(3 * n), np.concatenate([top_x, np.full(2 * n, np.inf)])]),
        method="highs",
    )
    if res.status != 0:
        raise ConvergenceError(
            "a top-down family's bounds cannot all be met with the parent's cells; please "
            "report the input"
        )
    out: FloatArray = np.maximum(np.asarray(res.x)[:n].reshape(k, m), 0.0)
    return out

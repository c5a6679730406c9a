"""Feasible starting points for a family split (private): a transportation plan with given
margins, filled north-west corner first (the family solver's primal fallback starts there)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError

BoolArray = npt.NDArray[np.bool_]

__all__ = ["feasible_split", "north_west"]


def feasible_split(
    p: FloatArray, G: FloatArray, g: FloatArray, active: BoolArray, x: FloatArray, free: BoolArray
) -> FloatArray:
    """A point >= 0 with the parent's sums and the children's public rows, near ``x``:
    without public rows, the free part of x rescaled per cell; with public rows that do not
    overlap, each row's cells filled by the north-west corner rule (a transportation
    problem with the cells' and the children's totals)."""
    k = x.shape[0]
    xp = np.where(free, np.maximum(x, 0.0), 0.0)
    sums = xp.sum(axis=0)
    xp = np.where(sums > 0, xp * (p / np.where(sums > 0, sums, 1.0)), p / k)
    if not G.shape[0]:
        return xp
    member = G != 0
    if (member.sum(axis=0) > 1).any() or not np.isin(G, (0.0, 1.0)).all():
        raise ConvergenceError(
            "top-down's family split stalled with overlapping invariants; please report the input"
        )
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

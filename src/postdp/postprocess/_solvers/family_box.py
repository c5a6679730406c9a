"""One family of top-down with each child's total bounded, exactly: the family split of
:mod:`postdp.postprocess._solvers.family_nnls` with lo_j <= c' x_j <= hi_j for every child j
(the Census Bureau's second least-squares pass holds each child's total within a tolerance
of the first pass's; c is the all-ones row of the total).

An active-set method on the bounds: a row at a bound is an equality row of the family solver
for that child; a loose row has multiplier 0. The children's rows add up to the parent's
total, so with every row at a bound the multipliers are fixed only up to a common shift; the
method keeps at least one row loose, which pins them. Each round solves the family exactly;
then frees the active row whose multiplier has the most wrong sign (at an upper bound the
solver's nu must be <= 0, at a lower bound >= 0), or else makes active the loose row that
breaks its bound most -- and when that row is the last loose one, frees in its place the
active row on the other side whose multiplier is smallest (the child that gives way most
cheaply). It stops when nothing is broken: the solution then meets the KKT conditions of the
whole problem (the family solver's, the bounds, the multipliers' signs, complementary
slackness by construction), which are returned for the caller to check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.family_nnls import Family, FamilyResult, solve_family

__all__ = ["BoxResult", "solve_family_box"]


@dataclass(frozen=True)
class BoxResult:
    """A bounded family's solution with the KKT residuals of the bounded problem."""

    family: FamilyResult
    bounds: float  # largest violation of lo <= C x <= hi
    sign: float  # largest wrong-signed multiplier of an active bound
    upper: np.ndarray  # (k,) children held at their upper bound
    lower: np.ndarray  # (k,) children held at their lower bound

    @property
    def x(self) -> FloatArray:
        return self.family.x

    @property
    def worst(self) -> float:
        return max(self.family.worst, self.bounds, self.sign)


def solve_family_box(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    *,
    tol: float,
    lo: FloatArray,
    hi: FloatArray,
    c: FloatArray | None = None,
    G: FloatArray | None = None,
    g: FloatArray | None = None,
) -> BoxResult:
    """The family's exact split with each child's total bounded (see the module notes).

    Parameters
    ----------
    H, b, p, tol, G, g
        As :func:`~postdp.postprocess._solvers.family_nnls.solve_family` (G, g: rows
        every child meets exactly).
    lo, hi : ndarray, shape (k,)
        Each child's bounds on ``c' x_j`` (lo <= hi).
    c : ndarray, shape (m,), optional
        The bounded row (default all ones: the child's total).

    Returns
    -------
    BoxResult

    Raises
    ------
    ConvergenceError
        If the bounds cannot be met or the active set does not settle.
    """
    k, m = b.shape
    c = np.ones(m) if c is None else c
    G = np.zeros((0, m)) if G is None else G
    g = np.zeros((k, 0)) if g is None else g
    R = G.shape[0]
    if k == 1 or m == 0:
        res = solve_family(H, b, p, tol=tol, G=G, g=g)
        rows = res.x @ c
        bounds = np.maximum(np.maximum(rows - hi, lo - rows), 0.0).max(initial=0.0)
        none = np.zeros(k, dtype=bool)
        return BoxResult(res, float(bounds), 0.0, none, none.copy())
    family = Family(H, b, p, np.concatenate([G, c[None, :]]))
    upper = np.zeros(k, dtype=bool)
    lower = np.zeros(k, dtype=bool)
    every = np.ones((k, R), dtype=bool)
    free = None
    best, stall = np.inf, 0
    for _ in range(20 * k + 40):
        g_all = np.concatenate([g, np.where(upper, hi, lo)[:, None]], axis=1)
        active = np.concatenate([every, (upper | lower)[:, None]], axis=1)
        res = family.solve(g_all, active, tol=tol, free=free)
        free = res.x > 0
        rows = res.x @ c
        nu = res.nu[:, R] if res.nu is not None else np.zeros(k)
        wrong = np.where(upper, nu, 0.0) + np.where(lower, -nu, 0.0)  # > 0: wrong sign
        loose = ~(upper | lower)
        over = np.where(loose, rows - hi, 0.0)
        under = np.where(loose, lo - rows, 0.0)
        broken = (wrong > tol) | (over > tol) | (under > tol)
        if not broken.any():
            bounds = np.maximum(np.maximum(rows - hi, lo - rows), 0.0).max(initial=0.0)
            return BoxResult(res, float(bounds), float(wrong.max(initial=0.0)), upper, lower)
        count = int(broken.sum())
        if count < best:
            best, stall = count, 0
        else:
            stall += 1
        one = stall >= 3  # block moves stalled: one move at a time from here on
        if (wrong > tol).any():  # free active rows whose multipliers have the wrong sign
            out = wrong > tol
            if one:
                out = np.arange(k) == int(np.argmax(wrong))
            upper &= ~out
            lower &= ~out
            continue
        if one:
            high = over.max() >= under.max()
            take = np.arange(k) == int(np.argmax(over if high else under))
            ups, downs = take & high, take & ~high
        else:
            ups, downs = over > tol, under > tol
        if (ups | downs).sum() >= loose.sum():  # keep a loose row: it pins the multipliers
            if loose.sum() > 1:
                worst = np.where(ups, over, 0.0) + np.where(downs, under, 0.0)
                least = int(np.argmin(np.where(ups | downs, worst, np.inf)))
                ups[least] = downs[least] = False
            else:  # the last loose row breaks: free one active row on the other side
                j = int(np.flatnonzero(loose)[0])
                side = lower if ups[j] else upper
                if not side.any():
                    raise ConvergenceError(
                        "the children's total bounds cannot add up to the parent's total"
                    )
                i = int(np.argmin(np.where(side, np.abs(nu), np.inf)))
                upper[i] = lower[i] = False
        upper |= ups
        lower |= downs
    raise ConvergenceError(
        "a bounded top-down family did not settle its active bounds; please report the input"
    )

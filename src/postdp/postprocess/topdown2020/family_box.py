"""One family of top-down with bounded rows, exactly: the 2020 TopDown's total boxes and
structural bounds (:func:`solve_family_box`). The problem is the family split of
:mod:`postdp.postprocess.topdown2020.family` with lo_jr <= C_r x_j <= hi_jr for every
child j and row r (the Census Bureau's second least-squares pass holds each child's total
within a tolerance of the first pass's; its structural constraints bound each child's
group-quarters counts from below by its facilities and hold a type with no facility at 0).
A bound may be infinite; lo_jr = hi_jr makes the row an equality for that child.

An active-set method on the bounds: a row at a bound is an equality row of the family solver
for that child; a loose row has multiplier 0. Row r of the children adds up to the parent's
C_r p, so with every child's row r at a bound its multipliers are fixed only up to a common
shift; the method keeps at least one of them loose, which pins them (a row every child must
hold at a bound -- the bounds add up to the parent's -- is an equality for all from the
start). Each round solves the family exactly; then frees the active rows whose multipliers
have the wrong sign (at an upper bound the solver's nu must be <= 0, at a lower bound
>= 0), or else makes active the loose rows that break their bound -- and when that would
leave a row of the family with no loose child, frees in its place the active child on the
other side whose multiplier is smallest (the child that gives way most cheaply). Moves are
made in blocks while the number of broken conditions falls, then one at a time. It stops
when nothing is broken: the solution then meets the KKT conditions of the whole problem
(the family solver's, the bounds, the multipliers' signs, complementary slackness by
construction), which are returned for the caller to check.

Order of attempts: these moves on the relaxation (the first row's bounds and the
equalities), whose answer stands when it meets every other bound; else the moves on every
row, for at most ``_DUAL_LIMIT`` solves (they settle in a few on the 2020 families, but on
overlapping rows they are not sure to settle); else the primal active-set method, which
cannot cycle but adds one row per solve (hours on a family of 2,500 tracts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.transport import feasible_rows
from postdp.postprocess.topdown2020.family import BoolArray, Family, FamilyResult, solve_family

__all__ = ["BoxResult", "solve_family_box"]

#: Solves the move-based method may take on every bounded row before the primal method
#: takes over (a family of 2,500 tracts x 800 cells costs ~16 s a solve; the primal
#: method, one row per solve, would take hours there).
_DUAL_LIMIT = 60


@dataclass(frozen=True)
class BoxResult:
    """A bounded family's solution with the KKT residuals of the bounded problem; ``upper``
    and ``lower`` (k,) for one bounded row, else (k, R): the rows held at a bound."""

    family: FamilyResult
    bounds: float  # largest violation of lo <= C x <= hi
    sign: float  # largest wrong-signed multiplier of an active bound
    upper: np.ndarray
    lower: np.ndarray

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
    weight: FloatArray | None = None,
) -> BoxResult:
    """The family's exact split with bounded rows per child (see the module notes).

    Parameters
    ----------
    H, b, p, tol, G, g, weight
        As :func:`solve_family` (G, g: rows
        every child meets exactly).
    lo, hi : ndarray, shape (k,) or (k, R)
        Each child's bounds on its rows ``C x_j`` (lo <= hi; +-inf for none).
    c : ndarray, shape (m,) or (R, m), optional
        The bounded rows (default one row of ones: the child's total).

    Returns
    -------
    BoxResult

    Raises
    ------
    ConvergenceError
        If the bounds cannot be met or the active set does not settle.
    """
    k, m = b.shape
    one_row = c is None or np.ndim(c) == 1
    C = np.ones((1, m)) if c is None else np.atleast_2d(np.asarray(c, dtype=np.float64))
    R_b = C.shape[0]
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64).reshape(k, -1), (k, R_b))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64).reshape(k, -1), (k, R_b))
    G = np.zeros((0, m)) if G is None else G
    g = np.zeros((k, 0)) if g is None else g
    shape = (k,) if one_row else (k, R_b)
    if k == 1 or m == 0:
        res = solve_family(H, b, p, tol=tol, G=G, g=g)
        none = np.zeros(shape, dtype=bool)
        return BoxResult(res, _violation(res.x @ C.T, lo, hi), 0.0, none, none.copy())
    # a row held at 0 (a structural zero: no facility of a type) holds its cells at 0
    zero = (lo == 0) & (hi == 0) & np.asarray((C >= 0).all(axis=1))[None, :]
    fixed = (zero.astype(float) @ (C != 0).astype(float)) > 0
    lo, hi = np.where(zero, -np.inf, lo), np.where(zero, np.inf, hi)
    family = Family(
        H, b, p, np.concatenate([G, C]), fixed=fixed if fixed.any() else None, weight=weight
    )
    eq, upper, lower = _equalities(C @ p, lo, hi, tol)
    if R_b == 1:
        return _dual(family, g, _Rows(C, lo, hi, eq), upper, lower, tol, shape)
    # the relaxation: the first row's bounds and the equalities only; its answer is the
    # answer when it meets every other bound (the usual case), else the primal method
    first = np.zeros(R_b, dtype=bool)
    first[0] = True
    relaxed_lo = np.where(first | eq, lo, -np.inf)
    relaxed_hi = np.where(first | eq, hi, np.inf)
    try:
        relaxed = _dual(family, g, _Rows(C, relaxed_lo, relaxed_hi, eq), upper, lower, tol, shape)
    except ConvergenceError:  # the moves met rows they could not hold together
        start = family.solve(
            np.concatenate([g, lo], axis=1),
            np.concatenate([np.ones(g.shape, dtype=bool), eq], axis=1),
            tol=tol,
        )
        relaxed = BoxResult(start, np.inf, 0.0, upper, lower)
    if relaxed.bounds <= tol and _violation(relaxed.x @ C.T, lo, hi) <= tol:
        return relaxed
    rows = _Rows(C, lo, hi, eq)
    try:  # block moves on every row settle in a few solves when they settle at all
        return _dual(family, g, rows, upper, lower, tol, shape, limit=_DUAL_LIMIT)
    except ConvergenceError:  # else the primal method, which cannot cycle
        return _box_primal(family, g, p, rows, upper, lower, tol, relaxed)


@dataclass(frozen=True)
class _Rows:
    """The bounded rows C (R, m), their bounds lo and hi (k, R) and the rows held as
    equalities from the start."""

    C: FloatArray
    lo: FloatArray
    hi: FloatArray
    eq: BoolArray


def _dual(
    family: Family,
    g: FloatArray,
    rows_: _Rows,
    upper: BoolArray,
    lower: BoolArray,
    tol: float,
    shape: tuple[int, ...],
    *,
    limit: int | None = None,
) -> BoxResult:
    """Active set by moves of the broken conditions (cheap; for one bounded row per child,
    or rows that do not overlap; on overlapping rows it may not settle: ``limit`` solves,
    then ConvergenceError)."""
    C, lo, hi, eq = rows_.C, rows_.lo, rows_.hi, rows_.eq
    upper, lower = upper.copy(), lower.copy()
    k, R = g.shape
    R_b = C.shape[0]
    every = np.ones((k, R), dtype=bool)
    pinned = _pinned(C, eq, family.inner.fixed)
    free: BoolArray | None = None
    best, stall = np.inf, 0
    for _ in range(20 * k * R_b + 40 if limit is None else limit):
        active = upper | lower | eq
        g_all = np.concatenate([g, np.where(upper, hi, lo)], axis=1)
        res = family.solve(g_all, np.concatenate([every, active], axis=1), tol=tol, free=free)
        free = res.x > 0
        rows = res.x @ C.T
        nu = res.nu[:, R:] if res.nu is not None else np.zeros((k, R_b))
        wrong = np.where(upper & ~eq, nu, 0.0) + np.where(lower & ~eq, -nu, 0.0)
        loose = ~active & ~pinned
        with np.errstate(invalid="ignore"):
            over = np.where(loose, rows - hi, 0.0)
            under = np.where(loose, lo - rows, 0.0)
        broken = (wrong > tol) | (over > tol) | (under > tol)
        if not broken.any():
            return BoxResult(
                res,
                _violation(rows, lo, hi),
                float(wrong.max(initial=0.0)),
                upper.reshape(shape),
                lower.reshape(shape),
            )
        count = int(broken.sum())
        if count < best:
            best, stall = count, 0
        else:
            stall += 1
        one = stall >= 3  # block moves stalled: one move at a time from here on
        if (wrong > tol).any():  # free active rows whose multipliers have the wrong sign
            out = wrong > tol
            if one:
                out = _only(out, wrong)
            upper &= ~out
            lower &= ~out
            continue
        if one:
            worst = np.maximum(over, under)
            take = _only(worst > tol, worst)
            ups, downs = take & (over >= under), take & (over < under)
        else:
            ups, downs = over > tol, under > tol
        for r in range(R_b):
            _keep_one_loose(r, ups, downs, loose, over, under, upper, lower, nu, eq)
        upper |= ups
        lower |= downs
    raise ConvergenceError(
        "a bounded top-down family did not settle its active bounds; please report the input"
    )


def _box_primal(
    family: Family,
    g: FloatArray,
    p: FloatArray,
    rows_: _Rows,
    upper: BoolArray,
    lower: BoolArray,
    tol: float,
    relaxed: BoxResult,
) -> BoxResult:
    """The primal active-set method on the rows (Nocedal and Wright, Numerical
    Optimization, 2nd ed., algorithm 16.3, with the cells' signs kept by the exact inner
    solve): from a feasible point (the L1-closest to the relaxation's answer, a linear
    program), each round solves the family with its working rows as equalities and steps
    towards that answer as far as every other row allows; a row that blocks the step joins
    the working set; at a full step, a working row whose multiplier has the wrong sign
    leaves it. The objective never rises, so the method does not cycle back."""
    C, lo, hi, eq = rows_.C, rows_.lo, rows_.hi, rows_.eq
    k, R = g.shape
    R_b = C.shape[0]
    x = feasible_rows(p, C, lo, hi, relaxed.x, zero=family.inner.fixed)
    upper, lower = upper.copy(), lower.copy()
    every = np.ones((k, R), dtype=bool)
    free: BoolArray = x > 0
    for _ in range(50 * k * R_b + 50):
        active = upper | lower | eq
        g_all = np.concatenate([g, np.where(upper, hi, lo)], axis=1)
        res = family.solve(g_all, np.concatenate([every, active], axis=1), tol=tol, free=free)
        step = res.x - x
        rows, moves = x @ C.T, step @ C.T
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(moves > 0, (hi - rows) / moves, (lo - rows) / moves)
        room = np.where(active | (np.abs(moves) <= tol) | np.isnan(room), np.inf, room)
        room = np.maximum(room, 0.0)
        j, r = np.unravel_index(int(np.argmin(room)), room.shape)
        if room[j, r] < 1.0:  # a row blocks the step: it joins the working set
            x = x + room[j, r] * step
            upper[j, r], lower[j, r] = moves[j, r] > 0, moves[j, r] < 0
            free = (x > 0) | (res.x > 0)
            continue
        x, free = res.x, res.x > 0
        nu = res.nu[:, R:] if res.nu is not None else np.zeros((k, R_b))
        wrong = np.where(upper & ~eq, nu, 0.0) + np.where(lower & ~eq, -nu, 0.0)
        if not (wrong > tol).any():
            return BoxResult(
                res, _violation(x @ C.T, lo, hi), float(wrong.max(initial=0.0)), upper, lower
            )
        drop = _only(wrong > tol, wrong)
        upper &= ~drop
        lower &= ~drop
    raise ConvergenceError(
        "a bounded top-down family did not settle its active rows; please report the input"
    )


def _equalities(
    parent: FloatArray, lo: FloatArray, hi: FloatArray, tol: float
) -> tuple[BoolArray, BoolArray, BoolArray]:
    """Rows held from the start: equal bounds, and every child's row of a family row whose
    lower (upper) bounds add up to the parent's (all children at that bound)."""
    eq = lo == hi
    upper = np.zeros(lo.shape, dtype=bool)
    lower = np.zeros(lo.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        at_low = lo.sum(axis=0) >= parent - tol
        at_high = hi.sum(axis=0) <= parent + tol
    lower[:, at_low] = True
    upper[:, at_high & ~at_low] = True
    eq |= lower | upper  # sign-free: the family row leaves them no choice
    full = np.flatnonzero(eq.all(axis=0))  # a family row held for every child: one of
    eq[-1, full] = upper[-1, full] = lower[-1, full] = False  # them follows from the rest
    return eq, upper, lower


def _pinned(C: FloatArray, eq: BoolArray, fixed: BoolArray) -> BoolArray:
    """(k, R): a child's row all of whose cells lie in its equality rows or are held at 0
    (the row is fixed by them; it is neither loose nor ever moved)."""
    member = (C != 0).astype(float)  # (R, m)
    covered = ((eq.astype(float) @ member) > 0) | fixed  # (k, m)
    outside = (~covered).astype(float) @ member.T  # (k, R): the row's cells not covered
    out: BoolArray = (outside == 0) & ~eq
    return out


def _only(mask: BoolArray, score: FloatArray) -> BoolArray:
    """The single entry of ``mask`` with the largest score."""
    out = np.zeros(mask.shape, dtype=bool)
    out[np.unravel_index(int(np.argmax(np.where(mask, score, -np.inf))), mask.shape)] = True
    return out


def _keep_one_loose(
    r: int,
    ups: BoolArray,
    downs: BoolArray,
    loose: BoolArray,
    over: FloatArray,
    under: FloatArray,
    upper: BoolArray,
    lower: BoolArray,
    nu: FloatArray,
    eq: BoolArray,
) -> None:
    """Keep a loose child in family row r (it pins the row's multipliers): drop the least
    broken of the moves, or, when the last loose child breaks, free the active child on the
    other side with the smallest multiplier."""
    moving = ups[:, r] | downs[:, r]
    n_loose = int(loose[:, r].sum())
    if not moving.any() or moving.sum() < n_loose:
        return
    if n_loose > 1:
        worst = np.where(ups[:, r], over[:, r], 0.0) + np.where(downs[:, r], under[:, r], 0.0)
        least = int(np.argmin(np.where(moving, worst, np.inf)))
        ups[least, r] = downs[least, r] = False
        return
    j = int(np.flatnonzero(loose[:, r])[0])
    side = (lower if ups[j, r] else upper)[:, r] & ~eq[:, r]
    if not side.any():
        raise ConvergenceError("the children's row bounds cannot add up to the parent's")
    i = int(np.argmin(np.where(side, np.abs(nu[:, r]), np.inf)))
    upper[i, r] = lower[i, r] = False


def _violation(rows: FloatArray, lo: FloatArray, hi: FloatArray) -> float:
    """The largest violation of lo <= rows <= hi."""
    with np.errstate(invalid="ignore"):
        worst = np.maximum(np.maximum(rows - hi, lo - rows), 0.0)
    return float(np.nan_to_num(worst, nan=0.0).max(initial=0.0))

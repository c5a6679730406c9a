"""Top-down's root for schema tables: nonnegative least squares in the cells with the
public marginals held, by block principal pivoting, certified (private; the families below
are :mod:`postdp.postprocess.topdown2020.family`).

The problem: minimise 1/2 x' H x - b' x subject to C x = g (the public marginals' rows)
and x >= 0, H the root's information matrix (positive definite when its noisy marginals
identify every cell). With F the free cells, x[F] = Z (b[F] + C[:, F]' lam), Z =
H[F, F]^-1, and lam solves (C_F Z C_F') lam = g - C_F Z b[F] (least squares when rows are
dependent). A held cell's multiplier is (H x - b - C' lam)_i, which must be >= 0, except in
a public row with no free cell, whose own multiplier can make its cells' as large as needed.
Cost per round: f^3 / 3 for the free block (f about the root's positive cells) and r^2 f
for r public rows.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError
from postdp.postprocess.topdown2020.family import (
    _MAX_ROUNDS,
    _STALL_ROUNDS,
    BoolArray,
    FamilyResult,
)

__all__ = ["bounded_root", "certified_root", "solve_root"]


def solve_root(
    H: FloatArray, b: FloatArray, C: FloatArray, g: FloatArray, *, tol: float
) -> FamilyResult:
    """The root's nonnegative least squares with its public queries held: minimise
    1/2 x' H x - b' x subject to C x = g and x >= 0, by block principal pivoting (all wrong
    cells at once while their number falls, then the least-index one: Murty's rule).

    Parameters
    ----------
    H : ndarray, shape (c, c)
        The root's information matrix (positive definite: its noisy queries identify
        every cell).
    b : ndarray, shape (c,)
    C : ndarray, shape (r, c)
        The public queries' rows (r may be 0).
    g : ndarray, shape (r,)
        Their values.
    tol : float

    Returns
    -------
    FamilyResult
        With ``x`` of shape (1, c).
    """
    c = b.size
    free = linalg.cho_solve(linalg.cho_factor(H), b) > 0
    best, stall = np.inf, 0
    for rounds in range(1, _MAX_ROUNDS + 1):
        idx = np.flatnonzero(free)
        x = np.zeros(c)
        lam = np.zeros(C.shape[0])
        if idx.size:
            factor = linalg.cho_factor(H[np.ix_(idx, idx)])
            v = linalg.cho_solve(factor, b[idx])
            if C.shape[0]:
                CZ = linalg.cho_solve(factor, C[:, idx].T)  # Z C_F'
                lam = linalg.lstsq(C[:, idx] @ CZ, g - C[:, idx] @ v)[0]
                v = v + CZ @ lam
            x[idx] = v
        mu = H @ x - b - C.T @ lam
        exempt, unmet = _public_rows(C, g, x, free, tol)
        wrong = (free & (x < -tol)) | (~free & (((mu < -tol) & ~exempt) | unmet))
        count = int(wrong.sum())
        if count == 0:
            return _certify(H, b, C, g, x, free, rounds)
        if count < best:
            best, stall = count, 0
        else:
            stall += 1
        if stall >= _STALL_ROUNDS:
            first = np.flatnonzero(wrong)[0]
            wrong = np.zeros_like(wrong)
            wrong[first] = True
        free = free ^ wrong
    raise ConvergenceError(
        "top-down's root did not finish within its round limit; please report the input"
    )


def _certify(
    H: FloatArray,
    b: FloatArray,
    C: FloatArray,
    g: FloatArray,
    x: FloatArray,
    free: BoolArray,
    rounds: int,
) -> FamilyResult:
    """The root's solution (tiny negatives at 0) and its KKT residuals, the public
    multipliers fitted by least squares on the free cells."""
    out = np.where(free, np.maximum(x, 0.0), 0.0)
    grad = H @ out - b
    lam = linalg.lstsq(C[:, free].T, grad[free])[0] if C.shape[0] else np.zeros(0)
    reduced = grad - C.T @ lam
    exempt, _ = _public_rows(C, g, out, free, np.inf)
    return FamilyResult(
        x=out[None, :],
        stationarity=float(np.abs(reduced[free]).max(initial=0.0)),
        dual=float(np.maximum(-reduced[~free & ~exempt], 0.0).max(initial=0.0)),
        negative=float(np.maximum(-x[free], 0.0).max(initial=0.0)),
        consistency=float(np.abs(C @ out - g).max(initial=0.0)),
        rounds=rounds,
    )


def _public_rows(
    C: FloatArray, g: FloatArray, x: FloatArray, free: BoolArray, tol: float
) -> tuple[BoolArray, BoolArray]:
    """Cells in a public row with no free cell (their multipliers are unbounded: the row's
    own multiplier can make them as large as needed, so they are exempt from the sign
    test) and cells in a row the current solution misses by more than ``tol`` (to free)."""
    if not C.shape[0]:
        none = np.zeros(x.size, dtype=bool)
        return none, none
    member = C != 0
    dead = ~(member & free).any(axis=1)
    unmet = np.abs(C @ x - g) > tol
    return member[dead].any(axis=0), member[unmet].any(axis=0)


def certified_root(
    H: FloatArray, b: FloatArray, C: FloatArray, g: FloatArray, *, who: str
) -> FloatArray:
    """:func:`solve_root` at a tolerance of 1e-11 of the problem's scale, its certificate
    checked at 1e-9 (``ConvergenceError`` naming ``who`` otherwise); the root's cells."""
    scale = max(1.0, float(np.abs(b).max()), float(np.abs(g).max(initial=0.0)) * H.max())
    result = solve_root(H, b, C, g, tol=1e-11 * scale)
    worst = max(result.stationarity, result.dual, result.negative, result.consistency)
    if worst > 1e-9 * scale:
        raise ConvergenceError(
            f"{who}'s root is not certified (KKT residual {worst:.3g} of scale "
            f"{scale:.3g}); please report the input"
        )
    out: FloatArray = result.x[0]
    return out


def bounded_root(
    H: FloatArray,
    b: FloatArray,
    C: FloatArray,
    g: FloatArray,
    D: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    *,
    who: str,
) -> FloatArray:
    """:func:`certified_root` with bounded rows lo <= D x <= hi as well (e.g. the nation's
    group-quarters counts at least its facilities; lo = hi for an equality), by an active
    set on the rows: a row that breaks its bound is held at it, a held row whose multiplier
    has the wrong sign (fitted on the free cells, as the certificate's) is let go.

    Parameters
    ----------
    H, b, C, g, who
        As :func:`certified_root`.
    D : ndarray, shape (R, c)
    lo, hi : ndarray, shape (R,)
        Bounds (+-inf for none).

    Returns
    -------
    ndarray, shape (c,)
    """
    R = D.shape[0]
    eq = lo == hi
    upper = np.zeros(R, dtype=bool)
    lower = eq.copy()
    scale = max(1.0, float(np.abs(b).max()), float(np.abs(g).max(initial=0.0)) * H.max())
    tol = 1e-9 * scale
    for _ in range(4 * R + 10):
        held = upper | lower
        rows_C = np.concatenate([C, D[held]])
        x = certified_root(
            H, b, rows_C, np.concatenate([g, np.where(upper, hi, lo)[held]]), who=who
        )
        free = x > 0
        grad = H @ x - b
        lam = linalg.lstsq(rows_C[:, free].T, grad[free])[0] if free.any() else np.zeros(0)
        nu = np.zeros(R)
        if lam.size:
            nu[held] = lam[C.shape[0] :]
        wrong = np.where(lower & ~eq, -nu, 0.0) + np.where(upper, nu, 0.0)
        if (wrong > tol).any():
            drop = int(np.argmax(wrong))
            upper[drop] = lower[drop] = False
            continue
        rows = D @ x
        with np.errstate(invalid="ignore"):
            broken = np.where(held, 0.0, np.maximum(rows - hi, lo - rows))
        if not (broken > tol).any():
            return x
        worst = int(np.argmax(broken))
        if rows[worst] > hi[worst]:
            upper[worst] = True
        else:
            lower[worst] = True
    raise ConvergenceError(f"{who}'s root did not settle its bounded rows; please report the input")

"""A family split with many public rows per child, exactly and certified (private): the
DHC's families, where each child's PL94 histogram (outer pass 0) or 40-group histogram
(outer pass 1) is held.

The problem is :mod:`~postdp.postprocess.topdown2020.family`'s: minimise
sum_j 1/2 a_j x_j' H x_j - b_j' x_j subject to sum_j x_j = p, G x_j = g_j and x_j >= 0. Here
every cell is in one row of G, so within a row the children's cells form a transportation
polytope (the parent's cells as supplies, the children's held counts as demands): the
constraints are always rank-deficient (one redundant equation per row) and the solution
is often degenerate (a cell at 0 whose multiplier is 0). Pivoting on such a problem with
least-norm multipliers can cycle, so the active set is found by HiGHS's active-set QP
solver (:func:`~postdp.postprocess._solvers.highs.solve_quadratic`), then:

1. the cells are solved exactly on that set (the equality-constrained solve of
   :class:`~postdp.postprocess.topdown2020.family.Family`);
2. the multipliers are those of that solve when they prove optimality; else (degenerate)
   the best multipliers with the held cells' signs right, by bounded-variable least squares
   (Stark and Parker 1995, ``scipy.optimize.lsq_linear``): the stationarity residual they
   leave is the certificate, the dual signs holding by construction.

The KKT residuals are returned as :class:`~postdp.postprocess.topdown2020.family.FamilyResult`
and checked by :func:`~postdp.postprocess.topdown2020.passes.certified`. Cost: HiGHS on k m
unknowns with k dense m x m Hessian blocks; the fallback's dense matrix is (k m) x (m + k R
+ k m) floats.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import lsq_linear

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.highs import solve_quadratic
from postdp.postprocess.topdown2020.family import Family, FamilyResult, _finish

__all__ = ["solve_family_rows"]


def solve_family_rows(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    *,
    tol: float,
    G: FloatArray,
    g: FloatArray,
    weight: FloatArray | None = None,
    **_: Any,
) -> FamilyResult:
    """The family's exact split (see the module notes); ``G`` (R, m) 0/1 rows, each cell
    in one, and ``g`` (k, R) each child's counts there (a child's cells in a row it holds
    at 0 are held at 0)."""
    k, m = b.shape
    fixed = ((g == 0).astype(float) @ (G > 0).astype(float)) > 0
    a = np.ones(k) if weight is None else np.asarray(weight, dtype=float)
    Q = sparse.block_diag([sparse.csr_matrix(H * aj) for aj in a], format="csc")
    A = sparse.vstack(
        [sparse.hstack([sparse.identity(m)] * k), sparse.block_diag([sparse.csr_matrix(G)] * k)]
    )
    upper = np.where(fixed.ravel(), 0.0, np.inf)
    qp = solve_quadratic(Q, -b.ravel(), A, np.concatenate([p, g.ravel()]), np.zeros(k * m), upper)
    if not qp.optimal or qp.x is None:
        raise ConvergenceError(f"HiGHS's QP did not solve a family ({qp.message})")
    family = Family(H, b, p, G, fixed=fixed, weight=weight)
    inner = family.inner
    inner.g, inner.active = g, g > 0
    free = (qp.x.reshape(k, m) > 1e-8 * max(1.0, float(p.max()))) & ~fixed
    for _ in range(3):  # cells HiGHS left barely positive that the exact solve sends below 0
        x, _, lam, nu = inner.solve(free)
        low = free & (x < -tol)
        if not low.any():
            break
        free &= ~low
    result = _finish(inner, x, free, lam, nu, 1)
    if result.dual <= tol:
        return result
    stationarity = _best_multipliers(inner.gradient(result.x), free, fixed, G, g > 0)
    return FamilyResult(
        x=result.x,
        stationarity=max(result.stationarity, stationarity),
        dual=0.0,
        negative=result.negative,
        consistency=result.consistency,
        rounds=2,
    )


def _best_multipliers(
    grad: FloatArray, free: np.ndarray, fixed: np.ndarray, G: FloatArray, active: np.ndarray
) -> float:
    """The least stationarity residual max |grad - lam - nu_j G - z| over multipliers lam
    (cells), nu (each child's active rows) and z >= 0 on the held cells (0 on free ones)."""
    k, m = grad.shape
    R = G.shape[0]
    jj, ii = np.nonzero(~fixed)  # one equation per cell not held structurally
    n = jj.size
    eq = np.arange(n)
    row_of = np.argmax(G != 0, axis=0)  # each cell's row
    nu_id = np.full((k, R), -1, dtype=np.int64)
    nu_id[active] = np.arange(int(active.sum()))
    q = nu_id[jj, row_of[ii]]
    on = q >= 0
    held = np.flatnonzero(~free[jj, ii])
    n_nu = int(active.sum())
    M = np.zeros((n, m + n_nu + held.size))
    M[eq, ii] = 1.0
    M[eq[on], m + q[on]] = G[row_of[ii[on]], ii[on]]
    M[held, m + n_nu + np.arange(held.size)] = 1.0
    lo = np.concatenate([np.full(m + n_nu, -np.inf), np.zeros(held.size)])
    rhs = grad[jj, ii]
    res = lsq_linear(M, rhs, bounds=(lo, np.inf), method="bvls", tol=1e-14)
    return float(np.abs(M @ res.x - rhs).max(initial=0.0))

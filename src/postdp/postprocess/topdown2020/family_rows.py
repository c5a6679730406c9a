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
   multipliers that do are sought row by row: each cell is in one row, so the conditions
   (lam_i + nu_jr equal to the gradient on free cells, at most it on held ones) are a
   system of difference constraints, feasible (within the tolerance) exactly when its
   graph has no negative cycle (Bellman-Ford; Cormen et al., Introduction to Algorithms,
   3rd ed., section 24.4).

The KKT residuals are returned as :class:`~postdp.postprocess.topdown2020.family.FamilyResult`
and checked by :func:`~postdp.postprocess.topdown2020.passes.certified`. Cost: HiGHS on k m
unknowns with k dense m x m Hessian blocks; the multipliers' graph has m + k R nodes and
at most 2 k m arcs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from postdp._typing import FloatArray
from postdp.postprocess._solvers.highs import solve_quadratic
from postdp.postprocess.topdown2020.family import Family, FamilyResult, _finish

__all__ = ["potentials", "solve_family_rows"]


def solve_family_rows(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    *,
    tol: float,
    G: FloatArray,
    g: FloatArray,
    weight: FloatArray | None = None,
    **unused: Any,
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
    unit = 1.0 / max(float(H.diagonal().max()) * float(a.max()), 1e-300)  # Q's diagonal ~ 1
    rhs = np.concatenate([p, g.ravel()])
    qp = solve_quadratic(Q * unit, -b.ravel() * unit, A, rhs, np.zeros(k * m), upper)
    family = Family(H, b, p, G, fixed=fixed, weight=weight)
    if not qp.optimal or qp.x is None:  # the pivoting's own active set, certified alike
        return family.solve(g, g > 0, tol=tol)
    inner = family.inner
    inner.g, inner.active = g, g > 0
    free = (qp.x.reshape(k, m) > 1e-8 * max(1.0, float(p.max()))) & ~fixed
    for _ in range(3):  # cells HiGHS left barely positive that the exact solve sends below 0
        x, _mu, lam, nu = inner.solve(free)
        low = free & (x < -tol)
        if not low.any():
            break
        free &= ~low
    result = _finish(inner, x, free, lam, nu, 1)
    if result.dual <= tol:
        return result
    # degenerate: the solve's least-norm multipliers are not the ones that prove it
    labels = np.argmax(G != 0, axis=0)
    proved = potentials(inner.gradient(result.x), free, fixed, labels, G.shape[0], tol)
    return FamilyResult(
        x=result.x,
        stationarity=tol if proved else np.inf,
        dual=tol if proved else np.inf,
        negative=result.negative,
        consistency=result.consistency,
        rounds=2,
    )


def potentials(
    grad: FloatArray,
    free: np.ndarray,
    fixed: np.ndarray,
    labels: np.ndarray,
    R: int,
    tol: float,
) -> bool:
    """Whether multipliers exist with every free cell's reduced gradient within ``tol`` of 0
    and every held one's at least -tol. Each cell is in one row r, so the conditions are
    lam_i + nu_jr = grad_ji (free) and <= grad_ji (held), row by row: with mu = -nu, a
    system of difference constraints lam_i - mu_jr <= grad_ji (+ tol), and mu_jr - lam_i <=
    -grad_ji (+ tol) for a free cell. It is feasible exactly when its constraint graph has no
    negative cycle (Bellman-Ford from every node at distance 0; the distances are then the
    multipliers). ``labels`` (m,): each cell's row 0 .. R-1."""
    k, m = grad.shape
    jj, ii = np.nonzero(~fixed)
    node = m + jj * R + labels[ii]  # each equation's (child, row) node
    c = grad[jj, ii]
    f = free[jj, ii]
    tail = np.concatenate([node, ii[f]])
    head = np.concatenate([ii, node[f]])
    weight = np.concatenate([c + tol, -c[f] + tol])
    order = np.argsort(head, kind="stable")  # arcs by head: each node's min one reduceat
    tail, head, weight = tail[order], head[order], weight[order]
    heads, starts = np.unique(head, return_index=True)
    dist = np.zeros(m + k * R)
    if not heads.size:
        return True
    for _ in range(dist.size + 1):
        best = np.minimum.reduceat(dist[tail] + weight, starts)
        lower = best < dist[heads]
        if not lower.any():
            return True
        dist[heads[lower]] = best[lower]
    return False

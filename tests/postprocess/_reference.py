"""Reference solutions from a general QP solver (cvxpy + Clarabel), for tests only."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from postdp.hierarchy import constraints

CLARABEL_TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 500}


def qp_project(y, h, *, nonneg, public=None, weights=None):
    """argmin Σ w (v - y)² s.t. A v = b (and v >= 0), by Clarabel with tight tolerances."""
    A, b = constraints(h, public=public)
    w = np.ones(h.n) if weights is None else np.asarray(weights, dtype=float)
    scale = max(1.0, float(np.abs(y).max()))
    v = cp.Variable(h.n)
    cons = [A @ v == b / scale]
    if nonneg:
        cons.append(v >= 0)
    objective = cp.Minimize(cp.sum(cp.multiply(w, cp.square(v - y / scale))))
    problem = cp.Problem(objective, cons)
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert problem.status == cp.OPTIMAL, problem.status
    return v.value * scale


def qp_simplex(y, total, *, nonneg, weights=None):
    """argmin Σ w (v - y)² s.t. Σ v = total (and v >= 0)."""
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    v = cp.Variable(y.size)
    cons = [cp.sum(v) == total]
    if nonneg:
        cons.append(v >= 0)
    problem = cp.Problem(cp.Minimize(cp.sum(cp.multiply(w, cp.square(v - y)))), cons)
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert problem.status == cp.OPTIMAL, problem.status
    return v.value


def close(a, b, rel=1e-6):
    """|a - b| <= rel * max(1, max|b|) elementwise."""
    scale = max(1.0, float(np.abs(b).max()))
    return bool(np.abs(np.asarray(a) - np.asarray(b)).max() <= rel * scale)

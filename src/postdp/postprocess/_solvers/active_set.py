"""The exact (P+) solver: block principal pivoting with a primal active-set fallback
(private).

The inner step is the (P) tree solve with active leaves held at 0; the leaf multipliers come
from root-to-leaf path sums. A draw whose violation count stops falling, that would strand a
public node without a free leaf, or that passes the round limit, is finished by a primal
feasible active-set method, which terminates finitely (Judice and Pires 1994).
"""

from __future__ import annotations

import warnings

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError, ConvergenceWarning
from postdp.postprocess._solvers.tree_solve import (
    BoolArray,
    TreeProblem,
    family_sums,
    leaf_multipliers,
    two_pass,
)

__all__ = ["solve_nonneg"]

# Rounds of block principal pivoting before a draw is handed to the primal active-set method.
_MAX_PDAS_ROUNDS = 60
# Non-improving block rounds tolerated (Judice and Pires 1994 use 3).
_STALL_ROUNDS = 3
_REL_TOL = 1e-12


def _tolerances(prob: TreeProblem, Y: FloatArray) -> tuple[FloatArray, FloatArray]:
    scale = np.maximum(1.0, np.abs(Y).max(axis=1, initial=0.0))
    scale = np.maximum(scale, np.abs(prob.fixed_values).max(initial=0.0))
    tol = _REL_TOL * scale
    tol_mu = tol * prob.weight.max(initial=1.0) * prob.n_levels
    return tol[:, None], tol_mu[:, None]


def _static_zero(prob: TreeProblem) -> BoolArray:
    """Free leaves forced to 0: those of public components without slack."""
    return prob.free_leaf & prob.comp_public & (prob.slack[prob.comp] <= 0)


def _stranded(prob: TreeProblem, active: BoolArray) -> BoolArray:
    """Draws where some public component with slack has every free leaf active."""
    B, n = active.shape
    needs = prob.free_leaf & prob.comp_public
    if not needs.any():
        return np.zeros(B, dtype=bool)
    group = np.arange(B)[:, None] * n + prob.comp[None, :]
    free_left = np.bincount(group[needs & ~active], minlength=B * n).reshape(B, n)
    has_slack = np.zeros(n, dtype=bool)
    has_slack[prob.comp[needs]] = prob.slack[prob.comp[needs]] > 0
    stranded: BoolArray = ((free_left == 0) & has_slack[None, :]).any(axis=1)
    return stranded


def _finish(prob: TreeProblem, X: FloatArray, active: BoolArray) -> FloatArray:
    """Rounding-level negatives to 0 (active leaves are exact zeros), parents as sums."""
    clip = prob.free_leaf & (X < 0)
    if not clip.any():
        return X  # active leaves are exactly 0 already; parents are consistent
    return family_sums(prob, X * ~(clip | active))


def solve_nonneg(prob: TreeProblem, Y: FloatArray) -> FloatArray:
    B, n = Y.shape
    static_row = _static_zero(prob)
    has_static = bool(static_row.any())
    free = prob.free_leaf & ~static_row
    static = np.broadcast_to(static_row, (B, n))
    X = two_pass(prob, Y, zero=static if has_static else None)
    tol, tol_mu = _tolerances(prob, Y)
    negative = (free & (-tol > X)).any(axis=1)
    todo = np.flatnonzero(negative)
    if not todo.size:  # every row is easy: no gather, no scatter
        return _finish(prob, X, static)
    out = X
    easy = np.flatnonzero(~negative)
    if easy.size:
        out[easy] = _finish(prob, X[easy], static[: easy.size])
    best = np.full(todo.size, np.iinfo(np.int64).max)
    patience = np.full(todo.size, _STALL_ROUNDS)
    everyone = todo.size == B  # then Y[todo] is Y: skip the copies
    act = free & ((X if everyone else X[todo]) < -(tol if everyone else tol[todo]))
    fallback: list[int] = []
    for _ in range(_MAX_PDAS_ROUNDS):
        everyone = todo.size == B
        Ys, tol_s, tol_mu_s = (Y, tol, tol_mu) if everyone else (Y[todo], tol[todo], tol_mu[todo])
        zero = (act | static_row) if has_static else act
        stranded = _stranded(prob, act)
        Xs = two_pass(prob, Ys, zero=zero)
        mu = leaf_multipliers(prob, Xs, Ys, inactive=free & ~zero)
        bad = ((act & (mu < -tol_mu_s)) | (~act & (Xs < -tol_s))) & free
        n_bad = bad.sum(axis=1)
        done = (n_bad == 0) & ~stranded
        if done.any():
            out[todo[done]] = _finish(prob, Xs[done], zero[done])
        improving = n_bad < best
        best = np.where(improving, n_bad, best)
        patience = np.where(improving, _STALL_ROUNDS, patience - 1)
        give_up = ~done & ((patience < 0) | stranded)
        fallback.extend(todo[give_up].tolist())
        keep = ~done & ~give_up
        if not keep.any():
            todo = todo[keep]
            break
        act = (act ^ bad)[keep]
        todo, best, patience = todo[keep], best[keep], patience[keep]
    fallback.extend(todo.tolist())
    if fallback:
        warnings.warn(
            f"(P+): block pivoting stalled on {len(fallback)} of {B} draws; finished them with "
            "the primal active-set method (exact, finitely convergent, slower)",
            ConvergenceWarning,
            stacklevel=3,
        )
        for b in fallback:
            out[b] = _primal_active_set(prob, Y[b : b + 1], free, tol[b, 0], tol_mu[b, 0])[0]
    return out


def _feasible_start(prob: TreeProblem, Y: FloatArray, free: BoolArray) -> FloatArray:
    """A feasible point: (P) clipped at 0, each public component rescaled to its slack."""
    n = Y.shape[1]
    static = (prob.free_leaf & ~free)[None, :]
    z = np.where(free, np.maximum(two_pass(prob, Y, zero=static)[0], 0.0), 0.0)
    in_public = free & prob.comp_public
    if in_public.any():
        total = np.bincount(prob.comp[in_public], weights=z[in_public], minlength=n)
        count = np.bincount(prob.comp[in_public], minlength=n)
        slack = np.where(count > 0, prob.slack, 0.0)
        c = prob.comp[in_public]
        scaled = np.where(
            total[c] > 0,
            z[in_public] * slack[c] / np.where(total[c] > 0, total[c], 1),
            slack[c] / np.maximum(count[c], 1),
        )
        z[in_public] = scaled
    X = np.where(prob.free_leaf, z, np.where(prob.fixed, prob.fixed_values, 0.0))
    return family_sums(prob, X[None, :])


def _primal_active_set(
    prob: TreeProblem, Y: FloatArray, free: BoolArray, tol: float, tol_mu: float
) -> FloatArray:
    """Primal active-set method for one draw: feasible iterates, one bound per step."""
    X = _feasible_start(prob, Y, free)
    static = prob.free_leaf & ~free
    active = free & (X[0] <= 0)
    limit = 10 * int(free.sum()) + 100
    for _ in range(limit):
        zero = (active | static)[None, :]
        P = two_pass(prob, Y, zero=zero)
        candidate = free & ~active
        blocking = candidate & (P[0] < -tol)
        if not blocking.any():
            X = P
            mu = leaf_multipliers(prob, X, Y, inactive=candidate[None, :])[0]
            wrong = active & (mu < -tol_mu)
            if not wrong.any():
                return _finish(prob, X, zero)
            active[np.flatnonzero(wrong)[np.argmin(mu[wrong])]] = False
            continue
        idx = np.flatnonzero(blocking & (P[0] < X[0]))
        if idx.size == 0:  # pragma: no cover - blocking leaves always decrease from X >= 0
            idx = np.flatnonzero(blocking)
        ratios = X[0, idx] / (X[0, idx] - P[0, idx])
        k = int(np.argmin(ratios))
        step = float(np.clip(ratios[k], 0.0, 1.0))
        X = X + step * (P - X)
        active[idx[k]] = True
        X[0, idx[k]] = 0.0
    raise ConvergenceError(
        f"(P+) primal active-set method exceeded {limit} steps; please report this input"
    )


# --------------------------------------------------------------------------------------------
# (P_S)
# --------------------------------------------------------------------------------------------

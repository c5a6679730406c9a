"""Nonnegative least squares with fixed group sums, matrix-free and certified (private).

The problem: minimise f(x) = 1/2 x'Hx - b'x over x >= 0 with sum_{i in g} x_i = h_g for
every group g, each cell in exactly one group. H = sum_q w_q A_q'A_q for marginal counts
A_q (each cell in at most one count of q) is never formed: H v is one ``bincount`` per query
(:class:`MarginalGram`), so a problem of a few hundred thousand cells costs a few vectors.
This is the 2020 DHC's root least squares (pass 0 over the 40-age-group histogram with the
PL94 histogram held, the PL94 cells being the groups;
``shared/research/dhc-2020-design.md`` section 4.2), which a dense Gram matrix cannot hold.

Two stages:

1. Accelerated projected gradient (FISTA with gradient restarts; Beck and Teboulle 2009,
   O'Donoghue and Candes 2015) onto the product of scaled simplices (Michelot's projection,
   :func:`~postdp.postprocess._solvers.simplex.project_families`), until the Frank-Wolfe gap
   sum_g (grad_g . x_g - h_g min grad_g), an upper bound on f(x) - min f, is small: this finds
   the cells at zero.
2. Block principal pivoting on that set (Judice and Pires 1994; as
   :mod:`postdp.postprocess._solvers.active_set`): the equality-constrained least squares on
   the free cells by conjugate gradients in the null space of the group sums (the projection
   subtracts each group's mean over its free cells), with iterative refinement; negative free
   cells leave, zero cells with a negative reduced gradient enter, all at once while their
   number falls, then one at a time.

The answer is returned with its KKT residuals: stationarity (the free cells' reduced
gradient), dual feasibility (the zero cells' reduced gradients >= 0), nonnegativity and the
group sums. Memory: a few vectors of the cells plus each query's count index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.simplex import project_families

__all__ = ["GroupedResult", "MarginalGram", "grouped_nnls"]

_FISTA_MAX = 3_000
_GAP_EVERY = 25
_PIVOT_ROUNDS = 200
_STALL = 3


class MarginalGram:
    """H = sum_q w_q A_q'A_q over ``m`` cells, as a product: ``groups[q]`` is each cell's
    count of query q (-1: none), ``weights[q]`` its weight."""

    def __init__(self, groups: list[IntArray], weights: list[float]) -> None:
        self.groups, self.weights, self.sizes = [], [], []
        for g, w in zip(groups, weights, strict=True):
            g = np.asarray(g, dtype=np.int64)
            inside = g >= 0
            labels, local = np.unique(g[inside], return_inverse=True)
            code = np.full(g.size, labels.size, dtype=np.int64)  # a spare count for "none"
            code[inside] = local
            self.groups.append(code)
            self.weights.append(float(w))
            self.sizes.append(labels.size)
        self.m = self.groups[0].size if self.groups else 0

    def __call__(self, v: FloatArray) -> FloatArray:
        out = np.zeros(self.m)
        for code, w, n in zip(self.groups, self.weights, self.sizes, strict=True):
            sums = np.bincount(code, v, minlength=n + 1)
            sums[n] = 0.0  # cells in no count contribute nothing
            out += w * sums[code]
        return out

    def diagonal(self) -> FloatArray:
        """H's diagonal: a cell's weight summed over the queries that count it."""
        out = np.zeros(self.m)
        for code, w, n in zip(self.groups, self.weights, self.sizes, strict=True):
            out += np.where(code < n, w, 0.0)
        return out

    def lipschitz(self) -> float:
        """An upper bound on H's largest eigenvalue: sum_q w_q (largest count's cells),
        A_q'A_q being block-diagonal with all-ones blocks."""
        total = 0.0
        for code, w, n in zip(self.groups, self.weights, self.sizes, strict=True):
            sizes = np.bincount(code, minlength=n + 1)[:n]
            total += w * float(sizes.max(initial=0))
        return max(total, 1e-300)


@dataclass(frozen=True)
class GroupedResult:
    """The solution with its KKT residuals (absolute) and the rounds of each stage."""

    x: FloatArray
    stationarity: float
    dual: float
    negative: float
    consistency: float
    iterations: int
    rounds: int

    @property
    def worst(self) -> float:
        return max(self.stationarity, self.dual, self.negative, self.consistency)


class _Groups:
    """Cells sorted by group: each group's start and size, and per-cell group index."""

    def __init__(self, group: IntArray, h: FloatArray) -> None:
        self.group = np.asarray(group, dtype=np.int64)
        if self.group.size and (np.diff(self.group) < 0).any():
            raise ValueError("cells must be sorted by group")
        self.n = h.size
        self.sizes = np.bincount(self.group, minlength=self.n)
        if (self.sizes == 0).any():
            raise ValueError("every group needs a cell")
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.h = np.asarray(h, dtype=np.float64)

    def sums(self, v: FloatArray, mask: FloatArray | None = None) -> FloatArray:
        out: FloatArray = np.bincount(
            self.group, v if mask is None else v * mask, minlength=self.n
        ).astype(np.float64)
        return out

    def project(self, v: FloatArray) -> FloatArray:
        out: FloatArray = project_families(
            v[None], self.starts, self.sizes, self.h[None], np.ones(v.size), np.ones(v.size, bool)
        )[0]
        return out

    def gap(self, x: FloatArray, grad: FloatArray) -> float:
        """The Frank-Wolfe gap: an upper bound on f(x) - min f for feasible x."""
        low = np.full(self.n, np.inf)
        np.minimum.at(low, self.group, grad)
        return float(grad @ x - self.h @ low)


def _fista(
    H: MarginalGram, b: FloatArray, grp: _Groups, x: FloatArray, tol: float
) -> tuple[FloatArray, int]:
    """Projected gradient with momentum and restarts until the gap is below ``tol``."""
    L = H.lipschitz()
    y, t = x.copy(), 1.0
    it = 0
    for it in range(1, _FISTA_MAX + 1):
        new = grp.project(y - (H(y) - b) / L)
        if (y - new) @ (new - x) > 0:  # the momentum points uphill: restart
            t, y = 1.0, new.copy()
        else:
            t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            y = new + ((t - 1.0) / t_next) * (new - x)
            t = t_next
        x = new
        if it % _GAP_EVERY == 0 and grp.gap(x, H(x) - b) <= tol:
            break
    return x, it


def _equality_solve(
    H: MarginalGram, b: FloatArray, grp: _Groups, free: np.ndarray, tol: float
) -> tuple[FloatArray, FloatArray]:
    """argmin f over x with x = 0 off ``free`` and the group sums held; and each group's
    multiplier mu_g (the free cells' common gradient). Conjugate gradients in the null
    space of the free cells' group sums, refined twice from the exact residual."""
    mask = free.astype(np.float64)
    count = grp.sums(mask)
    if (count[grp.h > 0] == 0).any():
        raise ConvergenceError("a group with a positive sum has no free cell")
    inv = np.divide(1.0, count, out=np.zeros_like(count), where=count > 0)

    def project(v: FloatArray) -> FloatArray:  # onto the null space, free cells only
        v = v * mask
        return (v - (grp.sums(v) * inv)[grp.group]) * mask

    x = (grp.h * inv)[grp.group] * mask
    dim = int(mask.sum() - (count > 0).sum())  # the null space's dimension
    for _ in range(3):  # conjugate gradients, then refined from the exact residual
        r = -project(H(x) - b)
        if np.abs(r).max(initial=0.0) <= tol or dim == 0:
            break
        z = np.zeros_like(x)
        p = r.copy()
        rr = float(r @ r)
        for _ in range(dim + 50):  # n steps in exact arithmetic
            Hp = project(H(p))
            curvature = float(p @ Hp)
            if not curvature > 0:
                break
            alpha = rr / curvature
            z += alpha * p
            r -= alpha * Hp
            rr_new = float(r @ r)
            if np.sqrt(rr_new) <= 0.01 * tol:
                break
            p = r + (rr_new / rr) * p
            rr = rr_new
        x = x + z
    grad = H(x) - b
    mu = grp.sums(grad, mask) * inv
    return x, mu


def grouped_nnls(
    H: MarginalGram,
    b: FloatArray,
    group: IntArray,
    h: FloatArray,
    *,
    tol: float,
) -> GroupedResult:
    """argmin 1/2 x'Hx - b'x over x >= 0 with each group's sum ``h`` (see the module notes).

    Parameters
    ----------
    H : MarginalGram
        The quadratic form over the m cells (positive definite on the feasible set).
    b : ndarray, shape (m,)
    group : ndarray of int, shape (m,)
        Each cell's group, sorted ascending (0 .. G-1, each group with a cell).
    h : ndarray, shape (G,)
        The groups' sums, >= 0.
    tol : float
        Absolute tolerance of the KKT residuals sought (the answer is returned with its own).

    Returns
    -------
    GroupedResult
    """
    grp = _Groups(group, h)
    b = np.asarray(b, dtype=np.float64)
    diag = H.diagonal()
    x0 = grp.project(b / np.where(diag > 0, diag, 1.0))
    # the gap is in the objective's units: small against |b| x the mass, the pivoting
    # then finishes exactly from the cells it finds at zero
    gap_tol = 1e-9 * max(1.0, float(np.abs(b).max(initial=0.0)) * float(grp.h.sum()))
    x, iterations = _fista(H, b, grp, x0, gap_tol)
    free = x > 0  # the projection's zeros; a group summing to 0 has no positive cell
    best, stall = np.inf, 0
    for rounds in range(1, _PIVOT_ROUNDS + 1):
        x, mu = _equality_solve(H, b, grp, free, 0.01 * tol)
        reduced = H(x) - b - mu[grp.group]
        leave = free & (x < 0)
        enter = ~free & (reduced < -tol)
        wrong = int(leave.sum() + enter.sum())
        if not wrong:
            return _certify(H, b, grp, np.where(free, x, 0.0), free, mu, iterations, rounds)
        if wrong < best:
            best, stall = wrong, 0
            move = leave | enter
        else:
            stall += 1
            if stall <= _STALL:
                move = leave | enter
            else:  # one at a time: the worst violation (Murty's rule by size)
                score = np.where(leave, -x, 0.0) + np.where(enter, -reduced, 0.0)
                move = np.zeros_like(free)
                move[int(np.argmax(score))] = True
        free = free ^ move
        _keep_a_free_cell(grp, free, reduced)
    raise ConvergenceError(
        f"the grouped least squares did not settle its zero cells in {_PIVOT_ROUNDS} rounds"
    )


def _keep_a_free_cell(grp: _Groups, free: np.ndarray, reduced: FloatArray) -> None:
    """A group with a positive sum and no free cell frees its cell of least reduced
    gradient."""
    count = grp.sums(free.astype(np.float64))
    for g in np.flatnonzero((count == 0) & (grp.h > 0)):
        a, n = grp.starts[g], grp.sizes[g]
        free[a + int(np.argmin(reduced[a : a + n]))] = True


def _certify(
    H: MarginalGram,
    b: FloatArray,
    grp: _Groups,
    x: FloatArray,
    free: np.ndarray,
    mu: FloatArray,
    iterations: int,
    rounds: int,
) -> GroupedResult:
    reduced = H(x) - b - mu[grp.group]
    return GroupedResult(
        x=np.maximum(x, 0.0),
        stationarity=float(np.abs(reduced[free]).max(initial=0.0)),
        dual=float(np.maximum(-reduced[~free], 0.0).max(initial=0.0)),
        negative=float(np.maximum(-x, 0.0).max(initial=0.0)),
        consistency=float(np.abs(grp.sums(x) - grp.h).max(initial=0.0)),
        iterations=iterations,
        rounds=rounds,
    )

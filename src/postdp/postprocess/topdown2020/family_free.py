"""A family split with one public row per cell, matrix-free and certified (private): the
DHC's families too large for a dense quadratic (a county's tract-subset groups, a state's
counties).

The problem is :mod:`~postdp.postprocess.topdown2020.family_rows`'s: minimise
sum_j 1/2 a_j x_j' H x_j - b_j' x_j over the children's cells subject to sum_j x_j = p (the
parent's cells), sum_{i in r} x_ji = g_jr for every row r (each cell in one row:
``labels``; outer pass 0's PL94 cells, pass 1's 40-group cells) and x >= 0. H is a
:class:`~postdp.postprocess._solvers.grouped_nnls.MarginalGram`: H v is one ``bincount`` per
query, never an m x m matrix.

1. **A free set's equality problem** (the cells off it held at 0) is solved by conjugate
   gradients projected onto the constraints' null space, preconditioned by the scaled
   projection P = W - W A'(A W A')^+ A W with W = (a_j diag H)^-1 (Gould, Hribar and Nocedal
   2001, "On the solution of equality constrained quadratic programming problems arising
   in optimization", SIAM J. Sci. Comput. 23(4), algorithm II), restarted from the exact
   residual (twice, and whenever the residual stops halving: its precision's floor), every
   step checked finite. A W A' is solved exactly: each free (child j, cell i) is an edge between
   the cell and the child's row (j, r(i)); eliminating the cells (diagonal) leaves, per
   row, a k x k weighted Laplacian of the children, whose pseudo-inverse (its null space is
   each connected piece's constant) is formed once per free set. When H is diagonal (outer
   pass 1) P is exact and one step solves it.
2. **Which cells are positive** by a primal-dual interior-point method (Mehrotra's
   predictor-corrector; Nocedal and Wright, Numerical Optimization, 2nd ed., algorithm
   16.4) whose Newton steps are such equality problems, the barrier's diagonal Z/X added
   to H's (so the preconditioner stays exact where it dominates): a cell is taken as
   positive where its value outweighs its multiplier. Interior points do not care how
   degenerate the optimum is (the pivoting of
   :mod:`~postdp.postprocess.topdown2020.family` does: with integer data it wanders).
3. **The exact answer** on that set, then pivoting while few cells are wrong: negative
   free cells leave (with the held cells of a child's row the free ones cannot meet), and
   once none is negative, held cells with a negative reduced gradient enter. Should the
   wrong cells be many or stop falling, the barrier goes on to a smaller gap and the cells
   are taken anew.
4. **The certificate**, from H itself: stationarity of the free cells with the
   least-squares multipliers, the held cells' reduced gradients >= 0, nonnegativity and
   the sums. Where a row's free cells fall apart into pieces whose multipliers may shift
   against each other (degenerate optima, common with integer data), multipliers that
   prove it are sought by difference constraints
   (:func:`~postdp.postprocess.topdown2020.family_rows.potentials`); the pivoting asks the
   same before it lets a held cell in.

Memory: a few (k, m) float arrays, each query's count index and R (k, k) pseudo-inverses
(R the rows), never m^2. Cost: per conjugate-gradient step, k products with H (one
``bincount`` of m per query each) and one solve with A W A' (a few of k m).
"""

from __future__ import annotations

import numpy as np

from postdp._typing import BoolArray, FloatArray, IntArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.grouped_nnls import MarginalGram
from postdp.postprocess.topdown2020.family import FamilyResult, cover
from postdp.postprocess.topdown2020.family_rows import potentials

__all__ = ["solve_family_free"]

_ROUNDS = 50
_STALL = 2
_PIVOT_SHARE = 0.05  # the pivoting goes on while the wrong cells are this few
_GAP = 1e-6
_ATTEMPTS = 6
_BARRIER_STEPS = 200
_REFINE = 3
_CG_STEPS = 5_000
_CG_STALL = 200  # steps without halving the residual before a restart from the exact one


class _Kids:
    """Every child's a_j H x_j, ``x`` (k, m), a few children per ``bincount``."""

    def __init__(self, gram: MarginalGram, k: int, a: FloatArray) -> None:
        self.gram, self.k, self.a = gram, k, a
        m = gram.m
        step = max(1, (1 << 21) // max(m, 1))
        self.parts = [np.arange(s, min(s + step, k)) for s in range(0, k, step)]
        self.codes = [
            [
                (code[None, :] + (n + 1) * np.arange(rows.size)[:, None]).ravel()
                for rows in self.parts
            ]
            for code, n in zip(gram.groups, gram.sizes, strict=True)
        ]

    def __call__(self, x: FloatArray) -> FloatArray:
        out = np.zeros_like(x)
        gram = self.gram
        for q, (code, w, n) in enumerate(zip(gram.groups, gram.weights, gram.sizes, strict=True)):
            for rows, flat in zip(self.parts, self.codes[q], strict=True):
                sums = np.bincount(flat, x[rows].ravel(), minlength=rows.size * (n + 1))
                sums = sums.reshape(rows.size, n + 1)
                sums[:, n] = 0.0  # cells in no count of q
                out[rows] += w * sums[:, code]
        out *= self.a[:, None]
        return out


class _Graph:
    """A W A' of a free set and its exact solve (see the module notes)."""

    def __init__(self, free: BoolArray, w: FloatArray, labels: IntArray, R: int) -> None:
        k, m = free.shape
        self.free, self.labels, self.R, self.k = free, labels, R, k
        self.flat = (labels[None, :] + R * np.arange(k)[:, None]).ravel()
        self.fw = np.where(free, w, 0.0)
        c = self.fw.sum(axis=0)
        self.inv_c = np.divide(1.0, c, out=np.zeros_like(c), where=c > 0)
        S = np.zeros((R, k, k))
        S[:, np.arange(k), np.arange(k)] = self.rows(self.fw).T
        T = self.fw * np.sqrt(self.inv_c)[None, :]
        step = max(1, (1 << 22) // max(k * k, 1))
        pair = (np.arange(k)[:, None] * k + np.arange(k)[None, :]).ravel()
        for s in range(0, m, step):
            part = slice(s, min(s + step, m))
            outer = (T[:, None, part] * T[None, :, part]).reshape(k * k, -1)  # (k k, cells)
            where = (labels[part][None, :] * k * k + pair[:, None]).ravel()
            S -= np.bincount(where, outer.ravel(), minlength=R * k * k).reshape(R, k, k)
        value, vector = np.linalg.eigh(S)
        top = np.abs(value).max(axis=1, keepdims=True)
        inv = np.where(
            value > 1e-11 * np.maximum(top, 1e-300), 1.0 / np.where(value > 0, value, 1), 0
        )
        self.pinv = np.einsum("rjs,rs,rls->rjl", vector, inv, vector)

    def rows(self, v: FloatArray) -> FloatArray:
        """Each child's row sums of ``v`` (k, m): (k, R)."""
        out = np.bincount(self.flat, v.ravel(), minlength=self.k * self.R)
        return np.asarray(out, dtype=np.float64).reshape(self.k, self.R)

    def solve(self, s_cell: FloatArray, s_row: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(lam, nu) with A W A' (lam, nu) = (s_cell, s_row): the cells eliminated, then
        each row's children by the pseudo-inverse."""
        fw = self.fw
        rhs = s_row - self.rows(fw * (s_cell * self.inv_c)[None, :])
        nu = np.einsum("rjl,lr->jr", self.pinv, rhs)
        lam = (s_cell - (fw * nu[:, self.labels]).sum(axis=0)) * self.inv_c
        return lam, nu

    def project(self, r: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """P r (the preconditioned residual in the null space) and the multipliers."""
        v = self.fw * r
        lam, nu = self.solve(v.sum(axis=0), self.rows(v))
        return self.fw * (r - lam[None, :] - nu[:, self.labels]), lam, nu


class _Problem:
    def __init__(
        self,
        gram: MarginalGram,
        b: FloatArray,
        p: FloatArray,
        labels: IntArray,
        g: FloatArray,
        a: FloatArray,
    ) -> None:
        self.k, self.m = b.shape
        self.b, self.p, self.labels, self.g, self.R = b, p, labels, g, g.shape[1]
        self.kids = _Kids(gram, self.k, a)
        diag = gram.diagonal()
        self.w = 1.0 / (a[:, None] * np.where(diag > 0, diag, 1.0)[None, :])
        self.fixed = (g == 0)[:, labels]  # a child's cells in a row it holds at 0

    def solve(
        self, free: BoolArray, tol: float, start: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, _Graph]:
        """(x, gradient, lam, nu, graph) of the free set's equality problem, from ``start``
        (a nearby answer) on it."""
        graph = _Graph(free, self.w, self.labels, self.R)
        x = self.equality(graph, self.b, None, np.where(free, start, 0.0), tol)
        grad = self.kids(x) - self.b
        _, lam, nu = graph.project(np.where(graph.free, grad, 0.0))
        return x, grad, lam, nu, graph

    def equality(
        self, graph: _Graph, b: FloatArray, shift: FloatArray | None, x: FloatArray, tol: float
    ) -> FloatArray:
        """argmin 1/2 x'(Q + diag(shift))x - b'x on ``graph``'s free cells with the sums
        held, from ``x`` (changed in place): projected conjugate gradients, restarted from
        the exact residual (also when the residual stops halving: its precision's floor)."""
        free = graph.free
        scale = np.where(free, 1.0 / np.where(free, graph.fw, 1.0), 0.0)

        def product(v: FloatArray) -> FloatArray:
            out = self.kids(v)
            if shift is not None:
                out += shift * v
            return np.where(free, out, 0.0)

        for _ in range(_REFINE):
            # back onto the sums (the W-least-norm change), then the residual's reduced part
            lam, nu = graph.solve(self.p - x.sum(axis=0), self.g - graph.rows(x))
            x += graph.fw * (lam[None, :] + nu[:, self.labels])
            z, _, _ = graph.project(product(x) - np.where(free, b, 0.0))
            r = z * scale  # the gradient less its multipliers' part (Gould et al.'s reset)
            best = np.abs(r).max(initial=0.0)
            if best <= 0.1 * tol:
                break
            d, rz, since = -z, float((r * z).sum()), 0
            with np.errstate(over="ignore", invalid="ignore"):  # not finite: checked, stop
                for _ in range(_CG_STEPS):
                    Qd = product(d)
                    curvature = float((d * Qd).sum())
                    if not (np.isfinite(curvature) and curvature > 0 and rz > 0):
                        break
                    alpha = rz / curvature
                    x += alpha * d
                    z, _, _ = graph.project(r + alpha * Qd)
                    r = z * scale
                    size = np.abs(r).max(initial=0.0)
                    if size <= 0.1 * tol:
                        break
                    if size < 0.5 * best:
                        best, since = size, 0
                    elif (since := since + 1) > _CG_STALL:
                        break
                    rz_new = float((r * z).sum())
                    d = -z + (rz_new / rz) * d
                    rz = rz_new
        return x

    def unmet(self, x: FloatArray, graph: _Graph, tol: float) -> BoolArray:
        """The cells of each child's rows that ``x`` misses by more than ``tol``."""
        missed = np.abs(graph.rows(x) - self.g) > tol
        out: BoolArray = missed[:, self.labels]
        return out


def solve_family_free(
    H: MarginalGram,
    b: FloatArray,
    p: FloatArray,
    *,
    tol: float,
    labels: IntArray,
    g: FloatArray,
    weight: FloatArray | None = None,
) -> FamilyResult:
    """The family's exact split, matrix-free (see the module notes): ``labels`` (m,) each
    cell's row 0 .. R-1, ``g`` (k, R) each child's counts there (a child's cells in a row it
    holds at 0 are held at 0), ``weight`` each child's a_j (default 1; ``b`` holds it)."""
    k = b.shape[0]
    a = np.ones(k) if weight is None else np.asarray(weight, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    g = np.asarray(g, dtype=np.float64)
    if k == 1:
        x = np.asarray(p, dtype=np.float64)[None].copy()
        bad = float(np.abs(np.bincount(labels, x[0], g.shape[1]) - g[0]).max(initial=0.0))
        return FamilyResult(x, 0.0, 0.0, 0.0, bad, 0)
    prob = _Problem(H, b, p, labels, g, a)
    if (prob.fixed.all(axis=0) & (p > 0)).any():
        raise ConvergenceError("a positive parent cell has no child that may hold it")
    barrier = _Barrier(prob)
    unit = max(1.0, float(np.max(p, initial=0.0)))
    target = _GAP * unit * max(1.0, float(np.abs(b).max(initial=0.0)))
    rounds = 0
    for _ in range(_ATTEMPTS):
        barrier.run(target, unit)
        # positive where x outweighs its multiplier, in the gradient's units
        free = (barrier.x / prob.w > barrier.z) & ~prob.fixed
        _keep(prob, free, barrier.x, barrier.z)
        result, used = _pivot(prob, free, tol, barrier.x)
        rounds += used
        if result is not None:
            return result
        target *= 1e-3
    raise ConvergenceError(
        f"a large topdown-2020 family did not settle its zero cells ({barrier.steps} barrier "
        f"steps, {rounds} pivoting rounds); please report the input"
    )


class _Barrier:
    """A primal-dual interior-point method (Mehrotra's predictor-corrector; Nocedal and
    Wright, Numerical Optimization, 2nd ed., algorithm 16.4) whose Newton steps are the
    equality problems with the barrier's diagonal Z/X added: it finds which cells are
    positive, which the pivoting then proves, however degenerate the optimum."""

    def __init__(self, prob: _Problem) -> None:
        self.prob = prob
        live = ~prob.fixed
        share = prob.p / np.maximum(live.sum(axis=0), 1)
        self.x = np.where(live, share[None, :], 0.0) + np.where(live, 1.0, 0.0)
        mean = float(self.x[live].mean()) if live.any() else 1.0
        self.z = np.where(live, mean / prob.w, 0.0)
        self.live = live
        self.steps = 0

    def mu(self) -> float:
        return float((self.x * self.z)[self.live].mean()) if self.live.any() else 0.0

    def _newton(self, D: FloatArray, rhs: FloatArray, graph: _Graph, tol: float) -> FloatArray:
        v = self.prob.equality(graph, self.prob.b + rhs, D, self.x.copy(), tol)
        return np.where(self.live, v - self.x, 0.0)

    def run(self, target: float, unit: float) -> None:
        """Steps until the mean complementarity x z is at most ``target``, each Newton
        step's reduced gradient solved to 1e-2 mu / ``unit`` (the counts' scale)."""
        prob, live = self.prob, self.live

        def x_safe() -> FloatArray:
            return np.where(live, self.x, 1.0)

        while self.steps < _BARRIER_STEPS and self.mu() > target:
            self.steps += 1
            mu = self.mu()
            tol = 1e-2 * mu / unit
            D = np.where(live, self.z / x_safe(), 0.0)
            graph = _Graph(live, 1.0 / (1.0 / prob.w + D), prob.labels, prob.R)
            dx = self._newton(D, self.z, graph, tol)  # the affine step (sigma 0)
            dz = np.where(live, -self.z - D * dx, 0.0)
            ap = min(1.0, _longest(self.x, dx, live))
            ad = min(1.0, _longest(self.z, dz, live))
            after = float(((self.x + ap * dx) * (self.z + ad * dz))[live].mean())
            sigma = (after / mu) ** 3
            extra = np.where(live, (sigma * mu - dx * dz) / x_safe(), 0.0)
            dx = self._newton(D, self.z + extra, graph, tol)
            dz = np.where(live, extra - self.z - D * dx, 0.0)
            ap = min(1.0, 0.995 * _longest(self.x, dx, live))
            ad = min(1.0, 0.995 * _longest(self.z, dz, live))
            self.x = np.where(live, self.x + ap * dx, 0.0)
            self.z = np.where(live, self.z + ad * dz, 0.0)


def _longest(v: FloatArray, dv: FloatArray, live: BoolArray) -> float:
    """The longest step t with v + t dv >= 0 on ``live`` (inf when nothing falls)."""
    falling = live & (dv < 0)
    if not falling.any():
        return np.inf
    return float((v[falling] / -dv[falling]).min())


def _pivot(
    prob: _Problem, free: BoolArray, tol: float, x: FloatArray
) -> tuple[FamilyResult | None, int]:
    """Pivoting from ``free``: the certified result, or None should the wrong cells be many
    or stop falling (the barrier then goes on). Negative free cells leave first (with the
    held cells of any row the free ones cannot meet); only once none is negative do held
    cells with a negative reduced gradient enter, and only if no multipliers prove the
    optimum (:func:`~postdp.postprocess.topdown2020.family_rows.potentials`: with a
    degenerate optimum the least-squares multipliers show held cells wrong that are not).
    Each free set's solve starts from the last answer ``x``."""
    best, stall = np.inf, 0
    for rounds in range(1, _ROUNDS + 1):
        x, grad, lam, nu, graph = prob.solve(free, tol, x)
        move = (free & (x < -tol)) | (~free & ~prob.fixed & prob.unmet(x, graph, tol))
        if not move.any():
            reduced = grad - lam[None, :] - nu[:, prob.labels]
            move = ~free & ~prob.fixed & (reduced < -tol)
            if not move.any() or potentials(grad, free, prob.fixed, prob.labels, prob.R, tol):
                return _finish(prob, x, free, grad, lam, nu, graph, tol, rounds), rounds
        wrong = int(move.sum())
        if wrong >= best:
            stall += 1
        best = min(best, wrong)
        if wrong > _PIVOT_SHARE * free.sum() or stall > _STALL:
            return None, rounds
        free = free ^ move
        _keep(prob, free, x, grad - lam[None, :] - nu[:, prob.labels])
    return None, _ROUNDS


def _keep(prob: _Problem, free: BoolArray, x: FloatArray, reduced: FloatArray) -> None:
    """Every positive parent cell keeps a free child (:func:`cover`) and every child's row
    with a positive count a free cell (its cell of least reduced gradient)."""
    cover(free, x, prob.fixed)
    count = np.bincount(
        (prob.labels[None, :] + prob.R * np.arange(prob.k)[:, None]).ravel(),
        free.ravel(),
        minlength=prob.k * prob.R,
    ).reshape(prob.k, prob.R)
    for j, r in zip(*np.nonzero((count == 0) & (prob.g > 0)), strict=True):
        cells = np.flatnonzero(prob.labels == r)
        free[j, cells[int(np.argmin(reduced[j, cells]))]] = True


def _finish(
    prob: _Problem,
    x: FloatArray,
    free: BoolArray,
    grad: FloatArray,
    lam: FloatArray,
    nu: FloatArray,
    graph: _Graph,
    tol: float,
    rounds: int,
) -> FamilyResult:
    """The solution (tiny negatives at 0) with its KKT residuals from H itself."""
    out = np.where(free, np.maximum(x, 0.0), 0.0)
    grad = prob.kids(out) - prob.b
    reduced = grad - lam[None, :] - nu[:, prob.labels]
    stationarity = float(np.abs(reduced[free]).max(initial=0.0))
    dual = float(np.maximum(-reduced[~free & ~prob.fixed], 0.0).max(initial=0.0))
    degenerate = dual > tol and stationarity <= tol  # seek multipliers that prove it
    if degenerate and potentials(grad, free, prob.fixed, prob.labels, prob.R, tol):
        dual = stationarity = tol
    sums = np.abs(out.sum(axis=0) - prob.p).max(initial=0.0)
    rows = np.abs(graph.rows(out) - prob.g).max(initial=0.0)
    return FamilyResult(
        x=out,
        stationarity=stationarity,
        dual=dual,
        negative=float(np.maximum(-x[free], 0.0).max(initial=0.0)),
        consistency=float(max(sums, rows)),
        rounds=rounds,
        nu=nu,
    )

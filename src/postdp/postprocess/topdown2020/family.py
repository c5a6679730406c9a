"""One family of top-down for schema tables, exactly, in the coordinates of its free cells.

The problem (one parent, k children, the children's own marginal measurements): minimise
sum_j 1/2 a_j x_j' H x_j - b_j' x_j over the children's detailed histograms x_j, subject to
sum_j x_j = p (the parent's histogram) and x_j >= 0. H = sum_q w_q A_q' A_q is the level's
information matrix, the same for every child up to its weight a_j > 0 (1 unless a geounit
was measured with its own multiple of the level's budget); for marginals A_q' A_q is "1
where two cells fall in the same count of q", so any principal block of H is formed from
each cell's count index per query, never the c x c matrix. A cell the parent holds at 0 is
0 in every child, so only the parent's m positive cells are unknowns.

With F_j the cells where child j is free (the rest held at 0), the stationarity conditions
give x_j[F_j] = Z_j (b_j[F_j] + lam[F_j]) with Z_j = (a_j H[F_j, F_j])^-1, and the parent's sums
give M lam = p - sum_j E_j Z_j b_j[F_j] with M = sum_j E_j Z_j E_j' (positive definite
while every positive parent cell has a free child). A held cell's multiplier is
mu_ji = (H x_j - b_j - lam)_i, which must be >= 0.

The held sets are found by block principal pivoting from the equality-only solution's
negative cells (as :mod:`postdp.postprocess._solvers.active_set`: all wrong cells at once while
their number falls, then one at a time), and, should that stall, by the primal active-set
method from a feasible point (Nocedal and Wright, Numerical Optimization, 2nd ed.,
algorithm 16.3), which cannot cycle back to a worse objective. The answer is returned only
when its KKT residuals are below the tolerance, so it is exact and certified.

Cost per round: f^3 / 3 per child whose free set changed (f its free cells; the others keep
their inverses), m^3 / 3 for M and k m^2 for the multipliers: about rounds x (k f^3 + m^3 +
3 k m^2) / 3 flops and k (w^2 + m) + m^2 floats (w the largest f: the inverses are padded
to it; temporaries over them are taken a chunk of children at a time), growing with the
cells the parent and its children hold, never with the schema's size (a cell the parent
holds at 0 costs nothing).

Where the active set starts (:func:`start_free`): the cell-by-cell split's positive cells,
each child's own estimate projected onto the children's simplex in each cell; every parent
cell keeps a free child (:func:`cover`).

Bounded rows (the 2020 TopDown's total boxes and structural bounds) are solved over this
solver by :mod:`postdp.postprocess.topdown2020.family_box`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import linalg
from scipy.linalg import lapack

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.quadratic import LevelQuadratic, chunks, scatter_blocks
from postdp.postprocess._solvers.simplex import project_families
from postdp.postprocess._solvers.transport import feasible_split

BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "Family",
    "FamilyResult",
    "LevelQuadratic",
    "cover",
    "solve_family",
    "start_free",
]

_STALL_ROUNDS = 3
_MAX_ROUNDS = 200
_BATCH_WIDTH = 96  # children with at most this many free cells are inverted in one batch


@dataclass(frozen=True)
class FamilyResult:
    """A family's solution (k, m) with its KKT residuals (absolute), rounds used and the
    public rows' multipliers ``nu`` (k, R; 0 for a row not active for a child)."""

    x: FloatArray
    stationarity: float
    dual: float
    negative: float
    consistency: float
    rounds: int
    nu: FloatArray | None = None

    @property
    def worst(self) -> float:
        """The largest KKT residual."""
        return max(self.stationarity, self.dual, self.negative, self.consistency)


class _Inner:
    """The equality-constrained solve for given free sets (see the module docstring).

    The children's inverses are kept in one padded (k, width, width) array. A round
    touches only the children whose free set changed: updated cell by cell (O(f^2) per
    cell) when few cells changed, else factored afresh (O(f^3)). Updated inverses can drift;
    the answer is certified from H itself, and if it is not, they are factored afresh."""

    def __init__(
        self,
        H: FloatArray,
        b: FloatArray,
        p: FloatArray,
        G: FloatArray,
        g: FloatArray,
        active: BoolArray | None = None,
        fixed: BoolArray | None = None,
        weight: FloatArray | None = None,
    ) -> None:
        self.H, self.b, self.p, self.G, self.g = H, b, p, G, g
        k, m = b.shape
        self.a = weight  # each child's weight a_j (None: all 1)
        # cells held at 0 whatever their multipliers (a child's structural zeros)
        self.fixed = np.zeros((k, m), dtype=bool) if fixed is None else fixed
        # which public rows hold for which child (every row for every child by default)
        self.active = np.ones((k, G.shape[0]), dtype=bool) if active is None else active
        self.G_ext = np.concatenate([G, np.zeros((G.shape[0], 1))], axis=1)
        self.free = np.zeros((k, m), dtype=bool)
        self.width = 0
        self.idx = np.zeros((k, 0), dtype=np.int64)
        self.valid = np.zeros((k, 0), dtype=bool)
        self.Z = np.zeros((k, 0, 0))
        self.v = np.zeros((k, 0))
        self.H_ext = np.zeros((m + 1, m + 1))
        self.H_ext[:m, :m] = H
        self.b_ext = np.concatenate([b, np.zeros((k, 1))], axis=1)
        self.updated = np.zeros(k, dtype=bool)  # inverse from cell-by-cell updates
        self.stale = np.zeros(k, dtype=bool)  # to be factored afresh next round

    def _refresh(self, free: BoolArray) -> None:
        m = free.shape[1]
        changed = np.flatnonzero((free != self.free).any(axis=1) | self.stale)
        if not changed.size:
            return
        width = int(free.sum(axis=1).max(initial=0)) + 1
        if width > self.width:  # widen every child's padded arrays
            k, w = free.shape[0], self.width
            idx, valid = np.full((k, width), m, dtype=np.int64), np.zeros((k, width), dtype=bool)
            Z, v = np.zeros((k, width, width)), np.zeros((k, width))
            idx[:, :w], valid[:, :w], Z[:, :w, :w], v[:, :w] = self.idx, self.valid, self.Z, self.v
            self.idx, self.valid, self.Z, self.v, self.width = idx, valid, Z, v, width
        sizes = free.sum(axis=1)
        small = changed[sizes[changed] <= _BATCH_WIDTH]
        if small.size:  # small blocks: one batched inversion, padded to the widest
            self._invert_batch(small, free[small])
        for j in changed[sizes[changed] > _BATCH_WIDTH]:
            removed = np.flatnonzero(self.free[j] & ~free[j])
            added = np.flatnonzero(free[j] & ~self.free[j])
            f = int(self.valid[j].sum())
            if (
                self.stale[j]
                or 8 * (removed.size + added.size) > f
                or not self._update(j, removed, added)
            ):
                self._invert(j, np.flatnonzero(free[j]))
        for rows in chunks(changed, self.width):  # never a copy of every child's inverse
            values = np.take_along_axis(self.b_ext[rows], self.idx[rows], axis=1)
            self.v[rows] = np.einsum("kab,kb->ka", self.Z[rows], values)
        self.stale[:] = False
        self.free = free.copy()

    def _invert_batch(self, rows: IntArray, free: BoolArray) -> None:
        """Fresh inverses of several children's blocks in one batched call."""
        m = free.shape[1]
        width = int(free.sum(axis=1).max(initial=0))
        order = np.argsort(~free, axis=1, kind="stable")[:, :width]
        valid = np.take_along_axis(free, order, axis=1)
        idx = np.where(valid, order, m)
        pair = valid[:, :, None] & valid[:, None, :]
        blocks = np.where(pair, self.H_ext[idx[:, :, None], idx[:, None, :]], 0.0)
        if self.a is not None:
            blocks *= self.a[rows][:, None, None]
        diag = np.arange(width)
        blocks[:, diag, diag] += ~valid  # padding: an identity block, decoupled
        Z = np.where(pair, np.linalg.inv(blocks), 0.0)
        self.idx[rows], self.valid[rows], self.Z[rows] = m, False, 0.0
        self.idx[rows, :width], self.valid[rows, :width] = idx, valid
        self.Z[rows, :width, :width] = (Z + np.swapaxes(Z, 1, 2)) / 2
        self.updated[rows] = False

    def _invert(self, j: int, idx: IntArray) -> None:
        """Child j's inverse from a fresh Cholesky factor."""
        m = self.free.shape[1]
        f = idx.size
        self.idx[j], self.valid[j], self.Z[j] = m, False, 0.0
        self.idx[j, :f], self.valid[j, :f] = idx, True
        self.updated[j] = False
        if not f:
            return
        block = self.H[np.ix_(idx, idx)]
        factor, info = lapack.dpotrf(block if self.a is None else block * self.a[j], lower=True)
        if info == 0:
            inverse, info = lapack.dpotri(factor, lower=True)
        if info != 0:
            raise ConvergenceError("a block of the level's information matrix is singular")
        Z = np.tril(inverse)
        self.Z[j, :f, :f] = Z + np.tril(Z, -1).T

    def _update(self, j: int, removed: IntArray, added: IntArray) -> bool:
        """Child j's inverse updated cell by cell (O(f^2) each): a held cell by the Schur
        complement, a freed one by bordering. False if a pivot is not safely positive."""
        m = self.free.shape[1]
        idx, Z = self.idx[j], self.Z[j]
        f = int(self.valid[j].sum())
        a = 1.0 if self.a is None else float(self.a[j])
        for cell in removed:
            s = int(np.flatnonzero(idx[:f] == cell)[0])
            last = f - 1
            idx[[s, last]] = idx[[last, s]]  # the cell's slot swapped with the last one
            Z[[s, last], :] = Z[[last, s], :]
            Z[:, [s, last]] = Z[:, [last, s]]
            pivot = Z[last, last]
            if not pivot > 0:
                return False
            col = Z[:last, last].copy()
            Z[:last, :last] -= np.outer(col, col) / pivot
            Z[last, :] = 0.0
            Z[:, last] = 0.0
            idx[last], self.valid[j, last] = m, False
            f = last
        for cell in added:
            h = a * self.H[idx[:f], cell]
            z = Z[:f, :f] @ h
            schur = a * self.H[cell, cell] - h @ z
            if not schur > 1e-12 * a * self.H[cell, cell]:
                return False
            Z[:f, :f] += np.outer(z, z) / schur
            Z[:f, f] = Z[f, :f] = -z / schur
            Z[f, f] = 1.0 / schur
            idx[f], self.valid[j, f] = cell, True
            f += 1
        self.updated[j] = True
        return True

    def renew(self) -> bool:
        """Mark the children whose inverse came from updates for a fresh factor; whether
        there were any."""
        self.stale = self.updated.copy()
        return bool(self.stale.any())

    def solve(self, free: BoolArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """(x, mu, lam, nu): x held at 0 off ``free``; mu the held cells' multipliers
        (+inf for the cells of a child's public row with no free cell: that row's multiplier
        is free); lam the cells' and nu the public rows' multipliers (k, R)."""
        k, m = free.shape
        R = self.G.shape[0]
        self._refresh(free)
        idx, Z = self.idx, self.Z
        M_cells = scatter_blocks(idx, Z, m)
        rhs_cells = self.p - np.bincount(idx.ravel(), self.v.ravel(), minlength=m + 1)[:m]
        if R:
            A = np.where(self.valid[None], self.G_ext[:, idx], 0.0)  # (R, k, width)
            ZA = np.einsum("kab,rkb->kar", Z, A)  # Z_j A_j' per child
            # a row a child need not meet has no multiplier; nor, in this system, one with
            # no free cell (met when its value is 0, as a structural zero; else unmet): the
            # system has the live rows only (k R of them would be 3.6 GB at 2,550 x 8)
            live = self.active & (((self.G != 0)[None] & free[:, None, :]).any(axis=2))
            n = int(live.sum())
            M = np.zeros((m + n, m + n))
            M[:m, :m] = M_cells
            cross = np.zeros((m + 1, k, R))
            np.add.at(cross, (idx, np.arange(k)[:, None]), ZA)  # E_j Z_j A_j'
            M[:m, m:] = cross[:m][:, live]
            M[m:, :m] = M[:m, m:].T
            del cross
            inner = np.einsum("rka,kas->krs", A, ZA)  # A_j Z_j A_j'
            start = m
            for j in np.flatnonzero(live.any(axis=1)):
                rows = np.flatnonzero(live[j])
                M[start : start + rows.size, start : start + rows.size] = inner[j][
                    np.ix_(rows, rows)
                ]
                start += rows.size
            rhs_rows = self.g - np.einsum("rka,ka->kr", A, self.v)
            rhs = np.concatenate([rhs_cells, rhs_rows[live]])
        else:
            M, rhs = M_cells, rhs_cells
            live = self.active
        try:
            sol = linalg.cho_solve(linalg.cho_factor(M), rhs)
        except linalg.LinAlgError:  # a cell with no free child, a row with no free cell
            sol = linalg.lstsq(M, rhs)[0]
        lam, nu = sol[:m], np.zeros((k, R))
        nu[live] = sol[m:]
        lam_ext = np.append(lam, 0.0)
        values = self.v + np.einsum("kab,kb->ka", Z, lam_ext[idx])
        if R:
            values += np.einsum("kar,kr->ka", ZA, nu)
        x = np.zeros((k, m + 1))
        np.put_along_axis(x, idx, np.where(self.valid, values, 0.0), axis=1)
        x = x[:, :m]
        mu = self.gradient(x) - lam - nu @ self.G
        if R:
            member = self.G != 0
            dead = ~(member[None] & free[:, None, :]).any(axis=2) & self.active  # (k, R)
            exempt = (dead.astype(float) @ member.astype(float)) > 0
            mu[exempt] = np.inf
        mu[free] = 0.0
        mu[self.fixed] = np.inf  # a structural zero's multiplier is free
        return x, mu, lam, nu

    def gradient(self, x: FloatArray) -> FloatArray:
        """Each child's a_j H x_j - b_j (H symmetric)."""
        hx = x @ self.H
        if self.a is not None:
            hx *= self.a[:, None]
        out: FloatArray = hx - self.b
        return out

    def unmet(self, x: FloatArray, tol: float) -> BoolArray:
        """Per child, the cells of its public rows that ``x`` misses by more than tol."""
        if not self.G.shape[0]:
            return np.zeros(x.shape, dtype=bool)
        missed = (np.abs(x @ self.G.T - self.g) > tol) & self.active  # (k, R)
        out: BoolArray = (missed.astype(float) @ (self.G != 0).astype(float)) > 0
        return out


def solve_family(
    H: FloatArray,
    b: FloatArray,
    p: FloatArray,
    *,
    tol: float,
    G: FloatArray | None = None,
    g: FloatArray | None = None,
    active: BoolArray | None = None,
    free: BoolArray | None = None,
    weight: FloatArray | None = None,
) -> FamilyResult:
    """The family's exact nonnegative least-squares split (see the module docstring).

    Parameters
    ----------
    H : ndarray, shape (m, m)
        The level's information matrix on the parent's positive cells.
    b : ndarray, shape (k, m)
        Each child's weighted answers A' W y on those cells.
    p : ndarray, shape (m,)
        The parent's positive cells.
    tol : float
        Absolute tolerance of the KKT residuals.
    G : ndarray, shape (R, m), optional
        The level's public rows (invariants), the same for every child.
    g : ndarray, shape (k, R), optional
        Each child's public values.
    active : ndarray of bool, shape (k, R), optional
        Which rows each child must meet (default all): the equality rows of an active
        set of inequalities (:func:`~postdp.postprocess.topdown2020.family_box.solve_family_box`).
    free : ndarray of bool, shape (k, m), optional
        A first guess of the cells that are positive (e.g. a nearby problem's answer);
        default the cell-by-cell split of the children's own estimates.
    weight : ndarray, shape (k,), optional
        Each child's multiple a_j > 0 of H (default 1; ``b`` already holds it).

    Returns
    -------
    FamilyResult
    """
    k, m = b.shape
    G = np.zeros((0, m)) if G is None else G
    g = np.zeros((k, 0)) if g is None else g
    active = np.ones((k, G.shape[0]), dtype=bool) if active is None else active
    if k == 1 or m == 0:
        x = np.broadcast_to(p, (k, m)).copy() if k == 1 else np.zeros((k, m))
        bad = float(np.abs(np.where(active, x @ G.T - g, 0.0)).max(initial=0.0))
        return FamilyResult(x, 0.0, 0.0, 0.0, bad, 0, np.zeros((k, G.shape[0])))
    return Family(H, b, p, G, weight=weight).solve(g, active, tol=tol, free=free)


class Family:
    """One family prepared once and solved for several sets of public rows (their values
    and which children meet them): the children's inverses are kept between solves.

    Parameters
    ----------
    H, b, p, G
        As :func:`solve_family` (``k >= 2`` children and ``m >= 1`` cells).
    fixed : ndarray of bool, shape (k, m), optional
        Cells held at 0 in a child whatever it costs (its structural zeros; every positive
        parent cell needs a child where it is not held).
    weight : ndarray, shape (k,), optional
        Each child's multiple of H (as :func:`solve_family`).
    """

    def __init__(
        self,
        H: FloatArray,
        b: FloatArray,
        p: FloatArray,
        G: FloatArray,
        fixed: BoolArray | None = None,
        weight: FloatArray | None = None,
    ) -> None:
        k = b.shape[0]
        zeros = np.zeros((k, G.shape[0]))
        self.inner = _Inner(H, b, p, G, zeros, fixed=fixed, weight=weight)

    def solve(
        self, g: FloatArray, active: BoolArray, *, tol: float, free: BoolArray | None = None
    ) -> FamilyResult:
        """The exact split with rows ``G x_j = g_j`` where ``active`` (see
        :func:`solve_family`)."""
        inner = self.inner
        inner.g, inner.active = g, active
        if free is None:
            free = start_free(inner.H, inner.b, inner.p, inner.fixed, inner.a)
        else:
            free = free & ~inner.fixed
            cover(free, free.astype(float), inner.fixed)
        return _rounds(inner, free, tol)


def _rounds(inner: _Inner, free: BoolArray, tol: float) -> FamilyResult:
    """Block principal pivoting from ``free``, the primal method should it stall."""
    best, stall = np.inf, 0
    for rounds in range(1, _MAX_ROUNDS + 1):
        x, mu, lam, nu = inner.solve(free)
        wrong = (free & (x < -tol)) | (~free & ((mu < -tol) | inner.unmet(x, tol)))
        wrong &= ~inner.fixed
        count = int(wrong.sum())
        if count == 0:
            result = _finish(inner, x, free, lam, nu, rounds)
            if result.worst <= 100 * tol or not inner.renew():
                return result
            continue  # updated inverses drifted: factor them afresh and look again
        if count < best:
            best, stall = count, 0
        else:
            stall += 1
        if stall >= _STALL_ROUNDS:
            return _primal(inner, x, free, rounds, tol)
        free = free ^ wrong
        cover(free, x, inner.fixed)
    return _primal(inner, x, free, _MAX_ROUNDS, tol)


def _primal(inner: _Inner, x: FloatArray, free: BoolArray, rounds: int, tol: float) -> FamilyResult:
    """Primal active-set method from a feasible point near ``x``."""
    xp = feasible_split(inner.p, inner.G, inner.g, inner.active, x, free, inner.fixed)
    held = (xp <= 0) | inner.fixed
    limit = rounds + 50 * xp.size
    while rounds < limit:
        rounds += 1
        target, mu, lam, nu = inner.solve(~held)
        step = target - xp
        blocking = ~held & (target < 0) & (step < 0)
        if not blocking.any():
            xp = np.where(held, 0.0, target)
            if not (held & (mu < -tol)).any():
                result = _finish(inner, xp, ~held, lam, nu, rounds)
                if result.worst <= 100 * tol or not inner.renew():
                    return result
                continue
            worst = np.unravel_index(np.argmin(np.where(held, mu, np.inf)), mu.shape)
            held[worst] = False
            continue
        ratio = np.where(blocking, xp / np.where(blocking, -step, 1.0), np.inf)
        first = np.unravel_index(np.argmin(ratio), ratio.shape)
        xp = np.where(held, 0.0, xp + ratio[first] * step)
        xp[first] = 0.0
        held[first] = True
    raise ConvergenceError(
        "top-down's family split did not finish within its round limit; please report the input"
    )


def _finish(
    inner: _Inner,
    x: FloatArray,
    free: BoolArray,
    lam: FloatArray,
    nu: FloatArray,
    rounds: int,
) -> FamilyResult:
    """The solution with tiny negatives (within the tolerance) at 0, and its KKT
    residuals, computed from H itself with the multipliers of the last solve (any
    multipliers that meet the conditions prove optimality). Cells of a child's public row
    with no free cell are exempt from the sign test (that row's multiplier is free)."""
    out = np.where(free, np.maximum(x, 0.0), 0.0)
    reduced = inner.gradient(out) - lam - nu @ inner.G
    member = inner.G != 0
    dead = ~(member[None] & free[:, None, :]).any(axis=2) & inner.active
    exempt = (dead.astype(float) @ member.astype(float)) > 0
    sums = np.abs(out.sum(axis=0) - inner.p).max(initial=0.0)
    rows = np.abs(np.where(inner.active, out @ inner.G.T - inner.g, 0.0)).max(initial=0.0)
    return FamilyResult(
        x=out,
        stationarity=float(np.abs(np.where(free, reduced, 0.0)).max(initial=0.0)),
        dual=float(
            np.maximum(-np.where(free | exempt | inner.fixed, 0.0, reduced), 0.0).max(initial=0.0)
        ),
        negative=float(np.maximum(-x[free], 0.0).max(initial=0.0)),
        consistency=float(max(sums, rows)),
        rounds=rounds,
        nu=nu,
    )


# The start of the active set.


def cover(free: BoolArray, x: FloatArray, fixed: BoolArray) -> None:
    """Free, in every cell no child is free in, the child (not held at 0 there) with the
    largest value."""
    bare = ~free.any(axis=0)
    if bare.any():
        cols = np.flatnonzero(bare)
        score = np.where(fixed[:, cols], -np.inf, x[:, cols])
        free[np.argmax(score, axis=0), cols] = True


def start_free(
    H: FloatArray, b: FloatArray, p: FloatArray, fixed: BoolArray, a: FloatArray | None
) -> BoolArray:
    """The cell-by-cell split's positive cells (exact when H is diagonal): each child's
    own estimate (a_j H)^-1 b_j, each cell's estimates projected onto the children's
    simplex {>= 0, adding up to the parent's cell}."""
    k, m = b.shape
    u = linalg.cho_solve(linalg.cho_factor(H), b.T).T
    if a is not None:
        u /= a[:, None]
    start = (
        project_families(
            u.T.reshape(1, -1),
            np.arange(m) * k,
            np.full(m, k),
            p[None, :],
            np.ones(m * k),
            np.ones(m * k, dtype=bool),
        )
        .reshape(m, k)
        .T
    )
    free: BoolArray = (start > 0) & ~fixed
    cover(free, start, fixed)
    return free

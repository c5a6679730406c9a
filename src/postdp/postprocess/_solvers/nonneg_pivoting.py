"""The pivoting behind (P+) for tables, one draw at a time (private; see
:mod:`postdp.postprocess.nonneg`). A one-cell table takes the scalar pivoting of
:mod:`postdp.postprocess._solvers.active_set` instead, every draw at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray
from postdp.errors import ConvergenceError, ValidationError

BoolArray = npt.NDArray[np.bool_]

_STALL_ROUNDS = 3
_MAX_ROUNDS = 200
_REL_TOL = 1e-11
_CHUNK = 1024  # leaf geounits conditioned at once (memory: chunk x c x c floats, a few times)


class Draw:
    """One draw's (P+): answers per level in layout order (private)."""

    def __init__(self, projector: Any, ys: list[FloatArray]) -> None:
        self.p = projector
        self.ys = ys
        table = projector.table
        self.geo = table.geography
        self.lay = self.geo.layout
        self.c = table.categories.leaves.size
        self.levels = projector._base._levels
        self.leaf = projector._leaf_layout
        scale = max(1.0, max(float(np.abs(y).max(initial=0.0)) for y in ys))
        self.tol = _REL_TOL * scale
        self.publics = self._public_groups()
        self.public_matrix: Any = None
        where = np.flatnonzero(self.leaf)
        contiguous = where.size and where[-1] - where[0] + 1 == where.size
        self.leaf_rows: Any = slice(int(where[0]), int(where[-1]) + 1) if contiguous else where
        self._own: FloatArray | None = None
        self._info: FloatArray = np.zeros(0)
        self.disjoint = False
        self.group_of = np.zeros(0, dtype=np.int64)

    # -- the inner solve: (P) with the cells in `held` (layout rows x cells) at 0 ----------
    def fixed(self, held: BoolArray) -> FloatArray:
        if self.p._diagonal:
            return self._fixed_diagonal(held)
        lay, c, n = self.lay, self.c, self.geo.n
        cov = np.zeros((n, c, c))
        est = np.zeros((n, c))
        sums: dict[int, tuple[FloatArray, FloatArray]] = {}
        for d in range(self.geo.n_levels - 1, -1, -1):
            A, r, _ = self.levels[d]
            b0, b1 = int(lay.bounds[d]), int(lay.bounds[d + 1])
            y = self.ys[d]
            if d < len(lay.parents):
                c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
                S = np.add.reduceat(cov[c0:c1], lay.starts[d], axis=0)
                m = np.add.reduceat(est[c0:c1], lay.starts[d], axis=0)
                parents = lay.parents[d]
                sums[d] = (S, m)
                cov[parents], est[parents] = _update(S, m, A, r, y[parents - b0])
            leaves = b0 + np.flatnonzero(self.leaf[b0:b1])
            if leaves.size:
                cov[leaves], est[leaves] = self._leaf_estimates(d, y[leaves - b0], held[leaves])
        out = np.empty((n, c))
        out[0] = est[0]
        public_below = any((self.levels[d][1] == 0).any() for d in range(1, self.geo.n_levels))
        for d in range(len(lay.parents)):
            S, m = sums[d]
            x = _pinv_apply(S, out[lay.parents[d]] - m, general=public_below)
            c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
            spread = np.repeat(x, lay.sizes[d], axis=0)
            out[c0:c1] = est[c0:c1] + np.einsum("nij,nj->ni", cov[c0:c1], spread)
        return out

    def _fixed_diagonal(self, held: BoolArray) -> FloatArray:
        """The inner solve when every level below the root measures single detailed cells
        and holds no public query: every covariance below the root is diagonal, so the
        two passes are elementwise (compiled loops), O(geounits x cells); the root's own
        queries (any, public ones included) by the matrix update."""
        from postdp._kernels import table_down, table_up

        if self._own is None:
            self._own, self._info = self._own_estimates()
        tree = self.p._tree
        var, est, sum_var, sum_est = table_up(
            self._own, self._info, self.p._node_level, self.leaf, held, tree
        )
        out = np.empty_like(est)
        A, r, _ = self.levels[0]
        root = sum_var[tree.level[0] : tree.level[1]]  # the root's one family
        if _single_cells(A, r):
            out[0] = _single_cell_update(root[0], sum_est[0], A, r, self.ys[0])[0]
        else:
            out[0] = _update(np.diag(root[0])[None], sum_est[:1], A, r, self.ys[0])[1][0]
        table_down(out, var, est, sum_var, sum_est, tree)
        return out

    def _own_estimates(self) -> tuple[FloatArray, FloatArray]:
        """Each geounit's estimate of each cell from its level's own single-cell queries
        (layout order), and each level's precision per cell."""
        lay = self.lay
        own = np.zeros((self.geo.n, self.c))
        info = np.zeros((self.geo.n_levels, self.c))
        for d in range(1, self.geo.n_levels):
            A, r, _ = self.levels[d]
            info[d] = (A / r[:, None]).sum(axis=0)
            weighted = (self.ys[d] / r) @ A
            b0, b1 = int(lay.bounds[d]), int(lay.bounds[d + 1])
            own[b0:b1] = np.where(info[d] > 0, weighted / np.where(info[d] > 0, info[d], 1), 0)
        return own, info

    def _leaf_estimates(
        self, d: int, y: FloatArray, held: BoolArray
    ) -> tuple[FloatArray, FloatArray]:
        A, r, _ = self.levels[d]
        noisy = r > 0
        An, rn = A[noisy], r[noisy]
        cov0 = np.linalg.inv(An.T @ (An / rn[:, None]))
        cov0 = (cov0 + cov0.T) / 2
        est = (y[:, noisy] / rn[None, :]) @ An @ cov0
        public = A[~noisy]
        if public.shape[0]:  # public queries at this level: each leaf's answers held
            gain = cov0 @ public.T @ psd_pinv(public @ cov0 @ public.T)
            est = est + (y[:, ~noisy] - est @ public.T) @ gain.T
            cov0 = cov0 - gain @ public @ cov0
            cov0 = (cov0 + cov0.T) / 2
        cov = np.broadcast_to(cov0, (y.shape[0], self.c, self.c)).copy()
        rows = np.flatnonzero(held.any(axis=1))
        for k in range(0, rows.size, _CHUNK):
            pick = rows[k : k + _CHUNK]
            z = held[pick]
            zz = z[:, :, None] & z[:, None, :]
            M = np.where(zz, cov0[None], 0.0) + np.eye(self.c)[None] * ~z[:, :, None]
            # inverse of cov0[J, J] in the held block (pseudo-inverse when public queries
            # tie held cells together), 0 elsewhere
            T = (_pinv(M) if public.shape[0] else np.linalg.inv(M)) * zz
            CJ = cov0[None] * z[:, None, :]  # cov0[:, J]
            free = ~z
            e = est[pick] - np.einsum("nij,nj->ni", CJ @ T, est[pick])
            cv = cov0[None] - CJ @ T @ np.swapaxes(CJ, 1, 2)
            cov[pick] = cv * (free[:, :, None] & free[:, None, :])
            est[pick] = e * free
        return cov, est

    # -- multipliers ----------------------------------------------------------------------
    def gradient(self, t: FloatArray) -> FloatArray:
        """Gradient of the objective at every geounit's cells, summed down each path."""
        lay = self.lay
        g = np.zeros_like(t)
        for d in range(self.geo.n_levels):
            A, r, _ = self.levels[d]
            noisy = r > 0
            if not noisy.any():
                continue
            b0, b1 = int(lay.bounds[d]), int(lay.bounds[d + 1])
            if d > 0 and self._own is not None:  # single-cell queries: info x (t - own)
                g[b0:b1] = self._info[d] * (t[b0:b1] - self._own[b0:b1])
                continue
            An = A[noisy]
            resid = t[b0:b1] @ An.T - self.ys[d][:, noisy]
            g[b0:b1] = (resid / r[noisy]) @ An
        for d in range(len(lay.parents)):
            c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
            g[c0:c1] += np.repeat(g[lay.parents[d]], lay.sizes[d], axis=0)
        return g

    def _public_groups(self) -> list[tuple[int, FloatArray, FloatArray]]:
        """(level, 0/1 group-by-cell matrix, group totals per geounit of the level)."""
        out = []
        for d in range(self.geo.n_levels):
            A, r, _ = self.levels[d]
            pub = r == 0
            if pub.any():
                out.append((d, A[pub], self.ys[d][:, pub]))
        return out

    def _public_matrix(self) -> tuple[object, FloatArray]:
        """Sparse 0/1 matrix (leaf cells, in layout order x cells) x (public geounit, group):
        which public totals each leaf cell adds to; and those totals."""
        import scipy.sparse as sp

        lay, c = self.lay, self.c
        leaves = np.flatnonzero(self.leaf)
        depth_of = np.repeat(np.arange(self.geo.n_levels), np.diff(lay.bounds))
        parent = np.full(self.geo.n, -1, dtype=np.int64)
        for d in range(len(lay.parents)):
            c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
            parent[c0:c1] = np.repeat(lay.parents[d], lay.sizes[d])
        rows, cols, totals = [], [], []
        offset = 0
        for d, groups, values in self.publics:
            k_leaf = np.flatnonzero(depth_of[leaves] >= d)  # leaves below level d
            node = leaves[k_leaf]
            for _ in range(int(depth_of[node].max(initial=d)) - d):
                deeper = depth_of[node] > d
                node[deeper] = parent[node[deeper]]
            local = node - int(lay.bounds[d])
            for k, row in enumerate(groups):
                for j in np.flatnonzero(row):
                    rows.append(k_leaf * c + j)
                    cols.append(offset + local * groups.shape[0] + k)
            offset += values.size
            totals.append(values.reshape(-1))
        r_all, c_all = np.concatenate(rows), np.concatenate(cols)
        M = sp.csr_matrix((np.ones(r_all.size), (r_all, c_all)), shape=(leaves.size * c, offset))
        self.disjoint = bool(np.bincount(r_all, minlength=leaves.size * c).max() <= 1)
        if self.disjoint:
            self.group_of = np.full(leaves.size * c, -1, dtype=np.int64)
            self.group_of[r_all] = c_all
        return M, np.concatenate(totals)

    def reduced(self, t: FloatArray, held: BoolArray) -> FloatArray:
        """Reduced gradient at the leaf cells: gradient + public multipliers' terms, the
        multipliers fitted on the free cells (layout rows; 0 rows for internal geounits)."""
        grad = self.gradient(t)
        if not self.publics:
            return grad
        from scipy.sparse.linalg import lsqr

        M: Any = self.public_matrix
        leaves = self.leaf_rows  # a slice when the leaf geounits are contiguous
        free = ~held[leaves].reshape(-1)
        g_leaf = grad[leaves].reshape(-1)
        out = np.zeros_like(grad)
        if self.disjoint:  # each cell in one public group at most: a mean per group
            col = self.group_of
            use = free & (col >= 0)
            counts = np.bincount(col[use], minlength=M.shape[1])
            sums = np.bincount(col[use], weights=g_leaf[use], minlength=M.shape[1])
            nu = np.append(-sums / np.maximum(counts, 1), 0.0)  # [-1]: no group
            out[leaves] = (g_leaf + nu[col]).reshape(-1, self.c)
            return out
        nu = lsqr(M[free], -g_leaf[free], atol=1e-15, btol=1e-15, iter_lim=10 * M.shape[1] + 100)[0]
        out[leaves] = (g_leaf + M @ nu).reshape(-1, self.c)
        return out

    def multipliers(self, t: FloatArray, held: BoolArray) -> FloatArray:
        """Reduced gradients whose held entries are the held cells' multipliers, with the
        public multipliers chosen to make those as nonnegative as they can be: where the
        least-squares choice is not unique (overlapping public groups) a small linear
        program picks among the choices; a public group without a free cell leaves its
        multiplier free, and raising it makes its cells' multipliers as large as needed
        (they are returned as +inf)."""
        mu = self.reduced(t, held)
        if not self.publics:
            return mu
        if not self.disjoint:
            mu = _best_multipliers(self, t, held, mu)
        M: Any = self.public_matrix
        leaves = self.leaf_rows
        free = (~held[leaves]).reshape(-1).astype(float)
        unpinned = np.asarray(M.T @ free).reshape(-1) == 0
        if unpinned.any():
            loose = np.asarray(M[:, unpinned].sum(axis=1)).reshape(-1) > 0
            mu[leaves] = np.where(loose.reshape(-1, self.c), np.inf, mu[leaves])
        return mu

    # -- pivoting --------------------------------------------------------------------------
    def solve(self) -> FloatArray:
        n, c = self.geo.n, self.c
        leaf = self.leaf[:, None]
        static = np.zeros((n, c), dtype=bool)
        positive = np.zeros(0, dtype=bool)
        if self.publics:
            self.public_matrix, totals = self._public_matrix()
            if (totals < -self.tol).any():
                raise ValidationError(
                    "a public query has a negative total: no nonnegative table meets it"
                )
            M: Any = self.public_matrix
            positive = totals > self.tol
            # cells of a public group whose total is 0 are 0 in every nonnegative table
            zero_sum = np.asarray(M[:, ~positive].sum(axis=1)).reshape(-1) > 0
            static[np.flatnonzero(self.leaf)] = zero_sum.reshape(-1, c)
        held = static | (leaf & (self.fixed(static) < 0))
        best, patience, single = np.iinfo(np.int64).max, _STALL_ROUNDS, False
        for _ in range(_MAX_ROUNDS):
            t = self.fixed(held)
            # a free cell below 0 by any amount is wrong (so no clipping is needed at the
            # end); a held cell's multiplier may sit within rounding error below 0. While
            # free cells are below 0 they alone are moved (the multipliers, which cost a
            # gradient pass, are looked at once none is): the same pivots in practice, and
            # the stall rule and Murty's rule keep the method finite either way.
            bad = ~static & leaf & ~held & (t < 0)
            if single or not bad.any():
                mu = self.multipliers(t, held)
                finite = np.abs(mu[np.isfinite(mu)])
                tol_mu = _REL_TOL * max(1.0, float(finite.max(initial=0.0)))
                bad |= ~static & leaf & held & (mu < -tol_mu)
            count = int(bad.sum())
            if count == 0:
                return self._finish(t, held)
            if not single:
                if count < best:
                    best, patience = count, _STALL_ROUNDS
                else:
                    patience -= 1
                single = patience < 0
            if single:  # Murty: flip the wrong cell of largest index only
                last = np.flatnonzero(bad.reshape(-1))[-1]
                bad = np.zeros(n * c, dtype=bool)
                bad[last] = True
                bad = bad.reshape(n, c)
            held = self._unstrand(held, held ^ bad, positive)
        raise ConvergenceError(
            f"(P+) for tables: pivoting did not finish in {_MAX_ROUNDS} rounds; please report "
            "this input"
        )

    def _unstrand(self, before: BoolArray, after: BoolArray, positive: BoolArray) -> BoolArray:
        """Keep free the newly held cells of any public group with a positive total that
        would have no free cell left (its total could not be met)."""
        if not positive.any():
            return after
        M: Any = self.public_matrix
        leaves = np.flatnonzero(self.leaf)
        free = (~after[leaves]).reshape(-1).astype(float)
        stranded = positive & (np.asarray(M.T @ free).reshape(-1) == 0)
        if not stranded.any():
            return after
        touched = np.asarray(M[:, stranded].sum(axis=1)).reshape(-1) > 0
        fix = np.zeros_like(after)
        fix[leaves] = touched.reshape(-1, self.c)
        out: BoolArray = np.where(fix & after & ~before, False, after)
        return out

    def _finish(self, t: FloatArray, held: BoolArray) -> FloatArray:
        """Held cells exactly 0, rounding-level negatives 0, parents the sums."""
        lay = self.lay
        out = np.where(self.leaf[:, None], np.where(held, 0.0, np.maximum(t, 0.0)), 0.0)
        for d in range(len(lay.parents) - 1, -1, -1):
            c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
            out[lay.parents[d]] = np.add.reduceat(out[c0:c1], lay.starts[d], axis=0)
        return out


def _update(
    S: FloatArray, m: FloatArray, A: FloatArray, r: FloatArray, y: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Kalman update of summed children (S, m) with a level's own measurements."""
    if A.shape[0] == 0:
        return S, m
    AS = A @ S  # (n, k, c)
    innov = y - m @ A.T
    gram = AS @ A.T + np.diag(r)[None]
    if (r > 0).all():
        solved = np.linalg.solve(gram, np.concatenate([AS, innov[:, :, None]], axis=2))
    else:
        solved = _pinv(gram) @ np.concatenate([AS, innov[:, :, None]], axis=2)
    cov = S - np.swapaxes(AS, 1, 2) @ solved[:, :, :-1]
    est = m + np.einsum("nkc,nk->nc", AS, solved[:, :, -1])
    return (cov + np.swapaxes(cov, 1, 2)) / 2, est


def _single_cells(A: FloatArray, r: FloatArray) -> bool:
    """Whether every row of ``A`` reads one cell (a single 1) with noise (r > 0)."""
    return bool(
        A.shape[0] and (r > 0).all() and ((A == 0) | (A == 1)).all() and (A.sum(axis=1) == 1).all()
    )


def _single_cell_update(
    s: FloatArray, m: FloatArray, A: FloatArray, r: FloatArray, y: FloatArray
) -> FloatArray:
    """The estimate of :func:`_update` for a diagonal S = diag(s) and rows that each read
    one cell with noise (:func:`_single_cells`): cell by cell, with P_j = sum of 1 / r over
    the rows of cell j, ``m_j + s_j sum((y - m_j) / r) / (1 + s_j P_j)`` (a held cell, s_j
    = 0, keeps m_j). ``m`` (c,), ``y`` (n, k): shape (n, c)."""
    precision = (1.0 / r) @ A
    residual = ((y - m @ A.T) / r) @ A
    out: FloatArray = m + s * residual / (1.0 + s * precision)
    return out


def _pinv(M: FloatArray, scale: float = 0.0) -> FloatArray:
    """Pseudo-inverses of a stack of symmetric positive semidefinite matrices (eigenvalues
    below 1e-12 of the largest, or of ``scale`` when larger, taken as zeros)."""
    vals, vecs = np.linalg.eigh(M)
    cut = 1e-12 * np.maximum(vals.max(axis=1, keepdims=True), max(scale, 1e-300))
    inv = np.where(vals > cut, 1.0 / np.where(vals > cut, vals, 1.0), 0.0)
    out: FloatArray = (vecs * inv[:, None, :]) @ np.swapaxes(vecs, 1, 2)
    return out


def psd_pinv(M: FloatArray, *, scale: float = 0.0) -> FloatArray:
    """Pseudo-inverse of one symmetric positive semidefinite matrix, with eigenvalues below
    1e-12 of the largest taken as exact zeros. A covariance after an exact (public) update
    is singular in exact arithmetic but only nearly so in floating point; numpy's default
    cut (a few ulps) keeps that rounding residue and inverts it into ~1e15. ``scale``: a
    size the cut is relative to when larger than the largest eigenvalue (the matrix's
    inputs' own, when its rounding residue comes from them)."""
    out: FloatArray = _pinv(((M + M.T) / 2)[None], scale)[0]
    return out


def _pinv_apply(S: FloatArray, v: FloatArray, *, general: bool) -> FloatArray:
    """S^+ v for a stack of covariance sums. Without public queries below the root a sum is
    singular only on cells held at 0 in every child (exact zero rows): a regularised solve
    is then exact; otherwise the eigen-decomposition."""
    if general:
        full: FloatArray = np.einsum("nij,nj->ni", _pinv(S), v)
        return full
    zero = np.einsum("nii->ni", S) == 0
    M = S + np.eye(S.shape[1])[None] * zero[:, :, None]
    out: FloatArray = np.linalg.solve(M, (v * ~zero)[:, :, None])[:, :, 0]
    return out


def _best_multipliers(draw: Draw, t: FloatArray, held: BoolArray, mu: FloatArray) -> FloatArray:
    """Reduced gradients with the public multipliers that make the held cells' multipliers
    as nonnegative as possible: the least-squares multipliers fitted on the free cells plus
    the direction (null space of the free cells' equations, which changes no free cell's
    stationarity) chosen by a small linear program. Only needed when the least-squares
    choice leaves a held cell's multiplier below 0 (public groups that overlap)."""
    M: Any = draw.public_matrix
    leaves = np.flatnonzero(draw.leaf)
    c = draw.c
    h = held[leaves].reshape(-1)
    m_leaf = mu[leaves].reshape(-1)
    if not h.any() or m_leaf[h].min() >= 0:
        return mu
    gram = (M[~h].T @ M[~h]).toarray()
    vals, vecs = np.linalg.eigh(gram)
    null = vecs[:, vals <= 1e-9 * max(1.0, float(vals.max(initial=0.0)))]
    if null.shape[1] == 0:
        return mu
    from scipy.optimize import linprog

    D = np.asarray(M[h] @ null)  # how the held cells' multipliers move along the null space
    k = null.shape[1]
    # maximise s subject to m_h + D z >= s, |z| <= bound (variables z, s)
    bound = 1e6 * max(1.0, float(np.abs(m_leaf).max()))
    lp = linprog(
        np.r_[np.zeros(k), -1.0],
        A_ub=np.hstack([-D, np.ones((D.shape[0], 1))]),
        b_ub=m_leaf[h],
        bounds=[(-bound, bound)] * k + [(None, None)],
        method="highs",
    )
    if lp.status != 0:
        return mu
    m_leaf = m_leaf.copy()
    x: FloatArray = np.asarray(lp.x)
    m_leaf[h] += D @ x[:k]
    out = mu.copy()
    out[leaves] = m_leaf.reshape(-1, c)
    return out

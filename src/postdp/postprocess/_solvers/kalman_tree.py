"""The two-pass tree solver of table (P), on any per-level measurement matrices (private).

The c x c generalisation of :mod:`postdp.postprocess._solvers.tree_solve` (the scalar
solver of a hierarchy of counts, which a one-cell table takes instead; see
:mod:`postdp.postprocess._solvers.one_cell`).

Generalised least squares for histograms x_g of c cells on a geography, a parent's the sum of
its children's, with measurements y = A_d x_g + noise (variance r per row, 0 for a public
row held exactly) at every geounit g of level d. The Gaussian (Kalman) filter and smoother
on the geography ([zhu2021] Thm 7, computed as in Hay et al.'s two
passes), with c x c matrices computed once per distinct subtree shape. Used by
:class:`~postdp.postprocess.TableProjector` with the 0/1 query matrices of a category tree,
and by the marginal basis (:mod:`postdp.postprocess._solvers.marginal_basis`) with the small
per-block matrices of a schema's marginals.

A geounit may be measured with its own multiple s of its level's budget (``scale``; the
production spine's bypass): its noisy rows then have variance r / s, and none at all when s
is 0. A geounit with no noisy rows that is the only child of its parent is *open*: it is its
parent (the same persons), so its parent's own answers must identify the cells, and its
final estimate is its parent's. Open geounits with siblings have no unique estimate and are
refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from postdp._typing import BoolArray, FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.nonneg_pivoting import psd_pinv

__all__ = ["TreeGLS"]


@dataclass(frozen=True, slots=True)
class _Own:
    """How a geounit's own answers move its estimate, kept in factors rather than as a
    c x k gain (a DHC persons block's would be 1,160 x 3,320, 31 MB a shape): the noisy rows
    through the covariance after them, then the public rows through their gain after those.

    From a prior estimate m (the children's sum; none at a leaf), with W the noisy rows'
    inverse variances: m1 = m + C1 A_n' W (y_n - A_n m) (a leaf: C1 A_n' W y_n) and then
    m1 + G (y_p - P m1); applied in this order, the two steps are the joint update."""

    noisy: IntArray  # the level's rows read with noise
    weight: FloatArray  # their inverse variances
    cov: FloatArray  # C1: the covariance after the noisy rows (the prior's if none)
    public: IntArray  # the level's rows held exactly
    held: FloatArray | None  # G (c x public rows)
    leaf: bool  # no prior: the noisy rows alone give m1

    def rows(self, A: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The noisy and public rows of the level's matrix (a copy only when they are not
        all of its rows: the DHC's largest are 31 MB)."""
        if self.noisy.size == A.shape[0]:
            return A, A[:0]
        return A[self.noisy], A[self.public]

    def apply(
        self, An: FloatArray, Ap: FloatArray, y: FloatArray, est: FloatArray | None
    ) -> FloatArray:
        """The estimate of geounits with answers y (B, nodes, k) and prior ``est`` (B,
        nodes, c; None at a leaf)."""
        if self.noisy.size:
            yn = y if self.noisy.size == y.shape[-1] else y[..., self.noisy]
            if est is not None:
                yn = yn - est @ An.T
            step = ((yn * self.weight) @ An) @ self.cov  # C1 symmetric
            est = step if est is None else est + step
        assert est is not None
        if self.held is not None:
            est = est + (y[..., self.public] - est @ Ap.T) @ self.held.T
        return est


@dataclass(frozen=True, slots=True)
class _Shape:
    """Matrices of one subtree shape."""

    cov: FloatArray  # S: covariance of the subtree's estimate after own measurements
    own: _Own | None  # how the node's own answers update its estimate
    sum_pinv: FloatArray | None  # internal: pseudo-inverse of the children's summed S
    summed: FloatArray | None = None  # internal: the children's summed S itself
    open: bool = False  # no information of its own: the only child of a parent it equals


class TreeGLS:
    """GLS of histograms of ``c`` cells on ``geography`` with measurements ``levels[d] =
    (A, r)`` at level d (A: k x c, r: k variances, 0 for public rows).

    ``below`` (optional, shape (leaves, c, c)): the leaf geounits stand for subtrees solved
    elsewhere; leaf i's children are summarised by an estimate (given to :meth:`solve`)
    with covariance ``below[i]`` (leaves in layout order), as :meth:`upward` returns them.
    Such a leaf is then an inner geounit whose children's sum is that estimate.

    ``scale`` (optional, shape (geography.n,), in id order): each geounit's multiple of its
    level's budget (noisy variances r / scale; 0: not measured)."""

    __slots__ = ("below", "c", "geography", "levels", "scale", "shapes", "sig")

    def __init__(
        self,
        geography: Hierarchy,
        levels: list[tuple[FloatArray, FloatArray]],
        c: int,
        below: FloatArray | None = None,
        pool: tuple[dict[tuple[object, ...], int], list[_Shape]] | None = None,
        scale: FloatArray | None = None,
    ) -> None:
        self.geography, self.levels, self.c, self.below = geography, levels, c, below
        self.scale = np.ones(geography.n)
        if scale is not None:
            self.scale[geography.layout.position] = scale
        self.sig: IntArray
        self.shapes: list[_Shape]
        self._prepare(pool)

    def _prepare(self, pool: tuple[dict[tuple[object, ...], int], list[_Shape]] | None) -> None:
        """Each geounit's shape; with ``pool`` (trees of the same per-level matrices, e.g.
        the subtrees of one table), shapes are found in and added to the shared pool."""
        geo = self.geography
        lay = geo.layout
        sig = np.full(geo.n, -1, dtype=np.int64)  # per layout position
        index: dict[tuple[object, ...], int]
        shapes: list[_Shape]
        index, shapes = ({}, []) if pool is None else pool
        first_leaf = int(lay.bounds[-2]) if self.below is not None else geo.n
        for d in range(geo.n_levels - 1, -1, -1):
            A, r = self.levels[d]
            own = (A.shape, A.tobytes(), r.tobytes())  # shapes are shared only for equal ones
            b0, b1 = lay.bounds[d], lay.bounds[d + 1]
            kids_of: dict[int, tuple[int, ...]] = {}
            if d < len(lay.parents):
                c0 = lay.bounds[d + 1]
                kid_sig = sig[c0 : lay.bounds[d + 2]]
                for f, p in enumerate(lay.parents[d]):
                    lo = lay.starts[d][f]
                    kids_of[int(p)] = tuple(sorted(kid_sig[lo : lo + lay.sizes[d][f]].tolist()))
            new = {k for p, k in kids_of.items() if (d, own, float(self.scale[p]), k) not in index}
            sums = _kid_sums(new, shapes, self.c)
            for p in range(b0, b1):
                at = float(self.scale[p])
                if p >= first_leaf:  # a leaf standing for a subtree: its own shape
                    assert self.below is not None
                    kid = _Shape(self.below[p - first_leaf], None, None)
                    shapes.append(_node_shape(d, A, r, at, [kid], self.c))
                    sig[p] = len(shapes) - 1
                    continue
                key: tuple[object, ...] = (d, own, at, kids_of.get(p, ()))
                if key not in index:
                    index[key] = len(shapes)
                    kids = [shapes[k] for k in kids_of.get(p, ())]
                    summed = sums.get(kids_of.get(p, ()))
                    shapes.append(_node_shape(d, A, r, at, kids, self.c, summed))
                sig[p] = index[key]
        if shapes[sig[0]].open:
            raise ValidationError("the geography's root is not measured at all, nor below")
        self.sig, self.shapes = sig, shapes

    def solve(
        self,
        ys: list[FloatArray],
        *,
        below: FloatArray | None = None,
        root: FloatArray | None = None,
    ) -> FloatArray:
        """The estimate from answers ``ys[d]`` of shape (B, geounits of level d in layout
        order, k_d): shape (B, geography.n, c) in layout order.

        ``below`` (B, leaves, c): the subtree estimates of the leaves (with ``below`` given
        at construction). ``root`` (B, c): the root's final histogram, fixed from outside
        (the subtree's share of a larger tree's solution; the root's own answers unused)."""
        post, summed = self._upward(ys, below)
        return self._downward(post, summed, root)

    def upward(self, ys: list[FloatArray]) -> tuple[FloatArray, FloatArray]:
        """The root's estimate from this tree's answers alone (B, c) and its covariance
        (c, c): the summary a larger tree takes as ``below`` for this subtree's root."""
        post, _ = self._upward(ys, None)
        return post[:, 0].copy(), self.shapes[self.sig[0]].cov  # a copy: post is not kept

    def _upward(
        self, ys: list[FloatArray], below: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        geo = self.geography
        lay = geo.layout
        c = self.c
        B = ys[0].shape[0]
        post = np.empty((B, geo.n, c))
        if (below is None) != (self.below is None):
            raise ValueError("`below` must be given exactly when the tree was built with it")
        # children's sums: only geounits above the deepest level have children, unless the
        # leaves stand for subtrees (their sums are `below`)
        inner = int(lay.bounds[-2])
        summed = np.zeros((B, geo.n if below is not None else inner, c))
        if below is not None:
            summed[:, inner:] = below
        chunk = max(1, (1 << 20) // max(1, B * max(c, max(y.shape[2] for y in ys))))
        for d in range(geo.n_levels - 1, -1, -1):
            A = self.levels[d][0]
            b0, b1 = lay.bounds[d], lay.bounds[d + 1]
            if d < len(lay.parents):
                c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
                sums = np.add.reduceat(post[:, c0:c1], lay.starts[d], axis=1)
                summed[:, lay.parents[d]] = sums
                del sums
            for s in np.unique(self.sig[b0:b1]):
                own = self.shapes[s].own
                rows = None if own is None else own.rows(A)
                every = b0 + np.flatnonzero(self.sig[b0:b1] == s)
                for a in range(0, every.size, chunk):  # geounits at a time: small temporaries
                    nodes = every[a : a + chunk]
                    est: FloatArray | None = None
                    if own is None or not own.leaf:
                        if b0 < summed.shape[1]:
                            est = summed[:, nodes]
                        else:  # an open leaf: no answers, no children (its parent's, downward)
                            est = np.zeros((B, nodes.size, c))
                    if own is not None and rows is not None:
                        est = own.apply(*rows, ys[d][:, nodes - b0], est)
                    post[:, nodes] = est
        return post, summed

    def _downward(
        self, post: FloatArray, summed: FloatArray, root: FloatArray | None
    ) -> FloatArray:
        lay = self.geography.layout
        out = post  # each level's estimates become final in place, parents before children
        if root is not None:
            out[:, 0] = root
        for d in range(len(lay.parents)):
            parents = lay.parents[d]
            c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
            self._split(out, out[:, parents] - summed[:, parents], d)
            # once more with what the children's sums still miss of their parents: S_sum^+
            # S_sum is the identity only to the covariances' conditioning (about 1e-7 at the
            # DHC's sizes, where single-year ages have variances near 1e6 beside held
            # directions near 0); a second split of that residue brings it to rounding
            gap = out[:, parents] - np.add.reduceat(out[:, c0:c1], lay.starts[d], axis=1)
            if np.abs(gap).max() > 1e-12 * max(1.0, float(np.abs(out[:, parents]).max())):
                self._split(out, gap, d)  # (well-conditioned trees, PL94's, need not)
        return out

    def _split(self, out: FloatArray, gap: FloatArray, d: int) -> None:
        """Add to the children of level d's parents their least-squares shares S_c S_sum^+
        of each parent's ``gap`` (B, parents, c) between its histogram and their sum."""
        lay = self.geography.layout
        parents = lay.parents[d]
        B, c = out.shape[0], self.c
        step = np.zeros((B, parents.size, c))
        for s in np.unique(self.sig[parents]):
            pick = np.flatnonzero(self.sig[parents] == s)
            pinv = self.shapes[s].sum_pinv
            if pinv is not None:  # else its one child is open: it takes the parent's
                step[:, pick] = gap[:, pick] @ pinv  # symmetric
        parent_of = np.repeat(np.arange(parents.size), lay.sizes[d])  # each child's
        c0 = lay.bounds[d + 1]
        kids_sig = self.sig[c0 : lay.bounds[d + 2]]
        chunk = max(1, (1 << 20) // max(1, B * c))  # children at a time: small temporaries
        for s in np.unique(kids_sig):
            pick = np.flatnonzero(kids_sig == s)
            if self.shapes[s].open:
                out[:, c0 + pick] = out[:, parents[parent_of[pick]]]
                continue
            cov = self.shapes[s].cov
            for a in range(0, pick.size, chunk):
                part = pick[a : a + chunk]
                out[:, c0 + part] += step[:, parent_of[part]] @ cov

    def covariances(self, root: FloatArray | None = None) -> Iterator[tuple[int, FloatArray]]:
        """(layout position, covariance (c x c) of its final estimate) of every geounit,
        level by level (from the design alone; one level's matrices held at a time).

        ``root`` (c, c): the root's final covariance when this tree is a subtree of a larger
        one (its smoothed covariance there); by default its own upward covariance."""
        for groups in self.covariance_groups(root):
            items = [(int(k), P) for positions, P in groups for k in positions]
            items.sort(key=lambda item: item[0])
            yield from items

    def covariance_groups(
        self, root: FloatArray | None = None
    ) -> Iterator[list[tuple[IntArray, FloatArray]]]:
        """:meth:`covariances` level by level, as groups (layout positions, their common
        covariance): the children of one family and one shape share one matrix, so a
        caller can handle a group at once instead of one geounit at a time."""
        lay = self.geography.layout
        shapes, sig = self.shapes, self.sig
        top = shapes[sig[0]].cov if root is None else root
        yield [(np.zeros(1, dtype=np.int64), top)]
        smoothed = {0: top}  # this level's parents
        for d in range(len(lay.parents)):
            c0 = int(lay.bounds[d + 1])
            groups: list[tuple[IntArray, FloatArray]] = []
            for f, p in enumerate(lay.parents[d]):
                parent = shapes[sig[p]]
                lo = c0 + int(lay.starts[d][f])
                hi = lo + int(lay.sizes[d][f])
                if parent.sum_pinv is None:  # its one child is open: the same estimate
                    groups.append((np.arange(lo, hi), smoothed[int(p)]))
                    continue
                assert parent.summed is not None
                middle = parent.sum_pinv @ (smoothed[int(p)] - parent.summed) @ parent.sum_pinv
                kid_sig = sig[lo:hi]
                for s in dict.fromkeys(kid_sig.tolist()):
                    cov = shapes[s].cov
                    P = cov + cov @ middle @ cov
                    groups.append((lo + np.flatnonzero(kid_sig == s), (P + P.T) / 2))
            yield groups
            if d + 1 < len(lay.parents):  # the next level's parents
                owner = np.empty(int(lay.bounds[d + 2]) - c0, dtype=np.int64)
                for g, (positions, _) in enumerate(groups):
                    owner[positions - c0] = g
                smoothed = {int(k): groups[owner[k - c0]][1] for k in lay.parents[d + 1]}

    def row_variances(
        self, matrices: list[FloatArray], root: FloatArray | None = None
    ) -> list[FloatArray]:
        """Variances of linear combinations of every geounit's final estimate.

        For each ``Q`` (a x c) of ``matrices``, the diagonal of ``Q P Q^T`` at every
        geounit, ``P`` its covariance from :meth:`covariances` (``root`` as there): arrays
        of shape (geounits in layout order, a). One pass over the covariances serves every
        matrix; a covariance that siblings share is used once (:meth:`covariance_groups`),
        and each diagonal is a matrix product, never the a x c x c loop of a three-operand
        einsum.
        """
        outs = [np.empty((self.geography.n, Q.shape[0])) for Q in matrices]
        for groups in self.covariance_groups(root):
            for positions, P in groups:
                for out, Q in zip(outs, matrices, strict=True):
                    out[positions] = np.einsum("ai,ai->a", Q @ P, Q)
        return outs


def _kid_sums(
    groups: set[tuple[int, ...]], shapes: list[_Shape], c: int
) -> dict[tuple[int, ...], FloatArray]:
    """The sum of the children's covariances of each group of children (sorted shape
    indices), bit for bit as ``np.sum(covs, axis=0)`` adds a stack of c x c matrices (c >= 2:
    one after the other, left to right), each group extending the sum of the group before
    it in sorted order when that group is its prefix: the states of a nation of counties of
    one shape cost as many additions as the largest state has counties, not as the nation
    has. Empty for c = 1 (numpy sums a stack of 1 x 1 matrices pairwise: :func:`_shape`
    calls np.sum itself)."""
    out: dict[tuple[int, ...], FloatArray] = {}
    if c < 2:
        return out
    prev: tuple[int, ...] = ()
    for kids in sorted(groups):
        if not kids:
            continue
        n = len(prev)
        if n and kids[:n] == prev:
            total = out[prev].copy()
        else:
            total, n = shapes[kids[0]].cov.copy(), 1
        for k in kids[n:]:
            total += shapes[k].cov
        out[kids] = total
        prev = kids
    return out


def _node_shape(
    d: int,
    A: FloatArray,
    r: FloatArray,
    at: float,
    kids: list[_Shape],
    c: int,
    summed: FloatArray | None = None,
) -> _Shape:
    """A geounit's shape from its rows (noisy variances r / at, dropped when ``at`` is 0)
    and its children's shapes (``summed``: the sum of their covariances, if known);
    ``open`` when it has neither rows nor children to go by."""
    noisy = r > 0
    keep = ~noisy | (at > 0)
    if any(kid.open for kid in kids):
        if len(kids) > 1:
            raise ValidationError(
                f"a geounit at geographic level {d + 1} has no noisy answers of its own "
                "(no budget) but has siblings: least squares has no unique answer for it"
            )
        kids, summed = [], None  # the one child is this geounit: its answers are this one's
    if not kids and not keep.any():
        return _Shape(np.zeros((c, c)), None, None, open=True)
    rows = np.flatnonzero(keep)
    r_kept = np.where(noisy[rows], r[rows] / (at if at > 0 else 1.0), 0.0)
    shape = _shape(d, A[rows], r_kept, [kid.cov for kid in kids], c, summed)
    own = shape.own
    if rows.size == A.shape[0] or own is None:
        return shape
    # the rows kept, as rows of the level's whole matrix
    return replace(shape, own=replace(own, noisy=rows[own.noisy], public=rows[own.public]))


def _shape(
    d: int,
    A: FloatArray,
    r: FloatArray,
    kid_covs: list[FloatArray],
    c: int,
    summed: FloatArray | None = None,
) -> _Shape:
    noisy = r > 0
    if not kid_covs:  # a leaf geounit: its own noisy answers identify its cells
        An, wn = A[noisy], 1.0 / r[noisy]
        info = An.T @ (wn[:, None] * An)
        if An.shape[0] < c or np.linalg.matrix_rank(info) < c:
            raise ValidationError(
                f"the noisy queries at geographic level {d} do not identify every "
                "detailed cell of its leaf geounits; measure the detailed cells there"
            )
        cov0 = np.linalg.inv(info)
        cov0 = (cov0 + cov0.T) / 2
        own, cov = _held(A, noisy, cov0, cov0, wn, leaf=True)
        return _Shape(cov, own, None)
    if summed is None:
        summed = np.sum(kid_covs, axis=0)
    sum_pinv = psd_pinv(summed)
    if A.shape[0] == 0:
        return _Shape(summed, None, sum_pinv, summed)
    own, cov = _update(A, r, summed)
    return _Shape(cov, own, sum_pinv, summed)


def _update(A: FloatArray, r: FloatArray, summed: FloatArray) -> tuple[_Own, FloatArray]:
    """The update (:class:`_Own`) and covariance of a prior of covariance ``summed`` updated
    with rows A of noise variances r (0: public, held exactly).

    The noisy rows go first, in the prior's c dimensions rather than the rows' k (the DHC's
    blocks have c = 1,160 unknowns and k = 3,320 rows): with J = A' R^-1 A, the gain
    S A' (A S A' + R)^-1 equals S (I + J S)^-1 A' R^-1 (since (I + A' R^-1 A S) A' = A' R^-1
    (R + A S A')) and the covariance S - K A S equals S (I + J S)^-1, so one c x c solve
    does; I + J S is invertible for any covariance S (its eigenvalues are those of I + R^-1/2
    A S A' R^-1/2, at least 1). The public rows P then update that estimate exactly (gain G
    = S1 P' (P S1 P')^+), and the joint gain is [(I - G P) K, G]: one update after the
    other is the update with both, the public answers independent of the noise."""
    noisy = r > 0
    cov = summed
    if noisy.any():
        An, weighted = A[noisy], A[noisy].T / r[noisy]  # A', columns over R
        step = np.eye(summed.shape[0]) + (weighted @ An) @ summed
        solved = np.linalg.solve(step.T, summed).T  # S (I + J S)^-1
        cov = np.asarray((solved + solved.T) / 2, dtype=np.float64)
    return _held(A, noisy, cov, summed, 1.0 / r[noisy], leaf=False)


def _held(
    A: FloatArray,
    noisy: BoolArray,
    cov: FloatArray,
    prior: FloatArray,
    weight: FloatArray,
    *,
    leaf: bool,
) -> tuple[_Own, FloatArray]:
    """The update by the noisy rows (covariance ``cov`` after them) completed with the
    public rows P (gain G = C1 P' (P C1 P')^+), and the covariance after both."""
    public = ~noisy
    held = None
    if public.any():
        P = A[public]
        # the cut of psd_pinv relative to the prior's scale, not the updated one's: a public
        # row already fixed by what is below has variance ~0 after the noisy rows, and that
        # rounding residue, small against the prior, must not be inverted
        size = float(np.abs(prior).max()) * float((P * P).sum(axis=1).max())
        held = cov @ P.T @ psd_pinv(P @ cov @ P.T, scale=size)
        after = cov - held @ P @ cov
        after = (after + after.T) / 2
    else:
        after = cov
    rows = np.flatnonzero(noisy), np.flatnonzero(public)
    return _Own(rows[0], weight, cov, rows[1], held, leaf), after

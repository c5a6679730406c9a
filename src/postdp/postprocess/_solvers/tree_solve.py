"""Weighted least squares on a tree in O(n): the inner step of every exact projection (private).

All arrays here are in the hierarchy's *layout* order (breadth first, families contiguous;
see ``Hierarchy.layout``) with draws on the leading axis, shape (B, n).

The two-pass solve treats each node's noisy value y_i as an observation of its subtree total
with variance 1/w_i and returns the generalised least-squares estimate subject to every
parent equalling the sum of its children: a bottom-up pass combines each node's own value
with the sum of its children's estimates by inverse-variance weighting; a top-down pass
hands each parent's final value minus its children's sum back to the children in proportion
to their estimates' variances. Fixed nodes (public values, or leaves held at 0 by an active
set) enter with variance 0. For equal weights this is the consistency step of Hay et al.
(2010); with general weights it is the exact weighted projection
argmin Σ w_i (v_i - y_i)² subject to A v = b ([zhu2021] (P)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from postdp._kernels import FlatTree, path_sums_rows, two_pass_masked_rows, two_pass_rows
from postdp._typing import FloatArray, IntArray
from postdp.hierarchy import Hierarchy, Layout, PublicNodes, components

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, eq=False)
class TreeProblem:
    """The parts of a projection problem that do not depend on the noisy values."""

    layout: Layout
    weight: FloatArray  # w_i, 0 at fixed nodes (they are not in the objective)
    var: FloatArray  # 1 / w_i, 0 at fixed nodes
    fixed: BoolArray
    fixed_values: FloatArray
    free_leaf: BoolArray  # leaves whose value is a free variable
    comp: IntArray  # layout position of each node's component root
    comp_public: BoolArray  # whether that component root is public
    slack: FloatArray  # per layout position: public value minus the public values under it
    n_levels: int
    # data-independent coefficients of the two passes when no extra leaf is held at 0
    own: tuple[FloatArray, ...]  # weight of a parent's own value, per level
    kids: tuple[FloatArray, ...]  # weight of its children's sum
    share: tuple[FloatArray, ...]  # each child's share of its parent's gap, per level
    any_fixed: bool
    flat: FlatTree  # the same coefficients for the compiled two passes

    @classmethod
    def build(cls, h: Hierarchy, weights: FloatArray, public: PublicNodes) -> TreeProblem:
        lay = h.layout
        order = lay.order
        fixed = public.determined[order]
        values = np.where(public.mask, public.values, public.floor)[order]
        weight = np.where(fixed, 0.0, weights[order])
        var = np.divide(1.0, weight, out=np.zeros_like(weight), where=weight > 0)
        comp_nodes = components(h, mask=public.mask)
        comp = lay.position[comp_nodes[order]]
        comp_public = public.mask[comp_nodes[order]]
        slack = np.where(public.mask, public.values - public.below, np.inf)[order]
        free_leaf = h.is_leaf[order] & ~fixed
        own, kids, share = _coefficients(lay, var, h.n_levels)
        return cls(
            lay,
            weight,
            var,
            fixed,
            values,
            free_leaf,
            comp,
            comp_public,
            slack,
            h.n_levels,
            own,
            kids,
            share,
            bool(fixed.any()),
            _flat(lay, own, kids, share, h.n),
        )


def _flat(
    lay: Layout,
    own: tuple[FloatArray, ...],
    kids: tuple[FloatArray, ...],
    share: tuple[FloatArray, ...],
    n: int,
) -> FlatTree:
    """Concatenate the per-level families and coefficients (levels top down)."""
    levels = len(lay.parents)
    starts = [lay.bounds[d + 1] + lay.starts[d] for d in range(levels)]
    counts = [p.size for p in lay.parents]
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    share_node = np.zeros(n)
    if levels:
        share_node[lay.bounds[1] :] = np.concatenate(share)
    return FlatTree(
        parent=np.concatenate([empty_i, *lay.parents]).astype(np.int64),
        start=np.concatenate([empty_i, *starts]).astype(np.int64),
        size=np.concatenate([empty_i, *lay.sizes]).astype(np.int64),
        level=np.cumsum([0, *counts]).astype(np.int64),
        own=np.concatenate([empty_f, *own]),
        kids=np.concatenate([empty_f, *kids]),
        share=share_node,
    )


def _coefficients(
    lay: Layout, var: FloatArray, n_levels: int
) -> tuple[tuple[FloatArray, ...], tuple[FloatArray, ...], tuple[FloatArray, ...]]:
    """Bottom-up variances and the resulting combination and sharing weights."""
    V = var.copy()
    own: list[FloatArray] = []
    kids: list[FloatArray] = []
    share: list[FloatArray] = []
    sv: list[FloatArray] = []
    for d in range(n_levels - 2, -1, -1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        SV = np.add.reduceat(V[c0:c1], lay.starts[d])
        vp = V[lay.parents[d]]
        denom = vp + SV
        positive = denom > 0
        safe = np.where(positive, denom, 1.0)
        own.append(np.where(positive, SV / safe, 1.0))
        kids.append(np.where(positive, vp / safe, 0.0))
        V[lay.parents[d]] = vp * SV / safe
        sv.append(SV)
    own.reverse()
    kids.reverse()
    sv.reverse()
    for d in range(n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        share.append(V[c0:c1] / np.where(sv[d] > 0, sv[d], 1.0)[lay.family(d)])
    return tuple(own), tuple(kids), tuple(share)


def two_pass(
    prob: TreeProblem, Y: FloatArray, zero: BoolArray | None = None, *, overwrite: bool = False
) -> FloatArray:
    """Weighted projection of each row of ``Y`` onto the consistent vectors.

    Parameters
    ----------
    prob : TreeProblem
    Y : ndarray, shape (B, n)
        Noisy values in layout order.
    zero : ndarray of bool, shape (B, n), optional
        Leaves additionally held at 0 (an active set).
    overwrite : bool, default False
        Solve in ``Y``'s memory (a caller's private copy), sparing one copy of the batch.

    Returns
    -------
    ndarray, shape (B, n)
    """
    if zero is None:
        return _two_pass_fixed(prob, Y, overwrite=overwrite)
    return two_pass_masked_rows(Y, zero, prob.fixed, prob.fixed_values, prob.var, prob.flat)


def _two_pass_fixed(prob: TreeProblem, Y: FloatArray, *, overwrite: bool) -> FloatArray:
    """The two passes with precomputed coefficients (no leaf held at 0 beyond the public ones)."""
    if prob.any_fixed:
        Z = np.where(prob.fixed, prob.fixed_values, Y)
    elif overwrite and Y.flags.c_contiguous:
        Z = Y
    else:
        Z = np.array(Y, dtype=np.float64, order="C")
    two_pass_rows(Z, prob.flat)
    return Z


def path_sums(prob: TreeProblem, D: FloatArray) -> FloatArray:
    """C_i = Σ of D over the path from the root to i (inclusive), for every node (in place)."""
    C = D if D.flags.c_contiguous and D.dtype == np.float64 else np.array(D, dtype=np.float64)
    path_sums_rows(C, prob.flat)
    return C


def leaf_multipliers(
    prob: TreeProblem, X: FloatArray, Y: FloatArray, inactive: BoolArray
) -> FloatArray:
    """Multipliers μ of the bounds v_ℓ >= 0 at the free leaves, given a consistent ``X``.

    With leaf values z as variables, the gradient of ½ Σ w_i (v_i - y_i)² at leaf ℓ is the
    sum of w_i (v_i - y_i) over the path from the root to ℓ; a public node on that path adds
    its own multiplier, which is shared by all leaves of its component and is fixed by
    stationarity at the component's inactive leaves. So μ_ℓ = Q_ℓ + θ_c with Q_ℓ the path sum
    below the component root c and θ_c = -mean of Q over c's inactive leaves (0 for the
    component of a non-public root). At an exact solution μ = 0 at inactive leaves and the
    KKT conditions ask μ >= 0 at the active ones.

    Returns
    -------
    ndarray, shape (B, n)
        μ at the free leaves (other entries are meaningless).
    """
    B, n = X.shape
    plain = not prob.any_fixed and bool((prob.weight == 1.0).all())
    C = path_sums(prob, X - Y if plain else prob.weight * (X - Y))
    if not prob.comp_public.any():
        return C  # callers read μ at the free leaves only
    base = np.where(prob.comp_public, C[:, prob.comp], 0.0)
    Q = np.where(prob.free_leaf, C - base, 0.0)
    in_public = prob.free_leaf & prob.comp_public
    group = np.arange(B)[:, None] * n + prob.comp[None, :]
    pick = inactive & in_public
    total = np.bincount(group[pick], weights=Q[pick], minlength=B * n)
    count = np.bincount(group[pick], minlength=B * n)
    theta = -np.divide(total, count, out=np.zeros(B * n), where=count > 0)
    # a component whose leaves are all active: the smallest θ that makes every μ >= 0
    empty = in_public & (count[group] == 0)
    if empty.any():
        lowest = np.full(B * n, np.inf)
        np.minimum.at(lowest, group[empty], Q[empty])
        fill = np.isfinite(lowest)
        theta[fill] = -lowest[fill]
    out: FloatArray = np.where(prob.free_leaf, Q + np.where(in_public, theta[group], 0.0), 0.0)
    return out


def family_sums(prob: TreeProblem, X: FloatArray) -> FloatArray:
    """Recompute every node with children as the exact sum of its children (bottom up)."""
    lay = prob.layout
    for d in range(prob.n_levels - 2, -1, -1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        X[..., lay.parents[d]] = np.add.reduceat(X[..., c0:c1], lay.starts[d], axis=-1)
    return X

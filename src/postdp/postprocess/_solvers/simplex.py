"""Projection of many families of values onto scaled simplices at once (private).

Each family g of entries u is projected onto {v >= 0, Σ v = t_g} in the weighted norm
Σ w (v - u)²: v = max(u - τ_g / w, 0) with τ_g chosen so the family sums to t_g. Michelot's
algorithm finds τ_g by fixed-point iteration: start with every entry active, set τ_g from the
active entries, drop the entries that fall to zero or below, repeat. Entries never re-enter,
so it stops after at most (family size) rounds, usually a handful; each round is a few
vectorised passes (Michelot 1986; Condat 2016 for the analysis).

:class:`TopDownPlan` is top-down on a hierarchy of counts (the one-cell table; see
:mod:`postdp.postprocess.topdown`): fix the root (its noisy value, made nonnegative, or its
public value), then, level by level, project the noisy children of every parent onto
{v >= 0, Σ v = the parent's post-processed value} -- every family of a level and every
draw in one vectorised pass (seed [fioretto2021] §6.3; [zhu2021] census experiments).
Unlike the exact (P+), a level never revises the levels above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray, IntArray
from postdp.hierarchy import Hierarchy, Layout, PublicNodes


def project_families(
    u: FloatArray,
    starts: IntArray,
    sizes: IntArray,
    target: FloatArray,
    inv_w: FloatArray,
    free: npt.NDArray[np.bool_],
) -> FloatArray:
    """Project every family of ``u`` onto {v >= 0, Σ v = target}, all rows at once.

    Parameters
    ----------
    u : ndarray, shape (B, m)
        Values; families are contiguous blocks of the last axis.
    starts : ndarray of int, shape (G,)
        Offset where each family begins (as for ``np.add.reduceat``).
    sizes : ndarray of int, shape (G,)
        Number of entries in each family.
    target : ndarray, shape (B, G)
        Nonnegative family totals.
    inv_w : ndarray, shape (m,)
        1 / weight of each entry.
    free : ndarray of bool, shape (m,)
        Entries that take part; the others come back as 0 and do not count in the sums.

    Returns
    -------
    ndarray, shape (B, m)
    """
    inv = np.where(free, inv_w, 0.0)
    alive = np.broadcast_to(free, u.shape)
    s_w = np.add.reduceat(inv, starts)  # first round: every free entry is active
    s_u = np.add.reduceat(u * free if not free.all() else u, starts, axis=-1)
    n_alive = np.count_nonzero(alive)
    while True:
        tau = np.divide(s_u - target, s_w, out=np.zeros_like(s_u), where=s_w > 0)
        level = u - np.repeat(tau, sizes, axis=-1) * inv
        keep = alive & (level > 0)
        n_keep = np.count_nonzero(keep)
        if n_keep == n_alive:
            out: FloatArray = level * alive
            return out
        alive, n_alive = keep, n_keep
        s_u = np.add.reduceat(u * alive, starts, axis=-1)
        s_w = np.add.reduceat(inv * alive, starts, axis=-1)


def weighted_simplex(v: FloatArray, h: FloatArray, total: float) -> FloatArray:
    """argmin sum_j h_j (t_j - v_j)^2 over t >= 0 with sum t = total, exactly, by sorting:
    t_j = max(v_j - tau / h_j, 0), whose sum falls as tau grows past the breakpoints
    h_j v_j; the answer's tau is the one at which the first k (by breakpoint) add up."""
    order = np.argsort(-(h * v), kind="stable")
    tau = (np.cumsum(v[order]) - total) / np.cumsum(1.0 / h[order])  # the first k positive
    valid = (h * v)[order] - tau > 0
    if not valid.any():
        return np.zeros_like(v)
    k = int(np.flatnonzero(valid)[-1])
    out: FloatArray = np.maximum(v - tau[k] / h, 0.0)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class TopDownPlan:
    """What top-down needs that does not depend on the noisy values (layout order)."""

    layout: Layout
    n_levels: int
    nonneg: bool
    fixed: npt.NDArray[np.bool_]
    fixed_values: FloatArray
    floor: FloatArray
    inv: FloatArray

    @classmethod
    def build(cls, h: Hierarchy, w: FloatArray, pub: PublicNodes, *, nonneg: bool) -> TopDownPlan:
        lay = h.layout
        fixed = pub.determined[lay.order]
        fixed_values = np.where(pub.mask, pub.values, pub.floor)[lay.order]
        floor = pub.floor[lay.order] if nonneg else np.zeros(h.n)
        return cls(lay, h.n_levels, nonneg, fixed, fixed_values, floor, 1.0 / w[lay.order])

    def run(self, Y: FloatArray) -> FloatArray:
        """Top-down on ``Y`` of shape (B, n) in layout order (overwritten and returned)."""
        lay = self.layout
        X = Y
        if self.fixed[0]:
            X[:, 0] = self.fixed_values[0]
        elif self.nonneg:
            X[:, 0] = np.maximum(X[:, 0], self.floor[0])
        for d in range(self.n_levels - 1):
            c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
            starts, sizes = lay.starts[d], lay.sizes[d]
            free = ~self.fixed[c0:c1]
            inv = self.inv[c0:c1]
            y = X[:, c0:c1]
            share = X[:, lay.parents[d]]  # what the free children share: the parent ...
            if not free.all():
                fixed_part = np.where(free, 0.0, self.fixed_values[c0:c1])
                share = share - np.add.reduceat(fixed_part, starts)  # ... minus fixed children
            if self.nonneg:
                lo = np.where(free, self.floor[c0:c1], 0.0)
                if lo.any():
                    target = np.maximum(share - np.add.reduceat(lo, starts), 0.0)
                    u = lo + project_families(y - lo, starts, sizes, target, inv, free)
                else:
                    u = project_families(y, starts, sizes, np.maximum(share, 0.0), inv, free)
            else:
                free_inv = np.where(free, inv, 0.0)
                gap = np.add.reduceat(y * free, starts, axis=-1) - share
                total_inv = np.add.reduceat(free_inv, starts)
                spread = free_inv / np.repeat(np.where(total_inv > 0, total_inv, 1.0), sizes)
                u = y - np.repeat(gap, sizes, axis=-1) * spread
            X[:, c0:c1] = u if free.all() else np.where(free, u, fixed_part)
        return X

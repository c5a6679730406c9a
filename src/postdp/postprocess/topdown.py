"""Top-down post-processing: the scheme of the census TopDown algorithm.

Fix the root (its noisy value, made nonnegative, or its public value), then, level by level,
project the noisy children of every parent onto {v >= 0, Σ v = the parent's post-processed
value} — every family of a level and every draw in one vectorised pass (seed
[fioretto2021] §6.3; [zhu2021] census experiments).
Unlike the exact (P+), a level never revises the levels above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray
from postdp.hierarchy import Hierarchy, Layout, PublicNodes
from postdp.postprocess._solvers.simplex import project_families

__all__ = ["TopDownPlan"]


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

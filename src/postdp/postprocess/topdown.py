"""Top-down post-processing: the scheme of the census TopDown algorithm.

Fix the root (its noisy value, made nonnegative, or its public value), then, level by level,
project the noisy children of every parent onto {v >= 0, Σ v = the parent's post-processed
value} — every family of a level and every draw in one vectorised pass (seed
``002_7dd7808a6059349a.txt`` §6.3; seed ``000_52243d433e48a03d.txt`` census experiments).
Unlike the exact (P+), a level never revises the levels above it.
"""

from __future__ import annotations

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.hierarchy import Hierarchy, PublicNodes, PublicSpec
from postdp.postprocess._simplex import project_groups

__all__ = ["top_down"]


def top_down(
    noisy: ArrayLike,
    hierarchy: Hierarchy,
    *,
    nonneg: bool = True,
    public: PublicSpec = None,
    weights: ArrayLike | None = None,
) -> FloatArray:
    """Post-process level by level: each family is projected onto its parent's final value.

    Parameters
    ----------
    noisy : array_like, shape (..., n)
        Noisy values of every node; leading axes are draws.
    hierarchy : Hierarchy
    nonneg : bool, default True
        Project each family onto {v >= 0, Σ v = parent} (TopDown); False drops v >= 0
        (closed-form (P_S) per family).
    public : mapping, sequence of str, "root" or None
        Invariant nodes (see :func:`postdp.project`); a public node keeps its value and its
        siblings share the rest of the parent's value.
    weights : array_like, shape (n,), optional
        Positive weights of Σ w (v - y)² within each family.

    Returns
    -------
    ndarray of float, same shape as ``noisy``

    Notes
    -----
    When public nodes lie below a node, that node cannot go below the sum of those public
    values (its floor), so the projection of a family is onto {v >= floor, Σ v = parent},
    i.e. a simplex projection of v - floor. Same as ``project(..., method="topdown")``.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "T"])
    >>> top_down(np.array([10.0, -3.0, 6.0, 8.0]), h).tolist()
    [10.0, 0.0, 4.0, 6.0]
    """
    from postdp.postprocess.projections import project

    return project(
        noisy, hierarchy, nonneg=nonneg, public=public, method="topdown", weights=weights
    )


def _top_down(
    Y: FloatArray, h: Hierarchy, w: FloatArray, pub: PublicNodes, *, nonneg: bool
) -> FloatArray:
    """Top-down on validated input: ``Y`` is (B, n) in node order."""
    lay = h.layout
    B, n = Y.shape
    Yl = Y[:, lay.order]
    fixed = pub.determined[lay.order]
    fixed_values = np.where(pub.mask, pub.values, pub.floor)[lay.order]
    floor = pub.floor[lay.order] if nonneg else np.zeros(n)
    inv = 1.0 / w[lay.order]
    X = np.empty_like(Yl)
    if fixed[0]:
        X[:, 0] = fixed_values[0]
    else:
        X[:, 0] = np.maximum(Yl[:, 0], floor[0]) if nonneg else Yl[:, 0]
    for d in range(h.n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        fam = lay.family[d]
        G = lay.parents[d].size
        kid_fixed = fixed[c0:c1]
        X[:, c0:c1] = np.where(kid_fixed, fixed_values[c0:c1], 0.0)
        # what the free children must share in each family: parent minus fixed children
        fixed_sum = np.bincount(
            fam, weights=np.where(kid_fixed, fixed_values[c0:c1], 0.0), minlength=G
        )
        share = X[:, lay.parents[d]] - fixed_sum  # (B, G)
        free = np.flatnonzero(~kid_fixed)
        if not free.size:
            continue
        f_fam = fam[free]
        y = Yl[:, c0 + free]
        f_inv = inv[c0 + free]
        group = (np.arange(B)[:, None] * G + f_fam[None, :]).ravel()
        if nonneg:
            lo = floor[c0 + free]
            target = share - np.bincount(f_fam, weights=lo, minlength=G)  # >= 0 up to rounding
            u = project_groups(
                (y - lo).ravel(),
                group,
                np.maximum(target, 0.0).ravel(),
                np.broadcast_to(f_inv, y.shape).ravel(),
            ).reshape(y.shape)
            X[:, c0 + free] = lo + u
        else:
            gap = np.bincount(group, weights=y.ravel(), minlength=B * G).reshape(B, G) - share
            total_inv = np.bincount(f_fam, weights=f_inv, minlength=G)
            X[:, c0 + free] = y - gap[:, f_fam] * f_inv / total_inv[f_fam]
    return X[:, lay.position]

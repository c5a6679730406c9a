"""Projection of many groups of values onto scaled simplices at once (private).

Each group g of entries u is projected onto {v >= 0, Σ v = t_g} in the weighted norm
Σ w (v - u)²: v = max(u - τ_g / w, 0) with τ_g chosen so the group sums to t_g. Michelot's
algorithm finds τ_g by fixed-point iteration: start with every entry active, set τ_g from the
active entries, drop the entries that fall below zero, and repeat. Entries never re-enter,
so it stops after at most (group size) rounds; each round is a few vectorised passes over the
groups that are still changing (Michelot 1986; Condat 2016 for the analysis).
"""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, IntArray


def project_groups(
    u: FloatArray, group: IntArray, target: FloatArray, inv_w: FloatArray | None = None
) -> FloatArray:
    """Project every group of ``u`` onto {v >= 0, Σ v = target[group]}.

    Parameters
    ----------
    u : ndarray, shape (m,)
    group : ndarray of int, shape (m,)
        Group of each entry, in ``range(len(target))``.
    target : ndarray, shape (G,)
        Nonnegative group totals.
    inv_w : ndarray, shape (m,), optional
        1 / weight of each entry (all ones when omitted).

    Returns
    -------
    ndarray, shape (m,)
    """
    G = target.size
    inv = np.ones_like(u) if inv_w is None else inv_w
    tau = np.zeros(G)
    alive = np.ones(u.size, dtype=bool)  # still active
    rows = np.arange(u.size)  # entries of groups still iterating
    while rows.size:
        g = group[rows]
        act = alive[rows]
        s_u = np.bincount(g[act], weights=u[rows][act], minlength=G)
        s_w = np.bincount(g[act], weights=inv[rows][act], minlength=G)
        tau_new = np.divide(s_u - target, s_w, out=np.zeros(G), where=s_w > 0)
        tau = np.where(s_w > 0, tau_new, tau)
        drop = act & (u[rows] - tau[g] * inv[rows] <= 0)
        if not drop.any():
            break
        alive[rows[drop]] = False
        changed = np.zeros(G, dtype=bool)
        changed[g[drop]] = True
        rows = rows[changed[g]]
    return np.where(alive, np.maximum(u - tau[group] * inv, 0.0), 0.0)

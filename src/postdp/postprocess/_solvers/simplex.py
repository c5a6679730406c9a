"""Projection of many families of values onto scaled simplices at once (private).

Each family g of entries u is projected onto {v >= 0, Σ v = t_g} in the weighted norm
Σ w (v - u)²: v = max(u - τ_g / w, 0) with τ_g chosen so the family sums to t_g. Michelot's
algorithm finds τ_g by fixed-point iteration: start with every entry active, set τ_g from the
active entries, drop the entries that fall to zero or below, repeat. Entries never re-enter,
so it stops after at most (family size) rounds, usually a handful; each round is a few
vectorised passes (Michelot 1986; Condat 2016 for the analysis).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray, IntArray


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

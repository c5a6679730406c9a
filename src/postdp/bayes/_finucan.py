"""Finucan's algorithm for a mode of the multinomial distribution, over a batch of problems."""

from __future__ import annotations

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, IntArray
from postdp.errors import ValidationError

__all__ = ["finucan_mode"]


def finucan_mode(m: ArrayLike, p: ArrayLike) -> IntArray:
    """A mode of the multinomial distribution MD(m, p), for every problem of a batch.

    Parameters
    ----------
    m : array_like of int, shape (...)
        Numbers of trials (>= 0).
    p : array_like, shape (..., S)
        Probabilities, or nonnegative weights (each row is normalised; a row of zeros is
        treated as uniform).

    Returns
    -------
    ndarray of int64, shape (..., S)
        Counts k with Σ k = m that maximise Π p_i^{k_i} / k_i!; categories with p_i = 0 get 0.

    Notes
    -----
    Seed [wang2021] §2.2 (Finucan 1964): start from
    k_i = ⌊(m + S/2) p_i⌋, then, while Σ k < m, add one to the category with the smallest
    (1 - f_i)/(k_i + 1), and while Σ k > m remove one from the category with the smallest
    f_i / k_i, where f_i = (m + S/2) p_i - k_i is kept up to date. At most S/2 steps are
    needed; each step runs on all problems of the batch at once. Ties go to the first
    category, so a problem with several modes gets one of them.

    Examples
    --------
    >>> finucan_mode(10, [0.5, 0.3, 0.2]).tolist()
    [5, 3, 2]
    >>> finucan_mode([11, 4], [[1, 10], [0, 3]]).tolist()
    [[1, 10], [0, 4]]
    """
    trials = _validation.integer_array("m", m)
    weights = _validation.real_array("p", p).astype(np.float64)
    if weights.ndim == 0:
        raise ValidationError("`p` must have at least one axis (the categories)")
    if (weights < 0).any():
        raise ValidationError("`p` must be nonnegative")
    if (trials < 0).any():
        raise ValidationError(f"`m` must be nonnegative; got {trials.min().item()}")
    S = weights.shape[-1]
    shape = np.broadcast_shapes(trials.shape, weights.shape[:-1])
    M = np.broadcast_to(trials, shape).reshape(-1)
    W = np.broadcast_to(weights, (*shape, S)).reshape(-1, S)
    total = W.sum(axis=1, keepdims=True)
    P = np.where(total > 0, W / np.where(total > 0, total, 1.0), 1.0 / S)
    scaled = (M[:, None] + S / 2.0) * P
    k = np.floor(scaled).astype(np.int64)
    f = scaled - k
    zero = P == 0
    for _ in range(S + 1):
        gap = M - k.sum(axis=1)
        if not gap.any():
            break
        up = np.flatnonzero(gap > 0)
        if up.size:
            q = np.where(zero[up], np.inf, (1.0 - f[up]) / (k[up] + 1))
            a = np.argmin(q, axis=1)
            k[up, a] += 1
            f[up, a] -= 1.0
        down = np.flatnonzero(gap < 0)
        if down.size:
            kd = k[down]
            q = np.where(kd > 0, f[down] / np.where(kd > 0, kd, 1), np.inf)
            a = np.argmin(q, axis=1)
            k[down, a] -= 1
            f[down, a] += 1.0
    out: IntArray = k.reshape(*shape, S)
    return out

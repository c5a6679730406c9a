"""Integrality: unbiased stochastic rounding, and rounding that keeps a hierarchy consistent."""

from __future__ import annotations

import numpy as np

from postdp import _rng, _validation
from postdp._typing import ArrayLike, IntArray, RNGLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["round_consistent", "stochastic_round"]


def stochastic_round(x: ArrayLike, *, rng: RNGLike = None) -> IntArray:
    """Round each value up with probability equal to its fractional part (unbiased).

    Parameters
    ----------
    x : array_like
        Finite values, any shape.
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    ndarray of int64, same shape
        ⌊x⌋ + 1 with probability x - ⌊x⌋, else ⌊x⌋; so E[result] = x. Integers come back
        unchanged.

    Notes
    -----
    Seed ``002_7dd7808a6059349a.txt`` eq. (28): rounding after post-processing keeps the
    allotments unbiased only if the rounding itself is unbiased.

    Examples
    --------
    >>> stochastic_round([1.0, 2.25, -0.5], rng=0).tolist()
    [1, 2, 0]
    """
    values = _validation.real_array("x", x)
    if values.dtype == np.int64:
        return values.astype(np.int64)  # a copy
    gen = _rng.as_generator(rng)
    low = np.floor(values)
    return (low + (gen.random(values.shape) < values - low)).astype(np.int64)


def round_consistent(
    values: ArrayLike, hierarchy: Hierarchy, *, rng: RNGLike = None, atol: float = 1e-6
) -> IntArray:
    """Round consistent real values to consistent integers, unbiasedly, top-down.

    Parameters
    ----------
    values : array_like, shape (..., n)
        Values in which every parent equals the sum of its children (to ``atol`` relative
        to the largest value), e.g. the output of :func:`postdp.project`; leading axes are
        draws.
    hierarchy : Hierarchy
    rng : int, numpy.random.Generator, SeedSequence or None
    atol : float, default 1e-6
        Tolerance of the consistency check, relative to max(1, max |values|).

    Returns
    -------
    ndarray of int64, same shape
        Every parent equals the sum of its children exactly, every entry is within 1 of its
        input (strictly, unless the input is an integer, which is kept), and E[result] =
        values.

    Raises
    ------
    ValidationError
        If the input is not consistent.

    Notes
    -----
    The root is rounded stochastically. Then, family by family and level by level, the
    children c_1..c_k of a parent already rounded to P are rounded systematically with one
    uniform U: c'_i = ⌊C_i + U⌋ - ⌊C_{i-1} + U⌋ with C_i the running sums. The children then
    sum to ⌊C_k + U⌋, so U is drawn uniformly from the part of [0, 1) that makes this equal
    to P; because P itself was rounded up with probability frac(C_k), U is uniform on [0, 1)
    overall, which makes every c'_i unbiased, and |c'_i - c_i| < 1 by construction.
    (Systematic rounding; seed ``002_7dd7808a6059349a.txt`` §6.3 on integral releases.)

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "T"])
    >>> out = round_consistent(np.array([10.0, 3.4, 3.3, 3.3]), h, rng=1)
    >>> int(out[0]) == int(out[1:].sum()), out.tolist()
    (True, [10, 4, 3, 3])
    """
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(hierarchy).__name__}")
    arr = _validation.real_array("values", values)
    n = hierarchy.n
    if arr.ndim == 0 or arr.shape[-1] != n:
        raise ValidationError(
            f"`values` must have shape (..., {n}) (one value per node); got shape {arr.shape}"
        )
    shape = arr.shape
    lay = hierarchy.layout
    X = arr.reshape(-1, n).astype(np.float64)[:, lay.order]
    B = X.shape[0]
    scale = max(1.0, float(np.abs(X).max(initial=0.0)))
    for d in range(hierarchy.n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        gap = X[:, lay.parents[d]] - np.add.reduceat(X[:, c0:c1], lay.starts[d], axis=1)
        if np.abs(gap).max(initial=0.0) > atol * scale:
            raise ValidationError(
                "`values` must be consistent (every parent = sum of its children) before "
                f"rounding; the largest gap is {np.abs(gap).max().item():g}"
            )
    gen = _rng.as_generator(rng)
    out = np.empty((B, n), dtype=np.int64)
    out[:, 0] = stochastic_round(X[:, 0], rng=gen)
    for d in range(hierarchy.n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        starts, sizes = lay.starts[d], lay.sizes[d]
        kids = X[:, c0:c1]
        running = np.cumsum(kids, axis=1)
        before = np.repeat(running[:, starts] - kids[:, starts], sizes, axis=1)
        cum = running - before  # running sums within each family
        total = cum[:, starts + sizes - 1]  # the family's real total (its parent's value)
        target = out[:, lay.parents[d]]
        frac = total - np.floor(total)
        up = target > np.floor(total) + 0.5  # the parent was rounded up
        # U uniform on [1 - frac, 1) if the parent went up, on [0, 1 - frac) otherwise
        u = gen.random(target.shape)
        U = np.where(up, 1.0 - frac + u * frac, u * (1.0 - frac))
        U_kids = np.repeat(U, sizes, axis=1)
        upper = np.floor(cum + U_kids)
        lower = np.floor(cum - kids + U_kids)
        rounded = (upper - lower).astype(np.int64)
        # guard against floating-point disagreement between a parent and its children's sum
        # (only when they straddle an integer by ~1e-12): put the residual on the last child
        residual = target - np.add.reduceat(rounded, starts, axis=1)
        if residual.any():
            rounded[:, starts + sizes - 1] += residual
        out[:, c0:c1] = rounded
    return out[:, lay.position].reshape(shape)

"""Consistent rounding of a hierarchy of counts, level by level (private).

The one-cell table's rounding: :func:`postdp.round` of a table with one detailed cell per
geounit, or of a hierarchy, is :func:`round_consistent` (public as
``postdp.postprocess.round_consistent``), vectorised over families and draws; tables with
more cells walk the circulation of :mod:`postdp.postprocess.rounding`.
"""

from __future__ import annotations

import numpy as np

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, IntArray, RNGLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["round_consistent"]

#: Fractions are quantised to multiples of 1/_Q so that family sums are exact in int64.
_Q = 1 << 36
#: Values this large have no fractional bits in float64; rounding them is meaningless.
_MAX_ABS = float(2**52)


def round_consistent(
    values: ArrayLike, hierarchy: Hierarchy, *, rng: RNGLike = None, atol: float = 1e-6
) -> IntArray:
    """Round consistent real values to consistent integers, unbiasedly, top-down.

    Parameters
    ----------
    values : array_like, shape (..., n)
        Values in which every parent equals the sum of its children (to ``atol`` relative
        to the largest value), e.g. the output of :func:`postdp.project`; leading axes are
        draws. Magnitudes must stay below 2**52 (where float64 still holds fractions).
    hierarchy : Hierarchy
    rng : int, numpy.random.Generator, SeedSequence or None
    atol : float, default 1e-6
        Tolerance of the consistency check, relative to max(1, max |values|).

    Returns
    -------
    ndarray of int64, same shape
        Every parent equals the sum of its children exactly; every entry is ⌊x⌋ or ⌈x⌉ of
        its input x (so within 1 of it, and an integer input is kept); and E[result] = x for
        consistent input, up to the quantisation of the fractional parts to multiples of
        2**-36.

    Raises
    ------
    ValidationError
        If the input is not consistent, holds magnitudes of 2**52 or more, or is so far from
        consistent that no rounding to ⌊x⌋ or ⌈x⌉ of every entry adds up.

    Notes
    -----
    First, bottom-up, every node gets the range of integers its subtree allows: [⌊x⌋, ⌈x⌉]
    intersected with [Σ low, Σ high] of its children (for exactly consistent input this is
    [⌊x⌋, ⌈x⌉]; float residue of a projection can pin a node to one value). The root is
    rounded up with probability equal to its fractional part. Then, family by family and
    level by level, the children of a parent already rounded to P are rounded systematically
    with one uniform U: child j goes up when ⌊(C_{j-1} + U)/Q⌋ < ⌊(C_j + U)/Q⌋, with C_j the
    running sums of the children's fractional parts quantised to integers q_j/Q (exact
    integer arithmetic, no floating-point running sums). The number of children that go up
    is ⌊(C_k + U)/Q⌋, so U is drawn uniformly from the part of [0, Q) that makes the family
    add up to P; because P itself went up with probability frac(C_k), U is uniform overall
    and every child goes up with probability q_j/Q (unbiased). A family whose fractional
    parts cannot add up to the parent (input consistent only to ``atol``) has its q_j
    rescaled to sum to the needed number of round-ups, which keeps every child at ⌊x⌋ or
    ⌈x⌉ and the family exact. (Systematic rounding; [fioretto2021] §6.3
    on integral releases.)

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "T"])
    >>> out = round_consistent(np.array([10.0, 3.4, 3.3, 3.3]), h, rng=1)
    >>> int(out[0]) == int(out[1:].sum()), bool(np.all(np.abs(out[1:] - [3.4, 3.3, 3.3]) < 1))
    (True, True)
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
    X: FloatArray = arr.reshape(-1, n)[:, lay.order].astype(np.float64, copy=False)
    if np.abs(X).max(initial=0.0) >= _MAX_ABS:
        raise ValidationError(
            "`values` must stay below 2**52 in magnitude to be rounded (float64 holds no "
            "fractional part beyond that)"
        )
    scale = max(1.0, float(np.abs(X).max(initial=0.0)))
    gap = float(lay.family_gaps(X).max(initial=0.0))
    if gap > atol * scale:
        raise ValidationError(
            "`values` must be consistent (every parent = sum of its children) before "
            f"rounding; the largest gap is {gap:g}"
        )
    floor = np.floor(X)
    low = floor.astype(np.int64)
    # q in [1, Q - 1] for a fractional entry (it can go either way), 0 for an integer
    frac = X - floor
    q = np.where(frac > 0, np.clip(np.rint(frac * _Q), 1, _Q - 1), 0).astype(np.int64)
    high = low + (q > 0)
    for d in range(hierarchy.n_levels - 2, -1, -1):  # bottom-up: ranges the subtrees allow
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        parents = lay.parents[d]
        low[:, parents] = np.maximum(
            low[:, parents], np.add.reduceat(low[:, c0:c1], lay.starts[d], axis=1)
        )
        high[:, parents] = np.minimum(
            high[:, parents], np.add.reduceat(high[:, c0:c1], lay.starts[d], axis=1)
        )
    if (low > high).any():
        raise ValidationError(
            "`values` are too far from consistent to round every entry to its floor or ceiling "
            "with parents equal to the sums of their children"
        )
    q = np.where(high > low, q, 0)  # pinned entries take no part in the draw
    gen = _rng.as_generator(rng)
    B = X.shape[0]
    out = np.empty((B, n), dtype=np.int64)
    out[:, 0] = low[:, 0] + (gen.integers(0, _Q, size=B) < q[:, 0])
    for d in range(hierarchy.n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        out[:, c0:c1] = _round_level(
            out[:, lay.parents[d]], low[:, c0:c1], q[:, c0:c1], lay.starts[d], lay.sizes[d], gen
        )
    return out[:, lay.position].reshape(shape)


def _round_level(
    target: IntArray,
    low: IntArray,
    q: IntArray,
    starts: IntArray,
    sizes: IntArray,
    gen: np.random.Generator,
) -> IntArray:
    """Round one level's families (rows = draws) so that each adds up to ``target``."""
    need = target - np.add.reduceat(low, starts, axis=1)  # how many children go up
    total = np.add.reduceat(q, starts, axis=1)
    base, rem = np.divmod(total, _Q)
    ok = (need == base) | ((need == base + 1) & (rem > 0))
    if not ok.all():
        q = q.copy()
        total = total.copy()
        for b, f in zip(*np.nonzero(~ok), strict=True):
            lo, hi = starts[f], starts[f] + sizes[f]
            q[b, lo:hi] = _rescale(q[b, lo:hi], int(need[b, f]))
            total[b, f] = int(need[b, f]) * _Q
        base, rem = np.divmod(total, _Q)
    # U uniform on [Q - rem, Q) when one more child must go up, else on [0, Q - rem)
    up = need > base
    u_low = np.where(up, _Q - rem, 0)
    u_high = np.where(up, _Q, _Q - rem)
    u = gen.integers(u_low, u_high)
    running = np.cumsum(q, axis=1)  # exact: integers
    offset = np.repeat(running[:, starts] - q[:, starts], sizes, axis=1)
    cum = running - offset  # running sums within each family, exact
    u_kids = np.repeat(u, sizes, axis=1)
    ups = (cum + u_kids) // _Q - (cum - q + u_kids) // _Q
    return low + ups


def _rescale(q: IntArray, need: int) -> IntArray:
    """Integer weights in [0, Q] near ``q`` that sum to ``need * Q`` (0 <= need <= #q > 0)."""
    free = q > 0
    out = np.zeros_like(q)
    if need <= 0:
        return out
    if need >= int(free.sum()):
        out[free] = _Q
        return out
    share = q[free].astype(np.float64)
    share = share / share.sum() * need * _Q
    # cap at Q and hand the excess to the others (water-filling), then fix the integer residue
    for _ in range(share.size):
        over = share > _Q
        if not over.any():
            break
        excess = float((share[over] - _Q).sum())
        share[over] = _Q
        room = ~over & (share < _Q)
        share[room] += excess * share[room] / share[room].sum()
    whole = np.minimum(np.floor(share).astype(np.int64), _Q)
    residue = need * _Q - int(whole.sum())
    order = np.argsort(-(share - whole), kind="stable")
    for i in order:
        if residue == 0:
            break
        step = min(residue, _Q - int(whole[i]))
        whole[i] += step
        residue -= step
    out[free] = whole
    return out

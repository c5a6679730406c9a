"""Replicate intervals: margins of error for any post-processing, from the release alone.

The released counts stand in for the truth; the design is run again on the stand-in ``R``
times (fresh noise, the same post-processing), and each count gets the basic bootstrap
interval released - quantiles of the replicate errors (replicate - stand-in). This is the
approach of the Census Bureau's 2020 uncertainty replicates. Only published numbers are
used: no privacy cost.

One method for both models of a release. A hierarchy's stand-in is its released leaves,
rounded and clipped at 0, with every parent the sum of its children; its R runs are drawn
as one batch. A table's stand-in is the released detailed cells of its leaf geounits,
rounded and clipped at 0 (every other count a sum of them, a public query taking the
stand-in's value); its runs are measured and post-processed one at a time, the errors kept
as float32, R x geounits x category nodes x 4 bytes (50 replicates of the Pennsylvania
block-group P1 table: about 195 MB).
"""

from __future__ import annotations

import numpy as np

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, FloatArray, NumArray, RNGLike
from postdp.analysis.design import ReleaseDesign
from postdp.errors import ValidationError
from postdp.tables import Table, category_matrix, measure

__all__ = ["replicate_intervals", "replicate_tail"]


def replicate_intervals(
    released: ArrayLike,
    design: ReleaseDesign,
    *,
    replicates: int = 200,
    level: float = 0.9,
    secure: bool = False,
    rng: RNGLike = None,
    adjust: bool = False,
) -> ConfidenceInterval:
    """Replicate intervals around released counts, for any post-processing chain.

    Parameters
    ----------
    released : array_like, shape (..., n) or (..., geography.n, categories.n)
        Released counts of the design's hierarchy, or of every (geounit, category node) of
        a table design (as :meth:`ReleaseDesign.run` gives them); draws on leading axes are
        allowed.
    design : ReleaseDesign
        The design that produced them (mechanisms or workload, post-processing, public
        nodes or queries). A table's stand-in truth is its released leaf geounits'
        detailed cells, rounded and clipped at 0.
    replicates : int, default 200
        R, the number of re-runs. Memory: R x n x 8 bytes per released vector (tables: R x
        geounits x category nodes x 4 bytes).
    level : float, default 0.9
    secure : bool, default False
        Draw the replicate noise with OpenDP's samplers (the release path's hygiene: no
        numpy generator near a publication; ``rng`` must then be None).
    rng : int, numpy.random.Generator, SeedSequence or None
    adjust : bool, default False
        Correct for the finite number of replicates: with R of them an interval between
        the replicate errors' quantiles covers about (R - 1) / (R + 1) x ``level`` for a
        linear estimator (0.856 for R = 40 at 0.9); ``adjust`` widens the quantile levels
        so that it covers ``level`` (:func:`replicate_tail`).

    Returns
    -------
    ConfidenceInterval
        ``low`` and ``high`` of the shape of ``released``.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> d = ReleaseDesign(h, Geometric(1.0), "project-nonneg,round")
    >>> ci = replicate_intervals(d.run(rng=0)[0], d, replicates=100, rng=1)
    >>> bool((ci.low <= ci.high).all()), ci.level
    (True, 0.9)
    """
    if design.model == "table":
        return _table_intervals(
            released,
            design,
            replicates=replicates,
            level=level,
            secure=secure,
            rng=rng,
            adjust=adjust,
        )
    r = _validation.real_array("released", released).astype(np.float64)
    h = design.hierarchy
    if r.ndim == 0 or r.shape[-1] != h.n:
        raise ValidationError(f"`released` must have shape (..., {h.n}); got {r.shape}")
    R = _replicate_options(replicates, level, secure, rng)
    rows = r.reshape(-1, h.n)
    gen = None if secure else _rng.as_generator(rng)
    tail = replicate_tail(level, R, adjust=adjust)
    low, high = np.empty_like(rows), np.empty_like(rows)
    for i, row in enumerate(rows):
        stand_in = h.aggregate(np.where(h.is_leaf, np.maximum(np.rint(row), 0), 0).astype(np.int64))
        again = _rerun(design, stand_in, R, gen)
        q_low, q_high = np.quantile(again - stand_in, [tail, 1.0 - tail], axis=0)
        low[i], high[i] = row - q_high, row - q_low
    return ConfidenceInterval(low.reshape(r.shape), high.reshape(r.shape), level)


def _rerun(
    design: ReleaseDesign, truth: NumArray, R: int, gen: np.random.Generator | None
) -> FloatArray:
    """R runs of the design on ``truth``: numpy's generator, or OpenDP when ``gen`` is None."""
    if gen is not None:
        return np.asarray(design.run(truth, rng=gen, size=R), dtype=np.float64)
    h = design.hierarchy
    noisy = np.empty((R, h.n), dtype=design.noise_dtype())
    for d, nodes in enumerate(h.levels):
        m = design.per_level[d]
        noisy[:, nodes] = m.release(np.broadcast_to(truth[nodes], (R, nodes.size)).copy())
    if not design.steps:
        return noisy.astype(np.float64)
    return np.asarray(design.chain(truth)(noisy), dtype=np.float64)


def _table_intervals(
    released: ArrayLike,
    design: ReleaseDesign,
    *,
    replicates: int,
    level: float,
    secure: bool,
    rng: RNGLike,
    adjust: bool = False,
) -> ConfidenceInterval:
    """Replicate intervals for every count of a released table, shape (..., geography.n,
    categories.n): :func:`replicate_intervals` of a table :class:`ReleaseDesign`."""
    table, workload = design.table, design.workload
    assert table is not None and workload is not None  # a table design
    geo, cat = table.geography, table.categories
    r = _validation.real_array("released", released).astype(np.float64)
    if r.ndim < 2 or r.shape[-2:] != (geo.n, cat.n):
        raise ValidationError(
            f"`released` must have shape (..., {geo.n}, {cat.n}) (geounits x category "
            f"nodes); got {r.shape}"
        )
    R = _replicate_options(replicates, level, secure, rng)
    if design.projector is None:
        raise ValidationError("a design without post-processing has no released table to rerun")
    gen = None if secure else _rng.as_generator(rng)
    C = category_matrix(cat).astype(np.float64)
    tail = replicate_tail(level, R, adjust=adjust)
    rows = r.reshape(-1, geo.n, cat.n)
    low, high = np.empty_like(rows), np.empty_like(rows)
    for i, row in enumerate(rows):
        detailed = row[geo.leaves][:, cat.leaves]
        stand_in = Table(geo, cat, np.maximum(np.rint(detailed), 0).astype(np.int64))
        again = ReleaseDesign(
            stand_in, workload, design.postprocess, budget_scale=design.budget_scale
        )
        truth = np.asarray(stand_in.counts(), dtype=np.float64)
        errors = np.empty((R, geo.n, cat.n), dtype=np.float32)
        for k in range(R):
            measured = measure(
                stand_in, workload, secure=secure, rng=gen, size=None if secure else 1
            )
            est = again.solve(measured, rng=gen)
            errors[k] = np.reshape(est, (-1, *est.shape[-2:]))[0] @ C.T - truth
        q_low, q_high = np.quantile(errors, [tail, 1.0 - tail], axis=0)
        low[i], high[i] = row - q_high, row - q_low
    return ConfidenceInterval(low.reshape(r.shape), high.reshape(r.shape), level)


def replicate_tail(level: float, replicates: int, *, adjust: bool) -> float:
    """The lower quantile level of the replicate errors for a two-sided ``level`` interval.

    Without ``adjust``: (1 - level) / 2. An interval between numpy's (linearly interpolated)
    quantiles of R replicate errors covers about (R - 1) / (R + 1) x (1 - 2 tail) for a
    linear estimator (the k-th of R order statistics sits at the k / (R + 1) quantile on
    average); ``adjust`` widens the tails' gap so that this equals ``level`` (capped at
    the extreme replicates when R is too small for ``level``)."""
    if not adjust:
        return (1.0 - level) / 2.0
    R = replicates
    return max(0.0, (1.0 - level * (R + 1) / (R - 1)) / 2.0)


def _replicate_options(replicates: int, level: float, secure: bool, rng: RNGLike) -> int:
    """Check the options every replicate method shares; return R."""
    (R,) = _validation.size_tuple(replicates)
    if R < 10:
        raise ValidationError(f"`replicates` must be at least 10; got {replicates}")
    if not 0.0 < level < 1.0:
        raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
    if secure and rng is not None:
        raise ValidationError("`rng` seeds the study path only; leave it out with `secure`")
    return R

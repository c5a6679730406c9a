"""Replicate intervals for a released table, for any table post-processing ((P), (P+),
top-down, each optionally rounded).

The table case of :func:`postdp.analysis.replicate_intervals`: the released detailed
cells of the leaf geounits, rounded and clipped at 0, stand in for the truth (every other
count is a sum of them, and a public query takes the stand-in's value); the workload is
measured on the stand-in ``R`` times, post-processed as the release was, and each (geounit,
category node) gets the basic bootstrap interval released − quantiles of the replicate
errors. Only published numbers are used: no privacy cost.

Memory: the replicate errors are kept as float32, R x geounits x category nodes x 4 bytes
(50 replicates of the Pennsylvania block-group P1 table: about 195 MB).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, RNGLike
from postdp.errors import ValidationError
from postdp.postprocess.estimators import PROJECT
from postdp.tables import Table, Workload, category_matrix, measure

if TYPE_CHECKING:
    from postdp.analysis.table_design import TableDesign

__all__ = ["design_replicate_intervals", "replicate_tail", "table_replicate_intervals"]


def table_replicate_intervals(
    released: ArrayLike,
    table: Table,
    workload: Workload,
    *,
    postprocess: str = PROJECT.name,
    replicates: int = 50,
    level: float = 0.9,
    secure: bool = False,
    rng: RNGLike = None,
) -> ConfidenceInterval:
    """Replicate intervals for every count of a released table (deprecated spelling).

    Same as :func:`postdp.analysis.replicate_intervals` with
    ``TableDesign(table, workload, postprocess)``.

    Parameters
    ----------
    released : array_like, shape (geography.n, categories.n)
    table : Table
    workload : Workload
    postprocess : str, default "project"
        Any table post-processing (:func:`~postdp.postprocess.parse_table_method`: a
        table estimator, optionally followed by ``",round"``).
    replicates, level, secure, rng
        As in :func:`postdp.analysis.replicate_intervals`.

    Returns
    -------
    ConfidenceInterval
    """
    from postdp.analysis.table_design import TableDesign

    design = TableDesign(table, workload, postprocess)
    return design_replicate_intervals(
        released, design, replicates=replicates, level=level, secure=secure, rng=rng
    )


def design_replicate_intervals(
    released: ArrayLike,
    design: TableDesign,
    *,
    replicates: int,
    level: float,
    secure: bool,
    rng: RNGLike,
    adjust: bool = False,
) -> ConfidenceInterval:
    """Replicate intervals for every count of a released table, shape (..., geography.n,
    categories.n): the body of ``replicate_intervals`` for a :class:`TableDesign`."""
    table = design.table
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
        again = replace(design, table=stand_in)
        truth = np.asarray(stand_in.counts(), dtype=np.float64)
        errors = np.empty((R, geo.n, cat.n), dtype=np.float32)
        for k in range(R):
            measured = measure(
                stand_in, design.workload, secure=secure, rng=gen, size=None if secure else 1
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

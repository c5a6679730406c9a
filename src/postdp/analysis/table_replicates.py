"""Replicate intervals for a released table (any post-processing: (P) or top-down).

The table analogue of :func:`postdp.analysis.replicate_intervals`: the released detailed
cells of the leaf geounits, rounded and clipped at 0, stand in for the truth (every other
count is a sum of them, and a public query takes the stand-in's value); the workload is
measured on the stand-in ``R`` times, post-processed as the release was, and each (geounit,
category node) gets the basic bootstrap interval released − quantiles of the replicate
errors. Only published numbers are used: no privacy cost.

Memory: the replicate errors are kept as float32, R x geounits x category nodes x 4 bytes
(50 replicates of the Pennsylvania block-group P1 table: about 195 MB).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, RNGLike
from postdp.errors import ValidationError
from postdp.tables import Table, Workload

__all__ = ["table_replicate_intervals"]


def table_replicate_intervals(
    released: ArrayLike,
    table: Table,
    workload: Workload,
    *,
    postprocess: Literal["project", "topdown"] = "project",
    replicates: int = 50,
    level: float = 0.9,
    secure: bool = False,
    rng: RNGLike = None,
) -> ConfidenceInterval:
    """Replicate intervals for every count of a released table.

    Parameters
    ----------
    released : array_like, shape (geography.n, categories.n)
        The released table, every geounit and category node (rows in the order of
        ``geography.ids``).
    table : Table
        Supplies the geography and the category tree (its counts are not read).
    workload : Workload
        The release's workload.
    postprocess : {"project", "topdown"}
        The release's post-processing (``project_table`` or ``top_down_table``).
    replicates : int, default 50
        R (memory: R x geounits x category nodes x 4 bytes).
    level : float, default 0.9
    secure : bool, default False
        OpenDP noise for the replicates (``rng`` must then be None).
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    ConfidenceInterval
        ``low`` and ``high`` of the shape of ``released``.

    Examples
    --------
    >>> from postdp import Gaussian
    >>> from postdp.data import synthetic_table
    >>> from postdp.postprocess import project_table
    >>> from postdp.tables import Measurement, Query, Workload, measure
    >>> t = synthetic_table((2, 3), leaf_mean=200, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.5))
    ...               for d in range(3)])
    >>> full = project_table(measure(t, w, secure=False, rng=1, size=1))[0]
    >>> ci = table_replicate_intervals(full, t, w, replicates=20, rng=2)
    >>> ci.low.shape == full.shape and bool((ci.low <= ci.high).all())
    True
    """
    from postdp.postprocess import TableProjector, top_down_table
    from postdp.tables import category_matrix, measure

    geo, cat = table.geography, table.categories
    r = _validation.real_array("released", released).astype(np.float64)
    if r.shape != (geo.n, cat.n):
        raise ValidationError(
            f"`released` must have shape ({geo.n}, {cat.n}) (geounits x category nodes); "
            f"got {r.shape}"
        )
    R = _replicate_options(replicates, level, secure, rng)
    if postprocess not in ("project", "topdown"):
        raise ValidationError(f"`postprocess` must be 'project' or 'topdown'; got {postprocess!r}")
    C = category_matrix(cat)
    detailed = r[geo.leaves][:, cat.leaves]
    stand_in = Table(geo, cat, np.maximum(np.rint(detailed), 0).astype(np.int64))
    truth = np.asarray(stand_in.counts(), dtype=np.float64)
    projector = TableProjector(stand_in, workload) if postprocess == "project" else None
    gen = None if secure else _rng.as_generator(rng)
    errors = np.empty((R, geo.n, cat.n), dtype=np.float32)
    for k in range(R):
        measured = measure(stand_in, workload, secure=secure, rng=gen, size=None if secure else 1)
        est = projector(measured) if projector is not None else top_down_table(measured)
        errors[k] = np.reshape(est, (-1, *est.shape[-2:]))[0] @ C.T - truth
    tail = (1.0 - level) / 2.0
    q_low, q_high = np.quantile(errors, [tail, 1.0 - tail], axis=0)
    return ConfidenceInterval(r - q_high, r - q_low, level)


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

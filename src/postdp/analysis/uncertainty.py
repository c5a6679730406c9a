"""Margins of error computed from a release alone, and their coverage audited by simulation.

Two interval methods for hierarchies:

- ``"gls"``: exact normal intervals for (P) when it is least squares (equal noise per level,
  or inverse-variance weights), from the design alone
  (:func:`postdp.postprocess.variances.hierarchy_variances`).
- ``"replicates"``: for any post-processing chain ((P+), top-down, clamp, ramps, rounding;
  :func:`~postdp.analysis.replicates.replicate_intervals`). The released counts stand in
  for the truth: the design is run again on them ``R`` times (fresh noise, the same
  post-processing), and the replicate errors e* = replicate - stand-in give the basic
  bootstrap interval [r - q(1 - a/2), r - q(a/2)] around each
  released count r. This is the approach of the Census Bureau's 2020 uncertainty
  replicates. Centring on the replicate errors subtracts the chain's bias at the stand-in,
  which corrects the bias of (P+) and clamping ([zhu2021] Thm 9, [mcglinchey2020] §3) as far as the
  bias at the released value equals the bias at the truth; where the bias changes fast with
  the count (counts within a few noise scales of 0) the intervals under- or over-cover, and
  :func:`interval_coverage` measures by how much.

The replicates touch only published numbers, so they cost no privacy. The stand-in truth
is the released leaves rounded and clipped at 0, with every parent the sum of its children
(a consistent, nonnegative, integral input the design accepts).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, FloatArray, IntArray, RNGLike
from postdp.analysis.cell_metrics import SIZE_BINS
from postdp.analysis.design import ReleaseDesign
from postdp.analysis.replicates import replicate_intervals
from postdp.errors import ValidationError
from postdp.mechanisms import Geometric, Laplace
from postdp.postprocess.estimators import PROJECT

__all__ = [
    "gls_intervals",
    "interval_coverage",
    "ps_intervals",
]

Method = Literal["gls", "replicates", "posterior"]


def gls_intervals(
    released: ArrayLike, design: ReleaseDesign, *, level: float = 0.9
) -> ConfidenceInterval:
    """Exact normal intervals released ± z·sd of (P) when it is least squares.

    Parameters
    ----------
    released : array_like, shape (..., n)
    design : ReleaseDesign
        Post-processing ``project`` alone, with equal noise per level or
        ``weights="inverse-variance"``, public nodes at most the root.
    level : float, default 0.9

    Returns
    -------
    ConfidenceInterval

    Examples
    --------
    >>> from postdp import Laplace, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> d = ReleaseDesign(h, Laplace(1.0), "project")
    >>> ci = gls_intervals([30.0, 10.0, 20.0], d)
    >>> bool((ci.high > ci.low).all()), ci.level
    (True, 0.9)
    """
    from scipy import stats

    from postdp.hierarchy import resolve_public
    from postdp.postprocess.variances import hierarchy_variances

    h = design.hierarchy
    if [str(s) for s in design.steps] != [PROJECT.name]:
        raise ValidationError(f"GLS intervals are for the post-processing {PROJECT.name!r} alone")
    equal = len({m.variance() for m in design.per_level}) == 1
    if design.weights != "inverse-variance" and not equal:
        raise ValidationError(
            "the levels' noise differs: (P) is least squares only with inverse-variance weights"
        )
    public_root = False
    if design.public is not None:
        mask = resolve_public(h, public=design.public).mask
        if mask.sum() != 1 or not mask[h.root]:
            raise ValidationError("GLS intervals allow a public root only")
        public_root = True
    if not 0.0 < level < 1.0:
        raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
    r = _validation.real_array("released", released).astype(np.float64)
    z = float(stats.norm.isf((1.0 - level) / 2.0))
    half = z * np.sqrt(hierarchy_variances(h, design.per_level, public_root=public_root))
    return ConfidenceInterval(r - half, r + half, level)


def ps_intervals(
    released: ArrayLike, mechanism: Laplace, *, level: float = 0.9
) -> ConfidenceInterval:
    """Exact intervals for (P_S) estimates: n components projected onto a public total.

    Each released component's error has the law of [zhu2021] Thm 12 (a Laplace noise minus
    the mean of n of them; :func:`postdp.analysis.ps_error_cdf`), symmetric about 0, so the
    interval is released ± its (1 + level)/2 quantile: exact, not a normal approximation
    (the law has Laplace-like tails for small n).

    Parameters
    ----------
    released : array_like, shape (..., n)
        ``project_sum(noisy, total)`` of n >= 2 components (equal weights, no bound).
    mechanism : Laplace
        The noise of every component.
    level : float, default 0.9

    Returns
    -------
    ConfidenceInterval

    Examples
    --------
    >>> from postdp import Laplace
    >>> ci = ps_intervals([10.0, 20.0, 30.0], Laplace.from_scale(2.0))
    >>> float(round(ci.high[0] - 10.0, 3)) == float(round(20.0 - ci.low[1], 3))
    True
    """
    from scipy import optimize

    from postdp.analysis.theory import ps_error_cdf

    r = _validation.real_array("released", released).astype(np.float64)
    if r.ndim == 0 or r.shape[-1] < 2:
        raise ValidationError(f"`released` needs n >= 2 components on its last axis; got {r.shape}")
    if not 0.0 < level < 1.0:
        raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
    n = r.shape[-1]
    target = (1.0 + level) / 2.0
    scale = mechanism.scale if isinstance(mechanism, Laplace) else 1.0
    q = optimize.brentq(
        lambda x: float(ps_error_cdf(x, n, mechanism)) - target, 0.0, 40.0 * scale, xtol=1e-10
    )
    return ConfidenceInterval(r - q, r + q, level)


def interval_coverage(
    design: ReleaseDesign,
    *,
    method: Method = "replicates",
    n_draws: int | None = None,
    replicates: int | None = None,
    level: float = 0.9,
    bins: tuple[int, ...] = SIZE_BINS,
    rng: RNGLike = None,
    adjust: bool = False,
) -> pd.DataFrame:
    """Actual coverage and mean width of an interval method, with the truth known.

    Each of ``n_draws`` releases of the design (study path) gets its intervals from the
    released counts alone; coverage is the share of intervals that contain the true count.
    One function for both models: a hierarchy's design counts its nodes, a table's design
    (``ReleaseDesign(table, workload, postprocess)``, a table :class:`ReleaseDesign`) every count
    of every geounit and category node, those a public query fixes excepted.

    Parameters
    ----------
    design : ReleaseDesign
        Its hierarchy's (or table's) counts are the truth.
    method : {"replicates", "gls", "posterior"}
        ``"gls"``: released ± z·sd of (P), exact (the design's post-processing must be
        ``project`` alone); ``"replicates"``: :func:`replicate_intervals` around each
        release; ``"posterior"`` (hierarchies): the design's noise (geometric, no steps)
        released with [wang2021]'s rule (``bayes_release_hierarchy``) and its
        family-by-family credible intervals.
    n_draws : int, optional
        Releases drawn: default 200 for a hierarchy, 16 for a table (memory: one draw's
        table at a time).
    replicates : int, optional
        R per release (``"replicates"`` only; default 200 for a hierarchy, 30 for a
        table); the cost is n_draws x R runs.
    level : float, default 0.9
    bins : tuple of int
        Lower edges of the true-count size bins.
    rng : int, numpy.random.Generator, SeedSequence or None
    adjust : bool, default False
        The finite-replicate correction of :func:`replicate_intervals`.

    Returns
    -------
    pandas.DataFrame
        One row per (level, size bin) and one ``"all"`` row per level: ``nodes`` (a
        table's: ``cells``, the (geounit, category node) counts), ``coverage``, its Monte
        Carlo standard error ``coverage_se`` (from the spread of the per-draw coverage),
        ``nominal`` and ``mean_width``.

    Examples
    --------
    >>> from postdp import Laplace, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [300, 100, 200])
    >>> cov = interval_coverage(ReleaseDesign(h, Laplace(1.0), "project"), method="gls",
    ...                         n_draws=400, rng=0)
    >>> list(cov.columns)[:4]
    ['level', 'size', 'nodes', 'coverage']
    >>> from postdp import Gaussian
    >>> from postdp.tables import Measurement, Query, Workload
    >>> from postdp.data import synthetic_table
    >>> t = synthetic_table((3, 4), leaf_mean=200, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.5))
    ...               for d in range(3)])
    >>> cov = interval_coverage(ReleaseDesign(t, w, "project"), method="gls", n_draws=4,
    ...                         rng=1)
    >>> cov.loc[cov["size"] == "all", "level"].tolist()
    [0, 1, 2]
    """
    if method not in ("gls", "replicates", "posterior"):
        raise ValidationError(
            f"`method` must be 'gls', 'replicates' or 'posterior'; got {method!r}"
        )
    if design.model == "table":
        return _table_coverage(
            design, method=method, n_draws=16 if n_draws is None else n_draws,
            replicates=30 if replicates is None else replicates, level=level, bins=bins,
            rng=rng, adjust=adjust,
        )  # fmt: skip
    n_draws = 200 if n_draws is None else n_draws
    replicates = 200 if replicates is None else replicates
    if method == "posterior" and design.steps:
        raise ValidationError(
            "`method='posterior'` releases with [wang2021]'s rule: give a design without "
            "post-processing steps (geometric noise)"
        )
    (N,) = _validation.size_tuple(n_draws)
    if N < 2:
        raise ValidationError(f"`n_draws` must be at least 2; got {n_draws}")
    h = design.hierarchy
    truth = design._truth(None).astype(np.float64)
    gen = _rng.as_generator(rng)
    covered = np.zeros((N, h.n), dtype=bool)
    width = np.zeros(h.n)
    for k in range(N):
        released = np.asarray(design.run(rng=gen)[0], dtype=np.float64)
        if method == "posterior":
            from postdp.bayes import bayes_release_hierarchy, hierarchy_credible_intervals

            mechs = [m for m in design.per_level if isinstance(m, Geometric)]
            if len(mechs) != h.n_levels:
                raise ValidationError("`method='posterior'` needs geometric noise on every level")
            bayes = bayes_release_hierarchy(released.astype(np.int64), h, mechs)
            ci = hierarchy_credible_intervals(bayes, h, mechs, level=level, rng=gen)
        elif method == "gls":
            ci = gls_intervals(released, design, level=level)
        else:
            ci = replicate_intervals(
                released, design, replicates=replicates, level=level, rng=gen, adjust=adjust
            )
        covered[k] = (ci.low <= truth) & (truth <= ci.high)
        width += ci.high - ci.low
    width /= N
    return _coverage_frame(covered, width, truth, list(h.levels), level, bins, "nodes")


def _table_coverage(
    design: ReleaseDesign,
    *,
    method: str,
    n_draws: int,
    replicates: int,
    level: float,
    bins: tuple[int, ...],
    rng: RNGLike,
    adjust: bool,
) -> pd.DataFrame:
    """:func:`interval_coverage` of a table's design: every count of every geounit and
    category node (those a public query fixes excepted), ``"gls"`` or ``"replicates"``."""
    from scipy import stats

    from postdp.postprocess import TableProjector
    from postdp.tables import expand, measure

    if method not in ("gls", "replicates"):
        raise ValidationError(f"`method` must be 'gls' or 'replicates' for a table; got {method!r}")
    if method == "gls" and (design.step != PROJECT.name or design.rounded):
        raise ValidationError(
            f"GLS intervals are for postprocess={PROJECT.name!r}; got {design.postprocess!r}"
        )
    (N,) = _validation.size_tuple(n_draws)
    if N < 2:
        raise ValidationError(f"`n_draws` must be at least 2; got {n_draws}")
    if not 0.0 < level < 1.0:
        raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
    if design.projector is None:
        raise ValidationError("the design's postprocess must release a table (not 'none')")
    if design.budget_scale is not None:
        raise ValidationError("coverage of a design with `budget_scale` is not supported")
    table, workload = design.table, design.workload
    assert table is not None and workload is not None  # a table design
    geo, cat = table.geography, table.categories
    sd = np.sqrt(TableProjector(table, workload).variances())
    z = float(stats.norm.isf((1.0 - level) / 2.0))
    truth = np.asarray(table.counts(), dtype=np.float64)
    free = sd > 0
    gen = _rng.as_generator(rng)
    covered = np.zeros((N, int(free.sum())), dtype=bool)
    width = np.zeros(int(free.sum()))
    for k in range(N):
        measured = measure(table, workload, secure=False, rng=gen, size=1)
        est = design.solve(measured, rng=gen)[0]
        full = expand(est, geo, cat)
        if method == "gls":
            low, high = full - z * sd, full + z * sd
        else:
            ci = replicate_intervals(
                full, design, replicates=replicates, level=level, rng=gen, adjust=adjust
            )
            low, high = ci.low, ci.high
        covered[k] = ((low <= truth) & (truth <= high))[free]
        width += (high - low)[free] / N
    level_of = np.broadcast_to(geo.depth[:, None], truth.shape)[free]
    groups = [np.flatnonzero(level_of == d) for d in range(geo.n_levels)]
    return _coverage_frame(covered, width, truth[free], groups, level, bins, "cells")


def _coverage_frame(
    covered: npt.NDArray[np.bool_],
    width: FloatArray,
    truth: FloatArray,
    levels: list[IntArray],
    nominal: float,
    bins: tuple[int, ...],
    unit: str,
) -> pd.DataFrame:
    """Coverage (with its SE from the per-draw spread) and mean width per level and bin."""
    N = covered.shape[0]
    edges = np.asarray(bins)
    size_bin = np.searchsorted(edges, truth, side="right") - 1
    labels = [
        f"{lo:,}-{edges[i + 1] - 1:,}" if i + 1 < edges.size else f"{lo:,}+"
        for i, lo in enumerate(edges)
    ]
    rows = []
    for d, members_all in enumerate(levels):
        groups = [("all", members_all)] + [
            (labels[b], members_all[size_bin[members_all] == b]) for b in range(edges.size)
        ]
        for label, members in groups:
            if members.size == 0:
                continue
            per_draw = covered[:, members].mean(axis=1)
            rows.append(
                {
                    "level": d,
                    "size": label,
                    unit: int(members.size),
                    "coverage": float(per_draw.mean()),
                    "coverage_se": float(per_draw.std(ddof=1) / math.sqrt(N)),
                    "nominal": nominal,
                    "mean_width": float(width[members].mean()),
                }
            )
    return pd.DataFrame(rows)

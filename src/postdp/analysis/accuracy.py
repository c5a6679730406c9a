"""The accuracy study of a release design (study path): every estimator on the same noisy
measurements, draw after draw, in the Census Bureau's yardsticks with Monte Carlo errors.

:func:`accuracy_study` draws ``draws`` independent measurement sets of a workload on a
synthetic (or otherwise known) truth, runs every chosen estimator of
:func:`postdp.postprocess.estimators` on each set, and scores every release with
:func:`postdp.analysis.census_metrics` (by query, geographic level and bin of true total
population) and, when asked, the reliability threshold
(:func:`postdp.analysis.reliability_threshold`). The result, :class:`AccuracyStudy`, keeps
one row of metrics per (estimator, draw, query, level, size bin); its
:meth:`~AccuracyStudy.summary` gives each metric's mean over the draws with its Monte Carlo
standard error (sample sd / sqrt(draws)), and :meth:`~AccuracyStudy.differences` each
estimator's paired difference to a reference estimator with its standard error: the draws
are shared, so the difference is far more precise than the two means.

Draws are independent and each has its own streams: draw ``r`` measures with
``SeedSequence(rng).spawn(draws)[r].spawn(1 + E)[0]`` and estimator ``k`` (of ``E``) rounds
with child ``1 + k``, and a DHC study's PL94 release to hold (``held``, a callable) is drawn
from child ``1 + E``, so a draw's numbers do not depend on the others (a study can be
extended or split). Memory: one draw's measurements, one release at a time and the metric
rows (a few hundred per draw and estimator), not the draws' releases.

Every number here is a study of a known truth; nothing is published.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike, RNGLike
from postdp.analysis.cell_metrics import SIZE_BINS
from postdp.analysis.census_metrics import (
    ReliabilityThreshold,
    census_metrics,
    reliability_threshold,
    threshold_of_bins,
)
from postdp.analysis.design import ReleaseDesign
from postdp.errors import ValidationError
from postdp.tables import CountBounds, Table, Workload, measure
from postdp.tables.schema import Schema

__all__ = ["METRICS", "AccuracyStudy", "accuracy_study"]

#: The metrics of :func:`~postdp.analysis.census_metrics` a study averages over draws
#: (``rmse`` is averaged as its square, ``mse``).
METRICS = ("mae", "mse", "mean_error", "malpe", "mape", "median_ape", "share_ape_over_10", "tvd")
_KEYS = ["query", "level", "size"]


@dataclass(frozen=True)
class AccuracyStudy:
    """The results of :func:`accuracy_study`.

    Attributes
    ----------
    per_draw : pandas.DataFrame
        One row per (estimator, draw, query, level, size): ``geounits``, ``counts`` and the
        :data:`METRICS` of that draw's release.
    reliability : dict of str to ReliabilityThreshold
        Per estimator, the threshold of the bins pooled over every draw (empty when no
        reliability level was asked for).
    reference : str or None
        The estimator :meth:`differences` compares the others with.

    Examples
    --------
    >>> frame = pd.DataFrame({"estimator": ["a", "a", "b", "b"], "draw": [0, 1, 0, 1],
    ...     "query": "total", "level": "0", "size": "0+", "geounits": 1, "counts": 1,
    ...     "mae": [1.0, 3.0, 2.0, 6.0], "mse": [1.0, 9.0, 4.0, 36.0]})
    >>> s = AccuracyStudy(frame, {}, "a")
    >>> s.summary()[["estimator", "mae", "mae_se", "rmse"]].to_numpy().tolist()
    [['a', 2.0, 1.0, 2.23606797749979], ['b', 4.0, 2.0, 4.47213595499958]]
    >>> s.differences()[["estimator", "mae", "mae_se"]].to_numpy().tolist()
    [['b', 2.0, 1.0]]
    """

    per_draw: pd.DataFrame
    reliability: dict[str, ReliabilityThreshold]
    reference: str | None

    @property
    def estimators(self) -> list[str]:
        """The estimators, in the order given."""
        return list(dict.fromkeys(self.per_draw["estimator"]))

    @property
    def draws(self) -> int:
        """The number of draws."""
        return int(self.per_draw["draw"].nunique())

    def _metrics(self, frame: pd.DataFrame) -> list[str]:
        return [m for m in METRICS if m in frame.columns]

    def _rows(self, sizes: bool) -> pd.DataFrame:
        """The per-draw rows, or with ``sizes=False`` each draw's rows of a level pooled over
        its size bins (the count-weighted ``mae``, ``mse`` and ``mean_error``; size
        ``"all"``)."""
        if sizes:
            return self.per_draw
        frame = self.per_draw
        pooled = [m for m in ("mae", "mse", "mean_error") if m in frame.columns]
        w = frame["counts"].to_numpy(dtype=float)
        weighted = frame[pooled].mul(w, axis=0).assign(geounits=frame["geounits"], counts=w)
        keys = [frame[k] for k in ("estimator", "draw", "query", "level")]
        out = weighted.groupby(keys, sort=False).sum()
        out[pooled] = out[pooled].div(out["counts"], axis=0)
        out["counts"] = out["counts"].astype(np.int64)
        return out.reset_index().assign(size="all")

    def summary(self, *, sizes: bool = True) -> pd.DataFrame:
        """Each metric's mean over the draws and its Monte Carlo standard error, per
        estimator, query, level and size bin.

        Parameters
        ----------
        sizes : bool, default True
            False: each level's size bins pooled first, draw by draw (``mae``, ``mse``,
            ``rmse`` and ``mean_error`` only; size ``"all"``).

        Returns
        -------
        pandas.DataFrame
            ``estimator``, ``query``, ``level``, ``size``, ``geounits``, ``counts``, then
            for each metric ``m`` of :data:`METRICS` its mean ``m`` and ``m_se`` (sd over
            the draws / sqrt(draws); NaN with one draw), and ``rmse`` = sqrt(mean ``mse``)
            with ``rmse_se`` = ``mse_se`` / (2 ``rmse``) (the delta method). Draws where a
            metric is undefined (``tvd`` of a query whose groups overlap) are left out of
            its mean.
        """
        keys = ["estimator", *_KEYS]
        rows = self._rows(sizes)
        grouped = rows.groupby(keys, sort=False)
        out = grouped[["geounits", "counts"]].first()
        for m in self._metrics(rows):
            col = grouped[m]
            out[m] = col.mean()
            out[f"{m}_se"] = col.std(ddof=1) / np.sqrt(col.count())
        if "mse" in out:
            out["rmse"] = np.sqrt(out["mse"])
            with np.errstate(divide="ignore", invalid="ignore"):
                out["rmse_se"] = out["mse_se"] / (2.0 * out["rmse"])
        return out.reset_index()

    def differences(self, reference: str | None = None, *, sizes: bool = True) -> pd.DataFrame:
        """Each estimator's paired difference to ``reference`` (estimator - reference), per
        query, level and size bin: the mean over the draws of the per-draw differences,
        with its standard error and a 95% interval.

        Parameters
        ----------
        reference : str, optional
            Default: the study's :attr:`reference`.
        sizes : bool, default True
            As for :meth:`summary`.

        Returns
        -------
        pandas.DataFrame
            ``estimator``, ``reference``, ``query``, ``level``, ``size``, and for each metric
            ``m``: ``m`` (the mean difference), ``m_se``, ``m_lo`` and ``m_hi`` (mean -+ 1.96
            SE). A negative difference of an error metric favours ``estimator``.
        """
        ref = reference if reference is not None else self.reference
        if ref is None or ref not in self.estimators:
            raise ValidationError(f"`reference` must be one of {self.estimators}; got {ref!r}")
        rows = self._rows(sizes)
        metrics = self._metrics(rows)
        base = rows[rows["estimator"] == ref]
        base = base.set_index(["draw", *_KEYS])[metrics]
        frames = []
        for name in self.estimators:
            if name == ref:
                continue
            ours = rows[rows["estimator"] == name]
            diff = ours.set_index(["draw", *_KEYS])[metrics] - base
            grouped = diff.groupby(level=_KEYS, sort=False)
            out = pd.DataFrame(index=grouped.size().index)
            for m in metrics:
                mean = grouped[m].mean()
                se: pd.Series = grouped[m].std(ddof=1) / np.sqrt(grouped[m].count())
                out[m], out[f"{m}_se"] = mean, se
                out[f"{m}_lo"], out[f"{m}_hi"] = mean - 1.96 * se, mean + 1.96 * se
            frames.append(out.reset_index().assign(estimator=name, reference=ref))
        if not frames:
            return pd.DataFrame(columns=["estimator", "reference", *_KEYS])
        frame = pd.concat(frames, ignore_index=True)
        first = ["estimator", "reference", *_KEYS]
        return frame[first + [c for c in frame.columns if c not in first]]

    def tally(self, reference: str | None = None) -> pd.DataFrame:
        """Per estimator and metric, how many (query, level, size) cells favour it, how many
        the reference, and how many chance alone would flag.

        Each cell is one paired comparison over the draws (the cells where both estimators
        are exact in every draw are left out). For the error metrics (MAE, MSE, MAPE,
        median APE, the share over 10%, TVD) an estimator is ``worse`` in a cell when the
        95% interval of its paired difference lies above 0, ``better`` when below. For the
        signed ones (``mean_error``, ``malpe``: bias) it is worse when its mean is the
        farther from 0 and the paired difference points that way at 95%. With no true
        difference, each side flags about 2.5% of the cells: ``chance`` is that number and
        ``p_worse`` the probability of at least ``worse`` flags by chance alone
        (binomial); a study compares many cells, so a few flags are expected.

        Parameters
        ----------
        reference : str, optional
            Default: the study's :attr:`reference`.

        Returns
        -------
        pandas.DataFrame
            ``estimator``, ``reference``, ``metric``, ``cells``, ``better``, ``worse``,
            ``chance`` and ``p_worse``, one row per other estimator and metric.

        Examples
        --------
        >>> frame = pd.DataFrame({"estimator": ["a"] * 4 + ["b"] * 4, "draw": [0, 1] * 4,
        ...     "query": "total", "level": "0", "size": ["0+", "0+", "10+", "10+"] * 2,
        ...     "geounits": 1, "counts": 1,
        ...     "mae": [1.0, 1.2, 5.0, 5.0, 2.0, 2.1, 5.0, 5.0]})
        >>> t = AccuracyStudy(frame, {}, "a").tally()  # size 10+: the same in every draw
        >>> t[["metric", "cells", "better", "worse", "chance"]].to_numpy().tolist()
        [['mae', 1, 0, 1, 0.025]]
        """
        from scipy import stats

        ref = reference if reference is not None else self.reference
        if ref is None or ref not in self.estimators:
            raise ValidationError(f"`reference` must be one of {self.estimators}; got {ref!r}")
        rows = self.per_draw
        out = []
        for name in self.estimators:
            if name == ref:
                continue
            for metric in self._metrics(rows):
                wide = rows[rows["estimator"].isin([name, ref])].pivot_table(
                    index=["draw", *_KEYS], columns="estimator", values=metric, dropna=False
                )
                wide = wide.dropna()
                if name not in wide or ref not in wide:
                    continue
                diff = (wide[name] - wide[ref]).groupby(level=_KEYS, sort=False)
                mean, count = diff.mean(), diff.count()
                se: pd.Series = diff.std(ddof=1) / np.sqrt(count)
                keep = (count > 1) & ~((mean.abs() <= _EXACT) & (se <= _EXACT))
                mean, se = mean[keep], se[keep]
                if metric in _SIGNED:
                    means = wide.groupby(level=_KEYS, sort=False).mean()[keep]
                    ours, theirs = means[name].abs(), means[ref].abs()
                    worse = (ours > theirs) & (np.sign(means[name]) * mean > 1.96 * se)
                    better = (ours < theirs) & (-np.sign(means[ref]) * mean > 1.96 * se)
                else:
                    worse = mean - 1.96 * se > _EXACT
                    better = mean + 1.96 * se < -_EXACT
                n, k = int(keep.sum()), int(worse.sum())
                out.append(
                    {
                        "estimator": name,
                        "reference": ref,
                        "metric": metric,
                        "cells": n,
                        "better": int(better.sum()),
                        "worse": k,
                        "chance": 0.025 * n,
                        "p_worse": float(stats.binom.sf(k - 1, n, 0.025)) if n else 1.0,
                    }
                )
        columns = ["estimator", "reference", "metric", "cells", "better", "worse", "chance"]
        return pd.DataFrame(out, columns=[*columns, "p_worse"])


#: The metrics of a bias (a sign): worse is farther from 0, not larger.
_SIGNED = ("mean_error", "malpe")
#: A difference no larger than this is a difference of rounding (an invariant both hold).
_EXACT = 1e-9


def accuracy_study(
    table: Table,
    workload: Workload,
    estimators: Sequence[str],
    *,
    schema: Schema,
    draws: int,
    rng: RNGLike = None,
    queries: Sequence[str] | None = None,
    levels: Sequence[str] | None = None,
    bins: Sequence[int] = SIZE_BINS,
    reliability_level: int | None = None,
    reference: str | None = None,
    budget_scale: ArrayLike | None = None,
    bounds: Sequence[CountBounds] = (),
    held: ArrayLike | Callable[[np.random.SeedSequence], ArrayLike] | None = None,
    workers: int = 1,
    client: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> AccuracyStudy:
    """Run every estimator on the same ``draws`` noisy measurement sets of ``table`` and
    score each release with the Census Bureau's yardsticks (study path).

    Parameters
    ----------
    table : Table
        The truth, with ``schema``'s detailed cells (e.g. a synthetic population).
    workload : Workload
        The design's measurements (e.g. ``load_strategy("pl94-2020-persons").workload``).
    estimators : sequence of str
        Table post-processings as :class:`~postdp.analysis.ReleaseDesign` takes them (e.g.
        ``"topdown-2020"``, ``"blue-restore,round"``, ``"project"``); each must release
        every cell. Every one is built and checked before anything is drawn.
    schema : Schema
        See :func:`~postdp.analysis.summary_queries`.
    draws : int
        Independent measurement sets, at least 2 (the standard errors come from them).
    rng : int, SeedSequence or None
        The study's seed (the draws' streams are spawned from it; see the module notes).
        None draws a fresh one.
    queries, levels, bins
        As :func:`~postdp.analysis.census_metrics`.
    reliability_level : int, optional
        The level whose geounits are the reliability units (e.g. the block groups).
    reference : str, optional
        The estimator the others are compared with (default the first).
    budget_scale : array_like, optional
        Each geounit's multiple of its level's budget, as for ``ReleaseDesign``.
    bounds : sequence of CountBounds, optional
        Structural bounds every draw carries, as for ``ReleaseDesign`` (the production
        facility bounds: :func:`postdp.data.facility_bounds`); the estimators that hold
        bounds hold them, the others ignore them, as in a release.
    held : array_like or callable, optional
        The DHC persons design's PL94 histograms ((geography.n, 2016) whole numbers) for
        the estimators that hold them (``Estimator.holds``: ``topdown-2020``,
        ``blue-restore-2020``; the others ignore them): the same for every draw, or a
        callable of a ``SeedSequence`` giving each draw its own (:class:`HeldRelease`: a
        PL94 release of the same persons per draw, from the draw's child ``1 + E``, after
        its noise's and the estimators' rounding streams).
    workers : int, default 1
        Local processes, each scoring whole draws.
    client : dask.distributed.Client, optional
        Score the draws on a Dask cluster instead, one task per draw (the table, workload
        and designs are shipped once to every worker). The study is the same for any
        ``workers`` or ``client``: each draw has its own streams and the rows are gathered
        in draw order. Each process holds the table, the designs and one draw's releases.
    progress : callable(done, total), optional
        Called after each draw is scored.

    Returns
    -------
    AccuracyStudy

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Measurement, Query, pl94_schema
    >>> s = pl94_schema()
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cells = np.zeros((2, s.size), dtype=int); cells[:, :3] = [[40, 7, 3], [25, 9, 1]]
    >>> t = Table(geo, s.categories(), cells)
    >>> cells_query = Query.marginal(s, [a.name for a in s.attributes])  # every cell
    >>> w = Workload([Measurement(d, cells_query, Gaussian(rho=4)) for d in range(2)])
    >>> study = accuracy_study(t, w, ["project", "topdown,round"], schema=s, draws=4,
    ...                        rng=0, queries=["total"], bins=[0])
    >>> study.summary()[["estimator", "level", "mae"]].shape, study.draws
    ((4, 3), 4)
    """
    names = [str(e) for e in estimators]
    if not names or len(set(names)) != len(names):
        raise ValidationError(f"`estimators` must name distinct estimators; got {names}")
    if isinstance(draws, bool) or int(draws) != draws or draws < 2:
        raise ValidationError(f"`draws` must be a whole number >= 2; got {draws!r}")
    ref = names[0] if reference is None else str(reference)
    if ref not in names:
        raise ValidationError(f"`reference` must be one of {names}; got {ref!r}")
    designs = []
    for name in names:
        design = ReleaseDesign(table, workload, name, budget_scale=budget_scale, bounds=bounds)
        if design.step is None:
            raise ValidationError(f"estimator {name!r} releases no table (name an estimator)")
        designs.append(design)
    root = _root(rng)
    # the schema, queries, levels and bins, checked on the truth before anything is drawn
    census_metrics(
        table.detailed(), table, schema=schema, queries=queries, levels=levels, bins=bins
    )
    if reliability_level is not None and not 0 <= reliability_level < table.geography.n_levels:
        raise ValidationError(
            f"`reliability_level` must be in 0..{table.geography.n_levels - 1}; "
            f"got {reliability_level}"
        )
    if held is not None and not callable(held):
        shape = np.shape(held)
        if shape != (table.geography.n, 2016):
            raise ValidationError(
                f"`held` must have shape {(table.geography.n, 2016)} or be a callable; got {shape}"
            )
    if isinstance(workers, bool) or int(workers) != workers or workers < 1:
        raise ValidationError(f"`workers` must be a whole number >= 1; got {workers!r}")
    n = int(draws)
    plan = _Plan(table, workload, tuple(names), designs[0].budget_scale, designs[0].bounds,
                 schema, queries, levels, bins, reliability_level, held)  # fmt: skip
    _DESIGNS[plan] = tuple(designs)  # built once here; a worker builds its own once
    seeds = list(enumerate(root.spawn(n)))
    results: list[_Scored] = []

    def absorb(result: _Scored) -> None:
        results.append(result)
        if progress is not None:
            progress(len(results), n)

    if client is not None:  # one task per draw; the plan travels once to every worker
        shipped = client.scatter(plan, broadcast=True)
        futures = [client.submit(_score_draw, shipped, r, s, pure=False) for r, s in seeds]
        for future in _as_completed(futures):
            absorb(future.result())
    elif int(workers) > 1:  # the plan installed once in each process
        with ProcessPoolExecutor(int(workers), initializer=_install, initargs=(plan,)) as pool:
            for result in pool.map(_score_installed, *zip(*seeds, strict=True)):
                absorb(result)
    else:
        for r, seed in seeds:
            absorb(_score_draw(plan, r, seed))
    results.sort(key=lambda scored: scored.draw)  # the same study for any scheduler
    rows = [scored.metrics for scored in results]
    pooled = {
        name: [s.reliability[name] for s in results if name in s.reliability] for name in names
    }
    rule = results[0].rule
    per_draw = pd.concat(rows, ignore_index=True)
    first = ["estimator", "draw", *_KEYS, "geounits", "counts"]
    per_draw = per_draw[first + [m for m in METRICS if m in per_draw.columns]]
    reliability = {name: _pool(bins_, *rule) for name, bins_ in pooled.items() if bins_}
    return AccuracyStudy(per_draw, reliability, ref)


@dataclass(frozen=True, eq=False)
class _Plan:
    """What every draw needs, shipped once to each worker (the designs, whose prepared
    solvers do not pickle, are built once per process from the names: :func:`_designs`)."""

    table: Table
    workload: Workload
    names: tuple[str, ...]
    budget_scale: Any
    bounds: tuple[CountBounds, ...]
    schema: Schema
    queries: Sequence[str] | None
    levels: Sequence[str] | None
    bins: Sequence[int]
    reliability_level: int | None
    held: Any = None


@dataclass(frozen=True)
class _Scored:
    """One draw's metric rows and, per estimator, its reliability bins."""

    draw: int
    metrics: pd.DataFrame
    reliability: dict[str, pd.DataFrame]
    rule: tuple[float, float]


#: Each plan's designs, built once per process.
_DESIGNS: weakref.WeakKeyDictionary[_Plan, tuple[ReleaseDesign, ...]] = weakref.WeakKeyDictionary()
_INSTALLED: list[_Plan] = []  # the plan of a local worker process


def _designs(plan: _Plan) -> tuple[ReleaseDesign, ...]:
    if plan not in _DESIGNS:
        _DESIGNS[plan] = tuple(
            ReleaseDesign(
                plan.table, plan.workload, name, budget_scale=plan.budget_scale, bounds=plan.bounds
            )
            for name in plan.names
        )
    return _DESIGNS[plan]


def _install(plan: _Plan) -> None:
    _INSTALLED[:] = [plan]


def _score_installed(r: int, seed: np.random.SeedSequence) -> _Scored:
    return _score_draw(_INSTALLED[0], r, seed)


def _score_draw(plan: _Plan, r: int, seed: np.random.SeedSequence) -> _Scored:
    """Draw ``r``: measure from the seed's first child, run every estimator (estimator k
    rounding from child 1 + k) and score each release."""
    streams = seed.spawn(1 + len(plan.names) + (1 if callable(plan.held) else 0))
    noise, rounding = streams[0], streams[1 : 1 + len(plan.names)]
    held = plan.held(streams[-1]) if callable(plan.held) else plan.held
    table, designs = plan.table, _designs(plan)
    measured = measure(
        table, plan.workload, secure=False, rng=np.random.default_rng(noise),
        bounds=plan.bounds, budget_scale=designs[0].budget_scale, budget_checked=True,
    )  # fmt: skip
    rows, bins, rule = [], {}, (0.05, 0.95)
    for name, design, stream in zip(plan.names, designs, rounding, strict=True):
        released = design.solve(measured, rng=np.random.default_rng(stream), held=held)
        frame = census_metrics(
            released, table, schema=plan.schema, queries=plan.queries, levels=plan.levels,
            bins=plan.bins,
        )  # fmt: skip
        frame["mse"] = frame.pop("rmse") ** 2
        rows.append(frame.assign(estimator=name, draw=r))
        if plan.reliability_level is not None:
            found = reliability_threshold(
                released, table, schema=plan.schema, level=plan.reliability_level
            )
            bins[name], rule = found.by_bin, (found.within, found.coverage)
    return _Scored(r, pd.concat(rows, ignore_index=True), bins, rule)


def _as_completed(futures: list[Any]) -> Any:
    """Dask's futures as they finish (dask.distributed is untyped)."""
    import importlib

    as_completed: Any = importlib.import_module("dask.distributed").as_completed
    return as_completed(futures)


def _root(rng: RNGLike) -> np.random.SeedSequence:
    """The study's seed sequence: a Generator is refused (each draw's streams are children of
    one seed, so a draw can be run again alone)."""
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if rng is None:
        return np.random.SeedSequence()
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer) or rng < 0:
        raise ValidationError(
            f"`rng` must be a nonnegative int seed, a SeedSequence or None; got {rng!r}"
        )
    return np.random.SeedSequence(int(rng))


def _pool(frames: list[pd.DataFrame], within: float, coverage: float) -> ReliabilityThreshold:
    """The reliability bins of several releases pooled (units summed, shares weighted by
    their units), and the threshold rule on them."""
    every = pd.concat(frames, ignore_index=True)
    every["ok"] = every["share_within"] * every["units"]
    joined = every.groupby(["low", "high"], as_index=False)[["units", "ok"]].sum()
    joined["share_within"] = joined.pop("ok") / joined["units"]
    return threshold_of_bins(joined.sort_values("low", ignore_index=True), within, coverage)

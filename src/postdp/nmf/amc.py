"""Approximate Monte Carlo (AMC) margins of error of post-processed counts (STUDY PATH).

The Census Bureau's approximate Monte Carlo takes a release as a stand-in for the truth,
measures it again with the same design K times and post-processes each replicate the same
way; the spread of the replicates around the stand-in estimates the release's own error,
nonlinear post-processing included. It costs no privacy: only the release is read (the
replicates' noise is numpy's, seeded, never published).

:func:`amc` does this for a post-processed run in memory (a state or a few: the stand-in
table and one replicate are held at once). Given published tables (P1 to P5), it also gives
every geounit's 90% margin of error of every table row, the root mean square of the
replicates' rows around the stand-in's times 1.645, as the Census Bureau computed the
margins of error of its post-processed products.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import pandas as pd
from scipy import sparse

from postdp import _rng
from postdp._typing import FloatArray, RNGLike
from postdp.errors import ValidationError
from postdp.nmf._output import Z90
from postdp.tables import PublishedTable, Table, TableMeasurements, measure

__all__ = ["amc"]


@overload
def amc(
    measurements: TableMeasurements,
    released: Any,
    *,
    method: str,
    replicates: int,
    rng: RNGLike = ...,
    levels: list[str] | None = ...,
    queries: list[str] | None = ...,
    tables: None = ...,
) -> tuple[pd.DataFrame, pd.DataFrame]: ...


@overload
def amc(
    measurements: TableMeasurements,
    released: Any,
    *,
    method: str,
    replicates: int,
    rng: RNGLike = ...,
    levels: list[str] | None = ...,
    queries: list[str] | None = ...,
    tables: Sequence[PublishedTable],
) -> tuple[pd.DataFrame, pd.DataFrame, FloatArray]: ...


def amc(
    measurements: TableMeasurements,
    released: Any,
    *,
    method: str,
    replicates: int,
    rng: RNGLike = None,
    levels: list[str] | None = None,
    queries: list[str] | None = None,
    tables: Sequence[PublishedTable] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame] | tuple[pd.DataFrame, pd.DataFrame, FloatArray]:
    """AMC replicates of a release: its error by level and size bin, every geounit's
    margin of error of its total and, given published tables, of each of their rows.

    Parameters
    ----------
    measurements : TableMeasurements
        The run's measurements (their geography and workload define the design).
    released : array_like, shape (geography.n, n_detailed)
        The post-processed release (nonnegative whole numbers, rows in the geography's id
        order): the stand-in truth.
    method : str
        The post-processing to replicate (a table step, e.g. ``"topdown-2020"``).
    replicates : int
        K, at least 2.
    rng : int, numpy.random.Generator, SeedSequence or None
        Seeds the replicates' noise (and a ``,round`` step).
    levels : list of str, optional
        Names of the geographic levels.
    queries : list of str, optional
        The summary queries of the error table (names of
        :func:`postdp.analysis.summary_queries`; default all).
    tables : sequence of PublishedTable, optional
        Published tables over the run's schema (:func:`postdp.data.pl94_tables`): adds
        the third result. Memory: two (geography.n, rows of the tables) float arrays (the
        stand-in's rows and the running sum of squares; 298 rows for P1 to P5), and one
        replicate's rows at a time (no replicate is kept).

    Returns
    -------
    summary : pandas.DataFrame
        Per (query, level, size bin of the stand-in total): the Census metrics of
        :func:`postdp.analysis.census_metrics` averaged over the replicates (``rmse`` the
        root of the mean square), with ``replicates``.
    totals : pandas.DataFrame
        Per geounit: ``geo_id``, ``level``, ``stand_in_total``, ``rmse`` (over the
        replicates) and ``moe`` (the 90% margin of error, 1.645 x rmse) of its total.
    moe : ndarray, shape (geography.n, rows of the tables)
        Only with ``tables``: every geounit's 90% margin of error of every row, 1.645 x the
        root mean square of the replicates' rows minus the stand-in's (rows in the
        geography's id order, columns the tables' codes in turn); 0 where every replicate
        keeps the row (an invariant).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import read, synthetic_run
    >>> from postdp.postprocess import top_down_2020
    >>> m = read(synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05))
    >>> from postdp.data import pl94_tables
    >>> summary, totals, moe = amc(m, top_down_2020(m), method="topdown-2020", replicates=2,
    ...                            rng=0, tables=[pl94_tables()["P1"]])
    >>> sorted(totals.columns)
    ['geo_id', 'level', 'moe', 'rmse', 'stand_in_total']
    >>> moe.shape == (m.table.geography.n, 71), float(moe[0, 0])  # the nation's invariant
    (True, 0.0)
    """
    from postdp.analysis import ReleaseDesign
    from postdp.analysis.census_metrics import census_metrics

    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 2:
        raise ValidationError(f"`replicates` must be an integer >= 2; got {replicates!r}")
    geo = measurements.table.geography
    cat = measurements.table.categories
    values = np.asarray(released)
    if values.shape != (geo.n, cat.leaves.size):
        raise ValidationError(
            f"`released` must have shape {(geo.n, cat.leaves.size)}; got {values.shape}"
        )
    if (values < 0).any() or not np.array_equal(values, np.rint(values)):
        raise ValidationError(
            "AMC needs a release of nonnegative whole numbers as the stand-in truth (e.g. "
            "topdown-2020, or a step followed by ',round')"
        )
    leaves: Any = sparse.csr_array(values[geo.leaves].astype(np.int64))
    stand_in = Table(geo, cat, leaves)
    design = ReleaseDesign(stand_in, measurements.workload, method)
    schema = next(
        m.query.marginal_of.schema
        for m in measurements.workload.measurements
        if m.query.marginal_of is not None
    )
    names = levels or [str(d) for d in range(geo.n_levels)]
    totals = values.sum(axis=1).astype(np.float64)
    square = np.zeros(geo.n)
    published = list(tables) if tables is not None else []
    order = _cell_order(cat, published)
    truth_rows = _rows(values, order, published)
    row_square = np.zeros_like(truth_rows)
    frames = []
    for k, stream in enumerate(_rng.spawn(rng, replicates)):
        noise, rounding = _rng.spawn(stream, 2)
        draw = measure(stand_in, measurements.workload, secure=False, rng=noise)
        estimate = design.solve(draw, rng=rounding)
        square += (estimate.sum(axis=1) - totals) ** 2
        if published:
            row_square += (_rows(estimate, order, published) - truth_rows) ** 2
        frame = census_metrics(estimate, stand_in, schema=schema, levels=names, queries=queries)
        frames.append(frame.assign(replicate=k))
    pooled = pd.concat(frames, ignore_index=True)
    keys = ["query", "level", "size"]
    metrics = [c for c in pooled.columns if c not in (*keys, "replicate")]
    summary = pooled.groupby(keys, sort=False)[metrics].mean().reset_index()
    if "rmse" in pooled:
        mse = (pooled["rmse"] ** 2).groupby([pooled[k] for k in keys], sort=False).mean()
        summary["rmse"] = np.sqrt(mse.to_numpy())
    summary["replicates"] = replicates
    rmse = np.sqrt(square / replicates)
    level_of = np.asarray(names, dtype=object)[geo.depth]
    per_unit = pd.DataFrame(
        {
            "geo_id": geo.ids.astype(str),
            "level": level_of,
            "stand_in_total": totals.astype(np.int64),
            "rmse": rmse,
            "moe": Z90 * rmse,
        }
    )
    if tables is None:
        return summary, per_unit
    return summary, per_unit, Z90 * np.sqrt(row_square / replicates)


def _cell_order(categories: Any, tables: list[PublishedTable]) -> Any:
    """Where each of the tables' schema cells is among the detailed cells (leaf order)."""
    if not tables:
        return None
    leaves = {str(categories.ids[j]): k for k, j in enumerate(categories.leaves)}
    cells = tables[0].schema.cells
    if any(t.schema.cells != cells for t in tables) or sorted(leaves) != sorted(cells):
        raise ValidationError("`tables` must be over the run's schema's detailed cells")
    return np.array([leaves[c] for c in cells])


def _rows(cells: Any, order: Any, tables: list[PublishedTable]) -> FloatArray:
    """The tables' rows of histograms (geounits, detailed cells): (geounits, rows)."""
    if not tables:
        return np.zeros((np.shape(cells)[0], 0))
    x = np.asarray(cells, dtype=np.float64)[:, order]
    return np.concatenate([t.apply(x) for t in tables], axis=1)


def write_amc(summary: pd.DataFrame, totals: pd.DataFrame, folder: Path) -> list[Path]:
    """The AMC tables as Parquet files in ``folder`` (renamed into place)."""
    from postdp.nmf._io import _atomic_parquet, _pyarrow

    pa, pq = _pyarrow()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in (("summary", summary), ("totals", totals)):
        path = folder / f"{name}.parquet"
        _atomic_parquet(pq, pa.Table.from_pandas(frame, preserve_index=False), path)
        paths.append(path)
    return paths

"""A study's truth from its run, and a release measured against it.

A run of a synthetic population (``postdp measure --synthetic``, :func:`postdp.nmf.
measure_by_state` given ``population_seed``, :func:`postdp.nmf.synthetic_run`) records in
its manifest the states, the population's seed and the noise's seed (the manifest's
``"synthetic"`` entry). :func:`synthetic_truth` rebuilds from it the table that was
measured; :func:`evaluate` compares a post-processing of the run (``postdp postprocess``'s
output folder) with that truth using the Census Bureau's summary metrics
(:func:`postdp.analysis.census_metrics`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from postdp._validation import fraction
from postdp.errors import ValidationError
from postdp.nmf import _layout as layout
from postdp.nmf._manifest import SYNTHETIC
from postdp.nmf._output import FORM_CELLS, MANIFEST_FILE, PLAN_FILE, long_cells

if TYPE_CHECKING:
    import pandas as pd

    from postdp.hierarchy import Hierarchy
    from postdp.tables import Schema, Table

__all__ = ["evaluate", "synthetic_truth"]


def synthetic_truth(run_dir: str | os.PathLike[str]) -> Table:
    """The synthetic population a run measured, rebuilt from its manifest.

    Parameters
    ----------
    run_dir : path
        A run whose manifest records its synthetic population (``"synthetic"``: the
        states, the population's seed and its scale, 1 where not recorded).

    Returns
    -------
    Table
        ``postdp.nmf.synthetic_population(states, seed=population_seed,
        scale=population_scale)`` tabulated to the run's strategy's cells: the true counts
        of every geounit (a study's; never a real run's).

    Raises
    ------
    ValidationError
        For a run whose manifest records no synthetic population (one measured from
        records or histograms, or written by an earlier postdp).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import read, synthetic_run
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> truth = synthetic_truth(run)
    >>> top = read(run, levels=2)
    >>> held = [v for x, v in zip(top.workload.measurements, top.values) if x.public]
    >>> int(truth.counts()[truth.geography.root, 0]) == int(held[0][0, 0])  # the invariant
    True
    """
    from postdp.data import synthetic_dhc_population, synthetic_population
    from postdp.tables import load_strategy

    run = Path(run_dir)
    manifest = layout.read_manifest(run)
    record = (manifest or {}).get(SYNTHETIC)
    if not isinstance(record, dict):
        raise ValidationError(
            f"{str(run / layout.MANIFEST)!r}: records no synthetic population (a run of "
            "real records, of histograms or of an earlier postdp); its truth is not known"
        )
    assert manifest is not None
    states, seed = record.get("states"), record.get("population_seed")
    if not isinstance(states, list) or isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError(
            f"{str(run / layout.MANIFEST)!r}: its 'synthetic' entry needs 'states' (a list) "
            "and 'population_seed' (an integer)"
        )
    try:  # runs written before scales were recorded are whole (1)
        scale = fraction("population_scale", record.get("population_scale", 1.0))
    except (TypeError, ValidationError) as err:
        where = str(run / layout.MANIFEST)
        raise ValidationError(f"{where!r}: its 'synthetic' entry: {err}") from None
    strategy = manifest.get("strategy")
    dhc = strategy == "dhc-2020-persons"
    population = synthetic_dhc_population if dhc else synthetic_population
    table = population([str(s) for s in states], seed=seed, scale=scale)
    return load_strategy(strategy).tabulate(table) if strategy else table


def evaluate(
    output_dir: str | os.PathLike[str],
    *,
    queries: list[str] | None = None,
) -> pd.DataFrame:
    """The Census Bureau's summary metrics of a post-processing of a synthetic run,
    against the run's truth.

    Parameters
    ----------
    output_dir : path
        A complete ``postdp postprocess`` output folder (:func:`postdp.nmf.postprocess`)
        of a run whose truth :func:`synthetic_truth` rebuilds (the run found at the path
        its plan records).
    queries : list of str, optional
        Names of :func:`postdp.analysis.summary_queries` (default all); e.g.
        ``["total"]``. For a DHC persons release, marginals of
        :func:`postdp.tables.dhc_schema` (default :data:`postdp.analysis.DHC_QUERIES`:
        ``total``, ``sex * age``, ``age``, ``relgq``; any other, e.g. ``"sex *
        age_40_groups"``).

    Returns
    -------
    pandas.DataFrame
        :func:`postdp.analysis.census_metrics` of the wide form's estimates: one row per
        query, geolevel (by its name, e.g. ``County``) and bin of true total population,
        with ``geounits``, ``counts``, ``mae``, ``rmse``, ``mean_error``, ``malpe``, ``mape``,
        ``median_ape``, ``share_ape_over_10`` and ``tvd``. The estimates of every geounit
        are held at once (a state or a few; not the nation's blocks). A DHC persons
        release (the long form by attributes) is scored the same way
        (:func:`postdp.analysis.count_metrics`), each query's counts made from its rows
        and the truth's sparse cells, one level at a time.

    Raises
    ------
    ValidationError
        For a folder that is not a complete post-processing, a run without a recorded
        synthetic population, or a geounit of the truth that the output lacks.
    """
    import pandas as pd

    from postdp.analysis import census_metrics

    out = Path(output_dir)
    try:
        plan = json.loads((out / PLAN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ValidationError(f"{str(out)!r}: not a postdp post-processing") from None
    if not (out / MANIFEST_FILE).is_file():
        raise ValidationError(f"{str(out)!r}: not complete (no {MANIFEST_FILE}); run it to the end")
    run = Path(plan["run"])
    truth = synthetic_truth(run)
    manifest = layout.read_manifest(run) or {}
    names = list(manifest.get("levels") or layout.LEVELS_2020)
    if manifest.get("strategy"):
        from postdp.tables import load_strategy

        wide = load_strategy(manifest["strategy"]).schema
        if wide.size > FORM_CELLS:  # the DHC: its long form only, by attributes
            return _evaluate_long(out, truth, wide, names, queries)
    geo = truth.geography
    cells = [str(truth.categories.ids[j]) for j in truth.categories.leaves]
    row_of = _rows_of(geo)
    released = np.full((geo.n, len(cells)), np.nan)
    for name in names:
        frame = pd.read_parquet(out / "wide" / f"{name}.parquet", columns=["geocode", *cells])
        rows = [row_of.get(str(g), -1) for g in frame["geocode"]]
        if -1 in rows:
            stray = frame["geocode"].iloc[rows.index(-1)]
            raise ValidationError(f"{str(out)!r}: geocode {stray!r} is not in the run's truth")
        released[rows] = frame[cells].to_numpy(np.float64)
    missing = np.flatnonzero(np.isnan(released).any(axis=1))
    if missing.size:
        code = next(c for c, g in row_of.items() if g == missing[0])
        raise ValidationError(f"{str(out)!r}: no estimate of geounit {code!r} in its wide form")
    from postdp.tables import load_strategy

    schema = load_strategy(manifest["strategy"]).schema if manifest.get("strategy") else None
    if schema is None:
        from postdp.tables import pl94_schema

        schema = pl94_schema()
    return census_metrics(released, truth, schema=schema, queries=queries, levels=names)


def _rows_of(geo: Hierarchy) -> dict[str, int]:
    """Every geounit's row by its output geocode (the root's is empty)."""
    return {("" if g == geo.root else "0" + str(geo.ids[g])): g for g in range(geo.n)}


def _evaluate_long(
    out: Path, truth: Table, schema: Schema, names: list[str], queries: list[str] | None
) -> pd.DataFrame:
    """:func:`evaluate` of a release in the long form by attributes (the DHC's): each
    query's counts made from the rows and the truth's sparse cells, never the detailed
    histograms (1.2 million cells a geounit)."""
    import pandas as pd

    from postdp.analysis import count_metrics, marginal_queries
    from postdp.nmf._io import _pyarrow

    _, pq = _pyarrow()

    marginals = marginal_queries(schema, queries=queries)  # an unknown name refused here
    chosen = [m.name for m in marginals]
    geo = truth.geography
    row_of = _rows_of(geo)
    frames = []
    for d, name in enumerate(names):
        nodes = geo.levels[d]
        position = np.full(geo.n, -1, dtype=np.int64)
        position[nodes] = np.arange(nodes.size)
        true_cells = truth.level_detailed(d)  # sparse: (units, cells)
        table = pq.read_table(out / "long" / f"{name}.parquet")
        try:
            cell = long_cells(table, schema)
        except ValidationError as err:
            raise ValidationError(f"{str(out)!r}: {err}") from None
        geocodes = table.column("geocode").to_pylist()
        rows = np.array([row_of.get(str(g), -1) for g in geocodes], dtype=np.int64)
        unit = np.where(rows >= 0, position[np.maximum(rows, 0)], -1)
        if (unit < 0).any():
            stray = geocodes[int(np.argmax(unit < 0))]
            raise ValidationError(f"{str(out)!r}: geocode {stray!r} is not of level {name!r}")
        estimate = table.column("estimate").to_numpy().astype(np.float64)
        totals = np.asarray(true_cells.sum(axis=1), dtype=np.float64).ravel()
        for query, marginal in zip(chosen, marginals, strict=True):
            size = marginal.size
            released = np.bincount(
                unit * size + marginal.cell_groups()[cell], estimate, nodes.size * size
            ).reshape(nodes.size, size)
            true = marginal.count_matrix() @ true_cells.T
            true = np.asarray(true.toarray() if hasattr(true, "toarray") else true).T
            scores = count_metrics(released, true, totals=totals, partition=True)
            scores.insert(0, "level", name)
            scores.insert(0, "query", query)
            frames.append(scores)
    return pd.concat(frames, ignore_index=True)

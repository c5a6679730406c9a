"""Writing and reading noisy measurements in the Census NMF layout (see :mod:`._layout`)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.tables import Marginal, Measurement, Schema, TableMeasurements, Workload

__all__ = ["run_manifest", "write", "write_levels"]


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:  # pragma: no cover - the 'parquet' extra
        raise ImportError(
            "noisy measurement files need pyarrow: pip install 'postdp[parquet]'"
        ) from err
    return pa, pq


# -- write ---------------------------------------------------------------------------------
def write(
    measurements: TableMeasurements,
    run_dir: str | os.PathLike[str],
    *,
    levels: Sequence[str] | None = None,
    strategy: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write one draw of a schema table's noisy measurements in the Census NMF layout.

    Parameters
    ----------
    measurements : TableMeasurements
        One draw (no draw axes) of a table whose detailed cells are a :class:`Schema`'s,
        every query a marginal of it (e.g. ``load_strategy("pl94-2020-persons")``'s
        workload); noisy answers must be whole numbers (discrete noise).
    run_dir : path
        The run's folder: ``<Geolevel>.parquet/{DPQuery,Constraint}/[State=NNN/]part-0.parquet``
        and ``postdp-nmf.json``, the manifest, written last.
    levels : sequence of str, optional
        Geolevel names, root first (default: the 2020 names for 6 levels, else ``Level<d>``).
    strategy : str, optional
        A preset's name, recorded in the manifest.
    overwrite : bool, default False
        Replace the files of an existing run (otherwise a folder holding files is refused).

    Returns
    -------
    pathlib.Path
        The run's folder.

    Notes
    -----
    Geocodes are the AIAN flag ``0`` and the geounit's id (the root's is empty), so every
    id below the second level must start with its parent's (tabulation GEOIDs do). Every
    file is written under a temporary name and renamed into place; the manifest comes last,
    so a folder without it is not a complete postdp run. Public (invariant) queries are
    written as ``=`` constraints (``total_con``), noisy ones as ``DPQuery`` rows with their
    variance and exact budget share ``plb`` (the query's share of the run's budget at its
    level). A geounit measured with its own multiple of its level's budget
    (``measurements.budget_scale``) has its variances divided by it, and no ``DPQuery`` rows
    where it is 0 (as the Census writes the geounits its spine bypassed).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.data import load_strategy, synthetic_population
    >>> from postdp.tables import measure
    >>> t = synthetic_population(states=["11"], seed=0)
    >>> m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=0)
    >>> run = write(m, tempfile.mkdtemp() + "/run", strategy="pl94-2020-persons")
    >>> sorted(p.name for p in run.iterdir())[:3]
    ['Block.parquet', 'Block_Group.parquet', 'County.parquet']
    """
    _pyarrow()  # a clear error without the extra, before anything is written
    if not isinstance(measurements, TableMeasurements):
        raise TypeError(
            f"`measurements` must be TableMeasurements; got {type(measurements).__name__}"
        )
    if measurements.draws:
        raise ValidationError(
            f"write one draw at a time (index it: m[0]); got draws {measurements.draws}"
        )
    _schema_of(measurements)  # checked before anything is written
    geo = measurements.table.geography
    names = layout.level_names(geo.n_levels, levels)
    codes, subtree = _geocodes(geo)
    run = Path(run_dir)
    if run.exists() and (not run.is_dir() or (any(run.iterdir()) and not overwrite)):
        raise ValidationError(
            f"{str(run)!r} exists and is not an empty folder (overwrite=True replaces its files)"
        )
    work = measurements.workload
    total = _total(work)
    plb = _shares(work, total)
    scale = measurements.budget_scale
    for m, values in zip(work.measurements, measurements.values, strict=True):
        if not m.public and scale is not None:
            values = values[scale[geo.levels[m.level]] > 0]  # the others have none
        if not m.public and not np.array_equal(values, np.round(values)):
            raise ValidationError(
                f"query {m.query.name!r} at level {m.level}: the NMF holds whole-number answers "
                "(discrete noise); these are not"
            )
    run.mkdir(parents=True, exist_ok=True)
    write_levels(measurements, run, names, codes, subtree, plb)
    subtrees = sorted(set(subtree[geo.levels[1]])) if geo.n_levels > 1 else []
    manifest = run_manifest(measurements, names, str(geo.ids[geo.root]), total, strategy)
    manifest["subtrees"] = subtrees
    manifest["geounits"] = geounit_counts(names, subtree, geo)
    if measurements.budget_scale is not None:
        manifest["budget_scale"] = "per geounit"
    _atomic_text(run / layout.MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return run


def run_manifest(
    measurements: TableMeasurements,
    names: Sequence[str],
    root: str,
    total: Fraction | None,
    strategy: str | None,
) -> dict[str, Any]:
    """What a run's manifest says of its measurements (the subtrees added by the caller)."""
    work = measurements.workload
    return {
        "format": "postdp noisy measurements",
        "version": 1,
        "levels": list(names),
        "root": root,
        "schema": layout.schema_to_json(_schema_of(measurements)),
        "rho": None if total is None else str(total),
        "neighbours": work.neighbours,
        "mechanism": _mechanism_name(work),
        "path": "secure" if measurements.secure else "study",
        "strategy": strategy,
    }


def geounit_counts(names: Sequence[str], subtree: Any, geo: Hierarchy) -> dict[str, dict[str, int]]:
    """The manifest's ``geounits``: per level below the root (its name), the number of
    geounits of each subtree (its partition code), measured or bypassed, so that a reader
    finds a geounit whose rows were all deleted."""
    out: dict[str, dict[str, int]] = {}
    for d in range(1, geo.n_levels):
        codes, counts = np.unique(subtree[geo.levels[d]].astype(str), return_counts=True)
        out[names[d]] = {str(c): int(n) for c, n in zip(codes, counts, strict=True)}
    return out


def write_levels(
    measurements: TableMeasurements,
    run: Path,
    names: Sequence[str],
    codes: Any,
    subtree: Any,
    plb: list[str],
    *,
    offset: int = 0,
    file: str = layout.PART,
) -> None:
    """Write each level d of ``measurements`` as the run's level ``d + offset``: one file
    (named ``file``) per partition (``subtree``: each geounit's partition code; the run's
    root level has none) and kind, renamed into place. A subtree's own root level
    (``offset`` > 0) is left to the top's measurements."""
    pa, pq = _pyarrow()
    schema = _schema_of(measurements)
    geo = measurements.table.geography
    work = measurements.workload
    scale = measurements.budget_scale
    for d in range(1 if offset else 0, geo.n_levels):
        nodes = geo.levels[d]
        parts = [None] if d + offset == 0 else sorted(set(subtree[nodes]))
        for part in parts:
            every = (
                np.arange(nodes.size) if part is None else np.flatnonzero(subtree[nodes] == part)
            )
            for kind in (layout.DPQUERY, layout.CONSTRAINT):
                items = [
                    (i, m)
                    for i, m in enumerate(work.measurements)
                    if m.level == d and m.public == (kind == layout.CONSTRAINT)
                ]
                rows = every
                factors = None if scale is None else scale[nodes[rows]]
                if kind == layout.DPQUERY and factors is not None:  # none where no budget
                    rows, factors = rows[factors > 0], factors[factors > 0]
                frame = _frame(
                    pa, schema, kind, items, measurements.values, codes[nodes[rows]], rows, plb,
                    factors,
                )  # fmt: skip
                if kind == layout.CONSTRAINT and measurements.bounds:
                    frame = _with_bounds(
                        pa, schema, frame, measurements.bounds, codes[nodes[rows]], nodes[rows]
                    )
                if kind == layout.CONSTRAINT and factors is not None and (factors == 0).any():
                    frame = _bypassed(pa, schema, frame, codes[nodes[rows[factors == 0]]])
                where = run / f"{names[d + offset]}.parquet" / kind
                if part is not None:
                    where = where / layout.folder(part)
                held = sum(len(c.flatten()) for c in frame.column("value").chunks)
                _atomic_parquet(pq, frame, where / file, held)


def _schema_of(measurements: TableMeasurements) -> Schema:
    marginals = [m.query.marginal_of for m in measurements.workload.measurements]
    schemas = {(q.schema.names, q.schema.cells): q.schema for q in marginals if q is not None}
    cat = measurements.table.categories
    cells = tuple(str(cat.ids[j]) for j in cat.leaves)
    if len(schemas) != 1 or any(q is None for q in marginals):
        raise ValidationError("the NMF layout holds marginals of one schema; these queries are not")
    schema = next(iter(schemas.values()))
    if schema.cells != cells:
        raise ValidationError("the table's detailed cells are not the schema's")
    return schema


def _geocodes(geo: Hierarchy, *, rooted: bool = True) -> tuple[Any, Any]:
    """Every geounit's geocode (flag 0 + id; root '') and its subtree code (flag + the
    level-1 ancestor's id). ``rooted=False``: a state's subtree (its root the state)."""
    ids = np.asarray([str(i) for i in geo.ids], dtype=object)
    codes = np.asarray(["0" + i for i in ids], dtype=object)
    if not rooted:
        for node in range(geo.n):
            p = geo.parent[node]
            if p >= 0 and not codes[node].startswith(codes[p]):
                raise ValidationError(
                    f"geounit {ids[node]!r} does not start with its parent's id {ids[p]!r}: "
                    "NMF geocodes nest by prefix (use tabulation GEOIDs)"
                )
        if not codes[geo.root].isalnum():
            raise ValidationError(f"subtree id {ids[geo.root]!r} must be letters and digits")
        return codes, np.full(geo.n, codes[geo.root], dtype=object)
    codes[geo.root] = ""
    top = np.arange(geo.n)
    for _ in range(max(geo.n_levels - 2, 0)):
        top = np.where(geo.depth[top] > 1, geo.parent[top], top)
    subtree = codes[top]
    for node in range(geo.n):
        p = geo.parent[node]
        if geo.depth[node] >= 2 and not codes[node].startswith(codes[p]):
            raise ValidationError(
                f"geounit {ids[node]!r} does not start with its parent's id {ids[p]!r}: NMF "
                "geocodes nest by prefix (use tabulation GEOIDs)"
            )
    for code in set(subtree[geo.levels[1]]) if geo.n_levels > 1 else ():
        if not code.isalnum():
            raise ValidationError(
                f"subtree id {code[1:]!r} must be letters and digits (a partition folder)"
            )
    return codes, subtree


def _total(work: Workload) -> Fraction | None:
    if work.exact_rho is None:
        return None
    return sum((r for r in work.exact_rho if r is not None), Fraction(0))


def _mechanism_name(work: Workload) -> str:
    kinds = {m.mechanism.name for m in work.measurements if m.mechanism is not None}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _frame(
    pa: Any,
    schema: Schema,
    kind: str,
    items: list[tuple[int, Measurement]],
    values: tuple[FloatArray, ...],
    geocodes: Any,
    rows: IntArray,
    plb: list[str],
    factors: FloatArray | None = None,
) -> Any:
    """The Arrow table of one partition: a row per geounit and query (geounit-major);
    ``factors``: each geounit's multiple of its level's budget (its variances divided by
    it)."""
    n = rows.size
    cols: dict[str, list[Any]] = {c: [] for c in layout.columns(schema, kind)}
    if not items:
        return pa.table({c: pa.array([], type=_arrow_type(pa, c)) for c in cols})
    k = len(items)
    cols["geocode"] = np.repeat(geocodes, k).tolist()
    shapes = []
    for _, m in items:
        marginal = cast(Marginal, m.query.marginal_of)  # checked by _schema_of
        attrs = layout.attribute_columns(marginal)
        for a in schema.names:
            cols[a].append(attrs[a])
        shapes.append(list(marginal.shape))
    name_suffix = "_dpq" if kind == layout.DPQUERY else "_con"
    cols["query_name"] = [m.query.name + name_suffix for _, m in items] * n
    for a in schema.names:
        cols[a] = cols[a] * n
    cols["query_shape"] = shapes * n
    sizes = np.array([np.shape(values[i])[-1] for i, _ in items])
    flat = _flat_values(values, [i for i, _ in items], rows, sizes)
    offsets = np.concatenate([[0], np.cumsum(np.tile(sizes, n))]).astype(
        np.int32 if flat.size < 2**31 else np.int64
    )
    list_type = pa.list_ if offsets.dtype == np.int32 else pa.large_list
    value = (pa.ListArray if list_type is pa.list_ else pa.LargeListArray).from_arrays(
        offsets, flat
    )
    arrays = {
        "geocode": pa.array(cols["geocode"], pa.string()),
        "query_name": pa.array(cols["query_name"], pa.string()),
        **{a: pa.array(cols[a], pa.string()) for a in schema.names},
        "query_shape": pa.array(cols["query_shape"], pa.list_(pa.int64())),
        "value": value,
    }
    if kind == layout.DPQUERY:
        variances = np.array([_sigma_squared(m) for _, m in items])
        per_row = (
            np.tile(variances, n)
            if factors is None
            else (variances[None, :] / factors[:, None]).reshape(-1)
        )
        arrays["variance"] = pa.array(per_row, pa.float64())
        arrays["plb"] = pa.array([plb[i] for i, _ in items] * n, pa.string())
    else:
        arrays["sign"] = pa.array(["="] * (n * k), pa.string())
    return pa.table(arrays)


def _flat_values(
    values: tuple[FloatArray, ...], which: list[int], rows: IntArray, sizes: IntArray
) -> IntArray:
    """The answers of measurements ``which`` at ``rows`` as one int64 vector, geounit-major
    and queries in order, cast straight into place (no copy per query: a block level's
    answers are the run's largest arrays)."""
    out = np.empty((rows.size, int(sizes.sum())), dtype=np.int64)
    start = 0
    for i, width in zip(which, sizes.tolist(), strict=True):
        source = np.asarray(values[i])
        # ``rows`` are sorted and distinct: as many as the level's geounits means all of them
        out[:, start : start + width] = source if rows.size == source.shape[0] else source[rows]
        start += width
    return out.reshape(-1)


#: An upper bound written for "none" (the Census writes 99,999 per facility; a reader takes
#: this or more as no bound).
NO_UPPER = 99999


def _with_bounds(
    pa: Any, schema: Schema, frame: Any, bounds: Any, geocodes: Any, nodes: IntArray
) -> Any:
    """``frame`` (a partition's ``Constraint`` rows) with the structural bounds of its
    geounits: ``<name>_lb_con`` (``>=``, where some lower bound is positive) and
    ``<name>_ub_con`` (``<=``, where some upper bound is finite; none written as
    :data:`NO_UPPER`), as the 2020 runs' ``hhgq_total_lb_con`` / ``hhgq_total_ub_con``; a
    bound with one side is ``<name>_con`` (``nurse_nva_0_con``)."""
    pieces = [frame]
    for item in bounds:
        marginal = schema.marginal(item.query)
        attrs = layout.attribute_columns(marginal)
        lower, upper = item.lower[nodes], item.upper[nodes]
        sides = (("_lb_con", ">=", lower, (lower > 0).any()),
                 ("_ub_con", "<=", np.where(np.isfinite(upper), upper, NO_UPPER),
                  np.isfinite(upper).any()))  # fmt: skip
        both = sides[0][3] and sides[1][3]
        for suffix, sign, values, used in sides:
            if not used:
                continue
            suffix = suffix if both else "_con"  # one side: the name alone, as nurse_nva_0_con
            n, size = values.shape
            value = pa.ListArray.from_arrays(
                np.arange(n + 1, dtype=np.int32) * size, values.astype(np.int64).reshape(-1)
            )
            table = {
                "geocode": pa.array(geocodes, pa.string()),
                "query_name": pa.array([(item.name or item.query) + suffix] * n, pa.string()),
                **{a: pa.array([attrs[a]] * n, pa.string()) for a in schema.names},
                "query_shape": pa.array([list(marginal.shape)] * n, pa.list_(pa.int64())),
                "value": value.cast(frame.schema.field("value").type),
                "sign": pa.array([sign] * n, pa.string()),
            }
            pieces.append(pa.table(table).select(frame.column_names))
    return pa.concat_tables(pieces)


#: The ``Constraint`` row (total >= 0) that marks a geounit measured with no budget.
BYPASS_QUERY = "total_nonneg_con"


def _bypassed(pa: Any, schema: Schema, frame: Any, geocodes: Any) -> Any:
    """``frame`` with a :data:`BYPASS_QUERY` row (total >= 0, true of any histogram) for
    each geounit measured with no budget, so that it appears in ``Constraint`` (as the
    Census's bypassed geounits do) and a reader finds it between its parent and children."""
    n = len(geocodes)
    marginal = schema.marginal("total")
    attrs = layout.attribute_columns(marginal)
    table = {
        "geocode": pa.array(geocodes, pa.string()),
        "query_name": pa.array([BYPASS_QUERY] * n, pa.string()),
        **{a: pa.array([attrs[a]] * n, pa.string()) for a in schema.names},
        "query_shape": pa.array([list(marginal.shape)] * n, pa.list_(pa.int64())),
        "value": pa.ListArray.from_arrays(
            np.arange(n + 1, dtype=np.int32), np.zeros(n, dtype=np.int64)
        ).cast(frame.schema.field("value").type),
        "sign": pa.array([">="] * n, pa.string()),
    }
    return pa.concat_tables([frame, pa.table(table).select(frame.column_names)])


def _arrow_type(pa: Any, column: str) -> Any:
    """The Arrow type of a column of the layout."""
    if column in ("query_shape", "value"):
        return pa.list_(pa.int64())
    return pa.float64() if column == "variance" else pa.string()


def _sigma_squared(m: Measurement) -> float:
    """The ``variance`` column: the noise's scale squared, as the Census writes it (for a
    discrete Gaussian its sigma^2 = 1 / (rho x shares), a hair above the exact variance
    when sigma is small); the reader rebuilds the same mechanism from it."""
    sigma = getattr(m.mechanism, "sigma", None)
    return float(sigma) ** 2 if sigma is not None and m.weight is None else m.variance


def _shares(work: Workload, total: Fraction | None) -> list[str]:
    """Each measurement's share of the run's budget: exact for a workload made from
    shares, else the ratio of its rho to the total (as a float's text)."""
    if total is not None and work.exact_rho is not None:
        return ["" if r is None else str(r / total) for r in work.exact_rho]
    costs = [work.cost(m).rho for m in work.measurements]
    whole = sum(costs) or 1.0
    return [repr(c / whole) for c in costs]


#: About this many answers per row group of a measurement file: a reader that filters on
#: ``geocode`` (one county, ``read(..., within=)``) decodes only the groups it needs, each
#: about 32 MB of values.
GROUP_VALUES = 1 << 22


def _atomic_parquet(pq: Any, table: Any, path: Path, values: int | None = None) -> None:
    """Write ``table`` under a temporary name, then rename it into place; ``values``: the
    answers it holds (row groups are then sized to hold about GROUP_VALUES each). Every
    page carries its CRC-32 (Parquet's page checksum), which the reader verifies: a byte
    changed inside a page is refused, not read as another number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    os.close(fd)
    rows = None
    if values:
        rows = max(1024, GROUP_VALUES * len(table) // values)
    try:
        pq.write_table(table, tmp, row_group_size=rows, write_page_checksum=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

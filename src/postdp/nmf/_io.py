"""Writing noisy measurements in the Census NMF layout (see :mod:`._layout`): the files of
a run, renamed into place, and its manifest (what it records: :mod:`._manifest`; the
structural bounds' rows: :mod:`._bounds`); read back by :mod:`._read`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from postdp._files import current_umask, write_atomic, write_text
from postdp._typing import FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._bounds import _with_bounds
from postdp.nmf._manifest import (
    _schema_of,
    _total,
    continuous,
    describe,
    geounit_counts,
    run_manifest,
)
from postdp.tables import Marginal, Measurement, Schema, TableMeasurements, Workload

if TYPE_CHECKING:
    from postdp.privacy import Ledger

__all__ = ["write", "write_levels"]


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
    ledger: Ledger | None = None,
) -> Path:
    """Write one draw of a schema table's noisy measurements in the Census NMF layout.

    Parameters
    ----------
    measurements : TableMeasurements
        One draw (no draw axes) of a table whose detailed cells are a :class:`Schema`'s,
        every query a marginal of it (e.g. ``load_strategy("pl94-2020-persons")``'s
        workload), each noisy one drawn with a :class:`~postdp.mechanisms.Laplace`,
        :class:`~postdp.mechanisms.Geometric`, :class:`~postdp.mechanisms.Gaussian` or
        :class:`~postdp.mechanisms.DiscreteGaussian`; the answers of the discrete ones must
        be whole numbers.
    run_dir : path
        The run's folder: ``<Geolevel>.parquet/{DPQuery,Constraint}/[State=NNN/]part-0.parquet``
        and ``postdp-nmf.json``, the manifest, written last.
    levels : sequence of str, optional
        Geolevel names, root first (default: the 2020 names for 6 levels, else ``Level<d>``).
    strategy : str, optional
        A preset's name, recorded in the manifest.
    overwrite : bool, default False
        Replace an existing run whole: the new run is written in a temporary folder beside
        it and swapped in at the end, so nothing of the old run remains and a failure
        leaves the old run as it was. Otherwise a folder holding files is refused, and so
        is, even with ``overwrite``, a folder that is not a run (files other than
        ``<Geolevel>.parquet`` folders and no manifest).
    ledger : Ledger, optional
        Record the run's publication in this :class:`~postdp.privacy.Ledger` and write its
        privacy statement, ``privacy.json``, into the run (secure measurements only). A
        draw that :func:`postdp.tables.measure` recorded in the same ledger counts once;
        one it did not is refused with :class:`~postdp.errors.BudgetCapError`, before
        anything is put in place, if it would pass the ledger's cap.

    Returns
    -------
    pathlib.Path
        The run's folder.

    Notes
    -----
    Geocodes are the AIAN flag ``0`` and the geounit's id (the root's is empty), so every
    id below the second level must start with its parent's (tabulation GEOIDs do). The run
    is written in a temporary folder beside ``run_dir`` (every file under a temporary name,
    the manifest last) and renamed into place, so a folder without a manifest is not a
    complete postdp run. Public (invariant) queries are written as ``=`` constraints
    (``total_con``), noisy ones as ``DPQuery`` rows with their variance and budget share
    ``plb`` (the query's share of the run's budget at its level). A geounit measured with
    its own multiple of its level's budget (``measurements.budget_scale``) has its
    variances divided by it, and no ``DPQuery`` rows where it is 0 (as the Census writes
    the geounits its spine bypassed). Structural bounds (``measurements.bounds``) are
    ``Constraint`` rows at every geounit of every level, in the Census's names:
    ``<name>_lb_con`` and ``<name>_ub_con`` for a bound of ``sides="both"``
    (``hhgq_total``), one ``<name>_con`` for ``sides="upper"`` (``nurse_nva_0``).

    The manifest (version 2) records, for every measurement in the workload's order, its
    level, query and mechanism (null for a public one), the mechanism's parameter
    (``epsilon`` or ``rho``, the float's shortest exact text) and its ``cost`` under the
    run's ``neighbours`` (an exact fraction for a workload :meth:`Workload.from_shares
    <postdp.tables.Workload.from_shares>`, else the float's text): :func:`read` rebuilds
    the same mechanisms, variances and budget from it. Answers of the continuous
    mechanisms (Laplace, Gaussian) are not whole numbers: such a run stores every
    ``DPQuery`` ``value`` as float64 (``"answers": "float64"`` in the manifest; int64,
    the Census's layout, otherwise). ``Constraint`` values stay int64.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import synthetic_population
    >>> from postdp.tables import load_strategy
    >>> from postdp.tables import measure
    >>> t = synthetic_population(states=["11"], seed=0, scale=0.05)
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
    if ledger is not None:
        from postdp.privacy import Ledger

        if not isinstance(ledger, Ledger):
            raise TypeError(f"`ledger` must be a Ledger or None; got {type(ledger).__name__}")
        if not measurements.secure:
            raise ValidationError(
                "`ledger` records releases: these measurements are a study-path draw "
                "(secure=False), not one"
            )
    geo = measurements.table.geography
    names = layout.level_names(geo.n_levels, levels)
    codes, subtree = _geocodes(geo)
    run = Path(run_dir)
    if run.exists() and (not run.is_dir() or (any(run.iterdir()) and not overwrite)):
        raise ValidationError(
            f"{str(run)!r} exists and is not an empty folder (overwrite=True replaces its files)"
        )
    if run.is_dir() and any(run.iterdir()) and not _replaceable(run):
        raise ValidationError(
            f"{str(run)!r} is not a run (files other than <Geolevel>.parquet folders and no "
            f"{layout.MANIFEST}): overwrite=True replaces runs only"
        )
    work = measurements.workload
    describe(work)  # every mechanism one the manifest can name, before anything is written
    total = _total(work)
    plb = _shares(work, total)
    scale = measurements.budget_scale
    for m, values in zip(work.measurements, measurements.values, strict=True):
        if not m.public and scale is not None:
            values = values[scale[geo.levels[m.level]] > 0]  # the others have none
        noise = m.mechanism
        if noise is not None and noise.discrete and not np.array_equal(values, np.round(values)):
            raise ValidationError(
                f"query {m.query.name!r} at level {m.level}: the answers of a discrete "
                f"mechanism ({noise.name}) must be whole numbers; these are not"
            )
    run.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=run.parent, prefix=f".{run.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # the mode of a folder made by mkdir
        write_levels(measurements, tmp, names, codes, subtree, plb, floats=continuous(work))
        subtrees = sorted(set(subtree[geo.levels[1]])) if geo.n_levels > 1 else []
        manifest = run_manifest(measurements, names, str(geo.ids[geo.root]), total, strategy)
        manifest["subtrees"] = subtrees
        manifest["geounits"] = geounit_counts(names, subtree, geo)
        if measurements.budget_scale is not None:
            manifest["budget_scale"] = "per geounit"
        _atomic_text(tmp / layout.MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if ledger is None:
            _swap_in(tmp, run)
        else:
            from postdp.nmf._publish import publish

            publish(measurements, tmp, run, ledger, swap=_swap_in)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run


def _replaceable(run: Path) -> bool:
    """Whether a folder may be replaced by ``write(..., overwrite=True)``: it holds a
    manifest, or nothing but ``<Geolevel>.parquet`` folders (a run without one)."""
    if (run / layout.MANIFEST).is_file():
        return True
    return all(p.is_dir() and p.name.endswith(".parquet") for p in run.iterdir())


def _swap_in(tmp: Path, run: Path) -> None:
    """Put the finished run ``tmp`` at ``run``: renamed into place, an existing folder first
    moved aside (and removed once the new run is in place; put back if that fails)."""
    if not run.exists():
        os.replace(tmp, run)
        return
    aside = Path(tempfile.mkdtemp(dir=run.parent, prefix=f".{run.name}.", suffix=".old"))
    os.replace(run, aside)  # onto the empty folder just made
    try:
        os.replace(tmp, run)
    except BaseException:
        os.replace(aside, run)
        raise
    shutil.rmtree(aside, ignore_errors=True)


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
    floats: bool | None = None,
) -> None:
    """Write each level d of ``measurements`` as the run's level ``d + offset``: one file
    (named ``file``) per partition (``subtree``: each geounit's partition code; the run's
    root level has none) and kind, renamed into place. A subtree's own root level
    (``offset`` > 0) is left to the top's measurements. ``floats``: the ``DPQuery``
    answers as float64 (default: where ``measurements`` hold a continuous mechanism's;
    pass the whole run's :func:`~._manifest.continuous` when writing part of it)."""
    pa, pq = _pyarrow()
    if floats is None:
        floats = continuous(measurements.workload)
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
                    factors, floats=floats and kind == layout.DPQUERY,
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


def _refuse_unnested(ids: Any, codes: Any, parent: IntArray, nodes: IntArray) -> None:
    """Refuse the first of ``nodes`` whose geocode does not start with its parent's."""
    for node in nodes.tolist():
        p = parent[node]
        if not codes[node].startswith(codes[p]):
            raise ValidationError(
                f"geounit {ids[node]!r} does not start with its parent's id {ids[p]!r}: NMF "
                "geocodes nest by prefix (use tabulation GEOIDs)"
            )


def _geocodes(geo: Hierarchy, *, rooted: bool = True) -> tuple[Any, Any]:
    """Every geounit's geocode (flag 0 + id; root '') and its subtree code (flag + the
    level-1 ancestor's id). ``rooted=False``: a state's subtree (its root the state)."""
    ids = np.asarray([str(i) for i in geo.ids], dtype=object)
    codes = np.asarray(["0" + i for i in ids], dtype=object)
    if not rooted:
        _refuse_unnested(ids, codes, geo.parent, np.flatnonzero(geo.parent >= 0))
        if not codes[geo.root].isalnum():
            raise ValidationError(f"subtree id {ids[geo.root]!r} must be letters and digits")
        return codes, np.full(geo.n, codes[geo.root], dtype=object)
    codes[geo.root] = ""
    top = np.arange(geo.n)
    depth = geo.depth  # a property computed on each access: taken once
    for _ in range(max(geo.n_levels - 2, 0)):
        top = np.where(depth[top] > 1, geo.parent[top], top)
    subtree = codes[top]
    _refuse_unnested(ids, codes, geo.parent, np.flatnonzero(depth >= 2))
    for code in set(subtree[geo.levels[1]]) if geo.n_levels > 1 else ():
        if not code.isalnum():
            raise ValidationError(
                f"subtree id {code[1:]!r} must be letters and digits (a partition folder)"
            )
    return codes, subtree


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
    *,
    floats: bool = False,
) -> Any:
    """The Arrow table of one partition: a row per geounit and query (geounit-major);
    ``factors``: each geounit's multiple of its level's budget (its variances divided by
    it); ``floats``: answers as float64 (else int64)."""
    n = rows.size
    cols: dict[str, list[Any]] = {c: [] for c in layout.columns(schema, kind)}
    if not items:
        return pa.table({c: pa.array([], type=_arrow_type(pa, c, floats)) for c in cols})
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
    flat = _flat_values(values, [i for i, _ in items], rows, sizes, floats=floats)
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
    values: tuple[FloatArray, ...],
    which: list[int],
    rows: IntArray,
    sizes: IntArray,
    *,
    floats: bool = False,
) -> Any:
    """The answers of measurements ``which`` at ``rows`` as one int64 vector (float64 with
    ``floats``), geounit-major and queries in order, cast straight into place (no copy per
    query: a block level's answers are the run's largest arrays)."""
    out = np.empty((rows.size, int(sizes.sum())), dtype=np.float64 if floats else np.int64)
    start = 0
    for i, width in zip(which, sizes.tolist(), strict=True):
        source = np.asarray(values[i])
        # ``rows`` are sorted and distinct: as many as the level's geounits means all of them
        out[:, start : start + width] = source if rows.size == source.shape[0] else source[rows]
        start += width
    return out.reshape(-1)


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


def _arrow_type(pa: Any, column: str, floats: bool = False) -> Any:
    """The Arrow type of a column of the layout (``floats``: float64 answers)."""
    if column == "value" and floats:
        return pa.list_(pa.float64())
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
    """Write ``table`` under a temporary name, then rename it into place
    (:func:`postdp._files.write_atomic`); ``values``: the answers it holds (row groups are
    then sized to hold about GROUP_VALUES each). Every page carries its CRC-32 (Parquet's
    page checksum), which the reader verifies: a byte changed inside a page is refused, not
    read as another number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = None
    if values:
        rows = max(1024, GROUP_VALUES * len(table) // values)
    write_atomic(
        path,
        lambda tmp: pq.write_table(table, tmp, row_group_size=rows, write_page_checksum=True),
    )


def _atomic_parquet_parts(
    pq: Any, parts: Iterable[Any], path: Path, *, metadata: dict[str, str] | None = None
) -> None:
    """Write the tables ``parts`` (one schema; at least one) as consecutive row groups of
    one file, built one at a time as the iterable yields them (so only one part is ever
    held), under a temporary name, then renamed into place; page checksums as
    :func:`_atomic_parquet`; ``metadata``: key-value pairs added to the file's schema."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Any) -> None:
        writer = None
        try:
            for part in parts:
                if writer is None:
                    schema = part.schema
                    if metadata:
                        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
                    writer = pq.ParquetWriter(tmp, schema, write_page_checksum=True)
                writer.write_table(part)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError("no rows to write")

    write_atomic(path, write)


def _atomic_text(path: Path, text: str) -> None:
    write_text(path, text)

"""Reading noisy measurement files (the Census NMF layout) into postdp's measurements."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals
from scipy import sparse

from postdp._typing import FloatArray, IntArray
from postdp._validation import listing
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._bounds import _collect_bounds, _collect_zeros, _is_marginal, _sides
from postdp.nmf._checks import (
    Rows,
    _account,
    _count,
    _discrete_rows,
    _numbers,
    _refuse_missing_folder,
    _table,
    _whole_rows,
)
from postdp.nmf._io import _pyarrow, _sigma_squared
from postdp.nmf._workload import budget_scale, rebuild_workload
from postdp.tables import CountBounds, Schema, Table, TableMeasurements

#: The marker file of a run drawn on the study path (see postdp.nmf.synthetic).
STUDY_MARKER = "STUDY-PATH.txt"

__all__ = ["read", "subtrees"]


def subtrees(run_dir: str | os.PathLike[str]) -> list[str]:
    """The spine subtrees of a run: the 3-character codes of its ``State=NNN`` folders.

    Parameters
    ----------
    run_dir : path

    Returns
    -------
    list of str
        Sorted (``["011", "042"]``: flag 0, then the state's FIPS): those of the level
        below the root's folders and, for a run postdp wrote, those its manifest lists.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import synthetic_run
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> subtrees(run)
    ['011']
    """
    run = _run(run_dir)
    manifest = layout.read_manifest(run)
    names = _levels(run, manifest)
    if len(names) < 2:
        return []
    found = {str(c) for c in manifest.get("subtrees", [])} if manifest else set()
    for kind in (layout.DPQUERY, layout.CONSTRAINT):
        where = run / f"{names[1]}.parquet" / kind
        if where.is_dir():
            found |= {c for p in where.iterdir() if (c := layout.subtree_of(p.name)) and p.is_dir()}
    return sorted(found)


def read(
    run_dir: str | os.PathLike[str],
    *,
    states: Sequence[str] | None = None,
    levels: int | None = None,
    schema: Schema | None = None,
    within: str | Sequence[str] | None = None,
) -> TableMeasurements:
    """The noisy measurements of a run in the Census NMF layout, one or more subtrees.

    Parameters
    ----------
    run_dir : path
        A run folder written by :func:`write` or published by the Census Bureau
        (``<Geolevel>.parquet/{DPQuery,Constraint}/State=NNN/``).
    states : sequence of str, optional
        Subtree codes to read (``"042"``; a 2-digit FIPS such as ``"42"`` means ``"042"``);
        default every subtree. Only their files are opened.
    levels : int, optional
        Read the first ``levels`` geolevels only (``2``: the nation and the states).
    schema : Schema, optional
        The histogram's schema; default the run's manifest's, else the 2020 persons schema.
    within : str or sequence of str, optional
        A geocode inside the one subtree of ``states`` (e.g. ``"011001"``, a county): only
        the geounits at or below it and its ancestors are read, with a range filter on
        ``geocode`` (Parquet statistics skip the other row groups). Several geocodes of one
        level (siblings, e.g. a county's tracts): the geounits from the first to the last
        of them in geocode order, with everything below them, and their ancestors.

    Returns
    -------
    TableMeasurements
        One draw. Its table has the run's geography (ids: the geocodes without the AIAN
        flag ``0``; an AIAN branch keeps its ``1``; the root the manifest's id or ``US``)
        and the schema's cells, with **unknown counts** (zero: an NMF holds no true
        counts). Queries are the marginals named (suffixes such as ``_dpq`` dropped);
        ``=`` constraints on marginals are public measurements; a geounit found only in
        ``Constraint`` (one the spine bypassed) has NaN answers. A run postdp wrote
        (manifest version 2) comes back with the measurements it records, in their order:
        the same mechanisms, parameters, weights, neighbours and exact rho (a recorded
        query no geounit read answers has NaN answers); an earlier postdp's run with each
        query's exact rho from the run's rho and ``plb``; a run without a manifest (the
        Census's) with discrete Gaussian noise of rho 1 / variance (bounded neighbours).

    Raises
    ------
    ValidationError
        For a folder that is not a run, a subtree it lacks, a query that is not a marginal
        of the schema, answers of the wrong length, a query whose variance differs
        between geounits of one level, a manifest of a newer version or whose ``levels``
        leave out a level folder of the run, or a query of the files that the manifest
        does not describe; and for a damaged run, in one line naming the file
        (or folder), the geocode and the query: a partition folder missing, a file that is
        not readable Parquet (truncated; a page whose checksum fails), an answer that is not
        finite, of size 2**62 or more, or not a whole number where the mechanism is discrete
        (:func:`~._checks.discrete_query`), a (geocode, query) given twice, a geounit in another
        subtree's folder, one that answers some of its level's noisy queries but not
        others, one whose parent is missing, one only in ``Constraint`` that is not marked
        as bypassed (a run postdp wrote), or fewer or more geounits than the run's manifest
        records for a level and subtree.

    Notes
    -----
    Every geounit must be accounted for, each (geocode, query) once: a geounit of a level
    answers each of the level's noisy queries exactly once, or appears in ``Constraint``
    only as one the spine bypassed (in a run postdp wrote, with its ``total_nonneg_con``
    row; in a Census run, as the Census writes them). A run postdp wrote records how many
    geounits each level of each subtree has (the manifest's ``geounits``), so a geounit
    whose rows are all gone is found too; in a Census run, which records no such count, a
    leaf with no rows left cannot be told from one that never was.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import synthetic_run
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> m = read(run, levels=2)
    >>> m.table.geography.ids.tolist(), len(m.workload.measurements)
    (['US', '11'], 23)
    """
    _, pq = _pyarrow()
    run = _run(run_dir)
    manifest = layout.read_manifest(run)
    names = _levels(run, manifest)
    if levels is not None:
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= len(names):
            raise ValidationError(f"`levels` must be 1 to {len(names)}; got {levels!r}")
        names = names[:levels]
    if schema is None:
        schema = layout.schema_from_json(manifest["schema"]) if manifest else _persons()
    known = subtrees(run)
    chosen = known if states is None else [_code(s) for s in states]
    missing = [c for c in chosen if c not in known]
    if missing:
        raise ValidationError(f"`states`: the run has no subtree {missing} (it has {known})")
    where = None
    if within is not None:
        where = [within] if isinstance(within, str) else [str(w) for w in within]
        if len(chosen) != 1 or not where or not all(w.startswith(chosen[0]) for w in where):
            raise ValidationError(
                f"`within` {within!r} must be geocodes inside the one subtree of `states`"
            )
    frames = []
    for d, name in enumerate(names):
        parts = [None] if d == 0 else chosen
        for p in parts:
            _refuse_missing_folder(run / f"{name}.parquet", p, manifest)
        level = []
        for kind in (layout.DPQUERY, layout.CONSTRAINT):
            discrete = _discrete_rows(manifest, d) if kind == layout.DPQUERY else _whole_rows
            pieces = [
                _part(pq, run / f"{name}.parquet" / kind, p, schema, kind,
                      None if d < 2 else where, discrete)
                for p in parts
            ]  # fmt: skip
            level.append(_joined(pieces))
        frames.append((level[0], level[1]))
    _account(frames, names, manifest)
    geo, position = _geography(frames, manifest)
    absent = [w for w in where or () if not any(w in level for level in position)]
    if absent:
        raise ValidationError(f"`within`: the run has no geounit {listing(absent)}")
    _count(run, frames, names, chosen, manifest, 1 if where is not None else len(names) - 1)
    study = (run / STUDY_MARKER).is_file()
    out = _measurements(geo, position, frames, schema, manifest, study, run / layout.MANIFEST)
    del frames, level, pieces  # the last level's Arrow buffers too
    _release()
    return out


def _release() -> None:
    """Give back to the system the memory Arrow's pool holds but no longer uses: its
    allocator keeps freed pages for reuse, and the answers placed next are numpy's, so
    without this a read would hold its files' tables twice over (a block level's several
    hundred MB)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _run(run_dir: str | os.PathLike[str]) -> Path:
    run = Path(run_dir)
    if not run.is_dir():
        raise ValidationError(f"{str(run)!r} is not a folder (a run of noisy measurement files)")
    return run


def _levels(run: Path, manifest: dict[str, Any] | None) -> tuple[str, ...]:
    if manifest is not None:
        return tuple(manifest["levels"])
    present = tuple(n for n in layout.LEVELS_2020 if (run / f"{n}.parquet").is_dir())
    if not present or present != layout.LEVELS_2020[: len(present)]:
        raise ValidationError(
            f"{str(run)!r} is not a run in the NMF layout: no manifest and geolevel folders "
            f"{[n + '.parquet' for n in present]} (expected US.parquet, State.parquet, ...)"
        )
    return present


def _persons() -> Schema:
    from postdp.tables import pl94_schema

    return pl94_schema()


def _code(state: str) -> str:
    text = str(state).strip()
    return "0" + text if len(text) == 2 and text.isdigit() else text


def _within(codes: list[str]) -> Any:
    """Rows of geounits from the first of ``codes`` to the last (in geocode order) and
    below them, and of the first's ancestors (equalities and a range: Parquet statistics
    prune the row groups of both)."""
    import pyarrow.dataset as ds

    field = ds.field("geocode")
    first, last = min(codes), max(codes)
    where = (field >= first) & (field < _past(last))
    for k in range(1, len(first)):
        where = where | (field == first[:k])
    return where


def _past(code: str) -> str:
    """The first text after every extension of ``code``."""
    return code[:-1] + chr(ord(code[-1]) + 1)


def _related(name: str, codes: list[str]) -> bool:
    """Whether file ``part-<g>.parquet`` (a subtree's file: geounits under g) can hold a
    geounit that :func:`_within` reads (other names: always)."""
    head = name[len("part-") : -len(".parquet")] if name.startswith("part-") else "0"
    return head == "0" or (head < _past(max(codes)) and _past(head) > min(codes))


def _part(
    pq: Any,
    where: Path,
    part: str | None,
    schema: Schema,
    kind: str,
    within: list[str] | None = None,
    discrete: Any = _whole_rows,
) -> Rows:
    """One folder's rows (every Parquet file in it; none: an empty frame), only those
    :func:`_within` picks for geocodes ``within`` if given (other subtrees' files are not
    opened). The arrays are taken from Arrow's buffers at once, never as one Python object
    per row. Each file is refused, naming it, when it is not readable Parquet (its pages'
    checksums are verified where written) or holds an answer that
    :func:`~._checks.bad_answer` refuses (``discrete``: a query's name -> whether its
    answers must be whole numbers)."""
    if part is not None:
        where = where / layout.folder(part)
    files = sorted(p for p in where.glob("*.parquet") if p.is_file()) if where.is_dir() else []
    rows = None
    if within is not None:
        files = [f for f in files if _related(f.name, within)]
        rows = _within(within)
    arrays = ("value", "query_shape")
    keep = [c for c in layout.columns(schema, kind) if c not in arrays]
    pieces = []
    for f in files:
        table = _table(pq, f, rows)
        layout.check_columns(table.column_names, schema, kind, f"{f}")
        value = table.column("value").combine_chunks()
        if not hasattr(value, "offsets"):  # the Census's first release: binary-encoded
            raise ValidationError(f"{f}: `value` is {value.type}, not a list of numbers")
        offsets = np.asarray(value.offsets, dtype=np.int64)
        shape = table.column("query_shape").combine_chunks()
        width = len(schema.names)
        dims = np.asarray(shape.flatten(), dtype=np.int64)
        if dims.size != width * len(table):
            raise ValidationError(f"{f}: every query_shape must have {width} entries")
        flat = _numbers(table, value, offsets, f, discrete)
        frame = table.select([c for c in keep if c in table.column_names]).to_pandas()
        frame["_start"] = offsets[:-1] - offsets[0]
        frame["_len"] = np.diff(offsets)
        for j, column in enumerate(dims.reshape(len(table), width).T):
            frame[f"_s{j}"] = column
        frame["_file"] = pd.Categorical.from_codes(
            np.zeros(len(frame), dtype=np.int8), pd.Index([str(f)])
        )
        pieces.append((frame, flat))
        del table, value, shape  # `flat` keeps the answers' buffer alone
        _release()
    if not pieces:
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in keep})
        for c in ("_start", "_len", *(f"_s{j}" for j in range(len(schema.names)))):
            empty[c] = pd.Series(dtype=np.int64)
        empty["_file"] = pd.Categorical([])
        return empty, np.zeros(0, dtype=np.int64)
    frame, flat = _joined(pieces)
    frame["geocode"] = frame["geocode"].astype(str)
    codes, names = pd.factorize(frame["query_name"].astype(str))  # a name per query, not row
    frame["query_name"] = np.asarray([layout.strip_suffix(n) for n in names], dtype=object)[codes]
    return frame, flat


def _joined(pieces: list[Rows]) -> Rows:
    """Rows of several folders or files as one (each one's starts moved past the others')."""
    if len(pieces) == 1:
        return pieces[0]
    frames, flats, base = [], [], 0
    for frame, flat in pieces:
        frames.append(frame.assign(_start=frame["_start"].to_numpy() + base))
        flats.append(flat)
        base += flat.size
    files = union_categoricals([f["_file"] for f in frames])
    joined = pd.concat([f.drop(columns="_file") for f in frames], ignore_index=True)
    joined["_file"] = files
    return joined, np.concatenate(flats)


def _geography(
    frames: list[tuple[Rows, Rows]], manifest: Any
) -> tuple[Hierarchy, list[dict[str, int]]]:
    """The geounits level by level (in the order they first appear) and their parents by
    geocode prefix."""
    root = str(manifest["root"]) if manifest else "US"
    ids: list[str] = [root]
    parents: list[str | None] = [None]
    position: list[dict[str, int]] = [{"": 0}]
    previous: dict[str, str] = {"": root}
    for d, ((dp, _), (con, _)) in enumerate(frames[1:], start=1):
        codes = pd.unique(pd.concat([dp["geocode"], con["geocode"]], ignore_index=True))
        lengths = sorted({len(c) for c in previous}, reverse=True)
        here: dict[str, str] = {}
        for code in codes:
            parent = next((code[:n] for n in lengths if code[:n] in previous), None)
            if parent is None or (d > 1 and parent == code):
                rows = dp if (dp["geocode"] == code).any() else con
                row = rows[rows["geocode"] == code].iloc[0]
                raise ValidationError(
                    f"{row['_file']}: geocode {code!r}, query {row['query_name']!r}: no parent "
                    "among the level above's geocodes (its parent's rows are missing?)"
                )
            here[code] = code[1:] if code.startswith("0") else code
            ids.append(here[code])
            parents.append(previous[parent])
        position.append({c: i for i, c in enumerate(codes)})
        previous = here
    if len(set(ids)) != len(ids):
        raise ValidationError(
            "two geounits of the run share an id (geocodes differ only in their AIAN flag?)"
        )
    return Hierarchy.from_parents(ids, np.asarray(parents, dtype=object)), position


def _measurements(
    geo: Hierarchy,
    position: list[dict[str, int]],
    frames: list[tuple[Rows, Rows]],
    schema: Schema,
    manifest: Any,
    study: bool,
    manifest_path: Path | None = None,
) -> TableMeasurements:
    order: list[tuple[int, str, bool]] = []
    found: dict[tuple[int, str, bool], tuple[FloatArray, float, str, FloatArray | None]] = {}
    skipped: set[str] = set()
    held: dict[tuple[str, str], tuple[FloatArray, FloatArray, set[str]]] = {}
    for d, ((dp, dp_flat), (con, con_flat)) in enumerate(frames):
        for public, frame, flat in ((False, dp, dp_flat), (True, con, con_flat)):
            if public:
                equal = (frame["sign"].astype(str) == "=").to_numpy(dtype=bool)
                names = pd.unique(frame["query_name"])
                marginals = {q for q in names if _is_marginal(schema, str(q))}
                named = frame["query_name"].isin(marginals).to_numpy(dtype=bool)
                skipped |= set(frame.loc[~(equal & named), "query_name"])
                at = (flat, schema, geo.levels[d], position[d], held)
                _collect_bounds(frame[~equal], *at)
                _collect_zeros(frame[equal & ~named], *at)  # the Census's nurse_nva_0_con
                frame = frame[equal & named]
            for name, rows in _by_query(frame, schema, public):
                key = (d, str(name), public)
                order.append(key)
                found[key] = _answers(rows, flat, d, str(name), schema, position[d], public)
    bounds = tuple(
        CountBounds(
            query,
            np.vstack([lower, np.zeros((geo.n - lower.shape[0], lower.shape[1]))]),
            np.vstack([upper, np.full((geo.n - upper.shape[0], upper.shape[1]), np.inf)]),
            name=name,
            sides=_sides(lower, used),
        )
        for (name, query), (lower, upper, used) in held.items()
        if (lower > 0).any() or np.isfinite(upper).any()  # else it bounds nothing
    )
    skipped -= {q for *_, used in held.values() for q in used}
    if skipped:
        warnings.warn(
            "constraints postdp's estimators do not use yet were read and left out: "
            + ", ".join(sorted(skipped)),
            stacklevel=3,
        )
    work = rebuild_workload(
        order, found, schema, manifest, where=manifest_path or "the run's manifest",
        depth=len(frames),
    )  # fmt: skip
    noisy = [m for m in work.measurements if not m.public]
    for m in noisy:  # recorded in the manifest, answered by none of the geounits read
        if (m.level, m.query.name, False) not in found:
            nan = np.full((geo.levels[m.level].size, m.query.size), np.nan)
            found[(m.level, m.query.name, False)] = (nan, _sigma_squared(m), "", None)
    values = [found[(m.level, m.query.name, m.public)][0] for m in work.measurements]
    cat = schema.categories()
    cells: Any = sparse.csr_array((geo.leaves.size, cat.leaves.size), dtype=np.int64)
    secure = manifest.get("path", "secure") == "secure" if manifest else not study
    scale = budget_scale(geo, work, [found[(m.level, m.query.name, False)] for m in noisy])
    table = Table(geo, cat, cells)
    return TableMeasurements(table, work, tuple(values), secure, bounds, scale)


#: One query's rows of a level's frame: its columns that :func:`_answers` reads, as arrays.
QueryRows = dict[str, np.ndarray]


def _by_query(frame: pd.DataFrame, schema: Schema, public: bool) -> Iterator[tuple[Any, QueryRows]]:
    """(query name, its rows) of a frame, in the order the names first appear (as
    ``groupby(sort=False)``; each query's rows in the frame's order). The columns are taken
    out of the frame once, not once per query: a read has hundreds of (level, query) groups
    of a few rows each, and taking a column out of a data frame costs more than indexing
    an array (the groups' data frames were half of a small subtree's read)."""
    names = frame["query_name"].to_numpy(dtype=object)
    codes, uniques = pd.factorize(names)
    if not len(uniques):
        return
    order = np.argsort(codes, kind="stable")
    edges = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    wanted = ["geocode", "_start", "_len", *schema.names]
    wanted += [f"_s{j}" for j in range(len(schema.names))]
    wanted += [] if public else ["variance", "plb"]
    columns = {c: frame[c].to_numpy() for c in wanted if c in frame}
    if not public:
        columns["variance"] = frame["variance"].to_numpy(dtype=np.float64)
    for k, name in enumerate(uniques):
        at = order[edges[k] : edges[k + 1]]
        yield name, {c: values[at] for c, values in columns.items()}


def _placed(
    rows: QueryRows, flat: np.ndarray, size: int, where: dict[str, int]
) -> tuple[FloatArray, IntArray]:
    """Each row's ``size`` answers at its geounit's place in ``where`` (NaN where a geounit
    has none), and each row's place. Rows stored back to back (as written) are read as one
    view of ``flat``, and rows already in ``where``'s order are copied without an index: a
    block level's answers are the largest arrays of a read."""
    starts = np.asarray(rows["_start"], dtype=np.int64)
    n = starts.size
    gaps = np.diff(starts)
    stride = int(gaps[0]) if gaps.size else size
    if n and stride >= size and (gaps == stride).all() and starts[-1] + size <= flat.size:
        # every row the same distance after the last (back to back, or each geounit's
        # queries in turn): a strided view of ``flat``, no index array as large as the answers
        flat = np.ascontiguousarray(flat)
        values = np.lib.stride_tricks.as_strided(
            flat[starts[0] :], shape=(n, size), strides=(stride * flat.itemsize, flat.itemsize)
        )
    else:
        values = flat[starts[:, None] + np.arange(size)]
    places = np.fromiter((where[g] for g in rows["geocode"]), dtype=np.int64, count=n)
    out = np.empty((len(where), size))
    if n == len(where) and np.array_equal(places, np.arange(n)):
        out[:] = values
        return out, places
    out[places] = values
    absent = np.ones(len(where), dtype=bool)
    absent[places] = False
    out[absent] = np.nan
    return out, places


def _distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a, axis=0)`` (a's distinct entries, or rows), without sorting ``a`` when
    they are all alike, as a run writes them (a block level's query has one row per block)."""
    if len(a) and (a == a[0]).all():
        return a[:1]
    return np.unique(a, axis=0)


def _answers(
    rows: QueryRows,
    flat: np.ndarray,
    d: int,
    name: str,
    schema: Schema,
    where: dict[str, int],
    public: bool,
) -> tuple[FloatArray, float, str, FloatArray | None]:
    """(answers of every geounit of the level, NaN where absent; the level's variance; plb;
    each geounit's own variance, NaN where absent, or None when they are all the same)."""
    label = f"level {d}, query {name!r}"
    attrs = {a: str(rows[a][0]) for a in schema.names}
    marginal = layout.marginal_of(schema, name, attrs, label)
    dims = np.column_stack([rows[f"_s{j}"] for j in range(len(schema.names))])
    shapes = {tuple(int(v) for v in s) for s in _distinct(dims)}
    if shapes != {marginal.shape}:
        raise ValidationError(
            f"{label}: query_shape {sorted(shapes)}; the schema's is {marginal.shape}"
        )
    lengths = _distinct(rows["_len"])
    if lengths.tolist() != [marginal.size]:
        raise ValidationError(
            f"{label}: {lengths.tolist()} answers per geounit; expected {marginal.size}"
        )
    out, places = _placed(rows, flat, marginal.size, where)
    if public:
        return out, 0.0, "", None
    variance = rows["variance"]
    if not (np.isfinite(variance).all() and (variance > 0).all()):
        raise ValidationError(f"{label}: a variance is not a positive number")
    plb = str(rows["plb"][0]) if "plb" in rows else ""
    if _distinct(variance).size == 1:
        return out, float(variance[0]), plb, None
    values, counts = np.unique(variance, return_counts=True)
    # geounits measured with their own budgets: the level's variance is the most common one
    # (a postdp run's is its exact share's), each geounit's own kept for its budget factor
    own = np.full(len(where), np.nan)
    own[places] = variance
    return out, float(values[np.argmax(counts)]), plb, own

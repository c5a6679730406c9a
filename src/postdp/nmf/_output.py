"""The output folder of :func:`postdp.nmf.postprocess` (private): each partition's files,
written atomically, and the plan that a resumed run must match.

Files, per form and geographic level: ``OUT/<form>/<Geolevel>.parquet/part-0.parquet`` for
the nation, ``OUT/<form>/<Geolevel>.parquet/<code>/part-*.parquet`` below it, ``<code>`` the
spine subtree's 3-character code (``011``). The folders are named by the code alone, not
``State=011`` (the run's Census layout): a reader that infers Hive partitions
(``pandas.read_parquet`` of a level's folder) then adds no integer ``State`` column and reads
``geocode`` as the string it is.

Forms:

- ``wide`` (every method): ``geocode``, ``total`` (the geounit's total: the sum of its
  cells) and one column per detailed cell; int64 for an integral method, float64 for a
  real-valued one. It holds every cell of every geounit.
- ``long`` (integral methods only: ``topdown-2020``, ``blue-restore-2020``, any step with
  ``,round``): ``geocode``, ``category`` (dictionary of the schema's cells) and
  ``estimate``, the cells of estimate 0 left out (a cell not listed is 0). A schema of more
  than :data:`FORM_CELLS` cells (the DHC persons design's 1,227,744) has this form only, with
  a column per attribute (``relgq``, ``sex``, ``age``, ``hispanic``, ``cenrace``: each a
  dictionary of its levels' names) in place of ``category``, and each file names its
  geounits estimated to hold no one, which have no row (:data:`EMPTY`). A real-valued
  method (``project``, ``blue-restore``, ``project-nonneg``, ...) writes no long form: its cells are
  almost never 0, so it would list every cell of every geounit (628 MB for the District of
  Columbia's ``project``), negative ones included; its wide form holds them all.
- ``std_dev`` (methods with standard deviations): one row per geounit and query with
  ``geocode``, ``query_name``, ``query_shape`` and ``std_dev`` (its counts' standard
  deviations, a list in C order: the layout of the noisy measurement files' ``value``);
- ``moe`` (``project``, exact; an integral method with ``amc``, from its replicates): one row
  per geounit, ``geocode`` and ``<variable>_moe`` for every row of the published tables
  over the run's schema (:func:`moe_tables`: P1 to P5 for persons, H1 for housing units),
  the 90% margin of error, :data:`Z90` times the standard error (0 for an invariant).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from postdp._typing import FloatArray, NumArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._io import _atomic_parquet_parts, _atomic_text, _pyarrow
from postdp.tables import CountBounds, PublishedTable, Schema

#: The plan :func:`postdp.nmf.postprocess` writes first into its output folder: the method,
#: options, the run's fingerprint and the seed (drawn and recorded when none is given), so
#: that the same call resumes it and another is refused.
PLAN_FILE = "postdp-postprocess.json"
#: The manifest it writes last: every file's SHA-256 (and, with structural bounds, the
#: geounits left outside them by level); the post-processing is finished when it exists.
MANIFEST_FILE = "postdp-manifest.json"
FORMS = ("long", "wide")
STD = "std_dev"
#: The margins of error of the published tables' rows (``<variable>_moe``, 90%).
MOE = "moe"
#: The most detailed cells of a schema with a wide form (a column per cell) and the
#: standard deviations' form (one value per count of every measured query); a wider one
#: (the DHC persons design) has the long form only, by attributes.
FORM_CELLS = 20_000
#: The key of an estimates file's metadata (wide and long forms) saying how many of its
#: geounits break their structural bounds (a run with bounds, solved by ``topdown-2020``):
#: the DHC's group-quarters bounds are best effort at Block_Group and Block.
UNMET = "postdp.bounds_unmet"
#: The key of a long-form file's metadata, where there is no wide form (the DHC persons
#: design): the geocodes of its geounits estimated to hold no one (a JSON list), which
#: have no row in it (every cell 0), so that its tables still give them a row.
EMPTY = "postdp.empty_geocodes"
#: Geounits checked against their bounds at a time (a DHC geounit's histogram as float64:
#: 10 MB).
UNMET_ROWS = 8
#: The z of a 90% margin of error (the Census Bureau's margins are 90%): moe = Z90 x s.e.
Z90 = 1.6448536269514722


def moe_tables(schema: Schema) -> list[PublishedTable]:
    """The published tables whose margins of error a post-processing of ``schema``'s runs
    writes: those of :func:`postdp.data.pl94_tables` over the same cells (P1 to P5 for the
    2020 persons schema, H1 for the units schema), none for another schema."""
    from postdp.data import pl94_tables

    return [
        t
        for t in pl94_tables().values()
        if t.schema.shape == schema.shape and t.schema.cells == schema.cells
    ]


def moe_columns(tables: Sequence[PublishedTable]) -> list[str]:
    """The moe form's columns after ``geocode``: ``<variable>_moe`` in table order."""
    return [f"{code}_moe" for t in tables for code in t.codes]


def write_moe(path: Path, geocodes: Sequence[str], columns: list[str], moe: FloatArray) -> None:
    """One partition's moe file: ``geocode`` and a float column per published row."""
    pa, pq = _pyarrow()
    _atomic_parquet_parts(
        pq, (_moe_part(pa, geocodes, columns, moe, a, b) for a, b in _spans(moe)), path
    )


def _moe_part(
    pa: Any, geocodes: Sequence[str], columns: list[str], moe: FloatArray, a: int, b: int
) -> Any:
    return pa.table(
        {
            "geocode": pa.array(list(geocodes[a:b]), pa.string()),
            **{c: pa.array(np.asarray(moe[a:b, j], np.float64)) for j, c in enumerate(columns)},
        }
    )


#: Values per row group of an output file: the rows written (and the temporaries made for
#: them) a group at a time, so a level's files cost little memory beside its estimates (a
#: group of 8M values is 64 MB). Parquet's cost per column chunk is what sets the floor: on
#: 25,000 blocks x 2,016 cells, groups of 2M values took 3.4 s to write and 15 MB on disk,
#: of 8M 1.7 s and 6 MB, of 16M 1.7 s and 4 MB.
PART_VALUES = 1 << 23


def _spans(values: Any, width: int | None = None) -> list[tuple[int, int]]:
    """Consecutive row ranges of ``values`` (rows first) of about PART_VALUES values
    (``width`` values per row; default the row's length); one empty range for no rows."""
    n = len(values)
    per_row = max(1, int(values.shape[1]) if width is None else width)
    step = max(1, PART_VALUES // per_row)
    return [(a, min(n, a + step)) for a in range(0, n, step)] or [(0, 0)]


def sibling(out: Path, path: Path, form: str) -> Path:
    """The file of form ``form`` for the same geolevel, partition and part as ``path``, a
    file of another form in ``out`` (as :func:`form_path` places them: the form the first
    folder below ``out``, the rest the same for every form)."""
    rel = path.relative_to(out)
    return out / form / Path(*rel.parts[1:])


#: The wide form's column of each geounit's total (the sum of its cells).
TOTAL = "total"


def forms_of(integral: bool, std: bool, cells: int = 0) -> tuple[str, ...]:
    """The forms written: ``wide``, ``long`` for an integral method only, and ``std_dev``
    for a method with standard deviations; a schema of more than :data:`FORM_CELLS` cells
    has the long form alone (an integral method without standard deviations only)."""
    if cells > FORM_CELLS:
        if not integral or std:
            raise ValidationError(
                f"a schema of {cells:,} cells has the long form only, of whole numbers: "
                "no wide form, standard deviations or real-valued estimates"
            )
        return ("long",)
    return (*(FORMS if integral else ("wide",)), *((STD,) if std else ()))


class Writer:
    """The output folder's partitions: each level's files in every form, written atomically.

    ``queries``: the queries whose standard deviations the method gives, by name (their
    shapes), or None: no ``std_dev`` form; ``tables``: with ``queries``, the published
    tables whose rows' margins of error go to the ``moe`` form (their variances under their
    names), none: no ``moe`` form; ``integral``: the method's estimates are whole numbers
    (written as int64, with a long form), else real-valued (float64, no long form)."""

    def __init__(
        self,
        out: Path,
        names: tuple[str, ...],
        schema: Schema,
        queries: dict[str, tuple[int, ...]] | None = None,
        tables: Sequence[PublishedTable] = (),
        *,
        integral: bool = True,
    ) -> None:
        self.out, self.names, self.schema, self.queries = out, tuple(names), schema, queries
        if TOTAL in schema.cells:
            raise ValidationError(f"a cell named {TOTAL!r} would clash with the wide form's total")
        self.integral = integral
        self.tables = tuple(tables) if queries is not None else ()
        self.forms = forms_of(integral, queries is not None, schema.size)
        if self.tables:
            self.forms = (*self.forms, MOE)

    def _path(self, form: str, level: int, code: str | None, part: str | None = None) -> Path:
        return form_path(self.out, form, self.names[level], code, part)

    def done(self, code: str, part: str | None = None) -> bool:
        """Whether a subtree's partition (or its part ``part``, a county's geocode) is
        complete: its deepest level's files exist."""
        last = len(self.names) - 1
        return all(self._path(f, last, code, part).is_file() for f in self.forms)

    def top(
        self,
        geo: Hierarchy,
        estimate: NumArray,
        codes: list[str],
        variances: dict[str, FloatArray] | None = None,
        *,
        bounds: Sequence[CountBounds] = (),
    ) -> None:
        """The root and the states (``codes``: their subtree codes, in level order);
        ``bounds``: the geography's structural bounds, whose unmet geounits each file
        records (:data:`UNMET`)."""
        self._level(0, None, [""], *_pick(estimate, variances, [geo.root]),
                    unmet=self._unmet(bounds, [geo.root], estimate))  # fmt: skip
        for g, code in zip(geo.levels[1], codes, strict=True):
            geocodes = [geocode(str(geo.ids[g]), code)]
            self._level(1, code, geocodes, *_pick(estimate, variances, [g]),
                        unmet=self._unmet(bounds, [g], estimate))  # fmt: skip

    def subtree(
        self,
        code: str,
        geo: Hierarchy,
        estimate: NumArray,
        variances: dict[str, FloatArray] | None = None,
        *,
        depth: int = 1,
        part: str | None = None,
        bounds: Sequence[CountBounds] = (),
    ) -> None:
        """Every level of a subtree rooted at level ``depth`` (a state; a county, whose
        levels go to the files ``part-<part>.parquet`` of its state's partition) but its
        root, which the levels above wrote; ``bounds`` as :meth:`top`'s."""
        self.subtrees(code, [(geo, estimate, variances)], depth=depth, part=part, bounds=[bounds])

    def subtrees(
        self,
        code: str,
        pieces: Sequence[tuple[Hierarchy, NumArray, dict[str, FloatArray] | None]],
        *,
        depth: int,
        part: str | None,
        bounds: Sequence[Sequence[CountBounds]] | None = None,
    ) -> None:
        """Sibling subtrees (rooted at level ``depth``; each ``(geography, estimate,
        variances)``), every level but their roots in one file ``part-<part>.parquet``;
        ``bounds``: each piece's, as :meth:`top`'s."""
        levels = {geo.n_levels for geo, _, _ in pieces}
        if len(levels) != 1:
            raise ValueError("sibling subtrees of different depths")
        each = [()] * len(pieces) if bounds is None else list(bounds)
        for d in range(1, levels.pop()):
            geocodes: list[str] = []
            values, picked = [], []
            unmet: int | None = None
            for (geo, estimate, variances), own in zip(pieces, each, strict=True):
                nodes = geo.levels[d]
                geocodes += [geocode(str(i), code) for i in geo.ids[nodes]]
                v, p = _pick(estimate, variances, nodes)
                values.append(v)
                picked.append(p)
                found = self._unmet(own, nodes, estimate)
                if found is not None:
                    unmet = (unmet or 0) + found
            joined = picked[0] if len(picked) == 1 else None
            if picked[0] is not None and len(picked) > 1:
                joined = {k: np.concatenate([p[k] for p in picked if p]) for k in picked[0]}
            rows = values[0] if len(values) == 1 else np.concatenate(values)
            self._level(d + depth, code, geocodes, rows, joined, part, unmet=unmet)

    def _unmet(self, bounds: Sequence[CountBounds], nodes: Any, estimate: NumArray) -> int | None:
        """How many of ``nodes`` (rows of ``estimate``, one draw) break any of ``bounds``
        (None: no bounds), a few geounits at a time (a DHC geounit is 1.2 million cells)."""
        if not bounds:
            return None
        nodes = np.asarray(nodes)
        found = 0
        for a in range(0, nodes.size, UNMET_ROWS):
            rows = nodes[a : a + UNMET_ROWS]
            x = np.asarray(estimate)[rows]
            broken = np.zeros(rows.size, dtype=bool)
            for b in bounds:
                broken |= b.take(rows).unmet(self.schema, x)
            found += int(broken.sum())
        return found

    def _level(
        self,
        level: int,
        code: str | None,
        geocodes: list[str],
        values: NumArray,
        variances: dict[str, FloatArray] | None,
        part: str | None = None,
        *,
        unmet: int | None = None,
    ) -> None:
        """One level's rows (``values``: their estimates; ``variances``: theirs by query;
        ``unmet``: how many break their bounds, recorded in the estimates' files)."""
        pa, pq = _pyarrow()
        if all(self._path(f, level, code, part).is_file() for f in self.forms):
            return
        if not self.out.is_dir():  # removed behind a refused run: a late task writes nothing
            raise FileNotFoundError(f"{str(self.out)!r}: the output folder is gone")
        if self.integral and not np.array_equal(values, np.rint(values)):
            raise ValueError("an integral method gave estimates that are not whole numbers")
        values = np.asarray(values, dtype=np.int64 if self.integral else np.float64)
        spans = _spans(values)
        if self.queries is not None:
            assert variances is not None
            self._std(pq, self._path(STD, level, code, part), geocodes, variances)
            if self.tables:
                columns = moe_columns(self.tables)
                _atomic_parquet_parts(
                    pq,
                    (
                        _moe_part(pa, geocodes[a:b], columns, self._moe(variances, a, b), 0, b - a)
                        for a, b in spans
                    ),
                    self._path(MOE, level, code, part),
                )
        noted = {} if unmet is None else {UNMET: str(unmet)}
        if "wide" not in self.forms:  # the long form alone: its geounits without a row named
            blank = np.flatnonzero(~np.asarray(values).any(axis=1))
            noted[EMPTY] = json.dumps([geocodes[i] for i in blank])
        if "wide" in self.forms:
            _atomic_parquet_parts(
                pq,
                (self._wide(pa, geocodes, values, a, b) for a, b in spans),
                self._path("wide", level, code, part),
                metadata=noted or None,
            )
        if "long" in self.forms:
            _atomic_parquet_parts(
                pq,
                (self._long(pa, geocodes, values, variances, a, b) for a, b in spans),
                self._path("long", level, code, part),
                metadata=noted or None,
            )

    def _moe(self, variances: dict[str, FloatArray], a: int, b: int) -> FloatArray:
        """Rows ``a:b``'s margins of error of the published tables' rows."""
        se = [np.sqrt(np.maximum(variances[t.name][a:b], 0.0)) for t in self.tables]
        moe: FloatArray = Z90 * np.concatenate(se, axis=1)
        return moe

    def _wide(self, pa: Any, geocodes: list[str], values: NumArray, a: int, b: int) -> Any:
        """Rows ``a:b`` of the wide form: geocode, total and one column per cell."""
        rows = values[a:b]
        return pa.table(
            {
                "geocode": pa.array(geocodes[a:b], pa.string()),
                TOTAL: pa.array(rows.sum(axis=1)),
                **{c: pa.array(rows[:, j]) for j, c in enumerate(self.schema.cells)},
            }
        )

    def _long(
        self,
        pa: Any,
        geocodes: list[str],
        values: NumArray,
        variances: dict[str, FloatArray] | None,
        a: int,
        b: int,
    ) -> Any:
        """Rows ``a:b`` of the long form: one row per nonzero cell (with its moe)."""
        block = values[a:b]
        rows, cols = np.nonzero(block)
        long = {"geocode": pa.array(np.asarray(geocodes[a:b], dtype=object)[rows], pa.string())}
        if "wide" in self.forms:
            long["category"] = pa.DictionaryArray.from_arrays(
                pa.array(cols.astype(np.int32)), pa.array(self.schema.cells)
            )
        else:  # a column per attribute: no dictionary of a million cell names
            levels = [a.levels for a in self.schema.attributes]
            index = np.unravel_index(cols, [len(v) for v in levels])
            for attribute, codes in zip(self.schema.attributes, index, strict=True):
                long[attribute.name] = pa.DictionaryArray.from_arrays(
                    pa.array(codes.astype(np.int32)), pa.array(list(attribute.levels))
                )
        long["estimate"] = pa.array(block[rows, cols])
        if self.queries is not None:
            assert variances is not None
            sd = np.sqrt(np.maximum(variances["detailed"][a:b], 0.0))
            long[MOE] = pa.array(Z90 * sd[rows, cols])
        return pa.table(long)

    def _std(
        self,
        pq: Any,
        path: Path,
        geocodes: list[str],
        variances: dict[str, FloatArray],
    ) -> None:
        """One row per (geounit, query), geounit-major, queries in name order."""
        assert self.queries is not None
        width = sum(v.shape[1] for v in variances.values())
        _atomic_parquet_parts(
            pq,
            (self._std_part(geocodes, variances, a, b) for a, b in _spans(geocodes, width)),
            path,
        )

    def _std_part(
        self, geocodes: list[str], variances: dict[str, FloatArray], a: int, b: int
    ) -> Any:
        assert self.queries is not None
        pa, _ = _pyarrow()
        names = list(self.queries)
        n = b - a
        blocks = [np.sqrt(np.maximum(variances[q][a:b], 0.0)) for q in names]
        sizes = np.tile([blk.shape[1] for blk in blocks], n)
        flat = np.concatenate(blocks, axis=1).reshape(-1)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
        return pa.table(
            {
                "geocode": pa.array(np.repeat(np.asarray(geocodes[a:b], dtype=object), len(names))),
                "query_name": pa.array(names * n, pa.string()),
                "query_shape": pa.array(
                    [list(self.queries[q]) for q in names] * n, pa.list_(pa.int64())
                ),
                STD: pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat)),
            }
        )


def unmet_by_level(
    out: Path, files: list[str], names: tuple[str, ...], forms: list[str]
) -> dict[str, int] | None:
    """By level, the geounits whose estimates break their bounds, summed over the files'
    records (:data:`UNMET`; one form's files read, their footers only);
    None where no file records any (no bounds, or a method not solved in tasks)."""
    _, pq = _pyarrow()
    form = "wide" if "wide" in forms else "long"
    found: dict[str, int] = {}
    for f in files:
        parts = f.split("/")
        if parts[0] != form:
            continue
        noted = (pq.read_schema(out / f).metadata or {}).get(UNMET.encode())
        if noted is not None:
            level = parts[1].removesuffix(".parquet")
            found[level] = found.get(level, 0) + int(noted)
    if not found:
        return None
    return {n: found[n] for n in names if n in found}


def form_path(out: Path, form: str, level: str, code: str | None, part: str | None) -> Path:
    """The file of one form, geolevel (its name), partition (its folder named by the
    subtree code alone, not the run's ``State=`` form) and part."""
    where = out / form / f"{level}.parquet"
    name = layout.PART if part is None else f"part-{part}.parquet"
    return (where if code is None else where / code) / name


def long_cells(table: Any, schema: Schema) -> Any:
    """Each row's detailed cell (int64) in a long form by attributes (a pyarrow table with
    a column per attribute, levels by name); a level the schema lacks is refused."""
    pa, _ = _pyarrow()
    import pyarrow.compute as pc

    index = []
    for attribute in schema.attributes:
        column = table.column(attribute.name).combine_chunks()
        if isinstance(column.type, pa.DictionaryType):
            column = column.dictionary_decode()
        found = pc.index_in(column, pa.array(list(attribute.levels)))
        if found.null_count:
            raise ValidationError(f"the long form's {attribute.name!r} has unknown levels")
        index.append(found.to_numpy(zero_copy_only=False).astype(np.int64))
    return np.ravel_multi_index(tuple(index), schema.shape)


def written_long(path: Path, geocodes: Sequence[str], schema: Schema) -> Any:
    """The cells of ``geocodes`` in a written long form by attributes (a schema of more
    than :data:`FORM_CELLS` cells), in their order (int64; a cell not listed is 0)."""
    pa, pq = _pyarrow()
    import pyarrow.compute as pc

    wanted = list(geocodes)
    table = pq.ParquetFile(path).read()
    table = table.filter(pc.is_in(table.column("geocode"), pa.array(wanted)))
    row = {g: i for i, g in enumerate(wanted)}
    where = np.array([row[g] for g in table.column("geocode").to_pylist()], dtype=np.int64)
    cells = long_cells(table, schema)
    out = np.zeros((len(wanted), schema.size), dtype=np.int64)
    out[where, cells] = table.column("estimate").to_numpy()
    return out


def written(path: Path, geocodes: Sequence[str]) -> Any:
    """The cells of ``geocodes`` in a written wide file, in their order (int64; its
    ``total`` left out)."""

    pa, pq = _pyarrow()
    import pyarrow.compute as pc

    # a task's part file, read whole and then picked: with some 2,000 cell columns this is
    # half the time of a filtered read (the filter costs more than the few rows it skips)
    wanted = list(geocodes)
    table = pq.ParquetFile(path).read()
    table = table.filter(pc.is_in(table.column("geocode"), pa.array(wanted)))
    row = {g: i for i, g in enumerate(table.column("geocode").to_pylist())}
    order = np.array([row[g] for g in wanted], dtype=np.int64)
    cells = [c for c in table.column_names if c not in ("geocode", TOTAL)]
    out = np.empty((len(wanted), len(cells)), dtype=np.int64)
    for j, name in enumerate(cells):  # column by column: no 2,000-column data frame
        out[:, j] = table.column(name).to_numpy()[order]
    return out


def _pick(
    estimate: NumArray, variances: dict[str, FloatArray] | None, nodes: Any
) -> tuple[NumArray, dict[str, FloatArray] | None]:
    """Some geounits' estimates and variances (views when ``nodes`` are consecutive rows)."""
    nodes = np.asarray(nodes)
    if nodes.size and np.array_equal(nodes, np.arange(nodes[0], nodes[0] + nodes.size)):
        nodes = slice(int(nodes[0]), int(nodes[0]) + nodes.size)
    picked = None if variances is None else {k: v[nodes] for k, v in variances.items()}
    return np.asarray(estimate)[nodes], picked


def geocode(geo_id: str, code: str) -> str:
    """A geounit's geocode from its id (see :func:`postdp.nmf.read`: an AIAN branch's ids
    keep their flag ``1``, the others lost their ``0``)."""
    return geo_id if code.startswith("1") else "0" + geo_id


def start(out: Path, plan: dict[str, Any]) -> None:
    """Begin or resume: a new folder gets the plan; one with the same plan is resumed."""
    spec = out / PLAN_FILE
    if out.exists() and not out.is_dir():
        raise ValidationError(f"{str(out)!r} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        try:
            old = json.loads(spec.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ValidationError(
                f"{str(out)!r} holds files that are not a postdp post-processing"
            ) from None
        if old != plan:
            raise ValidationError(
                f"{str(out)!r} holds a post-processing of another run, method or seed; "
                "choose another folder"
            )
        if (out / MANIFEST_FILE).is_file():
            (out / MANIFEST_FILE).unlink()  # re-checked below: every file is written again or kept
        for stale in out.rglob(".*.tmp"):  # a killed run's unfinished file
            stale.unlink(missing_ok=True)
        return
    out.mkdir(parents=True, exist_ok=True)
    _atomic_text(spec, json.dumps(plan, indent=2) + "\n")

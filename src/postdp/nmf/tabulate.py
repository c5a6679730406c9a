"""The P.L. 94-171 tables of a post-processed run: the product census data users read.

:func:`tabulate` turns the output folder of :func:`postdp.nmf.postprocess` (any method,
integral or not) into the 2020 redistricting tables (:func:`postdp.data.pl94_tables`: P1 to
P5 from a persons release, H1 from a units release), one file per geolevel, streamed
partition by partition (memory: one batch of a partition's rows, never a level):

- ``<Geolevel>.csv`` and ``<Geolevel>.parquet``: one row per geounit with ``GEOID`` (the
  Census's tabulation GEOID as text: state 2, county 5, tract 11, block group 12, block
  15 digits; ``US`` for the nation), ``NAME`` (the Census's name of the nation, a state or
  county; a tract, block group or block named inside its county; empty where postdp does
  not know the county), ``AIAN_BRANCH`` (True for the part of a geounit on the American
  Indian and Alaska Native branch of the 2020 spine, whose GEOID repeats the other part's),
  ``GEOLEVEL`` (the level's name), then every variable (``P1_001N`` ...), each followed by
  ``<variable>_moe``, its 90% margin of error, where the release carries one (its ``moe``
  form: exact for ``project``, from approximate Monte Carlo replicates for an integral method
  post-processed with ``amc``); an invariant's margin of error is 0;
- ``variables.csv``: every variable's table, label, universe and unit.

Counts are whole numbers (int64) for an integral method, real numbers for the others; the CSV
files write real numbers with 4 decimals, the Parquet files in full.

A release of the DHC persons design (the long form alone, by attributes) gives the DHC's
sex-by-age tables instead (:func:`postdp.data.dhc_tables`: P12 and PCT12), read from its
long rows a batch at a time, at the levels whose geounits are Census tabulation geographies
(US, State, County, Tract_Subset as the tract it is on postdp's spine, Block_Group and
Block; ``GEOID`` the spine geocode without the primitive geounit's digit). Prim and
Tract_Subset_Group are the design's own and are not tabulated. A geounit with no one in the
release has no long rows; its file names it (:data:`~postdp.nmf._output.EMPTY`), and it gets
a row of zeros here. Rows come in geocode order. No margin of error comes with them (the
integral DHC release carries none).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from postdp._files import new_temporary, sha256, write_atomic
from postdp.data import geoid_names
from postdp.errors import ValidationError
from postdp.nmf._io import _pyarrow
from postdp.nmf._output import EMPTY, MANIFEST_FILE, PLAN_FILE
from postdp.tables import PublishedTable

__all__ = ["tabulate", "tabulated_levels", "tabulated_tables"]

#: Rows read from a partition at a time (2,016 cells: 33 MB of float64 per copy; the
#: tabulation of three synthetic states peaked at 0.50 GB with it, 1.12 GB with 8,192 rows,
#: and was no slower). A level's margins of error are held whole only where they are not
#: stored beside its estimates.
BATCH_ROWS = 2048
#: Real numbers in the CSV files (margins of error; the counts of a real-valued method): 4
#: decimals (the Parquet files hold every bit).
CSV_FLOAT = "%.4f"
#: The moe form's column of a variable.
MOE_SUFFIX = "_moe"
#: Rows of a DHC release's long form read at a time (each spread over the tables' rows:
#: 2 x 65,536 x 258 float64, 270 MB at most).
LONG_ROWS = 65_536
#: The DHC levels tabulated: their geounits are tabulation geographies (a spine geocode's
#: width to its GEOID's: the primitive geounit's digit, the sixth, left out below County).
DHC_GEOIDS = {"US": 0, "State": 2, "County": 5, "Tract_Subset": 12, "Block_Group": 13, "Block": 16}
_ID_COLUMNS = ("GEOID", "NAME", "AIAN_BRANCH", "GEOLEVEL")


def tabulated_levels(release: str | os.PathLike[str]) -> tuple[list[str], bool]:
    """The geolevels of a post-processed run, root first, and whether it carries margins
    of error (its ``moe`` form).

    Parameters
    ----------
    release : path
        A finished :func:`postdp.nmf.postprocess` output folder.

    Returns
    -------
    levels : list of str
    margins : bool
    """
    found = _Release(Path(release))
    return list(found.levels), found.has_moe


def tabulated_tables(
    release: str | os.PathLike[str], tables: Sequence[str] | None = None
) -> list[str]:
    """The tables a post-processed run makes: ``tables`` checked against its cells, or
    every one it makes.

    Parameters
    ----------
    release : path
        A finished :func:`postdp.nmf.postprocess` output folder.
    tables : sequence of str, optional
        Table names (P1..P5, H1; P12, PCT12 of a DHC persons release).

    Returns
    -------
    list of str

    Raises
    ------
    ValidationError
        For a table the release's cells do not make.
    """
    return [t.name for t in _Release(Path(release)).tables(tables)]


def tabulate(
    release: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    tables: Sequence[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Path]:
    """Write the P.L. 94-171 tables of a post-processed run, one file per geolevel.

    Parameters
    ----------
    release : path
        A finished :func:`postdp.nmf.postprocess` output folder (its manifest written and
        every file's SHA-256 as the manifest records it; a changed file is refused).
    output_dir : path
        An existing folder; ``<Geolevel>.csv``, ``<Geolevel>.parquet`` and
        ``variables.csv`` are written into it, each under a temporary name renamed into
        place (existing ones replaced).
    tables : sequence of str, optional
        Some of P1..P5 (a persons release) or H1 (a units release), or of P12 and PCT12 (a
        release of the DHC persons design); default every table the release's cells make.
    progress : callable, optional
        ``progress(level, done, total)`` as a level starts (``done`` 0) and after each of
        its partition files.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValidationError
        For a folder that is not a finished post-processing, a file changed since, a
        table the release's cells do not make, or a margin-of-error file whose geounits
        are not the estimates'.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import postprocess, synthetic_run
    >>> tmp = tempfile.mkdtemp()
    >>> run = synthetic_run(tmp + "/run", states=["11"], seed=0, scale=0.05)
    >>> out = postprocess(run, tmp + "/out", method="topdown-2020")
    >>> files = tabulate(out, tmp, tables=["P1"])
    >>> county = pd.read_parquet(tmp + "/County.parquet")
    >>> county.loc[0, ["GEOID", "NAME"]].tolist()
    ['11001', 'District of Columbia, District of Columbia']
    """
    found = _Release(Path(release))
    chosen = found.tables(tables)
    folder = Path(output_dir)
    if not folder.is_dir():
        raise ValidationError(f"{str(folder)!r} is not a folder")
    if folder.resolve() == found.path.resolve() or found.path.resolve() in folder.resolve().parents:
        raise ValidationError(f"{str(folder)!r} is inside the release; write the tables elsewhere")
    found.verify()
    written = [_write_variables(chosen, folder / "variables.csv")]
    for level in found.levels:
        files = found.files(level)
        if progress is not None:
            progress(level, 0, len(files))
        with _LevelWriter(folder, level, _columns(chosen, found.has_moe), found.integral) as out:
            for k, path in enumerate(files):
                for frame in found.rows(level, path, chosen):
                    out.write(frame)
                if progress is not None:
                    progress(level, k + 1, len(files))
        written += out.paths
    return written


class _Release:
    """A finished post-processing folder: its plan, levels, files and forms."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not (path / PLAN_FILE).is_file():
            raise ValidationError(f"{str(path)!r} is not a postdp post-processing output")
        if not (path / MANIFEST_FILE).is_file():
            raise ValidationError(
                f"{str(path)!r}: the post-processing is not finished (no {MANIFEST_FILE}); run the "
                "same postdp postprocess command again to finish it"
            )
        try:
            self.plan = json.loads((path / PLAN_FILE).read_text(encoding="utf-8"))
            self.manifest = json.loads((path / MANIFEST_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ValidationError(f"{str(path)!r}: its plan or manifest is unreadable") from None
        from postdp.postprocess import parse_table_method

        self.integral = parse_table_method(str(self.plan.get("method", ""))).integral
        wide = path / "wide"
        found = {p.name.removesuffix(".parquet") for p in wide.glob("*.parquet")}
        from postdp.nmf._layout import LEVELS_2020

        order = [n for n in LEVELS_2020 if n in found]
        self.levels = order + sorted(found - set(order))
        self.form = "wide"
        if not self.levels and (path / "long").is_dir():  # the DHC persons design's release
            long = {p.name.removesuffix(".parquet") for p in (path / "long").glob("*.parquet")}
            self.form, self.levels, self.has_moe = (
                "long",
                [n for n in DHC_GEOIDS if n in long],
                False,
            )
            if not self.levels:
                raise ValidationError(f"{str(path)!r}: no level of the DHC design to tabulate")
            self.cells = ()
            return
        if not self.levels:
            raise ValidationError(f"{str(path)!r}: no wide form to tabulate")
        self.has_moe = (path / "moe").is_dir()
        first = self.files(self.levels[0])
        if not first:
            raise ValidationError(f"{str(path)!r}: level {self.levels[0]} has no files")
        _, pq = _pyarrow()
        names = pq.read_schema(first[0]).names
        self.cells = tuple(c for c in names if c not in ("geocode", "total", "State"))

    def tables(self, names: Sequence[str] | None) -> list[PublishedTable]:
        from postdp.data import DHC_TABLES, dhc_tables, pl94_tables

        if self.form == "long":
            unknown = [n for n in names or () if n not in DHC_TABLES]
            if unknown:
                raise ValidationError(
                    f"table {unknown[0]} is not made from a DHC persons release; it makes "
                    f"{', '.join(DHC_TABLES)}"
                )
            return list(dhc_tables(names).values())

        every = pl94_tables()
        fits = [t for t in every.values() if t.schema.cells == self.cells]
        if names is None:
            if not fits:
                raise ValidationError(
                    f"{str(self.path)!r}: its cells are not those of the 2020 persons or "
                    "units histograms; no P.L. 94-171 table is made from them"
                )
            return fits
        chosen = pl94_tables(names)  # refuses an unknown name
        for name, table in chosen.items():
            if table not in fits:
                raise ValidationError(
                    f"table {name} is made from the {table.unit} histogram's cells; this "
                    "release holds other cells"
                )
        return list(chosen.values())

    def files(self, level: str, form: str | None = None) -> list[Path]:
        root = self.path / (form or self.form) / f"{level}.parquet"
        return sorted(
            p
            for p in root.rglob("*.parquet")
            if p.is_file() and not any(s.startswith(".") for s in p.relative_to(root).parts)
        )

    def verify(self) -> None:
        """Every file the manifest lists has the SHA-256 it records."""
        for name, digest in self.manifest.get("files", {}).items():
            path = self.path / name
            if not path.is_file() or sha256(path) != digest:
                raise ValidationError(
                    f"{str(path)!r} changed or is missing since the post-processing "
                    "finished; post-process the run again"
                )

    def rows(self, level: str, path: Path, tables: list[PublishedTable]) -> Iterator[pd.DataFrame]:
        """The tables' rows of one partition file, a batch at a time."""
        if self.form == "long":
            yield self._long_rows(level, path, tables)
            return
        _, pq = _pyarrow()
        wide = pq.ParquetFile(path)
        margins = self._margins(level, path, wide.metadata.num_rows)
        columns = ["geocode", *self.cells]
        for batch in wide.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            geocodes = np.asarray(batch.column(0).to_pylist(), dtype=object)
            cells = np.column_stack(
                [batch.column(j + 1).to_numpy() for j in range(len(self.cells))]
            )
            values = cells.astype(np.int64) if self.integral else cells.astype(np.float64)
            moe = None if margins is None else margins(geocodes)
            parts: dict[str, Any] = {}
            for table in tables:
                counts = table.apply(values)
                for j, code in enumerate(table.codes):
                    parts[code] = counts[:, j]
                    if moe is not None:
                        if code + MOE_SUFFIX not in moe:
                            raise ValidationError(
                                f"{str(path)!r}: no margin of error of {code} in the release"
                            )
                        parts[code + MOE_SUFFIX] = moe[code + MOE_SUFFIX].to_numpy()
            yield pd.concat([_identify(geocodes, level), pd.DataFrame(parts)], axis=1)

    def _long_rows(self, level: str, path: Path, tables: list[PublishedTable]) -> pd.DataFrame:
        """The tables' rows of one partition file of a DHC release's long form: each long
        row (one nonzero cell of a geounit) spread over the tables' rows by its attributes'
        factor columns, summed by geounit."""
        from postdp.nmf._output import long_cells

        pa, pq = _pyarrow()
        schema = tables[0].schema
        blocks = [b for t in tables for b in t.blocks]
        width = sum(b.size for b in blocks)
        geocodes: dict[str, int] = {}
        totals = np.zeros((0, width))
        for batch in pq.ParquetFile(path).iter_batches(batch_size=LONG_ROWS):
            names = batch.column("geocode").to_pylist()
            rows = np.array([geocodes.setdefault(g, len(geocodes)) for g in names])
            cells = long_cells(pa.Table.from_batches([batch]), schema)
            levels = np.unravel_index(cells, schema.shape)
            count = batch.column("estimate").to_numpy().astype(np.float64)
            spread = np.empty((len(names), width))
            start = 0
            for b in blocks:
                v = count[:, None]
                for factor, level_ in zip(b.factors, levels, strict=True):
                    v = (v[:, :, None] * factor[:, level_].T[:, None, :]).reshape(len(names), -1)
                spread[:, start : start + b.size] = v
                start += b.size
            order = np.argsort(rows, kind="stable")
            present, starts = np.unique(rows[order], return_index=True)
            sums = np.add.reduceat(spread[order], starts, axis=0)
            if len(geocodes) > totals.shape[0]:  # room for the geounits new in this batch
                totals = np.concatenate(
                    [totals, np.zeros((len(geocodes) - totals.shape[0], width))]
                )
            totals[present] += sums
        noted = (pq.read_schema(path).metadata or {}).get(EMPTY.encode())
        empty = [g for g in json.loads(noted) if g not in geocodes] if noted else []
        keys = list(geocodes) + empty  # the geounits estimated to hold no one: rows of 0
        totals = np.concatenate([totals, np.zeros((len(empty), width))])
        order = np.argsort(np.array(keys, dtype=object), kind="stable")
        counts = np.rint(totals).astype(np.int64) if self.integral else totals
        codes = [c for t in tables for c in t.codes]
        keys = [keys[k] for k in order]
        frame = pd.DataFrame(counts[order], columns=codes)
        return pd.concat([_dhc_identify(keys, level), frame], axis=1)

    def _margins(self, level: str, path: Path, rows: int) -> Callable[[Any], pd.DataFrame] | None:
        """The moe form's rows for each batch of a wide partition file: its twin file read
        in step (the same geounits in the same order, as ``project`` writes them), else the
        level's margins joined by geocode (as the approximate Monte Carlo writes them)."""
        if not self.has_moe:
            return None
        _, pq = _pyarrow()
        twin = self.path / "moe" / path.relative_to(self.path / "wide")
        if twin.is_file() and pq.ParquetFile(twin).metadata.num_rows == rows:
            batches = pq.ParquetFile(twin).iter_batches(batch_size=BATCH_ROWS)

            def in_step(geocodes: Any) -> pd.DataFrame:
                frame: pd.DataFrame = next(batches).to_pandas()
                if frame["geocode"].tolist() != list(geocodes):
                    raise ValidationError(
                        f"{str(twin)!r}: its geounits are not those of {str(path)!r}"
                    )
                return frame

            return in_step
        sources = self.files(level, "moe")
        if not sources:
            raise ValidationError(f"{str(self.path)!r}: no margins of error for level {level}")
        frames = [pq.read_table(p).to_pandas() for p in sources]
        joined = pd.concat(frames, ignore_index=True).set_index("geocode")

        def by_geocode(geocodes: Any) -> pd.DataFrame:
            missing = ~pd.Index(geocodes).isin(joined.index)
            if missing.any():
                raise ValidationError(
                    f"{str(self.path)!r}: no margins of error for geounit "
                    f"{geocodes[int(np.argmax(missing))]!r} of level {level}"
                )
            picked: pd.DataFrame = joined.loc[list(geocodes)]
            return picked

        return by_geocode


def _identify(geocodes: Any, level: str) -> pd.DataFrame:
    """GEOID, NAME, AIAN_BRANCH and GEOLEVEL of geocodes (an AIAN flag, then the GEOID)."""
    geoids = np.array([g[1:] if g else "US" for g in geocodes], dtype=object)
    branch = np.array([g.startswith("1") for g in geocodes], dtype=bool)
    return pd.DataFrame(
        {
            "GEOID": pd.array(geoids, dtype="string"),
            "NAME": pd.Series(geoid_names(list(geoids)), dtype="string"),
            "AIAN_BRANCH": branch,
            "GEOLEVEL": pd.array([level] * len(geoids), dtype="string"),
        }
    )


def _dhc_identify(geocodes: list[str], level: str) -> pd.DataFrame:
    """GEOID, NAME, AIAN_BRANCH and GEOLEVEL of a DHC release's geocodes (an AIAN flag,
    then the spine geocode, whose primitive geounit's digit, the sixth, is dropped below
    County)."""
    spine = [g[1:] for g in geocodes]
    geoids = [c[:5] + c[6:] if len(c) > 5 else (c or "US") for c in spine]
    return pd.DataFrame(
        {
            "GEOID": pd.array(geoids, dtype="string"),
            "NAME": pd.Series(geoid_names(geoids), dtype="string"),
            "AIAN_BRANCH": np.array([g.startswith("1") for g in geocodes], dtype=bool),
            "GEOLEVEL": pd.array([level] * len(geoids), dtype="string"),
        }
    )


def _columns(tables: list[PublishedTable], moe: bool) -> list[str]:
    out = list(_ID_COLUMNS)
    for table in tables:
        for code in table.codes:
            out += [code, code + MOE_SUFFIX] if moe else [code]
    return out


def _write_variables(tables: list[PublishedTable], path: Path) -> Path:
    rows = [
        {
            "variable": code,
            "table": t.name,
            "title": t.title,
            "label": label,
            "universe": t.universe,
            "unit": t.unit,
            "margin_of_error": f"{code}{MOE_SUFFIX} (90%, {t.unit})",
        }
        for t in tables
        for code, label in zip(t.codes, t.labels, strict=True)
    ]
    return _atomic_csv(pd.DataFrame(rows), path)


def _atomic_csv(frame: pd.DataFrame, path: Path) -> Path:
    write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))
    return path


class _LevelWriter:
    """A level's CSV and Parquet files, appended a batch at a time under temporary names
    and renamed into place when the level is complete."""

    def __init__(self, folder: Path, level: str, columns: list[str], integral: bool) -> None:
        pa, _ = _pyarrow()
        self.paths = [folder / f"{level}.csv", folder / f"{level}.parquet"]
        self.columns = columns
        count = pa.int64() if integral else pa.float64()
        fields = [
            pa.field(c, pa.string() if c in ("GEOID", "NAME", "GEOLEVEL") else pa.bool_())
            for c in _ID_COLUMNS
        ]
        fields += [
            pa.field(c, pa.float64() if c.endswith(MOE_SUFFIX) else count)
            for c in columns[len(_ID_COLUMNS) :]
        ]
        self.schema = pa.schema(fields)
        self.tmp: list[Path] = []

    def __enter__(self) -> _LevelWriter:
        _, pq = _pyarrow()
        for p in self.paths:
            self.tmp.append(new_temporary(p))
        self.csv = open(self.tmp[0], "w", encoding="utf-8", newline="")
        self.csv.write(",".join(self.columns) + "\n")
        self.parquet = pq.ParquetWriter(self.tmp[1], self.schema, write_page_checksum=True)
        return self

    def write(self, frame: pd.DataFrame) -> None:
        pa, _ = _pyarrow()
        frame = frame[self.columns]
        frame.to_csv(self.csv, index=False, header=False, float_format=CSV_FLOAT)
        self.parquet.write_table(pa.Table.from_pandas(frame, self.schema, preserve_index=False))

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.csv.close()
        self.parquet.close()
        try:
            if kind is None:
                for tmp, path in zip(self.tmp, self.paths, strict=True):
                    os.replace(tmp, path)
        finally:
            for tmp in self.tmp:
                tmp.unlink(missing_ok=True)

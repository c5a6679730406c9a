"""Block histograms from Parquet, read one state at a time into a tabulation table.

An agency that has already tabulated its counts (or a user re-measuring a post-processed
release) gives each block's detailed histogram instead of person records, in either form
that ``postdp postprocess`` writes:

- *wide*: a ``geocode`` column and one column per detailed cell, named as the schema's
  cells (``Schema.cells``; for the persons schema e.g. ``household|under 18|not
  hispanic|white``);
- *long*: ``geocode``, ``category`` (a cell's name) and ``count``.

A ``geocode`` is a block's 15-digit tabulation GEOID (state 2, county 3, tract 6, block 4,
the block's first digit its block group), text or an integer; the 16-digit geocode of the
noisy measurement files (an AIAN flag, then the GEOID) is read as its GEOID. Rows of one
block (and cell) add up; a block listed with no count stays in the geography as an empty
block, which person records cannot show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from postdp.data._persons import block_table
from postdp.data._states import check_states
from postdp.errors import ValidationError
from postdp.tables import Schema, Table

__all__ = ["histogram_batches", "histogram_states", "read_histograms"]

#: Values per batch read (32 MB as 64-bit integers). A wide batch is held as Arrow columns
#: and as the (rows, cells) array filled column by column from them (no pandas frame of
#: every column), and the scan reads one batch ahead, not Arrow's default 16. Measured on
#: 2,054 blocks x 2,016 cells in one row group: checking the file took 210 MB above the
#: imports before these bounds, 153 MB after; the rest is Parquet decoding the row group.
_BATCH = 1 << 22


def read_histograms(
    path: str | os.PathLike[str], schema: Schema, *, states: Sequence[str] | None = None
) -> Table:
    """The tabulation table of block histograms in a Parquet file or folder (see the module
    notes), only the states asked for.

    Parameters
    ----------
    path : path
        A Parquet file or folder (any Hive partitioning), wide or long form.
    schema : Schema
        Whose cells the columns (wide) or ``category`` values (long) name, e.g.
        ``load_strategy(name).schema``.
    states : sequence of str, optional
        2-digit FIPS codes; the rows of other states are skipped (by the files' statistics
        where the rows are sorted or partitioned by state).

    Returns
    -------
    Table
        Sparse; US > state > county > tract > block group > block, ids the tabulation
        GEOIDs, categories ``schema.categories()``.

    Raises
    ------
    ValidationError
        As :func:`histogram_states`; or no block of the states asked for.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.tables import units_schema
    >>> f = tempfile.mkdtemp() + "/h.parquet"
    >>> pd.DataFrame({"geocode": ["110010001001001", "100010401001000"],
    ...               "vacant": [3, 0], "occupied": [40, 0]}).to_parquet(f)
    >>> t = read_histograms(f, units_schema(), states=["11"])
    >>> t.geography.ids[t.geography.leaves].tolist(), t.dense_cells().tolist()
    (['110010001001001'], [[3, 40]])
    """
    blocks, cells, counts = [], [], []
    for block, cell, count in _batches(path, schema, states):
        blocks.append(block)
        cells.append(cell)
        counts.append(count)
    if not blocks or not sum(b.size for b in blocks):
        raise ValidationError(f"{str(path)!r}: no block of the states {list(states or [])}")
    return block_table(
        np.concatenate(blocks), np.concatenate(cells), np.concatenate(counts), schema
    )


def histogram_states(path: str | os.PathLike[str], schema: Schema) -> list[str]:
    """Check every row of a Parquet file or folder of block histograms (geocodes, cell
    names, counts whole and nonnegative; in batches, before any draw) and return the states
    they cover, sorted.

    Parameters
    ----------
    path : path
    schema : Schema

    Returns
    -------
    list of str

    Raises
    ------
    ValidationError
        For a missing ``geocode``, a wide file without every cell's column, a long file with
        an unknown ``category``, a geocode that is not a block's, or a count that is
        negative or not whole (the message names the column, never a count).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.tables import units_schema
    >>> f = tempfile.mkdtemp() + "/h.parquet"
    >>> pd.DataFrame({"geocode": ["110010001001001", "100010401001000"],
    ...               "vacant": [3, 0], "occupied": [40, -1]}).to_parquet(f)
    >>> try:
    ...     histogram_states(f, units_schema())
    ... except ValueError as err:
    ...     print(err)
    occupied: counts must be whole numbers >= 0
    """
    found: set[str] = set()
    rows = 0
    for block, _, _ in _batches(path, schema, None):
        rows += block.size
        found |= {b[:2] for b in np.unique(block.astype("U2"))}
    if not rows:
        raise ValidationError(f"{str(path)!r}: no block histograms")
    return sorted(found)


def histogram_batches(
    path: str | os.PathLike[str], schema: Schema, *, states: Sequence[str] | None = None
) -> Iterator[tuple[Any, Any, Any]]:
    """The rows of block histograms in a Parquet file or folder (see the module notes),
    batch by batch, every value checked as it is read: what :func:`read_histograms`
    tabulates, without holding it all in memory.

    Parameters
    ----------
    path : path
        A Parquet file or folder (any Hive partitioning), wide or long form.
    schema : Schema
        Whose cells the columns (wide) or ``category`` values (long) name.
    states : sequence of str, optional
        2-digit FIPS codes; the rows of other states are skipped. All states by default.

    Returns
    -------
    iterator of (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Per batch of rows: the blocks' 15-digit GEOIDs (str), the cells' indices in
        ``schema.cells`` (int64) and their counts (int64). A block of one batch or cell
        may appear again in another (the counts add up); a wide row's cells of count 0 are
        left out, and a block with no count at all comes once, as cell 0 with count 0.

    Raises
    ------
    ValidationError
        As :func:`histogram_states`, when the batch that holds the bad value is read.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.tables import units_schema
    >>> f = tempfile.mkdtemp() + "/h.parquet"
    >>> pd.DataFrame({"geocode": ["110010001001001", "100010401001000"],
    ...               "vacant": [3, 0], "occupied": [40, 0]}).to_parquet(f)
    >>> [(b.tolist(), c.tolist(), n.tolist()) for b, c, n in histogram_batches(f, units_schema())]
    [(['110010001001001', '110010001001001', '100010401001000'], [0, 1, 0], [3, 40, 0])]
    """
    yield from _batches(path, schema, states)


def _batches(path: str | os.PathLike[str], schema: Schema, states: Sequence[str] | None) -> Any:
    """(block GEOIDs, cell indices, counts) of each batch of rows, every value checked."""
    import pyarrow.dataset as ds

    data = ds.dataset(str(path), format="parquet", partitioning="hive")
    names = data.schema.names
    if "geocode" not in names:
        raise ValidationError(f"{str(path)!r}: block histograms need a 'geocode' column")
    long = "category" in names
    if long:
        missing = [c for c in ("count",) if c not in names]
        columns = ["geocode", "category", "count"]
    else:
        missing = [c for c in schema.cells if c not in names]
        columns = ["geocode", *schema.cells]
    if missing:
        shown = missing if len(missing) <= 3 else [*missing[:3], f"... {len(missing)} in all"]
        form = "the long form" if long else "the wide form (one column per cell)"
        raise ValidationError(f"{str(path)!r}: {form} needs the columns {shown}")
    where = None if states is None else _state_filter(data.schema.field("geocode").type, states)
    index = {c: j for j, c in enumerate(schema.cells)}
    per_batch = max(1024, _BATCH // len(columns))  # about _BATCH values per batch
    batches = data.to_batches(
        columns=columns,
        filter=where,
        batch_size=per_batch,
        batch_readahead=1,
        fragment_readahead=1,
    )
    for batch in batches:
        if not batch.num_rows:
            continue
        block = _geoids(batch.column("geocode").to_pandas())
        check_states(np.unique(block.astype("U2")).tolist(), "geocode (its first two digits)")
        keep = np.ones(block.size, dtype=bool)
        if states is not None:  # a range filter may let a neighbouring code through
            keep = np.isin(block.astype("U2"), list(states))
        if long:
            frame = batch.to_pandas()
            cell = frame["category"].astype(str).map(index)
            if cell.isna().any():
                raise ValidationError("category: every value must be a cell of the schema")
            count = _counts(frame["count"], "count")
            yield block[keep], cell.to_numpy(np.int64)[keep], count[keep]
            continue
        values = _wide_counts(batch, schema.cells)[keep]
        picked = block[keep]
        rows, cols = np.nonzero(values)
        empty = np.flatnonzero(~values.any(axis=1))  # empty blocks stay geounits
        yield (
            np.concatenate([picked[rows], picked[empty]]),
            np.concatenate([cols, np.zeros(empty.size, dtype=np.int64)]),
            np.concatenate([values[rows, cols], np.zeros(empty.size, dtype=np.int64)]),
        )


def _wide_counts(batch: Any, cells: Sequence[str]) -> Any:
    """The cell columns of an Arrow record batch as one (rows, cells) integer array, filled
    column by column (no frame of every column), each checked as it is copied: the first
    bad column in the schema's order is named."""
    out = np.empty((batch.num_rows, len(cells)), dtype=np.int64)
    for j, c in enumerate(cells):
        column = batch.column(c)
        values = column.to_numpy(zero_copy_only=False)
        if column.null_count or values.dtype.kind != "i" or (values < 0).any():
            values = _counts(pd.Series(values), c)  # names the column, never a count
        out[:, j] = values
    return out


def _geoids(column: pd.Series) -> Any:
    """15-digit block GEOIDs of a ``geocode`` column (a 14-digit integer zero-padded; a
    16-digit NMF geocode loses its AIAN flag)."""
    text = column.astype(str).str.strip()
    if not text.str.isdigit().all():
        raise ValidationError("geocode: every value must be a block's digits")
    if pd.api.types.is_integer_dtype(column.dtype):  # a state 01-09 lost its leading 0
        text = text.where(text.str.len() != 14, text.str.zfill(15))
    text = text.where(text.str.len() != 16, text.str[1:])
    if not (text.str.len() == 15).all():
        raise ValidationError(
            "geocode: every value must be a block's 15-digit GEOID (or the 16-digit geocode "
            "of the noisy measurement files)"
        )
    return text.to_numpy(dtype=object).astype(str)


def _counts(column: pd.Series, name: str) -> Any:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(values).any() or (values != np.round(values)).any() or (values < 0).any():
        raise ValidationError(f"{name}: counts must be whole numbers >= 0")
    return values.astype(np.int64)


def _state_filter(kind: Any, states: Sequence[str]) -> Any:
    """A range filter on ``geocode`` per state (15-digit text or integer GEOIDs, and the
    16-digit text geocodes): lets Parquet statistics skip the other states' row groups."""
    import pyarrow.dataset as ds

    field = ds.field("geocode")
    parts = []
    for s in states:
        n = int(s)
        if "int" in str(kind):
            parts.append((field >= n * 10**13) & (field < (n + 1) * 10**13))
            continue
        for low, high in ((f"{n:02d}", f"{n + 1:02d}"), (f"0{n:02d}", f"0{n + 1:02d}")):
            parts.append((field >= low) & (field < high))
        parts.append((field >= f"1{n:02d}") & (field < f"1{n + 1:02d}"))
    where = parts[0]
    for part in parts[1:]:
        where = where | part
    return where

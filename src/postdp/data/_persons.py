"""Person records (the Census Bureau's privacy-protected microdata file layout) tabulated
into a 2020 persons table, one state at a time.

The columns are those of the 2020 Privacy-Protected Microdata File (PPMF) persons file:
``TABBLKST`` (state FIPS, 2 digits), ``TABBLKCOU`` (county, 3), ``TABTRACTCE`` (tract, 6),
``TABBLKGRPCE`` (block group, 1), ``TABBLK`` (block, 4, its first digit the block group),
``GQTYPE_PL`` (0 household, 1-7 the group-quarters types), ``VOTING_AGE`` (1 under 18, 2
18 or over), ``CENHISP`` (1 not Hispanic, 2 Hispanic) and ``CENRACE`` (01-63, the race
combinations in the order of :func:`postdp.tables.pl94_schema`). Each person falls in the cell
((GQTYPE_PL x 2 + VOTING_AGE - 1) x 2 + CENHISP - 1) x 63 + CENRACE - 1 of the 2,016.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from postdp.data._states import check_states
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Schema, Table

__all__ = ["PERSON_COLUMNS", "person_states", "read_persons", "tabulate_persons"]

#: The columns a person record needs, with their widths (geography) or ranges (attributes).
GEOGRAPHY = {"TABBLKST": 2, "TABBLKCOU": 3, "TABTRACTCE": 6, "TABBLKGRPCE": 1, "TABBLK": 4}
ATTRIBUTES = {"GQTYPE_PL": (0, 7), "VOTING_AGE": (1, 2), "CENHISP": (1, 2), "CENRACE": (1, 63)}
PERSON_COLUMNS = (*GEOGRAPHY, *ATTRIBUTES)


def tabulate_persons(records: pd.DataFrame) -> Table:
    """The persons table of person records: US > state > county > tract > block group >
    block, the 2,016-cell histogram of every block that has a person.

    Parameters
    ----------
    records : pandas.DataFrame
        One row per person with :data:`PERSON_COLUMNS` (text or integers; codes are
        zero-padded to their widths).

    Returns
    -------
    Table
        Sparse; categories ``pl94_schema().categories()``; ids as
        :func:`synthetic_population`'s (tabulation GEOIDs). Blocks without a person are
        not in the geography (person records cannot show them).

    Raises
    ------
    ValidationError
        For a missing column, a code of the wrong width or out of range (a state not one of
        the 50 and DC), or a block whose first digit is not its block group (the message
        names the column, never a count).

    Examples
    --------
    >>> r = pd.DataFrame({"TABBLKST": ["11"] * 3, "TABBLKCOU": ["001"] * 3,
    ...                   "TABTRACTCE": ["000100"] * 3, "TABBLKGRPCE": ["1"] * 3,
    ...                   "TABBLK": ["1001", "1001", "1002"], "GQTYPE_PL": [0, 0, 3],
    ...                   "VOTING_AGE": [2, 1, 2], "CENHISP": [1, 1, 2], "CENRACE": [1, 1, 7]})
    >>> t = tabulate_persons(r)
    >>> t.geography.ids[t.geography.leaves].tolist(), int(t.cells.sum())
    (['110010001001001', '110010001001002'], 3)
    """
    from postdp.tables import pl94_schema

    missing = [c for c in PERSON_COLUMNS if c not in records.columns]
    if missing:
        raise ValidationError(f"person records need the columns {missing}")
    if records.empty:
        raise ValidationError("no person records")
    parts = {c: _codes(records[c], c, w) for c, w in GEOGRAPHY.items()}
    if (parts["TABBLK"].str[0] != parts["TABBLKGRPCE"]).any():
        raise ValidationError("TABBLK: a block's first digit must be its block group (TABBLKGRPCE)")
    check_states(parts["TABBLKST"].unique(), "TABBLKST")
    codes = {c: _attribute(records[c], c, lo, hi) for c, (lo, hi) in ATTRIBUTES.items()}
    cell = ((codes["GQTYPE_PL"] * 2 + codes["VOTING_AGE"] - 1) * 2 + codes["CENHISP"] - 1) * 63
    cell = cell + codes["CENRACE"] - 1
    tract = parts["TABBLKST"] + parts["TABBLKCOU"] + parts["TABTRACTCE"]
    block = (tract + parts["TABBLK"]).to_numpy()
    return block_table(block, cell, np.ones(cell.size, dtype=np.int64), pl94_schema())


def block_table(block: Any, cell: Any, count: Any, schema: Schema) -> Table:
    """The tabulation table (US > state > county > tract > block group > block) of counts
    given as (15-digit block GEOID, cell index, count) triples; triples of one block and
    cell add up, and a block whose counts are all 0 is kept (private)."""
    blocks, row = np.unique(np.asarray(block), return_inverse=True)
    counts = sparse.csr_array(
        (np.asarray(count, dtype=np.int64), (row, np.asarray(cell))),
        shape=(blocks.size, schema.size),
    )
    counts.sum_duplicates()
    counts.eliminate_zeros()
    ids: list[str] = ["US"]
    parents: list[str | None] = [None]
    seen: set[str] = set()
    for b in blocks:  # sorted, so every parent comes before its children
        for node, parent in ((b[:2], "US"), (b[:5], b[:2]), (b[:11], b[:5]), (b[:12], b[:11])):
            if node not in seen:
                seen.add(node)
                ids.append(node)
                parents.append(parent)
        ids.append(str(b))
        parents.append(b[:12])
    geo = Hierarchy.from_parents(ids, np.asarray(parents, dtype=object))
    order = pd.Index(blocks).get_indexer(geo.ids[geo.leaves].astype(str))
    cells: Any = counts[order]
    return Table(geo, schema.categories(), cells)


def read_persons(
    path: str | os.PathLike[str], *, states: Sequence[str] | None = None
) -> pd.DataFrame:
    """Person records from a Parquet file or folder (any Hive partitioning), only the
    states asked for (read with a filter: a state's rows only).

    Parameters
    ----------
    path : path
    states : sequence of str, optional
        2-digit FIPS codes.

    Returns
    -------
    pandas.DataFrame
        :data:`PERSON_COLUMNS` as text.

    Examples
    --------
    >>> import tempfile
    >>> r = pd.DataFrame({"TABBLKST": ["11"], "TABBLKCOU": ["001"], "TABTRACTCE": ["000100"],
    ...                   "TABBLKGRPCE": ["1"], "TABBLK": ["1001"], "GQTYPE_PL": [0],
    ...                   "VOTING_AGE": [2], "CENHISP": [1], "CENRACE": [1]})
    >>> f = tempfile.mkdtemp() + "/p.parquet"; r.to_parquet(f)
    >>> len(read_persons(f, states=["11"])), len(read_persons(f, states=["42"]))
    (1, 0)
    """
    import pyarrow.dataset as ds

    data = ds.dataset(str(path), format="parquet", partitioning="hive")
    missing = [c for c in PERSON_COLUMNS if c not in data.schema.names]
    if missing:
        raise ValidationError(f"{str(path)!r}: person records need the columns {missing}")
    where = None
    if states is not None:
        kind = data.schema.field("TABBLKST").type
        values = [int(s) for s in states] if "int" in str(kind) else [str(s) for s in states]
        where = ds.field("TABBLKST").isin(values)
    table = data.to_table(columns=list(PERSON_COLUMNS), filter=where)
    out: pd.DataFrame = table.to_pandas().astype(str)
    return out


def person_states(path: str | os.PathLike[str]) -> list[str]:
    """Check every person record of a Parquet file or folder (each column's widths and
    ranges, in batches) and return the states they cover, sorted (run before any draw).

    Parameters
    ----------
    path : path

    Returns
    -------
    list of str

    Examples
    --------
    >>> import tempfile
    >>> r = pd.DataFrame({"TABBLKST": ["11", "10"], "TABBLKCOU": ["001"] * 2,
    ...                   "TABTRACTCE": ["000100"] * 2, "TABBLKGRPCE": ["1"] * 2,
    ...                   "TABBLK": ["1001"] * 2, "GQTYPE_PL": [0, 9], "VOTING_AGE": [2, 2],
    ...                   "CENHISP": [1, 1], "CENRACE": [1, 1]})
    >>> f = tempfile.mkdtemp() + "/p.parquet"; r.to_parquet(f)
    >>> try:
    ...     person_states(f)
    ... except ValueError as err:
    ...     print(err)
    GQTYPE_PL: codes must be 0 to 7
    """
    import pyarrow.dataset as ds

    data = ds.dataset(str(path), format="parquet", partitioning="hive")
    missing = [c for c in PERSON_COLUMNS if c not in data.schema.names]
    if missing:
        raise ValidationError(f"{str(path)!r}: person records need the columns {missing}")
    found: set[str] = set()
    rows = 0
    for batch in data.to_batches(columns=list(PERSON_COLUMNS), batch_size=1 << 20):
        frame = batch.to_pandas()
        if frame.empty:
            continue
        rows += len(frame)
        parts = {c: _codes(frame[c], c, w) for c, w in GEOGRAPHY.items()}
        if (parts["TABBLK"].str[0] != parts["TABBLKGRPCE"]).any():
            raise ValidationError("TABBLK: a block's first digit must be its block group")
        for c, (lo, hi) in ATTRIBUTES.items():
            _attribute(frame[c], c, lo, hi)
        states = set(parts["TABBLKST"].unique())
        check_states(states, "TABBLKST")
        found |= states
    if not rows:
        raise ValidationError(f"{str(path)!r}: no person records")
    return sorted(found)


def _codes(column: pd.Series, name: str, width: int) -> pd.Series:
    text = column.astype(str).str.strip()
    text = text.where(text.str.len() >= width, text.str.zfill(width))
    if not (text.str.len() == width).all() or not text.str.isdigit().all():
        raise ValidationError(f"{name}: codes must be {width} digits")
    return text


def _attribute(column: pd.Series, name: str, lo: int, hi: int) -> np.ndarray:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(values).any() or (values != np.round(values)).any():
        raise ValidationError(f"{name}: codes must be whole numbers {lo} to {hi}")
    if values.size and (values.min() < lo or values.max() > hi):
        raise ValidationError(f"{name}: codes must be {lo} to {hi}")
    return values.astype(np.int64)

"""Group-quarters facilities and housing units per block, and the 2020 persons release's
structural bounds built on them (``shared/research/pl94-2020-design.md`` section 1.4).

The 2020 persons run held, per block, an invariant 8-vector ``gqhh_vect``: the number of
housing units and of group-quarters facilities of each of the 7 types, summed up the spine
to every geounit. On it rest three constraints, at every geounit:

- ``hhgq_total_lb``: persons in GQ type k at least the number of type-k facilities;
- ``hhgq_total_ub``: persons in type k (households: k = 0, housing units) at most 99,999
  per facility (unit), that is 0 where there is none -- postdp holds that bound at 0 and
  leaves the others infinite (99,999 people per facility never binds);
- ``nurse_nva_0``: no one under 18 in a nursing facility.

No confidential facility list exists here: :func:`synthetic_facilities` derives one from a
synthetic population (a facility of each type a block's residents live in, housing units
for its household residents plus vacant ones), documented as synthetic.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Marginal, Table
from postdp.tables.bounds import CountBounds

__all__ = [
    "DHC_FACILITY_COLUMNS",
    "FACILITY_COLUMNS",
    "check_facilities",
    "dhc_facility_bounds",
    "facility_bounds",
    "read_facilities",
    "synthetic_dhc_facilities",
    "synthetic_facilities",
]

#: The columns of a block's facility vector: housing units, then GQ facilities by type.
FACILITY_COLUMNS = (
    "housing_units",
    "adult_correctional",
    "juvenile",
    "nursing",
    "other_institutional",
    "college_housing",
    "military_quarters",
    "other_noninstitutional",
)
#: The columns of a block's facilities by the DHC's 24 detailed group-quarters types
#: (:func:`dhc_facility_bounds`): each type's code, the first word of its ``relgq`` level in
#: :func:`postdp.tables.dhc_schema` (``GQ101 federal detention`` ... ``GQ997 other
#: noninstitutional``), in that order.
DHC_FACILITY_COLUMNS = (
    "GQ101", "GQ102", "GQ103", "GQ104", "GQ105", "GQ106",
    "GQ201", "GQ202", "GQ203",
    "GQ301",
    "GQ401", "GQ402", "GQ403", "GQ404", "GQ405",
    "GQ501",
    "GQ601", "GQ602",
    "GQ701", "GQ801", "GQ802", "GQ900", "GQ901", "GQ997",
)  # fmt: skip
_NURSING = 3
_DHC_FIRST_GQ, _DHC_GQ_TYPES = 18, 24  # relgq 18-41: the DHC's detailed GQ types
_PEOPLE_PER_UNIT = 2.5  # about the 2020 average household size
_VACANT_ONLY = 0.3  # share of blocks with no people that hold (vacant) housing units


def _block_counts(facilities: ArrayLike, n_leaves: int, columns: int, what: str) -> Any:
    """Facility counts per block: shape (n_leaves, columns), nonnegative whole numbers."""
    values = np.asarray(facilities)
    if values.shape != (n_leaves, columns):
        raise ValidationError(
            f"`facilities` must have shape {(n_leaves, columns)} (blocks x {what}); got "
            f"{values.shape}"
        )
    if not np.issubdtype(values.dtype, np.number) or not np.isfinite(values).all():
        raise ValidationError("`facilities` must hold nonnegative whole numbers")
    if (values < 0).any() or (values != np.rint(values)).any():
        raise ValidationError("`facilities` must hold nonnegative whole numbers")
    return values


def facility_bounds(
    facilities: ArrayLike, geography: Hierarchy, *, known: ArrayLike | None = None
) -> tuple[CountBounds, ...]:
    """The 2020 persons release's structural bounds from block facility counts.

    Parameters
    ----------
    facilities : array_like of int, shape (n_leaves, 8)
        Per leaf, in ``geography.leaves`` order: housing units, then GQ facilities of
        types 1-7 (:data:`FACILITY_COLUMNS`).
    geography : Hierarchy
        The table's geography (leaves: blocks).
    known : array_like of bool, shape (n_leaves,), optional
        The leaves whose facilities are known (default all); an unknown leaf is bounded by
        nothing, nor are its ancestors above (their lower bounds count the known leaves).

    Returns
    -------
    tuple of CountBounds
        ``hhgq_total`` on the ``hhgq`` marginal (type k at least its facilities, 0 where
        there is none; household persons 0 where there is no housing unit; ``sides="both"``,
        written as the Census's ``hhgq_total_lb_con`` / ``_ub_con`` pair) and
        ``nurse_nva_0`` on ``hhgq * votingage`` (no one under 18 in nursing; an upper bound
        alone, ``sides="upper"``, written as ``nurse_nva_0_con``), for every geounit
        (facilities summed up the geography).

    Raises
    ------
    ValidationError
        For a shape other than (n_leaves, 8), or counts that are not nonnegative whole
        numbers.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> lb, zero = facility_bounds([[3, 0, 0, 1, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0]], geo)
    >>> lb.lower[:, :4].tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]]
    >>> lb.upper[2].tolist()[:3], zero.upper[0, 6:8].tolist()
    ([0.0, inf, 0.0], [0.0, inf])
    """
    n_leaves = geography.leaves.size
    values = _block_counts(
        facilities, n_leaves, len(FACILITY_COLUMNS), "housing units and 7 GQ types"
    )
    seen = np.ones(n_leaves, dtype=bool) if known is None else np.asarray(known, dtype=bool)
    if seen.shape != (n_leaves,):
        raise ValidationError(f"`known` must have shape ({n_leaves},); got {seen.shape}")
    full = np.zeros((len(FACILITY_COLUMNS) + 1, geography.n), dtype=np.int64)
    full[:-1, geography.leaves] = np.where(seen[:, None], values, 0).T.astype(np.int64)
    full[-1, geography.leaves] = ~seen
    every = geography.aggregate(full).T  # (n, 9): the counts, then unknown leaves below
    lower = every[:, :-1].astype(np.float64)
    lower[:, 0] = 0.0  # vacant units exist: no lower bound on household persons
    upper = np.where((every[:, :-1] > 0) | (every[:, -1:] > 0), np.inf, 0.0)
    hhgq = CountBounds("hhgq", lower, upper, name="hhgq_total")
    nursing_upper = np.full((geography.n, 16), np.inf)
    nursing_upper[:, 2 * _NURSING] = 0.0  # hhgq x votingage: (nursing, under 18)
    nursing = CountBounds(
        "hhgq * votingage",
        np.zeros((geography.n, 16)),
        nursing_upper,
        name="nurse_nva_0",
        sides="upper",  # a zero, no lower bound: the Census's one-sided nurse_nva_0
    )
    return hhgq, nursing


def synthetic_facilities(table: Table, *, seed: int = 0) -> IntArray:
    """Synthetic block facility counts for a synthetic persons table: one facility of each
    GQ type a block's residents live in; housing units for its household residents (one per
    2.5 people, rounded up, plus about 10% vacant), and 1-3 vacant units in about 30% of
    blocks with no one. Synthetic: no confidential facility list exists here.

    Parameters
    ----------
    table : Table
        A persons table of the PL94 schema (e.g. :func:`synthetic_population`).
    seed : int, default 0
        Vacant units are drawn per state (the geounits one level below the root) from this
        seed and the state's id: a state's counts are the same in any selection of states.

    Returns
    -------
    ndarray of int64, shape (n_leaves, 8)
        In ``geography.leaves`` order; columns :data:`FACILITY_COLUMNS`.

    Examples
    --------
    >>> from postdp.nmf import synthetic_population
    >>> t = synthetic_population(["11"], seed=1)
    >>> f = synthetic_facilities(t, seed=1)
    >>> f.shape, bool((f[:, 1:] <= 1).all())
    ((16790, 8), True)
    """
    from postdp.tables import pl94_schema

    schema = pl94_schema()
    if table.categories.leaves.size != schema.size:
        raise ValidationError("`table` must be a persons table of the PL94 schema")
    geo = table.geography
    groups = Marginal(schema, "hhgq").count_matrix()  # (8, cells)
    people = groups @ table.cells.T  # (8, leaves), sparse or dense cells
    people = np.asarray(people.toarray() if hasattr(people, "toarray") else people).T
    people = people.astype(np.int64)
    out = np.zeros_like(people)
    out[:, 1:] = people[:, 1:] > 0
    states = geo.leaves.copy()  # each leaf's ancestor one level below the root
    while (deep := geo.depth[states] > 1).any():
        states[deep] = geo.parent[states[deep]]
    for state in np.unique(states):
        rows = np.flatnonzero(states == state)
        key = zlib.crc32(str(geo.ids[state]).encode())
        rng = np.random.default_rng(np.random.SeedSequence([seed, key]))
        household = people[rows, 0]
        units = np.ceil(household / _PEOPLE_PER_UNIT).astype(np.int64)
        units += rng.binomial(units, 0.1)
        empty = people[rows].sum(axis=1) == 0
        vacant = empty & (rng.random(rows.size) < _VACANT_ONLY)
        units[vacant] = rng.integers(1, 4, int(vacant.sum()))
        out[rows, 0] = units
    return out


def dhc_facility_bounds(
    facilities: ArrayLike, geography: Hierarchy, *, known: ArrayLike | None = None
) -> CountBounds:
    """The 2020 DHC persons design's group-quarters bounds from block facility counts by
    detailed type (``hhgq_total_lb/ub`` on household vs each of the 24 detailed types,
    ``dhc-2020-design.md`` section 3), for :func:`postdp.postprocess.top_down_2020`'s record
    switching.

    Parameters
    ----------
    facilities : array_like of int, shape (n_leaves, 24)
        Per leaf, in ``geography.leaves`` order, the facilities of each detailed
        group-quarters type (relgq 18 to 41 of :func:`postdp.tables.dhc_schema`, in order).
    geography : Hierarchy
        The table's geography (leaves: blocks).
    known : array_like of bool, shape (n_leaves,), optional
        The leaves whose facilities are known (default all): an unknown leaf is bounded by
        nothing, nor are its ancestors above (their lower bounds count the known leaves),
        as :func:`facility_bounds`'s.

    Returns
    -------
    CountBounds
        ``hhgq_total`` on the ``relgq`` marginal: at every geounit (facilities summed up the
        geography) each detailed type at least its facilities and none where there is none
        (the production's 99,999 persons per facility never binds: no upper bound); the 18
        household relationships unbounded.

    Raises
    ------
    ValidationError
        For a shape other than (n_leaves, 24), or counts that are not nonnegative whole
        numbers.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> f = np.zeros((2, 24), dtype=int); f[0, 0] = 2; f[1, 10] = 1
    >>> b = dhc_facility_bounds(f, geo)
    >>> b.lower[0, [18, 28]].tolist(), b.upper[2, [18, 28]].tolist(), float(b.upper[2, 0])
    ([2.0, 1.0], [0.0, inf], inf)
    """
    n_leaves = geography.leaves.size
    values = _block_counts(
        facilities, n_leaves, _DHC_GQ_TYPES, "the 24 detailed group-quarters types"
    )
    seen = np.ones(n_leaves, dtype=bool) if known is None else np.asarray(known, dtype=bool)
    if seen.shape != (n_leaves,):
        raise ValidationError(f"`known` must have shape ({n_leaves},); got {seen.shape}")
    full = np.zeros((_DHC_GQ_TYPES + 1, geography.n), dtype=np.int64)
    full[:-1, geography.leaves] = np.where(seen[:, None], values, 0).T.astype(np.int64)
    full[-1, geography.leaves] = ~seen
    every = geography.aggregate(full).T  # (n, 25): the counts, then unknown leaves below
    lower = np.zeros((geography.n, _DHC_FIRST_GQ + _DHC_GQ_TYPES))
    upper = np.full(lower.shape, np.inf)
    lower[:, _DHC_FIRST_GQ:] = every[:, :-1]
    upper[:, _DHC_FIRST_GQ:] = np.where((every[:, :-1] > 0) | (every[:, -1:] > 0), np.inf, 0.0)
    return CountBounds("relgq", lower, upper, name="hhgq_total")


def synthetic_dhc_facilities(table: Table) -> IntArray:
    """Synthetic block facility counts by detailed group-quarters type for a synthetic DHC
    persons table: one facility of each detailed type a block's residents live in.
    Synthetic: no confidential facility list exists here. The PL94 facilities of the same
    persons are their sums by major group (what :func:`facility_bounds` takes for the PL94
    release a DHC run is held to), so the two designs' bounds agree.

    Parameters
    ----------
    table : Table
        A persons table of :func:`postdp.tables.dhc_schema` (e.g.
        :func:`synthetic_dhc_population`).

    Returns
    -------
    ndarray of int64, shape (n_leaves, 24)
        In ``geography.leaves`` order; columns the detailed types (relgq 18 to 41).

    Examples
    --------
    >>> from postdp.data import synthetic_dhc_population
    >>> t = synthetic_dhc_population(["11"], seed=0, scale=0.001)
    >>> f = synthetic_dhc_facilities(t)
    >>> f.shape, int(f.max())
    ((17, 24), 1)
    """
    from postdp.tables import dhc_schema

    schema = dhc_schema()
    if table.categories.leaves.size != schema.size:
        raise ValidationError("`table` must be a persons table of the DHC schema")
    groups = Marginal(schema, "relgq").count_matrix()[_DHC_FIRST_GQ:]  # (24, cells)
    people = groups @ table.cells.T
    people = np.asarray(people.toarray() if hasattr(people, "toarray") else people).T
    out: IntArray = (people > 0).astype(np.int64)
    return out


def read_facilities(
    path: str | os.PathLike[str], geography: Hierarchy, *, detailed: bool = False
) -> tuple[IntArray, Any]:
    """Block facility counts from a Parquet or CSV file, for a geography's leaves.

    Parameters
    ----------
    path : path
        Columns ``geocode`` (a block's 15-digit GEOID, or the 16-digit NMF geocode) and
        :data:`FACILITY_COLUMNS`, whole numbers >= 0, one row per block.
    geography : Hierarchy
        Whose leaves (ids: block GEOIDs; with ``detailed``, the DHC spine's block geocodes
        too, :func:`postdp.data.dhc_spine`: the GEOID with the primitive geounit's digit
        after the county) the counts are for.
    detailed : bool, default False
        Facilities by the DHC's 24 detailed group-quarters types: the columns
        :data:`DHC_FACILITY_COLUMNS` in place of :data:`FACILITY_COLUMNS` (for
        :func:`dhc_facility_bounds`).

    Returns
    -------
    (ndarray of int64, shape (n_leaves, 8 or 24), ndarray of bool, shape (n_leaves,))
        The counts in ``geography.leaves`` order and which leaves the file has (the
        ``known`` of :func:`facility_bounds` and :func:`dhc_facility_bounds`).

    Raises
    ------
    ValidationError
        For a file that cannot be read, a missing column, a repeated block, or counts that
        are not nonnegative whole numbers.

    Examples
    --------
    >>> import tempfile
    >>> from postdp import Hierarchy
    >>> f = tempfile.mkdtemp() + "/f.csv"
    >>> row = {c: 0 for c in FACILITY_COLUMNS}
    >>> pd.DataFrame([{"geocode": "110010001001001", **row, "nursing": 1}]).to_csv(f)
    >>> geo = Hierarchy.from_parents(["US", "110010001001001", "110010001001002"],
    ...                              [None, "US", "US"])
    >>> counts, known = read_facilities(f, geo)
    >>> counts[:, 3].tolist(), known.tolist()
    ([1, 0], [True, False])
    """
    columns = list(DHC_FACILITY_COLUMNS if detailed else FACILITY_COLUMNS)
    frame = check_facilities(path, detailed=detailed)
    leaves = [str(i) for i in geography.ids[geography.leaves]]
    if detailed:  # a DHC spine block: its GEOID with the primitive geounit's digit
        leaves = [c[:5] + c[6:] if len(c) == 16 else c for c in leaves]
    ids = pd.Index(leaves)
    where = ids.get_indexer(pd.Index(frame["geocode"]))
    counts = np.zeros((ids.size, len(columns)), dtype=np.int64)
    inside = where >= 0
    counts[where[inside]] = frame.loc[inside, columns].to_numpy(dtype=np.int64)
    known = np.zeros(ids.size, dtype=bool)
    known[where[inside]] = True
    return counts, known


def check_facilities(path: str | os.PathLike[str], *, detailed: bool = False) -> pd.DataFrame:
    """Read and check a facilities file (the form of :func:`read_facilities`).

    Parameters
    ----------
    path : path
        A ``.csv`` file, else Parquet.
    detailed : bool, default False
        Facilities by the DHC's 24 detailed group-quarters types
        (:data:`DHC_FACILITY_COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        ``geocode`` (15-character GEOIDs) and :data:`FACILITY_COLUMNS` (int64), or
        :data:`DHC_FACILITY_COLUMNS` with ``detailed``.

    Raises
    ------
    ValidationError
        As :func:`read_facilities`.

    Examples
    --------
    >>> import tempfile
    >>> f = tempfile.mkdtemp() + "/f.csv"
    >>> pd.DataFrame([{"geocode": "0110010001001001", **dict.fromkeys(FACILITY_COLUMNS, 2)}]
    ...              ).to_csv(f, index=False)
    >>> got = check_facilities(f)  # the NMF geocode read as its GEOID
    >>> str(got.geocode[0]), int(got.nursing[0])
    ('110010001001001', 2)
    """
    name = str(path)
    try:
        frame = pd.read_csv(path, dtype={"geocode": str}) if name.endswith(".csv") else (
            pd.read_parquet(path))  # fmt: skip
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot be read as CSV or Parquet ({exc})") from None
    columns = list(DHC_FACILITY_COLUMNS if detailed else FACILITY_COLUMNS)
    missing = [c for c in ("geocode", *columns) if c not in frame.columns]
    if len(missing) > 4:  # most of a design's columns: the first few, and what they are
        shown = ", ".join(repr(c) for c in missing[:3])
        what = "DHC_FACILITY_COLUMNS" if detailed else "FACILITY_COLUMNS"
        raise ValidationError(
            f"missing columns [{shown}, ...] ({len(missing)} of postdp.data.{what})"
        )
    if missing:
        raise ValidationError(f"missing columns {missing}")
    codes = frame["geocode"].astype(str).str.strip()
    codes = codes.where(codes.str.len() != 16, codes.str[1:])  # the NMF geocode's flag
    if not codes.str.fullmatch(r"\d{15}").all():
        raise ValidationError("'geocode' must be 15-digit block GEOIDs")
    if codes.duplicated().any():
        raise ValidationError(f"block {codes[codes.duplicated()].iloc[0]} has two rows")
    values = frame[columns].to_numpy()
    if not np.issubdtype(values.dtype, np.number) or not np.isfinite(values).all():
        raise ValidationError("the counts must be nonnegative whole numbers")
    if (values < 0).any() or (values != np.rint(values)).any():
        raise ValidationError("the counts must be nonnegative whole numbers")
    out = frame[columns].astype(np.int64)
    out.insert(0, "geocode", codes.to_numpy())
    return out.reset_index(drop=True)

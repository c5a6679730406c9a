"""Real public-domain Census data shipped with postdp (see ``PROVENANCE.md`` beside this file):
loaders of the bundled files, readers of the Census Bureau's files, and the descriptions
they need (facility columns, state codes, the published tables). The 2020 schemas and
production strategies are :mod:`postdp.tables`'s (:func:`postdp.tables.pl94_schema`,
:func:`postdp.tables.dhc_schema`, :func:`postdp.tables.load_strategy`; ``dhc_schema`` and
``load_strategy`` are reachable from here too); the synthetic 2020 population,
:func:`synthetic_population`, and its DHC persons version, :func:`synthetic_dhc_population`,
are this package's (and :mod:`postdp.nmf`'s, which measures
it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _rng
from postdp._typing import RNGLike
from postdp.data._dhc_population import (
    HOUSEHOLD_SHARES,
    dhc_person_law,
    dhc_spine,
    national_age_sex,
    synthetic_dhc_population,
)
from postdp.data._dhc_tables import DHC_TABLES, dhc_tables
from postdp.data._facilities import (
    DHC_FACILITY_COLUMNS,
    FACILITY_COLUMNS,
    check_facilities,
    dhc_facility_bounds,
    facility_bounds,
    read_facilities,
    synthetic_dhc_facilities,
    synthetic_facilities,
)
from postdp.data._histograms import histogram_batches, histogram_states, read_histograms
from postdp.data._p1 import P1_TABLES, load_p1, synthetic_table
from postdp.data._persons import PERSON_COLUMNS, person_states, read_persons, tabulate_persons
from postdp.data._pl94_tables import (
    PL94_TABLES,
    geography_names,
    geoid_names,
    level_names,
    pl94_tables,
)
from postdp.data._population import synthetic_population, synthetic_states
from postdp.data._states import STATE_FIPS
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import dhc_schema, load_strategy

__all__ = [
    "DHC_FACILITY_COLUMNS",
    "DHC_TABLES",
    "FACILITY_COLUMNS",
    "HOUSEHOLD_SHARES",
    "P1_TABLES",
    "PERSON_COLUMNS",
    "PL94_TABLES",
    "STATE_FIPS",
    "check_facilities",
    "county_hierarchy",
    "dhc_facility_bounds",
    "dhc_person_law",
    "dhc_schema",
    "dhc_spine",
    "dhc_tables",
    "facility_bounds",
    "geography_names",
    "geoid_names",
    "histogram_batches",
    "histogram_states",
    "level_names",
    "load_county_populations",
    "load_p1",
    "load_section203",
    "load_strategy",
    "load_title1",
    "national_age_sex",
    "person_states",
    "pl94_tables",
    "read_facilities",
    "read_histograms",
    "read_persons",
    "synthetic_dhc_facilities",
    "synthetic_dhc_population",
    "synthetic_facilities",
    "synthetic_hierarchy",
    "synthetic_population",
    "synthetic_states",
    "synthetic_table",
    "tabulate_persons",
]


def load_county_populations() -> pd.DataFrame:
    """The 2010 Census population of the nation, its 51 states (with DC) and 3,143 counties.

    Parameters
    ----------
    None

    Returns
    -------
    pandas.DataFrame
        One row per node, in the order nation, states, counties, with columns

        - ``id`` (str): ``"US"``, the 2-digit state FIPS code (``"01"``) or the 5-digit
          county FIPS code (``"01001"``);
        - ``parent`` (str): the parent's id; missing for the nation;
        - ``name`` (str): e.g. ``"Autauga County"``;
        - ``level`` (str): ``"nation"``, ``"state"`` or ``"county"``;
        - ``count`` (int64): the 2010 census count.

    Notes
    -----
    Cleaned from the Census Bureau's ``co-est2020-alldata.csv`` (column ``CENSUS2010POP``)
    by ``scripts/clean_county_populations.py``, with two repairs for boundary changes after
    2010 (Alaska's Chugach and Copper River Census Areas; Bedford city merged into Bedford
    County, Virginia). Every state equals the sum of its counties and the nation is
    308,745,538, the official 2010 count. Public domain (US Census Bureau).

    Examples
    --------
    >>> from postdp.data import load_county_populations
    >>> df = load_county_populations()
    >>> df.shape, int(df.loc[df.id == "US", "count"].iloc[0])
    ((3195, 5), 308745538)
    >>> df.groupby("level").size().to_dict()
    {'county': 3143, 'nation': 1, 'state': 51}
    """
    source = resources.files("postdp.data").joinpath("_files/county_populations_2010.csv")
    with source.open("rb") as handle:
        frame = pd.read_csv(
            handle,
            dtype={"id": "str", "parent": "str", "name": "str", "level": "str", "count": "int64"},
            keep_default_na=False,
            na_values={"parent": [""]},
        )
    return frame


def county_hierarchy() -> Hierarchy:
    """The bundled 2010 county populations as a :class:`~postdp.Hierarchy` (one call).

    Parameters
    ----------
    None

    Returns
    -------
    Hierarchy
        3,195 nodes (nation, 51 states, 3,143 counties) with their true counts.

    Examples
    --------
    >>> from postdp.data import county_hierarchy
    >>> h = county_hierarchy()
    >>> h.n, h.n_levels, int(h.counts[h.root])
    (3195, 3, 308745538)
    """
    return Hierarchy.from_frame(load_county_populations(), id="id", parent="parent", count="count")


def synthetic_hierarchy(
    fanout: Sequence[float] = (51, 62, 23, 14),
    *,
    leaf_mean: float = 100.0,
    jitter: bool = True,
    rng: RNGLike = None,
) -> Hierarchy:
    """A synthetic hierarchy of census-like shape, for scale tests (millions of leaves).

    Parameters
    ----------
    fanout : sequence of float, default (51, 62, 23, 14)
        Mean number of children per node at each level below the root. The default is
        nation > 51 states > ~62 counties > ~23 tracts > ~14 block groups, about 10^6 leaves.
    leaf_mean : float, default 100
        Mean leaf count; leaf counts are geometric (many small counts and zeros, as in blocks).
    jitter : bool, default True
        Draw each node's number of children as 1 + Poisson(fanout - 1); False gives exactly
        ``round(fanout)`` children everywhere.
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    Hierarchy
        Ids ``"0"`` (root) and ``"<level>.<index>"``; parents' counts are the sums of their
        children's.

    Examples
    --------
    >>> h = synthetic_hierarchy((3, 2), jitter=False, rng=0)
    >>> h.n, [lvl.size for lvl in h.levels]
    (10, [1, 3, 6])
    """
    gen = _rng.as_generator(rng)
    means = [float(f) for f in fanout]
    if any(not np.isfinite(f) or f < 1 for f in means):
        raise ValidationError(f"`fanout` values must be finite and at least 1; got {list(fanout)}")
    if not np.isfinite(leaf_mean) or leaf_mean <= 0:
        raise ValidationError(f"`leaf_mean` must be positive and finite; got {leaf_mean!r}")
    parents = [np.array([-1], dtype=np.int64)]
    sizes = [1]
    start = 0
    for mean in means:
        width = sizes[-1]
        if jitter:
            kids = 1 + gen.poisson(mean - 1, size=width)
        else:
            kids = np.full(width, round(mean), dtype=np.int64)
        parents.append(np.repeat(start + np.arange(width), kids))
        start += width
        sizes.append(int(kids.sum()))
    parent = np.concatenate(parents)
    n = parent.size
    counts = np.zeros(n, dtype=np.int64)
    leaf_start = n - sizes[-1]
    counts[leaf_start:] = gen.geometric(1.0 / (1.0 + leaf_mean), size=sizes[-1]) - 1
    for d in range(len(sizes) - 1, 0, -1):
        lo, hi = n - sum(sizes[d:]), n - sum(sizes[d + 1 :])
        above = parent[lo:hi]  # sorted: every family is contiguous
        first = np.flatnonzero(np.diff(above, prepend=-1))
        counts[above[first]] += np.add.reduceat(counts[lo:hi], first)
    return Hierarchy._trusted(parent, counts, labels=_LevelLabels(tuple(sizes)))


@dataclass(frozen=True)
class _LevelLabels:
    """The ids ``"0"`` and ``"<level>.<index>"`` of a synthetic hierarchy, made on demand."""

    sizes: tuple[int, ...]

    def __call__(self) -> npt.NDArray[np.object_]:
        text = np.dtypes.StringDType()
        parts = [np.array(["0"], dtype=text)]
        for d, size in enumerate(self.sizes[1:], start=1):
            parts.append(np.strings.add(f"{d}.", np.arange(size).astype(text)))
        return np.concatenate(parts).astype(object)


def _read(name: str, dtypes: dict[str, str]) -> pd.DataFrame:
    source = resources.files("postdp.data").joinpath(f"_files/{name}")
    with source.open("rb") as handle:
        return pd.read_csv(handle, dtype=dtypes)


def load_title1(state: str | None = None) -> pd.DataFrame:
    """SAIPE 2019 school districts with their Title I weights (the inputs of [fioretto2021]'s P^F).

    Parameters
    ----------
    state : str, optional
        Two-letter postal code (e.g. ``"NY"``) to keep one state's districts.

    Returns
    -------
    pandas.DataFrame
        One row per district (13,183: every SAIPE 2019 district except Puerto Rico's, which
        has no state expenditure figure), with columns ``state``, ``state_fips``,
        ``district_id``, ``leaid``, ``name``, ``population``, ``population_5_17``,
        ``poor_5_17`` (the Title I "formula children" count x_i), ``sppe`` (the state's net
        current expenditure per pupil in average daily attendance, 2013-14) and ``weight``
        (a_i = 0.4 x SPPE bounded to 80-120% of the national average, the Title I basic-grant
        expenditure factor).

    Notes
    -----
    Public domain: US Census Bureau SAIPE (school districts, income year 2019) and NCES CCD
    (ELSI export). Cleaned by ``scripts/clean_decision_data.py``; see PROVENANCE.md.

    Examples
    --------
    >>> from postdp.data import load_title1
    >>> ny = load_title1("NY")
    >>> len(ny), int(ny["poor_5_17"].sum())
    (681, 485661)
    """
    frame = _read(
        "title1_districts_2019.csv",
        {"state": "str", "state_fips": "str", "district_id": "str", "leaid": "str", "name": "str"},
    )
    if state is not None:
        if state not in set(frame["state"]):
            raise ValidationError(f"`state` must be a postal code of the data; got {state!r}")
        frame = frame[frame["state"] == state].reset_index(drop=True)
    return frame


def load_section203() -> pd.DataFrame:
    """2016 Voting Rights Act Section 203 determinations: covered jurisdictions by language.

    Parameters
    ----------
    None

    Returns
    -------
    pandas.DataFrame
        One row per jurisdiction (state, county or minor civil division) and language
        minority group of the Census Bureau's 2016 determinations file (314 records), with
        ``geoid``, ``level``, ``state_fips``, ``name``, ``language``, ``vacit_total``
        (voting-age citizens of the jurisdiction: the seed's x^s), ``vacit_group``,
        ``vaclep`` (limited-English-proficient voting-age citizens of the group: x^sp),
        ``illit`` (those of them with less than 5th-grade education: x^spe) and
        ``covered``.

    Notes
    -----
    Section 203 covers a group when (x^sp / x^s > 5% or x^sp > 10,000) and
    x^spe / x^sp > 1.31% ([fioretto2021]'s P^M). The file lists only covered jurisdictions (the
    complete file could not be found), so most true decisions are positive; AIAN/ANRC areas
    (no jurisdiction total) and 5 records with suppressed counts are left out. Public domain
    (US Census Bureau); cleaned by ``scripts/clean_decision_data.py``.

    Examples
    --------
    >>> from postdp.data import load_section203
    >>> s = load_section203()
    >>> len(s), s.loc[s["name"].str.startswith("Harris"), "vaclep"].tolist()[:1]
    (314, [153920])
    """
    return _read(
        "section203_2016.csv",
        {"geoid": "str", "level": "str", "state_fips": "str", "name": "str", "language": "str"},
    )

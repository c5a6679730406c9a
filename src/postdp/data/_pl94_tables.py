"""The 2020 P.L. 94-171 redistricting tables P1 to P5 and H1, and the names of geounits.

Facts (the Census Bureau's 2020 Census State Redistricting Data (Public Law 94-171)
Summary File technical documentation, its table shells, and the variable lists of the
2020 ``dec/pl`` API; see ``shared/research/pl94-2020-design.md``):

- P1 "Race" (universe: total population), 71 rows: the total, the population of one race
  and its 6 races alone, the population of two or more races and every one of the 57
  combinations under its number of races (P1_001N ... P1_071N; bundled as
  ``p1_categories.csv``, the tree of the published file);
- P2 "Hispanic or Latino, and not Hispanic or Latino by race", 73 rows: the total, the
  Hispanic or Latino population, and the not Hispanic or Latino population by P1's 71 rows
  (P2_003N is P1_001N's row for the not Hispanic, ... P2_073N P1_071N's);
- P3 and P4: P1 and P2 for the population 18 years and over;
- P5 "Group quarters population by major group quarters type" (universe: population in
  group quarters), 10 rows: the total, institutionalized (correctional facilities for
  adults, juvenile facilities, nursing facilities, other institutional) and
  noninstitutionalized (college/university student housing, military quarters, other
  noninstitutional): the ``hhgq`` levels 1-7 of :func:`pl94_schema`;
- H1 "Occupancy status" (universe: housing units), 3 rows: total, occupied, vacant.

GEOIDs are the Census's: state 2, county 5, tract 11, block group 12, block 15 digits; the
nation is ``US`` here. Names: the nation's, each state's and county's as the Census writes
them (``"Monroe County, Georgia"``), from the bundled county table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from postdp._typing import FloatArray
from postdp.data._p1 import _file, p1_categories
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import category_matrix, pl94_schema, units_schema
from postdp.tables.published import Block, PublishedTable
from postdp.tables.schema import Schema

__all__ = ["PL94_TABLES", "geography_names", "geoid_names", "level_names", "pl94_tables"]

#: The tables :func:`pl94_tables` builds, in the Census's order.
PL94_TABLES = ("P1", "P2", "P3", "P4", "P5", "H1")

_TITLES = {
    "P1": ("Race", "Total population"),
    "P2": ("Hispanic or Latino, and not Hispanic or Latino by race", "Total population"),
    "P3": ("Race for the population 18 years and over", "Total population 18 years and over"),
    "P4": (
        "Hispanic or Latino, and not Hispanic or Latino by race for the population 18 years "
        "and over",
        "Total population 18 years and over",
    ),
    "P5": (
        "Group quarters population by major group quarters type",
        "Population in group quarters",
    ),
    "H1": ("Occupancy status", "Housing units"),
}
# P5's rows: label and the hhgq levels (pl94_schema order) each adds up.
_P5 = (
    ("Total", [1, 2, 3, 4, 5, 6, 7]),
    ("Institutionalized population", [1, 2, 3, 4]),
    ("Correctional facilities for adults", [1]),
    ("Juvenile facilities", [2]),
    ("Nursing facilities/Skilled-nursing facilities", [3]),
    ("Other institutional facilities", [4]),
    ("Noninstitutionalized population", [5, 6, 7]),
    ("College/University student housing", [5]),
    ("Military quarters", [6]),
    ("Other noninstitutional facilities", [7]),
)


def pl94_tables(names: Sequence[str] | None = None) -> dict[str, PublishedTable]:
    """The 2020 P.L. 94-171 tables as sums of the 2020 histograms' cells.

    Parameters
    ----------
    names : sequence of str, optional
        Some of ``P1, P2, P3, P4, P5, H1`` (default all), in any order; returned in the
        Census's order.

    Returns
    -------
    dict of str to PublishedTable
        P1 to P5 over :func:`pl94_schema` (persons, 2,016 cells), H1 over
        :func:`units_schema` (housing units: vacant, occupied).

    Examples
    --------
    >>> t = pl94_tables(["P1", "P5"])
    >>> [(k, v.size, v.codes[0]) for k, v in t.items()]
    [('P1', 71, 'P1_001N'), ('P5', 10, 'P5_001N')]
    """
    return pick_tables(names, PL94_TABLES, _tables())


def pick_tables(
    names: Sequence[str] | None, order: tuple[str, ...], built: dict[str, PublishedTable]
) -> dict[str, PublishedTable]:
    """The tables ``names`` (default all) of ``built``, in ``order``; an unknown name is
    refused naming the known ones."""
    wanted = order if names is None else tuple(dict.fromkeys(str(n) for n in names))
    unknown = [n for n in wanted if n not in order]
    if unknown:
        raise ValidationError(f"unknown table {unknown[0]!r}; choose from {', '.join(order)}")
    return {n: built[n] for n in order if n in wanted}


@functools.cache
def _tables() -> dict[str, PublishedTable]:
    persons = pl94_schema()
    categories, labels = p1_categories()
    codes = [str(c) for c in categories.ids]
    race = category_matrix(categories).astype(np.float64)  # (71, 63), P1 order
    race_labels = [labels[c] for c in codes]
    one = {k: np.ones((1, n)) for k, n in zip(persons.names, persons.shape, strict=True)}
    hispanic, not_hispanic = np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]])
    adult = np.array([[0.0, 1.0]])

    def race_table(name: str, age: FloatArray) -> PublishedTable:
        rows = [f"{name}_{k:03d}N" for k in range(1, race.shape[0] + 1)]
        block = Block(rows, [one["hhgq"], age, one["hispanic"], race])
        return _table(name, persons, [block], race_labels)

    def origin_table(name: str, age: FloatArray) -> PublishedTable:
        code = [f"{name}_{k:03d}N" for k in range(1, race.shape[0] + 3)]
        blocks = [
            Block(code[:1], [one["hhgq"], age, one["hispanic"], one["cenrace"]]),
            Block(code[1:2], [one["hhgq"], age, hispanic, one["cenrace"]]),
            Block(code[2:], [one["hhgq"], age, not_hispanic, race]),
        ]
        words = ["Total", "Hispanic or Latino", "Not Hispanic or Latino", *race_labels[1:]]
        return _table(name, persons, blocks, words)

    p5 = np.zeros((len(_P5), persons.shape[0]))
    for k, (_, levels) in enumerate(_P5):
        p5[k, levels] = 1.0
    p5_block = Block(
        [f"P5_{k:03d}N" for k in range(1, len(_P5) + 1)],
        [p5, one["votingage"], one["hispanic"], one["cenrace"]],
    )
    units = units_schema()  # cells: vacant, occupied
    h1 = Block(["H1_001N", "H1_002N", "H1_003N"], [np.array([[1.0, 1.0], [0, 1], [1, 0]])])
    return {
        "P1": race_table("P1", one["votingage"]),
        "P2": origin_table("P2", one["votingage"]),
        "P3": race_table("P3", adult),
        "P4": origin_table("P4", adult),
        "P5": _table("P5", persons, [p5_block], [label for label, _ in _P5]),
        "H1": _table("H1", units, [h1], ["Total", "Occupied", "Vacant"], unit="housing units"),
    }


def _table(
    name: str, schema: Schema, blocks: list[Block], labels: list[str], unit: str = "persons"
) -> PublishedTable:
    title, universe = _TITLES[name]
    return PublishedTable(name, title, universe, schema, blocks, labels, unit=unit)


@functools.cache
def geography_names() -> dict[str, str]:
    """Names of the nation, the 50 states with DC and Puerto Rico, and their 3,221
    counties, by GEOID (``"US"`` the nation's), as the Census writes them.

    Parameters
    ----------
    None

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> names = geography_names()
    >>> names["13207"], names["13"], names["US"]
    ('Monroe County, Georgia', 'Georgia', 'United States')
    """
    counties = _file("p1_2020_us_county.csv.gz")[["geo_id", "name"]]
    out = {"US": "United States"}
    for geo_id, name in zip(counties["geo_id"], counties["name"], strict=True):
        out.setdefault(geo_id[:2], name.rsplit(", ", 1)[-1])
    out.update(zip(counties["geo_id"], counties["name"], strict=True))
    return out


def geoid_names(geoids: Sequence[str]) -> list[str]:
    """The Census's names of geounits by GEOID: the nation, states and counties as
    published; a tract ``Census Tract 1.01``, a block group ``Block Group 1`` and a block
    ``Block 1001`` each followed by the names above it; ``""`` where the county is unknown.

    Parameters
    ----------
    geoids : sequence of str
        GEOIDs of 2 (state), 5 (county), 11 (tract), 12 (block group) or 15 (block) digits,
        or ``"US"``.

    Returns
    -------
    list of str

    Examples
    --------
    >>> geoid_names(["US", "13207", "11001000101", "110010001011", "110010001011003"])[1:3]
    ['Monroe County, Georgia', 'Census Tract 1.01, District of Columbia, District of Columbia']
    """
    known = geography_names()
    out = []
    for g in geoids:
        g = str(g)
        if len(g) <= 5 or g == "US":
            out.append(known.get(g, ""))
            continue
        county = known.get(g[:5], "")
        if not county:
            out.append("")
            continue
        code = g[5:11]
        number = str(int(code[:4])) + ("" if code[4:] == "00" else "." + code[4:])
        parts = [f"Census Tract {number}", county]
        if len(g) >= 12:
            parts.insert(0, f"Block Group {g[11]}")
        if len(g) == 15:
            parts.insert(0, f"Block {g[11:]}")
        out.append(", ".join(parts))
    return out


#: Level name of a GEOID by its number of digits (the Census's summary levels).
_BY_LENGTH = {2: "State", 5: "County", 11: "Tract", 12: "Block Group", 15: "Block"}


def level_names(geography: Hierarchy) -> list[str]:
    """The name of each level of ``geography``, root first.

    Parameters
    ----------
    geography : Hierarchy

    Returns
    -------
    list of str

    A level whose ids are all GEOIDs of one length is named for that length (2 digits:
    ``State``, 5: ``County``, 11: ``Tract``, 12: ``Block Group``, 15: ``Block``); a root
    with id ``US`` is ``US``. Any other level keeps its number (``"0"``, ``"1"`` ...).

    Examples
    --------
    >>> h = Hierarchy.from_parents(["US", "13", "13207"], [None, "US", "13"])
    >>> level_names(h)
    ['US', 'State', 'County']
    >>> level_names(Hierarchy.from_parents(["T", "a"], [None, "T"]))
    ['0', '1']
    """
    out = []
    ids = geography.ids
    for d, nodes in enumerate(geography.levels):
        codes = [str(i) for i in ids[nodes]]
        lengths = {len(c) for c in codes}
        name = str(d)
        if d == 0 and codes == ["US"]:
            name = "US"
        elif len(lengths) == 1 and all(c.isdigit() for c in codes):
            name = _BY_LENGTH.get(lengths.pop(), name)
        out.append(name)
    if len(set(out)) != len(out):  # two levels with one name: numbers tell them apart
        return [str(d) for d in range(len(out))]
    return out

"""A synthetic 2020 DHC persons population: the persons of :func:`synthetic_population`,
each given a sex, a single year of age and a relationship or group-quarters type, on the
DHC's eight-level spine. Synthetic: no confidential data exists here.

What is real: everything :func:`synthetic_population` takes from the 2020 counties, and the
joint distribution of single year of age and sex, the 2010 Census counts of the United
States (``_files/age_sex_2010_us.csv``, ``PROVENANCE.md``). What is modelled:

- **Consistency with PL94.** Every person keeps their block, group-quarters level (PL94's 8),
  voting age, Hispanic origin and race, so each block's marginal ``hhgq8lev * votingage *
  hispanic * cenrace`` is the PL94 population's histogram, exactly (and so at every geounit
  above).
- **Age and sex** within the person's voting-age class are drawn from the 2010 national
  counts, restricted to the ages the person's group-quarters level admits (the DHC edits,
  :data:`postdp.tables.DHC_EDITS`: a nursing-facility resident is 20 or older, a college
  resident 16 to 65, ...). For persons in households that restriction is empty, so their
  age-by-sex distribution within a voting-age class is the national one. The source's top
  code, 100 and over, is spread over ages 100 to 115 halving with each year (an assumption).
- **Relationship to the householder**, for persons in households, given age: the shares of
  :data:`HOUSEHOLD_SHARES` by age band, renormalised over the relationships the edits admit
  at that age. They are this module's stated model (rounded, plausible shares), not a
  published table: no relationship-by-age table of the 2020 DHC was reachable here.
- **Group-quarters type**, for persons in group quarters: one type per block and PL94
  level (a block's residents of a level live in one facility), drawn uniformly among the
  level's types that the edits admit at every one of their ages (also a model, for the same
  reason); so a block has one facility of each level it houses, as
  :func:`~postdp.data.synthetic_facilities` counts them, and one of each detailed type,
  as :func:`~postdp.data.synthetic_dhc_facilities` does.

The spine: US > State > County > Prim > Tract_Subset_Group > Tract_Subset > Block_Group >
Block, with the DAS geocode widths (0, 2, 5, 6, 11, 12, 13, 16; ``dhc-2020-design.md``
section 4.4), as :func:`dhc_spine` builds it: a county is one primitive geounit (no strong
minor civil divisions or places are modelled), tracts are grouped by the first five digits
of their codes (ten at a time) into tract-subset groups, and a tract subset is a tract;
block groups and blocks are the PL94 population's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from postdp._typing import FloatArray
from postdp.data._population import synthetic_population
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Table, dhc_schema, dhc_structural_zeros

__all__ = [
    "HOUSEHOLD_SHARES",
    "dhc_person_law",
    "dhc_spine",
    "national_age_sex",
    "synthetic_dhc_population",
]

_AGES, _RELGQ, _SEXES = 116, 42, 2
# the relgq codes of PL94's 7 group-quarters levels (as postdp.tables.dhc's _GQ_MAJOR)
_GQ_LEVELS = (range(18, 24), range(24, 27), range(27, 28), range(28, 33), range(33, 34),
              range(34, 36), range(36, 42))  # fmt: skip

#: The model's shares of relationships to the householder (relgq codes 0-17, in
#: :func:`postdp.tables.dhc_schema`'s order) among persons in households, by age band
#: (first and last age); each row adds up to 1. Rounded, plausible shares, not a published
#: table (see the module notes).
HOUSEHOLD_SHARES: dict[tuple[int, int], dict[int, float]] = {
    (0, 14): {6: 0.80, 7: 0.02, 8: 0.04, 9: 0.01, 11: 0.08, 14: 0.03, 16: 0.005, 17: 0.015},
    (15, 17): {0: 0.002, 1: 0.003, 6: 0.80, 7: 0.02, 8: 0.04, 9: 0.01, 11: 0.07, 14: 0.03,
               16: 0.005, 17: 0.02},
    (18, 24): {0: 0.04, 1: 0.10, 2: 0.05, 3: 0.06, 4: 0.002, 5: 0.004, 6: 0.55, 7: 0.01,
               8: 0.03, 9: 0.03, 11: 0.03, 13: 0.005, 14: 0.03, 15: 0.03, 16: 0.002,
               17: 0.027},
    (25, 34): {0: 0.10, 1: 0.32, 2: 0.20, 3: 0.09, 4: 0.004, 5: 0.006, 6: 0.14, 7: 0.003,
               8: 0.007, 9: 0.03, 10: 0.005, 11: 0.005, 12: 0.001, 13: 0.01, 14: 0.03,
               15: 0.03, 17: 0.019},
    (35, 64): {0: 0.14, 1: 0.38, 2: 0.28, 3: 0.04, 4: 0.004, 5: 0.004, 6: 0.06, 7: 0.002,
               8: 0.003, 9: 0.02, 10: 0.01, 11: 0.001, 12: 0.005, 13: 0.007, 14: 0.02,
               15: 0.01, 17: 0.014},
    (65, 74): {0: 0.24, 1: 0.36, 2: 0.27, 3: 0.02, 4: 0.003, 5: 0.002, 6: 0.02, 9: 0.01,
               10: 0.02, 12: 0.01, 13: 0.003, 14: 0.02, 15: 0.005, 17: 0.017},
    (75, 115): {0: 0.36, 1: 0.25, 2: 0.20, 3: 0.01, 4: 0.002, 5: 0.001, 6: 0.01, 9: 0.01,
                10: 0.08, 12: 0.04, 14: 0.02, 15: 0.002, 17: 0.015},
}  # fmt: skip


@cache
def national_age_sex() -> FloatArray:
    """The United States' 2010 Census counts by sex and single year of age, as the DHC
    schema's sex x age (2 x 116; sex 0 male, 1 female), the source's 100-and-over spread
    over ages 100-115 halving with each year (so not integers there).

    Examples
    --------
    >>> n = national_age_sex()
    >>> n.shape, int(round(n.sum()))  # the 2010 census count of the United States
    ((2, 116), 308745538)
    >>> int(n[1, 30])  # women aged 30 on 1 April 2010
    2124866
    """
    source = resources.files("postdp.data").joinpath("_files/age_sex_2010_us.csv")
    with source.open("rb") as handle:
        frame = pd.read_csv(handle, dtype={"age": str, "male": np.int64, "female": np.int64})
    counts = frame[["male", "female"]].to_numpy(dtype=np.float64).T  # 2 x 101
    tail = 0.5 ** np.arange(_AGES - 100)
    out = np.zeros((_SEXES, _AGES))
    out[:, :100] = counts[:, :100]
    out[:, 100:] = counts[:, 100:101] * (tail / tail.sum())
    out.setflags(write=False)
    return out


def _admissible() -> np.ndarray:
    """(relgq, age) pairs the DHC edits allow, 42 x 116."""
    zeros = dhc_structural_zeros().reshape(_RELGQ, _SEXES, _AGES, 2, 63)
    return ~zeros[:, 0, :, 0, 0]


@cache
def dhc_person_law() -> FloatArray:
    """The model's law of (relgq, sex, age) given the PL94 group-quarters level (0-7) and
    voting age (0 under 18, 1 18 or over): shape (8, 2, 42, 2, 116), each (level, voting
    age) block adding up to 1 (or all zero where the edits admit no one: minors in nursing
    facilities).

    Examples
    --------
    >>> law = dhc_person_law()
    >>> law.shape, bool(np.allclose(law[0].sum(axis=(1, 2, 3)), 1))
    ((8, 2, 42, 2, 116), True)
    >>> float(law[3, 0].sum())  # no one under 18 (nor under 20) in a nursing facility
    0.0
    """
    admissible = _admissible()
    ages = np.arange(_AGES)
    national = national_age_sex()
    relgq_given_age = np.zeros((8, _RELGQ, _AGES))
    for (lo, hi), shares in HOUSEHOLD_SHARES.items():
        for code, share in shares.items():
            relgq_given_age[0, code, lo : hi + 1] = share
    for level, codes in enumerate(_GQ_LEVELS, start=1):
        relgq_given_age[level, list(codes)] = 1.0
    relgq_given_age *= admissible[None]
    total = relgq_given_age.sum(axis=1, keepdims=True)
    np.divide(relgq_given_age, total, out=relgq_given_age, where=total > 0)
    law = np.zeros((8, 2, _RELGQ, _SEXES, _AGES))
    for adult in (0, 1):
        in_class = (ages >= 18) == bool(adult)
        # (level, relgq, sex, age): national(sex, age) x P(relgq | level, age) on the class
        joint = relgq_given_age[:, :, None, :] * (national * in_class)[None, None]
        mass = joint.sum(axis=(1, 2, 3), keepdims=True)
        np.divide(joint, mass, out=joint, where=mass > 0)
        law[:, adult] = joint
    law.setflags(write=False)
    return law


def synthetic_dhc_population(
    states: Sequence[str] | None = None, *, seed: int = 0, scale: float = 1.0
) -> Table:
    """A synthetic 2020 DHC persons table: the persons of :func:`synthetic_population` with
    sex, single year of age and relationship or group-quarters type, on the DHC spine (see
    the module notes for what is real and what is modelled).

    Parameters
    ----------
    states : sequence of str, optional
        2-digit state FIPS codes; default the 50 states and DC.
    seed : int, default 0
        Seed of the PL94 population (:func:`synthetic_population`'s) and of the persons'
        details; each county has its own stream, so a county is the same in any selection
        of states.
    scale : float, default 1.0
        As :func:`synthetic_population`'s: every county's 2020 population times ``scale``.

    Returns
    -------
    Table
        Sparse leaf histograms (blocks x 1,227,744 cells of :func:`postdp.tables.dhc_schema`),
        eight levels US > State > County > Prim > Tract_Subset_Group > Tract_Subset >
        Block_Group > Block, geocodes of widths 0 (``US``), 2, 5, 6, 11, 12, 13 and 16.
        Every block's PL94 marginal (``hhgq8lev * votingage * hispanic * cenrace``) is the
        histogram of the same block of ``synthetic_population(states, seed=seed,
        scale=scale)`` (blocks in the same order); no person is in a cell the edits forbid.

    Examples
    --------
    >>> t = synthetic_dhc_population(["11"], seed=1, scale=0.01)  # the District of Columbia
    >>> int(t.cells.sum()), t.geography.n_levels, t.categories.leaves.size
    (6895, 8, 1227744)
    >>> from postdp.tables import load_strategy
    >>> w = load_strategy("dhc-2020-persons").workload(t)  # the production design fits it
    """
    pl94 = dhc_spine(synthetic_population(states, seed=seed, scale=scale))
    geography = pl94.geography
    county_of_block = np.array([int(str(b)[:5]) for b in geography.ids[geography.leaves]])
    law = dhc_person_law().reshape(16, -1)
    cdf = np.cumsum(law, axis=1)
    schema = dhc_schema()
    cells = pl94.cells.tocsr()  # type: ignore[attr-defined]
    rows, cols, vals = [], [], []
    bounds = np.flatnonzero(np.r_[True, county_of_block[1:] != county_of_block[:-1], True])
    # a county's blocks are consecutive leaves: one stream draws them all
    assert np.unique(county_of_block).size == bounds.size - 1
    for start, stop in itertools.pairwise(bounds):
        county = county_of_block[start]
        rng = np.random.default_rng([seed, 46, int(county)])
        part = cells[start:stop].tocoo()
        who = np.repeat(part.row.astype(np.int64) + start, part.data)
        pl = np.repeat(part.col.astype(np.int64), part.data)
        race, rest = pl % 63, pl // 63
        hisp, rest = rest % 2, rest // 2
        group = rest  # level * 2 + voting age, 0..15
        detail = np.empty(pl.size, dtype=np.int64)
        for g in np.unique(group):
            mine = group == g
            if cdf[g, -1] <= 0:
                raise ValidationError(
                    "the PL94 population has persons the DHC edits admit nowhere (group-"
                    f"quarters level {g // 2}, {'18 or over' if g % 2 else 'under 18'})"
                )
            u = rng.random(int(mine.sum())) * cdf[g, -1]
            detail[mine] = np.minimum(np.searchsorted(cdf[g], u, side="right"), law.shape[1] - 1)
        # one group-quarters type per block and level (a facility's residents share it)
        detail = _one_type(detail, who, group // 2, [seed, 46, int(county), 1])
        # detail indexes (relgq, sex, age); the DHC cell appends hispanic and cenrace
        cell = (detail * 2 + hisp) * 63 + race
        key, number = np.unique(who * schema.size + cell, return_counts=True)
        rows.append(key // schema.size)
        cols.append(key % schema.size)
        vals.append(number)
    empty = np.zeros(0, dtype=np.int64)
    matrix = sparse.csr_array(
        (np.concatenate(vals) if vals else empty,
         (np.concatenate(rows) if rows else empty,
          np.concatenate(cols) if cols else empty)),
        shape=(geography.leaves.size, schema.size),
    )  # fmt: skip
    return Table(geography, schema.categories(), matrix)  # type: ignore[arg-type]


def _one_type(detail: np.ndarray, who: np.ndarray, level: np.ndarray, key: list[int]) -> Any:
    """``detail`` (relgq, sex, age indexes) with every block's group-quarters persons of a
    level given one type: drawn uniformly (stream ``key``) among the level's types that the
    edits admit at every one of their ages (one always exists: each level has a type that
    admits all the ages the level does)."""
    gq = np.flatnonzero(level > 0)
    if not gq.size:
        return detail
    admissible = _admissible()
    rng = np.random.default_rng(key)
    out = detail.copy()
    pair = who[gq] * 8 + level[gq]
    order = np.argsort(pair, kind="stable")
    starts = np.flatnonzero(np.r_[True, pair[order][1:] != pair[order][:-1]])
    for members in np.split(gq[order], starts[1:]):
        ages = detail[members] % _AGES
        codes = [r for r in _GQ_LEVELS[int(level[members[0]]) - 1] if admissible[r, ages].all()]
        chosen = codes[int(rng.integers(len(codes)))]
        out[members] = chosen * (_SEXES * _AGES) + detail[members] % (_SEXES * _AGES)
    return out


def dhc_spine(table: Table) -> Table:
    """A table on the tabulation geography (US > State > County > Tract > Block group >
    Block, ids the GEOIDs) moved onto postdp's DHC spine, which the design
    ``load_strategy("dhc-2020-persons")`` measures.

    The production spine cut counties by places and minor civil divisions and grouped tract
    subsets by an optimiser (``dhc-2020-design.md`` section 4.4); none of that is public
    here, so a county is one primitive geounit (``SSCCC0``), a tract-subset group holds the
    tracts whose codes share their first five digits (at most ten), a tract subset is a
    tract, and block groups and blocks are the table's. Geocode widths are the DAS's: 6,
    11, 12, 13 and 16; a block's is its GEOID with the primitive geounit's ``0`` after the
    county.

    Parameters
    ----------
    table : Table
        Its geography's ids are GEOIDs of widths 2, 5, 11, 12 and 15 below a root, each
        starting with its parent's (as :func:`postdp.data.read_histograms` and
        :func:`synthetic_population` make them).

    Returns
    -------
    Table
        The same cells (sparse stays sparse), blocks in the new geography's leaf order.

    Raises
    ------
    ValidationError
        For a geography that is not the tabulation one.

    Examples
    --------
    >>> t = dhc_spine(synthetic_population(["11"], seed=0, scale=0.001))
    >>> t.geography.n_levels, str(t.geography.ids[t.geography.leaves[0]])
    (8, '1100100000000000')
    """
    if not isinstance(table, Table):
        raise TypeError(f"`table` must be a Table; got {type(table).__name__}")
    geography, block_ids = _spine(table.geography)
    leaf_rank = np.empty(geography.n, dtype=np.int64)
    leaf_rank[geography.leaves] = np.arange(geography.leaves.size)
    order = np.argsort(leaf_rank[geography.index(block_ids)])  # new leaf -> old row
    cells = table.cells[order] if table.is_sparse else np.asarray(table.cells)[order]
    return Table(geography, table.categories, cells, labels=table.labels)


_WIDTHS = (2, 5, 11, 12, 15)  # state, county, tract, block group, block GEOIDs


def _spine(geo: Hierarchy) -> tuple[Hierarchy, list[str]]:
    """The DHC spine over a tabulation geography (US > State > County > Tract > Block group
    > Block, GEOIDs): its hierarchy and the new id of every block in the old leaf order."""
    ids, parent, depth = geo.ids, geo.parent, geo.depth
    text = [str(i) for i in ids]
    below = depth >= 1
    widths = {int(d): {len(text[i]) for i in np.flatnonzero(depth == d)} for d in range(1, 6)}
    nested = all(text[i].startswith(text[parent[i]]) for i in np.flatnonzero(depth >= 2))
    if (
        geo.n_levels != 6
        or any(widths[d] != {_WIDTHS[d - 1]} for d in range(1, 6))
        or not nested
        or not all(text[i].isdigit() for i in np.flatnonzero(below))
    ):
        raise ValidationError(
            "the DHC spine is built on the tabulation geography: US > State > County > "
            "Tract > Block group > Block, ids GEOIDs of 2, 5, 11, 12 and 15 digits, each "
            "starting with its parent's"
        )
    children: list[list[int]] = [[] for _ in range(geo.n)]
    for node in np.flatnonzero(parent >= 0):
        children[int(parent[node])].append(int(node))
    new = {geo.root: "US"}
    out_ids: list[str] = ["US"]
    out_parents: list[str | None] = [None]

    def add(node_id: str, parent_id: str) -> None:
        out_ids.append(node_id)
        out_parents.append(parent_id)

    for state in children[geo.root]:
        new[state] = text[state]
        add(new[state], "US")
        for county in children[state]:
            fips = text[county]
            new[county] = fips
            add(fips, new[state])
            prim = f"{fips}0"
            add(prim, fips)
            groups: set[str] = set()
            for tract in children[county]:
                code = text[tract][5:]
                tsg = prim + code[:5]  # tracts whose codes share five digits: at most ten
                if tsg not in groups:
                    groups.add(tsg)
                    add(tsg, prim)
                new[tract] = prim + code
                add(new[tract], tsg)
                for bg in children[tract]:
                    new[bg] = new[tract] + text[bg][-1]
                    add(new[bg], new[tract])
                    for block in children[bg]:
                        new[block] = new[bg] + text[block][-3:]
                        add(new[block], new[bg])
    block_ids = [new[int(leaf)] for leaf in geo.leaves]
    return Hierarchy.from_parents(out_ids, out_parents), block_ids  # type: ignore[arg-type]

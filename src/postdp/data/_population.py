"""A synthetic 2020 persons population (PL94 schema, 2,016 cells) on a synthetic block
geography under the real 2020 counties. Synthetic: no confidential data exists here.

What is real: every county's 2020 population and its 63-cell race mix (the bundled 2020 P1
county file of :mod:`postdp.data`, its ``PROVENANCE.md``). What is modelled, with the
national 2020 tallies as targets (``shared/research/pl94-2020-design.md`` section 1.5):
tracts, block groups and blocks per county in proportion to population (84,414 tracts,
239,780 block groups and about 8.13 million blocks of which about 5.89 million populated,
nationally); tract and block-group sizes from Dirichlet shares, block sizes heavy-tailed
(lognormal weights, about 28% of blocks empty); race mixes clustered by tract around the
county's (Dirichlet with concentration 50); Hispanic origin and voting age per tract around
the national 2020 shares (18.7% and 77.9%); group quarters: about 2% of populated blocks
hold one facility of one of the 7 types (national 2020 shares of GQ population by type,
rounded), every resident of such a block in it, and no one under 18 in a nursing facility
(the 2020 structural zero). Generated county by county from one seed, so a state never needs
the nation in memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from postdp._validation import fraction
from postdp.data._p1 import load_p1
from postdp.data._states import STATE_FIPS
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Table, pl94_schema

__all__ = ["synthetic_population", "synthetic_states", "tallies"]

_US_POP = 331_449_281  # 2020 resident population, 50 states + DC
_TRACTS, _BGS, _BLOCKS = 84_414, 239_780, 8_132_968
_EMPTY = 1 - 5_892_698 / 8_132_968  # share of blocks with no people
_HISPANIC, _ADULT = 0.187, 0.779
_GQ_BLOCKS = 0.02
# GQ types 1-7 (adult correctional, juvenile, nursing, other institutional, college,
# military, other non-institutional): approximate national shares of GQ residents
_GQ_TYPES = np.array([0.24, 0.01, 0.15, 0.03, 0.33, 0.04, 0.20])


def _counties(states: Sequence[str] | None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """County FIPS codes, populations and race mixes (63 cells) of the chosen states."""
    p1 = load_p1("us-county")
    geo = p1.geography
    leaf_ids = [str(geo.ids[i]) for i in geo.leaves]
    keep = [i for i, c in enumerate(leaf_ids) if c[:2] in STATE_FIPS]  # 50 states + DC
    if states is not None:
        wanted = {str(s).zfill(2) for s in states}
        known = {leaf_ids[i][:2] for i in keep}
        unknown = sorted(wanted - known)
        if unknown:
            raise ValidationError(
                f"`states` must be 2-digit FIPS codes of the 50 states and DC; got {unknown}"
            )
        keep = [i for i in keep if leaf_ids[i][:2] in wanted]
    cells = np.asarray(p1.cells)[keep].astype(np.int64)
    return [leaf_ids[i] for i in keep], cells.sum(axis=1), cells


def synthetic_states() -> list[str]:
    """The states :func:`synthetic_population` knows: the 2-digit FIPS codes of the 50
    states and DC, sorted.

    Parameters
    ----------
    None

    Returns
    -------
    list of str

    Examples
    --------
    >>> s = synthetic_states()
    >>> len(s), s[:3], "72" in s
    (51, ['01', '02', '04'], False)
    """
    return sorted(STATE_FIPS)


def tallies(populations: np.ndarray) -> np.ndarray:
    """Tracts, block groups and blocks of each county, shape (counties, 3): in proportion to
    population (at least 1 tract, 1 block group per tract and 1 block per block group)."""
    pop = np.asarray(populations, dtype=float)
    tracts = np.maximum(1, np.rint(pop * _TRACTS / _US_POP)).astype(np.int64)
    bgs = np.maximum(tracts, np.rint(pop * _BGS / _US_POP)).astype(np.int64)
    blocks = np.maximum(bgs, np.rint(pop * _BLOCKS / _US_POP)).astype(np.int64)
    out: np.ndarray = np.stack([tracts, bgs, blocks], axis=1)
    return out


def _split(total: int, parts: int, concentration: float, rng: np.random.Generator) -> np.ndarray:
    """``total`` people spread over ``parts`` units by Dirichlet shares."""
    if parts == 1:
        return np.array([total])
    return rng.multinomial(total, rng.dirichlet(np.full(parts, concentration)))


def _spread(n: int, parts: int) -> np.ndarray:
    """Sizes of ``parts`` units adding up to ``n`` (as even as can be)."""
    base = np.full(parts, n // parts)
    base[: n % parts] += 1
    return base


def synthetic_population(
    states: Sequence[str] | None = None, *, seed: int = 0, scale: float = 1.0
) -> Table:
    """A synthetic 2020 persons table: US > State > County > Tract > Block group > Block,
    the 2,016-cell PL94 schema, county totals and race mixes of the real 2020 counties.

    Parameters
    ----------
    states : sequence of str, optional
        2-digit state FIPS codes (``["50"]`` for Vermont); default the 50 states and DC.
    seed : int, default 0
        The population is a function of the seed (and the states chosen: each county has
        its own stream, so a county is the same in any selection of states).
    scale : float, default 1.0
        A miniature for quick trials, in (0, 1]: every county's 2020 population times
        ``scale`` (rounded), its race mix unchanged; tracts, block groups and blocks shrink
        with it (they are in proportion to population). ``scale=0.05`` makes the District
        of Columbia 34,477 people in 878 geounits instead of 17,468. Each scale is
        its own population (the county's stream is the same, its people are not).

    Returns
    -------
    Table
        Sparse leaf histograms (blocks x 2,016, ``Table.is_sparse``); categories
        ``pl94_schema().categories()``. Geounit ids: ``US``, state ``SS``, county
        ``SSCCC``, tract county + 6 digits, block group tract + 1 digit, block group + 3
        digits.

    Examples
    --------
    >>> t = synthetic_population(["11"], seed=1)  # the District of Columbia
    >>> int(t.cells.sum())  # its 2020 population
    689545
    >>> t.geography.n_levels, t.is_sparse
    (6, True)
    >>> small = synthetic_population(["11"], seed=1, scale=0.05)
    >>> int(small.cells.sum()), int(small.geography.n)  # 5% of the people, of the units
    (34477, 878)
    """
    scale = fraction("scale", scale)
    schema = pl94_schema()
    fips, pops, mixes = _counties(states)
    if scale != 1:
        pops = np.rint(pops * scale).astype(np.int64)
    counts = tallies(pops)
    ids: list[str] = ["US"]
    parents: list[str | None] = [None]
    rows, cols, vals = [], [], []
    block_ids: list[str] = []
    n_blocks = 0
    seen_states: set[str] = set()
    county_seeds = np.random.SeedSequence(seed).spawn(3300)
    all_fips, _, _ = _counties(None)
    stream_of = {c: i for i, c in enumerate(all_fips)}
    for county, pop, mix, (n_tr, n_bg, n_bl) in zip(fips, pops, mixes, counts, strict=True):
        state = county[:2]
        if state not in seen_states:
            seen_states.add(state)
            ids.append(state)
            parents.append("US")
        ids.append(county)
        parents.append(state)
        rng = np.random.default_rng(county_seeds[stream_of[county]])
        bg_per_tract = _spread(int(n_bg), int(n_tr))
        tract_pop = _split(int(pop), int(n_tr), 20.0, rng)
        probs = (mix + 0.5) / (mix + 0.5).sum()
        for t in range(int(n_tr)):
            tract = f"{county}{t:06d}"
            ids.append(tract)
            parents.append(county)
            tract_blocks = max(int(bg_per_tract[t]), int(n_bl * bg_per_tract[t] / n_bg))
            blocks_per_bg = _spread(tract_blocks, int(bg_per_tract[t]))
            bg_pop = _split(int(tract_pop[t]), int(bg_per_tract[t]), 10.0, rng)
            race = rng.dirichlet(probs * 50.0 + 1e-3)
            hispanic = rng.beta(2.0, 2.0 * (1 - _HISPANIC) / _HISPANIC)
            adult = rng.beta(60.0, 60.0 * (1 - _ADULT) / _ADULT)
            for g in range(int(bg_per_tract[t])):
                bg = f"{tract}{g}"
                ids.append(bg)
                parents.append(tract)
                k = int(blocks_per_bg[g])
                weight = rng.lognormal(0.0, 1.2, k) * (rng.random(k) >= _EMPTY)
                if weight.sum() == 0:
                    weight[0] = 1.0
                people = rng.multinomial(int(bg_pop[g]), weight / weight.sum())
                gq = np.where(
                    (people > 0) & (rng.random(k) < _GQ_BLOCKS),
                    1 + rng.choice(7, size=k, p=_GQ_TYPES),
                    0,
                )
                for b in range(k):
                    ids.append(f"{bg}{b:03d}")
                    parents.append(bg)
                    block_ids.append(ids[-1])
                who = np.repeat(np.arange(k), people)
                n = who.size
                if n:
                    va = (rng.random(n) < adult) | (gq[who] == 3)  # no minors in nursing
                    hisp = rng.random(n) < hispanic
                    cell = ((gq[who] * 2 + va) * 2 + hisp) * 63 + rng.choice(63, size=n, p=race)
                    flat = (n_blocks + who) * schema.size + cell
                    key, number = np.unique(flat, return_counts=True)
                    rows.append(key // schema.size)
                    cols.append(key % schema.size)
                    vals.append(number)
                n_blocks += k
    geo = Hierarchy.from_parents(ids, parents)  # type: ignore[arg-type]
    leaf_rank = np.empty(geo.n, dtype=np.int64)
    leaf_rank[geo.leaves] = np.arange(geo.leaves.size)
    # blocks were numbered in the order they were made; place them in geography leaf order
    position = leaf_rank[geo.index(block_ids)]
    r = position[np.concatenate(rows)] if rows else np.zeros(0, dtype=np.int64)
    matrix = sparse.csr_array(
        (np.concatenate(vals) if vals else np.zeros(0, dtype=np.int64),
         (r, np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64))),
        shape=(geo.leaves.size, schema.size),
    )  # fmt: skip
    return Table(geo, schema.categories(), matrix)  # type: ignore[arg-type]

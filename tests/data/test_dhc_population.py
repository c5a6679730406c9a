"""The synthetic DHC persons population (issue 46, part 1): the persons of the synthetic PL94
population with ages, sexes and relationships (``postdp/data/_dhc_population.py``).

Held to: the PL94 population block by block (exact), the DHC edits (no person in a
structural zero), the 2010 Census single-year-of-age x sex counts of the United States
(``_files/age_sex_2010_us.csv``) for persons in households, and the module's own
relationship model, the randomised checks through confidence intervals (fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

import postdp
from postdp.data import (
    HOUSEHOLD_SHARES,
    dhc_person_law,
    national_age_sex,
    synthetic_dhc_population,
    synthetic_population,
)
from postdp.tables import dhc_structural_zeros, load_strategy

Z = 4.0  # standard errors: a z-interval per cell, a few dozen cells per test
_GQ = [(18, 24), (24, 27), (27, 28), (28, 33), (33, 34), (34, 36), (36, 42)]


def _decode(table):
    """Leaf row, count and (relgq, sex, age, hispanic, cenrace) of every nonzero cell."""
    c = table.cells.tocoo()
    relgq, rest = np.divmod(c.col.astype(np.int64), 2 * 116 * 2 * 63)
    sex, rest = np.divmod(rest, 116 * 2 * 63)
    age, rest = np.divmod(rest, 2 * 63)
    hisp, race = np.divmod(rest, 63)
    return c.row, c.data, relgq, sex, age, hisp, race


def _level(relgq):
    out = np.zeros(42, dtype=np.int64)
    for g, (a, b) in enumerate(_GQ, start=1):
        out[a:b] = g
    return out[relgq]


@pytest.fixture(scope="module")
def dc():
    return synthetic_dhc_population(["11"], seed=3, scale=0.2)


def test_the_national_counts_are_the_2010_census():
    """Both sexes add up to 308,745,538, the official 2010 count; men 151,781,326 and women
    156,964,212 (NC-EST2019-AGESEX-RES, CENSUS2010POP); the 100+ spread keeps its total."""
    n = national_age_sex()
    assert n.shape == (2, 116)
    assert round(n[0].sum()) == 151_781_326 and round(n[1].sum()) == 156_964_212
    assert int(n[0, 0]) == 2_014_276 and int(n[1, 99]) == 26_193
    assert np.isclose(n[0, 100:].sum(), 9_162) and np.isclose(n[1, 100:].sum(), 44_202)
    assert np.all(np.diff(n[:, 100:], axis=1) < 0)  # halving each year above 100


def test_the_law_is_a_distribution_on_the_admissible_cells():
    law = dhc_person_law()
    mass = law.sum(axis=(2, 3, 4))
    # every (level, voting age) has persons except minors in nursing facilities
    expected = np.ones((8, 2))
    expected[3, 0] = 0.0
    np.testing.assert_allclose(mass, expected, atol=1e-12)
    zeros = dhc_structural_zeros().reshape(42, 2, 116, 2, 63)[:, :, :, 0, 0]
    assert law[:, :, zeros].max() == 0.0
    assert law[:, 0, :, :, 18:].max() == 0.0 and law[:, 1, :, :, :18].max() == 0.0
    for shares in HOUSEHOLD_SHARES.values():
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)


def test_every_blocks_pl94_histogram_is_the_pl94_populations(dc):
    """Block by block, in the same order: the marginal hhgq8lev x votingage x hispanic x
    cenrace of the DHC population is the PL94 population's histogram, exactly; the DHC
    block's geocode is the tabulation GEOID with the primitive geounit's digit after the
    county."""
    pl94 = synthetic_population(["11"], seed=3, scale=0.2)
    row, count, relgq, _sex, age, hisp, race = _decode(dc)
    cell = ((_level(relgq) * 2 + (age >= 18)) * 2 + hisp) * 63 + race
    ours = sparse.csr_array((count, (row, cell)), shape=pl94.cells.shape)
    assert abs(ours - pl94.cells).max() == 0
    assert int(dc.cells.sum()) == int(pl94.cells.sum()) == 137_909
    geo, pgeo = dc.geography, pl94.geography
    dhc_blocks = [str(i) for i in geo.ids[geo.leaves]]
    assert [b[:5] + b[6:] for b in dhc_blocks] == [str(i) for i in pgeo.ids[pgeo.leaves]]


def test_no_person_is_in_a_cell_the_edits_forbid(dc):
    zeros = dhc_structural_zeros()
    assert int(dc.cells[:, np.flatnonzero(zeros)].sum()) == 0
    assert int(dc.cells.sum()) > 0


def test_the_spine_has_the_dhc_levels_and_geocode_widths(dc):
    geo = dc.geography
    widths = [sorted({len(str(i)) for i in geo.ids[geo.levels[d]]}) for d in range(8)]
    assert widths == [[2], [2], [5], [6], [11], [12], [13], [16]]  # US, then the DAS widths
    children = np.flatnonzero(geo.depth >= 2)  # below the states, codes nest
    parents = geo.parent[children]
    assert all(
        str(geo.ids[c]).startswith(str(geo.ids[p])) for c, p in zip(children, parents, strict=True)
    )
    fanout = np.bincount(geo.parent[geo.levels[5]], minlength=geo.n)[geo.levels[4]]
    assert fanout.max() <= 10  # tract subsets per tract-subset group
    work = load_strategy("dhc-2020-persons").workload(dc)
    assert {m.level for m in work.measurements} == set(range(8))


def test_age_by_sex_in_households_is_the_2010_national_distribution(dc):
    """Within each voting-age class, household persons' sex x 5-year age group shares lie
    within Z standard errors (from the sample's size) of the 2010 Census's."""
    _, count, relgq, sex, age, _h, _r = _decode(dc)
    home = relgq < 18
    national = national_age_sex()
    group = np.minimum(age // 5, 20)  # 0-4, ..., 95-99, 100+
    for adult in (False, True):
        mine = home & ((age >= 18) == adult)
        n = int(count[mine].sum())
        seen = np.zeros((2, 21))
        np.add.at(seen, (sex[mine], group[mine]), count[mine])
        ages = np.arange(116)
        theory = np.zeros((2, 21))
        in_class = national * ((ages >= 18) == adult)
        np.add.at(theory, (slice(None), np.minimum(ages // 5, 20)), in_class)
        theory /= theory.sum()
        p_hat = seen / n
        se = np.sqrt(theory * (1 - theory) / n)
        live = theory > 0
        assert np.all(np.abs(p_hat - theory)[live] <= Z * se[live] + 1e-12), adult
        assert seen[~live].sum() == 0


def test_relationships_follow_the_models_shares_by_age(dc):
    """Household persons aged 35-64 (where every relationship of the band is admissible):
    each relationship's share within Z standard errors of HOUSEHOLD_SHARES[(35, 64)]."""
    _, count, relgq, _s, age, _h, _r = _decode(dc)
    mine = (relgq < 18) & (age >= 35) & (age <= 64)
    n = int(count[mine].sum())
    seen = np.bincount(relgq[mine], weights=count[mine], minlength=18) / n
    theory = np.zeros(18)
    for code, share in HOUSEHOLD_SHARES[(35, 64)].items():
        theory[code] = share
    se = np.sqrt(theory * (1 - theory) / n)
    assert n > 30_000
    assert np.all(np.abs(seen - theory) <= Z * se + 1e-12)


def test_a_county_is_the_same_in_any_selection_of_states():
    one = synthetic_dhc_population(["11"], seed=5, scale=0.002)
    two = synthetic_dhc_population(["10", "11"], seed=5, scale=0.002)
    geo = two.geography
    dc_rows = np.flatnonzero([str(i).startswith("11") for i in geo.ids[geo.leaves]])
    assert abs(two.cells[dc_rows] - one.cells).max() == 0
    assert postdp.data.synthetic_dhc_population is synthetic_dhc_population


def test_the_dhc_spine_keeps_every_blocks_cells_and_refuses_other_geographies():
    """dhc_spine of the PL94 population is the DHC population's spine, block for block;
    a geography that is not the tabulation one is refused in one message."""
    from postdp import Hierarchy
    from postdp.data import dhc_spine
    from postdp.errors import ValidationError
    from postdp.tables import Table

    pl94 = synthetic_population(["11"], seed=2, scale=0.002)
    moved = dhc_spine(pl94)
    dhc = synthetic_dhc_population(["11"], seed=2, scale=0.002)
    assert list(moved.geography.ids) == list(dhc.geography.ids)
    old = {str(b): r for r, b in enumerate(pl94.geography.ids[pl94.geography.leaves])}
    new_ids = [str(b) for b in moved.geography.ids[moved.geography.leaves]]
    rows = [old[b[:5] + b[6:]] for b in new_ids]
    assert abs(moved.cells - pl94.cells[rows]).max() == 0
    geo = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    with pytest.raises(ValidationError, match="tabulation geography"):
        dhc_spine(Table(geo, pl94.categories, np.zeros((2, 2016), dtype=np.int64)))


def test_a_blocks_residents_of_a_level_share_one_type_and_the_facilities_agree(dc):
    """Every block houses at most one detailed group-quarters type per PL94 level, so the
    synthetic facilities by detailed type (one per type present) add up, level by level, to
    the PL94 population's synthetic facilities (one per level present): the bounds of the
    two designs agree, and a PL94 release meeting its own can meet the DHC's."""
    from postdp.data import dhc_spine, synthetic_dhc_facilities, synthetic_facilities

    row, _count, relgq, _s, _a, _h, _r = _decode(dc)
    gq = relgq >= 18
    pairs = np.unique(np.stack([row[gq], _level(relgq[gq]), relgq[gq]]), axis=1)
    _, per_level = np.unique(pairs[:2], axis=1, return_counts=True)
    assert pairs.shape[1] > 20 and (per_level == 1).all()
    detailed = synthetic_dhc_facilities(dc)
    by_level = np.stack([detailed[:, a - 18 : b - 18].sum(axis=1) for a, b in _GQ], axis=1)
    pl94 = dhc_spine(synthetic_population(["11"], seed=3, scale=0.2))
    assert np.array_equal(by_level, synthetic_facilities(pl94)[:, 1:])

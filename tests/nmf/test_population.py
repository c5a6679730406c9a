"""The synthetic 2020 persons population (issue 25): real county totals and race mixes,
modelled geography and attributes, seeded per county, sparse blocks."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from postdp.data import load_p1
from postdp.data._population import tallies
from postdp.errors import ValidationError
from postdp.nmf import synthetic_population
from postdp.tables import pl94_schema

RACES = {
    "White": "white",
    "Black or African American": "black",
    "American Indian and Alaska Native": "aian",
    "Asian": "asian",
    "Native Hawaiian and Other Pacific Islander": "nhpi",
    "Some Other Race": "sor",
}


@pytest.fixture(scope="module")
def vermont():
    return synthetic_population(["50"], seed=3)


def _county_totals(table):
    geo = table.geography
    counties = geo.levels[2]
    per_block = np.asarray(table.cells.sum(axis=1)).ravel()
    full = np.zeros(geo.n)
    full[geo.leaves] = per_block
    sums = geo.aggregate(full)
    return {str(geo.ids[c]): sums[c] for c in counties}


def test_county_totals_are_the_2020_counts(vermont):
    p1 = load_p1("us-county")
    geo = p1.geography
    truth = {str(geo.ids[i]): int(p1.cells[k].sum()) for k, i in enumerate(geo.leaves)}
    ours = _county_totals(vermont)
    assert len(ours) == 14
    for county, total in ours.items():
        assert total == truth[county]
    assert sum(ours.values()) == 643_077  # Vermont, 2020


def test_shape_ids_and_sparsity(vermont):
    geo = vermont.geography
    assert geo.n_levels == 6 and vermont.is_sparse
    cat = vermont.categories
    assert tuple(str(cat.ids[j]) for j in cat.leaves) == pl94_schema().cells
    leaf_ids = [str(geo.ids[i]) for i in geo.leaves]
    assert all(len(i) == 15 and i.startswith("50") for i in leaf_ids)
    per_block = np.asarray(vermont.cells.sum(axis=1)).ravel()
    assert 0.15 < (per_block == 0).mean() < 0.45  # about 28% of blocks are empty
    assert vermont.cells.nnz < 0.01 * vermont.cells.shape[0] * vermont.cells.shape[1]


def test_attribute_mixes_are_near_their_targets(vermont):
    s = pl94_schema()
    totals = np.asarray(vermont.cells.sum(axis=0)).ravel().reshape(s.shape)
    people = totals.sum()
    assert abs(totals[:, 1].sum() / people - 0.779) < 0.03  # 18 and over
    assert abs(totals[:, :, 1].sum() / people - 0.187) < 0.06  # Hispanic
    gq = totals[1:].sum() / people
    assert 0.002 < gq < 0.08
    # the state's race mix follows its counties' real 2020 mix (largest group within 5 pp)
    p1 = load_p1("us-county")
    rows = [k for k, i in enumerate(p1.geography.leaves) if str(p1.geography.ids[i])[:2] == "50"]
    real = np.asarray(p1.cells)[rows].sum(axis=0)
    ours = totals.sum(axis=(0, 1, 2))
    assert abs(ours[real.argmax()] / people - real.max() / real.sum()) < 0.05


def test_race_cells_are_in_the_p1_order():
    """The 63 cenrace levels of the schema name the same combinations, in the same order,
    as the bundled P1 detailed cells (whose county mixes the population uses)."""
    labels = pd.read_csv(resources.files("postdp.data").joinpath("_files/p1_categories.csv"))
    cat = load_p1("us-county").categories
    by_code = dict(zip(labels["code"], labels["label"], strict=True))
    p1 = []
    for j in cat.leaves:
        label = by_code[str(cat.ids[j])].replace(" alone", "")
        p1.append("+".join(RACES[part.strip()] for part in label.split(";")))
    assert tuple(p1) == pl94_schema().attributes[3].levels


def test_seeded_per_county():
    a = synthetic_population(["11"], seed=5)
    b = synthetic_population(["11"], seed=5)
    assert (a.cells != b.cells).nnz == 0
    c = synthetic_population(["11"], seed=6)
    assert (a.cells != c.cells).nnz > 0
    both = synthetic_population(["10", "11"], seed=5)  # DC is the same beside Delaware
    geo = both.geography
    dc = [k for k, i in enumerate(geo.leaves) if str(geo.ids[i]).startswith("11")]
    assert (both.cells[dc] != a.cells).nnz == 0


def test_national_tallies_match_2020():
    p1 = load_p1("us-county")
    geo = p1.geography
    pops = np.asarray(p1.cells).sum(axis=1)
    states = [k for k, i in enumerate(geo.leaves) if not str(geo.ids[i]).startswith("72")]
    tracts, bgs, blocks = tallies(pops[states]).sum(axis=0)
    assert abs(tracts / 84_414 - 1) < 0.03
    assert abs(bgs / 239_780 - 1) < 0.03
    assert abs(blocks / 8_132_968 - 1) < 0.03


def test_a_miniature_scales_every_countys_people_and_its_geounits(vermont):
    """``scale``: each county's 2020 population times the scale, rounded (Vermont's 14
    counties at a tenth), and tracts, block groups and blocks in proportion (at least one
    of each per county): the tallies of the scaled populations (blocks split over the tracts
    in whole numbers, rounded down)."""
    small = synthetic_population(["50"], seed=3, scale=0.1)
    whole = _county_totals(vermont)
    ours = _county_totals(small)
    assert ours.keys() == whole.keys()
    for county, total in ours.items():
        assert total == np.rint(0.1 * whole[county])
    geo = small.geography
    per_county = tallies(np.rint(0.1 * np.array(list(whole.values()))))
    tracts, bgs, blocks = per_county.sum(axis=0)
    assert [geo.levels[3].size, geo.levels[4].size] == [tracts, bgs]
    assert 0.99 * blocks <= geo.levels[5].size <= blocks  # each tract's share rounded down
    assert geo.levels[5].size < vermont.geography.levels[5].size / 8
    assert (synthetic_population(["50"], seed=3, scale=1).cells != vermont.cells).nnz == 0


@pytest.mark.parametrize(
    ("scale", "error"),
    [(0, ValidationError), (1.5, ValidationError), (float("nan"), ValidationError),
     (-0.1, ValidationError), (True, TypeError), ("0.5", TypeError)],
)  # fmt: skip
def test_a_scale_outside_0_1_is_refused(scale, error):
    with pytest.raises(error, match="`scale`"):
        synthetic_population(["11"], scale=scale)


def test_unknown_states_are_refused():
    with pytest.raises(ValidationError, match="2-digit FIPS"):
        synthetic_population(["72"])
    with pytest.raises(ValidationError, match="2-digit FIPS"):
        synthetic_population(["99"])


def test_the_bundled_counties_cover_exactly_the_spine_states():
    """One rule for state codes (issue 41): the states the synthetic population draws from
    (the bundled 2010 county file, Puerto Rico left out) are the spine's 50 states and DC."""
    from postdp.data import load_p1
    from postdp.data._states import STATE_FIPS

    p1 = load_p1("us-county")
    geo = p1.geography
    found = {str(geo.ids[i])[:2] for i in geo.leaves} - {"72"}
    assert found == STATE_FIPS and len(STATE_FIPS) == 51

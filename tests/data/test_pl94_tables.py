"""The P.L. 94-171 tables against a hand tabulation of synthetic person records.

Facts: the 2020 P.L. 94-171 technical documentation's table shells (P1 race; P2 Hispanic or
Latino by race; P3, P4 the same for 18 and over; P5 group quarters by major type; H1
occupancy status). The hand tabulation below reads each row's meaning from its printed
label alone (``"White; Asian"``, ``"Population of two races"``, ...), never from the
factors the library builds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from postdp.data import geography_names, pl94_tables, tabulate_persons
from postdp.errors import ValidationError
from postdp.tables import Block, PublishedTable, units_schema

RACES = {
    "White": 0,
    "Black or African American": 1,
    "American Indian and Alaska Native": 2,
    "Asian": 3,
    "Native Hawaiian and Other Pacific Islander": 4,
    "Some Other Race": 5,
}
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
# CENRACE 1..63: the race combinations by number of races, then in lexical order of the
# OMB groups (the PPMF's codes).
COMBOS = [set(c) for k in range(1, 7) for c in itertools.combinations(range(6), k)]


def _race_rule(label: str):
    """Which persons (by their set of races) a P1 row counts, from its label."""
    if label == "Total":
        return lambda races: True
    if label.startswith("Population of "):
        k = NUMBERS[label.split()[2]]
        if label.endswith("or more races"):
            return lambda races: len(races) >= k
        return lambda races: len(races) == k
    names = label.removesuffix(" alone").split("; ")
    wanted = {RACES[n] for n in names}
    return lambda races: races == wanted


def _persons(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    blocks = np.array(["1001", "1002", "2001"])
    tracts = np.array(["000100", "000201"])
    pick = rng.integers(0, 3, n)
    return pd.DataFrame(
        {
            "TABBLKST": rng.choice(["10", "11"], n),
            "TABBLKCOU": "001",
            "TABTRACTCE": rng.choice(tracts, n),
            "TABBLKGRPCE": [b[0] for b in blocks[pick]],
            "TABBLK": blocks[pick],
            "GQTYPE_PL": rng.choice(8, n, p=[0.6] + [0.4 / 7] * 7),
            "VOTING_AGE": rng.integers(1, 3, n),
            "CENHISP": rng.integers(1, 3, n),
            # every race combination appears, the single races more often
            "CENRACE": np.where(rng.random(n) < 0.5, rng.integers(1, 7, n), rng.integers(1, 64, n)),
        }
    )


def _hand(persons: pd.DataFrame, code: str, label: str, table: str) -> int:
    """A row of a P.L. table counted person by person from its table and label."""
    races = [COMBOS[c - 1] for c in persons["CENRACE"]]
    adult = persons["VOTING_AGE"].to_numpy() == 2
    hispanic = persons["CENHISP"].to_numpy() == 2
    keep = np.ones(len(persons), dtype=bool)
    if table in ("P3", "P4"):
        keep &= adult
    if table in ("P2", "P4"):
        row = int(code[3:6])
        if row == 1:
            return int(keep.sum())
        if row == 2:
            return int((keep & hispanic).sum())
        keep &= ~hispanic
        # rows 3.. are P1's rows 1.. for the not Hispanic (P2_003N is their total)
        label = "Total" if row == 3 else label
    rule = _race_rule(label)
    return int(sum(k and rule(r) for k, r in zip(keep, races, strict=True)))


def test_race_and_origin_tables_against_a_hand_tabulation():
    persons = _persons(3000, seed=4)
    table = tabulate_persons(persons)
    geo = table.geography
    histograms = table.detailed()
    tables = pl94_tables(["P1", "P2", "P3", "P4"])
    state = {g: np.flatnonzero(geo.ids == g)[0] for g in ("10", "11")}
    for name, published in tables.items():
        rows = published.apply(histograms)
        assert rows.dtype == np.int64
        for st, node in state.items():
            mine = persons[persons["TABBLKST"] == st]
            for j, (code, label) in enumerate(zip(published.codes, published.labels, strict=True)):
                assert rows[node, j] == _hand(mine, code, label, name), (name, code, label, st)
    # the labels the rule reads are the published ones
    assert tables["P1"].labels[10] == "White; Black or African American"
    assert tables["P2"].labels[:3] == ("Total", "Hispanic or Latino", "Not Hispanic or Latino")
    assert [t.size for t in tables.values()] == [71, 73, 71, 73]


def test_group_quarters_table_against_a_hand_tabulation():
    persons = _persons(2000, seed=9)
    table = tabulate_persons(persons)
    geo = table.geography
    histograms = table.detailed()
    p5 = pl94_tables(["P5"])["P5"]
    gq = persons["GQTYPE_PL"].to_numpy()
    expected = {
        "Total": gq >= 1,
        "Institutionalized population": (gq >= 1) & (gq <= 4),
        "Correctional facilities for adults": gq == 1,
        "Juvenile facilities": gq == 2,
        "Nursing facilities/Skilled-nursing facilities": gq == 3,
        "Other institutional facilities": gq == 4,
        "Noninstitutionalized population": gq >= 5,
        "College/University student housing": gq == 5,
        "Military quarters": gq == 6,
        "Other noninstitutional facilities": gq == 7,
    }
    rows = p5.apply(histograms)
    for block in np.flatnonzero(geo.depth == geo.n_levels - 1):
        mine = (persons["TABBLKST"] + "001" + persons["TABTRACTCE"] + persons["TABBLK"]).to_numpy()
        here = mine == geo.ids[block]
        got = dict(zip(p5.labels, rows[block], strict=True))
        assert got == {k: int((v & here).sum()) for k, v in expected.items()}
    assert p5.codes == tuple(f"P5_{k:03d}N" for k in range(1, 11))


def test_occupancy_table_of_a_units_histogram():
    h1 = pl94_tables(["H1"])["H1"]
    assert h1.schema.cells == units_schema().cells == ("vacant", "occupied")
    units = np.array([[3, 10], [0, 7]])  # vacant, occupied per geounit
    assert h1.apply(units).tolist() == [[13, 10, 3], [7, 7, 0]]
    assert h1.labels == ("Total", "Occupied", "Vacant") and h1.unit == "housing units"


def test_tables_are_returned_in_the_census_order_and_unknown_names_refused():
    assert list(pl94_tables(["H1", "P5", "P1"])) == ["P1", "P5", "H1"]
    with pytest.raises(ValidationError, match="unknown table 'P6'"):
        pl94_tables(["P6"])


def test_a_published_table_row_equals_its_dense_matrix_row():
    """apply (factor by factor, the cheap sums first) and the dense matrix agree."""
    p2 = pl94_tables(["P2"])["P2"]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (3, p2.schema.size)).astype(float)
    np.testing.assert_allclose(p2.apply(x), x @ p2.matrix().T)


def test_blocks_and_tables_refuse_inconsistent_definitions():
    with pytest.raises(ValidationError, match="has 2 rows"):
        Block(["a"], [np.eye(2)])
    schema = units_schema()
    with pytest.raises(ValidationError, match="levels"):
        PublishedTable("T", "t", "u", schema, [Block(["a"], [np.ones((1, 3))])], ["A"])
    block = Block(["a", "a"], [np.eye(2)])
    with pytest.raises(ValidationError, match="unique"):
        PublishedTable("T", "t", "u", schema, [block], ["A", "B"])


def test_geography_names_of_the_nation_states_and_counties():
    names = geography_names()
    assert names["US"] == "United States"
    assert names["13207"] == "Monroe County, Georgia"
    assert names["13"] == "Georgia" and names["11"] == "District of Columbia"
    monroes = [g for g, n in names.items() if n.startswith("Monroe County,")]
    assert len(monroes) == 17  # which Monroe County: the state in the name tells them apart

"""The DHC's sex-by-age tables P12 and PCT12 (``postdp/data/_dhc_tables.py``; the P12 age
groups of ``shared/research/dhc-2020-design.md`` section 2.1): each row the sum of the
cells it names, checked on a random histogram against sums written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from postdp.data import DHC_TABLES, dhc_tables
from postdp.errors import ValidationError
from postdp.tables import dhc_schema


@pytest.fixture(scope="module")
def people():
    """A random histogram of 500 persons: (cell, count) and its (sex, age) tallies."""
    schema = dhc_schema()
    rng = np.random.default_rng(4)
    cells = rng.choice(schema.size, 500, replace=False)
    counts = rng.integers(1, 4, 500)
    h = np.zeros(schema.size, dtype=np.int64)
    h[cells] = counts
    _, sex, age, _, _ = np.unravel_index(cells, schema.shape)
    tally = np.zeros((2, 116), dtype=np.int64)
    np.add.at(tally, (sex, age), counts)
    return h, tally


def test_p12_rows_are_the_sums_of_their_sex_and_age_groups(people):
    h, tally = people
    p12 = dhc_tables(["P12"])["P12"]
    row = dict(zip(p12.codes, p12.apply(h), strict=True))
    assert p12.size == 49 and row["P12_001N"] == h.sum() == tally.sum()
    assert row["P12_002N"] == tally[0].sum() and row["P12_026N"] == tally[1].sum()
    groups = [(0, 4), (5, 9), (10, 14), (15, 17), (18, 19), (20, 20), (21, 21), (22, 24)]
    groups += [(a, a + 4) for a in range(25, 60, 5)] + [(60, 61), (62, 64), (65, 66), (67, 69)]
    groups += [(70, 74), (75, 79), (80, 84), (85, 115)]
    for s, first in ((0, 3), (1, 27)):
        for k, (a, b) in enumerate(groups):
            assert row[f"P12_{first + k:03d}N"] == tally[s, a : b + 1].sum(), (s, a, b)
    assert (
        p12.labels[24] == "Male: 85 years and over" and p12.labels[30] == "Female: 18 and 19 years"
    )


def test_pct12_rows_are_single_years_then_the_top_groups(people):
    h, tally = people
    pct12 = dhc_tables(["PCT12"])["PCT12"]
    counts = pct12.apply(h)
    assert pct12.size == 209 and counts[0] == h.sum()
    for s, start in ((0, 1), (1, 105)):
        assert counts[start] == tally[s].sum()
        np.testing.assert_array_equal(counts[start + 1 : start + 101], tally[s, :100])
        top = [tally[s, 100:105].sum(), tally[s, 105:110].sum(), tally[s, 110:].sum()]
        np.testing.assert_array_equal(counts[start + 101 : start + 104], top)
    assert pct12.codes[-1] == "PCT12_209N" and pct12.labels[-1] == "Female: 110 years and over"


def test_dhc_tables_are_named_and_refuse_other_names():
    assert tuple(dhc_tables(["PCT12", "P12"])) == DHC_TABLES == ("P12", "PCT12")
    with pytest.raises(ValidationError, match="unknown table 'P1'; choose from P12, PCT12"):
        dhc_tables(["P1"])

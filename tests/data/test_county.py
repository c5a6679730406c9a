"""The bundled 2010 county populations (see src/postdp/data/PROVENANCE.md)."""

import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.data import load_county_populations


@pytest.fixture(scope="module")
def df():
    return load_county_populations()


def test_shape_columns_dtypes(df):
    assert list(df.columns) == ["id", "parent", "name", "level", "count"]
    assert df.shape == (3195, 5)
    assert df["count"].dtype == "int64"
    assert df.groupby("level").size().to_dict() == {"nation": 1, "state": 51, "county": 3143}
    states = df[df["level"] == "state"]
    counties = df[df["level"] == "county"]
    assert states["id"].str.fullmatch(r"\d{2}").all()  # FIPS codes keep their leading zeros
    assert counties["id"].str.fullmatch(r"\d{5}").all()
    assert (counties["id"].str[:2] == counties["parent"]).all()
    assert df.loc[0, "id"] == "US" and pd.isna(df.loc[0, "parent"])


def test_nation_total_is_the_official_2010_count(df):
    assert int(df.loc[df["id"] == "US", "count"].iloc[0]) == 308_745_538
    assert int(df.loc[df["level"] == "state", "count"].sum()) == 308_745_538


def test_every_state_equals_the_sum_of_its_counties(df):
    states = df[df["level"] == "state"].set_index("id")["count"]
    sums = df[df["level"] == "county"].groupby("parent")["count"].sum()
    pd.testing.assert_series_equal(states.sort_index(), sums.sort_index(), check_names=False)


@pytest.mark.parametrize(
    ("state", "n_counties"), [("04", 15), ("48", 254), ("35", 33), ("36", 62), ("02", 30)]
)
def test_county_counts_per_state(df, state, n_counties):
    # Alaska has 30 rows: Valdez-Cordova appears as its 2019 successors Chugach and Copper River
    assert (df["parent"] == state).sum() == n_counties


def test_repairs(df):
    counts = df.set_index("id")["count"]
    assert counts["02063"] == 6_684 and counts["02066"] == 2_952  # Chugach, Copper River
    assert counts["51019"] == 68_676 + 6_222  # Bedford County + Bedford city
    assert counts["02"] == 710_231 and counts["51"] == 8_001_024


def test_builds_a_valid_hierarchy(df):
    h = Hierarchy.from_frame(df, id="id", parent="parent", count="count")
    assert h.n == 3195
    assert [lvl.size for lvl in h.levels] == [1, 51, 3143]
    assert h.counts.sum() == 3 * 308_745_538

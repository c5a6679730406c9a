"""postdp.nmf.tabulate: a post-processed run's P.L. 94-171 tables, one file per geolevel."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postdp.data import geoid_names, pl94_tables
from postdp.errors import ValidationError
from postdp.nmf.tabulate import tabulate

from .conftest import small_table


@pytest.fixture(scope="module")
def released(release):
    """The run of :func:`measured` post-processed (conftest.py: shared, read only)."""
    return {
        "topdown-2020": release("topdown-2020"),
        "project": release("project"),
        "amc": release("topdown-2020", amc=3, seed=4),
    }


@pytest.fixture(scope="module")
def tabulated(released, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tables")
    tabulate(released["topdown-2020"], folder)
    return folder


def _wide(out, level):
    frame = pd.read_parquet(out / "wide" / f"{level}.parquet")
    return frame.drop(columns=[c for c in ("State", "total") if c in frame]).set_index("geocode")


def test_every_level_gets_a_csv_and_a_parquet_file_with_census_ids_and_names(tabulated):
    county = pd.read_parquet(tabulated / "County.parquet")
    assert county["GEOID"].tolist() == ["10001", "11001"]
    assert county["NAME"].tolist() == [
        "Kent County, Delaware",
        "District of Columbia, District of Columbia",
    ]
    assert county["GEOLEVEL"].eq("County").all() and not county["AIAN_BRANCH"].any()
    assert pd.api.types.is_string_dtype(county["GEOID"])
    us = pd.read_parquet(tabulated / "US.parquet")
    assert us[["GEOID", "NAME"]].values.tolist() == [["US", "United States"]]
    blocks = pd.read_parquet(tabulated / "Block.parquet")
    assert blocks["GEOID"].str.len().eq(15).all()
    assert blocks["NAME"].iloc[0] == (
        "Block 1000, Block Group 1, Census Tract 0, Kent County, Delaware"
    )
    for level in ("US", "State", "County", "Tract", "Block_Group", "Block"):
        csv = pd.read_csv(tabulated / f"{level}.csv", dtype={"GEOID": str}, keep_default_na=False)
        parquet = pd.read_parquet(tabulated / f"{level}.parquet")
        assert list(csv.columns) == list(parquet.columns)
        assert csv["GEOID"].tolist() == parquet["GEOID"].tolist()
        counts = [c for c in parquet.columns if c[:1] in "PH" and c[1].isdigit()]
        np.testing.assert_array_equal(csv[counts].to_numpy(), parquet[counts].to_numpy())
    variables = pd.read_csv(tabulated / "variables.csv")
    assert len(variables) == 71 + 73 + 71 + 73 + 10
    assert variables.loc[0].tolist()[:4] == ["P1_001N", "P1", "Race", "Total"]


def test_the_tables_are_the_tabulation_of_the_released_histograms(released, tabulated):
    tables = pl94_tables(["P1", "P2", "P3", "P4", "P5"])
    for level in ("State", "Tract", "Block"):
        wide = _wide(released["topdown-2020"], level)
        got = pd.read_parquet(tabulated / f"{level}.parquet").set_index("GEOID")
        cells = wide.to_numpy()
        for table in tables.values():
            expected = table.apply(cells)
            ids = [g[1:] for g in wide.index]
            np.testing.assert_array_equal(got.loc[ids, list(table.codes)].to_numpy(), expected)
            assert got[list(table.codes)].dtypes.eq(np.int64).all()


def test_the_state_totals_are_the_invariant_true_totals(tabulated):
    truth = small_table()
    geo = truth.geography
    states = pd.read_parquet(tabulated / "State.parquet").set_index("GEOID")
    for state in ("10", "11"):
        node = int(np.flatnonzero(geo.ids == state)[0])
        assert states.loc[state, "P1_001N"] == truth.detailed()[node].sum()


def test_a_real_valued_release_is_tabulated_as_real_numbers(released, tmp_path):
    tabulate(released["project"], tmp_path, tables=["P1"])
    tract = pd.read_parquet(tmp_path / "Tract.parquet")
    assert tract["P1_001N"].dtype == np.float64
    wide = _wide(released["project"], "Tract")
    np.testing.assert_allclose(
        tract.set_index("GEOID")["P1_001N"].to_numpy(), wide.to_numpy().sum(axis=1)
    )
    csv = pd.read_csv(tmp_path / "Tract.csv", dtype={"GEOID": str})
    assert (csv["P1_003N"].astype(str).str.split(".").str[1].str.len() <= 4).all()
    np.testing.assert_allclose(csv["P1_003N"], tract["P1_003N"], rtol=0, atol=5.01e-5)


def test_refuses_an_unfinished_or_changed_release_and_tables_it_cannot_make(released, tmp_path):
    out = released["topdown-2020"]
    with pytest.raises(ValidationError, match="H1 is made from the housing units"):
        tabulate(out, tmp_path, tables=["H1"])
    with pytest.raises(ValidationError, match="not a postdp post-processing"):
        tabulate(tmp_path, tmp_path)
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    manifest = json.loads((copy / "postdp-manifest.json").read_text())
    changed = copy / next(f for f in manifest["files"] if f.startswith("wide/County"))
    data = bytearray(changed.read_bytes())
    data[-20] ^= 1
    changed.write_bytes(bytes(data))
    with pytest.raises(ValidationError, match="changed or is missing"):
        tabulate(copy, tmp_path)
    (copy / "postdp-manifest.json").unlink()
    with pytest.raises(ValidationError, match="not finished"):
        tabulate(copy, tmp_path)
    assert not list(tmp_path.glob("*.parquet")) and not list(tmp_path.glob(".*.tmp"))


def test_geoid_names_below_the_county():
    assert geoid_names(["11001000101", "110010002011", "110010002011003", "99001000100"]) == [
        "Census Tract 1.01, District of Columbia, District of Columbia",
        "Block Group 1, Census Tract 2.01, District of Columbia, District of Columbia",
        "Block 1003, Block Group 1, Census Tract 2.01, District of Columbia, District of Columbia",
        "",
    ]


def test_an_aian_branch_part_keeps_its_geoid_and_is_marked():
    """The Census's geocodes: the AIAN flag, then the GEOID (``1`` on the AIAN branch)."""
    from postdp.nmf.tabulate import _identify

    frame = _identify(["", "040", "140", "140005", "040005"], "County")
    assert frame["GEOID"].tolist() == ["US", "40", "40", "40005", "40005"]
    assert frame["AIAN_BRANCH"].tolist() == [False, False, True, True, False]
    assert frame["NAME"].iloc[3] == frame["NAME"].iloc[4] == "Atoka County, Oklahoma"


@pytest.mark.parametrize("method", ["project", "amc"])
def test_every_variable_carries_the_margin_of_error_the_release_holds(released, method, tmp_path):
    """``project``: exact; an integral method with ``amc``: from its replicates. Each count is
    followed by its ``_moe`` column, the release's moe form for that geounit; the state
    totals are invariants: margin 0."""
    out = released[method]
    tabulate(out, tmp_path)
    for level in ("State", "Tract", "Block"):
        got = pd.read_parquet(tmp_path / f"{level}.parquet").set_index("GEOID")
        moe = pd.read_parquet(out / "moe" / f"{level}.parquet").set_index("geocode")
        moe.index = [g[1:] for g in moe.index]
        codes = [c for c in got.columns if c[:1] in "PH" and not c.endswith("_moe")]
        assert [c for c in got.columns if c.endswith("_moe")] == [c + "_moe" for c in codes]
        columns = list(got.columns)
        assert all(columns[columns.index(c) + 1] == c + "_moe" for c in codes)
        np.testing.assert_array_equal(
            got[[c + "_moe" for c in codes]].to_numpy(),
            moe.loc[got.index, [c + "_moe" for c in codes]].to_numpy(),
        )
        assert (got[[c + "_moe" for c in codes]].to_numpy() >= 0).all()
    states = pd.read_parquet(tmp_path / "State.parquet")
    assert (states["P1_001N_moe"] == 0).all()
    tract = pd.read_parquet(tmp_path / "Tract.parquet")
    assert (tract["P1_003N_moe"] > 0).all()


def test_the_tables_refuse_margins_of_error_of_other_geounits(released, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(released["project"], copy)
    for path in (copy / "moe" / "Tract.parquet").rglob("*.parquet"):
        frame = pd.read_parquet(path)
        frame.iloc[::-1].to_parquet(path, index=False)  # another order than the estimates'
    manifest = json.loads((copy / "postdp-manifest.json").read_text())
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith("moe/")}
    (copy / "postdp-manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "t").mkdir()
    with pytest.raises(ValidationError, match="its geounits are not those of"):
        tabulate(copy, tmp_path / "t")

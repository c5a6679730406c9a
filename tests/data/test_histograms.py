"""Block histograms (wide or long Parquet) read into the tabulation table, state by state."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp.data import histogram_states, read_histograms
from postdp.errors import ValidationError
from postdp.nmf import synthetic_population
from postdp.tables import pl94_schema, units_schema


@pytest.fixture(scope="module")
def two_states():
    """DC and Delaware's synthetic tables (empty blocks included; a twentieth of each
    state) and their wide frame."""
    tables = [synthetic_population(states=[s], seed=3, scale=0.05) for s in ("11", "10")]
    schema = pl94_schema()
    frames = []
    for t in tables:
        geo = t.geography
        frame = pd.DataFrame(t.dense_cells(), columns=list(schema.cells))
        frame.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
        frames.append(frame)
    return tables, pd.concat(frames, ignore_index=True)


def _same(got, want):
    assert np.array_equal(got.geography.ids, want.geography.ids)
    assert np.array_equal(got.geography.parent, want.geography.parent)
    assert np.array_equal(got.dense_cells(), want.dense_cells())


def test_wide_and_long_files_give_each_states_table(two_states, tmp_path):
    """Either form, text or NMF geocodes, one file or a folder partitioned by state: each
    state's table is the one tabulated (its empty blocks kept as geounits)."""
    tables, wide = two_states
    wide.to_parquet(tmp_path / "wide.parquet", row_group_size=5000)
    rows, cols = np.nonzero(wide.drop(columns="geocode").to_numpy())
    long = pd.DataFrame(
        {
            "geocode": "0" + wide["geocode"].to_numpy()[rows],  # the 16-digit NMF geocode
            "category": np.asarray(pl94_schema().cells)[cols],
            "count": wide.drop(columns="geocode").to_numpy()[rows, cols],
        }
    )
    empty = wide.loc[wide.drop(columns="geocode").sum(axis=1) == 0, "geocode"]
    listed = pd.DataFrame({"geocode": empty, "category": pl94_schema().cells[0], "count": 0})
    pd.concat([long, listed]).sample(frac=1, random_state=0).to_parquet(tmp_path / "long.parquet")
    folder = tmp_path / "parts"
    for state, part in wide.groupby(wide["geocode"].str[:2]):
        (folder / f"State=0{state}").mkdir(parents=True)
        part.to_parquet(folder / f"State=0{state}" / "part-0.parquet")
    schema = pl94_schema()
    for path in (tmp_path / "wide.parquet", tmp_path / "long.parquet", folder):
        assert histogram_states(path, schema) == ["10", "11"]
        for state, table in zip(("11", "10"), tables, strict=True):
            _same(read_histograms(path, schema, states=[state]), table)
    both = read_histograms(tmp_path / "wide.parquet", schema)
    assert both.geography.levels[1].size == 2
    assert int(both.dense_cells().sum()) == sum(int(t.dense_cells().sum()) for t in tables)


def test_rows_of_one_block_add_up_and_integer_geocodes_are_padded(tmp_path):
    """Alabama's GEOIDs as integers lose their leading 0: padded back to 15 digits."""
    frame = pd.DataFrame(
        {
            "geocode": [10010201001000, 10010201001000, 10010201002001],
            "vacant": [1, 2, 0],
            "occupied": [5, 0, 0],
        }
    )
    frame.to_parquet(tmp_path / "h.parquet")
    t = read_histograms(tmp_path / "h.parquet", units_schema(), states=["01"])
    geo = t.geography
    assert geo.ids[geo.leaves].tolist() == ["010010201001000", "010010201002001"]
    assert t.dense_cells().tolist() == [[3, 5], [0, 0]]
    assert geo.ids[geo.levels[2]].tolist() == ["01001"]
    assert histogram_states(tmp_path / "h.parquet", units_schema()) == ["01"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda f: f.drop(columns="geocode"), "need a 'geocode' column"),
        (lambda f: f.drop(columns="occupied"), r"the wide form \(one column per cell\) needs"),
        (lambda f: f.assign(occupied=[1.5, 0.0]), "occupied: counts must be whole"),
        (lambda f: f.assign(vacant=[-1, 7777]), "vacant: counts must be whole numbers >= 0"),
        (lambda f: f.assign(vacant=["a", "0"]), "vacant: counts must be whole numbers >= 0"),
        (lambda f: f.assign(vacant=pd.array([pd.NA, 0], dtype="Int64")), "vacant: counts"),
        (lambda f: f.assign(vacant=[0, -1], occupied=[0.5, 0]), "vacant: counts"),  # first
        (lambda f: f.assign(geocode=["11001000100100", "1100100010010x"]), "geocode: every"),
        (lambda f: f.assign(geocode=["1100100010010011", "12"]), "15-digit GEOID"),
        (lambda f: f.iloc[:0], "no block histograms"),
        (lambda f: f.assign(geocode=["990010001001001", "110010001001002"]), r"FIPS.*\['99'\]"),
        (lambda f: f.assign(geocode=["720010001001001", "110010001001002"]), r"FIPS.*\['72'\]"),
    ],
)
def test_bad_histograms_are_refused_naming_the_column(tmp_path, change, needle):
    frame = pd.DataFrame(
        {
            "geocode": ["110010001001001", "110010001001002"],
            "vacant": [7777, 0],
            "occupied": [9191, 2],
        }
    )
    change(frame).to_parquet(tmp_path / "h.parquet")
    with pytest.raises(ValidationError, match=needle) as err:
        histogram_states(tmp_path / "h.parquet", units_schema())
    assert not any(str(v) in str(err.value) for v in (7777, 9191))  # never a count


def test_whole_numbers_as_floats_or_unsigned_read_as_the_same_counts(tmp_path):
    """A wide file's counts may come as doubles (whole) or unsigned integers."""
    frame = pd.DataFrame({"geocode": ["110010001001001"], "vacant": [3.0], "occupied": [40]})
    frame.astype({"occupied": np.uint16}).to_parquet(tmp_path / "h.parquet")
    assert read_histograms(tmp_path / "h.parquet", units_schema()).dense_cells().tolist() == [
        [3, 40]
    ]


def test_a_long_file_names_only_cells_of_the_schema(tmp_path):
    frame = pd.DataFrame({"geocode": ["110010001001001"], "category": ["owned"], "count": [3]})
    frame.to_parquet(tmp_path / "h.parquet")
    with pytest.raises(ValidationError, match="category: every value must be a cell"):
        histogram_states(tmp_path / "h.parquet", units_schema())
    frame.drop(columns="count").to_parquet(tmp_path / "h.parquet")
    with pytest.raises(ValidationError, match=r"the long form needs the columns \['count'\]"):
        histogram_states(tmp_path / "h.parquet", units_schema())

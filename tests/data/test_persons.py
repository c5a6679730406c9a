"""Person records in the 2020 PPMF layout tabulated into the persons table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp.data import person_states, read_persons, tabulate_persons
from postdp.errors import ValidationError
from postdp.tables import pl94_schema


def _records(**changes):
    base = {
        "TABBLKST": ["11", "11", "11", "10"],
        "TABBLKCOU": ["001", "001", "001", "003"],
        "TABTRACTCE": ["000100", "000100", "000200", "010500"],
        "TABBLKGRPCE": ["1", "1", "2", "3"],
        "TABBLK": ["1001", "1001", "2000", "3012"],
        "GQTYPE_PL": [0, 3, 0, 5],
        "VOTING_AGE": [1, 2, 2, 2],
        "CENHISP": [1, 2, 1, 1],
        "CENRACE": [1, 7, 63, 4],
    }
    base.update(changes)
    return pd.DataFrame(base)


def test_each_person_lands_in_its_cell():
    """Cell labels from the schema: GQTYPE_PL 3 is nursing, VOTING_AGE 1 under 18, CENHISP
    2 Hispanic, CENRACE 07 White + Black (the 2020 codes), 63 all six races."""
    t = tabulate_persons(_records())
    geo, cells = t.geography, t.dense_cells()
    labels = np.asarray(pl94_schema().cells)
    blocks = geo.ids[geo.leaves].tolist()
    assert blocks == ["100030105003012", "110010001001001", "110010002002000"]
    assert geo.ids[geo.levels[4]].tolist() == ["100030105003", "110010001001", "110010002002"]
    found = {
        b: sorted(labels[np.flatnonzero(row)].tolist())
        for b, row in zip(blocks, cells, strict=True)
    }
    assert found["110010001001001"] == [
        "household|under 18|not hispanic|white",
        "nursing|18+|hispanic|white+black",
    ]
    assert found["110010002002000"] == [
        "household|18+|not hispanic|white+black+aian+asian+nhpi+sor"
    ]
    assert found["100030105003012"] == ["college housing|18+|not hispanic|asian"]
    assert int(cells.sum()) == 4 and t.counts()[0, 0] == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"GQTYPE_PL": [0, 8, 0, 0]}, "GQTYPE_PL"),
        ({"CENRACE": [0, 1, 1, 1]}, "CENRACE"),
        ({"VOTING_AGE": [1, 2, 3, 1]}, "VOTING_AGE"),
        ({"TABTRACTCE": ["100", "000100", "000200", "1234567"]}, "TABTRACTCE"),
        ({"TABBLK": ["2001", "1001", "2000", "3012"]}, "TABBLK"),
        ({"CENHISP": [1, 1.5, 1, 1]}, "CENHISP"),
        ({"TABBLKST": ["99", "11", "11", "10"]}, r"TABBLKST: not a FIPS code .*\['99'\]"),
        ({"TABBLKST": ["00", "11", "11", "10"]}, r"TABBLKST: not a FIPS code .*\['00'\]"),
    ],
)
def test_bad_records_are_refused_naming_the_column(change, message, tmp_path):
    with pytest.raises(ValidationError, match=message):
        tabulate_persons(_records(**change))
    _records(**change).to_parquet(tmp_path / "p.parquet")
    with pytest.raises(ValidationError, match=message):
        person_states(tmp_path / "p.parquet")


def test_a_partitioned_folder_is_read_one_state_at_a_time(tmp_path):
    records = _records()
    for state, part in records.groupby("TABBLKST"):
        folder = tmp_path / "persons" / f"TABBLKST={state}"
        folder.mkdir(parents=True)
        part.drop(columns="TABBLKST").to_parquet(folder / "part.parquet")
    assert person_states(tmp_path / "persons") == ["10", "11"]
    only = read_persons(tmp_path / "persons", states=["11"])
    assert len(only) == 3 and set(only["TABBLKST"]) == {"11"}
    t = tabulate_persons(only)
    assert t.geography.ids[t.geography.levels[1]].tolist() == ["11"]
    with pytest.raises(ValidationError, match="columns"):
        tabulate_persons(records.drop(columns="CENRACE"))

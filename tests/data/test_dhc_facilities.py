"""Facilities by the DHC's 24 detailed group-quarters types (issue 46): the bounds of
``dhc_facility_bounds`` worked out by hand on a two-county tree, a block whose facilities
are unknown bounding nothing above it, and a facilities file read onto the DHC spine's
blocks (their GEOID with the primitive geounit's digit)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.data import DHC_FACILITY_COLUMNS, dhc_facility_bounds, read_facilities
from postdp.errors import ValidationError

FIRST_GQ = 18  # relgq 18 to 41: the detailed group-quarters types


def _tree() -> Hierarchy:
    """A state, two counties on the DHC spine (prim digit 0), two blocks each."""
    ids = ["11", "110010", "110030"]
    parents = [None, "11", "11"]
    for county in ("110010", "110030"):
        for b in ("1", "2"):
            ids.append(county + "0000001" + "00" + b)
            parents.append(county)
    return Hierarchy.from_parents(ids, parents)


def test_the_bounds_by_hand_with_a_block_of_unknown_facilities():
    """Blocks a1, a2, b1, b2 with 2 prisons (GQ103) in a1, a nursing facility (GQ301) in
    b1, and b2's facilities unknown: at least 2 prisoners in a1, county a and the state,
    none in a2 or b1 (no prison there); at least 1 nursing resident in b1, county b and the
    state; county b and the state are not bounded above for any type (b2 may hold any),
    county a is (0 where it has no facility); households never."""
    geo = _tree()
    prison, nursing = DHC_FACILITY_COLUMNS.index("GQ103"), DHC_FACILITY_COLUMNS.index("GQ301")
    counts = np.zeros((4, 24), dtype=int)
    counts[0, prison] = 2
    counts[2, nursing] = 1
    counts[3, :] = 7  # unknown: ignored
    b = dhc_facility_bounds(counts, geo, known=[True, True, True, False])
    row = {str(i): k for k, i in enumerate(geo.ids)}
    a1, a2, b1, b2 = (row[f"{c}000000100{k}"] for c in ("110010", "110030") for k in "12")
    state, ca, cb = row["11"], row["110010"], row["110030"]
    assert b.lower[state, FIRST_GQ + prison] == 2 and b.lower[ca, FIRST_GQ + prison] == 2
    assert b.lower[state, FIRST_GQ + nursing] == 1 and b.lower[cb, FIRST_GQ + nursing] == 1
    assert b.lower[b2].sum() == 0 and b.lower[ca, FIRST_GQ + nursing] == 0
    assert b.upper[a2, FIRST_GQ + prison] == 0 and b.upper[b1, FIRST_GQ + prison] == 0
    assert b.upper[a1, FIRST_GQ + prison] == np.inf
    assert np.isinf(b.upper[[state, cb, b2]]).all()
    assert b.upper[ca, FIRST_GQ + nursing] == 0
    assert np.isinf(b.upper[:, :FIRST_GQ]).all() and not b.lower[:, :FIRST_GQ].any()
    every_known = dhc_facility_bounds(counts, geo)
    assert every_known.lower[state, FIRST_GQ] == 7  # b2's 7 counted when known
    with pytest.raises(ValidationError, match=r"`known` must have shape \(4,\)"):
        dhc_facility_bounds(counts, geo, known=[True])


def test_a_file_by_detailed_type_is_read_onto_the_dhc_spines_blocks(tmp_path):
    """A file keyed by tabulation GEOIDs (15 digits, or the NMF's 16 with its flag) fills
    the DHC spine's blocks (16 digits, the prim digit after the county); a block it lacks
    is unknown; a PL94 file (its 7 major types) lacks the detailed columns."""
    geo = _tree()
    leaves = [str(i) for i in geo.ids[geo.leaves]]
    rows = [{"geocode": leaves[0][:5] + leaves[0][6:], **dict.fromkeys(DHC_FACILITY_COLUMNS, 0)},
            {"geocode": "0" + leaves[2][:5] + leaves[2][6:],
             **dict.fromkeys(DHC_FACILITY_COLUMNS, 0), "GQ501": 3}]  # fmt: skip
    pd.DataFrame(rows).to_csv(tmp_path / "f.csv", index=False)
    counts, known = read_facilities(tmp_path / "f.csv", geo, detailed=True)
    assert counts.shape == (4, 24) and known.tolist() == [True, False, True, False]
    assert counts[2, DHC_FACILITY_COLUMNS.index("GQ501")] == 3 and counts.sum() == 3
    pd.DataFrame([{"geocode": leaves[0][:5] + leaves[0][6:], "nursing": 1}]).to_csv(
        tmp_path / "pl94.csv", index=False
    )
    with pytest.raises(ValidationError, match=r"missing columns \['GQ101'"):
        read_facilities(tmp_path / "pl94.csv", geo, detailed=True)

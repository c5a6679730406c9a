"""A small 2020-shaped table (two states, tabulation GEOIDs) and its noisy measurements."""

from __future__ import annotations

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.tables import Table, load_strategy, measure, pl94_schema


def small_table(seed: int = 0) -> Table:
    """US > 2 states > a county each > 2 tracts > 1-2 block groups > 2-3 blocks."""
    ids, parents = ["US"], [None]
    rng = np.random.default_rng(seed)
    for state in ("10", "11"):
        county = state + "001"
        ids += [state, county]
        parents += ["US", state]
        for t in range(2):
            tract = county + f"{t:06d}"
            ids.append(tract)
            parents.append(county)
            for g in range(1 + t):
                bg = tract + str(g + 1)
                ids.append(bg)
                parents.append(tract)
                for b in range(2 + g):
                    ids.append(bg + f"{b:03d}")
                    parents.append(bg)
    geo = Hierarchy.from_parents(ids, parents)
    s = pl94_schema()
    cells = np.zeros((geo.leaves.size, s.size), dtype=np.int64)
    common = rng.choice(s.size, size=40, replace=False)
    for row in range(geo.leaves.size):
        cells[row, rng.choice(common, size=8)] += rng.integers(1, 30, size=8)
    return Table(geo, s.categories(), cells)


def counties_table(seed: int = 0) -> Table:
    """US > 2 states > 2-3 counties > 1-2 tracts > 1-2 block groups > 1-3 blocks."""
    rng = np.random.default_rng(seed)
    ids, parents = ["US"], [None]
    for state, n_counties in (("10", 3), ("24", 2)):
        ids.append(state)
        parents.append("US")
        for c in range(n_counties):
            county = state + f"{2 * c + 1:03d}"
            ids.append(county)
            parents.append(state)
            for t in range(int(rng.integers(1, 3))):
                tract = county + f"{t + 1:04d}00"
                ids.append(tract)
                parents.append(county)
                for g in range(int(rng.integers(1, 3))):
                    bg = tract + str(g + 1)
                    ids.append(bg)
                    parents.append(tract)
                    for b in range(int(rng.integers(1, 4))):
                        ids.append(bg + f"{b:03d}")
                        parents.append(bg)
    geo = Hierarchy.from_parents(ids, parents)
    schema = pl94_schema()
    cells = np.zeros((geo.leaves.size, schema.size), dtype=np.int64)
    common = rng.choice(schema.size, size=30, replace=False)
    for row in range(geo.leaves.size):
        cells[row, rng.choice(common, size=6)] += rng.integers(1, 25, size=6)
    return Table(geo, schema.categories(), cells)


@pytest.fixture(scope="module")
def measured():
    """One study-path draw of the persons preset on :func:`small_table`."""
    t = small_table()
    return measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=5)


def check_parts(folder, *, batched: bool = False) -> set[int]:
    """Every ``part-<geocode>.parquet`` under ``folder`` holds geounits of that geocode's
    subtree only (``part-0``: a whole partition; ``batched``: of the subtrees of that
    geocode and of siblings after it), and no geocode is in two files; returns the lengths
    of the part geocodes found (0 for ``part-0``)."""
    import pyarrow.parquet as pq

    seen: set[str] = set()
    lengths = set()
    for f in sorted(folder.rglob("part-*.parquet")):
        head = f.name[len("part-") : -len(".parquet")]
        geocodes = pq.read_table(f, columns=["geocode"]).column("geocode").to_pylist()
        if head != "0" and batched:
            assert all(g[: len(head)] >= head for g in geocodes), f
        elif head != "0":
            assert all(g.startswith(head) for g in geocodes), f
        lengths.add(0 if head == "0" else len(head))
        assert not seen & set(geocodes), f
        seen |= set(geocodes)
    return lengths

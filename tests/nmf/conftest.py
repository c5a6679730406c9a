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


def _measured():
    t = small_table()
    return measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=5)


@pytest.fixture(scope="module")
def measured():
    """One study-path draw of the persons preset on :func:`small_table`."""
    return _measured()


@pytest.fixture(scope="session")
def measured_run(tmp_path_factory):
    """:func:`measured` written as a run (once per test process; tests only read it)."""
    from postdp import nmf

    return nmf.write(_measured(), tmp_path_factory.mktemp("measured") / "run")


@pytest.fixture(scope="session")
def release(measured_run):
    """``release(method, **options)``: :func:`measured_run` post-processed, each written
    once per test process (every ``nmf.postprocess`` of the same run, method and options
    writes the same bytes) for the tests of test_runs, test_moe, test_amc and
    test_tabulate that only read it (a test that writes in one works on a copy)."""
    from postdp import nmf

    done = {}

    def released(method, **options):
        key = (method, *sorted(options.items()))
        if key not in done:
            out = measured_run.parent / f"out{len(done)}"
            done[key] = nmf.postprocess(measured_run, out, method=method, **options)
        return done[key]

    return released


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


def released_cells(out) -> dict[str, dict[str, int]]:
    """{geocode: {category: estimate}} of an integral release's output folder: every
    geounit of its wide form (only the ``geocode`` column read), with its nonzero cells
    from the long form: the wide form's numbers, in three columns instead of 2,000 (a
    wide file costs some 20 times as much to read)."""
    import pyarrow.parquet as pq

    found: dict[str, dict[str, int]] = {}
    for path in sorted((out / "wide").rglob("part-*.parquet")):
        geocodes = pq.read_table(path, columns=["geocode"])["geocode"].to_pylist()
        found.update({g: {} for g in geocodes})
    for path in sorted((out / "long").rglob("part-*.parquet")):
        part = pq.read_table(path).to_pydict()
        for g, c, e in zip(part["geocode"], part["category"], part["estimate"], strict=True):
            found[g][c] = e
    return found

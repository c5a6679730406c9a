"""Tables: building and checking them, the bundled P1 tables, workloads and their cost."""

import numpy as np
import pandas as pd
import pytest

from postdp import Gaussian, Geometric, Hierarchy, Laplace
from postdp.data import load_p1
from postdp.errors import HierarchyError, ValidationError
from postdp.mechanisms import Budget
from postdp.tables import Measurement, Query, Table, Workload, expand, measure

GEO = Hierarchy.from_parents(["S", "a", "b", "a1", "a2"], [None, "S", "S", "a", "a"])
CAT = Hierarchy.from_parents(["T", "x", "y", "y1", "y2"], [None, "T", "T", "y", "y"])
# leaf geounits b, a1, a2 (in GEO.leaves order) x detailed categories x, y1, y2
CELLS = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])


def test_counts_add_up_both_ways():
    t = Table(GEO, CAT, CELLS)
    assert [str(GEO.ids[i]) for i in GEO.leaves] == ["b", "a1", "a2"]
    full = t.counts()
    ids, cats = list(GEO.ids), list(CAT.ids)
    assert full[ids.index("a"), cats.index("y1")] == 5 + 8
    assert full[ids.index("S"), cats.index("T")] == CELLS.sum()
    assert full[ids.index("a1"), cats.index("y")] == 5 + 6
    for g in range(GEO.n):  # aggregates = sums of their children, both ways
        assert full[g, cats.index("T")] == full[g, cats.index("x")] + full[g, cats.index("y")]
    np.testing.assert_array_equal(full[0], full[1] + full[2])
    assert full.dtype == np.int64


def _wide(table):
    return table.to_wide().drop(columns="parent")


def test_from_wide_round_trip_and_checks():
    t = Table(GEO, CAT, CELLS)
    wide = _wide(t)
    back = Table.from_wide(wide, GEO, CAT)
    np.testing.assert_array_equal(back.cells, CELLS)
    leaves_only = wide[wide["geo_id"].isin(["b", "a1", "a2"])][["geo_id", "x", "y1", "y2"]]
    np.testing.assert_array_equal(Table.from_wide(leaves_only, GEO, CAT).counts(), t.counts())
    bad = wide.copy()
    bad.loc[bad["geo_id"] == "a", "y"] += 1
    with pytest.raises(HierarchyError, match="first at geounit 'a', category 'y'") as caught:
        Table.from_wide(bad, GEO, CAT)
    assert str(int(bad.loc[bad["geo_id"] == "a", "y"].iloc[0])) not in str(caught.value)
    with pytest.raises(ValidationError, match="detailed category columns missing: 'y2'"):
        Table.from_wide(wide.drop(columns="y2"), GEO, CAT)
    with pytest.raises(HierarchyError, match="leaf geounits without a row: 'a2'"):
        Table.from_wide(wide[wide["geo_id"] != "a2"], GEO, CAT)
    with pytest.raises(HierarchyError, match="not in the geography: 'zz'"):
        Table.from_wide(pd.concat([wide, wide.iloc[:1].assign(geo_id="zz")]), GEO, CAT)
    with pytest.raises(HierarchyError, match="more than one row: 'b'"):
        Table.from_wide(pd.concat([wide, wide[wide["geo_id"] == "b"]]), GEO, CAT)
    text = wide.astype({"x": object})
    text.loc[0, "x"] = "many"
    with pytest.raises(ValidationError, match="non-numeric count at geounit 'S', category 'x'"):
        Table.from_wide(text, GEO, CAT)
    with pytest.raises(HierarchyError, match="negative at geounit 'a1', category 'y1'"):
        Table(GEO, CAT, CELLS - np.array([[0, 0, 0], [0, 9, 0], [0, 0, 0]]))
    with pytest.raises(ValidationError, match=r"shape \(3, 3\)"):
        Table(GEO, CAT, CELLS[:, :2])


def test_long_and_wide_forms():
    t = Table(GEO, CAT, CELLS, labels={"T": "Total"})
    long = t.to_frame()
    assert len(long) == GEO.n * CAT.n
    assert list(long.columns) == ["geo_id", "parent", "level", "category", "label", "count"]
    row = long[(long["geo_id"] == "a1") & (long["category"] == "y")].iloc[0]
    assert (row["parent"], row["level"], row["count"]) == ("a", 2, 11)
    assert set(long.loc[long["category"] == "T", "label"]) == {"Total"}


@pytest.mark.parametrize(
    ("name", "levels", "total"),
    [
        ("us-county", [1, 52, 3221], 334_735_155),
        ("pa-blockgroup", [1, 67, 3446, 10173], 13_002_700),
    ],
)
def test_bundled_p1_tables(name, levels, total):
    t = load_p1(name)
    assert [lvl.size for lvl in t.geography.levels] == levels
    assert (t.categories.n, t.categories.leaves.size) == (71, 63)
    full = t.counts()
    root = list(t.categories.ids).index("P1_001N")
    assert full[0, root] == total  # the official 2020 resident population
    assert t.labels["P1_003N"] == "White alone"
    assert t.labels["P1_071N"] != ""
    # P1: Total > {one race > 6, two or more > {2: 15, 3: 20, 4: 15, 5: 6, 6: 1}}
    kids = {str(t.categories.ids[p]): 0 for p in t.categories.parent if p >= 0}
    for p in t.categories.parent[t.categories.parent >= 0]:
        kids[str(t.categories.ids[p])] += 1
    assert kids == {
        "P1_001N": 2,
        "P1_002N": 6,
        "P1_009N": 5,
        "P1_010N": 15,
        "P1_026N": 20,
        "P1_047N": 15,
        "P1_063N": 6,
        "P1_070N": 1,
    }
    if name == "pa-blockgroup":
        ids = list(t.geography.ids)
        bg = ids.index("420010301011")
        assert str(t.geography.ids[t.geography.parent[bg]]) == "42001030101"


def test_unknown_p1_name():
    with pytest.raises(ValidationError, match="unknown P1 table 'pa'; choose one of"):
        load_p1("pa")


def test_queries_and_their_sensitivity():
    assert Query.detailed(CAT).matrix(CAT).tolist() == np.eye(3).tolist()
    assert Query("tot", [["T"]]).matrix(CAT).tolist() == [[1.0, 1.0, 1.0]]
    assert Query.nodes(["x", "y"]).matrix(CAT).tolist() == [[1, 0, 0], [0, 1, 1]]
    with pytest.raises(ValidationError, match="share detailed cells"):
        Query("overlap", [["T"], ["x"]]).matrix(CAT)
    with pytest.raises(ValidationError, match="unknown category 'z'"):
        Query("bad", [["z"]]).matrix(CAT)
    with pytest.raises(ValidationError, match="sensitivity 1"):
        Measurement(0, Query("tot", [["T"]]), Laplace(epsilon=1.0, sensitivity=2))


def test_workload_cost_composes_over_queries_and_levels():
    w = Workload(
        [
            Measurement(0, Query("tot", [["T"]]), None),  # public: no cost
            Measurement(0, Query.detailed(CAT), Geometric(epsilon=0.25)),
            Measurement(1, Query.detailed(CAT), Geometric(epsilon=0.5)),
            Measurement(1, Query.nodes(["x", "y"]), Gaussian(rho=0.125)),
            Measurement(2, Query.detailed(CAT), Gaussian(rho=0.25)),
        ]
    )
    assert w.budget == Budget(epsilon=0.75, rho=0.375)
    frame = w.cost_frame()
    per_level = frame[frame["query"] == "*"].set_index("level")
    assert per_level.loc[1, "epsilon"] == 0.5 and per_level.loc[1, "rho"] == 0.125
    assert per_level.loc[0, "epsilon"] == 0.25 and per_level.loc[2, "rho"] == 0.25
    with pytest.raises(ValidationError, match="measured twice at level 1"):
        Workload([w.measurements[2], w.measurements[2]])


def test_measure_study_path_secure_path_and_checks():
    t = Table(GEO, CAT, CELLS)
    w = Workload(
        [
            Measurement(0, Query("tot", [["T"]]), None),
            Measurement(2, Query.detailed(CAT), Geometric(epsilon=1.0)),
            Measurement(1, Query.detailed(CAT), Geometric(epsilon=1.0)),
        ]
    )
    a = measure(t, w, secure=False, rng=3, size=4)
    b = measure(t, w, secure=False, rng=3, size=4)
    for x, y in zip(a.values, b.values, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.values[0].shape == (4, 1, 1) and (a.values[0] == CELLS.sum()).all()
    assert a.values[1].shape == (4, 2, 3)  # level 2: a1, a2
    secure = measure(t, w)
    assert secure.secure and secure.values[2].shape == (2, 3)
    long = secure.to_frame()
    assert set(long["path"]) == {"secure"} and len(long) == 1 + 6 + 6
    with pytest.raises(ValidationError, match="study path"):
        measure(t, w, rng=1)
    too_deep = Workload([Measurement(3, Query.detailed(CAT), Geometric(epsilon=1.0))])
    with pytest.raises(ValidationError, match="level 3 is not a level"):
        measure(t, too_deep, secure=False, rng=0)


def test_expand_matches_counts():
    rng = np.random.default_rng(0)
    t = load_p1("us-county")
    draws = rng.normal(size=(2, *t.cells.shape))
    full = expand(draws, t.geography, t.categories)
    assert full.shape == (2, *t.shape)
    np.testing.assert_allclose(full[1, 0, 0], draws[1].sum())


def test_synthetic_p1_shaped_table():
    from postdp.data import synthetic_table

    t = synthetic_table((4, 5, 3), leaf_mean=300, rng=1)
    geo = t.geography
    assert t.categories.leaves.size == 63 and t.cells.shape == (geo.leaves.size, 63)
    np.testing.assert_array_equal(t.cells.sum(axis=1), geo.counts[geo.leaves])
    assert (t.cells == 0).mean() > 0.3  # sparse, like P1's detailed cells
    shares = t.cells.sum(axis=0) / t.cells.sum()
    assert shares.max() > 0.4  # skewed: one dominant group, as nationally
    again = synthetic_table((4, 5, 3), leaf_mean=300, rng=1)
    np.testing.assert_array_equal(again.cells, t.cells)


def test_large_measurements_are_drawn_in_chunks_with_the_right_law(monkeypatch):
    """The study path draws a measurement larger than its chunk piece by piece from one
    stream: reproducible, the shape of one draw, and noise of the mechanism's variance
    (sample variance within z x SE, SE from the sample's fourth moment)."""
    from postdp.mechanisms import DiscreteGaussian
    from postdp.tables import _noise

    monkeypatch.setattr(_noise, "_CHUNK", 50)
    rng = np.random.default_rng(0)
    geo = Hierarchy.from_parents(["S", *(f"g{i}" for i in range(40))], [None, *["S"] * 40])
    t = Table(geo, CAT, rng.integers(0, 9, (40, CAT.leaves.size)))
    w = Workload([Measurement(1, Query.detailed(CAT), DiscreteGaussian(rho=0.5))])
    a = measure(t, w, secure=False, rng=3, size=30)
    b = measure(t, w, secure=False, rng=3, size=30)
    np.testing.assert_array_equal(a.values[0], b.values[0])
    assert a.values[0].shape == (30, 40, CAT.leaves.size)
    noise = (a.values[0] - t.cells[None]).ravel()
    centred = noise - noise.mean()
    se = np.sqrt((np.mean(centred**4) - np.mean(centred**2) ** 2) / noise.size)
    assert abs(np.mean(centred**2) - DiscreteGaussian(rho=0.5).variance()) <= 4 * se
    one = measure(t, w, secure=False, rng=4)
    assert one.values[0].shape == (40, CAT.leaves.size)
    grid = measure(t, w, secure=False, rng=4, size=(2, 3))  # a draws grid, chunked too
    assert grid.values[0].shape == (2, 3, 40, CAT.leaves.size)

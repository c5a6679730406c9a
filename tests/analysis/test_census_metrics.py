"""The Census Bureau's yardsticks (issue 25; ``shared/research/pl94-2020-design.md`` section 3):
the summary queries counted cell by cell from the labels, every metric against a direct
computation from the labelled long table, draws pooled as the mean of per-draw metrics, and
the 5-point / 95% reliability threshold on hand-built units."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.analysis import census_metrics, p2_groups, reliability_threshold, summary_queries
from postdp.errors import ValidationError
from postdp.tables import Table, pl94_schema

SCHEMA = pl94_schema()


def _table(seed=0):
    rng = np.random.default_rng(seed)
    ids = ["US", "S1", "S2"] + [f"b{k}" for k in range(8)]
    parents = [None, "US", "US"] + ["S1"] * 3 + ["S2"] * 5
    geo = Hierarchy.from_parents(ids, parents)
    cells = rng.poisson(0.05, (8, SCHEMA.size)) * rng.integers(1, 30, (8, 1))
    cells[0] = 0  # an empty block
    return Table(geo, SCHEMA.categories(), cells)


def _labels():
    """Each cell's attribute labels, parsed from the cell names (not from the code)."""
    parts = [c.split("|") for c in SCHEMA.cells]
    return pd.DataFrame(parts, columns=["hhgq", "votingage", "hispanic", "cenrace"])


def test_the_summary_queries_count_the_cells_each_group_should_hold():
    q = summary_queries(SCHEMA)
    other = 8 * 2 * 2  # cells per race combination
    alone = q["race alone"].matrix.sum(axis=1)
    assert alone.tolist() == [other] * 6 + [other * 57]  # 63 - 6 combinations of 2+ races
    assert q["race alone or in combination"].matrix.sum(axis=1).tolist() == [other * 32] * 6
    assert q["number of races"].matrix.sum(axis=1).tolist() == [
        other * math.comb(6, k) for k in range(1, 7)
    ]
    assert q["hhinstlevels"].matrix.sum(axis=1).tolist() == [252, 4 * 252, 3 * 252]
    for name, query in q.items():
        assert query.partition == (not name.startswith("race alone or")), name
        assert query.matrix.shape == (len(query.labels), SCHEMA.size)
    crossed = q["race alone * votingage"]
    assert len(crossed.labels) == 14 and crossed.labels[0] == "white | under 18"
    p2 = p2_groups(SCHEMA)
    assert p2.partition and p2.matrix.sum(axis=1).tolist() == [1008] + [16] * 6 + [16 * 57]
    with pytest.raises(ValidationError, match="lacks"):
        summary_queries(_other_schema())


def _other_schema():
    from postdp.tables.schema import Attribute, Schema

    return Schema([Attribute("a", ["x", "y"])])


def _reference(released, table, level, groups_of_cell):
    """Metrics of one query at one level, computed from a long frame of labelled counts."""
    geo = table.geography
    nodes = geo.levels[level]
    truth = table.detailed()[nodes]
    rows = []
    for draw, est in enumerate(released.reshape(-1, geo.n, SCHEMA.size)):
        for u, node in enumerate(nodes):
            for group, cells in groups_of_cell.items():
                rows.append((draw, u, group, truth[u, cells].sum(), est[node, cells].sum()))
    f = pd.DataFrame(rows, columns=["draw", "unit", "group", "true", "est"])
    f["err"] = f["est"] - f["true"]
    pos = f[f["true"] > 0]
    pct = 100 * pos["err"] / pos["true"]
    unit = f.groupby(["draw", "unit"])
    tot = unit[["true", "est"]].transform("sum")
    f["gap"] = (f["est"] / tot["est"] - f["true"] / tot["true"]).abs()
    ok = f[(tot["true"] > 0) & (tot["est"] > 0)]
    return {
        "mae": f["err"].abs().mean(),
        "rmse": np.sqrt((f["err"] ** 2).mean()),
        "malpe": pct.mean(),
        "mape": pct.abs().mean(),
        "median_ape": pct.abs().median(),
        "share_ape_over_10": (pct.abs() > 10).mean(),
        "tvd": ok.groupby(["draw", "unit"])["gap"].sum().mean() / 2,
    }


def test_every_metric_equals_a_direct_computation_from_the_labels():
    table = _table(1)
    rng = np.random.default_rng(2)
    released = table.detailed() + rng.normal(0, 2, (2, table.geography.n, SCHEMA.size))
    labels = _labels()
    alone = labels["cenrace"].where(~labels["cenrace"].str.contains("+", regex=False), "2+")
    groups = {
        (r, h): np.flatnonzero((alone == r) & (labels["hispanic"] == h))
        for r in alone.unique()
        for h in labels["hispanic"].unique()
    }
    frame = census_metrics(
        released, table, schema=SCHEMA, queries=["race alone * hispanic"], bins=[0]
    )
    for level in range(3):
        got = frame[frame["level"] == str(level)].iloc[0]
        want = _reference(released, table, level, groups)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (level, key)
    # overlapping groups: every metric but the TVD
    combo = census_metrics(
        released,
        table,
        schema=SCHEMA,
        queries=["race alone or in combination"],
        bins=[0],
        levels=["US", "State", "Block"],
    )
    races = {
        r: np.flatnonzero(labels["cenrace"].str.split("+").apply(lambda p, r=r: r in p))
        for r in ("white", "black", "aian", "asian", "nhpi", "sor")
    }
    got = combo[combo["level"] == "Block"].iloc[0]
    want = _reference(released, table, 2, races)
    assert got["mae"] == pytest.approx(want["mae"], rel=1e-12) and math.isnan(got["tvd"])


def test_size_bins_split_geounits_by_true_total_and_draws_pool_as_means():
    table = _table(3)
    rng = np.random.default_rng(4)
    draws = table.detailed() + rng.integers(-3, 4, (3, table.geography.n, SCHEMA.size))
    totals = table.detailed()[table.geography.levels[2]].sum(axis=1)
    frame = census_metrics(draws, table, schema=SCHEMA, queries=["total"], bins=[0, 10, 1000])
    blocks = frame[frame["level"] == "2"]
    expected = np.histogram(totals, [0, 10, 1000, np.inf])[0]
    assert blocks["geounits"].tolist() == [int(n) for n in expected if n]
    pooled = census_metrics(draws, table, schema=SCHEMA, queries=["hhgq"], bins=[0])
    each = [census_metrics(d, table, schema=SCHEMA, queries=["hhgq"], bins=[0]) for d in draws]
    for key in ("mae", "malpe", "share_ape_over_10", "tvd"):
        mean = np.mean([e[key].to_numpy() for e in each], axis=0)
        np.testing.assert_allclose(pooled[key].to_numpy(), mean, rtol=1e-12)
    with pytest.raises(ValidationError, match="shape"):
        census_metrics(draws[..., :-1], table, schema=SCHEMA)
    with pytest.raises(ValidationError, match="unknown queries"):
        census_metrics(draws, table, schema=SCHEMA, queries=["race"])


def _units_table(totals, white_share):
    """Blocks under one state: block k has totals[k] people, a share of them white
    (not Hispanic, cell 0) and the rest Black (cell 1)."""
    n = len(totals)
    geo = Hierarchy.from_parents(["S"] + [f"b{k}" for k in range(n)], [None] + ["S"] * n)
    cells = np.zeros((n, SCHEMA.size), dtype=np.int64)
    white = np.round(np.asarray(totals) * white_share).astype(int)
    cells[:, 0], cells[:, 1] = white, np.asarray(totals) - white
    return Table(geo, SCHEMA.categories(), cells)


def test_the_reliability_threshold_is_the_bin_from_which_every_bin_holds_95_percent():
    # 20 blocks of 30 people, 20 of 80, 20 of 130; white share 0.6. The released tables move
    # 4 people from white to Black in some blocks: 4/30 = 13 points (out), 4/80 = 5 points
    # (in, at the edge), 4/130 = 3 points (in).
    totals = [30] * 20 + [80] * 20 + [130] * 20
    table = _units_table(totals, 0.6)
    est = table.detailed().astype(float)
    blocks = table.geography.levels[1]
    moved = blocks[[0, 1, 2, 20, 21, 40, 41]]  # 3 of 20 small, 2 of 20 mid, 2 of 20 large
    est[moved, 0] -= 4
    est[moved, 1] += 4
    res = reliability_threshold(est, table, schema=SCHEMA, level=1)
    assert res.by_bin["low"].tolist() == [0, 50, 100]
    np.testing.assert_allclose(res.by_bin["share_within"], [17 / 20, 1, 1])
    assert res.threshold == 50 and str(res).startswith("50-99 people")
    est[blocks[60 - 1], 0] -= 20  # one large block off by 15 points: 95% still holds
    assert reliability_threshold(est, table, schema=SCHEMA, level=1).threshold == 50
    est[blocks[60 - 2], 0] -= 20  # two: 90% in the top bin -> nothing qualifies
    none = reliability_threshold(est, table, schema=SCHEMA, level=1)
    assert none.threshold is None and str(none).startswith("no population size")
    # units as groupings of the leaves (off-spine, e.g. places): pairs of blocks
    pairs = np.repeat([f"p{k}" for k in range(30)], 2).astype(object)
    pairs[-2:] = None  # two blocks in no place
    est2 = table.detailed().astype(float)
    via_groups = reliability_threshold(est2, table, schema=SCHEMA, groups=pairs)
    assert via_groups.by_bin["units"].sum() == 29 and via_groups.threshold == 50  # first bin
    assert via_groups.by_bin["low"].tolist() == [50, 150, 250]
    with pytest.raises(ValidationError, match="one of"):
        reliability_threshold(est2, table, schema=SCHEMA)
    with pytest.raises(ValidationError, match="groups"):
        reliability_threshold(est2, table, schema=SCHEMA, groups=pairs[:-1])

"""Census-style error metrics of a released table, on hand-computed cases."""

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.analysis import table_error_metrics
from postdp.errors import ValidationError
from postdp.tables import Table

GEO = Hierarchy.from_parents(
    ["S", "a", "b", "c", "d", "e", "f"], [None, "S", "S", "S", "S", "S", "S"]
)
CAT = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
# leaves a..f: totals 8, 100, 600, 50, 1000, 0
CELLS = np.array([[6, 2], [40, 60], [500, 100], [25, 25], [900, 100], [0, 0]])


def _released():
    t = Table(GEO, CAT, CELLS)
    out = t.detailed().astype(float)
    out[1] += [1, 1]  # a: 8 -> 10 (+25%)
    out[2] += [-5, 0]  # b: 100 -> 95 (-5%)
    out[3] += [-60, 60]  # c: 600 -> 600, x share 5/6 -> 0.733 (10pp off)
    out[4] += [3, 0]  # d: 50 -> 53 (+6%)
    out[5] += [0, 20]  # e: 1000 -> 1020 (+2%), x share 0.9 -> 0.882 (within 5pp)
    out[6] += [0, 2]  # f: 0 -> 2 (no percent error, no TVD)
    out[0] = out[1:].sum(axis=0)  # a consistent release
    return t, out


def test_metrics_by_level_and_size():
    t, released = _released()
    by_size, _ = table_error_metrics(released, t)
    rows = {(r.level, r.size): r for r in by_size.itertuples()}
    small = rows[(1, "0-9")]  # a (8) and f (0)
    assert small.geounits == 2
    assert small.mae == pytest.approx((2 + 2) / 2)
    assert small.rmse == pytest.approx(2.0)
    assert small.mape == pytest.approx(25.0)  # f has no percent error
    assert small.mspe == pytest.approx(25.0)
    assert small.share_ape_over_10 == pytest.approx(1.0)
    tvd_a = 0.5 * (abs(7 / 10 - 6 / 8) + abs(3 / 10 - 2 / 8))
    assert small.tvd == pytest.approx(tvd_a)
    assert np.isnan(small.share_largest_within_5pp)  # nobody of 500+
    mid = rows[(1, "100-999")]  # b (100) and c (600)
    assert mid.mae == pytest.approx(2.5) and mid.mspe == pytest.approx(-2.5)
    assert mid.share_ape_over_10 == 0.0
    assert mid.share_largest_within_5pp == 0.0  # c: 500/600 -> 440/600, 10pp off
    tens = rows[(1, "10-99")]  # d (50)
    assert tens.mape == pytest.approx(6.0)
    big = rows[(1, "1,000-9,999")]  # e (1000)
    assert big.share_largest_within_5pp == 1.0
    assert big.tvd == pytest.approx(0.5 * (abs(900 / 1020 - 0.9) + abs(120 / 1020 - 0.1)))
    root = rows[(0, "1,000-9,999")]  # S: 1758 -> 1758 + 2 - 5 + 0 + 3 + 20 + 2 = 1780
    assert root.mae == pytest.approx(22.0)


def test_diversity_quintiles_and_draws():
    t, released = _released()
    _, by_blau = table_error_metrics(released, t)
    level1 = by_blau[by_blau["level"] == 1]
    assert list(level1["quintile"]) == [1, 2, 3, 4, 5] and level1["geounits"].sum() == 5
    # the least diverse geounit (e: Blau 1 - 0.81 - 0.01 = 0.18) has error +20
    assert level1.iloc[0]["blau_low"] == pytest.approx(0.18)
    assert level1.iloc[0]["mean_signed_error"] == pytest.approx(20.0)
    # two identical draws give the same metrics as one
    by_size_1, _ = table_error_metrics(released, t)
    by_size_2, _ = table_error_metrics(np.stack([released, released]), t)
    import pandas as pd

    pd.testing.assert_frame_equal(by_size_1, by_size_2, rtol=1e-12)


def test_bad_inputs():
    t, released = _released()
    with pytest.raises(ValidationError, match="must have shape"):
        table_error_metrics(released[:, :1], t)
    with pytest.raises(ValidationError, match="increasing lower edges"):
        table_error_metrics(released, t, bins=[5, 10])

"""Approximate Monte Carlo margins of error (postdp.nmf.amc; the Census Bureau's AMC: the
release taken as the truth, measured and post-processed again K times)."""

from __future__ import annotations

import numpy as np
import pytest

from postdp import nmf
from postdp.analysis import ReleaseDesign
from postdp.errors import ValidationError
from postdp.postprocess import top_down_2020
from postdp.tables import Table


@pytest.mark.statistical
def test_amc_spread_matches_an_independent_monte_carlo(measured):
    """The mean square error of block and tract totals from 12 AMC replicates equals, within
    z = 4 two-sample standard errors, that of 12 independent runs of the same design on
    the stand-in truth (ReleaseDesign.run, another code path)."""
    released = top_down_2020(measured)
    summary, totals = nmf.amc(
        measured, released, method="topdown-2020", replicates=12, rng=1, queries=["total"]
    )
    geo = measured.table.geography
    assert (totals["rmse"][geo.depth <= 1] == 0).all()  # the invariant totals never move
    assert np.allclose(totals["moe"], 1.6448536269514722 * totals["rmse"])
    from scipy import sparse

    stand_in = Table(geo, measured.table.categories, sparse.csr_array(released[geo.leaves]))
    design = ReleaseDesign(stand_in, measured.workload, "topdown-2020")
    runs = design.run(rng=2, size=12)  # (12, geounits, category nodes); column 0: totals
    truth = released.sum(axis=1)
    for depth in (3, 5):
        nodes = np.flatnonzero(geo.depth == depth)
        independent = (runs[:, nodes, 0] - truth[nodes]) ** 2
        amc_mse = totals["rmse"].to_numpy()[nodes] ** 2
        # pooled over the level: the AMC mean square vs the independent one
        a, b = amc_mse.mean(), independent.mean()
        se = np.sqrt(independent.var(ddof=1) / independent.size * 2)
        assert abs(a - b) <= 4 * se, (depth, a, b, se)
    assert set(summary["level"]) == {str(d) for d in range(6)}
    assert (summary["replicates"] == 12).all()


def test_amc_needs_a_whole_number_release(measured):
    real = top_down_2020(measured) + 0.5
    with pytest.raises(ValidationError, match="whole numbers"):
        nmf.amc(measured, real, method="topdown-2020", replicates=3)
    with pytest.raises(ValidationError, match=">= 2"):
        nmf.amc(measured, real - 0.5, method="topdown-2020", replicates=1)


def test_postprocess_writes_the_amc_tables(measured, measured_run, release, tmp_path):
    run = measured_run
    out = release("topdown-2020", amc=3, seed=4)  # nmf.postprocess(run, ..., amc=3, seed=4)
    import json

    import pandas as pd

    files = json.loads((out / "postdp-manifest.json").read_text())["files"]
    assert "amc/summary.parquet" in files and "amc/totals.parquet" in files
    totals = pd.read_parquet(out / "amc" / "totals.parquet")
    assert len(totals) == measured.table.geography.n
    with pytest.raises(ValidationError, match="integral"):
        nmf.postprocess(run, tmp_path / "o2", method="project", amc=3)

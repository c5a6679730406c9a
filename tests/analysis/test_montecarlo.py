"""The Monte Carlo engine: reproducibility across batches, workers and Dask; its statistics."""

import math

import numpy as np
import pytest

from postdp import Geometric, Hierarchy, Laplace
from postdp.analysis import ReleaseDesign, simulate
from postdp.errors import ValidationError
from tests._dask import dask_client
from tests.postprocess.catalogue import unequal
from tests.statistical._helpers import Z

FIELDS = (
    "bias",
    "variance",
    "mse",
    "mae",
    "counts",
    "raw_counts",
    "bias_se",
    "variance_se",
    "error_min",
    "error_max",
    "exact_errors",
)


def _same(a, b):
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.fixture(scope="module")
def design():
    h = unequal()
    return ReleaseDesign(
        h,
        [Geometric(0.5), Geometric(1.0), Geometric(1.0), Geometric(1.0)],
        "project-nonneg,round",
        public="root",
    )


@pytest.fixture(scope="module")
def client():
    """One Dask cluster for the file's tests (a cluster's start is most of their cost)."""
    with dask_client() as client:
        yield client


def test_same_seed_same_result_whatever_the_batch(design):
    ref = simulate(design, n_draws=1000, batch=1000, rng=9, raw=["n1"])
    for batch in (1, 37, 500, 5000):
        _same(ref, simulate(design, n_draws=1000, batch=batch, rng=9, raw=["n1"]))
    other = simulate(design, n_draws=1000, rng=10, raw=["n1"])
    assert not np.array_equal(ref.bias, other.bias)


@pytest.mark.processes
def test_same_result_with_worker_processes_and_dask(design, client):
    ref = simulate(design, n_draws=600, batch=64, rng=3)
    _same(ref, simulate(design, n_draws=600, batch=64, rng=3, workers=2))
    _same(ref, simulate(design, n_draws=600, batch=64, rng=3, client=client))


@pytest.mark.processes
def test_many_chunks_and_blocks_bit_identical_for_batch_workers_and_dask(client):
    """A tree large enough that a run spans many chunks and several blocks of chunks."""
    from postdp.analysis._engine import BLOCK_CHUNKS, chunk_rows
    from postdp.data import synthetic_hierarchy

    h = synthetic_hierarchy((6, 8, 40), rng=2)
    design = ReleaseDesign(h, Laplace(0.5), "project-nonneg")
    n_draws = chunk_rows(h.n) * (2 * BLOCK_CHUNKS + 3)  # three blocks, the last one short
    leaf = [h.ids[-1]]
    ref = simulate(design, n_draws=n_draws, batch=n_draws, rng=4, raw=leaf, exact=leaf)
    assert ref.exact_errors.shape == (n_draws, 1)
    # batch=1 simulates one chunk (159 draws) at a time; the default batch, 6 chunks at a
    # time (groups that do not divide a block), here in two processes and on Dask
    _same(ref, simulate(design, n_draws=n_draws, batch=1, rng=4, raw=leaf, exact=leaf))
    _same(ref, simulate(design, n_draws=n_draws, rng=4, raw=leaf, exact=leaf, workers=2))
    _same(ref, simulate(design, n_draws=n_draws, rng=4, raw=leaf, exact=leaf, client=client))


@pytest.mark.statistical
def test_exact_quantiles_match_the_laplace_law():
    """No post-processing: a node's error is Laplace(b); its sample p-quantile is within z
    standard errors sqrt(p(1-p)/N)/f(q_p) of the law's (asymptotic normality of quantiles)."""
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [40, 15, 25])
    b, n_draws = 2.0, 20_000
    res = simulate(ReleaseDesign(h, Laplace.from_scale(b)), n_draws=n_draws, rng=12, exact=["a"])
    probs = np.array([0.05, 0.25, 0.5, 0.9])
    q = np.where(probs < 0.5, b * np.log(2 * probs), -b * np.log(2 * (1 - probs)))
    density = np.exp(-np.abs(q) / b) / (2 * b)
    se = np.sqrt(probs * (1 - probs) / n_draws) / density
    got = res.exact_quantiles(probs)[0]
    assert (np.abs(got - q) <= Z * se).all(), (got, q, se)
    frame = res.to_frame(quantiles=probs)  # the frame's quantiles are the exact ones for "a"
    np.testing.assert_array_equal(frame.loc[frame["id"] == "a", "q50"], got[2])
    with pytest.raises(ValidationError, match="exact="):
        simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=10, rng=0).exact_quantiles()


def test_histograms_count_every_draw_and_progress_is_reported(design):
    calls = []
    res = simulate(
        design,
        n_draws=300,
        batch=50,
        rng=1,
        raw=["n1", "n2"],
        progress=lambda done, total: calls.append((done, total)),
    )
    assert (res.counts.sum(axis=1) == 300).all()
    assert (res.raw_counts.sum(axis=1) == 300).all()
    assert list(res.raw_ids) == ["n1", "n2"]
    assert calls and calls[-1][0] == calls[-1][1]
    frame = res.to_frame()
    assert len(frame) == design.hierarchy.n and {"q05", "q50", "q95"} <= set(frame.columns)
    assert frame.loc[0, "bias"] == 0.0  # the public root never moves
    assert res.budget.epsilon == 3.5


@pytest.mark.statistical
def test_statistics_match_the_laplace_law():
    """No post-processing: bias 0, variance 2b^2, MSE 2b^2, MAE b, median 0, q95 b ln 10."""
    b = 4.0
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [100, 40, 60])
    res = simulate(ReleaseDesign(h, Laplace.from_scale(b)), n_draws=100_000, rng=21, bins=2000)
    assert np.all(np.abs(res.bias) <= Z * res.bias_se)
    assert np.all(np.abs(res.variance - 2 * b * b) <= Z * res.variance_se)
    assert np.all(np.abs(res.mse - 2 * b * b) <= Z * res.mse_se)
    assert np.all(np.abs(res.mae - b) <= Z * res.mae_se)
    width = res.edges[0, 1] - res.edges[0, 0]
    q = res.quantiles([0.5, 0.95])
    # a quantile's standard error: sqrt(p(1-p)/N) / density at the quantile
    se_med = math.sqrt(0.25 / res.n_draws) / (1 / (2 * b))
    se_95 = math.sqrt(0.95 * 0.05 / res.n_draws) / (0.05 / b)
    assert np.all(np.abs(q[:, 0]) <= Z * se_med + width)
    assert np.all(np.abs(q[:, 1] - b * math.log(10)) <= Z * se_95 + width)
    w = res.wasserstein_to_laplace(b)
    assert np.all(w < 10 * b / math.sqrt(res.n_draws) + width)
    lo, hi = res.confidence_interval("variance", z=Z)
    assert np.all((lo <= 2 * b * b) & (2 * b * b <= hi))


def test_validation(design):
    with pytest.raises(ValidationError, match="`n_draws` must be at least 2"):
        simulate(design, n_draws=1, rng=0)
    with pytest.raises(ValidationError, match="`truth` must have shape"):
        simulate(design, np.ones(3), n_draws=10, rng=0)
    with pytest.raises(ValidationError, match="unknown node ids: 'zz'"):
        simulate(design, n_draws=10, rng=0, raw=["zz"])
    with pytest.raises(ValidationError, match="`bins` must be at least 2"):
        simulate(design, n_draws=10, rng=0, bins=1)
    with pytest.raises(TypeError, match="`design` must be a ReleaseDesign"):
        simulate("design", n_draws=10, rng=0)
    with pytest.raises(ValidationError, match="one noise mechanism or one per level"):
        ReleaseDesign(design.hierarchy, [Laplace(1.0)] * 2)
    with pytest.raises(ValidationError, match="`weights` must be 'equal' or 'inverse-variance'"):
        ReleaseDesign(design.hierarchy, Laplace(1.0), weights="gls")


def test_design_run_shifted_truth_and_public_values(design):
    shifted = design.hierarchy.counts + 1000
    out = design.run(shifted, rng=0, size=5)
    assert out.shape == (5, design.hierarchy.n) and out.dtype == np.int64
    assert (out[:, 0] == shifted[0]).all()  # the public root is held at the given truth


def test_exact_nodes_report_exact_zero_quantiles():
    """Issue 10: a public root (always exact) showed q05/q50/q95 of 0.06/0.57/1.07."""
    h = unequal()
    design = ReleaseDesign(h, Laplace(0.5), "project", public="root")
    res = simulate(design, n_draws=400, rng=3)
    frame = res.to_frame()
    root = frame.iloc[0]
    assert (root[["q05", "q50", "q95"]] == 0).all()
    assert root["bias"] == 0 and root["variance"] == 0
    q = res.quantiles([0.05, 0.95])
    assert np.all(q[1:, 0] >= res.error_min[1:]) and np.all(q[1:, 1] <= res.error_max[1:])
    assert np.all(q[1:, 0] < 0) and np.all(q[1:, 1] > 0)  # the noisy nodes keep their spread


def _peak_bytes(design, **kwargs):
    import tracemalloc

    tracemalloc.start()
    try:
        simulate(design, rng=1, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_draws_and_stays_within_the_budget():
    """Issue 12: the statistics are one accumulator per task (int32 histograms), combined in
    block order, so peak memory is flat in n_draws; the batch is the working set, cut to fit
    ``max_memory`` whatever batch is asked for, and the stated estimate bounds the peak."""
    from postdp.analysis import memory_plan
    from postdp.data import synthetic_hierarchy

    h = synthetic_hierarchy((8, 8, 8), leaf_mean=50.0, rng=0)
    design = ReleaseDesign(h, Laplace(0.5), "project-nonneg", public="root")
    small = _peak_bytes(design, n_draws=4_000, batch=1_000)
    many = _peak_bytes(design, n_draws=40_000, batch=1_000)
    assert many <= 1.25 * small, (small, many)
    budget = 64 << 20
    capped = _peak_bytes(design, n_draws=40_000, batch=40_000, max_memory=budget)
    plan = memory_plan(design, n_draws=40_000, batch=40_000, max_memory=budget)
    assert capped <= plan.peak_bytes <= budget, (capped, plan)
    big = _peak_bytes(design, n_draws=4_000, batch=4_000)  # one uncapped batch
    assert big <= memory_plan(h.n, n_draws=4_000, batch=4_000, max_memory=1 << 30).peak_bytes


def test_memory_budget_reduces_bins_and_batch_not_results():
    from postdp.analysis import memory_plan
    from postdp.analysis._engine import MIN_BINS

    h = unequal()
    design = ReleaseDesign(h, Laplace(0.5), "project")
    a = simulate(design, n_draws=3000, rng=2)
    b = simulate(design, n_draws=3000, rng=2, max_memory=1 << 20)
    np.testing.assert_array_equal(a.bias, b.bias)  # the batch does not change results
    plan = memory_plan(2_000_000, n_draws=20, batch=1000, bins=400, max_memory=2 << 30)
    assert MIN_BINS <= plan.bins < 400 and plan.chunks_per_batch >= 1 and plan.fits
    assert memory_plan(3195, n_draws=10_000, batch=1000, bins=400, max_memory=1 << 30).bins == 400
    with pytest.raises(ValidationError, match="max_memory"):
        simulate(design, n_draws=10, max_memory=10)


def test_the_memory_plan_states_what_a_task_sends_and_refuses_bad_options():
    """The plan's numbers are those of the run: one task's statistics are the arrays a
    task returns (counted here from a real run's result), the tasks cover the draws, and a
    table design adds its per-process solve."""
    from postdp.analysis import ReleaseDesign, memory_plan
    from postdp.analysis._engine import _new_stats
    from postdp.tables import Measurement, Query, Table, Workload

    h = unequal()
    design = ReleaseDesign(h, Laplace(0.5), "project")
    plan = memory_plan(design, n_draws=50_000, batch=500, bins=64)
    stats = _new_stats(h.n, plan.bins, 0, 0)
    assert plan.task_statistics_bytes == sum(a.nbytes for a in stats.values())
    assert plan.tasks * plan.draws_per_task >= 50_000 > (plan.tasks - 1) * plan.draws_per_task
    assert plan.entities == h.n and plan.solve_bytes == 0 and plan.fits
    assert str(plan).startswith("about ") and f"{h.n:,} entities" in str(plan)
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    table = Table(geo, cat, [[1, 2], [3, 4]])
    work = Workload([Measurement(d, Query.detailed(cat), Laplace(1.0)) for d in range(2)])
    tplan = memory_plan(ReleaseDesign(table, work, "project"), n_draws=100, workers=2)
    assert tplan.entities == 9 and tplan.solve_bytes == 3 * 3 * 8 * 12 * 2
    assert tplan.peak_bytes > tplan.solve_bytes
    tiny = memory_plan(10**7, n_draws=100, max_memory=1 << 20)
    assert not tiny.fits and "over the budget" in str(tiny)
    with pytest.raises(ValidationError, match="`n_draws` must be at least 2"):
        memory_plan(design, n_draws=1)
    with pytest.raises(ValidationError, match="`bins` must be at least 2"):
        memory_plan(design, n_draws=10, bins=1)
    with pytest.raises(TypeError, match="a positive number of entities"):
        memory_plan("x", n_draws=10)


def test_to_frame_carries_standard_errors_levels_parents_and_names():
    """What a user reads off a result (issue 27): each statistic with its Monte Carlo
    standard error (the half-width of its interval / z), each node's level and parent from
    the hierarchy, and readable names; a hierarchy lacking a simulated id is refused."""
    h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "a"], [9, 5, 4, 5])
    result = simulate(ReleaseDesign(h, Geometric(0.5), "project-nonneg"), n_draws=400, rng=1)
    frame = result.to_frame(z=2.0, hierarchy=h, names={"T": "Total", "a": "Alpha"})
    assert frame["name"].tolist() == ["Total", "Alpha", "", ""]
    assert frame["level"].tolist() == [0, 1, 1, 2]
    assert frame["parent"].tolist() == ["", "T", "T", "a"]
    for stat in ("bias", "variance", "mse", "mae"):
        np.testing.assert_allclose(frame[f"{stat}_se"], getattr(result, f"{stat}_se"))
        np.testing.assert_allclose(frame[f"{stat}_hi"] - frame[stat], 2.0 * frame[f"{stat}_se"])
    other = Hierarchy.from_parents(["T", "a"], [None, "T"])
    with pytest.raises(ValidationError, match="every simulated id"):
        result.to_frame(hierarchy=other)

"""Table audits through the streaming engine: bit-identical for any batch, worker count and
Dask cluster; the (P) errors match the exact GLS variances; the metrics add up."""

import numpy as np
import pytest

from postdp import Gaussian, Geometric, simulate
from postdp.analysis import ReleaseDesign, table_error_metrics
from postdp.analysis._engine import BLOCK_CHUNKS, chunk_rows
from postdp.errors import ValidationError
from postdp.tables import (
    Measurement,
    Query,
    Table,
    Workload,
    category_matrix,
    measure,
    single_child_bypass,
)
from tests._dask import dask_client
from tests.tables._reference import below, dense_gls, random_tree


def _table(seed, n_geo=9, n_cat=5):
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, n_geo, "g")
    cat = random_tree(rng, n_cat, "c")
    return Table(geo, cat, rng.integers(0, 40, (geo.leaves.size, cat.leaves.size)))


def _workload(table, mechanism):
    cat = table.categories
    items = [Measurement(0, Query("total", [[str(cat.ids[0])]]), None)]
    items += [
        Measurement(d, Query.detailed(cat), mechanism) for d in range(table.geography.n_levels)
    ]
    return Workload(items)


def _same(a, b):
    for name in ("bias", "mse", "mae", "counts", "error_min", "error_max"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.extra.keys() == b.extra.keys()
    for key in a.extra:
        np.testing.assert_array_equal(a.extra[key], b.extra[key], err_msg=key)


@pytest.mark.processes
@pytest.mark.parametrize("steps", ["project", "topdown,round", "project-nonneg"])
def test_bit_identical_for_batch_workers_and_dask(steps):
    table = _table(1, n_geo=400, n_cat=40)  # ~16k counts: a chunk is a few draws
    design = ReleaseDesign(table, _workload(table, Geometric(epsilon=0.5)), steps)
    n_draws = chunk_rows(design.n_entities) * (BLOCK_CHUNKS + 3)  # two blocks, one short
    assert n_draws < 500
    ref = simulate(design, n_draws=n_draws, batch=n_draws, rng=7)  # 16 chunks at once
    assert ref.n_draws == n_draws and set(ref.extra) >= {"abs_error", "tvd", "draws"}
    _same(ref, simulate(design, n_draws=n_draws, batch=1, rng=7))  # one chunk at a time
    # 5 chunks at a time (a block's last group short), the blocks in two processes
    _same(ref, simulate(design, n_draws=n_draws, batch=97, rng=7, workers=2))
    if steps == "project":
        with dask_client() as client:
            _same(ref, simulate(design, n_draws=n_draws, rng=7, client=client))


def _gls_variances(table, workload):
    """Exact variance of every (geounit, category node) (P) estimate, densely: the
    covariance of generalised least squares with equality constraints,
    N^-1 - N^-1 P' (P N^-1 P')^-1 P N^-1, N = A' V^-1 A, mapped to every count."""
    geo, cat = table.geography, table.categories
    G = below(geo)
    C = category_matrix(cat).astype(float)
    rows, variances, public = [], [], []
    for m in workload.measurements:
        A = m.query.matrix(cat)
        for g in geo.levels[m.level]:
            block = np.kron(G[g], A)  # the measured counts of geounit g, over leaf cells
            (public if m.public else rows).append(block)
            if not m.public:
                variances.extend([m.variance] * A.shape[0])
    A = np.vstack(rows)
    N_inv = np.linalg.inv(A.T @ (A / np.array(variances)[:, None]))
    cov = N_inv
    if public:
        P = np.vstack(public)
        K = N_inv @ P.T @ np.linalg.pinv(P @ N_inv @ P.T)
        cov = N_inv - K @ P @ N_inv
    E = np.kron(G, C)  # every count as a sum of leaf cells (geounits major)
    return np.einsum("ij,jk,ik->i", E, cov, E)


@pytest.mark.statistical
def test_projection_errors_match_the_exact_gls_variances():
    """(P) is unbiased and its mean squared error is the GLS variance: per geographic
    level, the Monte Carlo mean MSE is within 4 SE of the dense exact value (SE bounded by
    the mean of the per-count SEs, whatever their correlation; fixed seed)."""
    table = _table(3, n_geo=10, n_cat=6)
    workload = _workload(table, Gaussian(rho=0.2))
    design = ReleaseDesign(table, workload, "project")
    result = simulate(design, n_draws=4000, rng=11)
    exact = _gls_variances(table, workload)
    level = np.repeat(table.geography.depth, table.categories.n)
    for d in range(table.geography.n_levels):
        pick = level == d
        measured = result.mse[pick].mean()
        bound = result.mse_se[pick].mean()
        assert abs(measured - exact[pick].mean()) <= 4 * bound, (d, measured, exact[pick].mean())
    moving = result.bias_se > 0
    assert (np.abs(result.bias[moving]) <= 4.5 * result.bias_se[moving]).all()


@pytest.mark.statistical
def test_a_design_with_per_geounit_budgets_matches_the_gls_with_them():
    """``ReleaseDesign(..., budget_scale=)``: each geounit measured with its own multiple of
    its level's budget (as the spine's bypass does, ``pl94-2020-design.md`` section 1.5),
    the (P) mean squared error per level within 4 SE of the dense GLS variance with those
    budgets (``tests/tables/_reference.dense_gls``); steps that weigh a level alike and
    factors over the budget are refused before drawing."""
    table = _table(6, n_geo=14, n_cat=5)
    workload = _workload(table, Gaussian(rho=0.3))
    scale = np.random.default_rng(6).choice([0.25, 1.0], table.geography.n)
    design = ReleaseDesign(table, workload, "project", budget_scale=scale)
    result = simulate(design, n_draws=4000, rng=12)
    _, exact = dense_gls(measure(table, workload, secure=False, rng=0, budget_scale=scale))
    exact = exact.reshape(-1)
    assert (exact > _gls_variances(table, workload) + 1e-3).any()  # another error law
    level = np.repeat(table.geography.depth, table.categories.n)
    for d in range(table.geography.n_levels):
        pick = level == d
        measured, bound = result.mse[pick].mean(), result.mse_se[pick].mean()
        assert abs(measured - exact[pick].mean()) <= 4 * bound, (d, measured, exact[pick].mean())
    with pytest.raises(ValidationError, match="alike"):
        ReleaseDesign(table, workload, "project-nonneg", budget_scale=scale)
    with pytest.raises(ValidationError, match="more than the workload"):
        ReleaseDesign(table, workload, "project", budget_scale=scale * 8)


def test_the_bypass_leaves_the_gls_error_law_unchanged():
    """A parent and its only child measure one histogram, so moving the child's budget to
    the parent (the single-child bypass) leaves the GLS's information, and its variances,
    as they were: the bypass changes the error of per-parent estimators, not of the BLUE."""
    table = _table(7, n_geo=14, n_cat=5)
    workload = _workload(table, Gaussian(rho=0.3))
    scale = single_child_bypass(table, workload, top=1)
    assert (scale == 0).any() and (scale > 1).any()
    _, exact = dense_gls(measure(table, workload, secure=False, rng=0, budget_scale=scale))
    np.testing.assert_allclose(exact.reshape(-1), _gls_variances(table, workload), atol=1e-9)


def test_metrics_from_the_engine_equal_the_direct_metrics():
    """The streamed sums give the metrics of every draw: the same as computing them on
    the draws at once (here the draws are recomputed from the run's own seeds)."""
    table = _table(4, n_geo=300, n_cat=30)
    workload = _workload(table, Geometric(epsilon=0.3))
    design = ReleaseDesign(table, workload, "topdown")
    n_draws = chunk_rows(design.n_entities) * 3
    result = simulate(design, n_draws=n_draws, rng=5)
    seeds = np.random.SeedSequence(5).spawn(3)  # the engine's chunk seeds
    released = []
    for seed in seeds:
        gens = [np.random.default_rng(s) for s in seed.spawn(2)]
        draws = measure(table, workload, secure=False, rng=gens[0], size=n_draws // 3)
        released.append(design.solve(draws, rng=gens[1]))
    direct = table_error_metrics(np.concatenate(released), table)
    streamed = design.metrics(result)
    for a, b in zip(direct, streamed, strict=True):
        np.testing.assert_allclose(
            a.select_dtypes("number"), b.select_dtypes("number"), rtol=1e-12, equal_nan=True
        )


def test_table_designs_are_checked_before_drawing():
    table = _table(2)
    cat = table.categories
    with pytest.raises(ValidationError, match="table post-processing"):
        ReleaseDesign(table, _workload(table, Geometric(epsilon=1.0)), "clamp")
    weak = Workload([Measurement(0, Query("total", [[str(cat.ids[0])]]), Geometric(epsilon=1.0))])
    with pytest.raises(ValidationError):
        ReleaseDesign(table, weak, "topdown")
    design = ReleaseDesign(table, _workload(table, Geometric(epsilon=1.0)), "none")
    with pytest.raises(ValidationError, match="post-processing"):
        simulate(design, n_draws=10, rng=0)
    frame = ReleaseDesign(table, _workload(table, Geometric(epsilon=1.0)), "project")
    result = simulate(frame, n_draws=20, rng=0)
    out = frame.frame(result)
    assert {"geo_id", "level", "category", "bias"} <= set(out.columns)
    assert len(out) == table.geography.n * table.categories.n


def test_a_table_design_runs_on_other_cells_as_a_hierarchy_design_does():
    """``truth=`` (as for a hierarchy design): the same draws as a design built on a table
    holding those cells, for ``run``, ``simulate`` and ``metrics``; ``steps`` names the
    chain; cells of the wrong shape are refused before anything is drawn."""
    table = _table(5)
    work = _workload(table, Geometric(epsilon=0.5))
    design = ReleaseDesign(table, work, "project-nonneg,round")
    assert [str(s) for s in design.steps] == ["project-nonneg", "round"]
    assert ReleaseDesign(table, work, "none").steps == ()
    other = np.random.default_rng(9).integers(0, 30, table.cells.shape)
    twin = ReleaseDesign(Table(table.geography, table.categories, other), work, "topdown,round")
    mine = ReleaseDesign(table, work, "topdown,round")
    np.testing.assert_array_equal(mine.run(other, rng=3, size=2), twin.run(rng=3, size=2))
    assert not np.array_equal(mine.run(rng=3, size=2), twin.run(rng=3, size=2))
    a = simulate(mine, truth=other, n_draws=30, rng=1)
    b = simulate(twin, n_draws=30, rng=1)
    _same(a, b)
    for x, y in zip(mine.metrics(a, truth=other), twin.metrics(b), strict=True):
        np.testing.assert_allclose(x.select_dtypes("number"), y.select_dtypes("number"))
    with pytest.raises(ValidationError, match="cells"):
        mine.run(other[:-1], rng=0)

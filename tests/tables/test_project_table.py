"""(P) on tables: equal to cvxpy + Clarabel, consistent both ways, unbiased (seed 000 Thm 7)."""

import numpy as np
import pytest
from scipy import stats

import postdp
from postdp import Gaussian
from postdp.data import load_p1
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector
from postdp.tables import Measurement, Query, Workload, measure
from tests.tables._reference import blue_table, qp_table, random_case


@pytest.mark.parametrize("seed", range(24))
def test_gls_equals_clarabel_on_random_tables(seed):
    table, workload = random_case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = postdp.project(draws, nonneg=False)
    ref = qp_table(draws)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * scale)
    geo = table.geography
    for m, values in zip(workload.measurements, draws.values, strict=True):
        if m.public:  # invariants hold to rounding error
            got = ours[geo.levels[m.level]] @ m.query.matrix(table.categories).T
            np.testing.assert_allclose(got, values, rtol=0, atol=1e-9 * scale)
    # geography consistency: each parent's histogram is the sum of its children's
    kids = np.zeros_like(ours)
    np.add.at(kids, geo.parent[geo.parent >= 0], ours[geo.parent >= 0])
    internal = ~geo.is_leaf
    np.testing.assert_allclose(ours[internal], kids[internal], rtol=0, atol=1e-9 * scale)


def test_batches_are_solved_draw_by_draw():
    table, workload = random_case(5)
    draws = measure(table, workload, secure=False, rng=1, size=(2, 3))
    projector = TableProjector(table, workload)
    batch = projector(draws)
    assert batch.shape == (2, 3, table.geography.n, table.categories.leaves.size)
    for i in range(2):
        for j in range(3):
            one = type(draws)(table, workload, tuple(v[i, j] for v in draws.values), False)
            np.testing.assert_allclose(batch[i, j], projector(one), rtol=0, atol=1e-9)
    full = blue_table(draws)
    assert full.shape == (2, 3, *table.shape)


def test_leaf_queries_must_identify_the_cells():
    table, _ = random_case(2)
    cat = table.categories
    deepest = table.geography.n_levels - 1
    w = Workload([Measurement(deepest, Query("tot", [[str(cat.ids[0])]]), Gaussian(rho=1.0))])
    if cat.leaves.size > 1:
        with pytest.raises(ValidationError, match="do not identify every detailed cell"):
            TableProjector(table, w)


def test_projection_is_unbiased_on_pennsylvania():
    """Every cell's mean error is within z * SE of 0 (seed 000_52243d433e48a03d.txt, Thm 7:
    (P) is unbiased), with z Bonferroni-corrected over the cells tested."""
    t = load_p1("pa-blockgroup")
    cat = t.categories
    ms = [Measurement(0, Query("total", [["P1_001N"]]), None)]
    for d in range(4):
        ms.append(Measurement(d, Query.detailed(cat), Gaussian(rho=0.02)))
    ms.append(Measurement(2, Query.nodes(["P1_002N", "P1_009N"]), Gaussian(rho=0.02)))
    w = Workload(ms)
    projector = TableProjector(t, w)
    n_draws = 30
    truth = t.detailed().astype(float)
    total = np.zeros(truth.shape)
    total_sq = np.zeros(truth.shape)
    for block in range(10):  # 3 draws at a time: ~36 MB per array of draws
        est = projector(measure(t, w, secure=False, rng=block, size=n_draws // 10))
        err = est - truth
        total += err.sum(axis=0)
        total_sq += (err**2).sum(axis=0)
    mean = total / n_draws
    sd = np.sqrt(np.maximum(total_sq / n_draws - mean**2, 0.0) * n_draws / (n_draws - 1))
    free = sd > 0
    t_stat = mean[free] / (sd[free] / np.sqrt(n_draws))
    z = stats.t.isf(0.001 / (2 * t_stat.size), df=n_draws - 1)
    assert np.abs(t_stat).max() <= z
    # the public state total holds on every draw
    assert not free[0].any() or np.allclose(est[:, 0].sum(axis=-1), truth[0].sum())


@pytest.mark.parametrize("seed", range(24))
def test_kkt_report_certifies_the_estimate_and_catches_a_wrong_one(seed):
    table, workload = random_case(seed)
    draws = measure(table, workload, secure=False, rng=seed)
    ours = postdp.project(draws, nonneg=False)
    report = postdp.kkt_report(ours, draws, nonneg=False)
    assert report.worst_relative() < 1e-9, report
    # move mass between two sibling leaves: still consistent, no longer optimal
    geo = table.geography
    families = [np.flatnonzero((geo.parent == p) & geo.is_leaf) for p in range(geo.n)]
    pair = next((f for f in families if f.size >= 2), None)
    if pair is None:
        return
    wrong = ours.copy()
    wrong[pair[0], 0] += 1.0
    wrong[pair[1], 0] -= 1.0
    bad = postdp.kkt_report(wrong, draws, nonneg=False)
    assert bad.consistency < 1e-9 and bad.worst_relative() > 1e-6  # stationarity or public


def _dense_variances(projector, table, workload):
    """Var of every (geounit, category node) estimate from the estimator's linear map:
    feed each measured count alone (a unit answer) and add up var_k * (response)^2."""
    from postdp.tables import TableMeasurements

    geo, cat = table.geography, table.categories
    shapes = [(geo.levels[m.level].size, m.query.size) for m in workload.measurements]
    total = np.zeros((geo.n, cat.n))
    C = np.zeros((cat.n, cat.leaves.size))
    for k, leaf in enumerate(cat.leaves):
        node = int(leaf)
        while node >= 0:
            C[node, k] = 1.0
            node = int(cat.parent[node])
    for i, m in enumerate(workload.measurements):
        if m.public:
            continue
        for idx in np.ndindex(*shapes[i]):
            values = [np.zeros(s) for s in shapes]
            values[i][idx] = 1.0
            unit = TableMeasurements(table, workload, tuple(values), False)
            response = projector(unit) @ C.T
            total += m.variance * response**2
    return total


@pytest.mark.parametrize("seed", range(12))
def test_exact_variances_equal_a_dense_reference(seed):
    table, workload = random_case(seed)
    projector = TableProjector(table, workload)
    ours = projector.variances()
    ref = _dense_variances(projector, table, workload)
    noise = max(m.variance for m in workload.measurements)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-10 * noise)


def test_gls_intervals_cover_at_their_level():
    """90% intervals from the exact variances cover the truth 90% of the time (us-county,
    Gaussian noise: the (P) errors are exactly normal). Coverage is averaged per draw, and
    its SE comes from the spread of the per-draw coverages."""
    from postdp.data import load_p1
    from postdp.tables import expand

    t = load_p1("us-county")
    cat = t.categories
    w = Workload(
        [Measurement(0, Query("total", [["P1_001N"]]), None)]
        + [Measurement(d, Query.detailed(cat), Gaussian(rho=0.2)) for d in range(3)]
        + [Measurement(1, Query.nodes(["P1_002N", "P1_009N"]), Gaussian(rho=0.1))]
    )
    projector = TableProjector(t, w)
    sd = np.sqrt(projector.variances())
    z = stats.norm.isf(0.05)
    truth = t.counts()
    est = projector(measure(t, w, secure=False, rng=11, size=16))
    full = expand(est[:, t.geography.leaves], t.geography, cat)
    free = sd > 0
    covered = (np.abs(full - truth) <= z * sd)[:, free]
    per_draw = covered.mean(axis=1)
    se = per_draw.std(ddof=1) / np.sqrt(per_draw.size)
    assert abs(per_draw.mean() - 0.90) <= 4 * se, (per_draw.mean(), se)


@pytest.mark.parametrize("public", [False, True])
def test_hierarchy_gls_variances_equal_a_dense_reference(public):
    from postdp import Geometric, Laplace, project
    from postdp.data import synthetic_hierarchy
    from postdp.postprocess import inverse_variance_weights
    from postdp.postprocess.variances import hierarchy_variances

    h = synthetic_hierarchy((3, 2, 3), rng=4)
    mechanisms = [Laplace(epsilon=0.5), Geometric(epsilon=1.0), Laplace(epsilon=2.0)]
    mechanisms.append(Geometric(epsilon=0.25))
    ours = hierarchy_variances(h, mechanisms, public_root=public)
    weights = inverse_variance_weights(h, mechanisms)
    per_node = np.array([mechanisms[d].variance() for d in h.depth])
    total = np.zeros(h.n)
    base = np.zeros(h.n)
    for k in range(h.n):
        unit = base.copy()
        unit[k] = 1.0
        pub = {str(h.ids[0]): 0.0} if public else None
        total += per_node[k] * project(unit, h, nonneg=False, public=pub, weights=weights) ** 2
    np.testing.assert_allclose(ours, total, rtol=1e-10, atol=1e-12 * per_node.max())
    assert (ours[0] == 0) == public

"""Margins of error from a release alone: replicate and GLS intervals, and their coverage."""

import numpy as np
import pytest

import postdp
from postdp import Geometric, Hierarchy, Laplace
from postdp.analysis import ReleaseDesign, gls_intervals, interval_coverage, replicate_intervals
from postdp.errors import ValidationError
from tests.statistical._helpers import Z


@pytest.fixture(scope="module")
def tree():
    leaves = [400, 250, 620, 90, 310, 505]
    ids = ["T", "a", "b", "a1", "a2", "a3", "b1", "b2", "b3"]
    parent = [None, "T", "T", "a", "a", "a", "b", "b", "b"]
    counts = [sum(leaves), sum(leaves[:3]), sum(leaves[3:]), *leaves]
    return Hierarchy.from_parents(ids, parent, counts)


@pytest.mark.statistical
def test_gls_intervals_cover_at_their_level(tree):
    design = ReleaseDesign(tree, Laplace(0.5), "project")
    cov = interval_coverage(design, method="gls", n_draws=2000, level=0.9, rng=1)
    every = cov[cov["size"] == "all"]
    assert (np.abs(every["coverage"] - 0.9) <= Z * every["coverage_se"]).all(), every


@pytest.mark.statistical
def test_replicate_intervals_of_a_linear_chain_cover_at_their_level(tree):
    """For (P) the error law does not depend on the truth, so the replicates reproduce it;
    with R replicates the bootstrap quantiles cost about 1/R of coverage."""
    design = ReleaseDesign(tree, Geometric(0.5), "project")
    cov = interval_coverage(design, n_draws=300, replicates=200, level=0.9, rng=2)
    every = cov[cov["size"] == "all"]
    assert (np.abs(every["coverage"] - 0.9) <= Z * every["coverage_se"] + 0.01).all(), every
    gls = interval_coverage(design, method="gls", n_draws=50, rng=2)
    # the replicate widths estimate the exact GLS widths
    np.testing.assert_allclose(
        every["mean_width"], gls[gls["size"] == "all"]["mean_width"], rtol=0.15
    )


def test_replicate_intervals_shapes_paths_and_inputs(tree):
    design = ReleaseDesign(tree, Geometric(1.0), "project-nonneg,round")
    released = design.run(rng=3, size=2)
    ci = replicate_intervals(released, design, replicates=50, rng=4)
    assert ci.low.shape == released.shape and (ci.low <= ci.high).all()
    again = replicate_intervals(released, design, replicates=50, rng=4)
    np.testing.assert_array_equal(ci.low, again.low)  # seeded study path
    secure = replicate_intervals(released[0], design, replicates=20, secure=True)
    assert secure.low.shape == (tree.n,)
    for kwargs, match in (
        ({"replicates": 3}, "`replicates`"),
        ({"level": 1.0}, "`level`"),
        ({"secure": True, "rng": 1}, "`rng`"),
    ):
        with pytest.raises(ValidationError, match=match):
            replicate_intervals(released[0], design, **kwargs)
    with pytest.raises(ValidationError, match="shape"):
        replicate_intervals(released[0, :3], design)
    with pytest.raises(ValidationError, match="'project' alone"):
        gls_intervals(released[0], design)
    with pytest.raises(ValidationError, match="`method`"):
        interval_coverage(design, method="bayes")


@pytest.mark.statistical
def test_table_gls_intervals_cover_at_their_level():
    """Gaussian noise: (P)'s errors are exactly normal with the exact variances."""
    from postdp import Gaussian
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((4, 6), leaf_mean=300, rng=5)
    cat = t.categories
    w = Workload(
        [Measurement(d, Query.detailed(cat), Gaussian(rho=0.3)) for d in range(3)]
        + [Measurement(1, Query.nodes(["P1_002N", "P1_009N"]), Gaussian(rho=0.2))]
    )
    cov = interval_coverage(ReleaseDesign(t, w), method="gls", n_draws=40, level=0.8, rng=6)
    every = cov[cov["size"] == "all"]
    assert (np.abs(every["coverage"] - 0.8) <= Z * every["coverage_se"]).all(), every
    assert "cells" in cov.columns


def test_a_tables_coverage_refuses_what_it_cannot_measure():
    """One function for both designs: a table's design takes gls (for project alone) and
    replicates; the posterior is a hierarchy's, refused in one line before any draw."""
    from postdp import Gaussian
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((2, 3), leaf_mean=50, rng=1)
    w = Workload(
        [Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.5)) for d in range(3)]
    )
    for design, method, match in (
        (ReleaseDesign(t, w, "project"), "posterior", "'gls' or 'replicates' for a table"),
        (ReleaseDesign(t, w, "project-nonneg"), "gls", "GLS intervals are for postprocess"),
        (ReleaseDesign(t, w, "project,round"), "gls", "GLS intervals are for postprocess"),
        (ReleaseDesign(t, w, "none"), "replicates", "must release a table"),
    ):
        with pytest.raises(ValidationError, match=match) as info:
            interval_coverage(design, method=method, n_draws=2, rng=0)
        assert "\n" not in str(info.value)


@pytest.mark.statistical
def test_posterior_intervals_of_a_bayes_release_cover_at_least_their_level(tree):
    """Seed 003's credible intervals, family by family: the counts are integers, so the
    equal-tailed intervals of a discrete posterior include their end points and cover a
    little more than nominal (measured about 92-94% at 90%); never less, within z SE."""
    cov = interval_coverage(
        ReleaseDesign(tree, Geometric(0.5)), method="posterior", n_draws=120, level=0.9, rng=3
    )
    every = cov[cov["size"] == "all"]
    assert (every["coverage"] >= 0.9 - Z * every["coverage_se"]).all(), every
    assert (every["coverage"] <= 0.99).all(), every  # not vacuous


@pytest.mark.statistical
def test_ps_intervals_have_exact_coverage():
    """Seed 000 Thm 12: the (P_S) error law; its quantile interval covers at its level
    for n = 3 (far from normal) and n = 40."""
    from postdp import project_sum
    from postdp.analysis import ps_intervals

    lap = Laplace.from_scale(5.0)
    for n in (3, 40):
        truth = np.arange(1, n + 1) * 100.0
        noisy = lap.sample(truth, rng=n, size=20_000)
        released = project_sum(noisy, truth.sum())
        ci = ps_intervals(released, lap, level=0.8)
        covered = (ci.low <= truth) & (truth <= ci.high)
        p = covered.mean(axis=0)  # per component, over independent draws
        se = np.sqrt(0.8 * 0.2 / covered.shape[0])
        assert (np.abs(p - 0.8) <= Z * se).all(), (n, p)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("postprocess", "floor"), [("project", 0), ("project-nonneg", 100), ("topdown,round", 100)]
)
def test_table_replicate_intervals_cover_near_their_level(postprocess, floor):
    """``replicate_intervals`` of a ReleaseDesign. (P) on a table is linear, so its replicate
    errors have the release's error law, and an interval between numpy's (linearly
    interpolated) quantiles of R such errors covers an independent one with probability
    about (R - 1) / (R + 1) x level (the k-th of R order statistics sits at the k/(R+1)
    quantile on average): 0.761 for R = 40 at 0.8. (P+) and top-down (rounded) are
    nonlinear near 0 only: on counts of at least ``floor`` they behave as (P) does."""
    from postdp import Gaussian
    from postdp.analysis import ReleaseDesign, replicate_intervals
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((3, 4), leaf_mean=400, rng=7)
    w = Workload(
        [Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.4)) for d in range(3)]
    )
    design = ReleaseDesign(t, w, postprocess)
    truth = t.counts()
    judged = truth >= floor
    per_draw = []
    R = 40
    for k in range(24):
        released = design.run(rng=100 + k)[0]
        ci = replicate_intervals(released, design, replicates=R, level=0.8, rng=k)
        per_draw.append(((ci.low <= truth) & (truth <= ci.high))[judged].mean())
    p = np.array(per_draw)  # draws are independent; cells within a draw are not
    se = p.std(ddof=1) / np.sqrt(p.size)
    assert abs(p.mean() - (R - 1) / (R + 1) * 0.8) <= Z * se, (p.mean(), se)
    with pytest.raises(ValidationError, match="shape"):
        replicate_intervals(released[:2], design)


@pytest.mark.statistical
def test_adjusted_replicate_intervals_cover_at_their_level():
    """``adjust=True`` widens the quantile levels by (R + 1) / (R - 1): (P) is linear, so
    the coverage is then the nominal level itself (table design and hierarchy design)."""
    from postdp import Gaussian
    from postdp.analysis import ReleaseDesign, replicate_intervals
    from postdp.data import synthetic_hierarchy, synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((3, 4), leaf_mean=400, rng=7)
    w = Workload(
        [Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.4)) for d in range(3)]
    )
    h = synthetic_hierarchy((6, 8), rng=3)
    designs = [
        (ReleaseDesign(t, w, "project"), t.counts()),
        (ReleaseDesign(h, Gaussian(rho=0.5), "project"), h.counts),
    ]
    R = 20
    for design, truth in designs:
        per_draw = []
        for k in range(30):
            released = design.run(rng=200 + k)[0]
            ci = replicate_intervals(released, design, replicates=R, level=0.8, rng=k, adjust=True)
            per_draw.append(((ci.low <= truth) & (truth <= ci.high)).mean())
        p = np.array(per_draw)
        se = p.std(ddof=1) / np.sqrt(p.size)
        assert abs(p.mean() - 0.8) <= Z * se, (type(design).__name__, p.mean(), se)


def test_table_replicate_intervals_repeat_with_their_seed_and_refuse_a_hierarchy_step():
    """The table case of ``replicate_intervals`` (the deprecated ``table_replicate_intervals``
    spelling is gone): the same seed gives the same intervals, and a hierarchy-only step is
    refused by the table design before anything is drawn."""
    from postdp import Gaussian
    from postdp.analysis import ReleaseDesign, replicate_intervals
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((2, 2), leaf_mean=50, rng=1)
    w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=1)) for d in range(3)])
    design = ReleaseDesign(t, w, "topdown")
    released = design.run(rng=0)[0]
    first = replicate_intervals(released, design, replicates=10, rng=3)
    again = replicate_intervals(released, design, replicates=10, rng=3)
    np.testing.assert_array_equal(first.low, again.low)
    np.testing.assert_array_equal(first.high, again.high)
    assert first.low.shape == released.shape and (first.low <= first.high).all()
    assert not hasattr(postdp.analysis, "table_replicate_intervals")
    with pytest.raises(ValidationError, match="a table post-processing is one of"):
        ReleaseDesign(t, w, "clamp")

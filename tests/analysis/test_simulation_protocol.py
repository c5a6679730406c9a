"""The engine's design protocol (postdp.analysis.simulation): a design of one's own runs on
``simulate`` with the same guarantees as the designs postdp ships (no type dispatch)."""

from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from postdp import Budget
from postdp.analysis import ChunkRelease, SimulationDesign, memory_plan, simulate
from postdp.errors import ValidationError

Z = 4.5


@dataclass(frozen=True)
class ClampedGaussian:
    """k counts, each released as max(0, count + N(0, sigma^2)); one extra sum per chunk
    (the number of clamped values)."""

    counts: tuple[float, ...]
    sigma: float

    @property
    def budget(self):
        return Budget(rho=len(self.counts) / (2 * self.sigma**2))

    @property
    def n_entities(self):
        return len(self.counts)

    @property
    def entity_ids(self):
        return np.array([f"c{i}" for i in range(self.n_entities)], dtype=object)

    def entity_index(self, ids):
        return np.array([int(i[1:]) for i in ids], dtype=np.int64)

    def simulation(self, truth=None, *, raw=False):
        if truth is not None:
            raise ValidationError("this design has its own counts")
        return _Run(self, np.array(self.counts), np.full(self.n_entities, 8 * self.sigma))


@dataclass(frozen=True)
class _Run:
    design: ClampedGaussian
    truth: np.ndarray
    error_scale: np.ndarray

    def release(self, seeds, sizes, raw):
        parts, before, extra = [], [], []
        for seed, rows in zip(seeds, sizes, strict=True):
            noisy = self.truth + self.design.sigma * np.random.default_rng(seed).standard_normal(
                (rows, self.truth.size)
            )
            parts.append(np.maximum(noisy, 0.0))
            before.append(noisy[:, raw])
            extra.append({"clamped": (noisy < 0).sum(axis=0).astype(np.float64)})
        values = np.ascontiguousarray(np.concatenate(parts))
        return ChunkRelease(
            values, raw=np.concatenate(before) if raw.size else None, extra=tuple(extra)
        )


def test_a_design_of_ones_own_follows_the_protocol_and_matches_theory():
    """E[max(0, x + e)] - x for e ~ N(0, s^2) is s phi(x/s) - x Phi(-x/s) (the clamped
    normal's mean); the engine's bias estimate must agree within z SE."""
    design = ClampedGaussian((0.0, 1.0, 5.0), sigma=2.0)
    assert isinstance(design, SimulationDesign)
    res = simulate(design, n_draws=40_000, rng=3, raw=["c0"])
    x, s = np.array(design.counts), design.sigma
    theory = s * stats.norm.pdf(x / s) - x * stats.norm.cdf(-x / s)
    assert (np.abs(res.bias - theory) <= Z * res.bias_se).all(), (res.bias, theory)
    clamped = res.extra["clamped"] / res.n_draws  # P(x + e < 0) = Phi(-x/s)
    p = stats.norm.cdf(-x / s)
    assert (np.abs(clamped - p) <= Z * np.sqrt(p * (1 - p) / res.n_draws) + 1e-12).all()
    assert res.raw_ids.tolist() == ["c0"] and res.raw_counts.sum() == res.n_draws


@pytest.mark.processes
def test_a_protocol_design_is_batch_and_worker_invariant():
    design = ClampedGaussian((0.0, 3.0), sigma=1.0)
    a = simulate(design, n_draws=5000, batch=64, rng=1)
    b = simulate(design, n_draws=5000, batch=5000, rng=1, workers=2)
    np.testing.assert_array_equal(a.bias, b.bias)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.extra["clamped"], b.extra["clamped"])
    assert memory_plan(design, n_draws=5000).entities == 2


def test_simulate_refuses_what_is_not_a_design():
    with pytest.raises(TypeError, match="protocol"):
        simulate(object(), n_draws=10)
    with pytest.raises(ValidationError, match="its own counts"):
        simulate(ClampedGaussian((1.0,), 1.0), [2.0], n_draws=10)


def test_one_design_class_builds_a_table_design():
    """SPEC section 12: one design class for simulate. ReleaseDesign(table, workload, ...)
    is the table's design, simulated like a hierarchy's; the hierarchy's options (public
    nodes, weights) are refused on a table in one line."""
    from postdp import Gaussian
    from postdp.analysis import ReleaseDesign
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    t = synthetic_table((2, 2), leaf_mean=30, rng=0)
    w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=1)) for d in range(3)])
    design = ReleaseDesign(t, w, "topdown,round")
    assert type(design) is ReleaseDesign and design.model == "table"
    assert design.hierarchy is t.geography and design.mechanisms == ()
    same = simulate(ReleaseDesign(t, w, "topdown,round"), n_draws=20, rng=4)
    ours = simulate(design, n_draws=20, rng=4)
    np.testing.assert_array_equal(ours.bias, same.bias)
    for option in ({"public": "root"}, {"weights": "inverse-variance"}):
        with pytest.raises(ValidationError, match="for hierarchy designs"):
            ReleaseDesign(t, w, "project", **option)
    with pytest.raises(TypeError, match="measured by a Workload"):
        ReleaseDesign(t, Gaussian(rho=1), "project")
    with pytest.raises(ValidationError, match="for table designs"):
        ReleaseDesign(t.geography, Gaussian(rho=1), "project", budget_scale=[1, 1, 1])
    with pytest.raises(ValidationError, match="`per_level` is for hierarchy designs"):
        design.per_level  # noqa: B018


@pytest.mark.parametrize("step", ["project", "project-nonneg"])
def test_a_hierarchy_design_is_its_one_cell_table_design(step):
    """A hierarchy of counts is the one-cell table: on the same noisy counts, the hierarchy
    design's chain (the tree's fast path) and the table design of the one-cell table (one
    total per geounit, measured at every level) give the same estimates."""
    from postdp import Hierarchy, Laplace
    from postdp.analysis import ReleaseDesign
    from postdp.data import synthetic_hierarchy
    from postdp.tables import Measurement, Query, Table, TableMeasurements, Workload

    h = synthetic_hierarchy((3, 4, 5), leaf_mean=4.0, rng=2)
    cell = Hierarchy.from_parents(["total"], [None])
    leaves = np.flatnonzero(h.is_leaf)
    table = Table(h, cell, h.counts[leaves].reshape(-1, 1))
    m = Laplace.from_scale(3.0)
    w = Workload([Measurement(d, Query.detailed(cell), m) for d in range(h.n_levels)])
    noisy = h.counts + np.random.default_rng(5).laplace(0.0, 3.0, (4, h.n))
    measured = TableMeasurements(
        table, w, tuple(noisy[:, nodes, None] for nodes in h.levels), False
    )
    ours = ReleaseDesign(h, m, step).chain()(noisy)
    theirs = ReleaseDesign(table, w, step).solve(measured)[..., 0]  # every geounit
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    if step == "project-nonneg":  # the noise puts some small counts below zero
        assert (noisy[:, leaves] < 0).any() and (ours >= -1e-12).all()

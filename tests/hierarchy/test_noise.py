"""Noisy releases of a whole hierarchy and their budgets."""

import numpy as np
import pytest

from postdp import Gaussian, Geometric, Hierarchy, Laplace, add_noise
from postdp.errors import PrivacyLeakWarning, ValidationError


@pytest.fixture
def small():
    return Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2"], [None, "T", "T", "a", "a"], [10, 6, 4, 1, 5]
    )


def test_one_mechanism_per_level_budget_is_sequential(small):
    mechanisms = [Geometric(0.5), Geometric(1.0), Geometric(2.0)]
    out = add_noise(small, mechanisms, secure=False, rng=3)
    assert out.budget.epsilon == pytest.approx(3.5)
    assert out.values.dtype == np.int64
    assert out.mechanisms == tuple(mechanisms)
    with pytest.warns(PrivacyLeakWarning, match="study path"):
        frame = out.to_frame()
    assert "true_count" not in frame.columns and "count" not in frame.columns
    assert set(frame["path"]) == {"study"}
    assert frame["epsilon"].tolist() == [0.5, 1.0, 1.0, 2.0, 2.0]


def test_study_path_reproducible_and_secure_path_runs(small):
    a = add_noise(small, Geometric(1.0), secure=False, rng=5).values
    b = add_noise(small, Geometric(1.0), secure=False, rng=5).values
    np.testing.assert_array_equal(a, b)
    secure = add_noise(small, Geometric(1.0))
    assert secure.secure and secure.values.shape == (5,)
    assert secure.budget.epsilon == 3.0


def test_audit_table_includes_truth_only_on_request(small):
    out = add_noise(small, Laplace(1.0), secure=False, rng=0)
    frame = out.to_frame(include_truth=True, study=True)
    assert frame["true_count"].tolist() == [10, 6, 4, 1, 5]
    secure = add_noise(small, Laplace(1.0)).to_frame()  # no warning for a secure draw
    assert set(secure["path"]) == {"secure"}


def test_mixed_budgets(small):
    out = add_noise(
        small, [Geometric(1.0), Gaussian(rho=0.5), Gaussian(rho=0.5)], secure=False, rng=0
    )
    assert (out.budget.epsilon, out.budget.rho) == (1.0, 1.0)
    assert out.values.dtype == np.float64


def test_errors(small):
    with pytest.raises(
        ValidationError, match=r"`rng` must be None on the secure release path; got 3"
    ):
        add_noise(small, Geometric(1.0), rng=3)
    with pytest.raises(ValidationError, match=r"one noise mechanism or one per level \(3\)"):
        add_noise(small, [Geometric(1.0)] * 2, secure=False, rng=0)
    with pytest.raises(ValidationError, match="has no true counts"):
        add_noise(Hierarchy.from_parents(["T"], [None]), Geometric(1.0), secure=False)
    floats = Hierarchy.from_parents(["T", "a"], [None, "T"], [1.5, 1.5])
    with pytest.raises(ValidationError, match=r"`counts` must hold integers; got 1.5 at index 0"):
        add_noise(floats, Geometric(1.0), secure=False, rng=0)


@pytest.mark.parametrize(
    "mechanisms",
    [
        [Geometric(0.5), Geometric(1.0), Geometric(2.0)],
        [Laplace(0.5), Laplace(1.0), Laplace(2.0)],
        [Gaussian(rho=0.5), Gaussian(rho=1.0), Gaussian(rho=2.0)],
    ],
)
def test_a_hierarchy_is_noised_as_its_one_cell_table_is_measured(small, mechanisms):
    """``add_noise`` is the one-cell case of ``postdp.tables.measure``: one total per
    geounit measured at every level draws the same noise from the same seed."""
    from postdp.tables import Measurement, Query, Table, Workload, measure

    cell = Hierarchy.from_parents(["total"], [None])
    table = Table(small, cell, small.counts[small.is_leaf].reshape(-1, 1))
    work = Workload([Measurement(d, Query.detailed(cell), m) for d, m in enumerate(mechanisms)])
    measured = measure(table, work, secure=False, rng=11)
    ours = add_noise(small, mechanisms, secure=False, rng=11)
    for nodes, answers in zip(small.levels, measured.values, strict=True):
        np.testing.assert_array_equal(ours.values[nodes], answers[:, 0])
    assert ours.budget == measured.budget

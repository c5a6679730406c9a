"""(P), (P+), top-down and (P_S) against cvxpy + Clarabel, with their structural properties."""

import warnings
import zlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from postdp import Hierarchy, Laplace
from postdp.errors import (
    ConvergenceWarning,
    DegenerateInputWarning,
    InfeasibleConstraintsError,
    ValidationError,
)
from postdp.postprocess import (
    inverse_variance_weights,
    kkt_report,
    project,
    project_sum,
    top_down,
)
from postdp.postprocess._solvers import active_set as active_set_module
from tests.postprocess._reference import close, qp_project, qp_simplex
from tests.postprocess.catalogue import CATALOGUE, random_tree

PUBLIC_CHOICES = {
    "none": lambda h: None,
    "root": lambda h: "root",
    "inner": lambda h: [h.ids[i] for i in np.flatnonzero(~h.is_leaf)[1:3]] or None,
    "leaf": lambda h: [h.ids[h.leaves[-1]]] if h.n > 1 else None,
}


def _noisy(h, scale, rng, draws=3):
    return h.counts + rng.laplace(0.0, scale, size=(draws, h.n))


@pytest.mark.filterwarnings("ignore::postdp.errors.DegenerateInputWarning")
@pytest.mark.parametrize("name", list(CATALOGUE))
@pytest.mark.parametrize("public_kind", list(PUBLIC_CHOICES))
@pytest.mark.parametrize("nonneg", [False, True])
@pytest.mark.parametrize("scale", [2.0, 30.0])
def test_catalogue_matches_clarabel(name, public_kind, nonneg, scale):
    h = CATALOGUE[name]()
    public = PUBLIC_CHOICES[public_kind](h)
    # a seed that is the same in every run (str hash() is salted per process)
    rng = np.random.default_rng(zlib.crc32(repr((name, public_kind, nonneg, scale)).encode()))
    y = _noisy(h, scale, rng)
    v = project(y, h, nonneg=nonneg, public=public)
    for row in range(y.shape[0]):
        ref = qp_project(y[row], h, nonneg=nonneg, public=public)
        assert close(v[row], ref), (v[row], ref)
    report = kkt_report(v, y, h, nonneg=nonneg, public=public)
    assert report.worst_relative() <= 1e-9
    assert (report.kkt_residual / (report.scale * report.gradient_scale)).max() <= 1e-8
    if nonneg:
        assert v.min() >= 0.0


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_weighted_matches_clarabel(name):
    h = CATALOGUE[name]()
    rng = np.random.default_rng(5)
    mechanisms = [Laplace(epsilon=0.2 + 0.3 * d) for d in range(h.n_levels)]
    w = inverse_variance_weights(h, mechanisms)
    y = _noisy(h, 20.0, rng)
    for nonneg in (False, True):
        v = project(y, h, nonneg=nonneg, weights=w)
        for row in range(y.shape[0]):
            assert close(v[row], qp_project(y[row], h, nonneg=nonneg, weights=w))


@pytest.mark.filterwarnings("ignore::postdp.errors.DegenerateInputWarning")
@given(
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from([0.5, 10.0, 200.0]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_random_hierarchies_match_clarabel(n, seed, scale, nonneg, with_public, weighted):
    rng = np.random.default_rng(seed)
    h = random_tree(rng, n)
    public = None
    if with_public:
        chosen = rng.choice(n, size=min(n, 1 + n // 8), replace=False)
        public = [h.ids[i] for i in chosen]
    w = rng.uniform(0.2, 5.0, n) if weighted else None
    y = h.counts + rng.laplace(0.0, scale, size=(2, n))
    v = project(y, h, nonneg=nonneg, public=public, weights=w)
    for row in range(2):
        assert close(v[row], qp_project(y[row], h, nonneg=nonneg, public=public, weights=w))
    report = kkt_report(v, y, h, nonneg=nonneg, public=public, weights=w)
    assert report.worst_relative() <= 1e-9
    if nonneg:
        assert v.min() >= 0.0
    # idempotent
    again = project(v, h, nonneg=nonneg, public=public, weights=w)
    assert close(again, v, rel=1e-9)


def test_sibling_permutation_permutes_the_answer():
    h = CATALOGUE["unequal"]()
    frame = h.to_frame()
    rng = np.random.default_rng(2)
    y = _noisy(h, 15.0, rng, draws=1)[0]
    perm = np.concatenate([[0], 1 + rng.permutation(h.n - 1)])  # root first, rest shuffled
    h2 = Hierarchy.from_frame(frame.iloc[perm].reset_index(drop=True))
    for nonneg in (False, True):
        for method in (None, "topdown"):
            v = project(y, h, nonneg=nonneg, method=method)
            v2 = project(y[perm], h2, nonneg=nonneg, method=method)
            np.testing.assert_allclose(v2, v[perm], rtol=1e-12, atol=1e-9)


def test_batch_equals_row_by_row_and_leading_shape_kept():
    h = CATALOGUE["unequal"]()
    y = _noisy(h, 40.0, np.random.default_rng(3), draws=6).reshape(2, 3, h.n)
    for method in (None, "topdown"):
        v = project(y, h, method=method)
        assert v.shape == (2, 3, h.n)
        for i in range(2):
            for j in range(3):
                np.testing.assert_allclose(v[i, j], project(y[i, j], h, method=method), atol=1e-9)


def test_p_on_a_chain_is_the_mean():
    h = CATALOGUE["chain"]()
    y = np.random.default_rng(0).normal(size=h.n)
    np.testing.assert_allclose(project(y, h, nonneg=False), np.full(h.n, y.mean()), atol=1e-12)


@pytest.mark.filterwarnings("ignore::postdp.errors.DegenerateInputWarning")
def test_single_node():
    h = CATALOGUE["single"]()
    assert project(np.array([-3.0]), h).tolist() == [0.0]
    assert project(np.array([-3.0]), h, nonneg=False).tolist() == [-3.0]
    assert project(np.array([-3.0]), h, public="root").tolist() == [7.0]


def test_consistency_is_exact_to_rounding_on_counties():
    from postdp.data import load_county_populations

    h = Hierarchy.from_frame(load_county_populations())
    y = h.counts + np.random.default_rng(1).laplace(0, 2000.0, size=(4, h.n))
    for kwargs in ({"nonneg": False}, {"nonneg": True}, {"method": "topdown"}):
        v = project(y, h, **kwargs)
        report = kkt_report(v, y, h, nonneg=kwargs.get("nonneg", True))
        assert (report.constraint_violation / report.scale).max() <= 1e-12
        if kwargs.get("nonneg", True):
            assert v.min() >= 0
    v = project(y, h, public="root")
    assert np.abs(v[:, h.root] - 308_745_538).max() <= 1e-6


# ---------------------------------------------------------------------------- top-down
@pytest.mark.parametrize("name", ["star", "unequal", "zeros", "chain"])
@pytest.mark.parametrize("weighted", [False, True])
def test_top_down_is_family_by_family_simplex_projection(name, weighted):
    h = CATALOGUE[name]()
    rng = np.random.default_rng(11)
    w = rng.uniform(0.5, 2.0, h.n) if weighted else None
    y = _noisy(h, 25.0, rng, draws=1)[0]
    v = top_down(y, h, weights=w)
    assert v[h.root] == max(y[h.root], 0.0)
    for p in np.flatnonzero(~h.is_leaf):
        kids = np.flatnonzero(h.parent == p)
        ref = qp_simplex(y[kids], v[p], nonneg=True, weights=None if w is None else w[kids])
        assert close(v[kids], ref, rel=1e-7)


def test_top_down_equals_exact_on_a_star_with_public_root():
    h = CATALOGUE["star"]()
    y = _noisy(h, 30.0, np.random.default_rng(4), draws=5)
    np.testing.assert_allclose(
        top_down(y, h, public="root"), project(y, h, public="root"), atol=1e-9
    )


def test_top_down_without_nonneg_and_with_public_inner_nodes():
    h = CATALOGUE["unequal"]()
    y = _noisy(h, 25.0, np.random.default_rng(8), draws=2)
    public = [h.ids[1], h.ids[4]]
    v = top_down(y, h, public=public, nonneg=False)
    np.testing.assert_allclose(
        v[:, h.index(public)], np.broadcast_to(h.counts[h.index(public)], (2, 2))
    )
    assert kkt_report(v, y, h, nonneg=False, public=public).constraint_violation.max() < 1e-9
    v = top_down(y, h, public=public)
    assert v.min() >= 0
    assert kkt_report(v, y, h, public=public).constraint_violation.max() < 1e-9


# ---------------------------------------------------------------------------- (P_S)
@pytest.mark.parametrize("nonneg", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_project_sum_matches_clarabel(nonneg, weighted):
    rng = np.random.default_rng(12)
    y = rng.laplace(5.0, 10.0, size=(4, 15))
    w = rng.uniform(0.5, 3.0, 15) if weighted else None
    total = np.array([60.0, 0.0, 3.0, 200.0])
    v = project_sum(y, total, nonneg=nonneg, weights=w)
    for row in range(4):
        assert close(v[row], qp_simplex(y[row], total[row], nonneg=nonneg, weights=w))
    np.testing.assert_allclose(v.sum(axis=1), total, atol=1e-9)


def test_project_sum_closed_form():
    y = np.array([[4.0, 5.0, 3.0]])
    np.testing.assert_allclose(project_sum(y, 9.0), [[3.0, 4.0, 2.0]])


# ---------------------------------------------------------------------------- the fallback
def test_primal_active_set_fallback_is_exact_and_warns(monkeypatch):
    monkeypatch.setattr(active_set_module, "_MAX_PDAS_ROUNDS", 0)
    rng = np.random.default_rng(21)
    for name in ("unequal", "zeros", "star"):
        h = CATALOGUE[name]()
        for public in (None, "root", [h.ids[1]]):
            y = _noisy(h, 40.0, rng, draws=2)
            with pytest.warns(ConvergenceWarning, match="primal active-set"):
                v = project(y, h, public=public)
            for row in range(2):
                assert close(v[row], qp_project(y[row], h, nonneg=True, public=public))


def test_block_pivoting_needs_no_fallback_on_counties():
    from postdp.data import load_county_populations

    h = Hierarchy.from_frame(load_county_populations())
    y = h.counts + np.random.default_rng(9).laplace(0, 2000.0, size=(50, h.n))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        v = project(y, h, public="root")
    assert kkt_report(v, y, h, public="root").worst_relative() <= 1e-9


# ---------------------------------------------------------------------------- bad input
def test_bad_input_errors():
    h = CATALOGUE["star"]()
    with pytest.raises(
        ValidationError, match=r"`noisy` must have shape \(\.\.\., 9\) .* got shape \(3, 4\)"
    ):
        project(np.zeros((3, 4)), h)
    y = np.zeros((2, 9))
    y[0, 2] = np.nan
    with pytest.raises(
        ValidationError,
        match=r"`noisy` must be finite \(no NaN or inf\); got nan at index \(0, 2\)",
    ):
        project(y, h)
    with pytest.raises(ValidationError, match=r"`weights` must be positive; got -1.0 at index 0"):
        project(np.zeros(9), h, weights=np.r_[-1.0, np.ones(8)])
    with pytest.raises(ValidationError, match=r"unknown post-processing method 'fast'"):
        project(np.zeros(9), h, method="fast")
    with pytest.raises(ValidationError, match=r"unknown node ids: 'zz'"):
        project(np.zeros(9), h, public={"zz": 1.0})
    with pytest.raises(
        ValidationError, match=r"`public` values must be finite and nonnegative; got nan for 'n0'"
    ):
        project(np.zeros(9), h, public={"n0": float("nan")})


@pytest.mark.filterwarnings("ignore::postdp.errors.DegenerateInputWarning")
def test_infeasible_public_constraints():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    y = np.zeros(3)
    with pytest.raises(
        InfeasibleConstraintsError,
        match=r"public node 'T' is below the sum of the public nodes under it",
    ):
        project(y, h, public={"T": 5.0, "a": 7.0})
    # without the bound it is feasible: b takes -2
    assert project(y, h, nonneg=False, public={"T": 5.0, "a": 7.0}).tolist() == [5.0, 7.0, -2.0]
    with pytest.raises(
        InfeasibleConstraintsError, match=r"'T' does not equal the sum of the fixed nodes under it"
    ):
        project(y, h, nonneg=False, public={"T": 5.0, "a": 7.0, "b": 2.0})
    with pytest.raises(InfeasibleConstraintsError):
        top_down(y, h, public={"T": 5.0, "a": 7.0})


def test_inconsistent_true_hierarchy_is_rejected_before_projecting():
    from postdp.errors import HierarchyError

    df = pd.DataFrame({"id": ["T", "a", "b"], "parent": [None, "T", "T"], "count": [5, 1, 1]})
    with pytest.raises(HierarchyError, match="every parent must equal the sum of its children"):
        Hierarchy.from_frame(df)


def test_fully_determined_projection_warns():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    with pytest.warns(DegenerateInputWarning, match="every node is fixed"):
        out = project(np.array([9.0, 1.0, 1.0]), h, public=["root", "a"])
    assert out.tolist() == [5.0, 2.0, 3.0]


def test_project_reuses_a_prepared_projector_per_hierarchy():
    """Issue 12: a one-shot project() on a hierarchy it has seen costs what a prepared
    Projector does; the cache is keyed on every option, so results never mix."""
    from postdp.postprocess import projections as module

    h = CATALOGUE["unequal"]()
    y = _noisy(h, 2.0, np.random.default_rng(5))
    first = project(y, h, public={"n0": float(h.counts[0])})
    cached = module._CACHE[h]
    assert len(cached) == 1
    np.testing.assert_array_equal(project(y, h, public={"n0": float(h.counts[0])}), first)
    assert len(cached) == 1  # reused
    other = project(y, h, public={"n0": float(h.counts[0]) + 5.0})
    assert len(cached) == 2 and not np.allclose(other, first)
    np.testing.assert_allclose(project(y, h, nonneg=False), project(y, h, nonneg=False))
    assert len(cached) == 3

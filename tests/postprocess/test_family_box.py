"""The bounded family split (the second least-squares pass of the Census Bureau's TopDown:
each child's total held within a tolerance of the first pass's): equal to cvxpy + Clarabel on
random families, its KKT certificate small, and a bound that is not needed stays loose."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from postdp.postprocess.topdown2020.family import LevelQuadratic, solve_family
from postdp.postprocess.topdown2020.family_box import solve_family_box


def _family(seed, k=5, m=12):
    rng = np.random.default_rng(seed)
    groups = [np.arange(m), rng.integers(0, 3, m), rng.integers(0, 4, m)]  # detailed + 2
    quad = LevelQuadratic(groups, [1.0, 0.5, 2.0])
    H = quad.block(np.arange(m))
    truth = rng.poisson(4.0, (k, m)).astype(float)
    answers = [np.stack([np.bincount(g, t, minlength=g.max() + 1) for t in truth]) for g in groups]
    answers = [a + rng.normal(0, 2.0, a.shape) for a in answers]
    b = quad.linear(answers, np.arange(m))
    p = truth.sum(axis=0) + 1.0
    return H, b, p, truth


def _reference(H, b, p, C, lo, hi):
    k, m = b.shape
    x = cp.Variable((k, m))
    objective = sum(0.5 * cp.quad_form(x[j], cp.psd_wrap(H)) - b[j] @ x[j] for j in range(k))
    rows = x @ C.T
    cons = [x >= 0, cp.sum(x, axis=0) == p, rows >= lo, rows <= hi]
    cp.Problem(cp.Minimize(objective), cons).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10
    )
    return x.value


@pytest.mark.parametrize("seed", range(6))
def test_the_bounded_split_equals_a_convex_solver(seed):
    H, b, p, _ = _family(seed)
    k, m = b.shape
    free = solve_family(H, b, p, tol=1e-11 * 100)
    totals = free.x.sum(axis=1)
    rng = np.random.default_rng(100 + seed)
    # totals pulled towards other values by up to 5, held within 0.1: most bounds bind
    target = totals + rng.uniform(-5, 5, k)
    target += (p.sum() - target.sum()) / k  # they still add up to the parent's
    C = np.ones((1, m))
    lo, hi = (target - 0.1)[:, None], (target + 0.1)[:, None]
    got = solve_family_box(H, b, p, tol=1e-9, lo=lo[:, 0], hi=hi[:, 0])
    want = _reference(H, b, p, C, lo, hi)
    np.testing.assert_allclose(got.x, want, atol=2e-5)
    assert got.worst < 1e-7
    assert got.upper.any() or got.lower.any()
    assert (got.x.sum(axis=1) >= lo[:, 0] - 1e-9).all() and (
        got.x.sum(axis=1) <= hi[:, 0] + 1e-9
    ).all()


def test_bounds_that_are_not_needed_stay_loose_and_change_nothing():
    H, b, p, _ = _family(7)
    free = solve_family(H, b, p, tol=1e-9)
    totals = free.x.sum(axis=1)
    got = solve_family_box(H, b, p, tol=1e-9, lo=totals - 1, hi=totals + 1)
    assert not (got.upper.any() or got.lower.any())
    np.testing.assert_allclose(got.x, free.x, atol=1e-10)


def test_a_bounded_row_other_than_the_total():
    H, b, p, _ = _family(8, k=4, m=10)
    rng = np.random.default_rng(3)
    c = (rng.random(10) < 0.5).astype(float)
    free = solve_family(H, b, p, tol=1e-9)
    rows = free.x @ c
    lo, hi = rows + 0.7, rows + 1.7  # every child's row pushed up by at least 0.7
    lo[-1], hi[-1] = -np.inf, np.inf
    got = solve_family_box(H, b, p, tol=1e-9, lo=lo, hi=hi, c=c)
    want = _reference(
        H, b, p, c[None, :], np.maximum(lo, -1e6)[:, None], np.minimum(hi, 1e6)[:, None]
    )
    np.testing.assert_allclose(got.x, want, atol=2e-5)
    assert got.lower[:-1].all() and got.worst < 1e-7


def _structural(seed, k=6, m=16, types=4):
    """A family whose cells fall in ``types`` groups (as the hhgq levels): some children hold
    a group at 0 (no facility of that type), others hold it at least at a lower bound, and
    every child's total is held near a target; a feasible truth meets every bound."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, types, m)
    H, b, _, truth = _family(seed, k, m)
    allowed = rng.random((k, types)) < 0.6
    allowed[rng.integers(0, k, types), np.arange(types)] = True  # every type somewhere
    truth = truth * allowed[:, kind]
    p = truth.sum(axis=0)
    rows = np.stack([(kind == t).astype(float) for t in range(types)])
    sums = truth @ rows.T
    lo = np.where(allowed & (rng.random((k, types)) < 0.5), sums, -np.inf)
    lo[~allowed] = 0.0  # a type with no facility: held at 0
    hi = np.where(allowed, np.inf, 0.0)
    total = truth.sum(axis=1)
    C = np.concatenate([np.ones((1, m)), rows])
    lo = np.concatenate([(total - 0.3)[:, None], lo], axis=1)
    hi = np.concatenate([(total + 0.3)[:, None], hi], axis=1)
    return H, b, p, C, lo, hi


@pytest.mark.parametrize("method", ["moves", "primal"])
@pytest.mark.parametrize("loosen", [0.0, 30.0])
@pytest.mark.parametrize("seed", range(8))
def test_many_bounded_rows_equal_a_convex_solver(seed, loosen, method, monkeypatch):
    """Several rows per child (the total in a box, group sums with lower bounds, groups held
    at 0): the solution equals cvxpy + Clarabel's and its certificate is small, whether the
    lower bounds bind (the moves on every row, or with those given no solve, the primal
    method) or the relaxation meets them (loosened)."""
    from postdp.postprocess.topdown2020 import family_box

    if method == "primal":
        monkeypatch.setattr(family_box, "_DUAL_LIMIT", 0)
    H, b, p, C, lo, hi = _structural(seed)
    lo[:, 1:] = np.where(lo[:, 1:] > 0, np.maximum(lo[:, 1:] - loosen, 0.0), lo[:, 1:])
    got = solve_family_box(H, b, p, tol=1e-9, lo=lo, hi=hi, c=C)
    want = _reference(H, b, p, C, np.maximum(lo, -1e6), np.minimum(hi, 1e6))
    np.testing.assert_allclose(got.x, want, atol=1e-4)  # Clarabel's own accuracy

    def objective(x):
        return float(sum(0.5 * xj @ H @ xj - bj @ xj for xj, bj in zip(x, b, strict=True)))

    assert objective(got.x) <= objective(want) + 1e-7 * abs(objective(want))
    assert got.worst < 1e-7
    rows = got.x @ C.T
    assert (rows >= lo - 1e-9).all() and (rows <= hi + 1e-9).all()
    assert got.upper.shape == lo.shape and (got.lower | got.upper)[:, 0].any()


def test_a_row_whose_lower_bounds_add_up_to_the_parent_is_held_for_every_child():
    H, b, p, C, lo, hi = _structural(3)
    rows = C[1:] @ p
    lo[:, 1] = np.full(lo.shape[0], rows[0] / lo.shape[0])  # the lower bounds use it all
    hi[:, 1] = np.inf
    got = solve_family_box(H, b, p, tol=1e-9, lo=lo[:, 1:], hi=hi[:, 1:], c=C[1:])
    np.testing.assert_allclose(got.x @ C[1], lo[:, 1], atol=1e-9)
    assert got.worst < 1e-7


@pytest.mark.parametrize("seed", range(6))
def test_children_weighted_by_their_own_budget_equal_a_convex_solver(seed):
    """Children measured with their own multiple a_j of the level's budget (the production
    spine's bypass): the objective sum_j a_j x_j' H x_j / 2 - b_j' x_j, with and without
    bounded totals, equals cvxpy + Clarabel."""
    H, b, p, _ = _family(40 + seed, k=6, m=14)
    k, m = b.shape
    rng = np.random.default_rng(seed)
    a = rng.choice([1.0, 1.75, 3.5, 0.5], size=k)
    b = b * a[:, None]  # each child's answers weigh a_j more
    got = solve_family(H, b, p, tol=1e-11 * 100, weight=a)
    x = cp.Variable((k, m))
    objective = sum(0.5 * a[j] * cp.quad_form(x[j], cp.psd_wrap(H)) - b[j] @ x[j] for j in range(k))
    cons = [x >= 0, cp.sum(x, axis=0) == p]
    cp.Problem(cp.Minimize(objective), cons).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10
    )
    _no_worse(got.x, x.value, H, b, a)
    assert got.worst < 1e-7
    unweighted = solve_family(H, b, p, tol=1e-9)
    assert np.abs(unweighted.x - got.x).max() > 1e-3  # the weights matter
    totals = got.x.sum(axis=1)
    target = totals + rng.uniform(-4, 4, k)
    target += (p.sum() - target.sum()) / k
    lo, hi = target - 0.1, target + 0.1
    boxed = solve_family_box(H, b, p, tol=1e-9, lo=lo, hi=hi, weight=a)
    rows = cp.sum(x, axis=1)
    cp.Problem(cp.Minimize(objective), [*cons, rows >= lo, rows <= hi]).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10
    )
    _no_worse(boxed.x, x.value, H, b, a)
    assert boxed.worst < 1e-7


def _no_worse(ours, ref, H, b, a):
    """Ours is the reference's point (within the convex solver's own accuracy) and costs no
    more than it (ours is certified by its KKT residuals; the reference only to 1e-10 gaps)."""

    def cost(x):
        return float(sum(0.5 * a[j] * x[j] @ H @ x[j] - b[j] @ x[j] for j in range(len(a))))

    np.testing.assert_allclose(ours, ref, atol=1e-4)
    assert cost(ours) <= cost(ref) + 1e-9 * max(1.0, abs(cost(ref)))

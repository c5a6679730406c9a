"""HiGHS called directly (postdp.postprocess._solvers.highs), the 2020 rounder's solver:
the same optima as scipy's linprog on random equality-constrained programs, infeasible and
unbounded ones reported as not optimal, nothing written to the standard output, and one
solver per thread."""

import threading

import numpy as np
import pytest
from scipy import optimize, sparse

from postdp.postprocess._solvers.highs import solve_equalities


def _program(rng, rows, cols):
    """A feasible program: rhs from a point inside the bounds."""
    A = sparse.random(rows, cols, density=0.3, random_state=rng, format="csr")
    A.data = np.round(A.data * 6 - 3)
    lower = rng.integers(-3, 1, cols).astype(float)
    upper = lower + rng.integers(1, 5, cols)
    inside = lower + rng.random(cols) * (upper - lower)
    return rng.normal(size=cols), A, A @ inside, lower, upper


@pytest.mark.parametrize("seed", range(12))
def test_the_optimum_is_linprogs(seed):
    rng = np.random.default_rng(seed)
    cost, A, rhs, lower, upper = _program(rng, int(rng.integers(1, 8)), int(rng.integers(2, 20)))
    ours = solve_equalities(cost, A, rhs, lower, upper)
    ref = optimize.linprog(
        cost, A_eq=A, b_eq=rhs, bounds=np.column_stack([lower, upper]), method="highs"
    )
    assert ref.status == 0 and ours.optimal
    assert abs(ours.fun - ref.fun) <= 1e-9 * (1 + abs(ref.fun))
    assert abs(cost @ ours.x - ours.fun) <= 1e-9 * (1 + abs(ours.fun))
    np.testing.assert_allclose(A @ ours.x, rhs, atol=1e-9)
    assert (ours.x >= lower - 1e-9).all() and (ours.x <= upper + 1e-9).all()


def test_a_solve_after_an_infeasible_one_starts_afresh():
    bad = solve_equalities(
        np.ones(2), sparse.csr_array(np.array([[1.0, 1.0]])), np.array([5.0]), np.zeros(2),
        np.ones(2),
    )  # fmt: skip
    assert not bad.optimal and bad.x is None and "nfeasible" in bad.message
    unbounded = solve_equalities(
        np.array([-1.0, 0.0]), sparse.csr_array(np.array([[1.0, -1.0]])), np.zeros(1),
        np.zeros(2), np.full(2, np.inf),
    )  # fmt: skip
    assert not unbounded.optimal
    good = solve_equalities(
        np.array([1.0, 2.0]), sparse.csr_array(np.array([[1.0, 1.0]])), np.array([1.5]),
        np.zeros(2), np.ones(2),
    )  # fmt: skip
    assert good.optimal and good.fun == pytest.approx(2.0)
    np.testing.assert_allclose(good.x, [1.0, 0.5], atol=1e-12)


def test_nothing_is_written_to_the_standard_output(capfd):
    def run():
        rng = np.random.default_rng(0)
        assert solve_equalities(*_program(rng, 3, 6)).optimal

    worker = threading.Thread(target=run)  # a new thread: a new solver, made here
    worker.start()
    worker.join()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_threads_solve_at_once_with_their_own_solvers():
    rng = np.random.default_rng(5)
    programs = [_program(rng, 4, 12) for _ in range(8)]
    expected = [solve_equalities(*p).fun for p in programs]
    got: dict[int, float] = {}

    def run(i):
        for _ in range(20):
            got[i] = solve_equalities(*programs[i]).fun

    workers = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert [got[i] for i in range(8)] == expected

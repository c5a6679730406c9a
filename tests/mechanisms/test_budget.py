import math

import numpy as np
import pytest

from postdp import Budget
from postdp.errors import BudgetError


def test_compose_adds_epsilons_and_rhos():
    total = Budget.compose([Budget.pure(0.5), Budget.zcdp(0.1), Budget.pure(1.5), Budget.zcdp(0.2)])
    assert total.epsilon == 2.0
    assert total.rho == pytest.approx(0.3)
    assert Budget.pure(1.0) + Budget.pure(2.0) == Budget.pure(3.0)
    assert Budget.compose([]) == Budget()


def test_measure_and_total_rho():
    assert Budget.pure(2.0).measure == "pure"
    assert Budget(epsilon=2.0, rho=0.5).measure == "zcdp"
    # pure eps-DP is (eps^2/2)-zCDP (Bun and Steinke 2016, Prop. 1.4)
    assert Budget(epsilon=2.0, rho=0.5).total_rho == pytest.approx(2.5)


def _brute_force_epsilon(rho, delta):
    """min over a fine grid of alpha of the Canonne-Kamath-Steinke (2020) Prop. 12 bound."""
    alpha = 1.0 + np.exp(np.linspace(-12, 12, 400_001))
    value = alpha * rho + (
        np.log(1 / delta) + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)
    ) / (alpha - 1)
    return float(value.min())


@pytest.mark.parametrize("rho", [0.005, 0.125, 0.5, 2.0, 50.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-10])
def test_zcdp_to_approx_dp_is_the_optimal_conversion(rho, delta):
    got = Budget.zcdp(rho).to_approx_dp(delta)
    assert got == pytest.approx(_brute_force_epsilon(rho, delta), rel=1e-9)
    assert got <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # never worse than classic
    assert Budget.pure(1.25).to_approx_dp(1e-3) == 1.25


def test_issue_11_figures():
    """rho = 0.125, delta = 1e-6: 2.419 (optimal) instead of 2.753 (classic); and a mixed
    budget Geometric(0.5) + DiscreteGaussian(rho=0.1) + Geometric(1.0) is 0.725-zCDP, not 1.225."""
    assert round(Budget.zcdp(0.125).to_approx_dp(1e-6), 3) == 2.419
    mixed = Budget.compose([Budget.pure(0.5), Budget.zcdp(0.1), Budget.pure(1.0)])
    assert mixed.total_rho == pytest.approx(0.725)
    assert mixed.epsilon == 1.5 and mixed.rho == pytest.approx(0.1)


@pytest.mark.parametrize("rho", [0.01, 0.125, 1.0, 8.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9, 1e-12])
def test_conversion_never_below_opendp(rho, delta):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    gauss = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.l2_distance(T=float),
        scale=1 / math.sqrt(2 * rho),
    )
    theirs = dp.c.make_zCDP_to_approxDP(gauss).map(1.0).epsilon(delta)
    ours = Budget.zcdp(rho).to_approx_dp(delta)
    assert theirs <= ours <= theirs * (1 + 1e-9)


def test_mixed_budget_uses_the_smaller_conversion():
    b = Budget.compose([Budget.pure(0.1), Budget.zcdp(0.5)])
    split = 0.1 + _brute_force_epsilon(0.5, 1e-9)
    merged = _brute_force_epsilon(0.5 + 0.1**2 / 2, 1e-9)
    assert b.to_approx_dp(1e-9) == pytest.approx(min(split, merged), rel=1e-9)
    # many small pure terms: converting each as eps_i^2/2 is what makes "merged" win
    many = Budget.compose([Budget.pure(0.1)] * 20 + [Budget.zcdp(0.5)])
    assert many.total_rho == pytest.approx(0.5 + 20 * 0.005)
    assert many.to_approx_dp(1e-9) == pytest.approx(_brute_force_epsilon(0.6, 1e-9), rel=1e-9)


def test_pure_rho_is_validated():
    with pytest.raises(BudgetError, match="pure_rho"):
        Budget(epsilon=1.0, pure_rho=0.6)
    assert Budget(epsilon=1.0).total_rho == 0.5  # one term unless told otherwise


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": -1.0}, r"`epsilon` must be nonnegative and finite; got -1.0"),
        ({"epsilon": math.nan}, r"`epsilon` must be nonnegative and finite; got nan"),
        ({"rho": math.inf}, r"`rho` must be nonnegative and finite; got inf"),
    ],
)
def test_invalid_budget(kwargs, message):
    with pytest.raises(BudgetError, match=message):
        Budget(**kwargs)


def test_invalid_delta_and_types():
    with pytest.raises(BudgetError, match=r"`delta` must lie in \(0, 1\); got 0"):
        Budget.zcdp(1.0).to_approx_dp(0)
    with pytest.raises(TypeError, match="`epsilon` must be a real number"):
        Budget(epsilon="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must hold Budget objects"):
        Budget.compose([1.0])  # type: ignore[list-item]


def test_str():
    assert str(Budget.pure(3)) == "epsilon = 3 (pure DP)"
    assert str(Budget.zcdp(0.5)) == "rho = 0.5 (zCDP)"
    assert str(Budget(1, 0.5)) == "epsilon = 1 (pure DP) + rho = 0.5 (zCDP)"

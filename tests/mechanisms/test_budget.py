import math

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


def test_zcdp_to_approx_dp_hand_computed():
    # rho + 2 sqrt(rho log(1/delta)) with rho = 0.5, delta = 1e-6
    expected = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert Budget.zcdp(0.5).to_approx_dp(1e-6) == pytest.approx(expected)
    assert Budget.pure(1.25).to_approx_dp(1e-3) == 1.25


def test_mixed_budget_uses_the_smaller_conversion():
    b = Budget(epsilon=0.1, rho=0.5)
    log_term = math.log(1e9)
    split = 0.1 + 0.5 + 2 * math.sqrt(0.5 * log_term)
    merged_rho = 0.5 + 0.1**2 / 2
    merged = merged_rho + 2 * math.sqrt(merged_rho * log_term)
    assert b.to_approx_dp(1e-9) == pytest.approx(min(split, merged))


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

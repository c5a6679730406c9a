"""Every mechanism rejects bad parameters and bad input with a message naming the culprit."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace
from postdp.errors import ValidationError

PURE = [Laplace, Geometric]
ZCDP = [Gaussian, DiscreteGaussian]


@pytest.mark.parametrize("cls", PURE)
@pytest.mark.parametrize("bad", [-1.0, 0.0, math.nan, math.inf, -math.inf])
def test_bad_epsilon(cls, bad):
    with pytest.raises(ValidationError, match=rf"`epsilon` must be positive and finite; got {bad}"):
        cls(epsilon=bad)


@pytest.mark.parametrize("cls", ZCDP)
@pytest.mark.parametrize("bad", [-0.5, 0.0, math.nan, math.inf])
def test_bad_rho(cls, bad):
    with pytest.raises(ValidationError, match=rf"`rho` must be positive and finite; got {bad}"):
        cls(rho=bad)


@pytest.mark.parametrize(
    "make",
    [
        lambda s: Laplace(epsilon=1.0, sensitivity=s),
        lambda s: Geometric(epsilon=1.0, sensitivity=s),
        lambda s: Gaussian(rho=1.0, sensitivity=s),
        lambda s: DiscreteGaussian(rho=1.0, sensitivity=s),
    ],
)
@pytest.mark.parametrize("bad", [-2.0, 0, math.nan, math.inf])
def test_bad_sensitivity(make, bad):
    with pytest.raises(
        ValidationError, match=rf"`sensitivity` must be positive and finite; got {bad}"
    ):
        make(bad)


@pytest.mark.parametrize("cls", [Geometric, DiscreteGaussian])
def test_integer_mechanisms_need_integer_sensitivity(cls):
    param = {"epsilon": 1.0} if cls is Geometric else {"rho": 1.0}
    with pytest.raises(
        ValidationError, match=r"`sensitivity` must be a positive integer .* got 1.5"
    ):
        cls(**param, sensitivity=1.5)


def test_wrong_types():
    with pytest.raises(TypeError, match="`epsilon` must be a real number; got str"):
        Laplace(epsilon="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`epsilon` must be a real number; got bool"):
        Geometric(epsilon=True)
    with pytest.raises(TypeError, match="`x` must be an array of real numbers"):
        Laplace(epsilon=1.0).sample(["a", "b"], rng=0)


@pytest.mark.parametrize("cls", [Geometric, DiscreteGaussian])
def test_integer_mechanisms_reject_fractional_counts(cls):
    m = cls(epsilon=1.0) if cls is Geometric else cls(rho=1.0)
    with pytest.raises(ValidationError, match=r"`x` must hold integers; got 2.5 at index 1"):
        m.sample([1.0, 2.5, 3.0], rng=0)
    with pytest.raises(ValidationError, match=r"`x` must hold integers; got 2.5 at index 1"):
        m.release([1.0, 2.5, 3.0])
    # whole floats are accepted and come back as integers
    assert m.sample([1.0, 2.0], rng=0).dtype == np.int64


@pytest.mark.parametrize(
    "m", [Laplace(1.0), Geometric(1.0), Gaussian(rho=1.0), DiscreteGaussian(rho=1.0)]
)
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_counts_rejected(m, bad):
    with pytest.raises(
        ValidationError, match=rf"`x` must be finite \(no NaN or inf\); got {bad} at index 2"
    ):
        m.sample([1.0, 2.0, bad], rng=0)


def test_bad_size_and_batch():
    m = Geometric(1.0)
    with pytest.raises(ValidationError, match=r"`size` must be nonnegative; got -3"):
        m.sample([1], rng=0, size=-3)
    with pytest.raises(TypeError, match="`size` must be an int or a tuple of ints"):
        m.sample([1], rng=0, size=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"`batch` must be at least 1; got 0"):
        next(m.iter_samples([1], n_draws=3, batch=0, rng=0))


def test_bad_rng():
    with pytest.raises(TypeError, match="`rng` must be an int seed"):
        Laplace(1.0).sample([1.0], rng="seed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`rng` must be a nonnegative seed; got -1"):
        Laplace(1.0).sample([1.0], rng=-1)


@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not (0 < v < math.inf)))
def test_epsilon_outside_the_open_half_line_is_always_rejected(value):
    with pytest.raises(ValidationError, match="`epsilon` must be positive and finite"):
        Laplace(epsilon=value)


@given(st.floats(min_value=1e-13, max_value=700.0))
def test_valid_epsilon_round_trips(value):
    m = Laplace(epsilon=value)
    assert m.epsilon == value
    assert m.scale == pytest.approx(1.0 / value)


@pytest.mark.parametrize("cls", [Laplace, Geometric])
@pytest.mark.parametrize(
    ("epsilon", "message"),
    [(1e200, "at most 700"), (700.5, "at most 700"), (1e-20, "at least 1e-13"), (1e-14, "1e-13")],
)
def test_epsilon_whose_noise_vanishes_or_overflows_is_refused(cls, epsilon, message):
    """Issue 10: eps = 1e200 published the truth, eps <= 1e-18 saturated OpenDP at 2**63."""
    with pytest.raises(ValidationError, match=message):
        cls(epsilon=epsilon)
    with pytest.raises(ValidationError, match=message):
        cls(epsilon=epsilon * 3, sensitivity=3)


@pytest.mark.parametrize("cls", [Gaussian, DiscreteGaussian])
@pytest.mark.parametrize(("rho", "message"), [(1e6, "at most 245000"), (1e-30, "at least 5e-27")])
def test_rho_whose_noise_vanishes_or_overflows_is_refused(cls, rho, message):
    with pytest.raises(ValidationError, match=message):
        cls(rho=rho)


def test_geometric_variance_at_the_smallest_epsilon_is_finite():
    m = Geometric(epsilon=1e-13)
    assert math.isfinite(m.variance())
    assert m.variance() == pytest.approx(2.0 / 1e-26, rel=1e-9)  # 2a/(1-a)^2 ~ 2/eps^2


def test_float_paths_refuse_values_the_noise_cannot_hide():
    with pytest.raises(ValidationError, match=r"above 2\*\*53"):
        Laplace(epsilon=1.0).sample([1e17], rng=0)
    with pytest.raises(ValidationError, match=r"below 2\*\*-32 of the largest value"):
        Laplace(epsilon=500.0).sample([1e13], rng=0)
    assert Laplace(epsilon=0.1).sample([3e8], rng=0) != 3e8
    with pytest.raises(ValidationError, match=r"too large for int64"):
        Geometric(epsilon=1.0).sample(np.array([10**19], dtype=np.uint64), rng=0)

"""Each sampler, study and release path, against its exact law (fixed seeds, pooled bins).

Discrete samplers: chi-square with pooled tails; continuous ones: Kolmogorov-Smirnov; every
sampler: sample variance against the exact variance through a z·SE interval.
"""

import numpy as np
import pytest
from scipy import stats

from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace
from tests.statistical._helpers import (
    ALPHA_SEEDED,
    ALPHA_UNSEEDED,
    Z,
    pooled_chisquare,
    variance_interval,
)

pytestmark = pytest.mark.statistical

DISCRETE = [
    Geometric(epsilon=0.3),
    Geometric(epsilon=1.0),
    Geometric(epsilon=2.0, sensitivity=3),
    DiscreteGaussian(rho=2.0),  # sigma = 0.5
    DiscreteGaussian(rho=0.5),  # sigma = 1
    DiscreteGaussian(rho=0.01),  # sigma ~ 7.07
    DiscreteGaussian(rho=0.0005),  # sigma ~ 31.6: the block-level scale of the 2020 design
]
CONTINUOUS = [Laplace(epsilon=0.5), Laplace(epsilon=4.0), Gaussian(rho=0.05), Gaussian(rho=3.0)]

TRUE = np.array([0, 17, 1000])  # three entities: the noise law must not depend on the count


@pytest.mark.parametrize("m", DISCRETE, ids=repr)
def test_discrete_study_path_chisquare(m):
    draws = m.sample(TRUE, rng=20261121, size=40_000) - TRUE
    p = pooled_chisquare(draws, m.pmf, m.cdf)
    assert p > ALPHA_SEEDED, p


@pytest.mark.parametrize("m", DISCRETE, ids=repr)
def test_discrete_release_path_chisquare(m):
    draws = m.release(np.broadcast_to(TRUE, (8_000, 3))) - TRUE
    p = pooled_chisquare(draws, m.pmf, m.cdf)
    assert p > ALPHA_UNSEEDED, p


@pytest.mark.parametrize("m", CONTINUOUS, ids=repr)
def test_continuous_study_path_ks(m):
    draws = m.sample(TRUE.astype(float), rng=7, size=30_000) - TRUE
    assert stats.kstest(draws.ravel(), m.cdf).pvalue > ALPHA_SEEDED


@pytest.mark.parametrize("m", CONTINUOUS, ids=repr)
def test_continuous_release_path_ks(m):
    draws = m.release(np.broadcast_to(TRUE.astype(float), (5_000, 3))) - TRUE
    assert stats.kstest(draws.ravel(), m.cdf).pvalue > ALPHA_UNSEEDED


@pytest.mark.parametrize("m", DISCRETE + CONTINUOUS, ids=repr)
def test_study_variance_within_its_interval(m):
    draws = m.sample(np.zeros(4, dtype=np.int64), rng=99, size=50_000)
    var, se = variance_interval(draws)
    assert abs(var - m.variance()) <= Z * se, (var, m.variance(), se)


@pytest.mark.parametrize(
    "m", [Geometric(0.5), DiscreteGaussian(rho=0.05), Laplace(1.0), Gaussian(rho=0.5)], ids=repr
)
def test_release_variance_within_its_interval(m):
    draws = m.release(np.zeros(60_000, dtype=np.int64))
    var, se = variance_interval(draws)
    assert abs(var - m.variance()) <= Z * se, (var, m.variance(), se)


def test_chisquare_helper_rejects_a_wrong_law():
    """The goodness-of-fit check has power: geometric draws at eps=1 fail against eps=1.2."""
    draws = Geometric(1.0).sample(np.zeros(1, dtype=np.int64), rng=5, size=40_000)
    wrong = Geometric(1.2)
    assert pooled_chisquare(draws, wrong.pmf, wrong.cdf) < 1e-10


def test_variance_helper_rejects_a_wrong_variance():
    draws = DiscreteGaussian(rho=0.5).sample(np.zeros(1, dtype=np.int64), rng=5, size=50_000)
    var, se = variance_interval(draws)
    assert abs(var - 1.1) > Z * se

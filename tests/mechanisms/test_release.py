"""The release path delegates to OpenDP: integers in, integers out, costs that agree."""

import numpy as np
import pytest

from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace
from postdp.mechanisms.release import opendp_measurement

MECHANISMS = [
    Laplace(0.7),
    Laplace(2.0, sensitivity=3.0),
    Geometric(0.7),
    Geometric(1.0, sensitivity=2),
    Gaussian(rho=0.3),
    DiscreteGaussian(rho=0.3, sensitivity=2),
]


@pytest.mark.parametrize("m", MECHANISMS, ids=repr)
def test_opendp_privacy_map_agrees_with_the_reported_cost(m):
    measurement, d_in, nominal = opendp_measurement(m)
    cost = m.privacy_cost()
    assert nominal == (cost.epsilon if cost.rho == 0 else cost.rho)
    assert measurement.map(d_in) == pytest.approx(nominal, rel=1e-12)


@pytest.mark.parametrize("m", MECHANISMS, ids=repr)
def test_release_shape_and_dtype(m):
    x = np.array([[3, 0, 12], [7, 1, 100]])
    out = m.release(x)
    assert out.shape == x.shape
    assert out.dtype == (np.int64 if m.discrete else np.float64)
    assert np.all(np.abs(out - x) < 60)


def test_release_is_not_constant():
    out = Geometric(0.5).release(np.zeros(200, dtype=np.int64))
    assert len(np.unique(out)) > 3


def test_release_keeps_large_integers_exact():
    out = Geometric(1.0).release([308_745_538])
    assert out.dtype == np.int64
    assert abs(int(out[0]) - 308_745_538) < 60

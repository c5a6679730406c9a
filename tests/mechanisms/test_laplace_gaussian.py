"""Exact laws of the continuous mechanisms (Laplace: seed 000 Preliminaries; Gaussian: zCDP)."""

import math

import numpy as np
import pytest

from postdp import Gaussian, Laplace


def test_laplace_density_and_cdf_closed_forms():
    m = Laplace(epsilon=0.5, sensitivity=2.0)
    b = 4.0
    assert m.scale == b
    x = np.linspace(-20, 20, 41)
    np.testing.assert_allclose(m.pdf(x, loc=1.0), np.exp(-np.abs(x - 1.0) / b) / (2 * b))
    np.testing.assert_allclose(m.logpdf(x), -np.abs(x) / b - math.log(2 * b))
    np.testing.assert_allclose(
        m.cdf(x), np.where(x < 0, 0.5 * np.exp(x / b), 1 - 0.5 * np.exp(-x / b))
    )
    assert m.variance() == 2 * b**2


def test_laplace_from_scale():
    m = Laplace.from_scale(10.0)
    assert m.epsilon == pytest.approx(0.1)
    assert m.scale == pytest.approx(10.0)
    assert Laplace.from_scale(3.0, sensitivity=3.0).epsilon == 1.0


def test_gaussian_sigma_and_laws():
    m = Gaussian(rho=0.125, sensitivity=1.0)
    assert m.sigma == 2.0
    assert m.variance() == 4.0
    x = np.array([-3.0, 0.0, 1.5])
    np.testing.assert_allclose(m.pdf(x), np.exp(-(x**2) / 8) / math.sqrt(8 * math.pi))
    assert m.cdf(0.0) == 0.5
    assert Gaussian.from_sigma(2.0).rho == pytest.approx(0.125)
    assert Gaussian(rho=0.5, sensitivity=3.0).sigma == pytest.approx(3.0)
    assert m.privacy_cost().rho == 0.125

"""The compiled loops against plain numpy references."""

from __future__ import annotations

import numpy as np

from postdp._kernels import N_SUMS, add_histogram, add_moments


def test_moments_equal_numpy_sums_and_add_up_across_calls():
    rng = np.random.default_rng(0)
    err = rng.laplace(0.0, 3.0, size=(257, 31))
    sums = np.zeros((N_SUMS, 31))
    lo, hi = np.full(31, np.inf), np.full(31, -np.inf)
    add_moments(err[:100], sums, lo, hi)  # two calls = one call on all rows
    add_moments(err[100:], sums, lo, hi)
    expected = [err.sum(0), (err**2).sum(0), (err**3).sum(0), (err**4).sum(0), abs(err).sum(0)]
    np.testing.assert_allclose(sums, np.array(expected), rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(lo, err.min(0))
    np.testing.assert_array_equal(hi, err.max(0))


def test_histogram_equals_a_numpy_reference_with_overflow_bins():
    rng = np.random.default_rng(1)
    n, bins = 17, 40
    half = rng.uniform(0.5, 5.0, n)
    err = rng.normal(0.0, 1.0, size=(500, n)) * half * 0.7
    err[3] = 2 * half  # beyond the range: the overflow bin
    err[4] = -2 * half  # below it: the underflow bin
    err[5, 0] = np.nan  # the underflow bin
    hist = np.zeros((bins + 2, n), dtype=np.int32)
    add_histogram(err, bins / (2.0 * half), bins / 2.0 + 1.0, hist)
    for j in range(n):
        e = err[:, j]
        edges = np.linspace(-half[j], half[j], bins + 1)
        inner = np.histogram(e[(e >= -half[j]) & (e < half[j])], bins=edges)[0]
        expected = [int(((e < -half[j]) | np.isnan(e)).sum()), *inner, int((e >= half[j]).sum())]
        np.testing.assert_array_equal(hist[:, j], expected)

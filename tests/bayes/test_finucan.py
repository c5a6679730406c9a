"""Finucan's multinomial mode against brute-force enumeration (seed 003 §2.2)."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from postdp import finucan_mode
from postdp.errors import ValidationError


def _best(m, p):
    p = np.asarray(p, dtype=float) / np.sum(p)
    return max(
        stats.multinomial.pmf(c, m, p)
        for c in itertools.product(range(m + 1), repeat=len(p))
        if sum(c) == m
    )


@given(
    st.integers(min_value=0, max_value=9),
    st.lists(
        st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 1.5, 2.0, 3.3]), min_size=1, max_size=4
    ),
)
def test_mode_maximises_the_pmf(m, weights):
    if sum(weights) == 0:
        weights[0] = 1.0
    k = finucan_mode(m, weights)
    assert k.sum() == m and (k >= 0).all()
    assert all(k[i] == 0 for i, w in enumerate(weights) if w == 0)
    p = np.asarray(weights) / sum(weights)
    assert stats.multinomial.pmf(k, m, p) == pytest.approx(_best(m, weights), rel=1e-9)


def test_ties_and_batches():
    # two modes, (1, 0) and (0, 1): one of them
    assert finucan_mode(1, [0.5, 0.5]).tolist() in ([1, 0], [0, 1])
    # a batch: shapes broadcast, each row solved independently
    m = np.array([[5, 0], [3, 7]])
    p = np.array([0.2, 0.3, 0.5])
    out = finucan_mode(m, p)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.sum(axis=-1), m)
    np.testing.assert_array_equal(out[1, 1], finucan_mode(7, p))
    # the seed's example: (n1, n2, n) = (1, 9, 11) releases (1, 10)
    assert finucan_mode(11, [1, 9]).tolist() == [1, 10]
    # weights need not be normalised; a row of zeros is uniform
    assert finucan_mode(4, [0, 0]).tolist() == [2, 2]
    # m * p integer: the mode is m * p
    assert finucan_mode(100, [0.13, 0.57, 0.3]).tolist() == [13, 57, 30]


def test_validation():
    with pytest.raises(ValidationError, match="`p` must be nonnegative"):
        finucan_mode(3, [0.5, -0.1])
    with pytest.raises(ValidationError, match="`m` must be nonnegative"):
        finucan_mode(-1, [1.0])
    with pytest.raises(ValidationError, match="`m` must hold integers"):
        finucan_mode(2.5, [1.0])

"""Empirical privacy check of the double geometric mechanism on neighbouring counts.

For true counts x and x + 1 the output laws differ by a factor of exactly e^ε at every output
(seed 003 §2.1: P[k] ∝ a^|k - x|, a = e^{-ε}), so the empirical log ratio of the output
frequencies, over the outputs with enough mass to estimate it, must stay within ε plus its
statistical margin z·SE, with SE = sqrt(1/c_x + 1/c_{x+1}) (delta method, Poisson counts).
"""

import numpy as np
import pytest

from postdp import Geometric
from tests.statistical._helpers import Z

pytestmark = pytest.mark.statistical

MIN_COUNT = 2_000  # outputs seen at least this often under both inputs


def _log_ratios(draws_x, draws_y):
    lo = min(draws_x.min(), draws_y.min())
    size = max(draws_x.max(), draws_y.max()) - lo + 1
    cx = np.bincount(draws_x - lo, minlength=size)
    cy = np.bincount(draws_y - lo, minlength=size)
    dense = (cx >= MIN_COUNT) & (cy >= MIN_COUNT)
    ratio = np.log(cx[dense] / draws_x.size) - np.log(cy[dense] / draws_y.size)
    se = np.sqrt(1 / cx[dense] + 1 / cy[dense])
    return ratio, se


@pytest.mark.parametrize("epsilon", [0.25, 1.0])
def test_study_path_log_ratio_within_epsilon(epsilon):
    m = Geometric(epsilon=epsilon)
    x = 40
    draws_x = m.sample([x], rng=1, size=1_000_000).ravel()
    draws_y = m.sample([x + 1], rng=2, size=1_000_000).ravel()
    ratio, se = _log_ratios(draws_x, draws_y)
    assert ratio.size >= 10
    # privacy: never more than epsilon apart (one-sided bound, z standard errors of slack)
    assert np.all(np.abs(ratio) <= epsilon + Z * se)
    # and the mechanism spends what it claims: every ratio is +-epsilon within its margin
    assert np.all(np.abs(np.abs(ratio) - epsilon) <= Z * se)


def test_release_path_log_ratio_within_epsilon():
    epsilon = 0.5
    m = Geometric(epsilon=epsilon)
    draws_x = m.release(np.full(200_000, 12))
    draws_y = m.release(np.full(200_000, 13))
    ratio, se = _log_ratios(draws_x, draws_y)
    assert ratio.size >= 5
    # z = 5.5 keeps the unseeded test's false-alarm rate below one in a million
    assert np.all(np.abs(ratio) <= epsilon + 5.5 * se)


def test_check_catches_a_mechanism_spending_more_than_claimed():
    """Draws at epsilon = 1.5 violate a claimed epsilon of 1: the check has power."""
    loud = Geometric(epsilon=1.5)
    ratio, se = _log_ratios(
        loud.sample([40], rng=1, size=1_000_000).ravel(),
        loud.sample([41], rng=2, size=1_000_000).ravel(),
    )
    assert np.any(np.abs(ratio) > 1.0 + Z * se)

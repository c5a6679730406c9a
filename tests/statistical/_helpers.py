"""Goodness-of-fit helpers for the statistical tests."""

from __future__ import annotations

import numpy as np
from scipy import stats

# A fixed seed with this false-alarm level fails only when the sampler is wrong; the release
# path cannot be seeded (its CSPRNG is seeded by the OS), so its tests use ALPHA_UNSEEDED,
# a false-alarm probability of one in a million per test.
ALPHA_SEEDED = 1e-4
ALPHA_UNSEEDED = 1e-6
Z = 4.5  # width of the confidence intervals, in standard errors


def pooled_chisquare(draws, pmf, cdf, *, min_expected=5.0):
    """Chi-square goodness of fit of integer ``draws``, pooling sparse values into two tails.

    Values whose expected count is at least ``min_expected`` get their own bin; everything
    below the smallest such value and above the largest one is pooled into a tail bin.
    Returns the p-value.
    """
    draws = np.asarray(draws).ravel()
    n = draws.size
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    grid = np.arange(lo, hi + 1)
    expected = n * pmf(grid)
    dense = grid[expected >= min_expected]
    left, right = int(dense.min()), int(dense.max())
    values = np.arange(left, right + 1)
    observed = np.concatenate(
        (
            [np.sum(draws < left)],
            np.bincount(draws[(draws >= left) & (draws <= right)] - left, minlength=values.size),
            [np.sum(draws > right)],
        )
    )
    exp = n * np.concatenate(([cdf(left - 1)], pmf(values), [1.0 - cdf(right)]))
    keep = exp > 0
    observed, exp = observed[keep], exp[keep]
    exp = exp * observed.sum() / exp.sum()  # remove the rounding left in the pmf sums
    return stats.chisquare(observed, exp).pvalue


def variance_interval(draws):
    """Sample variance and its standard error (from the sample's fourth moment)."""
    draws = np.asarray(draws, dtype=np.float64).ravel()
    centred = draws - draws.mean()
    var = centred.var(ddof=1)
    m4 = np.mean(centred**4)
    return var, np.sqrt(max(m4 - var**2, 0.0) / draws.size)

"""The law of a sum of independent double geometric noises (private).

Used by the summed-noisy-total approximation of [wang2021] §3.1.2: η = Σ_s δ_s with
δ_s ~ DG(a_s). The pmf is computed exactly by convolving the pmfs, each truncated where its
remaining mass is below 1e-30 (far below double precision of the result); the seed's own
Monte Carlo estimate (frequencies of 10,000 simulated sums) is available for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp._typing import FloatArray, IntArray, RNGLike
from postdp.mechanisms import Geometric

__all__ = ["SumLaw", "sum_law", "sum_law_monte_carlo"]

_TAIL = 1e-30


@dataclass(frozen=True, slots=True)
class SumLaw:
    """A pmf on the integers lo, lo + 1, ..., lo + len(pmf) - 1.

    Examples
    --------
    >>> law = SumLaw(-1, np.array([0.25, 0.5, 0.25]))
    >>> law.logpmf(np.array([0, 5])).round(4).tolist()
    [-0.6931, -inf]
    """

    lo: int
    pmf: FloatArray

    def logpmf(self, k: IntArray) -> FloatArray:
        """log P(η = k) (-inf outside the support)."""
        idx = np.asarray(k, dtype=np.int64) - self.lo
        inside = (idx >= 0) & (idx < self.pmf.size)
        values = self.pmf[np.clip(idx, 0, self.pmf.size - 1)]
        with np.errstate(divide="ignore"):
            out: FloatArray = np.where(inside & (values > 0), np.log(values), -np.inf)
        return out

    @property
    def variance(self) -> float:
        """Variance of the law."""
        k = self.lo + np.arange(self.pmf.size)
        mean = float((k * self.pmf).sum())
        return float(((k - mean) ** 2 * self.pmf).sum())

    def to_frame(self) -> pd.DataFrame:
        """The pmf as a table: value, probability.

        Examples
        --------
        >>> SumLaw(-1, np.array([0.25, 0.5, 0.25])).to_frame().value.tolist()
        [-1, 0, 1]
        """
        return pd.DataFrame({"value": self.lo + np.arange(self.pmf.size), "probability": self.pmf})


def sum_law(mechanisms: Sequence[Geometric]) -> SumLaw:
    """Exact law of the sum of independent double geometric noises, by convolution.

    Parameters
    ----------
    mechanisms : sequence of Geometric
        The mechanism of each summand.

    Returns
    -------
    SumLaw

    Examples
    --------
    >>> from postdp import Geometric
    >>> law = sum_law([Geometric(1.0)] * 50)
    >>> round(law.variance, 1)  # 50 x 2a/(1-a)^2 with a = e^-1: Var(n*) of [wang2021] Scenario 1
    92.1
    """
    total = np.array([1.0])
    lo = 0
    for m in mechanisms:
        reach = max(1, math.ceil(math.log(_TAIL) / math.log(m.a))) if m.a > 0 else 0
        k = np.arange(-reach, reach + 1)
        total = np.convolve(total, m.pmf(k))
        lo -= reach
    keep = np.flatnonzero(total > _TAIL * total.max())
    first, last = int(keep[0]), int(keep[-1])
    trimmed = total[first : last + 1]
    return SumLaw(lo + first, trimmed / trimmed.sum())


def sum_law_monte_carlo(
    mechanisms: Sequence[Geometric], *, n_draws: int = 10_000, rng: RNGLike = None
) -> SumLaw:
    """The seed's estimate: frequencies of ``n_draws`` simulated sums ([wang2021] §3.1.2).

    Parameters
    ----------
    mechanisms : sequence of Geometric
    n_draws : int, default 10000
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    SumLaw
        Zero probability outside the simulated range.

    Examples
    --------
    >>> from postdp import Geometric
    >>> law = sum_law_monte_carlo([Geometric(1.0)] * 50, rng=0)
    >>> abs(law.variance - 92.1) < 5
    True
    """
    from postdp import _rng

    gens = _rng.spawn(rng, len(mechanisms))
    sums = np.zeros(n_draws, dtype=np.int64)
    for m, gen in zip(mechanisms, gens, strict=True):
        sums += m.sample(np.zeros(n_draws, dtype=np.int64), rng=gen)
    lo = int(sums.min())
    counts = np.bincount(sums - lo)
    return SumLaw(lo, counts / counts.sum())

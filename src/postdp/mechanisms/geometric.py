"""The double geometric (discrete Laplace) mechanism: integer noise, pure ε-DP."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray, IntArray
from postdp.mechanisms._base import NoiseMechanism, as_float_array, check_epsilon, check_sensitivity
from postdp.mechanisms.budget import Budget

__all__ = ["DoubleGeometric", "Geometric"]


def _stats() -> Any:
    """scipy.stats, imported on first use (it takes most of the start-up time)."""
    from scipy import stats

    return stats


@dataclass(frozen=True, slots=True)
class Geometric(NoiseMechanism):
    """Add double geometric (discrete Laplace) noise to integer counts.

    Parameters
    ----------
    epsilon : float
        Privacy parameter ε > 0 of one application (pure ε-DP).
    sensitivity : int, default 1
        ℓ1 sensitivity Δ of the integer query.

    Notes
    -----
    P[noise = k] = (1 - a)/(1 + a) · a^|k| for integer k, with a = exp(-ε/Δ); the variance
    is 2a/(1 - a)² ([wang2021] §2.1; [fioretto2021] §2).
    The study path draws the noise as the difference of two geometric variables
    ⌊E₁/λ⌋ - ⌊E₂/λ⌋ with E exponential and λ = ε/Δ.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Geometric
    >>> m = Geometric(epsilon=1.0)
    >>> round(m.a, 6), round(float(m.pmf(0)), 6)
    (0.367879, 0.462117)
    >>> m.sample([10, 20], rng=np.random.default_rng(0), size=3).dtype
    dtype('int64')
    """

    epsilon: float
    sensitivity: float = field(default=1, kw_only=True)

    discrete: ClassVar[bool] = True
    name: ClassVar[str] = "geometric"
    family: ClassVar[str] = "laplace"

    def __post_init__(self) -> None:
        sensitivity = check_sensitivity(self.sensitivity, discrete=True)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, sensitivity))

    @property
    def a(self) -> float:
        """The ratio a = exp(-ε/Δ) between the masses of neighbouring noise values."""
        return math.exp(-self.epsilon / self.sensitivity)

    @property
    def scale(self) -> float:
        """Scale Δ/ε (OpenDP's parameterisation: P[k] ∝ exp(-|k|/scale))."""
        return self.sensitivity / self.epsilon

    def _dist(self, loc: ArrayLike) -> Any:
        return _stats().dlaplace(
            self.epsilon / self.sensitivity, loc=_validation.integer_array("loc", loc)
        )

    def pmf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """P(output = k) when the true value is ``loc`` (zero at non-integers).

        Parameters
        ----------
        k : array_like
        loc : array_like of int, default 0

        Returns
        -------
        ndarray of float

        Examples
        --------
        >>> m = Geometric(epsilon=1.0)
        >>> bool(np.isclose(m.pmf(3), (1 - m.a) / (1 + m.a) * m.a**3))
        True
        """
        return np.asarray(self._dist(loc).pmf(as_float_array(k)), dtype=np.float64)

    def logpmf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Log of :meth:`pmf`.

        Examples
        --------
        >>> float(Geometric(epsilon=1.0).logpmf(2) - Geometric(epsilon=1.0).logpmf(1))
        -1.0
        """
        return np.asarray(self._dist(loc).logpmf(as_float_array(k)), dtype=np.float64)

    def cdf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """P(output ≤ k) when the true value is ``loc``.

        Examples
        --------
        >>> m = Geometric(epsilon=1.0)
        >>> bool(np.isclose(m.cdf(-1), m.a / (1 + m.a)))
        True
        """
        return np.asarray(self._dist(loc).cdf(as_float_array(k)), dtype=np.float64)

    def variance(self) -> float:
        """Noise variance 2a/(1 - a)²."""
        rate = self.epsilon / self.sensitivity
        return 2.0 * math.exp(-rate) / math.expm1(-rate) ** 2  # 1 - a without cancellation

    @property
    def noise_scale(self) -> float:
        """Same as :attr:`scale`."""
        return self.scale

    def privacy_cost(self) -> Budget:
        """Pure ε-DP at the mechanism's sensitivity."""
        return Budget.pure(self.epsilon)

    def _noise(self, gen: np.random.Generator, shape: tuple[int, ...]) -> IntArray:
        rate = self.epsilon / self.sensitivity
        first = np.floor(gen.standard_exponential(shape) / rate)
        second = np.floor(gen.standard_exponential(shape) / rate)
        return (first - second).astype(np.int64)


#: An alias of :class:`Geometric` (the name used in [wang2021] and much of the literature);
#: ``postdp.DoubleGeometric`` still works but is not part of the listed API.
DoubleGeometric = Geometric

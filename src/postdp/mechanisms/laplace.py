"""The Laplace mechanism (continuous noise, pure ε-DP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.mechanisms._base import NoiseMechanism, as_float_array, check_epsilon, check_sensitivity
from postdp.mechanisms.budget import Budget

__all__ = ["Laplace"]


def _stats() -> Any:
    """scipy.stats, imported on first use (it takes most of the start-up time)."""
    from scipy import stats

    return stats


@dataclass(frozen=True, slots=True)
class Laplace(NoiseMechanism):
    """Add Laplace noise of scale b = sensitivity / epsilon to each value.

    Parameters
    ----------
    epsilon : float
        Privacy parameter ε > 0 of one application (pure ε-DP).
    sensitivity : float, default 1
        ℓ1 sensitivity Δ of the query.

    Notes
    -----
    The noise density is exp(-|z|/b) / (2b) with b = Δ/ε, its variance 2b²
    ([zhu2021], Preliminaries; [mcglinchey2020] §2).

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Laplace
    >>> m = Laplace(epsilon=0.5)
    >>> m.scale, m.variance()
    (2.0, 8.0)
    >>> m.sample([10.0, 20.0], rng=np.random.default_rng(1), size=2).shape
    (2, 2)
    >>> m.privacy_cost()
    Budget(epsilon=0.5, rho=0.0)
    """

    epsilon: float
    sensitivity: float = field(default=1.0, kw_only=True)

    discrete: ClassVar[bool] = False
    name: ClassVar[str] = "laplace"
    family: ClassVar[str] = "laplace"

    def __post_init__(self) -> None:
        sensitivity = check_sensitivity(self.sensitivity, discrete=False)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, sensitivity))

    @classmethod
    def from_scale(cls, scale: float, *, sensitivity: float = 1.0) -> Laplace:
        """The Laplace mechanism whose noise has scale ``scale`` (ε = sensitivity / scale).

        Parameters
        ----------
        scale : float
            Noise scale b > 0 (λ in [zhu2021]).
        sensitivity : float, default 1

        Returns
        -------
        Laplace

        Examples
        --------
        >>> Laplace.from_scale(10.0).epsilon
        0.1
        """
        scale = _validation.positive_real("scale", scale)
        sensitivity = check_sensitivity(sensitivity, discrete=False)
        return cls(epsilon=sensitivity / scale, sensitivity=sensitivity)

    @property
    def scale(self) -> float:
        """Noise scale b = sensitivity / epsilon."""
        return self.sensitivity / self.epsilon

    def _dist(self, loc: ArrayLike) -> Any:
        return _stats().laplace(loc=as_float_array(loc), scale=self.scale)

    def pdf(self, x: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Density of the output at ``x`` when the true value is ``loc`` (noise density at 0).

        Parameters
        ----------
        x : array_like
        loc : array_like, default 0

        Returns
        -------
        ndarray of float

        Examples
        --------
        >>> float(Laplace(epsilon=1.0).pdf(0.0))
        0.5
        """
        return np.asarray(self._dist(loc).pdf(as_float_array(x)), dtype=np.float64)

    def logpdf(self, x: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Log of :meth:`pdf`.

        Examples
        --------
        >>> float(Laplace(epsilon=1.0).logpdf(1.0))
        -1.693...
        """
        return np.asarray(self._dist(loc).logpdf(as_float_array(x)), dtype=np.float64)

    def cdf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """P(output ≤ k) when the true value is ``loc``.

        Examples
        --------
        >>> float(Laplace(epsilon=1.0).cdf(0.0))
        0.5
        """
        return np.asarray(self._dist(loc).cdf(as_float_array(k)), dtype=np.float64)

    def variance(self) -> float:
        """Noise variance 2b²."""
        return 2.0 * self.scale**2

    @property
    def noise_scale(self) -> float:
        """Same as :attr:`scale`."""
        return self.scale

    def privacy_cost(self) -> Budget:
        """Pure ε-DP at the mechanism's sensitivity."""
        return Budget.pure(self.epsilon)

    def _noise(self, gen: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
        return gen.laplace(0.0, self.scale, size=shape)

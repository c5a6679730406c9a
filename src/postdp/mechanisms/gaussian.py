"""The Gaussian mechanism (continuous noise, ρ-zCDP)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.mechanisms._base import NoiseMechanism, as_float_array, check_rho, check_sensitivity
from postdp.mechanisms.budget import Budget

__all__ = ["Gaussian"]


def _stats() -> Any:
    """scipy.stats, imported on first use (it takes most of the start-up time)."""
    from scipy import stats

    return stats


@dataclass(frozen=True, slots=True)
class Gaussian(NoiseMechanism):
    """Add Gaussian noise N(0, σ²), σ = sensitivity / sqrt(2ρ), to each value.

    Parameters
    ----------
    rho : float
        zCDP parameter ρ > 0 of one application.
    sensitivity : float, default 1
        ℓ2 sensitivity Δ of the query.

    Notes
    -----
    The Gaussian mechanism with σ² = Δ²/(2ρ) satisfies ρ-zCDP (Bun and Steinke 2016,
    Prop. 1.6); the census TopDown algorithm uses its discrete counterpart.

    Examples
    --------
    >>> from postdp import Gaussian
    >>> m = Gaussian(rho=0.125)
    >>> m.sigma, m.variance()
    (2.0, 4.0)
    >>> m.privacy_cost()
    Budget(epsilon=0.0, rho=0.125)
    """

    rho: float = field(kw_only=True)
    sensitivity: float = field(default=1.0, kw_only=True)

    discrete: ClassVar[bool] = False
    name: ClassVar[str] = "gaussian"
    family: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        sensitivity = check_sensitivity(self.sensitivity, discrete=False)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "rho", check_rho(self.rho, sensitivity))

    @classmethod
    def from_sigma(cls, sigma: float, *, sensitivity: float = 1.0) -> Gaussian:
        """The Gaussian mechanism with noise standard deviation ``sigma`` (ρ = Δ²/(2σ²)).

        Parameters
        ----------
        sigma : float
            Standard deviation σ > 0.
        sensitivity : float, default 1

        Returns
        -------
        Gaussian

        Examples
        --------
        >>> Gaussian.from_sigma(2.0).rho
        0.125
        """
        sigma = _validation.positive_real("sigma", sigma)
        sensitivity = check_sensitivity(sensitivity, discrete=False)
        return cls(rho=sensitivity**2 / (2.0 * sigma**2), sensitivity=sensitivity)

    @property
    def sigma(self) -> float:
        """Noise standard deviation σ = Δ / sqrt(2ρ)."""
        return self.sensitivity / math.sqrt(2.0 * self.rho)

    def _dist(self, loc: ArrayLike) -> Any:
        return _stats().norm(loc=as_float_array(loc), scale=self.sigma)

    def pdf(self, x: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Density of the output at ``x`` when the true value is ``loc``.

        Examples
        --------
        >>> round(float(Gaussian(rho=0.5).pdf(0.0)), 6)
        0.398942
        """
        return np.asarray(self._dist(loc).pdf(as_float_array(x)), dtype=np.float64)

    def logpdf(self, x: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Log of :meth:`pdf`.

        Examples
        --------
        >>> round(float(Gaussian(rho=0.5).logpdf(1.0)), 6)
        -1.418939
        """
        return np.asarray(self._dist(loc).logpdf(as_float_array(x)), dtype=np.float64)

    def cdf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """P(output ≤ k) when the true value is ``loc``.

        Examples
        --------
        >>> float(Gaussian(rho=0.5).cdf(0.0))
        0.5
        """
        return np.asarray(self._dist(loc).cdf(as_float_array(k)), dtype=np.float64)

    def variance(self) -> float:
        """Noise variance σ²."""
        return self.sigma**2

    @property
    def noise_scale(self) -> float:
        """Same as :attr:`sigma`."""
        return self.sigma

    def privacy_cost(self) -> Budget:
        """ρ-zCDP at the mechanism's sensitivity."""
        return Budget.zcdp(self.rho)

    def _noise(self, gen: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
        return gen.normal(0.0, self.sigma, size=shape)

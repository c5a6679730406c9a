"""The multiplicative log-Laplace mechanism for nonnegative counts ([mcglinchey2020] §5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, RNGLike, SizeLike
from postdp.errors import UnboundedMomentError, ValidationError
from postdp.mechanisms.budget import Budget

__all__ = ["LogLaplace"]


@dataclass(frozen=True, slots=True)
class LogLaplace:
    """The multiplicative mechanism q·e^{L}, L ~ Laplace(K/ε), for strictly positive queries.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    ratio_bound : float
        K > 0, the bound |Q(d) - Q(d')| / min(Q(d), Q(d')) <= K of seed
        [mcglinchey2020] eq. (10), which makes the mechanism ε-DP.

    Raises
    ------
    UnboundedMomentError
        If K >= ε: the output then has infinite mean (Prop. 3), so no bias exists.

    Notes
    -----
    With b = K/ε < 1, E[e^L] = 1/(1 - b²), so the mean is q/(1 - b²) and the bias
    q b²/(1 - b²); the variance q²(1/(1 - 4b²) - 1/(1 - b²)²) is finite only for K < ε/2.

    Examples
    --------
    >>> m = LogLaplace(epsilon=1.0, ratio_bound=0.25)
    >>> round(float(m.bias(100.0)), 9)
    6.666666667
    >>> LogLaplace(epsilon=1.0, ratio_bound=1.0)
    Traceback (most recent call last):
    ...
    postdp.errors.UnboundedMomentError: the log-Laplace mechanism has infinite mean ...
    """

    epsilon: float
    ratio_bound: float

    def __post_init__(self) -> None:
        eps = _validation.positive_real("epsilon", self.epsilon)
        k = _validation.positive_real("ratio_bound", self.ratio_bound)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "ratio_bound", k)
        if k >= eps:
            raise UnboundedMomentError(
                "the log-Laplace mechanism has infinite mean when `ratio_bound` >= `epsilon` "
                f"([mcglinchey2020] Prop. 3); got ratio_bound={k!r}, epsilon={eps!r}"
            )

    @property
    def scale(self) -> float:
        """b = K/ε, the scale of the Laplace exponent."""
        return self.ratio_bound / self.epsilon

    def privacy_cost(self) -> Budget:
        """ε-DP for queries satisfying the ratio bound K.

        Returns
        -------
        Budget

        Examples
        --------
        >>> LogLaplace(1.0, 0.5).privacy_cost()
        Budget(epsilon=1.0, rho=0.0)
        """
        return Budget.pure(self.epsilon)

    def _positive(self, x: ArrayLike) -> FloatArray:
        values = _validation.float_array("x", x)
        bad = values <= 0
        if bad.any():
            raise ValidationError(
                "`x` must be strictly positive for the log-Laplace mechanism; got "
                f"{values[bad].flat[0].item()!r}"
            )
        return values

    def sample(self, x: ArrayLike, *, rng: RNGLike = None, size: SizeLike = None) -> FloatArray:
        """Draws of x·e^{L} (study path).

        Parameters
        ----------
        x : array_like
            Strictly positive true values.
        rng : int, numpy.random.Generator, SeedSequence or None
        size : int or tuple of int, optional

        Returns
        -------
        ndarray of float, shape ``size + x.shape``

        Examples
        --------
        >>> LogLaplace(1.0, 0.1).sample([5.0], rng=0, size=2).shape
        (2, 1)
        """
        values = self._positive(x)
        shape = (*_validation.size_tuple(size), *values.shape)
        gen = _rng.as_generator(rng)
        out: FloatArray = values * np.exp(gen.laplace(0.0, self.scale, size=shape))
        return out

    def mean(self, x: ArrayLike) -> FloatArray:
        """E[x e^L] = x/(1 - b²).

        Examples
        --------
        >>> float(LogLaplace(1.0, 0.5).mean(3.0))
        4.0
        """
        out: FloatArray = self._positive(x) / (1.0 - self.scale**2)
        return out

    def bias(self, x: ArrayLike) -> FloatArray:
        """E[x e^L] - x = x b²/(1 - b²).

        Examples
        --------
        >>> float(LogLaplace(1.0, 0.5).bias(3.0))
        1.0
        """
        out: FloatArray = self.mean(x) - self._positive(x)
        return out

    def variance(self, x: ArrayLike) -> FloatArray:
        """x²(1/(1 - 4b²) - 1/(1 - b²)²); infinite (an error) when K >= ε/2.

        Examples
        --------
        >>> round(float(LogLaplace(1.0, 0.25).variance(1.0)), 6)
        0.195556
        """
        b = self.scale
        if 2.0 * b >= 1.0:
            raise UnboundedMomentError(
                "the log-Laplace mechanism has infinite variance when `ratio_bound` >= "
                f"`epsilon`/2 ([mcglinchey2020] Prop. 3); got ratio_bound={self.ratio_bound!r}, "
                f"epsilon={self.epsilon!r}"
            )
        values = self._positive(x)
        out: FloatArray = values**2 * (1.0 / (1.0 - 4.0 * b * b) - 1.0 / (1.0 - b * b) ** 2)
        return out

"""The modified post-processing with temperature T and its exact bias ([fioretto2021] §7.3)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.mechanisms import Laplace, NoiseMechanism
from postdp.mechanisms.partial_moments import noise_law

__all__ = ["modified_bias", "modified_postprocess"]


def modified_postprocess(x: ArrayLike, *, temperature: float, lower: float = 0.0) -> FloatArray:
    """The modified post-processing of [fioretto2021] §7.3.

    x̄ = max(ℓ, x), x̄_T = x̄ - T/(x̄ + 1 - ℓ), x̂ = max(x̄_T, ℓ): a correction that pulls
    values near the boundary down more than values far from it.

    Parameters
    ----------
    x : array_like
    temperature : float
        T >= 0 (T = 0 is the plain ramp).
    lower : float, default 0
        ℓ.

    Returns
    -------
    ndarray of float

    Examples
    --------
    >>> modified_postprocess([-2.0, 1.0, 9.0], temperature=1.0).tolist()
    [0.0, 0.5, 8.9]
    """
    t = _validation.nonnegative_real("temperature", temperature)
    lo = _validation.finite_real("lower", lower)
    bar = np.maximum(_validation.float_array("x", x), lo)
    out: FloatArray = np.maximum(bar - t / (bar + 1.0 - lo), lo)
    return out


def modified_bias(
    q: ArrayLike, mechanism: NoiseMechanism, *, temperature: float, lower: float = 0.0
) -> FloatArray:
    """Bias E[x̂_T] - q of the modified post-processing, by numerical integration.

    Parameters
    ----------
    q : array_like
    mechanism : Laplace or Geometric
    temperature : float
        T >= 0.
    lower : float, default 0

    Returns
    -------
    ndarray of float
        Laplace: adaptive quadrature (scipy.integrate.quad, absolute error ~1e-10) with
        breakpoints at q and where x̄_T crosses ℓ; geometric: exact summation over the
        noise's support until the remaining mass is below 1e-17.

    Examples
    --------
    >>> from postdp import Laplace
    >>> from postdp.postprocess import clamp_bias
    >>> m = Laplace.from_scale(1.0)
    >>> bool(np.isclose(modified_bias(3.0, m, temperature=0.0), clamp_bias(3.0, m)))
    True
    """
    law = noise_law(mechanism)
    t = _validation.nonnegative_real("temperature", temperature)
    lo = _validation.finite_real("lower", lower)
    qs = _validation.float_array("q", q)
    out = np.empty(qs.shape)
    if isinstance(law, Laplace):
        from scipy import integrate

        b = law.scale
        cross = lo + (math.sqrt(1.0 + 4.0 * t) - 1.0) / 2.0  # x̄ - T/(x̄+1-ℓ) = ℓ here
        for i, qi in np.ndenumerate(qs):
            below = float(law.cdf(lo, loc=qi))  # mass sent to ℓ by the first ramp

            def integrand(y: float, qi: float = float(qi)) -> float:
                return float(max(y - t / (y + 1.0 - lo), lo)) * math.exp(-abs(y - qi) / b) / (2 * b)

            points = sorted({lo, cross, max(float(qi), lo)})
            pieces = [*points, points[-1] + 60.0 * b]
            total = lo * below
            for a0, a1 in itertools.pairwise(pieces):
                if a1 > a0:
                    total += integrate.quad(integrand, a0, a1, epsabs=1e-12, limit=200)[0]
            total += integrate.quad(integrand, pieces[-1], np.inf, epsabs=1e-12)[0]
            out[i] = total - qi
        return out
    a = law.a
    reach = math.ceil(math.log(1e-17) / math.log(a)) + 1
    k = np.arange(-reach, reach + 1)
    weights = law.pmf(k)
    for i, qi in np.ndenumerate(qs):
        out[i] = float((modified_postprocess(qi + k, temperature=t, lower=lo) * weights).sum()) - qi
    return out

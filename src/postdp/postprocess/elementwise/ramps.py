"""Ramps: clamping, translated ramps and the optimal shift, with exact biases ([mcglinchey2020] §3,
[fioretto2021] §6.3 Thm 9); and how restriction compares with the ramp ([mcglinchey2020] eq. (9)).

Every function acts on arrays of any shape (draws on leading axes). The bias functions take
the noise mechanism (``Laplace`` or ``Geometric``) and the true value q, and return
E[post-processed output] - q exactly, written through f(c) = E[(c + N)^+], c <= 0
(:mod:`postdp.mechanisms.partial_moments`), which avoids cancellation.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray, NumArray
from postdp.mechanisms import Laplace, NoiseMechanism
from postdp.mechanisms.partial_moments import noise_law, positive_part_excess, tail_mean

__all__ = [
    "clamp",
    "clamp_bias",
    "optimal_ramp_shift",
    "restriction_ramp_ratio",
    "translated_ramp",
    "translated_ramp_bias",
]


def clamp(x: ArrayLike, *, lower: float = 0.0) -> NumArray:
    """The ramp (boundary-inflated truncation) max(lower, x), element-wise.

    Parameters
    ----------
    x : array_like
    lower : float, default 0

    Returns
    -------
    ndarray, same shape (integers stay integers when ``lower`` is a whole number)

    Examples
    --------
    >>> clamp([-3, 2, 5]).tolist()
    [0, 2, 5]
    >>> clamp([-3.5, 2.0], lower=1.0).tolist()
    [1.0, 2.0]
    """
    values = _validation.real_array("x", x)
    lo = _validation.finite_real("lower", lower)
    if values.dtype == np.int64 and lo == round(lo):
        return np.maximum(values, int(lo))
    return np.maximum(values.astype(np.float64), lo)


def clamp_bias(q: ArrayLike, mechanism: NoiseMechanism, *, lower: float = 0.0) -> FloatArray:
    """Exact bias E[max(lower, q + N)] - q of the ramp under the mechanism's noise.

    Parameters
    ----------
    q : array_like
        True values.
    mechanism : Laplace or Geometric
    lower : float, default 0

    Returns
    -------
    ndarray of float

    Notes
    -----
    For Laplace(b) and q >= lower: (b/2) exp((lower - q)/b) ([fioretto2021]
    Thm 9; with lower = 0 [mcglinchey2020] eq. (5)); its maximum over
    q >= lower is b/2, at q = lower. For the double geometric and integer q >= lower:
    a^(q - lower + 1)/(1 - a^2).

    Examples
    --------
    >>> from postdp import Laplace, Geometric
    >>> float(clamp_bias(0.0, Laplace.from_scale(2.0)))
    1.0
    >>> m = Geometric(epsilon=1.0)
    >>> bool(np.isclose(clamp_bias(0, m), m.a / (1 - m.a**2)))
    True
    """
    law = noise_law(mechanism)
    qs = _validation.float_array("q", q)
    lo = _validation.finite_real("lower", lower)
    out: FloatArray = positive_part_excess(qs - lo, law)
    return out


# ---------------------------------------------------------------------------- translated ramp
def translated_ramp(x: ArrayLike, alpha: float) -> FloatArray:
    """The translated ramp τ_α(x) = max(x - α, 0) ([mcglinchey2020] §4).

    Parameters
    ----------
    x : array_like
    alpha : float
        Shift α >= 0.

    Returns
    -------
    ndarray of float

    Examples
    --------
    >>> translated_ramp([-1.0, 0.2, 3.0], 0.5).tolist()
    [0.0, 0.0, 2.5]
    """
    shift = _validation.nonnegative_real("alpha", alpha)
    out: FloatArray = np.maximum(_validation.float_array("x", x) - shift, 0.0)
    return out


def translated_ramp_bias(q: ArrayLike, mechanism: NoiseMechanism, *, alpha: float) -> FloatArray:
    """Exact bias E[τ_α(q + N)] - q of the translated ramp.

    Parameters
    ----------
    q : array_like
    mechanism : Laplace or Geometric
    alpha : float
        Shift α >= 0.

    Returns
    -------
    ndarray of float

    Notes
    -----
    For Laplace(b) ([mcglinchey2020], proof of Thm 4.1):
    β_α(q) = -α + (b/2) e^{(α - q)/b} for q >= α and (b/2) e^{(q - α)/b} - q for
    0 <= q <= α. It decreases in q from (b/2) e^{-α/b} at q = 0 to -α as q grows.

    Examples
    --------
    >>> from postdp import Laplace
    >>> m = Laplace.from_scale(1.0)
    >>> a = optimal_ramp_shift(1.0)
    >>> round(float(translated_ramp_bias(0.0, m, alpha=a)), 6), round(a, 6)
    (0.351734, 0.351734)
    """
    law = noise_law(mechanism)
    shift = _validation.nonnegative_real("alpha", alpha)
    qs = _validation.float_array("q", q)
    out: FloatArray = positive_part_excess(qs - shift, law) - shift
    return out


def optimal_ramp_shift(mechanism: NoiseMechanism | float) -> float:
    """The shift α* of the translated ramp with the least worst-case bias.

    Parameters
    ----------
    mechanism : Laplace, Geometric or float
        The noise; a bare float is read as a Laplace scale b > 0.

    Returns
    -------
    float
        α*, the root of f(-α) = α with f(c) = E[(c + N)^+]: the bias of τ_α falls from
        f(-α) at q = 0 to -α as q grows, so the worst-case absolute bias is smallest where
        the two meet, and equals α*. For Laplace(b), f(-α) = (b/2) e^{-α/b} and
        α* = b·W(1/2) ≈ 0.3517 b ([mcglinchey2020] Thm 4.1), against b/2
        for the plain ramp. For double geometric noise f is the exact geometric tail mean
        (piecewise in α), and the root is found by bracketing to machine precision; it is
        not the Laplace value at the same ε.

    Examples
    --------
    >>> from postdp import Geometric, Laplace
    >>> round(optimal_ramp_shift(1.0), 8), round(optimal_ramp_shift(Laplace(1.0)), 8)
    (0.35173371, 0.35173371)
    >>> round(optimal_ramp_shift(Geometric(epsilon=1.0)), 6)
    0.335287
    """
    if not isinstance(mechanism, NoiseMechanism):
        b = _validation.positive_real("mechanism", mechanism)
        return float(b * special.lambertw(0.5).real)
    law = noise_law(mechanism)
    if isinstance(law, Laplace):
        return float(law.scale * special.lambertw(0.5).real)
    from scipy.optimize import brentq

    def gap(alpha: float) -> float:
        return float(tail_mean(np.array(-alpha), law)) - alpha

    upper = float(tail_mean(np.array(0.0), law))  # f(-alpha) <= f(0) = E[N^+]
    return float(brentq(gap, 0.0, upper, xtol=1e-14, rtol=4 * np.finfo(float).eps))


def restriction_ramp_ratio(q: ArrayLike, mechanism: NoiseMechanism) -> FloatArray:
    """Seed 004 eq. (9): bias of restriction over bias of the ramp at equal privacy (> 2).

    Both mechanisms are ε-DP: the ramp post-processes Laplace(Δ/ε) and has bias
    B1 = (Δ/2ε) e^{-εq/Δ}; restriction doubles the cost (Prop. 2), so it must condition
    Laplace(2Δ/ε), with bias B2 = (q + 2Δ/ε)/(2 e^{εq/(2Δ)} - 1) (Cor. 1).

    Parameters
    ----------
    q : array_like
        True values q >= 0.
    mechanism : Laplace
        The ramp's mechanism, ε-DP at sensitivity Δ.

    Returns
    -------
    ndarray of float
        B2/B1 = 2 e^{εq/Δ} (εq/Δ + 2) / (2 e^{εq/(2Δ)} - 1).

    Examples
    --------
    >>> from postdp import Laplace
    >>> float(restriction_ramp_ratio(0.0, Laplace(1.0)))
    4.0
    """
    if not isinstance(mechanism, Laplace):
        raise TypeError(f"`mechanism` must be Laplace; got {type(mechanism).__name__}")
    t = mechanism.epsilon * _validation.float_array("q", q) / mechanism.sensitivity
    out: FloatArray = 2.0 * np.exp(t) * (t + 2.0) / (2.0 * np.exp(t / 2.0) - 1.0)
    return out

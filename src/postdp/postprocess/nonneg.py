"""Element-wise nonnegativity and their exact biases (seeds 004 §3-5 and 002 §6.3, §7.3).

Every function acts on arrays of any shape (draws on leading axes). The bias functions take
the noise mechanism (``Laplace`` or ``Geometric``) and the true value q, and return
E[post-processed output] - q exactly: closed forms for Laplace noise from the seeds, and their
double geometric counterparts from exact geometric-series sums.

The common ingredient is f(d) = E[(d + N)^+] for the noise N. For c <= 0,

- Laplace(b):  f(c) = (b/2) e^{c/b};
- double geometric(a): f(c) = p0 a^m [c/(1 - a) + (m(1 - a) + a)/(1 - a)^2], with
  p0 = (1 - a)/(1 + a) and m = ⌊-c⌋ + 1 the least integer k with c + k > 0;

and f(d) = d + f(-d) for d >= 0 because (d + N)^+ - (-d - N)^+ = d + N and N is symmetric.
Writing every bias through f(c), c <= 0, avoids subtracting nearly equal large numbers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import integrate, special

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, NumArray, RNGLike, SizeLike
from postdp.errors import UnboundedMomentError, ValidationError
from postdp.mechanisms import Budget, Geometric, Laplace, NoiseMechanism

__all__ = [
    "LogLaplace",
    "Restriction",
    "TemperatureSearch",
    "clamp",
    "clamp_bias",
    "modified_bias",
    "modified_postprocess",
    "optimal_ramp_shift",
    "optimal_temperature",
    "restriction_ramp_ratio",
    "translated_ramp",
    "translated_ramp_bias",
]


def _noise_law(mechanism: NoiseMechanism) -> Laplace | Geometric:
    if not isinstance(mechanism, Laplace | Geometric):
        raise TypeError(
            "closed-form biases are available for Laplace and Geometric noise; got "
            f"{type(mechanism).__name__}"
        )
    return mechanism


def _tail_mean(c: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(c) = E[(c + N)^+] for c <= 0."""
    if isinstance(mechanism, Laplace):
        b = mechanism.scale
        out: FloatArray = 0.5 * b * np.exp(c / b)
        return out
    a = mechanism.a
    p0 = (1.0 - a) / (1.0 + a)
    m = np.floor(-c) + 1.0
    am = np.exp(m * math.log(a))
    tail: FloatArray = p0 * am * (c / (1.0 - a) + (m * (1.0 - a) + a) / (1.0 - a) ** 2)
    return tail


def _positive_part_mean(d: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(d) = E[(d + N)^+] for any real d."""
    out: FloatArray = np.maximum(d, 0.0) + _tail_mean(-np.abs(d), mechanism)
    return out


def _positive_part_excess(d: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(d) - d, computed without cancellation: f(-|d|) + max(-d, 0)."""
    out: FloatArray = _tail_mean(-np.abs(d), mechanism) + np.maximum(-d, 0.0)
    return out


def _values(name: str, x: ArrayLike) -> FloatArray:
    return _validation.real_array(name, x).astype(np.float64)


def _real(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}")
    out = float(value)
    if not math.isfinite(out):
        raise ValidationError(f"`{name}` must be finite; got {value!r}")
    return out


def _nonneg_real(name: str, value: float) -> float:
    out = _real(name, value)
    if out < 0:
        raise ValidationError(f"`{name}` must be nonnegative; got {value!r}")
    return out


# ---------------------------------------------------------------------------- ramp / clamp
def clamp(x: ArrayLike, lower: float = 0.0) -> NumArray:
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
    lo = _real("lower", lower)
    if values.dtype == np.int64 and lo == round(lo):
        return np.maximum(values, int(lo))
    return np.maximum(values.astype(np.float64), lo)


def clamp_bias(q: ArrayLike, mechanism: NoiseMechanism, lower: float = 0.0) -> FloatArray:
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
    For Laplace(b) and q >= lower: (b/2) exp((lower - q)/b) (seed ``002_7dd7808a6059349a.txt``
    Thm 9; with lower = 0 seed ``004_8a4094d85034e014.txt`` eq. (5)); its maximum over
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
    law = _noise_law(mechanism)
    qs = _values("q", q)
    lo = _real("lower", lower)
    out: FloatArray = _positive_part_excess(qs - lo, law)
    return out


# ---------------------------------------------------------------------------- translated ramp
def translated_ramp(x: ArrayLike, alpha: float) -> FloatArray:
    """The translated ramp τ_α(x) = max(x - α, 0) (seed ``004_8a4094d85034e014.txt`` §4).

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
    shift = _nonneg_real("alpha", alpha)
    out: FloatArray = np.maximum(_values("x", x) - shift, 0.0)
    return out


def translated_ramp_bias(q: ArrayLike, mechanism: NoiseMechanism, alpha: float) -> FloatArray:
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
    For Laplace(b) (seed ``004_8a4094d85034e014.txt``, proof of Thm 4.1):
    β_α(q) = -α + (b/2) e^{(α - q)/b} for q >= α and (b/2) e^{(q - α)/b} - q for
    0 <= q <= α. It decreases in q from (b/2) e^{-α/b} at q = 0 to -α as q grows.

    Examples
    --------
    >>> from postdp import Laplace
    >>> m = Laplace.from_scale(1.0)
    >>> a = optimal_ramp_shift(1.0)
    >>> round(float(translated_ramp_bias(0.0, m, a)), 6), round(a, 6)
    (0.351734, 0.351734)
    """
    law = _noise_law(mechanism)
    shift = _nonneg_real("alpha", alpha)
    qs = _values("q", q)
    out: FloatArray = _positive_part_excess(qs - shift, law) - shift
    return out


def optimal_ramp_shift(scale: float) -> float:
    """The shift α* = b·W(1/2) of the translated ramp with the least worst-case bias.

    Parameters
    ----------
    scale : float
        Laplace scale b > 0.

    Returns
    -------
    float
        α*, the root of (b/2) e^{-α/b} = α; the worst-case absolute bias of τ_α* is α*
        (seed ``004_8a4094d85034e014.txt`` Thm 4.1), about 0.3517 b against b/2 for the
        plain ramp.

    Examples
    --------
    >>> round(optimal_ramp_shift(1.0), 8)
    0.35173371
    """
    b = _validation.positive_real("scale", scale)
    return float(b * special.lambertw(0.5).real)


# ---------------------------------------------------------------------------- restriction
@dataclass(frozen=True, slots=True)
class Restriction:
    """A mechanism restricted to nonnegative outputs (truncation by conditioning).

    The output is q + N conditioned on q + N >= 0 — what rejection sampling until a
    nonnegative draw gives — sampled exactly by inverting the conditional law, so it never
    loops, however small the acceptance probability.

    Parameters
    ----------
    mechanism : Laplace or Geometric
        The unrestricted mechanism (ε-DP).

    Notes
    -----
    Restriction doubles the privacy cost: the result is 2ε-DP (seed
    ``004_8a4094d85034e014.txt`` Prop. 2). Its bias for Laplace(b) is
    (q + b)/(2 e^{q/b} - 1) (Cor. 1), more than twice the ramp's at equal privacy (eq. (9)).
    There is no release path: OpenDP has no restricted sampler, so publish with a ramp.

    Examples
    --------
    >>> from postdp import Laplace
    >>> r = Restriction(Laplace.from_scale(1.0))
    >>> r.privacy_cost()
    Budget(epsilon=2.0, rho=0.0)
    >>> float(r.bias(0.0))
    1.0
    >>> bool((r.sample([0.0, 3.0], rng=0, size=1000) >= 0).all())
    True
    """

    mechanism: Laplace | Geometric

    discrete: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _noise_law(self.mechanism)

    def privacy_cost(self) -> Budget:
        """2ε: restriction doubles the cost of the underlying mechanism (Prop. 2).

        Returns
        -------
        Budget

        Examples
        --------
        >>> from postdp import Geometric
        >>> Restriction(Geometric(0.5)).privacy_cost().epsilon
        1.0
        """
        return Budget.pure(2.0 * self.mechanism.epsilon)

    def bias(self, q: ArrayLike) -> FloatArray:
        """Exact bias E[q + N | q + N >= 0] - q.

        Parameters
        ----------
        q : array_like
            True values (integers for the geometric mechanism).

        Returns
        -------
        ndarray of float

        Examples
        --------
        >>> from postdp import Laplace
        >>> b = 2.0
        >>> r = Restriction(Laplace.from_scale(b))
        >>> bool(np.isclose(r.bias(3.0), (3.0 + b) / (2 * np.exp(3.0 / b) - 1)))
        True
        """
        qs = _values("q", q)
        m = self.mechanism
        # P(q + N < 0) and E[(q + N)^+] - q P(q + N >= 0) = f(-q) + q P(q + N < 0) for q >= 0
        below = m.cdf(-qs) if isinstance(m, Laplace) else m.cdf(np.ceil(-qs) - 1)
        keep = 1.0 - below
        excess = np.where(
            qs >= 0,
            _tail_mean(-np.abs(qs), m) + qs * below,
            _positive_part_mean(qs, m) - qs * keep,
        )
        out: FloatArray = excess / keep
        return out

    def sample(self, x: ArrayLike, *, rng: RNGLike = None, size: SizeLike = None) -> NumArray:
        """Exact draws of x + N conditioned on being >= 0 (study path).

        Parameters
        ----------
        x : array_like
            True values (integers for the geometric mechanism).
        rng : int, numpy.random.Generator, SeedSequence or None
        size : int or tuple of int, optional
            Leading batch shape.

        Returns
        -------
        ndarray, shape ``size + x.shape``

        Examples
        --------
        >>> from postdp import Geometric
        >>> bool(Restriction(Geometric(1.0)).sample([0, 5], rng=0, size=3).min() >= 0)
        True
        """
        m = self.mechanism
        shape = _validation.size_tuple(size)
        gen = _rng.as_generator(rng)
        if isinstance(m, Geometric):
            q = np.broadcast_to(_validation.integer_array("x", x), (*shape, *np.shape(x)))
            return _restricted_geometric(q, m, gen)
        qf = np.broadcast_to(_values("x", x), (*shape, *np.shape(x)))
        return _restricted_laplace(qf, m.scale, gen)


def _restricted_laplace(q: FloatArray, b: float, gen: np.random.Generator) -> FloatArray:
    """q + L | q + L >= 0: Exp(b) above max(q, 0), and for q > 0 a truncated left part."""
    right = np.maximum(q, 0.0) + b * gen.standard_exponential(q.shape)
    e = np.exp(-np.maximum(q, 0.0) / b)
    p_left = (1.0 - e) / (2.0 - e)
    u = gen.random(q.shape)
    left = q + b * np.log(e + u * (1.0 - e))  # in [0, q)
    out: FloatArray = np.where(gen.random(q.shape) < p_left, np.maximum(left, 0.0), right)
    return out


def _restricted_geometric(q: NumArray, m: Geometric, gen: np.random.Generator) -> NumArray:
    """q + K | q + K >= 0 for the double geometric: geometric above, truncated below."""
    a = m.a
    rate = m.epsilon / m.sensitivity
    right = np.maximum(q, 0) + np.floor(gen.standard_exponential(q.shape) / rate).astype(np.int64)
    qpos = np.maximum(q, 0).astype(np.float64)
    aq = np.exp(qpos * math.log(a))
    p_left = a * (1.0 - aq) / (1.0 + a - a * aq)
    u = gen.random(q.shape)
    # J - 1 in {0..q-1} with P ∝ a^j: inverse cdf of the truncated geometric
    j = 1 + np.floor(np.log1p(-u * (1.0 - aq)) / math.log(a)).astype(np.int64)
    j = np.clip(j, 1, np.maximum(q, 1))
    left = q - j
    out: NumArray = np.where(gen.random(q.shape) < p_left, left, right)
    return out


def restriction_ramp_ratio(q: ArrayLike, epsilon: float, sensitivity: float = 1.0) -> FloatArray:
    """Seed 004 eq. (9): bias of restriction over bias of the ramp at equal privacy (> 2).

    Both mechanisms are ε-DP: the ramp post-processes Laplace(Δ/ε) and has bias
    B1 = (Δ/2ε) e^{-εq/Δ}; restriction doubles the cost (Prop. 2), so it must condition
    Laplace(2Δ/ε), with bias B2 = (q + 2Δ/ε)/(2 e^{εq/(2Δ)} - 1) (Cor. 1).

    Parameters
    ----------
    q : array_like
        True values q >= 0.
    epsilon : float
    sensitivity : float, default 1

    Returns
    -------
    ndarray of float
        B2/B1 = 2 e^{εq/Δ} (εq/Δ + 2) / (2 e^{εq/(2Δ)} - 1).

    Examples
    --------
    >>> float(restriction_ramp_ratio(0.0, 1.0))
    4.0
    """
    eps = _validation.positive_real("epsilon", epsilon)
    delta = _validation.positive_real("sensitivity", sensitivity)
    t = eps * _values("q", q) / delta
    out: FloatArray = 2.0 * np.exp(t) * (t + 2.0) / (2.0 * np.exp(t / 2.0) - 1.0)
    return out


# ---------------------------------------------------------------------------- log-Laplace
@dataclass(frozen=True, slots=True)
class LogLaplace:
    """The multiplicative mechanism q·e^{L}, L ~ Laplace(K/ε), for strictly positive queries.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    ratio_bound : float
        K > 0, the bound |Q(d) - Q(d')| / min(Q(d), Q(d')) <= K of seed
        ``004_8a4094d85034e014.txt`` eq. (10), which makes the mechanism ε-DP.

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
                f"(seed 004 Prop. 3); got ratio_bound={k!r}, epsilon={eps!r}"
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
        values = _values("x", x)
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
                f"`epsilon`/2 (seed 004 Prop. 3); got ratio_bound={self.ratio_bound!r}, "
                f"epsilon={self.epsilon!r}"
            )
        values = self._positive(x)
        out: FloatArray = values**2 * (1.0 / (1.0 - 4.0 * b * b) - 1.0 / (1.0 - b * b) ** 2)
        return out


# ---------------------------------------------------------------------------- modified (T)
def modified_postprocess(x: ArrayLike, temperature: float, lower: float = 0.0) -> FloatArray:
    """The modified post-processing of seed ``002_7dd7808a6059349a.txt`` §7.3.

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
    >>> modified_postprocess([-2.0, 1.0, 9.0], 1.0).tolist()
    [0.0, 0.5, 8.9]
    """
    t = _nonneg_real("temperature", temperature)
    lo = _real("lower", lower)
    bar = np.maximum(_values("x", x), lo)
    out: FloatArray = np.maximum(bar - t / (bar + 1.0 - lo), lo)
    return out


def modified_bias(
    q: ArrayLike, mechanism: NoiseMechanism, temperature: float, lower: float = 0.0
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
    >>> m = Laplace.from_scale(1.0)
    >>> bool(np.isclose(modified_bias(3.0, m, 0.0), clamp_bias(3.0, m)))
    True
    """
    law = _noise_law(mechanism)
    t = _nonneg_real("temperature", temperature)
    lo = _real("lower", lower)
    qs = _values("q", q)
    out = np.empty(qs.shape)
    if isinstance(law, Laplace):
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
        out[i] = float((modified_postprocess(qi + k, t, lo) * weights).sum()) - qi
    return out


@dataclass(frozen=True, slots=True)
class TemperatureSearch:
    """Result of :func:`optimal_temperature`.

    Attributes
    ----------
    temperature : float
        T*, the grid temperature with the smallest objective.
    temperatures : ndarray, shape (k,)
        The grid searched.
    objective : ndarray, shape (k,)
        max_q |bias| - min_q |bias| at each temperature (seed 002 eq. (32)).
    bias : ndarray, shape (k, m)
        Monte Carlo bias of the modified post-processing at each temperature and true value.
    q : ndarray, shape (m,)
        The true values.
    standard_error : ndarray, shape (k, m)
        Standard errors of ``bias``.

    Examples
    --------
    >>> from postdp import Laplace
    >>> res = optimal_temperature(Laplace.from_scale(2.0), [0, 2, 5, 20], [0, 0.5, 1, 2],
    ...                           n_draws=2000, rng=0)
    >>> res.bias.shape, res.temperature in res.temperatures
    ((4, 4), True)
    """

    temperature: float
    temperatures: FloatArray
    objective: FloatArray
    bias: FloatArray
    q: FloatArray
    standard_error: FloatArray


def optimal_temperature(
    mechanism: NoiseMechanism,
    q: ArrayLike,
    temperatures: ArrayLike,
    *,
    n_draws: int = 20_000,
    lower: float = 0.0,
    rng: RNGLike = None,
) -> TemperatureSearch:
    """Search the temperature T* of seed 002 eq. (32) by Monte Carlo over true values.

    T* = argmin_T ( max_q |E[x̂_T] - q| - min_q |E[x̂_T] - q| ), the expectation estimated
    from ``n_draws`` noisy draws of every q. The same draws serve every T (common random
    numbers), so the comparison between temperatures is not blurred by independent noise,
    and a seed reproduces the search exactly.

    Parameters
    ----------
    mechanism : NoiseMechanism
        The noise (any of postdp's mechanisms).
    q : array_like, shape (m,)
        True values x >= ℓ to balance the bias over (the search needs the true values, so
        it is a design-time tool, as the seed notes).
    temperatures : array_like, shape (k,)
        Nonnegative candidate temperatures.
    n_draws : int, default 20000
    lower : float, default 0
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    TemperatureSearch

    Examples
    --------
    >>> from postdp import Laplace
    >>> res = optimal_temperature(Laplace.from_scale(1.0), np.arange(0, 10), [0.0, 0.5, 1.0],
    ...                           n_draws=5000, rng=1)
    >>> bool(res.objective.min() <= res.objective[0])
    True
    """
    if not isinstance(mechanism, NoiseMechanism):
        raise TypeError(f"`mechanism` must be a noise mechanism; got {type(mechanism).__name__}")
    qs = _values("q", q).reshape(-1)
    grid = _values("temperatures", temperatures).reshape(-1)
    if grid.size == 0 or (grid < 0).any():
        raise ValidationError(f"`temperatures` must be nonnegative and nonempty; got {grid!r}")
    (draws_n,) = _validation.size_tuple(n_draws)
    if draws_n < 2:
        raise ValidationError(f"`n_draws` must be at least 2; got {n_draws!r}")
    lo = _real("lower", lower)
    truth = qs.astype(np.int64) if mechanism.discrete and np.all(qs == np.round(qs)) else qs
    draws = mechanism.sample(truth, rng=rng, size=draws_n).astype(np.float64)
    bias = np.empty((grid.size, qs.size))
    se = np.empty_like(bias)
    for i, t in enumerate(grid):
        out = modified_postprocess(draws, float(t), lo)
        bias[i] = out.mean(axis=0) - qs
        se[i] = out.std(axis=0, ddof=1) / math.sqrt(draws_n)
    size = np.abs(bias)
    objective = size.max(axis=1) - size.min(axis=1)
    best = int(np.argmin(objective))
    return TemperatureSearch(float(grid[best]), grid, objective, bias, qs, se)

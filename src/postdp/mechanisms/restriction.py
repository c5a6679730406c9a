"""Restriction (truncation by conditioning) of a Laplace or geometric mechanism
([mcglinchey2020] §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, NumArray, RNGLike, SizeLike
from postdp.errors import ValidationError
from postdp.mechanisms._base import recorded
from postdp.mechanisms.budget import Budget
from postdp.mechanisms.geometric import Geometric
from postdp.mechanisms.laplace import Laplace
from postdp.mechanisms.partial_moments import noise_law, positive_part_mean, tail_mean

if TYPE_CHECKING:
    from postdp.privacy import Ledger

__all__ = ["Restriction"]

#: Below this acceptance probability a restricted release is refused (a million draws).
_MIN_ACCEPTANCE = 1e-6


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
    [mcglinchey2020] Prop. 2). Its bias for Laplace(b) is
    (q + b)/(2 e^{q/b} - 1) (Cor. 1), more than twice the ramp's at equal privacy (eq. (9)).
    The release path (:meth:`release`) is exact rejection sampling over OpenDP's secure
    draws: every value is redrawn until it is nonnegative. For true counts (q >= 0) at
    least half the draws are accepted; settings that would need more than a million draws
    per value on average are refused. The number of draws depends on q, so the time a
    release takes is not private: do not publish it.

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
        noise_law(self.mechanism)

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
        qs = _validation.float_array("q", q)
        m = self.mechanism
        # P(q + N < 0) and E[(q + N)^+] - q P(q + N >= 0) = f(-q) + q P(q + N < 0) for q >= 0
        below = m.cdf(-qs) if isinstance(m, Laplace) else m.cdf(np.ceil(-qs) - 1)
        keep = 1.0 - below
        excess = np.where(
            qs >= 0,
            tail_mean(-np.abs(qs), m) + qs * below,
            positive_part_mean(qs, m) - qs * keep,
        )
        out: FloatArray = excess / keep
        return out

    def acceptance(self, q: ArrayLike) -> FloatArray:
        """P(q + N >= 0): the chance that one draw is kept by the rejection sampler.

        Examples
        --------
        >>> from postdp import Geometric
        >>> float(Restriction(Geometric(epsilon=1.0)).acceptance(0)) > 0.5
        True
        """
        m = self.mechanism
        if isinstance(m, Geometric):
            k = _validation.integer_array("q", q)
            return np.asarray(1.0 - m.cdf(-1, loc=k), dtype=np.float64)
        values = _validation.float_array("q", q)
        return np.asarray(1.0 - m.cdf(0.0, loc=values), dtype=np.float64)

    def release(self, x: ArrayLike, *, ledger: Ledger | None = None) -> NumArray:
        """Nonnegative draws for publication: OpenDP's exact sampler, redrawn until >= 0.

        Parameters
        ----------
        x : array_like
            True values (integers for geometric noise).
        ledger : Ledger, optional
            Record the release (cost 2ε) in this ledger, refused before drawing if it would
            pass its cap (see :meth:`Mechanism.release <postdp.mechanisms.Mechanism.release>`).

        Returns
        -------
        ndarray, same shape as ``x``
            Costs 2ε (:meth:`privacy_cost`).

        Raises
        ------
        ValidationError
            If some value would need more than a million draws on average.

        Examples
        --------
        >>> from postdp import Geometric
        >>> out = Restriction(Geometric(epsilon=1.0)).release([0, 3, 10])
        >>> bool((out >= 0).all()), out.dtype
        (True, dtype('int64'))
        """
        m = self.mechanism
        values = m._values(x)
        accept = self.acceptance(values)
        if (accept < _MIN_ACCEPTANCE).any():
            raise ValidationError(
                "restricted release refused: some values would need more than a million draws "
                f"on average (acceptance {float(accept.min()):.2g}); true counts are >= 0"
            )

        def draw() -> NumArray:
            flat = values.reshape(-1)
            out = np.empty_like(flat)
            pending = np.arange(flat.size)
            while pending.size:
                draws = m.release(flat[pending])
                kept = draws >= 0
                out[pending[kept]] = draws[kept]
                pending = pending[~kept]
            return out.reshape(values.shape)

        return recorded(self, values, draw, ledger)

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
        qf = np.broadcast_to(_validation.float_array("x", x), (*shape, *np.shape(x)))
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

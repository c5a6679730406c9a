"""Closed forms of [zhu2021] for the errors of projections.

Each function cites its lemma or theorem; ``tests/statistical`` checks every one of them
against Monte Carlo through confidence intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec, components, public_values, resolve_public
from postdp.mechanisms import Geometric, Laplace, NoiseMechanism

__all__ = [
    "BiasBound",
    "geometric_h",
    "l1_ball_probability",
    "l1_ball_tail",
    "p_plus_bias_bound",
    "ps_error_cdf",
    "ps_error_density",
    "ps_error_variance",
    "ps_wasserstein_to_laplace",
]


def geometric_h(n: int, r: int) -> list[list[int]]:
    """The polynomials h_i of Lemma 8 ([zhu2021]) evaluated exactly at 0..r, for i < n.

    h_0 = 1 and h_{i+1}(s) = Σ_{v=-s}^{s} h_i(s - |v|) = h_i(s) + 2 Σ_{u<s} h_i(u); h_i(r) counts
    the points of Z^i weighted as in the lemma. Python integers, so no precision is lost.

    Parameters
    ----------
    n : int
        Number of polynomials (the dimension of the noise vector).
    r : int
        Largest argument.

    Returns
    -------
    list of list of int
        ``table[i][s] = h_i(s)``.

    Examples
    --------
    >>> geometric_h(3, 3)
    [[1, 1, 1, 1], [1, 3, 5, 7], [1, 5, 13, 25]]
    """
    if n < 1 or r < 0:
        raise ValidationError(f"`n` must be >= 1 and `r` >= 0; got n={n}, r={r}")
    table = [[1] * (r + 1)]
    for _ in range(n - 1):
        prev = table[-1]
        row, running = [], 0
        for s in range(r + 1):
            row.append(prev[s] + 2 * running)
            running += prev[s]
        table.append(row)
    return table


def l1_ball_tail(r: float, n: int, mechanism: NoiseMechanism) -> float:
    """P(||η||_1 > r) for n i.i.d. noise values, accurate even when it is tiny (Lemma 8).

    Parameters
    ----------
    r : float
        Radius r >= 0 (an integer for the double geometric; fractions are floored).
    n : int
        Dimension.
    mechanism : Laplace or Geometric

    Returns
    -------
    float

    Notes
    -----
    Laplace(λ): e^{-r/λ} Σ_{i<n} (r/λ)^i / i!, the Gamma(n, λ) survival function at r
    (|η_i| are exponential). Double geometric(a): (2a^{r+1}/(1+a)) Σ_{i<n} h_i(r)
    ((1-a)/(1+a))^i, summed in logarithms so that large h_i(r) do not overflow.

    Examples
    --------
    >>> from postdp import Laplace
    >>> float(l1_ball_tail(695.0, 33, Laplace.from_scale(5.0))) < 1e-27
    True
    """
    if n < 1:
        raise ValidationError(f"`n` must be at least 1; got {n}")
    if r < 0:
        raise ValidationError(f"`r` must be nonnegative; got {r}")
    if isinstance(mechanism, Laplace):
        return float(stats.gamma.sf(r, a=n, scale=mechanism.scale))
    if isinstance(mechanism, Geometric):
        a = mechanism.a
        radius = math.floor(r)  # the l1 norm of integer noise is an integer
        h = geometric_h(n, radius)
        log_c = math.log((1 - a) / (1 + a))
        log_front = math.log(2.0) + (radius + 1) * math.log(a) - math.log(1 + a)
        logs = [math.log(h[i][radius]) + i * log_c for i in range(n)]
        top = max(logs)
        return math.exp(log_front + top + math.log(sum(math.exp(v - top) for v in logs)))
    raise TypeError(f"Lemma 8 covers Laplace and Geometric noise; got {type(mechanism).__name__}")


def l1_ball_probability(r: float, n: int, mechanism: NoiseMechanism) -> float:
    """P(||η||_1 <= r) for n i.i.d. noise values ([zhu2021] Lemma 8; Cor. 9 for x̃ around x).

    Parameters
    ----------
    r : float
        Radius r >= 0 (an integer for the double geometric).
    n : int
        Dimension.
    mechanism : Laplace or Geometric

    Returns
    -------
    float
        1 - :func:`l1_ball_tail` (use that one for tiny tails).

    Examples
    --------
    >>> from postdp import Laplace, Geometric
    >>> round(l1_ball_probability(2.0, 1, Laplace.from_scale(1.0)), 6)  # 1 - e^{-2}
    0.864665
    >>> m = Geometric(1.0)
    >>> bool(np.isclose(l1_ball_probability(0, 1, m), m.pmf(0)))
    True
    """
    return 1.0 - l1_ball_tail(r, n, mechanism)


@dataclass(frozen=True, slots=True)
class BiasBound:
    """The bias bound of [zhu2021] Thm 11 and its ingredients.

    Attributes
    ----------
    bound : float
        C' · Pr(x̃ outside the l1 ball of radius r_m around x).
    c_prime : float
        sup_{v in K} ||v - x||_∞ over the feasible region K (inf when K is unbounded).
    r_m : float
        min_i x_i over the noisy nodes.
    outside : float
        Pr(||η||_1 > r_m) (Lemma 8).
    n : int
        Number of noisy nodes.

    Examples
    --------
    >>> BiasBound(0.5, 10.0, 3.0, 0.05, 4).bound
    0.5
    """

    bound: float
    c_prime: float
    r_m: float
    outside: float
    n: int

    def to_frame(self) -> pd.DataFrame:
        """The bound and its ingredients as one row.

        Examples
        --------
        >>> from postdp import Hierarchy, Laplace
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [50, 20, 30])
        >>> list(p_plus_bias_bound(h, Laplace(1.0)).to_frame().columns)
        ['bound', 'c_prime', 'r_m', 'outside', 'n']
        """
        return pd.DataFrame(
            [
                {
                    "bound": self.bound,
                    "c_prime": self.c_prime,
                    "r_m": self.r_m,
                    "outside": self.outside,
                    "n": self.n,
                }
            ]
        )


def p_plus_bias_bound(
    hierarchy: Hierarchy,
    mechanism: NoiseMechanism,
    *,
    public: PublicSpec = None,
    truth: ArrayLike | None = None,
) -> BiasBound:
    """Thm 11 of [zhu2021]: ||Bias(P+)||_∞ <= C' · Pr(||η||_1 > r_m).

    Parameters
    ----------
    hierarchy : Hierarchy
    mechanism : Laplace or Geometric
        The noise on every noisy node (Lemma 8 supplies the tail probability).
    public : mapping, sequence of str, "root" or None
        Invariant nodes. The feasible region {v >= 0, consistent, public fixed} is bounded
        only when the root is public; otherwise C' = inf and the bound is vacuous.
    truth : array_like, shape (n,), optional
        True counts (default: the hierarchy's).

    Returns
    -------
    BiasBound

    Notes
    -----
    With the root public, a non-public node i can take any value between its floor (the
    sum of the public nodes below it) and b_j - (public mass below j) + floor_i, where j is
    its nearest public ancestor; C' is the largest distance from x_i to either end.

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> h = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"], [30, 10, 20])
    >>> bb = p_plus_bias_bound(h, Laplace.from_scale(1.0), public="root")
    >>> bb.c_prime, bb.r_m, bb.n
    (20.0, 10.0, 2)
    """
    counts = hierarchy.counts if truth is None else _validation.real_array("truth", truth)
    if counts is None:
        raise ValidationError("`truth` is needed: the hierarchy holds no true counts")
    x = np.asarray(counts, dtype=np.float64)
    pub = resolve_public(hierarchy, public=public_values(hierarchy, public=public, values=x))
    noisy = ~pub.determined
    n_noisy = int(noisy.sum())
    if n_noisy == 0:
        return BiasBound(0.0, 0.0, math.inf, 0.0, 0)
    r_m = float(x[noisy].min())
    outside = l1_ball_tail(r_m, n_noisy, mechanism)
    if not pub.mask[hierarchy.root]:
        c_prime = math.inf
    else:
        comp = components(hierarchy, mask=pub.mask)
        # nearest public strict ancestor of each non-public node is its component root
        j = comp
        upper = pub.values[j] - pub.below[j] + pub.floor
        lower = pub.floor
        c_prime = float(np.max(np.where(noisy, np.maximum(upper - x, x - lower), 0.0)))
    bound = c_prime * outside if outside > 0 else 0.0
    return BiasBound(float(bound), c_prime, r_m, float(outside), n_noisy)


def ps_error_variance(n: int, mechanism: Laplace) -> float:
    """Variance 2λ²(1 - 1/n) of a (P_S) marginal error under Laplace(λ) noise (Thm 12).

    Parameters
    ----------
    n : int
        Number of entities summed to the public total.
    mechanism : Laplace
        The noise, Laplace(λ) on every entity.

    Returns
    -------
    float

    Examples
    --------
    >>> lap = Laplace.from_scale(10.0)
    >>> round(ps_error_variance(15, lap), 2), round(ps_error_variance(254, lap), 2)
    (186.67, 199.21)
    """
    lam = _laplace_scale(mechanism)
    if n < 1:
        raise ValidationError(f"`n` must be at least 1; got {n}")
    return 2.0 * lam**2 * (1.0 - 1.0 / n)


def _laplace_scale(mechanism: Laplace) -> float:
    if not isinstance(mechanism, Laplace):
        raise TypeError(
            f"the (P_S) laws are for Laplace noise; `mechanism` is {type(mechanism).__name__}"
        )
    return mechanism.scale


def _ps_grid(n: int, scale: float, points: int) -> tuple[FloatArray, FloatArray]:
    """The (P_S) error density on a grid, by FFT convolution (Thm 12)."""
    lam = _validation.positive_real("scale", scale)
    if n < 1:
        raise ValidationError(f"`n` must be at least 1; got {n}")
    m = points // 2
    dx = 40.0 * lam / m
    x: FloatArray = np.arange(-m, m + 1, dtype=np.float64) * float(dx)  # index m is exactly 0
    points = x.size
    if n == 1:
        return x, np.zeros_like(x)  # the error is exactly 0: a point mass
    # error = (1 - 1/n) η_i - (1/n) Σ_{j != i} η_j, η ~ Laplace(λ) i.i.d.
    edges = np.concatenate((x - dx / 2, [x[-1] + dx / 2]))
    # probability of each grid cell (not pdf * dx: exact even when λ/n is below the spacing)
    own = np.diff(stats.laplace.cdf(edges, scale=lam * (1 - 1 / n)))
    other = np.diff(stats.laplace.cdf(edges, scale=lam / n))
    size = 2 * points
    spectrum = np.fft.rfft(own, size) * np.fft.rfft(other, size) ** (n - 1)
    full = np.fft.irfft(spectrum, size)
    # the sum of n discrete laws centred at index m is centred at index n*m
    idx = (np.arange(points) - m + n * m) % size
    density: FloatArray = np.maximum(full[idx], 0.0) / dx
    return x, density


def _ps_cdf_grid(n: int, scale: float, points: int) -> tuple[FloatArray, FloatArray]:
    """The (P_S) error cdf on the grid of :func:`_ps_grid` (trapezoid rule, normalised)."""
    grid, dens = _ps_grid(n, scale, points)
    cdf = np.concatenate(([0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))))
    out: FloatArray = cdf / cdf[-1]
    return grid, out


def ps_error_density(
    x: ArrayLike, n: int, mechanism: Laplace, *, points: int = 1 << 15
) -> FloatArray:
    """Density of a (P_S) marginal error, Thm 12 of [zhu2021], by numerical convolution.

    The error of entity i is (1 - 1/n)η_i - (1/n)Σ_{j≠i} η_j with η i.i.d. Laplace(λ); its
    density is the convolution of Laplace(λ(1 - 1/n)) with n - 1 copies of Laplace(λ/n),
    computed with FFTs of the laws' cell probabilities on a grid of ``points`` over ±40λ
    and interpolated at ``x`` (discretisation adds a variance of about n·dx²/12).

    Parameters
    ----------
    x : array_like
    n : int
        n >= 2.
    mechanism : Laplace
        The noise, Laplace(λ) on every entity.
    points : int, default 32768

    Returns
    -------
    ndarray of float

    Examples
    --------
    >>> from scipy import integrate
    >>> grid = np.linspace(-200, 200, 4001)
    >>> density = ps_error_density(grid, 15, Laplace.from_scale(10.0))
    >>> round(float(integrate.trapezoid(density, grid)), 6)
    1.0
    """
    if n < 2:
        raise ValidationError(f"`n` must be at least 2 for a density; got {n}")
    grid, dens = _ps_grid(n, _laplace_scale(mechanism), points)
    out: FloatArray = np.interp(np.asarray(x, dtype=np.float64), grid, dens, left=0.0, right=0.0)
    return out


def ps_error_cdf(x: ArrayLike, n: int, mechanism: Laplace, *, points: int = 1 << 15) -> FloatArray:
    """Cumulative distribution of a (P_S) marginal error (integral of :func:`ps_error_density`).

    Parameters
    ----------
    x : array_like
    n : int
        n >= 2.
    mechanism : Laplace
    points : int, default 32768

    Returns
    -------
    ndarray of float

    Examples
    --------
    >>> round(float(ps_error_cdf(0.0, 15, Laplace.from_scale(10.0))), 6)
    0.5
    """
    if n < 2:
        raise ValidationError(f"`n` must be at least 2 for a distribution; got {n}")
    grid, cdf = _ps_cdf_grid(n, _laplace_scale(mechanism), points)
    out: FloatArray = np.interp(np.asarray(x, dtype=np.float64), grid, cdf, left=0.0, right=1.0)
    return out


def ps_wasserstein_to_laplace(n: int, mechanism: Laplace, *, points: int = 1 << 15) -> float:
    """W1 distance between the (P_S) marginal error law and the Laplace(λ) noise (Fig. 5).

    Thm 13-14 of [zhu2021]: the law converges to Laplace(λ) as n grows, so this distance
    decreases to 0.

    Parameters
    ----------
    n : int
        n >= 2.
    mechanism : Laplace
        The noise, Laplace(λ) on every entity.
    points : int, default 32768

    Returns
    -------
    float
        ∫ |F_n(x) - F_Laplace(x)| dx on the grid.

    Examples
    --------
    >>> w = [ps_wasserstein_to_laplace(n, Laplace.from_scale(1.0)) for n in (2, 10, 100)]
    >>> w[0] > w[1] > w[2]
    True
    """
    scale = _laplace_scale(mechanism)
    grid, cdf = _ps_cdf_grid(n, scale, points)
    lap = stats.laplace.cdf(grid, scale=scale)
    return float(np.trapezoid(np.abs(cdf - lap), grid))

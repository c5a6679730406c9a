"""Posterior inference for true counts from Bayesian-post-processed releases ([wang2021] §4).

Given released components Ñ_1..Ñ_S and total Ñ (independence flavor of the release), with
uniform priors on N_s >= 0,

    p(N | Ñ) ∝ g(Σ N_s) · Σ_{n ∈ A} Π_s DG_s(n_s - N_s),

where A is the set of noisy component vectors n whose Finucan mode MD(Ñ, max(n, 0)) equals
the released components, and g(N) = P(max(n, 0) = Ñ | N) for the noisy total n (the
released total is its posterior mode). A depends only on the release, and the kernel is a
product over components, so on a grid the sum is a separable correlation: the exact
posterior of the seed's "brute force" takes one Finucan batch and S small matrix products.
For larger S a Metropolis-within-Gibbs sampler explores (N, n) instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp import _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, FloatArray, IntArray
from postdp.bayes._finucan import finucan_mode
from postdp.errors import ValidationError
from postdp.mechanisms import Geometric, expand_mechanisms

__all__ = ["ExactPosterior", "exact_posterior"]


def _mechs(component_mechanisms: Geometric | Sequence[Geometric], S: int) -> list[Geometric]:
    return list(
        expand_mechanisms(
            component_mechanisms,
            count=S,
            kind=Geometric,
            name="component_mechanisms",
            per="component",
        )
    )


def _release(components: ArrayLike, total: ArrayLike) -> tuple[IntArray, int]:
    k = _validation.integer_array("released_components", components).reshape(-1)
    t = int(_validation.integer_array("released_total", total).reshape(()))
    _validation.nonnegative("released_components", k)
    if t < 0 or int(k.sum()) != t:
        raise ValidationError(
            "`released_components` must be nonnegative and add up to `released_total`; got "
            f"sum {int(k.sum())} and total {t}"
        )
    return k, t


def _total_likelihood(total_mechanism: Geometric, released_total: int, N: IntArray) -> FloatArray:
    """g(N) = P(max(n, 0) = Ñ | N) for the noisy total n = N + δ."""
    if released_total > 0:
        out: FloatArray = total_mechanism.pmf(released_total - N)
        return out
    cdf: FloatArray = total_mechanism.cdf(-N)
    return cdf


def _reach(m: Geometric, tail: float = 1e-17) -> int:
    return max(1, math.ceil(math.log(tail) / math.log(m.a)))


@dataclass(frozen=True, slots=True, eq=False)
class ExactPosterior:
    """The posterior of the true counts on a grid (small S).

    Attributes
    ----------
    grids : tuple of ndarray
        The values of N_1, ..., N_S considered.
    probability : ndarray, shape (len(grids[0]), ..., len(grids[-1]))
        Joint posterior probabilities (summing to 1).

    Examples
    --------
    >>> from postdp import Geometric
    >>> post = exact_posterior([3, 4], 7, total_mechanism=Geometric(1.0),
    ...                        component_mechanisms=Geometric(1.0), window=15)
    >>> round(float(post.probability.sum()), 12)
    1.0
    """

    grids: tuple[IntArray, ...]
    probability: FloatArray

    def marginal(self, component: int) -> tuple[IntArray, FloatArray]:
        """Values and probabilities of N_component (0-based).

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([3, 4], 7, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0), window=15)
        >>> values, probs = post.marginal(0)
        >>> int(values[np.argmax(probs)])
        3
        """
        axes = tuple(a for a in range(self.probability.ndim) if a != component)
        return self.grids[component], self.probability.sum(axis=axes)

    def total_marginal(self) -> tuple[IntArray, FloatArray]:
        """Values and probabilities of the true total N = Σ N_s.

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([3, 4], 7, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0), window=15)
        >>> values, probs = post.total_marginal()
        >>> round(float(probs.sum()), 12)
        1.0
        """
        totals = sum(np.ix_(*self.grids))
        values, inverse = np.unique(np.asarray(totals, dtype=np.int64), return_inverse=True)
        probs = np.bincount(inverse.ravel(), weights=self.probability.ravel())
        return values.astype(np.int64), probs.astype(np.float64)

    def credible_intervals(self, level: float = 0.95) -> ConfidenceInterval:
        """Equal-tailed credible intervals of each N_s from its exact marginal.

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([250, 357], 607, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0))
        >>> ci = post.credible_intervals(0.95)
        >>> ci.low.tolist(), ci.high.tolist()
        ([248.0, 354.0], [252.0, 359.0])
        """
        if not 0.0 < level < 1.0:
            raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
        tail = (1.0 - level) / 2.0
        out = np.empty((len(self.grids), 2), dtype=np.int64)
        for s in range(len(self.grids)):
            values, probs = self.marginal(s)
            cum = np.cumsum(probs)
            out[s] = values[np.minimum(np.searchsorted(cum, [tail, 1.0 - tail]), values.size - 1)]
        return ConfidenceInterval(out[:, 0].astype(np.float64), out[:, 1].astype(np.float64), level)

    def to_frame(self) -> pd.DataFrame:
        """The joint posterior in long form: one row per grid point, N1..NS, N, probability.

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([3, 4], 7, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0), window=5)
        >>> frame = post.to_frame()
        >>> len(frame) == post.probability.size, round(float(frame.probability.sum()), 12)
        (True, 1.0)
        """
        mesh = np.meshgrid(*self.grids, indexing="ij")
        frame = pd.DataFrame({f"N{s + 1}": m.ravel() for s, m in enumerate(mesh)})
        frame["N"] = frame.sum(axis=1)
        frame["probability"] = self.probability.ravel()
        return frame

    def top(self, k: int = 10) -> pd.DataFrame:
        """The ``k`` most probable configurations ([wang2021] Table 3).

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([3, 4], 7, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0), window=15)
        >>> post.top(1)[["N1", "N2", "N"]].values.tolist()
        [[3, 4, 7]]
        """
        flat = self.probability.ravel()
        order = np.argsort(-flat, kind="stable")[:k]
        idx = np.unravel_index(order, self.probability.shape)
        frame = pd.DataFrame({f"N{s + 1}": self.grids[s][idx[s]] for s in range(len(self.grids))})
        frame["N"] = frame.sum(axis=1)
        frame["probability"] = flat[order]
        return frame


#: Points of the noisy grid whose release rule runs at once in :func:`exact_posterior`.
_CHUNK = 1 << 17


def exact_posterior(
    released_components: Sequence[int],
    released_total: int,
    *,
    total_mechanism: Geometric,
    component_mechanisms: Geometric | Sequence[Geometric],
    window: int | None = None,
) -> ExactPosterior:
    """Exact posterior of the true counts on a grid ([wang2021] §4, "brute force").

    Parameters
    ----------
    released_components : sequence of int
        Ñ_1..Ñ_S (S small: the grid has (2w + 1)^S points).
    released_total : int
        Ñ = Σ Ñ_s.
    total_mechanism, component_mechanisms : Geometric
        The noise of the release (independence flavor).
    window : int, optional
        Half-width w of the grid of each N_s around Ñ_s (clipped at 0); the noisy
        components range over ±(w + noise reach). Default: the reach where a component's
        noise has mass below 1e-17 (30 for ε = 1 would be the seed's choice).

    Returns
    -------
    ExactPosterior

    Examples
    --------
    >>> from postdp import Geometric
    >>> g = Geometric(1.0)
    >>> post = exact_posterior([250, 357], 607, total_mechanism=g, component_mechanisms=g,
    ...                        window=30)
    >>> post.top(3).round(2)[["N1", "N2", "N", "probability"]].values.tolist()
    [[250.0, 357.0, 607.0, 0.21], [251.0, 356.0, 607.0, 0.13], [251.0, 357.0, 608.0, 0.08]]
    """
    k, t = _release(released_components, released_total)
    S = k.size
    mechs = _mechs(component_mechanisms, S)
    reach = [_reach(m) for m in mechs]
    half = reach if window is None else [int(window)] * S
    grids = tuple(np.arange(max(0, int(k[s]) - half[s]), int(k[s]) + half[s] + 1) for s in range(S))
    noisy = tuple(
        np.arange(int(g[0]) - reach[s], int(g[-1]) + reach[s] + 1) for s, g in enumerate(grids)
    )
    if math.prod(len(a) for a in noisy) > 20_000_000:
        raise ValidationError(
            "the exact posterior grid is too large; use sample_posterior (MCMC) or a smaller "
            "`window`"
        )
    shape = tuple(len(a) for a in noisy)
    in_a = np.empty(math.prod(shape), dtype=bool)
    # the modes of the noisy grid's points, a slice of _CHUNK points at a time: the whole
    # mesh and its modes would take 5 x 8 x S bytes a point (460 MB at S = 3, eps = 1)
    for start in range(0, in_a.size, _CHUNK):
        flat = np.arange(start, min(in_a.size, start + _CHUNK))
        mesh = np.stack([a[i] for a, i in zip(noisy, np.unravel_index(flat, shape), strict=True)])
        modes = finucan_mode(np.full(flat.size, t), np.maximum(mesh.T, 0))
        in_a[start : start + flat.size] = (modes == k).all(axis=1)
    post = in_a.reshape(shape).astype(np.float64)
    for s in range(S):  # separable: contract each noisy axis with its noise kernel
        kernel = mechs[s].pmf(noisy[s][None, :] - grids[s][:, None])  # (N grid, n grid)
        post = np.moveaxis(np.tensordot(post, kernel, axes=([s], [1])), -1, s)
    totals = np.asarray(sum(np.ix_(*grids)), dtype=np.int64)
    post = post * _total_likelihood(total_mechanism, t, totals)
    mass = post.sum()
    if not mass > 0:
        raise ValidationError("the release has zero likelihood on the grid; widen `window`")
    return ExactPosterior(grids, post / mass)

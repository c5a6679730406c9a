"""Posterior inference for true counts from Bayesian-post-processed releases (seed 003 §4).

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
import numpy.typing as npt
import pandas as pd

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, IntArray, RNGLike
from postdp.bayes._finucan import finucan_mode
from postdp.errors import ValidationError
from postdp.mechanisms import Geometric

__all__ = [
    "ExactPosterior",
    "PosteriorSamples",
    "effective_sample_size",
    "exact_posterior",
    "sample_posterior",
    "split_rhat",
]


def _mechs(component_mechanisms: Geometric | Sequence[Geometric], S: int) -> list[Geometric]:
    mechs = (
        [component_mechanisms] * S
        if isinstance(component_mechanisms, Geometric)
        else list(component_mechanisms)
    )
    if len(mechs) != S or not all(isinstance(m, Geometric) for m in mechs):
        raise ValidationError(
            f"`component_mechanisms` needs one Geometric mechanism or one per component ({S})"
        )
    return mechs


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

    def credible_intervals(self, level: float = 0.95) -> IntArray:
        """Equal-tailed credible intervals of each N_s from its exact marginal, shape (S, 2).

        Examples
        --------
        >>> from postdp import Geometric
        >>> post = exact_posterior([250, 357], 607, total_mechanism=Geometric(1.0),
        ...                        component_mechanisms=Geometric(1.0))
        >>> post.credible_intervals(0.95).tolist()
        [[248, 252], [354, 359]]
        """
        if not 0.0 < level < 1.0:
            raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
        tail = (1.0 - level) / 2.0
        out = np.empty((len(self.grids), 2), dtype=np.int64)
        for s in range(len(self.grids)):
            values, probs = self.marginal(s)
            cum = np.cumsum(probs)
            out[s] = values[np.minimum(np.searchsorted(cum, [tail, 1.0 - tail]), values.size - 1)]
        return out

    def top(self, k: int = 10) -> pd.DataFrame:
        """The ``k`` most probable configurations (seed 003 Table 3).

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


def exact_posterior(
    released_components: Sequence[int],
    released_total: int,
    *,
    total_mechanism: Geometric,
    component_mechanisms: Geometric | Sequence[Geometric],
    window: int | None = None,
) -> ExactPosterior:
    """Exact posterior of the true counts on a grid (seed 003 §4, "brute force").

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
    mesh = np.stack(np.meshgrid(*noisy, indexing="ij"), axis=-1).reshape(-1, S)
    modes = finucan_mode(np.full(mesh.shape[0], t), np.maximum(mesh, 0))
    in_a = (modes == k).all(axis=1).reshape([len(a) for a in noisy]).astype(np.float64)
    post = in_a
    for s in range(S):  # separable: contract each noisy axis with its noise kernel
        kernel = mechs[s].pmf(noisy[s][None, :] - grids[s][:, None])  # (N grid, n grid)
        post = np.moveaxis(np.tensordot(post, kernel, axes=([s], [1])), -1, s)
    totals = np.asarray(sum(np.ix_(*grids)), dtype=np.int64)
    post = post * _total_likelihood(total_mechanism, t, totals)
    mass = post.sum()
    if not mass > 0:
        raise ValidationError("the release has zero likelihood on the grid; widen `window`")
    return ExactPosterior(grids, post / mass)


# ------------------------------------------------------------------------------ MCMC
def effective_sample_size(samples: ArrayLike) -> float:
    """Effective sample size of one quantity from several chains (rank-free, Geyer's rule).

    Parameters
    ----------
    samples : array_like, shape (chains, draws)

    Returns
    -------
    float
        C·T / (1 + 2 Σ ρ_t), with the autocorrelations ρ_t averaged over chains (computed by
        FFT) and summed over Geyer's initial positive, monotone pairs (Stan's estimator
        without rank normalisation). Constant samples give C·T.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> round(effective_sample_size(rng.normal(size=(4, 1000))) / 4000, 1)
    1.0
    """
    x = np.asarray(samples, dtype=np.float64)
    C, T = x.shape
    centred = x - x.mean(axis=1, keepdims=True)
    var_within = centred.var(axis=1, ddof=1).mean()
    var_total = var_within * (T - 1) / T + x.mean(axis=1).var(ddof=1) if C > 1 else var_within
    if var_total <= 0:
        return float(C * T)
    size = 1 << (2 * T - 1).bit_length()
    spectrum = np.fft.rfft(centred, size, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size, axis=1)[:, :T] / T
    rho = 1.0 - (var_within - acov.mean(axis=0)) / var_total
    rho[0] = 1.0
    total = 0.0
    previous = math.inf
    for t in range(0, T - 1, 2):
        pair = rho[t] + rho[t + 1]
        if pair <= 0:
            break
        pair = min(pair, previous)  # monotone
        total += pair
        previous = pair
    tau = -1.0 + 2.0 * total
    return float(C * T / max(tau, 1e-12))


def split_rhat(samples: ArrayLike) -> float:
    """Split-chain potential scale reduction R-hat (Gelman et al., BDA3 §11.4).

    Parameters
    ----------
    samples : array_like, shape (chains, draws)

    Returns
    -------
    float
        About 1 when the chains agree; values above 1.01 signal non-convergence.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> round(split_rhat(rng.normal(size=(4, 1000))), 2)
    1.0
    """
    x = np.asarray(samples, dtype=np.float64)
    half = x.shape[1] // 2
    parts = np.concatenate([x[:, :half], x[:, half : 2 * half]])
    n = parts.shape[1]
    within = parts.var(axis=1, ddof=1).mean()
    between = n * parts.mean(axis=1).var(ddof=1)
    if within == 0:
        return 1.0 if between == 0 else math.inf
    return float(math.sqrt(((n - 1) / n * within + between / n) / within))


@dataclass(frozen=True, slots=True, eq=False)
class PosteriorSamples:
    """MCMC draws of the true counts with their diagnostics.

    Attributes
    ----------
    samples : ndarray of int64, shape (chains, draws, S)
    ess : ndarray, shape (S,)
        Effective sample size of each N_s.
    rhat : ndarray, shape (S,)
        Split R-hat of each N_s.
    acceptance : float
        Acceptance rate of the moves of the latent noisy components.

    Examples
    --------
    >>> from postdp import Geometric
    >>> g = Geometric(1.0)
    >>> res = sample_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g,
    ...                        n_draws=200, chains=2, rng=0)
    >>> res.samples.shape
    (2, 200, 2)
    """

    samples: IntArray
    ess: FloatArray
    rhat: FloatArray
    acceptance: float

    def marginal(self, component: int) -> tuple[IntArray, FloatArray]:
        """Empirical posterior of N_component: values and frequencies.

        Examples
        --------
        >>> from postdp import Geometric
        >>> g = Geometric(1.0)
        >>> res = sample_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g,
        ...                        n_draws=200, chains=2, rng=0)
        >>> round(float(res.marginal(0)[1].sum()), 12)
        1.0
        """
        values, counts = np.unique(self.samples[..., component], return_counts=True)
        return values, counts / counts.sum()

    def credible_intervals(self, level: float = 0.95) -> FloatArray:
        """Equal-tailed credible intervals, shape (S, 2).

        Examples
        --------
        >>> from postdp import Geometric
        >>> g = Geometric(1.0)
        >>> res = sample_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g,
        ...                        n_draws=400, chains=2, rng=0)
        >>> res.credible_intervals().shape
        (2, 2)
        """
        flat = self.samples.reshape(-1, self.samples.shape[-1])
        tail = (1.0 - level) / 2.0
        out: FloatArray = np.quantile(flat, [tail, 1.0 - tail], axis=0).T
        return out


def _holds(k: IntArray, t: int, noisy: IntArray) -> npt.NDArray[np.bool_]:
    """Whether Finucan's mode of MD(t, max(noisy, 0)) equals k, for each row of ``noisy``."""
    theta = np.maximum(noisy, 0).astype(np.float64)
    total = theta.sum(axis=1, keepdims=True)
    theta = np.where(total > 0, theta / np.where(total > 0, total, 1.0), 1.0 / k.size)
    up = (theta / (k + 1)).max(axis=1)
    down = np.where(k > 0, theta / np.where(k > 0, k, 1), np.inf).min(axis=1)
    out: npt.NDArray[np.bool_] = up < down * (1 - 1e-12)  # strict: the unique mode
    close = np.abs(up - down) <= 1e-12 * np.maximum(down, 1e-300)
    if close.any():  # a tie: ask Finucan which mode it picks
        rows = np.flatnonzero(close)
        out[rows] = (finucan_mode(np.full(rows.size, t), theta[rows]) == k).all(axis=1)
    return out


def sample_posterior(
    released_components: Sequence[int],
    released_total: int,
    *,
    total_mechanism: Geometric,
    component_mechanisms: Geometric | Sequence[Geometric],
    n_draws: int = 2000,
    chains: int = 4,
    burn_in: int | None = None,
    thin: int = 1,
    rng: RNGLike = None,
) -> PosteriorSamples:
    """Metropolis-within-Gibbs sampler of the true counts, for any number of components.

    The state is the true counts N and the unobserved noisy components n (the noisy total
    is fixed by the release, or integrated out when Ñ = 0). Each sweep visits every
    component: N_s is drawn exactly from its full conditional ∝ DG(n_s - N_s) g(Σ N) on a
    window; n_s is proposed from DG(· - N_s) and accepted iff the release is still the
    Finucan mode (the target over the proposal is the indicator of A). Chains run in
    parallel (vectorised) from dispersed starts.

    Parameters
    ----------
    released_components : sequence of int
    released_total : int
    total_mechanism, component_mechanisms : Geometric
    n_draws : int, default 2000
        Draws kept per chain (after burn-in and thinning).
    chains : int, default 4
    burn_in : int, optional
        Sweeps discarded (default: n_draws // 2).
    thin : int, default 1
        Keep every ``thin``-th sweep.
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    PosteriorSamples

    Examples
    --------
    >>> from postdp import Geometric
    >>> g = Geometric(1.0)
    >>> res = sample_posterior([250, 357], 607, total_mechanism=g, component_mechanisms=g,
    ...                        n_draws=500, rng=1)
    >>> bool(abs(res.samples[..., 0].mean() - 250) < 2)
    True
    """
    k, t = _release(released_components, released_total)
    S = k.size
    mechs = _mechs(component_mechanisms, S)
    (draws,) = _validation.size_tuple(n_draws)
    (C,) = _validation.size_tuple(chains)
    if draws < 4 or C < 1 or thin < 1:
        raise ValidationError(
            f"`n_draws` must be >= 4, `chains` and `thin` >= 1; got {n_draws}, {chains}, {thin}"
        )
    burn = draws // 2 if burn_in is None else int(burn_in)
    gen = _rng.as_generator(rng)
    log_a = np.array([math.log(m.a) for m in mechs])
    reach = np.array([_reach(m) for m in mechs])
    noisy = np.broadcast_to(k, (C, S)).copy()  # the release itself is a valid latent state
    jitter = np.stack([m.sample(np.zeros(C, dtype=np.int64), rng=gen) for m in mechs], axis=1)
    N = np.maximum(k + jitter, 0)
    offsets = [np.arange(2 * r + 1) for r in reach]
    rates = np.array([m.epsilon / m.sensitivity for m in mechs])
    a_total = total_mechanism.a
    log_a_total = math.log(a_total)

    def log_g(total: IntArray) -> FloatArray:
        """log g(N): the noisy total's likelihood, in closed form (hot loop)."""
        if t > 0:
            out: FloatArray = np.abs(t - total) * log_a_total + math.log(
                (1 - a_total) / (1 + a_total)
            )
            return out
        tail: FloatArray = np.asarray(
            total * log_a_total - math.log(1 + a_total), dtype=np.float64
        )  # P(δ <= -N), N >= 0
        return tail

    def noise(s: int) -> IntArray:
        """C double geometric draws for component s (difference of two geometrics)."""
        e = gen.standard_exponential((2, C)) / rates[s]
        out: IntArray = (np.floor(e[0]) - np.floor(e[1])).astype(np.int64)
        return out

    kept = np.empty((C, draws, S), dtype=np.int64)
    accepted = 0
    proposals = 0
    chain_rows = np.arange(C)
    total_sweeps = burn + draws * thin
    sums = N.sum(axis=1)
    for sweep in range(total_sweeps):
        for s in range(S):
            # exact Gibbs step for N_s on a window around n_s
            rest = sums - N[:, s]
            cand = np.maximum(noisy[:, s] - reach[s], 0)[:, None] + offsets[s][None, :]
            logp = np.abs(noisy[:, s][:, None] - cand) * log_a[s] + log_g(rest[:, None] + cand)
            pick = np.argmax(logp + gen.gumbel(size=logp.shape), axis=1)
            N[:, s] = cand[chain_rows, pick]
            sums = rest + N[:, s]
            # independence proposal for the latent noisy n_s; accept iff the release holds
            proposal = noisy.copy()
            proposal[:, s] = N[:, s] + noise(s)
            ok = _holds(k, t, proposal)
            noisy[ok, s] = proposal[ok, s]
            accepted += int(ok.sum())
            proposals += C
        if sweep >= burn and (sweep - burn) % thin == 0:
            kept[:, (sweep - burn) // thin] = N
    ess = np.array([effective_sample_size(kept[..., s]) for s in range(S)])
    rhat = np.array([split_rhat(kept[..., s]) for s in range(S)])
    return PosteriorSamples(kept, ess, rhat, accepted / max(proposals, 1))

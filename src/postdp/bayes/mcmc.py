"""A Metropolis-within-Gibbs sampler of the true counts behind a Bayesian-post-processed
release ([wang2021] §4), for many components (S = 50 and beyond).

It explores the true counts N and the noisy components n together; a proposal for n is
accepted only if Finucan's mode of MD(Ñ, max(n, 0)) still equals the released components.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import FloatArray, IntArray, RNGLike
from postdp.bayes.diagnostics import effective_sample_size, split_rhat
from postdp.bayes.inference import _mechs, _reach, _release
from postdp.errors import ValidationError
from postdp.mechanisms import Geometric

__all__ = ["PosteriorSamples", "sample_posterior"]


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

    def credible_intervals(self, level: float = 0.95) -> ConfidenceInterval:
        """Equal-tailed credible intervals of each N_s from the pooled chains.

        Examples
        --------
        >>> from postdp import Geometric
        >>> g = Geometric(1.0)
        >>> res = sample_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g,
        ...                        n_draws=400, chains=2, rng=0)
        >>> res.credible_intervals().low.shape
        (2,)
        """
        if not 0.0 < level < 1.0:
            raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
        flat = self.samples.reshape(-1, self.samples.shape[-1])
        tail = (1.0 - level) / 2.0
        low, high = np.quantile(flat, [tail, 1.0 - tail], axis=0)
        return ConfidenceInterval(low, high, level)

    def to_frame(self, *, level: float = 0.95) -> pd.DataFrame:
        """One row per component: posterior mean, sd, credible interval, ESS and R-hat.

        Examples
        --------
        >>> from postdp import Geometric
        >>> g = Geometric(1.0)
        >>> res = sample_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g,
        ...                        n_draws=200, chains=2, rng=0)
        >>> list(res.to_frame().columns)
        ['component', 'mean', 'sd', 'ci_low', 'ci_high', 'level', 'ess', 'rhat']
        """
        flat = self.samples.reshape(-1, self.samples.shape[-1]).astype(np.float64)
        ci = self.credible_intervals(level)
        return pd.DataFrame(
            {
                "component": [f"N{s + 1}" for s in range(flat.shape[1])],
                "mean": flat.mean(axis=0),
                "sd": flat.std(axis=0, ddof=1),
                "ci_low": ci.low,
                "ci_high": ci.high,
                "level": ci.level,
                "ess": self.ess,
                "rhat": self.rhat,
            }
        )


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
    from postdp.bayes._sweeps import run_sweeps  # compiled on first use

    noisy = np.broadcast_to(k, (C, S)).copy()  # the release itself is a valid latent state
    jitter = np.stack([m.sample(np.zeros(C, dtype=np.int64), rng=gen) for m in mechs], axis=1)
    N = np.ascontiguousarray(np.maximum(k + jitter, 0), dtype=np.int64)
    kept = np.empty((C, draws, S), dtype=np.int64)
    accepted = run_sweeps(
        gen,
        N,
        noisy,
        np.ascontiguousarray(k, dtype=np.int64),
        t,
        log_a=np.array([math.log(m.a) for m in mechs]),
        reach=np.array([_reach(m) for m in mechs], dtype=np.int64),
        rates=np.array([m.epsilon / m.sensitivity for m in mechs]),
        a_total=total_mechanism.a,
        burn=burn,
        thin=thin,
        kept=kept,
    )
    proposals = C * S * (burn + draws * thin)
    ess = np.array([effective_sample_size(kept[..., s]) for s in range(S)])
    rhat = np.array([split_rhat(kept[..., s]) for s in range(S)])
    return PosteriorSamples(kept, ess, rhat, accepted / max(proposals, 1))

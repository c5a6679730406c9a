"""MCMC diagnostics: effective sample size and split R-hat of several chains."""

from __future__ import annotations

import math

import numpy as np

from postdp._typing import ArrayLike

__all__ = ["effective_sample_size", "split_rhat"]


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

"""The sweeps of the many-component posterior sampler, compiled (private; study path).

One sweep visits every component s of every chain: an exact Gibbs draw of N_s on a window
around the latent noisy n_s, then an independence proposal n_s' = N_s + DG noise, kept iff
the release is still Finucan's mode of MD(Ñ, max(n', 0)). The same algorithm as the seed's
([wang2021] §4), written as loops so that one component step costs a
few microseconds instead of a round of numpy calls; the randomness comes from the caller's
numpy ``Generator`` (its bit generator advances as numpy's would).

The mode check compares, for w = max(n', 0), max_i w_i / (k_i + 1) with
min_{k_i > 0} w_i / k_i: the release k is the unique mode when the first is below the
second; within a relative 1e-12 of each other (a tie, frequent for small counts) Finucan's
algorithm decides which mode the release rule picks, run on the very weights the release
gives it (the unnormalised w: normalising first changes the last bits of its fractional
parts, and with them which of several tied modes it returns).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from postdp._typing import FloatArray, IntArray

__all__ = ["run_sweeps"]

# This module is imported only when the sampler runs (numba's import and compilation are not
# paid by ``import postdp``); machine code is cached on disk.
_jit = numba.njit(cache=True, nogil=True)


@_jit
def _finucan_is(
    k: IntArray, t: int, theta: FloatArray, work_k: IntArray, work_f: FloatArray
) -> bool:  # pragma: no cover - compiled
    """Whether Finucan's mode of MD(t, theta) (ties to the first category) equals ``k``."""
    S = k.size
    total = 0.0
    for i in range(S):
        total += theta[i]
    scale = t + S / 2.0
    for i in range(S):
        p = theta[i] / total if total > 0 else 1.0 / S
        x = scale * p
        work_k[i] = math.floor(x)
        work_f[i] = x - work_k[i]
    for _ in range(S + 1):
        gap = t
        for i in range(S):
            gap -= work_k[i]
        if gap == 0:
            break
        best = math.inf
        a = 0
        if gap > 0:
            for i in range(S):
                if theta[i] == 0.0 and total > 0:
                    continue
                q = (1.0 - work_f[i]) / (work_k[i] + 1)
                if q < best:
                    best, a = q, i
            work_k[a] += 1
            work_f[a] -= 1.0
        else:
            for i in range(S):
                if work_k[i] > 0:
                    q = work_f[i] / work_k[i]
                    if q < best:
                        best, a = q, i
            work_k[a] -= 1
            work_f[a] += 1.0
    for i in range(S):  # noqa: SIM110 - a plain loop compiles; all() over a generator not
        if work_k[i] != k[i]:
            return False
    return True


@_jit
def _holds(
    k: IntArray, t: int, noisy: IntArray, theta: FloatArray, work_k: IntArray, work_f: FloatArray
) -> bool:  # pragma: no cover - compiled
    """Whether the release ``k`` is the mode picked for the latent noisy components."""
    S = k.size
    total = 0.0
    for i in range(S):
        theta[i] = max(noisy[i], 0)  # the release's weights, as Finucan's algorithm gets them
        total += theta[i]
    up = -math.inf
    down = math.inf
    for i in range(S):
        w = theta[i] if total > 0 else 1.0  # the comparison does not depend on the scale
        up = max(up, w / (k[i] + 1))
        if k[i] > 0:
            down = min(down, w / k[i])
    if up < down * (1 - 1e-12):
        return True
    if abs(up - down) <= 1e-12 * max(down, 1e-300):
        return _finucan_is(k, t, theta, work_k, work_f)
    return False


@_jit
def _sweeps(
    gen: np.random.Generator,
    N: IntArray,
    noisy: IntArray,
    k: IntArray,
    t: int,
    log_a: FloatArray,
    reach: IntArray,
    rates: FloatArray,
    a_total: float,
    burn: int,
    thin: int,
    kept: IntArray,
) -> int:  # pragma: no cover - compiled
    C, S = N.shape
    draws = kept.shape[1]
    log_a_total = math.log(a_total)
    log_norm = math.log((1 - a_total) / (1 + a_total))
    log_tail = math.log(1 + a_total)
    width = 2 * int(reach.max()) + 1
    logp = np.empty(width)
    theta = np.empty(S)
    work_k = np.empty(S, dtype=np.int64)
    work_f = np.empty(S)
    proposal = np.empty(S, dtype=np.int64)
    accepted = 0
    for sweep in range(burn + draws * thin):
        for s in range(S):
            r = reach[s]
            for c in range(C):
                # exact Gibbs step for N_s on the window around n_s (inverse cdf, one uniform)
                rest = 0
                for j in range(S):
                    rest += N[c, j]
                rest -= N[c, s]
                low = max(noisy[c, s] - r, 0)
                best = -math.inf
                for o in range(2 * r + 1):
                    cand = low + o
                    total = rest + cand
                    if t > 0:
                        lg = abs(t - total) * log_a_total + log_norm
                    else:
                        lg = total * log_a_total - log_tail
                    lp = abs(noisy[c, s] - cand) * log_a[s] + lg
                    logp[o] = lp
                    best = max(best, lp)
                mass = 0.0
                for o in range(2 * r + 1):
                    logp[o] = math.exp(logp[o] - best)
                    mass += logp[o]
                u = gen.random() * mass
                pick = low + 2 * r
                for o in range(2 * r + 1):
                    u -= logp[o]
                    if u < 0.0:
                        pick = low + o
                        break
                N[c, s] = pick
                # independence proposal for n_s: N_s + double geometric noise
                e1 = gen.standard_exponential() / rates[s]
                e2 = gen.standard_exponential() / rates[s]
                for j in range(S):
                    proposal[j] = noisy[c, j]
                proposal[s] = pick + int(math.floor(e1) - math.floor(e2))
                if _holds(k, t, proposal, theta, work_k, work_f):
                    noisy[c, s] = proposal[s]
                    accepted += 1
        if sweep >= burn and (sweep - burn) % thin == 0:
            kept[:, (sweep - burn) // thin, :] = N
    return accepted


def run_sweeps(
    gen: np.random.Generator,
    N: IntArray,
    noisy: IntArray,
    k: IntArray,
    t: int,
    *,
    log_a: FloatArray,
    reach: IntArray,
    rates: FloatArray,
    a_total: float,
    burn: int,
    thin: int,
    kept: IntArray,
) -> int:
    """Run ``burn + draws * thin`` sweeps from the state (N, noisy), both of shape (C, S) and
    updated in place; every ``thin``-th sweep after ``burn`` is stored in ``kept``
    (shape (C, draws, S)). Returns the number of accepted latent moves."""
    return int(
        _sweeps(gen, N, noisy, k, int(t), log_a, reach, rates, float(a_total), burn, thin, kept)
    )

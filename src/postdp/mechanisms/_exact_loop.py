"""The exact sampler's compiled loops (private; :mod:`postdp.mechanisms.exact` drives them).

One value at a time, in the order of the bit contract of :mod:`postdp.mechanisms.exact`:
the loops read the random bits straight from the words a :class:`BitSource` holds, so a
value takes exactly the bits, and makes exactly the decisions, of the paper's steps drawn
one after another (Canonne, Kamath and Steinke 2020, Algorithms 1-3).

Every probability is a fraction of integers: a numerator and denominator below 2**112 as
two 56-bit limbs (high, low), so that a denominator times a chain step (at most 127) still
fits; a uniform draw below 2**56 reads one field, a wider one a high field and then a
56-bit low one (the same bits, most significant first).

The state array ``st`` carries ``st[0]``, the next bit to read, ``st[1]``, the bits that
may be read (the words hold two more beyond it), and ``st[2]``, a flag: :data:`SHORT` when
a value would read past the limit (the value is abandoned; its reads past the limit gave
zeros and every loop stops on the flag), :data:`SPECIAL` when it reaches a state the limbs
cannot hold (a chain beyond 127 steps, a Gaussian candidate beyond the table or with a
denominator of more than 96 bits, a Laplace value beyond int64). Either way the loop
returns the index of that value with ``st[0]`` at its first bit, and the driver either
fetches more bytes and calls again or draws that one value with Python integers.

Numba is imported with this module, which :mod:`postdp.mechanisms.exact` imports; nothing
imports that at ``import postdp``.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

__all__ = ["SHORT", "SPECIAL", "gaussian_loop", "laplace_loop"]

SHORT = 1
SPECIAL = 2
_MAX_K = 127
_njit = numba.njit(cache=True, nogil=True)
# gcd(r, k) for 0 <= r < k <= _MAX_K: a chain step's reduction without a division loop
_GCD = np.array(
    [[np.gcd(r, k) for r in range(_MAX_K + 1)] for k in range(_MAX_K + 1)], dtype=np.uint8
)


@_njit
def _read(words: Any, st: Any, width: int) -> Any:  # pragma: no cover - compiled
    """The next ``width`` bits (0 to 56), most significant first, as a uint64."""
    p = st[0]
    if p + width > st[1]:
        st[2] |= SHORT
        return np.uint64(0)
    i = p >> 6
    sh = np.uint64(p & 63)
    window = (words[i] << sh) | ((words[i + 1] >> np.uint64(1)) >> (np.uint64(63) - sh))
    st[0] = p + width
    return (window >> np.uint64(1)) >> (np.uint64(63) - np.uint64(width))


@_njit
def _bitlen(x: Any) -> int:  # pragma: no cover - compiled
    """The bits of ``x`` (a uint64), 0 for 0: one count-leading-zeros instruction."""
    return 64 - int(leading_zeros(x)) if x else 0  # type: ignore[call-arg]


@_njit
def _gcd(a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    while b:
        a, b = b, a % b
    return a


@_njit
def _uniform1(words: Any, st: Any, m: Any) -> Any:  # pragma: no cover - compiled
    """uniform(m) for 1 <= m < 2**56: ``width(m - 1)`` bits, again while at least m."""
    width = _bitlen(m - np.uint64(1))
    while True:
        u = _read(words, st, width)
        if u < m or st[2]:
            return u


@_njit
def _uniform2(words: Any, st: Any, mh: Any, ml: Any) -> Any:  # pragma: no cover - compiled
    """uniform(m) for m = mh * 2**56 + ml with mh >= 1 (m below 2**112): (high, low)."""
    if ml == 0:
        hi, lo = mh - np.uint64(1), np.uint64((1 << 56) - 1)
    else:
        hi, lo = mh, ml - np.uint64(1)
    width = (56 + _bitlen(hi)) if hi else _bitlen(lo)
    wh = max(width - 56, 0)
    wl = min(width, 56)
    while True:
        uh = _read(words, st, wh)
        ul = _read(words, st, wl)
        if uh < mh or (uh == mh and ul < ml) or st[2]:
            return uh, ul


@_njit
def _below(
    words: Any, st: Any, mh: Any, ml: Any, qh: Any, ql: Any
) -> Any:  # pragma: no cover - compiled
    """bernoulli(q / m) for two-limb q and m: uniform(m) < q (one field when m < 2**56)."""
    if mh == 0:
        uh = np.uint64(0)
        ul = _uniform1(words, st, ml)
    else:
        uh, ul = _uniform2(words, st, mh, ml)
    return uh < qh or (uh == qh and ul < ql)


@_njit
def _chain(
    words: Any, st: Any, ah: Any, al: Any, bh: Any, bl: Any
) -> Any:  # pragma: no cover - compiled
    """Algorithm 1 for gamma = a/b <= 1 in lowest terms (b below 2**96): K = 1, K += 1
    while bernoulli(gamma / K) (gamma / K in lowest terms), true when K ends odd."""
    mask = np.uint64((1 << 56) - 1)
    s56 = np.uint64(56)
    if not _below(words, st, bh, bl, ah, al):  # K = 1: bernoulli(a / b) itself
        return True
    k = np.uint64(2)
    while True:
        if st[2]:
            return False
        # gamma / K = (a / g) / (b K / g) with g = gcd(a, K) = gcd(a mod K, K)
        r = (al % k) if ah == 0 else ((((ah % k) << s56) | al) % k)
        g = np.uint64(_GCD[k, r])
        if g == 1:
            qh, ql, f = ah, al, k
        else:
            qh = ah // g
            ql = (((ah % g) << s56) | al) // g
            f = k // g
        pl = bl * f
        if not _below(words, st, bh * f + (pl >> s56), pl & mask, qh, ql):
            return (k & np.uint64(1)) == np.uint64(1)
        k += np.uint64(1)
        if k > np.uint64(_MAX_K):
            st[2] |= SPECIAL
            return False


@_njit
def _exp1(words: Any, st: Any) -> Any:  # pragma: no cover - compiled
    """bernoulli_exp(1): the chain for gamma = 1, whose first step reads nothing."""
    k = np.uint64(2)
    while True:
        if st[2]:
            return False
        if _uniform1(words, st, k) != np.uint64(0):
            return (k & np.uint64(1)) == np.uint64(1)
        k += np.uint64(1)


@_njit
def _laplace(
    words: Any, st: Any, s: int, t: int, rnum: Any, rden: Any
) -> Any:  # pragma: no cover - compiled
    """Algorithm 2, one value: P[z] proportional to exp(-|z| s / t) (t below 2**56)."""
    tt = np.uint64(t)
    vmax = ((1 << 62) - t) // t
    zero = np.uint64(0)
    while True:
        if st[2]:
            return 0
        u = _uniform1(words, st, tt)
        if rnum.size:  # u / t in lowest terms from the table
            a, b = rnum[u], rden[u]
        else:
            g = _gcd(u, tt)
            a, b = u // g, tt // g
        if not _chain(words, st, zero, a, zero, b):
            continue
        v = 0
        while _exp1(words, st):
            v += 1
            if v > vmax:  # beyond int64: Python integers
                st[2] |= SPECIAL
                return 0
        y = (np.int64(u) + t * v) // s
        negative = _read(words, st, 1) == zero  # bernoulli(1/2) = uniform(2) < 1
        if st[2]:
            return 0
        if negative and y == 0:
            continue
        return -y if negative else y


@_njit
def laplace_loop(
    words: Any, st: Any, out: Any, i: int, s: int, t: int, rnum: Any, rden: Any
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with Algorithm 2's values; the index where it stopped."""
    n = out.size
    while i < n:
        start = st[0]
        y = _laplace(words, st, s, t, rnum, rden)
        if st[2]:
            st[0] = start
            return i
        out[i] = y
        i += 1
    return i


@_njit
def gaussian_loop(
    words: Any,
    st: Any,
    out: Any,
    i: int,
    t: int,
    rnum: Any,
    rden: Any,
    floor: Any,
    ah: Any,
    al: Any,
    bh: Any,
    bl: Any,
    wide: Any,
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with Algorithm 3's values: a candidate y of the discrete Laplace of
    scale t, kept with probability exp(-gamma(|y|)), gamma's floor and fraction from the
    table (floor(gamma) draws of bernoulli_exp(1), false at the first false, then the
    chain of the fraction); the index where it stopped."""
    n = out.size
    size = floor.size
    while i < n:
        start = st[0]
        while True:
            y = _laplace(words, st, 1, t, rnum, rden)
            if st[2]:
                break
            mag = -y if y < 0 else y
            if mag >= size or wide[mag]:
                st[2] |= SPECIAL
                break
            keep = True
            for _ in range(floor[mag]):
                if not _exp1(words, st):
                    keep = False
                    break
            if keep:
                keep = _chain(words, st, ah[mag], al[mag], bh[mag], bl[mag])
            if st[2]:
                break
            if keep:
                break
        if st[2]:
            st[0] = start
            return i
        out[i] = y
        i += 1
    return i

"""The exact sampler's compiled loops (private; :mod:`postdp.mechanisms.exact` drives them).

One value at a time, in the order of the bit contract of :mod:`postdp.mechanisms.exact`:
the loops read the random bits straight from the words a :class:`BitSource` holds, so a
value takes exactly the bits, and makes exactly the decisions, of the contract's steps
drawn one after another (Canonne, Kamath and Steinke 2020, Algorithms 2 and 3, with
Bernoulli(exp(-gamma)) as a comparison with exp(-gamma)'s digits, or Algorithm 1).

A probability ``p`` in [0, 1) is held as ``P = floor(p * 2**64)``, its first 64 binary
digits, and ``M``: when ``p * 2**64`` is an integer, the bit of p's last 1 digit (``P &
-P``; 1 for p = 0, a mark the chain checks before it draws), else 0 (always 0 for
exp(-gamma), which is irrational for gamma > 0). ``bernoulli(p)`` compares the random bits,
as the binary digits of a uniform U in [0, 1), with p's digits and stops at the first digit
that settles U < p: one 64-bit window, an exclusive or, ``M`` to stop at p's last digit,
and a count of leading zeros, without a branch on the outcome (:func:`_bernoulli`). The
digits of exp(-gamma) come in tables computed exactly with Python integers
(:mod:`postdp.mechanisms.exact`). Algorithm 1's chain, for Algorithm 2's u/t when t is
beyond the table, needs no wide integers either: the floor of a floor is the floor
(``floor(floor(x) / k) = floor(x / k)``), so gamma / K's digits are ``P // K``.

The state array ``st`` carries ``st[0]``, the next bit to read, ``st[1]``, the bits that
may be read (the words hold two more beyond it), and ``st[2]``, a flag: :data:`SHORT` when
a value would read past the limit (the value is abandoned; every loop stops on the flag),
:data:`SPECIAL` when it reaches a state the loops leave to Python integers (a comparison
not settled by 64 digits, probability 2**-64 per draw; a Gaussian candidate beyond the
table; a Laplace value beyond int64). Either way the loop returns the index of that value
with ``st[0]`` at its first bit, and the driver either fetches more bytes and calls again
or draws that one value with Python integers.

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
_njit = numba.njit(cache=True, nogil=True)


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
def _uniform(words: Any, st: Any, m: Any) -> Any:  # pragma: no cover - compiled
    """uniform(m) for 1 <= m < 2**56: ``width(m - 1)`` bits, again while at least m."""
    width = _bitlen(m - np.uint64(1))
    while True:
        u = _read(words, st, width)
        if u < m or st[2]:
            return u


@_njit
def _bernoulli(words: Any, st: Any, P: Any, M: Any) -> Any:  # pragma: no cover - compiled
    """bernoulli(p) for p > 0 with digits ``(P, M)``: the bits read up to the first that
    differs from p's (true when p's digit there is 1), or up to p's last digit (false
    when they all agree)."""
    pos = st[0]
    if pos + 64 > st[1]:
        st[2] |= SHORT
        return False
    i = pos >> 6
    sh = np.uint64(pos & 63)
    w = (words[i] << sh) | ((words[i + 1] >> np.uint64(1)) >> (np.uint64(63) - sh))
    x = (w ^ P) | M  # M: stop at p's last digit at the latest
    if x == 0:  # 64 digits equal and p's go on: Python integers read on
        st[2] |= SPECIAL
        return False
    lead = 64 - _bitlen(x)  # the digits before the one that settles it
    st[0] = pos + lead + 1
    return (((P & ~w) >> np.uint64(63 - lead)) & np.uint64(1)) == np.uint64(1)


@_njit
def _chain(words: Any, st: Any, P: Any, M: Any) -> Any:  # pragma: no cover - compiled
    """Algorithm 1 for gamma in [0, 1) with digits ``(P, M)``: K = 1, K += 1 while
    bernoulli(gamma / K), true when K ends odd."""
    if P == 0 and M != 0:  # gamma = 0: bernoulli(0) reads nothing
        return True
    if not _bernoulli(words, st, P, M):  # K = 1
        return True
    k = np.uint64(2)
    while True:
        if st[2]:
            return False
        q = P // k
        # gamma / K's expansion ends within 64 digits when gamma's does and K divides P
        mk = (q & (~q + np.uint64(1))) if (M != 0 and q * k == P) else np.uint64(0)
        if not _bernoulli(words, st, q, mk):
            return (k & np.uint64(1)) == np.uint64(1)
        k += np.uint64(1)


@_njit
def _fraction(u: Any, t: Any) -> Any:  # pragma: no cover - compiled
    """The digits of u/t (u < t < 2**56) by long division, eight bits at a time."""
    r = u
    q = np.uint64(0)
    for _ in range(8):
        r = r << np.uint64(8)
        q = (q << np.uint64(8)) | (r // t)
        r = r % t
    if r:
        return q, np.uint64(0)
    return q, ((q & (~q + np.uint64(1))) if q else np.uint64(1))


@_njit
def _laplace(
    words: Any, st: Any, s: int, t: int, vmax: int, eu: Any, e1: Any
) -> Any:  # pragma: no cover - compiled
    """Algorithm 2, one value: P[z] proportional to exp(-|z| s / t) (t below 2**56; u kept
    with probability exp(-u/t) by comparison with ``eu[u]``, or by Algorithm 1 when ``eu``
    is empty; ``e1`` the digits of exp(-1); the geometric part v at most ``vmax``, else
    Python integers)."""
    tt = np.uint64(t)
    half = np.uint64(1 << 63)
    zero = np.uint64(0)
    while True:
        if st[2]:
            return 0
        u = _uniform(words, st, tt)
        if eu.size:  # exp(-u/t)'s digits from the table; exp(0) = 1 reads nothing
            if u != zero and not _bernoulli(words, st, eu[u], zero):
                continue
        else:
            P, M = _fraction(u, tt)
            if not _chain(words, st, P, M):
                continue
        v = 0
        while _bernoulli(words, st, e1, zero):  # bernoulli_exp(1)
            v += 1
            if v > vmax:  # beyond int64: Python integers
                st[2] |= SPECIAL
                return 0
        x = np.int64(u) + t * v
        y = x if s == 1 else x // s
        negative = _bernoulli(words, st, half, half)  # bernoulli(1/2)
        if st[2]:
            return 0
        if negative and y == 0:
            continue
        return -y if negative else y


@_njit
def laplace_loop(
    words: Any, st: Any, out: Any, i: int, s: int, t: int, eu: Any, e1: Any
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with Algorithm 2's values; the index where it stopped."""
    n = out.size
    vmax = ((1 << 62) - t) // t
    while i < n:
        start = st[0]
        y = _laplace(words, st, s, t, vmax, eu, e1)
        if st[2]:
            st[0] = start
            return i
        out[i] = y
        i += 1
    return i


@_njit
def gaussian_loop(
    words: Any, st: Any, out: Any, i: int, t: int, eu: Any, e1: Any, eg: Any, centre: int
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with Algorithm 3's values: a candidate y of the discrete Laplace of
    scale t, kept with probability exp(-gamma(|y|)) by comparison with ``eg[|y|]`` (at
    ``|y| == centre``, gamma is 0 and it is kept without a draw; ``centre`` is -1 when
    sigma^2 / t is not an integer); the index where it stopped."""
    n = out.size
    size = eg.size
    vmax = ((1 << 62) - t) // t
    zero = np.uint64(0)
    while i < n:
        start = st[0]
        while True:
            y = _laplace(words, st, 1, t, vmax, eu, e1)
            if st[2]:
                break
            mag = -y if y < 0 else y
            if mag >= size:
                st[2] |= SPECIAL
                break
            if mag == centre or _bernoulli(words, st, eg[mag], zero):
                break
            if st[2]:
                break
        if st[2]:
            st[0] = start
            return i
        out[i] = y
        i += 1
    return i

"""The exact sampler's compiled loops (private; :mod:`postdp.mechanisms.exact` drives them).

One value at a time, in the order of the bit contract of :mod:`postdp.mechanisms.exact`:
the loops read the random bits straight from the words a :class:`BitSource` holds, so a
value takes exactly the bits, and makes exactly the decisions, of the contract's steps
drawn one after another (the discrete Laplace by inversion, split in two above scale 8192;
Canonne, Kamath and Steinke 2020, Algorithm 3, for the discrete Gaussian; Bernoulli(p) as a
comparison with p's digits).

A probability ``p`` in (0, 1), irrational here (exp(-gamma) for a rational gamma > 0), is
held as ``P = floor(p * 2**64)``, its first 64 binary digits. ``bernoulli(p)`` compares the
random bits, as the binary digits of a uniform U in [0, 1), with p's digits and stops at
the first digit that differs, which settles U < p: one 64-bit window, an exclusive or and a
count of leading zeros, without a branch on the outcome (:func:`_bernoulli`). The
inversion (:func:`_geometric`) compares one 64-bit window with a table of powers of
exp(-1/scale), found through a guide table, in the same way. The digits come in tables
computed exactly with Python integers (:mod:`postdp.mechanisms.exact`).

Every helper is inlined into the two loops (``inline="always"``), and the rare states are
flagged through one exit per helper, without a branch each: measured here, a call per
helper and an early return per state made a value several times slower (a discrete
Laplace value by inversion 180 to 220 ns, against some 40 ns now).

The state array ``st`` carries ``st[0]``, the next bit to read, ``st[1]``, the bits that
may be read (the words hold two more beyond it), and ``st[2]``, a flag: :data:`SHORT` when
a value would read past the limit (the value is abandoned; every loop stops on the flag),
:data:`SPECIAL` when it reaches a state the loops leave to Python integers (a comparison
not settled by 64 digits, probability 2**-64 per draw; a uniform below every power in the
inversion's table; a Gaussian candidate beyond its table). Either way the loop returns the
index of that value with ``st[0]`` at its first bit, and the driver either fetches more
bytes and calls again or draws that one value with Python integers.

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
_inline = numba.njit(cache=True, nogil=True, inline="always")


@_inline
def _window(words: Any, pos: int) -> Any:  # pragma: no cover - compiled
    """The 64 bits from bit ``pos`` on, as a uint64 (the words hold two beyond the limit,
    so this reads in bounds even where a value may not use the bits)."""
    i = pos >> 6
    sh = np.uint64(pos & 63)
    return (words[i] << sh) | ((words[i + 1] >> np.uint64(1)) >> (np.uint64(63) - sh))


@_inline
def _read(words: Any, st: Any, width: int) -> Any:  # pragma: no cover - compiled
    """The next ``width`` bits (0 to 56), most significant first, as a uint64."""
    p = st[0]
    if p + width > st[1]:
        st[2] |= SHORT
        return np.uint64(0)
    window = _window(words, p)
    st[0] = p + width
    return (window >> np.uint64(1)) >> (np.uint64(63) - np.uint64(width))


@_inline
def _clz(x: Any) -> Any:  # pragma: no cover - compiled
    """The leading zeros of ``x`` (a uint64; 64 for 0), as an int64: one instruction."""
    return np.int64(leading_zeros(x))  # type: ignore[call-arg]


@_inline
def _bitlen(x: Any) -> int:  # pragma: no cover - compiled
    """The bits of ``x`` (a uint64), 0 for 0."""
    return 64 - int(_clz(x)) if x else 0


@_inline
def _uniform(words: Any, st: Any, m: Any) -> Any:  # pragma: no cover - compiled
    """uniform(m) for 1 <= m < 2**56: ``width(m - 1)`` bits, again while at least m."""
    width = _bitlen(m - np.uint64(1))
    while True:
        u = _read(words, st, width)
        if u < m or st[2]:
            return u


@_inline
def _bernoulli(words: Any, st: Any, P: Any) -> Any:  # pragma: no cover - compiled
    """bernoulli(p) for an irrational p with digits ``P``: the bits read up to the first
    that differs from p's, true when p's digit there is 1."""
    pos = st[0]
    w = _window(words, pos)
    x = w ^ P
    lead = _clz(x | np.uint64(1))
    # one exit for the rare states: past the limit, or 64 digits equal (Python integers
    # read on)
    flag = np.int64(pos + 64 > st[1]) * SHORT | np.int64(x == 0) * SPECIAL
    if flag:
        st[2] |= flag
        return False
    st[0] = pos + lead + 1  # the digits before the one that settles it, and that one
    return (((P & ~w) >> np.uint64(63 - lead)) & np.uint64(1)) == np.uint64(1)


@_inline
def _geometric(words: Any, st: Any, T: Any, guide: Any) -> Any:  # pragma: no cover - compiled
    """G with P[G >= g] = exp(-g / scale), by inversion: ``T[g]`` holds the digits of
    exp(-g / scale) for g >= 1 up to the first that is 0 (``T[0]`` is not read as a
    bound). G is the largest g with U < exp(-g / scale), settled by U's first 64 digits w
    unless w equals ``T[G + 1]``; the bits read are those up to the later of the digits
    that place U below exp(-G / scale) and at or above exp(-(G + 1) / scale). ``guide``
    gives where to start looking: for the buckets of w by its leading zeros and the b bits
    after its leading one (``guide.size == 64 << b``), G at the bucket's largest w, a lower
    bound."""
    pos = st[0]
    w = _window(words, pos)
    b = _bitlen(np.uint64(guide.size)) - 7  # the guide's bits after the leading one
    lz = _clz(w | np.uint64(1))
    bucket = ((w << np.uint64(lz)) >> np.uint64(63 - b)) & np.uint64((1 << b) - 1)
    g = np.int64(guide[(lz << b) | np.int64(bucket)])
    while w < T[g + 1]:  # ends: the last power in T is 0
        g += 1
    below = T[g + 1]
    lead = _clz(w ^ below)
    # the digit that puts U below exp(-G / scale). For G = 0 there is none (U < 1
    # always); T[0] is 0 there, and w's leading zeros never outnumber those it shares
    # with the smaller T[1], so the maximum below is ``lead`` without a branch.
    other = _clz(w ^ T[g])
    # One exit, the rare states flagged without a branch each (several early returns
    # made this function four times slower): past the limit, or 64 digits equal to the
    # next power's (w = 0 among them, below every power in T), where Python integers
    # read on.
    flag = np.int64(pos + 64 > st[1]) * SHORT | np.int64(w == below) * SPECIAL
    if flag:
        st[2] |= flag
        return 0
    st[0] = pos + max(lead, other) + 1
    return g


@_inline
def _sign(words: Any, st: Any, y: Any) -> Any:  # pragma: no cover - compiled
    """The sign of a magnitude y, bernoulli(1/2): one bit, 0 for negative; -1 for a
    negative zero (a new start), and -1 with the flag set for a rare state."""
    pos = st[0]
    negative = ((words[pos >> 6] >> np.uint64(63 - (pos & 63))) & np.uint64(1)) == 0
    flag = st[2] | np.int64(pos >= st[1]) * SHORT
    if flag:
        st[2] |= flag
        return 0, False
    st[0] = pos + 1
    if negative and y == 0:
        return 0, False
    return (-y if negative else y), True


@_inline
def _remainder(words: Any, st: Any, k: Any, eb: Any) -> Any:  # pragma: no cover - compiled
    """b = uniform(k) (k a power of two: never read again), kept with probability exp(-b /
    scale) by comparison with ``eb[b]`` (b = 0 kept without a draw), else a new b."""
    while True:
        b = _uniform(words, st, k)
        if b == np.uint64(0) or st[2] or _bernoulli(words, st, eb[b]) or st[2]:
            return np.int64(b)


@_inline
def _laplace(
    words: Any, st: Any, k: int, eb: Any, T: Any, guide: Any
) -> Any:  # pragma: no cover - compiled
    """One value with P[z] proportional to exp(-|z| / scale). Its magnitude is k a + b: a
    by inversion (:func:`_geometric`) against ``T``, the digits of exp(-g k / scale), with
    its ``guide``; for k > 1, b from :func:`_remainder`. Then its sign (:func:`_sign`),
    and a new start for a negative zero."""
    while True:
        y = _geometric(words, st, T, guide)
        if k > 1:
            y = y * k + _remainder(words, st, np.uint64(k), eb)
        z, done = _sign(words, st, y)
        if done or st[2]:
            return z


@_njit
def laplace_loop(
    words: Any, st: Any, out: Any, i: int, k: int, eb: Any, T: Any, guide: Any
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with the discrete Laplace's values (:func:`_laplace`); the index
    where it stopped. The whole magnitude by inversion (k = 1) has its own loop: with the
    remainder's steps in it, the same values took two to three times as long."""
    n = out.size
    while i < n:
        start = st[0]
        if k == 1:
            while True:
                z, done = _sign(words, st, _geometric(words, st, T, guide))
                if done or st[2]:
                    break
        else:
            z = _laplace(words, st, k, eb, T, guide)
        if st[2]:
            st[0] = start
            return i
        out[i] = z
        i += 1
    return i


@_njit
def gaussian_loop(
    words: Any,
    st: Any,
    out: Any,
    i: int,
    k: int,
    eb: Any,
    T: Any,
    guide: Any,
    eg: Any,
    centre: int,
) -> int:  # pragma: no cover - compiled
    """Fill ``out[i:]`` with Algorithm 3's values: a candidate y of the discrete Laplace of
    scale t, kept with probability exp(-gamma(|y|)) by comparison with ``eg[|y|]`` (at
    ``|y| == centre``, gamma is 0 and it is kept without a draw; ``centre`` is -1 when
    sigma^2 / t is not an integer); the index where it stopped."""
    n = out.size
    size = eg.size
    while i < n:
        start = st[0]
        while True:
            y = _laplace(words, st, k, eb, T, guide)
            mag = -y if y < 0 else y
            # bernoulli(exp(-gamma(|y|))) against eg[|y|] (exp(-gamma) is irrational, so
            # its expansion never ends), written out so that the rare states are flagged
            # without a branch each: a candidate beyond the table, or 64 digits equal
            P = eg[min(mag, size - 1)]
            pos = st[0]
            w = _window(words, pos)
            x = w ^ P
            lead = _clz(x | np.uint64(1))
            kept = ((P & ~w) >> np.uint64(63 - lead)) & np.uint64(1)
            drawn = mag != centre  # at the centre gamma is 0: kept, nothing read
            flag = st[2] | np.int64(mag >= size) * SPECIAL
            flag |= np.int64(drawn) * (
                np.int64(x == 0) * SPECIAL | np.int64(pos + 64 > st[1]) * SHORT
            )
            if flag:
                st[2] |= flag
                break
            if not drawn:
                break
            st[0] = pos + lead + 1
            if kept:
                break
        if st[2]:
            st[0] = start
            return i
        out[i] = y
        i += 1
    return i

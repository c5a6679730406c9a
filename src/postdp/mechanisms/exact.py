"""Exact discrete Gaussian and discrete Laplace noise on the operating system's CSPRNG.

The release path's own sampler: integers only (no floating point touches a decision), the
randomness from ``os.urandom``, vectorised over a batch so that a nation's billions of
noisy counts can be drawn in hours, not days.

The algorithms are those of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for
Differential Privacy" (NeurIPS; arXiv:2004.00010): Algorithm 1 (a Bernoulli of
exp(-gamma) for a rational gamma), Algorithm 2 (the discrete Laplace of a rational scale)
and Algorithm 3 (the discrete Gaussian of a rational sigma^2, by rejection from a discrete
Laplace of scale floor(sigma) + 1). Every probability they draw against is a rational
number kept exactly, as integers (two 56-bit limbs where one 64-bit word is too small).

How random bits are used (what makes a draw reproducible from a fixed byte stream, and what
the tests check against a slow reference written with Python's exact fractions):

- bits are read from the byte stream most significant first;
- ``uniform(m)`` reads ``L = (m - 1).bit_length()`` bits as an unsigned integer and reads
  again while it is at least ``m`` (so ``uniform(1)`` reads nothing);
- ``bernoulli(p)``, for ``p = a/b`` in lowest terms, is ``uniform(b) < a``;
- ``bernoulli_exp(gamma)`` (Algorithm 1): for gamma <= 1, ``K = 1`` and ``K += 1`` while
  ``bernoulli(gamma / K)``, true when ``K`` ends odd; for gamma > 1, ``floor(gamma)`` draws
  of ``bernoulli_exp(1)`` (false at the first false), then ``bernoulli_exp(gamma -
  floor(gamma))``;
- the discrete Laplace of scale ``t/s`` (Algorithm 2) and the discrete Gaussian (Algorithm
  3) follow the paper step for step; the sign is ``bernoulli(1/2)``.

A batch runs the steps stage by stage for all its values at once, so the order in which
different values take their bits differs from drawing them one after another; one value
takes exactly the reference's bits. Rare states (a gamma's denominator beyond 96 bits, a
chain beyond 127 steps, a Gaussian candidate beyond the table) are finished element by
element with Python integers, from the same stream.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from postdp._typing import IntArray
from postdp.errors import ValidationError

__all__ = [
    "SAMPLER",
    "BitSource",
    "discrete_gaussian",
    "discrete_laplace",
    "sampler_version",
]

#: The sampler's name in ledger records and privacy statements.
SAMPLER = "postdp-exact"

_LIMB = 56
_MASK = np.uint64((1 << _LIMB) - 1)
_U56 = np.uint64(_LIMB)
# Chains longer than this finish element by element (probability below 1/127! per chain).
_MAX_K = 127
# Denominators below 2**_WIDE go through the two-limb path; beyond, element by element.
_WIDE = 96
# Denominators below 2**_NARROW (times _MAX_K) stay in one 56-bit word.
_NARROW = 48
# Values drawn per pass: keeps the temporaries in cache.
_BATCH = 1 << 16
# Gaussian candidates |y| below this many multiples of t have a precomputed gamma.
_TABLE_T = 40
_TABLE_MAX = 1 << 16


def sampler_version() -> str:
    """``postdp-exact <postdp's version>``: the sampler as named in a privacy statement.

    Examples
    --------
    >>> sampler_version().startswith("postdp-exact ")
    True
    """
    from importlib.metadata import PackageNotFoundError, version

    try:  # the installed distribution's (postdp.__version__ is a later layer's name)
        number = version("postdp")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree uninstalled
        number = "unknown"
    return f"{SAMPLER} {number}"


class BitSource:
    """Random bits, most significant first, from a byte stream.

    Parameters
    ----------
    read : callable, optional
        ``read(n)`` returns ``n`` random bytes; default ``os.urandom`` (the operating
        system's CSPRNG). A fixed stream (e.g. SHAKE-256 output) makes draws reproducible
        for tests; nothing else should pass one.
    chunk : int, default 65536
        Bytes asked of ``read`` at a time (at least).

    Examples
    --------
    >>> src = BitSource(lambda n: bytes([0b10110000]) * n)
    >>> src.take_int(4), src.take_int(4), src.take_int(3)
    (11, 0, 5)
    """

    __slots__ = ("_chunk", "_pos", "_read", "_read_bytes", "_words")

    def __init__(self, read: Callable[[int], bytes] | None = None, *, chunk: int = 1 << 16):
        self._read = os.urandom if read is None else read
        self._chunk = max(64, int(chunk))
        self._words = np.zeros(0, dtype=np.uint64)
        self._pos = 0  # the next unread bit, counted from the first of self._words
        self._read_bytes = 0

    def _reserve(self, nbits: int) -> None:
        """At least ``nbits`` unread bits and two whole words more."""
        have = self._words.size * 64 - self._pos
        if have >= nbits + 128:
            return
        start = self._pos >> 6
        need = nbits + 192 - have
        nbytes = -(-max(self._chunk, -(-need // 8)) // 8) * 8  # whole words
        raw = self._read(nbytes)
        if not isinstance(raw, bytes | bytearray) or len(raw) != nbytes:
            raise RuntimeError("the random byte source returned the wrong number of bytes")
        new = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
        self._read_bytes += nbytes
        self._words = np.concatenate((self._words[start:], new))
        self._pos -= start * 64

    def _at(self, off: IntArray, width: Any) -> Any:
        """The ``width``-bit integers (0 to 63 bits; an array, or one int for all) starting
        at bit offsets ``off``."""
        i = off >> 6
        shift = (off & 63).astype(np.uint64)
        window = self._words[i] << shift
        window |= (self._words[i + 1] >> np.uint64(1)) >> (np.uint64(63) - shift)
        return (window >> np.uint64(1)) >> (np.uint64(63) - np.asarray(width, dtype=np.uint64))

    def fields(self, *widths: IntArray) -> list[Any]:
        """For each element, consecutive fields of the given widths (0 to 56 bits each),
        element after element: ``fields(a, b)[0][i]`` is read just before ``[1][i]``."""
        total = widths[0].astype(np.int64)
        for w in widths[1:]:
            total = total + w
        need = int(total.sum())
        self._reserve(need)
        off = self._pos + np.cumsum(total) - total
        out = []
        for w in widths:
            out.append(self._at(off, w))
            off = off + w
        self._pos += need
        return out

    @property
    def consumed(self) -> int:
        """Bits read so far (those fetched ahead from the byte source not counted)."""
        return self._read_bytes * 8 - (self._words.size * 64 - self._pos)

    def same(self, n: int, width: int) -> Any:
        """``n`` consecutive fields of ``width`` bits each (0 to 56)."""
        if width == 0:
            return np.zeros(n, dtype=np.uint64)
        need = n * width
        self._reserve(need)
        off = np.arange(self._pos, self._pos + need, width, dtype=np.int64)
        self._pos += need
        return self._at(off, width)

    def take_int(self, nbits: int) -> int:
        """One unsigned integer of ``nbits`` bits (any number), as a Python int."""
        value = 0
        while nbits > 0:
            w = min(nbits, _LIMB)
            (part,) = self.fields(np.array([w], dtype=np.int64))
            value = (value << w) | int(part[0])
            nbits -= w
        return value


# -- element by element, with Python integers (rare states; exact) -------------------------
def _uniform_int(m: int, src: BitSource) -> int:
    width = (m - 1).bit_length()
    while True:
        u = src.take_int(width)
        if u < m:
            return u


def _bernoulli(p: Fraction, src: BitSource) -> bool:
    return _uniform_int(p.denominator, src) < p.numerator


def _chain_from(gamma: Fraction, k: int, src: BitSource) -> bool:
    """Algorithm 1's loop for gamma <= 1, from its step ``k`` on."""
    while _bernoulli(gamma / k, src):
        k += 1
    return k % 2 == 1


def _bernoulli_exp(gamma: Fraction, src: BitSource) -> bool:
    if gamma > 1:
        for _ in range(math.floor(gamma)):
            if not _chain_from(Fraction(1), 1, src):
                return False
        gamma -= math.floor(gamma)
    return _chain_from(gamma, 1, src)


def _laplace_int(scale: Fraction, src: BitSource) -> int:
    """Algorithm 2, one draw, with Python integers."""
    t, s = scale.numerator, scale.denominator
    while True:
        u = _uniform_int(t, src)
        if not _bernoulli_exp(Fraction(u, t), src):
            continue
        v = 0
        while _bernoulli_exp(Fraction(1), src):
            v += 1
        y = (u + t * v) // s
        negative = _bernoulli(Fraction(1, 2), src)
        if negative and y == 0:
            continue
        return -y if negative else y


# -- vectorised pieces ------------------------------------------------------------------
def _bitlen(x: Any) -> IntArray:
    """Bit lengths of uint64 values below 2**56, exactly."""
    _, e = np.frexp(x.astype(np.float64))
    e = e.astype(np.int64)
    low = (e > 0) & ((x >> np.maximum(e - 1, 0).astype(np.uint64)) == 0)  # rounded up
    out: IntArray = e - low
    return out


def _uniform1(m: Any, src: BitSource) -> Any:
    """``uniform(m)`` for each element of ``m`` (uint64, 1 <= m < 2**56)."""
    width = _bitlen(m - np.uint64(1))
    (u,) = src.fields(width)
    bad = np.flatnonzero(u >= m)
    while bad.size:
        (again,) = src.fields(width[bad])
        u[bad] = again
        bad = bad[again >= m[bad]]
    return u


def _uniform_same(n: int, m: int, src: BitSource) -> Any:
    """``n`` draws of ``uniform(m)`` for one modulus ``1 <= m < 2**56``."""
    width = (m - 1).bit_length()
    u = src.same(n, width)
    if m == 1 << width:
        return u
    mm = np.uint64(m)
    bad = np.flatnonzero(u >= mm)
    while bad.size:
        again = src.same(bad.size, width)
        u[bad] = again
        bad = bad[again >= mm]
    return u


def _less2(ah: Any, al: Any, bh: Any, bl: Any) -> Any:
    return (ah < bh) | ((ah == bh) & (al < bl))


def _uniform2(mh: Any, ml: Any, src: BitSource) -> tuple[Any, Any]:
    """``uniform(m)`` for two-limb ``m = mh * 2**56 + ml`` (m >= 1, below 2**112)."""
    borrow = ml == 0
    lo = np.where(borrow, _MASK, ml - np.uint64(1))
    hi = mh - borrow.astype(np.uint64)
    width = np.where(hi > 0, _LIMB + _bitlen(hi), _bitlen(lo))
    wh = np.maximum(width - _LIMB, 0)
    wl = np.minimum(width, _LIMB)
    uh, ul = src.fields(wh, wl)
    bad = np.flatnonzero(~_less2(uh, ul, mh, ml))
    while bad.size:
        h, lo_ = src.fields(wh[bad], wl[bad])
        uh[bad], ul[bad] = h, lo_
        bad = bad[~_less2(h, lo_, mh[bad], ml[bad])]
    return uh, ul


def _chain1(a: Any, b: Any, src: BitSource) -> Any:
    """Algorithm 1 for gamma = a/b <= 1 in lowest terms (uint64, b < 2**48); bool array."""
    n = a.size
    k = np.ones(n, dtype=np.uint64)
    live = np.arange(n)
    la, lb, lk = a, b, k
    while live.size:
        g = np.gcd(la, lk)  # gamma / K = (a/g) / (b * K/g) in lowest terms
        u = _uniform1(lb * (lk // g), src)
        go = u < la // g
        live = live[go]
        k[live] += np.uint64(1)
        la, lb, lk = la[go], lb[go], k[live]
        long = lk > _MAX_K
        if long.any():
            for i in live[long]:
                gamma = Fraction(int(a[i]), int(b[i]))
                k[i] = int(_chain_from(gamma, int(k[i]), src)) * 2 + 1  # odd if true
            keep = ~long
            live, la, lb, lk = live[keep], la[keep], lb[keep], lk[keep]
    return (k & np.uint64(1)).astype(bool)


def _chain2(ah: Any, al: Any, bh: Any, bl: Any, src: BitSource) -> Any:
    """Algorithm 1 for gamma = a/b <= 1 in lowest terms, a and b as two 56-bit limbs
    (b < 2**96); bool array."""
    n = ah.size
    k = np.ones(n, dtype=np.uint64)
    live = np.arange(n)
    vah, val, vbh, vbl = ah, al, bh, bl
    while live.size:
        lk = k[live]
        r = (((vah % lk) << _U56) | val) % lk  # a mod K
        g = np.gcd(r, lk)
        # numerator a / g: long division by the small g
        qh = vah // g
        ql = (((vah % g) << _U56) | val) // g
        # denominator b * (K / g)
        f = lk // g
        pl = vbl * f
        dl = pl & _MASK
        dh = vbh * f + (pl >> _U56)
        uh, ul = _uniform2(dh, dl, src)
        go = _less2(uh, ul, qh, ql)
        live = live[go]
        k[live] += np.uint64(1)
        vah, val, vbh, vbl = vah[go], val[go], vbh[go], vbl[go]
        long = k[live] > _MAX_K
        if long.any():
            for j, i in zip(np.flatnonzero(long), live[long], strict=True):
                a = (int(vah[j]) << _LIMB) | int(val[j])
                b = (int(vbh[j]) << _LIMB) | int(vbl[j])
                k[i] = int(_chain_from(Fraction(a, b), int(k[i]), src)) * 2 + 1
            keep = ~long
            live, vah, val, vbh, vbl = live[keep], vah[keep], val[keep], vbh[keep], vbl[keep]
    return (k & np.uint64(1)).astype(bool)


def _exp1(n: int, src: BitSource) -> Any:
    """``n`` draws of bernoulli_exp(1): K goes on while uniform(K) == 0 (the first step,
    bernoulli(1/1), is always true and reads nothing)."""
    k = np.full(n, 2, dtype=np.int64)
    live = np.arange(n)
    step = 2
    while live.size:
        live = live[_uniform_same(live.size, step, src) == 0]
        step += 1
        k[live] = step
    return (k & 1).astype(bool)


@functools.lru_cache(maxsize=64)
def _reduced(t: int) -> tuple[Any, Any]:
    """u/t in lowest terms for u = 0 .. t - 1 (numerators, denominators; 0 is 0/1)."""
    u = np.arange(t, dtype=np.uint64)
    g = np.gcd(u, np.uint64(t))
    return u // g, np.uint64(t) // g


def _laplace(n: int, s: int, t: int, src: BitSource) -> IntArray:
    """Algorithm 2: ``n`` draws with P[z] proportional to exp(-|z| s / t)."""
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    tt = np.uint64(t)
    while todo.size:
        u = _uniform_same(todo.size, t, src)
        if t <= _TABLE_MAX:  # D ~ Bernoulli(exp(-U/t)), U/t in lowest terms from a table
            num, den = _reduced(t)
            keep = _chain1(num[u], den[u], src)
        elif t < 1 << _NARROW:
            g = np.gcd(u, tt)
            keep = _chain1(u // g, tt // g, src)
        else:
            g = np.gcd(u, tt)
            zero = np.zeros_like(u)
            keep = _chain2(zero, u // g, zero, tt // g, src)
        again = todo[~keep]
        idx, u = todo[keep], u[keep]
        v = np.zeros(idx.size, dtype=np.int64)
        live = np.arange(idx.size)
        while live.size:  # V: how many Bernoulli(exp(-1)) succeed in a row
            live = live[_exp1(live.size, src)]
            v[live] += 1
        if v.size and int(v.max()) >= (1 << 62) // t:  # beyond int64: Python integers
            wide = [(int(a) + t * int(b)) // s for a, b in zip(u, v, strict=True)]
            y = np.array(wide, dtype=np.int64)
        else:
            y = (u.astype(np.int64) + t * v) // s
        bit = src.same(idx.size, 1)  # uniform(2)
        negative = bit == 0  # bernoulli(1/2) = uniform(2) < 1
        refused = negative & (y == 0)
        ok = ~refused
        out[idx[ok]] = np.where(negative, -y, y)[ok]
        todo = np.concatenate((again, idx[refused]))
    return out


class _GaussianTable:
    """gamma(y) = (y - sigma2/t)^2 / (2 sigma2) for the candidates y = 0, 1, ...: its floor
    and its fractional part in lowest terms, as limbs (wide ones flagged)."""

    __slots__ = ("ah", "al", "bh", "bl", "floor", "narrow", "size", "wide")

    def __init__(self, sigma2: Fraction, t: int):
        size = min(_TABLE_T * t + 1, _TABLE_MAX)
        self.size = size
        self.floor = np.zeros(size, dtype=np.int64)
        a = np.zeros(size, dtype=object)
        b = np.ones(size, dtype=object)
        centre = sigma2 / t
        for y in range(size):
            gamma = (y - centre) ** 2 / (2 * sigma2)
            whole = math.floor(gamma) if gamma > 1 else 0
            frac = gamma - whole
            self.floor[y] = whole
            a[y], b[y] = frac.numerator, frac.denominator
        bits = np.array([int(v).bit_length() for v in b])
        self.wide = bits > _WIDE  # element by element
        self.narrow = bool((bits <= _NARROW).all())
        self.ah, self.al = _limbs(a, self.wide)
        self.bh, self.bl = _limbs(b, self.wide)
        self.bl[self.wide] = 1


def _limbs(values: Any, skip: Any) -> tuple[Any, Any]:
    """Python integers below 2**112 as (high, low) 56-bit limbs; 0 where ``skip``."""
    mask = (1 << _LIMB) - 1
    kept = [0 if w else int(v) for v, w in zip(values, skip, strict=True)]
    high = np.array([v >> _LIMB for v in kept], dtype=np.uint64)
    low = np.array([v & mask for v in kept], dtype=np.uint64)
    return high, low


@functools.lru_cache(maxsize=64)
def _table(sigma2: Fraction, t: int) -> _GaussianTable:
    return _GaussianTable(sigma2, t)


def _accept(y: IntArray, sigma2: Fraction, t: int, table: _GaussianTable, src: BitSource) -> Any:
    """Algorithm 3's test: bernoulli_exp((|y| - sigma2/t)^2 / (2 sigma2)) for each y."""
    mag = np.abs(y)
    ok = np.ones(y.size, dtype=bool)
    inside = mag < table.size
    slot = np.where(inside, mag, 0)
    special = ~inside | table.wide[slot]
    fast = np.flatnonzero(~special)
    whole = table.floor[slot[fast]]
    count = np.zeros(fast.size, dtype=np.int64)
    live = np.flatnonzero(whole > 0)
    while live.size:  # floor(gamma) draws of bernoulli_exp(1), false at the first false
        hit = _exp1(live.size, src)
        ok[fast[live[~hit]]] = False
        live = live[hit]
        count[live] += 1
        live = live[count[live] < whole[live]]
    run = fast[ok[fast]]
    s = slot[run]
    if table.narrow:
        ok[run] = _chain1(table.al[s], table.bl[s], src)
    else:
        ok[run] = _chain2(table.ah[s], table.al[s], table.bh[s], table.bl[s], src)
    centre = sigma2 / t
    for i in np.flatnonzero(special):
        ok[i] = _bernoulli_exp((int(mag[i]) - centre) ** 2 / (2 * sigma2), src)
    return ok


def _rational(name: str, value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Fraction | int | float | np.number):
        raise ValidationError(f"`{name}` must be a positive rational number; got {value!r}")
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        raise ValidationError(f"`{name}` must be a positive rational number; got {value!r}")
    if isinstance(value, np.integer):  # exactly, not through a float
        out = Fraction(int(value))
    elif isinstance(value, np.floating):
        out = Fraction(float(value))
    else:
        out = Fraction(value)  # type: ignore[arg-type]  # Fraction, int or float here
    if out <= 0:
        raise ValidationError(f"`{name}` must be a positive rational number; got {value!r}")
    return out


def _size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValidationError(f"`size` must be a non-negative integer; got {size!r}")
    return int(size)


def discrete_gaussian(
    sigma2: Fraction | int | float, size: int, *, source: BitSource | None = None
) -> IntArray:
    """``size`` exact draws of the discrete Gaussian, P[k] ∝ exp(-k²/(2σ²)) on the integers.

    Parameters
    ----------
    sigma2 : Fraction, int or float
        σ² > 0, taken exactly (a float as the binary fraction it is; pass a Fraction for a
        rational such as the 2020 design's, so that no rounding enters).
    size : int
        Number of draws.
    source : BitSource, optional
        The random bits; default a fresh one on ``os.urandom``.

    Returns
    -------
    ndarray of int64, shape (size,)

    Notes
    -----
    Canonne, Kamath and Steinke (2020), Algorithm 3, with the bit contract of this module's
    docstring. Memory is a few arrays of one batch (65,536 values) beside the output.

    Examples
    --------
    >>> from fractions import Fraction
    >>> x = discrete_gaussian(Fraction(9, 4), 1000)
    >>> x.dtype, x.shape
    (dtype('int64'), (1000,))
    """
    s2 = _rational("sigma2", sigma2)
    n = _size(size)
    src = BitSource() if source is None else source
    t = math.isqrt(s2.numerator // s2.denominator) + 1  # floor(sigma) + 1
    table = _table(s2, t)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BATCH):
        want = min(_BATCH, n - start)
        todo = np.arange(want)
        while todo.size:
            y = _laplace(todo.size, 1, t, src)
            keep = _accept(y, s2, t, table, src)
            out[start + todo[keep]] = y[keep]
            todo = todo[~keep]
    return out


def discrete_laplace(
    scale: Fraction | int | float, size: int, *, source: BitSource | None = None
) -> IntArray:
    """``size`` exact draws of the discrete Laplace (two-sided geometric), P[k] ∝
    exp(-|k|/scale) on the integers.

    Parameters
    ----------
    scale : Fraction, int or float
        The scale Δ/ε > 0, taken exactly (a float as the binary fraction it is).
    size : int
        Number of draws.
    source : BitSource, optional
        The random bits; default a fresh one on ``os.urandom``.

    Returns
    -------
    ndarray of int64, shape (size,)

    Notes
    -----
    Canonne, Kamath and Steinke (2020), Algorithm 2, with scale ``t/s`` in lowest terms.
    A scale whose numerator is 2**56 or more is drawn element by element: exact, but some
    hundred times slower. A float epsilon can give one: 0.01 is the binary fraction
    5764607523034235/2**59, so 1/0.01 taken exactly has the numerator 2**59; pass
    ``Fraction(100)`` for the scale you mean.

    Examples
    --------
    >>> x = discrete_laplace(2, 1000)
    >>> x.dtype, x.shape
    (dtype('int64'), (1000,))
    """
    b = _rational("scale", scale)
    n = _size(size)
    src = BitSource() if source is None else source
    if b.numerator >= 1 << _LIMB:  # element by element
        return np.array([_laplace_int(b, src) for _ in range(n)], dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BATCH):
        want = min(_BATCH, n - start)
        out[start : start + want] = _laplace(want, b.denominator, b.numerator, src)
    return out

"""Exact discrete Gaussian and discrete Laplace noise on the operating system's CSPRNG.

The release path's own sampler: integers only (no floating point touches a decision), the
randomness from ``os.urandom``, vectorised over a batch so that a nation's billions of
noisy counts can be drawn in hours, not days.

The discrete Gaussian of a rational sigma^2 is Algorithm 3 of Canonne, Kamath and Steinke
(2020), "The Discrete Gaussian for Differential Privacy" (NeurIPS; arXiv:2004.00010): by
rejection from a discrete Laplace of scale floor(sigma) + 1, each candidate kept by a coin
that lands heads with probability exp(-gamma) for a rational gamma. The discrete Laplace is
drawn by inversion: a geometric magnitude G with P[G >= g] = exp(-g/scale), found by
comparing one uniform U with a table of exp(-g/scale)'s exact digits, and a sign. Above
scale 8192 the magnitude is k a + b, with k the least power of two such that scale / k is
at most 8192: a by inversion at scale / k and b uniform below k, kept by a coin of
probability exp(-b/scale) (so that P[k a + b] is proportional to exp(-(k a + b)/scale)).
Every coin compares a uniform U with the binary expansion of its probability directly,
which is exact (the algorithms ask only that the coins be exact), where the paper's
Algorithm 1 flips a chain of rational coins. The digits of exp(-gamma) are computed
exactly, with Python integers, from partial sums of the exponential series that bracket it,
and tabled for the gammas a draw can meet: two random bits on average and one comparison
per coin. Every probability drawn against is exact.

How random bits are used (what makes a draw reproducible from a fixed byte stream, and what
the tests check against a slow reference written with Python's exact fractions):

- bits are read from the byte stream most significant first;
- ``uniform(m)`` reads ``L = (m - 1).bit_length()`` bits as an unsigned integer and reads
  again while it is at least ``m`` (so ``uniform(1)`` reads nothing);
- ``bernoulli(p)``, p in [0, 1], reads bits as the binary digits of a uniform U
  in [0, 1) until they settle whether U < p: after ``j`` bits forming the integer ``r``,
  it stops when ``r != floor(p * 2**j)`` (U < p when ``r`` is the smaller) or when ``p *
  2**j`` is an integer (U >= p). So ``bernoulli(0)`` and ``bernoulli(1)`` read nothing,
  ``bernoulli(1/2)`` one bit, and any other p at most two bits on average, however long its
  denominator (the comparison with p's binary expansion of Knuth and Yao, 1976);
- ``bernoulli_exp(gamma)``, gamma >= 0 rational: ``bernoulli(exp(-gamma))`` by the same
  rule (exp(-gamma) is irrational for gamma > 0, so it stops at the first digit that
  differs; for gamma = 0 it reads nothing and is true);
- ``geometric(step)``, step > 0 rational: reads bits as the binary digits of a uniform U
  until they place U in one cell [exp(-(g + 1) step), exp(-g step)), and gives that g:
  after ``j`` bits forming the integer ``r``, the cell is that of the largest g with ``r <
  floor(exp(-g step) 2**j)`` (every r for g = 0), and it is settled when ``r >
  floor(exp(-(g + 1) step) 2**j)`` (exp(-g step) is irrational for g >= 1, so U is never
  on an edge);
- the discrete Laplace of scale ``t/s`` in lowest terms: ``k``, the least power of two
  with ``t <= 8192 k s``; ``a
  = geometric(k s/t)``; for k > 1, ``b = uniform(k)``, kept when ``bernoulli_exp(b s/t)``,
  else a new b; the magnitude ``y = k a + b`` (``a`` when k = 1); then the sign
  ``bernoulli(1/2)`` (true: negative), and a new start (a new a) for a negative zero;
- the discrete Gaussian (Algorithm 3), ``t = floor(sigma) + 1``: a candidate ``y`` of the
  discrete Laplace of scale t, kept when ``bernoulli_exp((|y| - sigma^2/t)^2 /
  (2 sigma^2))``, else a new candidate.

Values are drawn one after another, each taking exactly these bits (Numba-compiled loops,
:mod:`postdp.mechanisms._exact_loop`, reading the random words in place). Rare states (a
comparison that 64 digits leave unsettled, probability 2**-64 per coin; a uniform below
every power in the inversion's table, U < 2**-64; a Gaussian candidate beyond its table)
are drawn element by element with Python integers, from the same stream and the same bits;
so is every value of a scale above 2**29 (k above 2**16).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from postdp._typing import IntArray
from postdp.errors import ValidationError
from postdp.mechanisms import _exact_loop

__all__ = [
    "SAMPLER",
    "BitSource",
    "discrete_gaussian",
    "discrete_laplace",
    "sampler_version",
]

#: The sampler's name in ledger records and privacy statements.
SAMPLER = "postdp-exact"

# The widest field one read takes.
_LIMB = 56
# Gaussian candidates |y| below this many multiples of t have a precomputed gamma.
_TABLE_T = 40
_TABLE_MAX = 1 << 16
# Scales up to this are drawn by inversion against a table of exp(-g/scale)'s digits (at
# most 363,409 of them, 2.9 MB, and a guide of 4 MB); a larger one's magnitude is k a + b,
# a by inversion at scale / k and b below k, with k up to _KMAX in the compiled loops
# (scales up to 2**29); beyond, values are drawn element by element with Python integers.
_INVERT_MAX = 8192
_KMAX = 1 << 16
# Bits fetched ahead for the compiled loops at first (about 4,000 values' worth).
_AHEAD = 1 << 20


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

    def take_int(self, nbits: int) -> int:
        """One unsigned integer of ``nbits`` bits (any number), as a Python int."""
        value = 0
        while nbits > 0:
            w = min(nbits, _LIMB)
            (part,) = self.fields(np.array([w], dtype=np.int64))
            value = (value << w) | int(part[0])
            nbits -= w
        return value


_LOCAL = threading.local()


def _os_source() -> BitSource:
    """This thread's :class:`BitSource` on ``os.urandom``, kept between calls: a release
    draws some 30 small batches per subtree, and a fresh source for each fetched a whole
    chunk (64 KB) of the CSPRNG and dropped what it did not use. A new one in a new process,
    so that a forked child never reuses bits its parent fetched."""
    src = getattr(_LOCAL, "source", None)
    if src is None or _LOCAL.pid != os.getpid():
        src = _LOCAL.source = BitSource()
        _LOCAL.pid = os.getpid()
    return src


# -- element by element, with Python integers (rare states; exact) -------------------------
def _uniform_int(m: int, src: BitSource) -> int:
    width = (m - 1).bit_length()
    while True:
        u = src.take_int(width)
        if u < m:
            return u


# -- exp(-gamma)'s binary digits, exactly -----------------------------------------------
def _series(a: int, b: int, p: int) -> tuple[int, int]:
    """``(L, H)`` with ``L <= exp(-a/b) * 2**p <= H`` for ``0 <= a/b <= 1``.

    The series of exp(-x) alternates and its terms x**j / j! never grow, so exp(-x) lies
    between any two consecutive partial sums; the last two before a term below
    ``2**-(p + 2)``, summed exactly over one denominator ``b**k k!``."""
    if a == 0:
        return 1 << p, 1 << p
    k, fact = 1, 1
    while fact < 1 << (p + 2):
        k += 1
        fact *= k
    den = b**k * fact
    num, term = 0, den  # term j: a**j b**(k - j) k!/j!, an integer
    for j in range(k + 1):
        num += -term if j % 2 else term
        if j < k:
            term = term * a // (b * (j + 1))
    prev = num - (-1) ** k * a**k  # the partial sum one term shorter
    lo, hi = min(num, prev), max(num, prev)
    return (lo << p) // den, -((-hi << p) // den)


@functools.lru_cache(maxsize=256)
def _exp_whole(n: int, p: int) -> tuple[int, int]:
    """``(L, H)`` with ``L <= exp(-n) * 2**p <= H`` for an integer n >= 0."""
    low, high = 1 << p, 1 << p
    l1, h1 = _series(1, 1, p)
    for _ in range(n):
        low, high = (low * l1) >> p, -((-high * h1) >> p)
    return low, high


def _exp_digits(gamma: Fraction, bits: int) -> int:
    """``floor(exp(-gamma) * 2**bits)`` for a rational gamma > 0, exactly: enclosures of
    exp(-floor(gamma)) and exp(-frac(gamma)) at a working precision 64 bits beyond, more
    until the floor is settled (exp(-gamma) is irrational, so it always is)."""
    if gamma * 10 >= 7 * bits:  # gamma > bits * ln 2: below 2**-bits
        return 0
    whole = math.floor(gamma)
    frac = gamma - whole
    p = bits + 64
    while True:
        lw, hw = _exp_whole(whole, p)
        lf, hf = _series(frac.numerator, frac.denominator, p)
        low = ((lw * lf) >> p) >> (p - bits)
        high = (-((-hw * hf) >> p)) >> (p - bits)
        if low == high:
            return low
        p *= 2


def _bernoulli_exp(gamma: Fraction, src: BitSource) -> bool:
    """U < exp(-gamma), U's binary digits read one at a time until they settle it (none
    for gamma = 0)."""
    if gamma == 0:
        return True
    bits = 64
    digits = _exp_digits(gamma, bits)
    r, j = 0, 0
    while True:
        if j > bits:
            bits *= 2
            digits = _exp_digits(gamma, bits)
        if r != digits >> (bits - j):
            return r < digits >> (bits - j)
        r = 2 * r + src.take_int(1)
        j += 1


def _geometric_int(step: Fraction, src: BitSource) -> int:
    """G with P[G >= g] = exp(-g step), by inversion: U's digits read until they place U in
    one cell [exp(-(G + 1) step), exp(-G step)). After j digits forming the integer r, the
    cell is that of the largest g with r < floor(exp(-g step) 2**j) (every r for g = 0), and
    it is settled when r > floor(exp(-(g + 1) step) 2**j)."""
    bits = 64
    known: dict[int, int] = {}

    def floor_at(g: int, j: int) -> int:  # floor(exp(-g step) 2**j), g >= 1, j <= bits
        if g not in known:
            known[g] = _exp_digits(g * step, bits)
        return known[g] >> (bits - j)

    r, j = 0, 0
    while True:
        if j > bits:
            bits *= 2
            known.clear()
        guess = (j * math.log(2) - math.log(r + 1)) / float(step)  # a start; not a decision
        g = max(0, int(guess))
        while g > 0 and r >= floor_at(g, j):
            g -= 1
        while r < floor_at(g + 1, j):
            g += 1
        if r > floor_at(g + 1, j):
            return g
        r = 2 * r + src.take_int(1)
        j += 1


def _split(s: int, t: int) -> int:
    """k, the least power of two with t/(k s) <= _INVERT_MAX: the discrete Laplace of scale
    t/s draws its magnitude as k a + b, a by inversion at scale t/(k s), b below k (a
    power of two, so that uniform(k) never reads again)."""
    k = 1
    while t > _INVERT_MAX * s * k:
        k *= 2
    return k


def _laplace_int(scale: Fraction, src: BitSource) -> int:
    """The discrete Laplace, one draw, with Python integers."""
    t, s = scale.numerator, scale.denominator
    k = _split(s, t)
    while True:
        y = _geometric_int(Fraction(k * s, t), src)
        if k > 1:
            while True:
                b = _uniform_int(k, src)
                if _bernoulli_exp(Fraction(b * s, t), src):
                    break
            y = k * y + b
        negative = src.take_int(1) == 0  # bernoulli(1/2): one bit, 0 for negative
        if not (negative and y == 0):
            return -y if negative else y


def _gaussian_int(sigma2: Fraction, t: int, src: BitSource) -> int:
    """Algorithm 3, one draw, with Python integers."""
    centre = sigma2 / t
    while True:
        y = _laplace_int(Fraction(t), src)
        if _bernoulli_exp((abs(y) - centre) ** 2 / (2 * sigma2), src):
            return y


# -- the compiled loops' driver ----------------------------------------------------------
def _drive(n: int, src: BitSource, loop: Callable[..., int], one: Callable[[], int]) -> IntArray:
    """``n`` values: ``loop(words, st, out, i)`` fills ``out`` from ``i`` on until it needs
    more bits than are fetched (then more are fetched and it starts that value again) or
    meets a state for Python integers (then ``one()`` draws that value from its first bit)."""
    out = np.empty(n, dtype=np.int64)
    i = 0
    want = min(_AHEAD, n * 512)
    while i < n:
        src._reserve(want)
        st = np.array([src._pos, src._words.size * 64 - 128, 0], dtype=np.int64)
        j = int(loop(src._words, st, out, i))
        src._pos = int(st[0])
        if st[2] & _exact_loop.SHORT:
            if j == i:  # one value wants more bits than there were: fetch twice as many
                want = 2 * (src._words.size * 64 - src._pos)
        elif st[2] & _exact_loop.SPECIAL:
            out[j] = one()
            j += 1
        i = j
    return out


class _GaussianTable:
    """The digits of exp(-gamma(y)), gamma(y) = (y - sigma2/t)^2 / (2 sigma2), for the
    candidates y = 0, 1, ... (``eg``), and ``centre``, the y where gamma is 0 (-1 if
    sigma2/t is not an integer)."""

    __slots__ = ("centre", "eg", "size")

    def __init__(self, sigma2: Fraction, t: int):
        size = min(_TABLE_T * t + 1, _TABLE_MAX)
        self.size = size
        self.eg = np.zeros(size, dtype=np.uint64)
        centre = sigma2 / t
        self.centre = int(centre) if centre.denominator == 1 and centre < size else -1
        for y in range(size):
            gamma = (y - centre) ** 2 / (2 * sigma2)
            if gamma:
                self.eg[y] = _exp_digits(gamma, 64)


def _power_digits(s: int, t: int) -> list[int]:
    """``floor(exp(-g s/t) * 2**64)`` for g = 1, 2, ... up to and including the first that
    is 0, exactly: enclosures of exp(-g s/t) at 128 bits, each the previous one times an
    enclosure of exp(-s/t) (rounded outward), whose floors agree but where the value lies
    within some 2**-100 of a digit's edge; there the digits are computed on their own."""
    step = Fraction(s, t)
    p = 128
    whole = math.floor(step)
    frac = step - whole
    lw, hw = _exp_whole(whole, p)
    lf, hf = _series(frac.numerator, frac.denominator, p)
    one_lo, one_hi = (lw * lf) >> p, -((-hw * hf) >> p)
    low = high = 1 << p
    out: list[int] = []
    while not out or out[-1]:
        low, high = (low * one_lo) >> p, -((-high * one_hi) >> p)
        digits = low >> (p - 64)
        if digits != high >> (p - 64):
            digits = _exp_digits((len(out) + 1) * step, 64)
        out.append(digits)
    return out


@functools.lru_cache(maxsize=64)
def _powers(s: int, t: int) -> tuple[Any, Any]:
    """The inversion's tables for the scale t/s (at most _INVERT_MAX): the digits of exp(-g
    s/t) for g = 1, 2, ... up to and including the first that is 0 (index 0 holds 0, which
    the loops rely on), and the guide. The guide cuts the 64-bit windows w into buckets by their
    leading zeros and the next ``b`` bits after the leading one (b from 8 up to 14, more for
    a larger scale, so that a bucket spans about one g); for each bucket it holds the
    largest g with w < digits[g] at the bucket's largest w, where the search starts."""
    digits = np.array([0, *_power_digits(s, t)], dtype=np.uint64)
    b = min(max(8, math.ceil(t / s).bit_length() + 1), 14)
    lz = np.arange(64, dtype=np.uint64)[:, None]
    m = np.arange(1 << b, dtype=np.uint64)[None, :]
    rest = np.uint64((1 << (63 - b)) - 1)
    top = (np.uint64(1 << 63) | (m << np.uint64(63 - b)) | rest) >> lz
    rising = digits[1:][::-1]  # the powers from the smallest (0) up
    guide = rising.size - np.searchsorted(rising, top.ravel(), side="right")
    return digits, np.minimum(guide, digits.size - 2).astype(np.int32)


@functools.lru_cache(maxsize=64)
def _remainders(s: int, t: int, k: int) -> Any:
    """The digits of exp(-b s/t) for b = 1 .. k - 1 (index 0 holds 0, never read: b = 0 is
    kept without a draw), the coins of the magnitude's part b below k."""
    return np.array([0, *(_exp_digits(Fraction(b * s, t), 64) for b in range(1, k))], np.uint64)


def _tables(s: int, t: int) -> tuple[int, Any, Any, Any]:
    """What the compiled loops need for the discrete Laplace of scale t/s: k, the coins'
    digits for the part b below k, and the inversion's powers and guide at scale t/(k s)."""
    k = _split(s, t)
    inner = Fraction(t, k * s)
    powers, guide = _powers(inner.denominator, inner.numerator)
    return k, _remainders(s, t, k), powers, guide


@functools.lru_cache(maxsize=64)
def _table(sigma2: Fraction, t: int) -> _GaussianTable:
    return _GaussianTable(sigma2, t)


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
        The random bits; default this thread's on ``os.urandom`` (kept between calls; a
        new one in a new process).

    Returns
    -------
    ndarray of int64, shape (size,)

    Notes
    -----
    Canonne, Kamath and Steinke (2020), Algorithm 3, its candidates drawn as
    :func:`discrete_laplace` draws scale t = floor(sigma) + 1, with the bit contract of
    this module's docstring. Memory beside the output: the random bits fetched ahead (128
    KB at a time), the digits of exp(-gamma) for the candidates (at most 65,536 per
    sigma^2, 8 bytes each, kept for 64 of them) and the discrete Laplace's tables for t
    (below 0.2 MB for t up to 100, kept for 64 scales: the persons design's 33 sigmas have
    20 distinct t, and a cache smaller than that rebuilt every table at every call of a
    measure that cycles through them); about 0.05 s to build for each of the 2020 design's
    scales.

    Examples
    --------
    >>> from fractions import Fraction
    >>> x = discrete_gaussian(Fraction(9, 4), 1000)
    >>> x.dtype, x.shape
    (dtype('int64'), (1000,))
    """
    s2 = _rational("sigma2", sigma2)
    n = _size(size)
    src = _os_source() if source is None else source
    t = math.isqrt(s2.numerator // s2.denominator) + 1  # floor(sigma) + 1
    if _split(1, t) > _KMAX:  # sigma beyond 2**29: element by element
        return np.array([_gaussian_int(s2, t, src) for _ in range(n)], dtype=np.int64)
    tb = _table(s2, t)
    k, eb, powers, guide = _tables(1, t)

    def loop(words: Any, st: Any, out: Any, i: int) -> int:
        return _exact_loop.gaussian_loop(words, st, out, i, k, eb, powers, guide, tb.eg, tb.centre)

    return _drive(n, src, loop, lambda: _gaussian_int(s2, t, src))


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
        The random bits; default this thread's on ``os.urandom`` (kept between calls; a
        new one in a new process).

    Returns
    -------
    ndarray of int64, shape (size,)

    Notes
    -----
    By inversion, with the bit contract of this module's docstring: up to scale 8192 the
    whole magnitude, above it the magnitude's part a at scale / k (k the least power of two
    that brings it to 8192 or below) and a part b below k by rejection. The tables (the
    digits of exp(-g k/scale) until they reach 0, about 44.4 scale / k of them, a guide of
    64 KB to 4 MB, and k - 1 coins' digits) are built once per scale and kept for 64
    scales: 0.3 s and 7 MB at 8192, and about 2.5 s more for the coins at k = 2**16. A
    scale above 2**29 is drawn element by element: exact, but some hundred times slower.
    The scale is taken exactly: the reciprocal of the float 0.01, ``1 / Fraction(0.01)``,
    is 2**59/5764607523034235, not 100; pass ``Fraction(100)`` for the scale you mean.

    Examples
    --------
    >>> x = discrete_laplace(2, 1000)
    >>> x.dtype, x.shape
    (dtype('int64'), (1000,))
    """
    b = _rational("scale", scale)
    n = _size(size)
    src = _os_source() if source is None else source
    t, s = b.numerator, b.denominator
    if _split(s, t) > _KMAX:  # a scale beyond 2**29: element by element
        return np.array([_laplace_int(b, src) for _ in range(n)], dtype=np.int64)
    k, eb, powers, guide = _tables(s, t)

    def loop(words: Any, st: Any, out: Any, i: int) -> int:
        return _exact_loop.laplace_loop(words, st, out, i, k, eb, powers, guide)

    return _drive(n, src, loop, lambda: _laplace_int(b, src))

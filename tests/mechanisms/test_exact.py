"""The exact samplers (postdp.mechanisms.exact) against a slow reference written with
Python's exact fractions, against the exact pmf, and against OpenDP.

Reference: Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for Differential
Privacy", Algorithm 3 (the discrete Gaussian by rejection from a discrete Laplace); the
discrete Laplace by inversion of its geometric magnitude (above scale 8192 in two parts, a
quotient by inversion and a remainder by rejection); a Bernoulli(p) compares uniform bits
with p's binary expansion (Knuth and Yao 1976). The reference below takes these steps one
value at a time, on its own bit reader (byte by byte, most significant bit first), with
the bit contract of the module's docstring, and bounds exp(-gamma) with a different series
from the sampler's; the fast sampler must take the same bits and make the same decisions.
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from postdp.errors import ValidationError
from postdp.mechanisms.exact import BitSource, discrete_gaussian, discrete_laplace


class Stream:
    """A fixed stream of pseudo-random bytes (SHAKE-256 of a label), served in order."""

    def __init__(self, label: str, size: int = 1 << 22):
        self.data = hashlib.shake_256(label.encode()).digest(size)
        self.at = 0

    def read(self, n: int) -> bytes:
        out = self.data[self.at : self.at + n]
        if len(out) != n:
            raise RuntimeError("test stream exhausted")
        self.at += n
        return out


INVERT_MAX = 8192  # scales up to this are drawn by inversion (its contract)


class Reference:
    """Algorithms 1-3, one value at a time, in exact fractions; counts the bits it reads and
    logs every decision."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self.byte = 0
        self.left = 0  # unread bits of self.byte
        self.bits = 0
        self.log: list[tuple[str, int]] = []
        self.series: dict[Fraction, tuple[int, int, int]] = {}

    def bit(self) -> int:
        if self.left == 0:
            self.byte = self.stream.read(1)[0]
            self.left = 8
        self.left -= 1
        self.bits += 1
        return (self.byte >> self.left) & 1

    def uniform(self, m: int) -> int:
        width = (m - 1).bit_length()
        while True:
            u = 0
            for _ in range(width):
                u = 2 * u + self.bit()
            if u < m:
                return u

    def bernoulli(self, p: Fraction) -> bool:
        """U < p for U uniform on [0, 1), its binary digits read until [low, low + width)
        (the values of U still possible) lies wholly below p or wholly at or above it."""
        assert 0 <= p <= 1
        low, width = Fraction(0), Fraction(1)
        while True:
            if low + width <= p:
                return True
            if low >= p:
                return False
            width /= 2
            low += width * self.bit()

    def exp_exceeds(self, gamma: Fraction, x: Fraction) -> bool:
        """exp(-gamma) > x, for gamma > 0 (irrational, so never equal to x), from the
        positive series of exp(gamma): its partial sums T_k = sum_(j <= k) gamma^j / j!
        give exp(-gamma) < 1/T_k, and once k + 2 > 2 gamma the rest of the series is at
        most twice its next term, so exp(-gamma) >= 1/(T_k + 2 gamma^(k+1)/(k+1)!). More
        terms while x lies between the bounds. T_k is kept as num/den, den = b^k k!."""
        if x <= 0:
            return True
        a, b = gamma.numerator, gamma.denominator
        k, num, den = self.series.get(gamma, (0, 1, 1))
        while True:
            if x * num >= den:  # x >= 1/T_k > exp(-gamma)
                break
            # T_(k+1) over the denominator b^(k+1) (k+1)!; the new term is a^(k+1) over it
            nxt_den = den * b * (k + 1)
            nxt_term = a ** (k + 1)
            if k + 2 > 2 * gamma and x * (num * b * (k + 1) + 2 * nxt_term) < nxt_den:
                self.series[gamma] = (k, num, den)
                return True  # x < 1/(T_k + 2 next term) <= exp(-gamma)
            k, num, den = k + 1, num * b * (k + 1) + nxt_term, nxt_den
        self.series[gamma] = (k, num, den)
        return False

    def bernoulli_exp(self, gamma: Fraction) -> bool:
        """Bernoulli(exp(-gamma)) by comparison: U's digits read until [low, low + width)
        lies wholly below exp(-gamma) or wholly above it (nothing read for gamma = 0)."""
        if gamma == 0:
            return True
        low, width = Fraction(0), Fraction(1)
        while True:
            if self.exp_exceeds(gamma, low + width):
                outcome = True
                break
            if not self.exp_exceeds(gamma, low):
                outcome = False
                break
            width /= 2
            low += width * self.bit()
        self.log.append(("exp", int(outcome)))
        return outcome

    def geometric(self, step: Fraction) -> int:
        """G with P[G >= g] = exp(-g step), by inversion: U's digits read until [low, low +
        width) lies wholly in one cell [exp(-(G + 1) step), exp(-G step))."""
        low, width = Fraction(0), Fraction(1)
        while True:
            top = low + width
            # the cell of the top end: the largest g with top <= exp(-g step); a float
            # logarithm picks where to start looking, the exact comparisons decide
            start = (math.log(top.denominator) - math.log(top.numerator)) / float(step)
            g = max(0, int(start) - 1)
            while g > 0 and not self.exp_exceeds(g * step, top):
                g -= 1
            while self.exp_exceeds((g + 1) * step, top):
                g += 1
            if not self.exp_exceeds((g + 1) * step, low):  # low in the same cell
                self.log.append(("geometric", g))
                return g
            width /= 2
            low += width * self.bit()

    def laplace(self, s: int, t: int) -> int:
        """P[z] proportional to exp(-|z| s/t): the magnitude k a + b, k the least power of
        two with t/(k s) <= INVERT_MAX, a by inversion at step k s/t and, for k > 1, b
        uniform below k and kept with probability exp(-b s/t) (else a new b); then a sign,
        again for a negative zero."""
        k = 1  # the least power of two with t/(k s) <= INVERT_MAX
        while Fraction(t, k * s) > INVERT_MAX:
            k *= 2
        while True:
            y = self.geometric(Fraction(k * s, t))
            if k > 1:
                while True:
                    b = self.uniform(k)
                    keep = self.bernoulli_exp(Fraction(b * s, t))
                    self.log.append(("remainder", int(keep)))
                    if keep:
                        break
                y = k * y + b
            negative = self.bernoulli(Fraction(1, 2))
            if negative and y == 0:
                continue
            self.log.append(("laplace", -y if negative else y))
            return -y if negative else y

    def gaussian(self, sigma2: Fraction) -> int:
        """Algorithm 3."""
        t = math.floor(math.isqrt(math.floor(sigma2))) + 1
        while True:
            y = self.laplace(1, t)
            if self.bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2)):
                return y


# sigma^2: tiny (t = 1), small, the 2020 design's (gammas with up to 85-bit denominators),
# a float's binary fraction, and a large sigma.
GAUSSIAN_CASES = [
    Fraction(1, 4),
    Fraction(9, 4),
    Fraction(7),
    Fraction(1929937650363, 3177351424),
    Fraction(214437516707, 354678903040),
    Fraction(643312550121, 161570200),
    Fraction(0.37),
    Fraction(250_000),
    Fraction(2),  # sigma^2 / t = 1: gamma(1) = 0, kept without a draw
]
LAPLACE_CASES = [
    # by inversion (scale up to INVERT_MAX)
    Fraction(1),
    Fraction(7, 3),
    Fraction(1, 2),
    Fraction(40),
    Fraction(8192),  # the largest table of powers (and the widest guide)
    Fraction(1 / 0.3),  # a float's binary fraction (a 53-bit numerator)
    Fraction((1 << 60) + 1, 1 << 58),  # a 61-bit numerator
    Fraction(1 << 59, 5764607523034235),  # 1/0.01 taken exactly: a 60-bit numerator
    # above INVERT_MAX: the magnitude k a + b
    Fraction(8193),  # k = 2
    Fraction(16385, 2),  # k = 2, s = 2
    Fraction(1 << 17, 3),  # k = 8
    Fraction(10**6),  # k = 128
    Fraction(5 << 29, 3),  # k = 2**17, beyond the compiled loops' 2**16: element by element
]


@pytest.mark.parametrize("sigma2", GAUSSIAN_CASES, ids=str)
def test_gaussian_takes_the_references_bits_and_values(sigma2: Fraction) -> None:
    label = f"gauss-{sigma2}"
    ref = Reference(Stream(label))
    src = BitSource(Stream(label).read, chunk=64)
    n = 300 if sigma2.denominator > 1 << 40 else 1500
    for i in range(n):
        (fast,) = discrete_gaussian(sigma2, 1, source=src).tolist()
        assert fast == ref.gaussian(sigma2), f"value {i}"
        assert src.consumed == ref.bits, f"value {i}: bits read"


@pytest.mark.parametrize("scale", LAPLACE_CASES, ids=str)
def test_laplace_takes_the_references_bits_and_values(scale: Fraction) -> None:
    label = f"laplace-{scale}"
    ref = Reference(Stream(label))
    src = BitSource(Stream(label).read, chunk=64)
    # fewer values where the reference is slow: Python integers, or a scale of thousands
    for i in range(300 if scale.numerator > 1 << 56 or scale > 1000 else 1500):
        (fast,) = discrete_laplace(scale, 1, source=src).tolist()
        assert fast == ref.laplace(scale.denominator, scale.numerator), f"value {i}"
        assert src.consumed == ref.bits, f"value {i}: bits read"


def test_the_reference_makes_every_kind_of_decision() -> None:
    """The identity tests above reach both outcomes of the comparisons with exp(-gamma),
    refused candidates, the inversion's cells and, above scale 8192, remainders b of every
    size below k (so none of them is left untested; a refused b is the crafted test's)."""
    ref = Reference(Stream("coverage"))
    values = [ref.gaussian(Fraction(9, 4)) for _ in range(2000)]
    assert {k for kind, k in ref.log if kind == "exp"} == {0, 1}
    proposals = sum(kind == "laplace" for kind, _ in ref.log)
    assert proposals > len(values)  # some candidates were refused
    cells = {g for kind, g in ref.log if kind == "geometric"}
    assert {0, 1, 2} <= cells  # inversion lands in several cells
    scale = Fraction(1 << 17, 3)  # a LAPLACE_CASES scale: k = 8
    draws = [abs(ref.laplace(scale.denominator, scale.numerator)) for _ in range(300)]
    assert {d % 8 for d in draws} == set(range(8))
    assert 1 in {k for kind, k in ref.log if kind == "remainder"}


class Crafted(Stream):
    """A stream that begins with the given bits (a string of 0s and 1s), then goes on
    with SHAKE-256 bytes."""

    def __init__(self, bits: str, label: str):
        super().__init__(label)
        bits += format(self.data[0], "08b") * 8  # pad to whole bytes with stream bits
        bits = bits[: len(bits) // 8 * 8]
        self.data = int(bits, 2).to_bytes(len(bits) // 8, "big") + self.data


def _expansion(p: Fraction, n: int) -> str:
    """The first ``n`` binary digits of ``p`` in [0, 1)."""
    return format(math.floor(p * 2**n), f"0{n}b")


def _exp_expansion(gamma: Fraction, n: int) -> str:
    """The first ``n`` binary digits of exp(-gamma), from the sampler's exact digits (the
    reference checks them: it reads on where they end)."""
    from postdp.mechanisms.exact import _exp_digits

    return format(_exp_digits(gamma, n), f"0{n}b")


def _ones_to_settle(step: Fraction) -> int:
    """How many 1 digits of U settle geometric(step) at 0 (the reference reads them)."""
    ref = Reference(Crafted("1" * 64, "ones"))
    assert ref.geometric(step) == 0
    return ref.bits


SPLIT = Fraction(16385, 2)  # k = 2: a by inversion at step 4/16385, b below 2
CRAFTED = {
    # candidate 0 (U's first digit 1 puts it above exp(-1): G = 0; sign +), then the
    # acceptance of gamma(0) = 1/6 meets exp(-1/6)'s 64 digits: Python integers read on
    "gauss-64-equal-digits": (Fraction(1, 3), "1" + "1" + _exp_expansion(Fraction(1, 6), 64)),
    # inversion at scale 3: U's first 64 digits are exp(-1/3)'s, the edge of G = 0's cell
    "inversion-64-equal-digits": (Fraction(3), _exp_expansion(Fraction(1, 3), 64)),
    # inversion at scale 1: 64 zeros, below every power in the table (U < exp(-44))
    "inversion-beyond-the-powers": (Fraction(1), "0" * 64),
    # a scale above INVERT_MAX: a = 0, b = 1, then its coin meets exp(-2/16385)'s 64 digits
    "remainder-64-equal-digits": (
        SPLIT,
        "1" * _ones_to_settle(Fraction(4, 16385)) + "1" + _exp_expansion(Fraction(2, 16385), 64),
    ),
    # U below 2**-60 at scale t = 1: a candidate of 41 or 42, beyond the Gaussian's table
    # (its 41 entries) but within the powers' (45)
    "candidate-beyond-the-table": (Fraction(1, 4), "0" * 60 + "1"),
}


@pytest.mark.parametrize("case", CRAFTED, ids=str)
def test_crafted_streams_reach_the_rare_states(case: str, monkeypatch) -> None:
    """The states no random stream reaches (a comparison left unsettled by 64 digits,
    probability 2**-64 each; a candidate far beyond the table) on streams built to reach
    them: the fast sampler still takes the reference's bits and values, and the first value
    is the one left to Python integers."""
    import postdp.mechanisms.exact as exact

    param, bits = CRAFTED[case]
    gaussian = case.startswith(("gauss", "candidate"))
    handed = []  # values the compiled loops handed to Python integers
    for name in ("_gaussian_int", "_laplace_int"):
        real = getattr(exact, name)

        def spy(*args, _real=real, _name=name):  # type: ignore[no-untyped-def]
            handed.append(_name)
            return _real(*args)

        monkeypatch.setattr(exact, name, spy)
    ref = Reference(Crafted(bits, case))
    src = BitSource(Crafted(bits, case).read, chunk=64)
    for i in range(50):
        if gaussian:
            (fast,) = discrete_gaussian(param, 1, source=src).tolist()
            expected = ref.gaussian(param)
        else:
            (fast,) = discrete_laplace(param, 1, source=src).tolist()
            expected = ref.laplace(param.denominator, param.numerator)
        assert fast == expected, f"value {i}"
        assert src.consumed == ref.bits, f"value {i}: bits read"
    top = "_gaussian_int" if gaussian else "_laplace_int"
    assert handed.count(top) == 1 and handed[0] == top


def test_a_refused_remainder_takes_the_references_bits() -> None:
    """Above scale 8192 the part b below k is refused with probability below 1/8192, so no
    random stream of test size shows it: U's digits all 1 settle a = 0, then keep b = 1 and
    refuse it (U above exp(-2/16385)) for as long as they last."""
    bits = "1" * 200
    ref = Reference(Crafted(bits, "refused"))
    src = BitSource(Crafted(bits, "refused").read, chunk=64)
    for i in range(20):
        (fast,) = discrete_laplace(SPLIT, 1, source=src).tolist()
        assert fast == ref.laplace(SPLIT.denominator, SPLIT.numerator), f"value {i}"
        assert src.consumed == ref.bits, f"value {i}: bits read"
    outcomes = [k for kind, k in ref.log if kind == "remainder"]
    assert outcomes.count(0) >= 5 and 1 in outcomes


def test_bit_source_reads_most_significant_first() -> None:
    pattern = bytes([0b10110100, 0b01111111])
    bits = "".join(f"{b:08b}" for b in pattern * 64)
    src = BitSource(lambda n: pattern * (n // 2))
    assert [src.take_int(w) for w in (1, 3, 4, 9, 70)] == [
        int(bits[a:b], 2) for a, b in ((0, 1), (1, 4), (4, 8), (8, 17), (17, 87))
    ]
    assert src.consumed == 87
    a, b = src.fields(np.array([0, 5]), np.array([7, 56]))
    assert a.tolist() == [0, int(bits[94:99], 2)]
    assert b.tolist() == [int(bits[87:94], 2), int(bits[99:155], 2)]
    assert src.consumed == 155


def _pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    k = np.arange(-int(40 * math.sqrt(sigma2)) - 2, int(40 * math.sqrt(sigma2)) + 3)
    w = np.exp(-(k.astype(float) ** 2) / (2 * sigma2))
    z = w.sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma2)) / z


def _chi_square(sample: np.ndarray, pmf) -> float:
    """The p-value of Pearson's test of ``sample`` against ``pmf``: cells for the values
    with expected count >= 20, the two tails merged into the outermost of them (so that no
    cell expects a handful, where one legitimate rare value would decide the test)."""
    n = sample.size
    lo, hi = int(sample.min()), int(sample.max())
    k = np.arange(lo, hi + 1)
    core = np.flatnonzero(pmf(k) * n >= 20)
    a, b = k[core[0]], k[core[-1]]
    obs = np.bincount(sample - lo, minlength=k.size)
    cells_obs = [obs[: core[0] + 1].sum(), *obs[core[0] + 1 : core[-1]], obs[core[-1] :].sum()]
    inner = pmf(np.arange(a + 1, b))
    tail_lo = pmf(np.arange(a - 2000, a + 1)).sum()
    tail_hi = pmf(np.arange(b, b + 2001)).sum()
    cells_exp = np.array([tail_lo, *inner, tail_hi]) * n
    stat = float(((np.array(cells_obs) - cells_exp) ** 2 / cells_exp).sum())
    return float(stats.chi2.sf(stat, len(cells_obs) - 1))


PMF_CASES = [
    Fraction(1, 9),
    Fraction(1),
    Fraction(121, 100),
    Fraction(9),
    Fraction(643312550121, 161570200),
    Fraction(900),
]


@pytest.mark.parametrize("sigma2", PMF_CASES, ids=str)
def test_gaussian_matches_the_exact_pmf(sigma2: Fraction) -> None:
    n = 200_000
    x = discrete_gaussian(sigma2, n, source=BitSource(Stream(f"pmf-{sigma2}", 1 << 24).read))
    p = _chi_square(x, lambda k: _pmf(float(sigma2), k))
    assert p > 1e-4
    # mean 0 and the exact variance, within z = 4 of the sample's own standard errors
    k = np.arange(-4000, 4001)
    var_exact = float((k**2 * _pmf(float(sigma2), k)).sum())
    assert abs(x.mean()) <= 4 * x.std() / math.sqrt(n)
    sq = x.astype(float) ** 2
    assert abs(sq.mean() - var_exact) <= 4 * sq.std() / math.sqrt(n)


@pytest.mark.parametrize(
    "scale", [Fraction(1, 3), Fraction(1), Fraction(7, 3), Fraction(25)], ids=str
)
def test_laplace_matches_the_exact_pmf(scale: Fraction) -> None:
    n = 200_000
    x = discrete_laplace(scale, n, source=BitSource(Stream(f"lpmf-{scale}", 1 << 24).read))
    q = math.exp(-1 / float(scale))
    p = _chi_square(x, lambda k: (1 - q) / (1 + q) * q ** np.abs(k))
    assert p > 1e-4
    var_exact = 2 * q / (1 - q) ** 2
    sq = x.astype(float) ** 2
    assert abs(sq.mean() - var_exact) <= 4 * sq.std() / math.sqrt(n)


@pytest.mark.parametrize("ahead", [1 << 20, 200], ids=["fetched-ahead", "short-window"])
@pytest.mark.parametrize("sigma2", GAUSSIAN_CASES[:6], ids=str)
def test_a_batch_is_the_references_values_one_after_another(
    sigma2: Fraction, ahead: int, monkeypatch
) -> None:
    """Values in one call are drawn one after another: the batch equals the reference's
    sequence, bit for bit. With a window of 200 bits fetched at a time, values cross its end
    (and some need more than it holds), so the loops' restart of a value is checked too."""
    import postdp.mechanisms.exact as exact

    monkeypatch.setattr(exact, "_AHEAD", ahead)
    label = f"batch-{sigma2}-{ahead}"
    ref = Reference(Stream(label))
    src = BitSource(Stream(label).read, chunk=64)
    n = 400 if sigma2.denominator > 1 << 40 else 2000
    fast = discrete_gaussian(sigma2, n, source=src).tolist()
    assert fast == [ref.gaussian(sigma2) for _ in range(n)]
    assert src.consumed == ref.bits
    lap = Fraction(7, 3)
    fast = discrete_laplace(lap, n, source=src).tolist()
    assert fast == [ref.laplace(lap.denominator, lap.numerator) for _ in range(n)]
    assert src.consumed == ref.bits


@pytest.mark.parametrize("sigma", [1.5, 4.0, 30.0])
def test_gaussian_matches_opendp(sigma: float) -> None:
    """Our law against OpenDP's discrete Gaussian at the same scale (two-sample chi-square
    over cells with at least 20 expected in each sample)."""
    pytest.importorskip("opendp")
    from postdp import DiscreteGaussian
    from postdp.mechanisms.release import opendp_sampler

    n = 40_000
    theirs = opendp_sampler(DiscreteGaussian(rho=1 / (2 * sigma**2)))(np.zeros(n, np.int64))
    ours = discrete_gaussian(Fraction(sigma) ** 2, n, source=BitSource(Stream(f"odp-{sigma}").read))
    lo = min(theirs.min(), ours.min())
    a = np.bincount(theirs - lo)
    b = np.bincount(ours - lo, minlength=a.size)
    a = np.pad(a, (0, b.size - a.size))
    keep = (a + b) >= 40
    table = np.array([[*a[keep], a[~keep].sum()], [*b[keep], b[~keep].sum()]])
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-4


def test_rational_and_float_parameters_are_taken_exactly() -> None:
    """A float sigma^2 is its binary fraction exactly (the same bits as that Fraction); an
    int is the Fraction n/1."""
    a = discrete_gaussian(0.37, 200, source=BitSource(Stream("f").read))
    b = discrete_gaussian(Fraction(0.37), 200, source=BitSource(Stream("f").read))
    assert np.array_equal(a, b)
    c = discrete_laplace(3, 200, source=BitSource(Stream("g").read))
    d = discrete_laplace(Fraction(3, 1), 200, source=BitSource(Stream("g").read))
    assert np.array_equal(c, d)


@pytest.mark.parametrize(
    "bad", [0, -1, Fraction(-1, 2), float("nan"), float("inf"), "2", True, None]
)
def test_refuses_a_scale_that_is_not_a_positive_rational(bad: object) -> None:
    with pytest.raises(ValidationError, match="positive rational"):
        discrete_gaussian(bad, 3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="positive rational"):
        discrete_laplace(bad, 3)  # type: ignore[arg-type]


def test_refuses_a_bad_size_and_a_short_byte_source() -> None:
    with pytest.raises(ValidationError, match="size"):
        discrete_gaussian(1, -1)
    with pytest.raises(RuntimeError, match="wrong number of bytes"):
        discrete_gaussian(1, 5, source=BitSource(lambda n: b"\0" * (n - 1)))
    assert discrete_gaussian(1, 0).shape == (0,)


# -- on the release path ---------------------------------------------------------------
def test_a_secure_measure_draws_the_2020_design_with_its_exact_shares(monkeypatch) -> None:
    """Every noisy measurement of the persons preset is drawn by the exact sampler with its
    exact rational rho (the design's share, halved under bounded neighbours): sigma^2 is
    1/rho exactly, and the table holds exp(-gamma)'s first 64 digits exactly (checked
    against the reference's bounds)."""
    import postdp.mechanisms.release as release
    from postdp.mechanisms.exact import _table
    from postdp.tables import load_strategy, measure
    from tests.nmf.conftest import small_table

    seen = []
    real = release.exact_release

    def spy(mechanism, values, **kwargs):
        seen.append((mechanism, kwargs["exact"]))
        return real(mechanism, values, **kwargs)

    monkeypatch.setattr(release, "exact_release", spy)
    table = small_table()
    work = load_strategy("pl94-2020-persons").workload(table)
    assert work.neighbours == "bounded"
    m = measure(table, work)
    noisy = [w for w in work.measurements if w.mechanism is not None]
    assert len(seen) == len(noisy)
    shares = [r for r in work.exact_rho if r is not None]
    for (mechanism, exact), share in zip(seen, shares, strict=True):
        assert exact == share / 2
        sigma2 = release.exact_parameter(mechanism, exact)
        assert sigma2 == 1 / share
        t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
        table = _table(sigma2, t)
        ref = Reference(Stream("digits"))
        for y in (0, t, 3 * t, table.size - 1):  # exp(-gamma)'s digits: floor(. * 2**64)
            gamma = (y - sigma2 / t) ** 2 / (2 * sigma2)
            digits = Fraction(int(table.eg[y]), 1 << 64)
            assert ref.exp_exceeds(gamma, digits)
            assert not ref.exp_exceeds(gamma, digits + Fraction(1, 1 << 64))
    for values in m.values:
        assert np.array_equal(values, np.round(values))  # integers


def test_secure_noise_has_the_mechanisms_variance() -> None:
    """The release path's noise (truth subtracted) against each mechanism's exact variance:
    mean of squares within z = 4 standard errors of the sample."""
    from postdp import DiscreteGaussian, Geometric
    from postdp.mechanisms.release import exact_release

    truth = np.arange(60_000, dtype=np.int64) % 97
    for mechanism in (DiscreteGaussian(rho=Fraction(1, 8)), Geometric(epsilon=0.7)):
        noise = (exact_release(mechanism, truth) - truth).astype(float)
        sq = noise**2
        assert abs(sq.mean() - mechanism.variance()) <= 4 * sq.std() / math.sqrt(sq.size)
        assert abs(noise.mean()) <= 4 * noise.std() / math.sqrt(noise.size)


def test_the_exact_sampler_refuses_real_valued_noise_before_drawing() -> None:
    from postdp import DiscreteGaussian, Gaussian
    from postdp.mechanisms.release import exact_parameter, pick_samplers

    with pytest.raises(ValidationError, match="integer noise"):
        pick_samplers([Gaussian(rho=0.5)], "postdp")
    choices, named = pick_samplers([Gaussian(rho=0.5), None], None)
    assert choices == ["opendp", None] and named.startswith("opendp ")
    with pytest.raises(ValidationError, match="not the mechanism's"):
        exact_parameter(DiscreteGaussian(rho=0.5), Fraction(1, 3))
    with pytest.raises(ValidationError, match="sampler"):
        pick_samplers([], "numpy")


def test_numpy_integers_are_taken_exactly() -> None:
    """A numpy integer scale is its integer, not its nearest float (2**60 + 1 is not)."""
    big = np.int64((1 << 60) + 1)
    a = discrete_laplace(big, 20, source=BitSource(Stream("np").read))
    b = discrete_laplace(Fraction((1 << 60) + 1), 20, source=BitSource(Stream("np").read))
    assert np.array_equal(a, b)


def test_exp_bounds_and_digits_against_the_reference() -> None:
    """The sampler's enclosures of exp(-x) (alternating series) and its digits of
    exp(-gamma) against the reference's bounds (the positive series of exp(gamma)): L <=
    exp(-x) 2**p <= H at low and high precisions, floor(exp(-gamma) 2**bits) for gammas from
    0 to 60, and the inversion's table of floor(exp(-g/scale) 2**64) built by iterated
    enclosures (each floor checked from both sides)."""
    from postdp.mechanisms.exact import _exp_digits, _exp_whole, _power_digits, _series

    rng = np.random.default_rng(7)
    ref = Reference(Stream("bounds"))
    for _ in range(150):
        x = Fraction(int(rng.integers(1, 10**6)), int(rng.integers(10**6, 10**7)))
        p = int(rng.choice([4, 6, 8, 16, 64]))
        low, high = _series(x.numerator, x.denominator, p)
        assert ref.exp_exceeds(x, Fraction(low, 1 << p)) or Fraction(low, 1 << p) == 0
        assert not ref.exp_exceeds(x, Fraction(high, 1 << p))
    for n in (1, 2, 7):
        low, high = _exp_whole(n, 8)
        assert ref.exp_exceeds(Fraction(n), Fraction(low, 256))
        assert not ref.exp_exceeds(Fraction(n), Fraction(high, 256))
    for scale in (Fraction(1), Fraction(7, 3), Fraction(1, 3), Fraction(8192)):
        powers = _power_digits(scale.denominator, scale.numerator)  # iterated enclosures
        assert powers[-1] == 0 and all(powers[:-1])  # up to the first 0, no further
        for g in sorted({1, 2, 3, len(powers) // 2, len(powers) - 1, len(powers)}):
            gamma = g / scale
            digits = Fraction(powers[g - 1], 1 << 64)
            assert powers[g - 1] == 0 or ref.exp_exceeds(gamma, digits)
            assert not ref.exp_exceeds(gamma, digits + Fraction(1, 1 << 64))
    for _ in range(150):
        gamma = Fraction(int(rng.integers(1, 6 * 10**7)), int(rng.integers(1, 10**6)))
        gamma = min(gamma, Fraction(60))
        bits = int(rng.choice([3, 8, 64, 100]))
        digits = _exp_digits(gamma, bits)
        assert digits == 0 or ref.exp_exceeds(gamma, Fraction(digits, 1 << bits))
        assert not ref.exp_exceeds(gamma, Fraction(digits + 1, 1 << bits))


def test_the_default_source_is_kept_between_calls_and_renewed_in_a_new_process(
    monkeypatch,
) -> None:
    """Small draws on the operating system's CSPRNG share one fetched chunk instead of
    fetching (and dropping) one each; a process with another pid (a forked child) gets a
    source of its own, never its parent's fetched bits."""
    import os

    from postdp.mechanisms.exact import _os_source

    src = _os_source()
    discrete_gaussian(Fraction(9, 4), 10)
    fetched, used = src._read_bytes, src.consumed
    discrete_gaussian(Fraction(9, 4), 10)
    discrete_laplace(Fraction(3), 10)
    assert _os_source() is src
    assert src._read_bytes == fetched and src.consumed > used
    real = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real + 1)
    child = _os_source()
    assert child is not src and child._read_bytes == 0

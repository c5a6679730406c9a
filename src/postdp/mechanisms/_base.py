"""What every additive noise mechanism shares (private).

A mechanism adds noise with a fixed, data-independent law to each count.  Subclasses supply
the noise law (``_noise``), its exact pmf/pdf, cdf and variance, and their privacy cost; this
base supplies the study-path sampler (numpy, blocked for reproducibility) and hands the
release path to OpenDP.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, TypeVar

import numpy as np

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, NumArray, RNGLike, SizeLike
from postdp.errors import ValidationError
from postdp.mechanisms.budget import Budget

if TYPE_CHECKING:
    from postdp.mechanisms.restriction import Restriction
    from postdp.privacy import Ledger


class Mechanism(ABC):
    """The interface of postdp's additive noise mechanisms (and their shared base).

    Every mechanism (:class:`Laplace`, :class:`Geometric`, :class:`Gaussian`,
    :class:`DiscreteGaussian`) is a ``Mechanism``: it validates its input, draws on the study
    path (``sample``, ``iter_samples``: numpy, blocked for reproducibility) and on the release
    path (``release``: OpenDP), and knows its exact law (``cdf``, ``variance``) and its
    privacy cost (``privacy_cost``). Subclasses supply the noise law.
    """

    __slots__ = ()

    #: True for mechanisms on integers (integers in, integers out).
    discrete: ClassVar[bool] = False
    #: Short name used in tables and on the command line.
    name: ClassVar[str] = ""
    #: "laplace" (pure DP, ℓ1 sensitivity) or "gaussian" (zCDP, ℓ2 sensitivity).
    family: ClassVar[str] = ""
    sensitivity: float

    @property
    @abstractmethod
    def noise_scale(self) -> float:
        """The noise law's scale: b = Δ/ε for the Laplace family, σ for the Gaussian one."""

    # -- to be supplied by each mechanism -------------------------------------------------
    @abstractmethod
    def _noise(self, gen: np.random.Generator, shape: tuple[int, ...]) -> NumArray:
        """Noise of the given shape drawn from ``gen``."""

    @abstractmethod
    def variance(self) -> float:
        """Variance of the noise."""

    @abstractmethod
    def privacy_cost(self) -> Budget:
        """Privacy spent by one application at the mechanism's sensitivity."""

    @abstractmethod
    def cdf(self, k: ArrayLike, loc: ArrayLike = 0) -> FloatArray:
        """Cumulative distribution function of the output given the true value ``loc``."""

    # -- shared ---------------------------------------------------------------------------
    def std(self) -> float:
        """Standard deviation of the noise (the square root of :meth:`variance`)."""
        return math.sqrt(self.variance())

    def _values(self, x: ArrayLike) -> NumArray:
        if self.discrete:
            return _validation.integer_array("x", x)
        values = _validation.real_array("x", x).astype(np.float64, copy=False)
        largest = float(np.abs(values).max(initial=0.0))
        if largest > MAX_FLOAT_COUNT:
            raise ValidationError(
                "`x` holds values above 2**53, which float64 noise cannot hold exactly; "
                "use an integer mechanism (Geometric, DiscreteGaussian)"
            )
        if self.noise_scale < MIN_SCALE_PER_VALUE * largest:
            raise ValidationError(
                f"the noise scale {self.noise_scale:.3g} is below 2**-32 of the largest value: "
                "float64 cannot resolve the noise at that magnitude (the output would be the "
                "input to within rounding); use a smaller epsilon or rho"
            )
        return values

    def _draw(
        self, values: NumArray, rng: RNGLike, n_rows: int, out: NumArray | None = None
    ) -> NumArray:
        """``n_rows`` noisy copies of ``values``, written into ``out`` (any strided view of
        shape (n_rows, *values.shape)) when given: no temporary beyond each block's noise."""
        if out is None:
            dtype = np.int64 if self.discrete else np.float64
            out = np.empty((n_rows, *values.shape), dtype=dtype)
        start = 0
        for rows, gen in _rng.iter_blocks(rng, n_rows, values.size):
            np.add(self._noise(gen, (rows, *values.shape)), values, out=out[start : start + rows])
            start += rows
        return out

    def _sample_into(self, x: ArrayLike, rng: RNGLike, out: NumArray) -> None:
        """``sample(x, rng=rng, size=len(out))`` written into ``out`` (a view, e.g. one level's
        columns of a batch): the same draws, without a temporary copy."""
        self._draw(self._values(x), rng, out.shape[0], out=out)

    def sample(self, x: ArrayLike, *, rng: RNGLike = None, size: SizeLike = None) -> NumArray:
        """Draw ``x`` plus noise on the study path (numpy; reproducible, not for publication).

        Parameters
        ----------
        x : array_like, shape (..., n)
            True values; integers for the discrete mechanisms.
        rng : int, numpy.random.Generator, SeedSequence or None
            Seed or generator of the draws.
        size : int or tuple of int, optional
            Leading (batch) shape: the result has shape ``size + x.shape``; one draw of shape
            ``x.shape`` when omitted.

        Returns
        -------
        ndarray
            int64 for the discrete mechanisms, float64 otherwise.

        Notes
        -----
        The draws are generated in fixed blocks of rows, each from its own child stream of
        ``rng``, so a given seed yields the same draws whether they are taken in one call or
        in batches through :meth:`iter_samples`.
        """
        values = self._values(x)
        shape = _validation.size_tuple(size)
        n_rows = math.prod(shape)
        out = self._draw(values, rng, n_rows)
        return out.reshape(*shape, *values.shape) if shape else out[0]

    def iter_samples(
        self, x: ArrayLike, *, n_draws: int, batch: int, rng: RNGLike = None
    ) -> Iterator[NumArray]:
        """Yield the draws of ``sample(x, rng=rng, size=n_draws)`` in batches of ``batch`` rows.

        Parameters
        ----------
        x : array_like, shape (..., n)
            True values.
        n_draws : int
            Total number of draws.
        batch : int
            Rows per yielded array (the last one may be shorter); memory is bounded by it.
        rng : int, numpy.random.Generator, SeedSequence or None
            Seed or generator of the draws.

        Yields
        ------
        ndarray, shape (rows, ...) + x.shape
        """
        values = self._values(x)
        (n_draws,) = _validation.size_tuple(n_draws)
        (batch,) = _validation.size_tuple(batch)
        if batch < 1:
            raise ValidationError(f"`batch` must be at least 1; got {batch}")
        dtype = np.int64 if self.discrete else np.float64
        # Blocks are written into one reusable buffer of ``batch`` rows; a block that straddles
        # two batches is split. Every value is copied once: time and memory are linear.
        buffer = np.empty((min(batch, n_draws), *values.shape), dtype=dtype)
        filled = 0
        for rows, gen in _rng.iter_blocks(rng, n_draws, values.size):
            block = values + self._noise(gen, (rows, *values.shape))
            start = 0
            while start < rows:
                take = min(rows - start, buffer.shape[0] - filled)
                buffer[filled : filled + take] = block[start : start + take]
                filled += take
                start += take
                if filled == buffer.shape[0]:
                    yield buffer.copy()
                    filled = 0
        if filled:
            yield buffer[:filled].copy()

    def release(self, x: ArrayLike, *, ledger: Ledger | None = None) -> NumArray:
        """Add noise for publication with OpenDP's exact, cryptographically seeded sampler.

        Parameters
        ----------
        x : array_like, shape (..., n)
            True values; integers for the discrete mechanisms (integers in, integers out).
        ledger : Ledger, optional
            Record the release in this :class:`~postdp.privacy.Ledger` (the digests of ``x``
            and of the output, the mechanism and its cost; no value of either), refusing it
            before anything is drawn if it would pass the ledger's cap. None: not recorded.

        Returns
        -------
        ndarray, same shape as ``x``
            int64 for the discrete mechanisms, float64 otherwise.

        Raises
        ------
        ImportError
            If OpenDP (the ``release`` extra) is not installed.
        BudgetCapError
            If ``ledger`` has a cap that this release would pass (nothing is drawn).
        """
        from postdp.mechanisms.release import opendp_release

        values = self._values(x)
        return recorded(self, values, lambda: opendp_release(self, values), ledger)


def recorded(
    mechanism: Mechanism | Restriction,
    values: NumArray,
    draw: Callable[[], NumArray],
    ledger: Ledger | None,
) -> NumArray:
    """``draw()``, recorded in ``ledger`` (when given) as a release of ``mechanism`` on
    ``values``: refused before the draw if it would pass the ledger's cap."""
    if ledger is None:
        return draw()
    from postdp.mechanisms.release import opendp_version
    from postdp.privacy import CONTENT_KEY, Ledger, array_content

    if not isinstance(ledger, Ledger):
        raise TypeError(f"`ledger` must be a Ledger or None; got {type(ledger).__name__}")
    digest = array_content(values)
    cost = mechanism.privacy_cost()
    noise = mechanism if isinstance(mechanism, Mechanism) else mechanism.mechanism
    name = noise.name if noise is mechanism else f"restriction of {noise.name}"
    record = {
        "input": f"array of shape {list(np.shape(values))}",
        "input_sha256": digest,
        CONTENT_KEY: digest,
        "mechanism": name,
        "sensitivity": noise.sensitivity,
        "epsilon": cost.epsilon,
        "rho": cost.rho,
        "path": "secure",
        "opendp_version": opendp_version(),
    }
    with ledger.recording(cost, record) as entry:
        out = draw()
        entry["output_sha256"] = array_content(out)
    return out


#: Noise scale per unit of sensitivity, b/Δ or σ/Δ, that postdp accepts. Below the lower
#: bound (ε/Δ > 700) pure-DP noise is zero to double precision (exp(-ε/Δ) underflows past
#: 745), so the "release" would be the truth; above the upper bound draws can pass 2**53
#: (float paths lose integers) and approach the int64 range (OpenDP saturates at ±2**63).
MIN_RELATIVE_SCALE = 1.0 / 700.0
MAX_RELATIVE_SCALE = 1e13
#: Continuous noise whose scale is below this fraction of the largest value is refused: the
#: noise would span fewer than 2**20 float64 steps at that magnitude (2**-52 x 2**20).
MIN_SCALE_PER_VALUE = 2.0**-32
#: Largest magnitude a float64 path accepts (integers are exact up to 2**53).
MAX_FLOAT_COUNT = float(2**53)


def check_epsilon(value: object, sensitivity: float) -> float:
    """Validate ε of a pure-DP mechanism: positive, finite, and 1e-13 ≤ ε/Δ ≤ 700."""
    epsilon = _validation.positive_real("epsilon", value)
    relative = sensitivity / epsilon
    if relative < MIN_RELATIVE_SCALE:
        raise ValidationError(
            f"`epsilon` must be at most 700 x sensitivity: beyond that the noise is zero to "
            f"double precision and the release would be the true counts; got {value!r}"
        )
    if relative > MAX_RELATIVE_SCALE:
        raise ValidationError(
            f"`epsilon` must be at least 1e-13 x sensitivity: smaller values make noise that "
            f"overflows the integer range; got {value!r}"
        )
    return epsilon


def check_rho(value: object, sensitivity: float) -> float:
    """Validate ρ of a zCDP mechanism: positive, finite, and 1/700 ≤ σ/Δ ≤ 1e13."""
    rho = _validation.positive_real("rho", value)
    relative = 1.0 / math.sqrt(2.0 * rho)
    if relative < MIN_RELATIVE_SCALE:
        raise ValidationError(
            f"`rho` must be at most 245000 (sigma at least sensitivity/700): beyond that the "
            f"noise is negligible and the release would be the true counts; got {value!r}"
        )
    if relative > MAX_RELATIVE_SCALE:
        raise ValidationError(
            f"`rho` must be at least 5e-27 (sigma at most 1e13 x sensitivity): smaller values "
            f"make noise that overflows the integer range; got {value!r}"
        )
    return rho


def check_sensitivity(value: object, *, discrete: bool) -> float:
    """Validate a sensitivity: positive and finite, and a whole number for discrete noise."""
    out = _validation.positive_real("sensitivity", value)
    if discrete and out != round(out):
        raise ValidationError(
            f"`sensitivity` must be a positive integer for an integer mechanism; got {value!r}"
        )
    return out


def as_float_array(values: ArrayLike) -> FloatArray:
    """``values`` as float64 (for evaluating densities at arbitrary points)."""
    return np.asarray(values, dtype=np.float64)


M = TypeVar("M", bound="Mechanism")


def expand_mechanisms(
    mechanisms: M | Sequence[M],
    *,
    count: int,
    kind: type[object] | None = None,
    name: str = "mechanisms",
    per: str = "level",
) -> tuple[M, ...]:
    """One mechanism for each of ``count`` places (levels, components), from one or ``count``.

    The single check behind every function that takes "one mechanism or one per level".

    Parameters
    ----------
    mechanisms : Mechanism or sequence of Mechanism
        One mechanism for every place, or exactly ``count`` of them.
    count : int
    kind : type, optional
        The class every mechanism must be (default: any :class:`Mechanism`).
    name, per : str
        The argument's name and what a place is, for the error message.

    Returns
    -------
    tuple of Mechanism
        ``count`` mechanisms.

    Raises
    ------
    ValidationError
        For a wrong number or kind of mechanisms.

    Examples
    --------
    >>> from postdp import Geometric
    >>> [str(m.epsilon) for m in expand_mechanisms(Geometric(0.5), count=3)]
    ['0.5', '0.5', '0.5']
    """
    cls = Mechanism if kind is None else kind
    single = isinstance(mechanisms, cls)
    out: tuple[M, ...] = (mechanisms,) * count if single else tuple(mechanisms)  # type: ignore[assignment,arg-type]
    if len(out) != count or not all(isinstance(m, cls) for m in out):
        what = "noise mechanism" if kind is None else f"{cls.__name__} mechanism"
        raise ValidationError(
            f"`{name}` needs one {what} or one per {per} ({count}); got {mechanisms!r}"
        )
    return out


#: The former name of :class:`Mechanism` (used in type hints across the package).
NoiseMechanism = Mechanism

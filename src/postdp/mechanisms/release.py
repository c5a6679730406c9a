"""The release path: exact, cryptographically seeded noise from OpenDP (optional extra).

Naive floating-point Laplace samplers leak through the low bits of their output (Mironov
2012). The release path therefore never uses numpy: it builds the matching OpenDP measurement
(whose samplers are exact and draw from the operating system's CSPRNG), checks that OpenDP's
own privacy map agrees with the cost postdp reports, and applies it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, ClassVar, Protocol

import numpy as np

from postdp._typing import NumArray
from postdp.errors import BudgetError, ValidationError
from postdp.mechanisms.budget import Budget


class _Releasable(Protocol):
    """What the release path reads from a mechanism (no import of the mechanism classes)."""

    family: ClassVar[str]
    discrete: ClassVar[bool]
    sensitivity: float

    @property
    def noise_scale(self) -> float: ...

    def privacy_cost(self) -> Budget: ...


__all__ = [
    "SAMPLERS",
    "exact_parameter",
    "exact_release",
    "opendp_measurement",
    "opendp_release",
    "opendp_sampler",
    "opendp_version",
    "pick_samplers",
    "sampler_name",
]

#: The release path's samplers: postdp's exact one (integer noise; the default where it
#: applies) and OpenDP's.
SAMPLERS = ("postdp", "opendp")

_INSTALL_HINT = (
    "the release path needs OpenDP; install it with: pip install 'postdp[release]' "
    "(or pip install opendp)"
)
# OpenDP rounds its privacy map outward; allow that much above the nominal cost.
_MAP_SLACK = 1e-9


def _opendp() -> Any:
    """OpenDP's measurements, domains and metrics (not ``opendp.prelude``, which also
    imports scikit-learn and scipy.stats for its extras: a second and ~100 MB more for
    every release process)."""
    try:
        import opendp.domains as domains
        import opendp.measurements as measurements
        import opendp.metrics as metrics
        from opendp.mod import enable_features
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(_INSTALL_HINT) from exc
    enable_features("contrib")
    return SimpleNamespace(
        m=measurements,
        atom_domain=domains.atom_domain,
        vector_domain=domains.vector_domain,
        l1_distance=metrics.l1_distance,
        l2_distance=metrics.l2_distance,
    )


def opendp_version() -> str:
    """The installed OpenDP's version (raises ImportError with the install line if absent).

    Examples
    --------
    >>> opendp_version().count(".") >= 1
    True
    """
    from importlib.metadata import PackageNotFoundError, version

    _opendp()
    try:
        return version("opendp")
    except PackageNotFoundError:  # pragma: no cover - imported but not installed as a dist
        return "unknown"


def opendp_measurement(mechanism: _Releasable) -> tuple[Any, Any, float]:
    """Build the OpenDP measurement that matches ``mechanism`` on vectors.

    Parameters
    ----------
    mechanism : Laplace, Geometric, Gaussian or DiscreteGaussian

    Returns
    -------
    measurement : opendp.mod.Measurement
        Vector in, vector out.
    d_in : int or float
        The sensitivity in OpenDP's input metric.
    nominal : float
        The privacy cost postdp reports (ε or ρ).

    Examples
    --------
    >>> from postdp import Geometric
    >>> meas, d_in, nominal = opendp_measurement(Geometric(epsilon=0.5))
    >>> bool(abs(meas.map(d_in) - nominal) < 1e-9)
    True
    """
    dp = _opendp()
    if mechanism.family == "laplace":
        cost = mechanism.privacy_cost().epsilon
        metric = dp.l1_distance
        make = dp.m.make_laplace
    elif mechanism.family == "gaussian":
        cost = mechanism.privacy_cost().rho
        metric = dp.l2_distance
        make = dp.m.make_gaussian
    else:
        raise TypeError(f"no OpenDP release path for mechanism {type(mechanism).__name__}")
    if mechanism.discrete:
        atom = dp.atom_domain(T="i64")
        kind: Any = "i64"
        d_in: int | float = int(mechanism.sensitivity)
    else:
        atom = dp.atom_domain(T=float, nan=False)
        kind = float
        d_in = float(mechanism.sensitivity)
    measurement = make(dp.vector_domain(atom), metric(T=kind), scale=mechanism.noise_scale)
    return measurement, d_in, cost


def opendp_sampler(mechanism: _Releasable) -> Callable[[NumArray], NumArray]:
    """OpenDP's measurement for ``mechanism``, built once and its privacy map checked
    against the cost postdp reports, as a function that releases arrays (for callers that
    release many arrays with one mechanism, e.g. a privacy audit of the release path).

    Parameters
    ----------
    mechanism : Laplace, Geometric, Gaussian or DiscreteGaussian

    Returns
    -------
    callable(values) -> ndarray
        ``values`` already validated (int64 for the discrete mechanisms, float64
        otherwise); the output has its shape and dtype.

    Raises
    ------
    BudgetError
        Where OpenDP accounts more than the nominal cost.

    Examples
    --------
    >>> from postdp import Geometric
    >>> sample = opendp_sampler(Geometric(epsilon=1.0))
    >>> sample(np.array([[5, 7]])).shape
    (1, 2)
    """
    measurement, d_in, nominal = opendp_measurement(mechanism)
    spent = float(measurement.map(d_in))
    if spent > nominal * (1.0 + _MAP_SLACK):
        raise BudgetError(
            f"OpenDP accounts {spent!r} for this release, more than the nominal {nominal!r}"
        )

    def sample(values: NumArray) -> NumArray:
        noisy = measurement(values.reshape(-1).tolist())
        return np.asarray(noisy, dtype=values.dtype).reshape(values.shape)

    return sample


def opendp_release(mechanism: _Releasable, values: NumArray) -> NumArray:
    """Apply ``mechanism`` once to ``values`` with OpenDP (see ``_Releasable.release``).

    Parameters
    ----------
    mechanism : Laplace, Geometric, Gaussian or DiscreteGaussian
    values : ndarray
        Already validated (int64 for the discrete mechanisms, float64 otherwise).

    Returns
    -------
    ndarray, same shape and dtype as ``values``

    Examples
    --------
    >>> from postdp import Geometric
    >>> out = opendp_release(Geometric(epsilon=1.0), np.array([5, 7]))
    >>> out.shape, out.dtype
    ((2,), dtype('int64'))
    """
    return opendp_sampler(mechanism)(values)


def sampler_name(sampler: str) -> str:
    """The sampler as a privacy statement names it: ``"postdp-exact <version>"`` or
    ``"opendp <version>"`` (the latter raises ImportError if OpenDP is missing).

    Examples
    --------
    >>> sampler_name("postdp").startswith("postdp-exact ")
    True
    """
    if sampler == "postdp":
        from postdp.mechanisms.exact import sampler_version

        return sampler_version()
    if sampler == "opendp":
        return f"opendp {opendp_version()}"
    raise ValidationError(f"`sampler` must be one of {', '.join(SAMPLERS)}; got {sampler!r}")


def exact_parameter(mechanism: Any, exact: Fraction | None = None) -> Fraction:
    """The exact rational that postdp's sampler draws ``mechanism``'s noise with: σ² =
    Δ²/(2ρ) for the discrete Gaussian, the scale Δ/ε for the geometric.

    Parameters
    ----------
    mechanism : DiscreteGaussian or Geometric
    exact : Fraction, optional
        The exact ρ (discrete Gaussian) or ε (geometric) that the mechanism's float rounds
        (e.g. a 2020 design's share, :attr:`Workload.exact_rho
        <postdp.tables.Workload.exact_rho>`); default the float's own binary fraction.

    Raises
    ------
    ValidationError
        For a mechanism with real-valued noise (OpenDP's sampler draws those), or an
        ``exact`` that is not the mechanism's parameter.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from postdp import DiscreteGaussian, Geometric
    >>> exact_parameter(DiscreteGaussian(rho=0.5))
    Fraction(1, 1)
    >>> exact_parameter(DiscreteGaussian(rho=1 / 3), Fraction(1, 3))
    Fraction(3, 2)
    >>> exact_parameter(Geometric(epsilon=0.5, sensitivity=2))
    Fraction(4, 1)
    """
    if not mechanism.discrete:
        raise ValidationError(
            f"postdp's exact sampler draws integer noise, not {mechanism.name} noise; use "
            "sampler='opendp'"
        )
    value = mechanism.rho if mechanism.family == "gaussian" else mechanism.epsilon
    if exact is None:
        exact = Fraction(value)
    elif not isinstance(exact, Fraction) or not math.isclose(float(exact), value, rel_tol=1e-12):
        raise ValidationError(f"the exact parameter {exact!r} is not the mechanism's {value!r}")
    delta = Fraction(int(mechanism.sensitivity))
    if mechanism.family == "gaussian":
        return delta**2 / (2 * exact)
    return delta / exact


def exact_release(
    mechanism: Any, values: NumArray, *, exact: Fraction | None = None, source: Any = None
) -> NumArray:
    """``values`` plus noise from postdp's exact sampler (integers, the OS's CSPRNG).

    Parameters
    ----------
    mechanism : DiscreteGaussian or Geometric
    values : ndarray of int64
        Already validated.
    exact : Fraction, optional
        See :func:`exact_parameter`.
    source : BitSource, optional
        Tests only: a fixed bit stream (default ``os.urandom``).

    Returns
    -------
    ndarray of int64, the shape of ``values``

    Examples
    --------
    >>> from postdp import Geometric
    >>> exact_release(Geometric(epsilon=1.0), np.array([5, 7])).dtype
    dtype('int64')
    """
    from postdp.mechanisms.exact import discrete_gaussian, discrete_laplace

    param = exact_parameter(mechanism, exact)
    draw = discrete_gaussian if mechanism.family == "gaussian" else discrete_laplace
    noise = draw(param, int(np.size(values)), source=source)
    out: NumArray = np.asarray(values, dtype=np.int64) + noise.reshape(np.shape(values))
    return out


def pick_samplers(mechanisms: Any, sampler: str | None = None) -> tuple[list[str | None], str]:
    """The sampler of each mechanism on the release path, and their names for a record.

    Parameters
    ----------
    mechanisms : sequence of mechanism or None
        None for a public (noiseless) measurement.
    sampler : {"postdp", "opendp"} or None
        One sampler for all; None: postdp's exact sampler for integer noise, OpenDP's for
        real-valued noise.

    Returns
    -------
    choices : list of str or None
        Per mechanism (None for a public one).
    named : str
        The samplers used with their versions (``"postdp-exact 0.x"``; joined by ``"; "``).

    Raises
    ------
    ValidationError
        An unknown sampler, or ``"postdp"`` for real-valued noise (before anything is drawn).

    Examples
    --------
    >>> from postdp import DiscreteGaussian, Gaussian
    >>> choices, named = pick_samplers([DiscreteGaussian(rho=1.0), None])
    >>> choices, named.startswith("postdp-exact")
    (['postdp', None], True)
    """
    if sampler is not None and sampler not in SAMPLERS:
        raise ValidationError(f"`sampler` must be one of {', '.join(SAMPLERS)}; got {sampler!r}")
    choices: list[str | None] = []
    for m in mechanisms:
        if m is None:
            choices.append(None)
            continue
        pick = sampler or ("postdp" if m.discrete else "opendp")
        if pick == "postdp":
            exact_parameter(m)  # integer noise only
        choices.append(pick)
    used = sorted({c for c in choices if c is not None}, key=SAMPLERS.index)
    return choices, "; ".join(sampler_name(c) for c in used)

"""The release path: exact, cryptographically seeded noise from OpenDP (optional extra).

Naive floating-point Laplace samplers leak through the low bits of their output (Mironov
2012). The release path therefore never uses numpy: it builds the matching OpenDP measurement
(whose samplers are exact and draw from the operating system's CSPRNG), checks that OpenDP's
own privacy map agrees with the cost postdp reports, and applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, ClassVar, Protocol

import numpy as np

from postdp._typing import NumArray
from postdp.errors import BudgetError
from postdp.mechanisms.budget import Budget


class _Releasable(Protocol):
    """What the release path reads from a mechanism (no import of the mechanism classes)."""

    family: ClassVar[str]
    discrete: ClassVar[bool]
    sensitivity: float

    @property
    def noise_scale(self) -> float: ...

    def privacy_cost(self) -> Budget: ...


__all__ = ["opendp_measurement", "opendp_release", "opendp_sampler", "opendp_version"]

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

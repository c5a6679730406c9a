"""Mitigations of the unfairness of decisions on noisy data ([fioretto2021] §7)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray, RNGLike
from postdp.decisions.allotment import _multipliers
from postdp.errors import ValidationError
from postdp.mechanisms import NoiseMechanism
from postdp.postprocess import modified_postprocess, project_sum

__all__ = [
    "LinearProxy",
    "TemperatureSearch",
    "linear_proxy_allotment",
    "optimal_temperature",
    "output_perturbation",
    "sum_constrained",
]


def output_perturbation(
    allotment: ArrayLike, mechanism: NoiseMechanism, *, rng: RNGLike = None, size: int | None = None
) -> FloatArray:
    """Noise added to the outputs P_i(x) instead of the inputs ([fioretto2021] §7.1): unbiased.

    Parameters
    ----------
    allotment : array_like, shape (n,)
        P(x) on the true data.
    mechanism : NoiseMechanism
        Calibrated to the problem's sensitivity by the caller.
    rng : int, numpy.random.Generator, SeedSequence or None
    size : int, optional
        Number of draws (leading axis).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> from postdp import Laplace
    >>> output_perturbation([0.2, 0.8], Laplace(100.0), rng=0, size=3).shape
    (3, 2)
    """
    values = _validation.real_array("allotment", allotment).astype(np.float64)
    out: FloatArray = np.asarray(mechanism.sample(values, rng=rng, size=size), dtype=np.float64)
    return out


def linear_proxy_allotment(
    x: ArrayLike, multipliers: ArrayLike, total: float, *, amount: float = 1.0
) -> FloatArray:
    """The linear proxy P̄^F_i = a_i x_i / Z with Z released separately ([fioretto2021] §7.2).

    Releasing Z = Σ a_j x_j (publicly, or with its own noise) makes the allotment linear in
    the noisy counts, hence unbiased and fair (Corollary 1); shares need not sum to 1.

    Parameters
    ----------
    x : array_like, shape (..., n)
    multipliers : array_like, shape (n,)
    total : float
        The released Z.
    amount : float, default 1

    Returns
    -------
    ndarray, shape (..., n)

    Examples
    --------
    >>> linear_proxy_allotment([10.0, -2.0], [1.0, 1.0], 10.0).tolist()
    [1.0, -0.2]
    """
    values = _validation.real_array("x", x).astype(np.float64)
    w = _multipliers(multipliers, values.shape[-1])
    z = _validation.positive_real("total", total)
    out: FloatArray = amount * w * values / z
    return out


def sum_constrained(allotment: ArrayLike, *, total: float = 1.0) -> FloatArray:
    """Project allotments onto Σ_i P_i = total ([fioretto2021] eq. (29)); α is unchanged (Thm 10).

    Parameters
    ----------
    allotment : array_like, shape (..., n)
    total : float, default 1

    Returns
    -------
    ndarray, shape (..., n)

    Examples
    --------
    >>> sum_constrained([0.3, 0.9]).tolist()
    [0.2, 0.8]
    """
    return project_sum(allotment, total)


@dataclass(slots=True)
class LinearProxy:
    """A piecewise-linear proxy of a decision rule, one linear model per group (§7.2).

    Entities are split into ``n_groups`` groups of about equal size by quantiles of a
    grouping feature (computed on the noisy data, so the grouping stays private); in each
    group a linear model of the features is fitted to the rule's decisions on the training
    data, and predicts the decision as a linear function of the (noisy) features.

    Parameters
    ----------
    features : sequence of str
        E.g. ``("illit", "vaclep", "vacit_total")``.
    group_by : str
        Feature whose quantiles define the groups (the seed uses x^sp).
    n_groups : int, default 9
    model : {"regression", "svm"}, default "regression"
        scikit-learn ``LinearRegression`` (decision: prediction > 0.5) or ``LinearSVC``.

    Examples
    --------
    >>> from postdp.decisions import Threshold
    >>> data = {"x": np.arange(100.0), "y": np.ones(100)}
    >>> proxy = LinearProxy(["x"], "x", n_groups=2).fit(data, Threshold("x", 49.5)(data))
    >>> proxy.predict(data).sum()
    np.int64(50)
    """

    features: tuple[str, ...] | list[str]
    group_by: str
    n_groups: int = field(default=9, kw_only=True)
    model: Literal["regression", "svm"] = field(default="regression", kw_only=True)
    edges: FloatArray = field(init=False, default_factory=lambda: np.zeros(0))
    models: list[Any] = field(init=False, default_factory=list)

    def _matrix(self, data: Mapping[str, ArrayLike]) -> FloatArray:
        cols = [_validation.real_array(f, data[f]).astype(np.float64) for f in self.features]
        return np.stack(cols, axis=-1)

    def _groups(self, data: Mapping[str, ArrayLike]) -> Any:
        key = _validation.real_array(self.group_by, data[self.group_by]).astype(np.float64)
        return np.clip(np.searchsorted(self.edges, key, side="right"), 0, self.n_groups - 1)

    def fit(self, data: Mapping[str, ArrayLike], decisions: ArrayLike) -> LinearProxy:
        """Fit one linear model per group to ``decisions`` (0/1) on ``data``.

        Returns
        -------
        LinearProxy
            ``self``.
        """
        try:
            from sklearn.linear_model import LinearRegression
            from sklearn.svm import LinearSVC
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError(
                "linear proxies need scikit-learn: pip install 'postdp[learn]'"
            ) from exc
        if self.n_groups < 1:
            raise ValidationError(f"`n_groups` must be at least 1; got {self.n_groups}")
        key = _validation.real_array(self.group_by, data[self.group_by]).astype(np.float64)
        self.edges = np.quantile(key, np.linspace(0, 1, self.n_groups + 1)[1:-1])
        X = self._matrix(data)
        y = np.asarray(decisions, dtype=np.float64)
        groups = self._groups(data)
        self.models = []
        for g in range(self.n_groups):
            rows = groups == g
            if self.model == "svm" and len(set(y[rows])) == 2:
                m: Any = LinearSVC(C=1.0, max_iter=20_000).fit(X[rows], y[rows].astype(int))
            elif self.model in ("svm", "regression"):
                m = LinearRegression().fit(X[rows], y[rows]) if rows.any() else None
            else:
                raise ValidationError(f"`model` must be 'regression' or 'svm'; got {self.model!r}")
            self.models.append(m)
        return self

    def predict(self, data: Mapping[str, ArrayLike]) -> Any:
        """Decisions (0/1) of the proxy on ``data`` (any batch shape on leading axes)."""
        X = self._matrix(data)
        groups = self._groups(data)
        out = np.zeros(X.shape[:-1], dtype=np.int64)
        for g, m in enumerate(self.models):
            rows = groups == g
            if m is None or not rows.any():
                continue
            score = (
                m.decision_function(X[rows])
                if hasattr(m, "decision_function")
                else (m.predict(X[rows]) - 0.5)
            )
            out[rows] = (score > 0).astype(np.int64)
        return out


# ---------------------------------------------------------------- the temperature T* (§7.3)
@dataclass(frozen=True, slots=True)
class TemperatureSearch:
    """Result of :func:`optimal_temperature`.

    Attributes
    ----------
    temperature : float
        T*, the grid temperature with the smallest objective.
    temperatures : ndarray, shape (k,)
        The grid searched.
    objective : ndarray, shape (k,)
        max_q |bias| - min_q |bias| at each temperature ([fioretto2021] eq. (32)).
    bias : ndarray, shape (k, m)
        Monte Carlo bias of the modified post-processing at each temperature and true value.
    q : ndarray, shape (m,)
        The true values.
    standard_error : ndarray, shape (k, m)
        Standard errors of ``bias``.

    Examples
    --------
    >>> from postdp import Laplace
    >>> res = optimal_temperature([0, 2, 5, 20], Laplace.from_scale(2.0),
    ...                           temperatures=[0, 0.5, 1, 2], n_draws=2000, rng=0)
    >>> res.bias.shape, res.temperature in res.temperatures
    ((4, 4), True)
    """

    temperature: float
    temperatures: FloatArray
    objective: FloatArray
    bias: FloatArray
    q: FloatArray
    standard_error: FloatArray

    def to_frame(self) -> pd.DataFrame:
        """Long form: one row per temperature and true value, with bias, its SE, objective.

        Examples
        --------
        >>> from postdp import Laplace
        >>> res = optimal_temperature([0, 5], Laplace(1.0), temperatures=[0, 1], n_draws=500,
        ...                           rng=0)
        >>> res.to_frame().shape
        (4, 5)
        """
        k, m = self.bias.shape
        return pd.DataFrame(
            {
                "temperature": np.repeat(self.temperatures, m),
                "q": np.tile(self.q, k),
                "bias": self.bias.ravel(),
                "standard_error": self.standard_error.ravel(),
                "objective": np.repeat(self.objective, m),
            }
        )


def optimal_temperature(
    q: ArrayLike,
    mechanism: NoiseMechanism,
    *,
    temperatures: ArrayLike,
    n_draws: int = 20_000,
    lower: float = 0.0,
    rng: RNGLike = None,
) -> TemperatureSearch:
    """Search the temperature T* of [fioretto2021] eq. (32) by Monte Carlo over true values.

    T* = argmin_T ( max_q |E[x̂_T] - q| - min_q |E[x̂_T] - q| ), the expectation estimated
    from ``n_draws`` noisy draws of every q. The same draws serve every T (common random
    numbers), so the comparison between temperatures is not blurred by independent noise,
    and a seed reproduces the search exactly.

    Parameters
    ----------
    mechanism : NoiseMechanism
        The noise (any of postdp's mechanisms).
    q : array_like, shape (m,)
        True values x >= ℓ to balance the bias over (the search needs the true values, so
        it is a design-time tool, as the seed notes).
    temperatures : array_like, shape (k,)
        Nonnegative candidate temperatures.
    n_draws : int, default 20000
    lower : float, default 0
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    TemperatureSearch

    Examples
    --------
    >>> from postdp import Laplace
    >>> res = optimal_temperature(np.arange(0, 10), Laplace.from_scale(1.0),
    ...                           temperatures=[0.0, 0.5, 1.0], n_draws=5000, rng=1)
    >>> bool(res.objective.min() <= res.objective[0])
    True
    """
    if not isinstance(mechanism, NoiseMechanism):
        raise TypeError(f"`mechanism` must be a noise mechanism; got {type(mechanism).__name__}")
    qs = _validation.float_array("q", q).reshape(-1)
    grid = _validation.float_array("temperatures", temperatures).reshape(-1)
    if grid.size == 0 or (grid < 0).any():
        raise ValidationError(f"`temperatures` must be nonnegative and nonempty; got {grid!r}")
    (draws_n,) = _validation.size_tuple(n_draws)
    if draws_n < 2:
        raise ValidationError(f"`n_draws` must be at least 2; got {n_draws!r}")
    lo = _validation.finite_real("lower", lower)
    truth = qs.astype(np.int64) if mechanism.discrete and np.all(qs == np.round(qs)) else qs
    draws = mechanism.sample(truth, rng=rng, size=draws_n).astype(np.float64)
    bias = np.empty((grid.size, qs.size))
    se = np.empty_like(bias)
    for i, t in enumerate(grid):
        out = modified_postprocess(draws, temperature=float(t), lower=lo)
        bias[i] = out.mean(axis=0) - qs
        se[i] = out.std(axis=0, ddof=1) / math.sqrt(draws_n)
    size = np.abs(bias)
    objective = size.max(axis=1) - size.min(axis=1)
    best = int(np.argmin(objective))
    return TemperatureSearch(float(grid[best]), grid, objective, bias, qs, se)

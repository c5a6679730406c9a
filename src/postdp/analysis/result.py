"""The result of a Monte Carlo run (:func:`postdp.simulate`): per-entity error moments with
their standard errors, error histograms, exact errors of selected entities, and the sums a
design adds (a table's metric sums)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, FloatArray, IntArray, NumArray
from postdp.errors import ValidationError
from postdp.mechanisms import Budget

__all__ = ["BiasVerdict", "MonteCarloResult", "largest_abs_quantile"]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MonteCarloResult:
    """Per-node error statistics of a release design over independent draws.

    Errors are released value minus true value. Standard errors (``*_se``) come from the
    sample itself; confidence intervals are estimate ± z·SE.

    Attributes
    ----------
    ids : ndarray of str, shape (n,)
    truth : ndarray, shape (n,)
    n_draws : int
    bias, bias_se : ndarray, shape (n,)
        Mean error and its standard error.
    variance, variance_se : ndarray, shape (n,)
        Sample variance of the error and its standard error (from the fourth moment).
    mse, mse_se, mae, mae_se : ndarray, shape (n,)
        Mean squared and mean absolute error, with standard errors.
    half_range : ndarray, shape (n,)
        Half-width of each node's histogram range: its ``bins`` equal bins cover
        [-half_range, half_range] (:attr:`edges` gives their edges).
    counts : ndarray of int, shape (n, bins + 2)
        Error histogram counts; the first and last columns count errors below and above
        the edges.
    raw_ids : ndarray of str
        Nodes whose errors before post-processing were also histogrammed.
    raw_counts : ndarray of int, shape (len(raw_ids), bins + 2)
    budget : Budget
        Of the design.
    exact_ids : ndarray of str
        Nodes whose every error was kept (``simulate(..., exact=...)``).
    exact_errors : ndarray, shape (n_draws, len(exact_ids))
        Their errors, in the order of the draws.
    extra : dict of str to ndarray
        Sums a design adds beside the per-entity statistics (a table :class:`ReleaseDesign`'s
        per-geounit metric sums, see :meth:`ReleaseDesign.metrics`); empty otherwise.

    Examples
    --------
    >>> from postdp import Laplace, Hierarchy
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [50, 20, 30])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project"), n_draws=2000, rng=0)
    >>> res.to_frame().columns[:4].tolist()
    ['id', 'truth', 'bias', 'bias_se']
    """

    ids: npt.NDArray[np.object_]
    truth: NumArray
    n_draws: int
    bias: FloatArray
    bias_se: FloatArray
    variance: FloatArray
    variance_se: FloatArray
    mse: FloatArray
    mse_se: FloatArray
    mae: FloatArray
    mae_se: FloatArray
    half_range: FloatArray
    counts: IntArray
    raw_ids: npt.NDArray[np.object_]
    raw_counts: IntArray
    budget: Budget
    error_min: FloatArray | None = None
    error_max: FloatArray | None = None
    exact_ids: npt.NDArray[np.object_] | None = None
    exact_errors: FloatArray | None = None
    extra: dict[str, FloatArray] = field(default_factory=dict)

    def __repr__(self) -> str:
        extra = f", extra sums {sorted(self.extra)}" if self.extra else ""
        return (
            f"<MonteCarloResult: {self.ids.size:,} entities x {self.n_draws:,} draws, "
            f"{self.budget}{extra}; .to_frame() for the statistics>"
        )

    @property
    def edges(self) -> FloatArray:
        """Histogram bin edges of each node's error, shape (n, bins + 1): computed when asked
        (the result keeps :attr:`half_range`, one number per node, not (bins + 1))."""
        return self._grid()[None, :] * self.half_range[:, None]

    def _grid(self) -> FloatArray:
        """The edges of a node whose half range is 1."""
        return np.linspace(-1.0, 1.0, self.counts.shape[1] - 1)

    def exact_quantiles(self, probs: ArrayLike = (0.05, 0.5, 0.95)) -> FloatArray:
        """Error quantiles of the nodes in :attr:`exact_ids`, from every draw (no binning).

        Parameters
        ----------
        probs : array_like of float in (0, 1)

        Returns
        -------
        ndarray, shape (len(exact_ids), len(probs))
            ``numpy.quantile`` (linear interpolation) of each node's errors.

        Examples
        --------
        >>> from postdp import Laplace, Hierarchy
        >>> from postdp.analysis import ReleaseDesign, simulate
        >>> h = Hierarchy.from_parents(["T", "a"], [None, "T"], [10, 10])
        >>> res = simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=4000, rng=1, exact=["a"])
        >>> res.exact_quantiles([0.5]).shape
        (1, 1)
        """
        p = np.atleast_1d(np.asarray(probs, dtype=np.float64))
        if ((p <= 0) | (p >= 1)).any():
            raise ValidationError(f"`probs` must lie in (0, 1); got {p.tolist()}")
        if self.exact_errors is None or self.exact_errors.shape[1] == 0:
            raise ValidationError(
                "no node's errors were kept: pass `exact=[ids]` to simulate for exact quantiles"
            )
        out: FloatArray = np.quantile(self.exact_errors, p, axis=0).T
        return out

    def quantiles(self, probs: ArrayLike = (0.05, 0.5, 0.95)) -> FloatArray:
        """Error quantiles of every node, interpolated in the histogram.

        Parameters
        ----------
        probs : array_like of float in (0, 1)

        Returns
        -------
        ndarray, shape (n, len(probs))
            Accurate to one bin width (the histogram's range / bins), and never outside the
            smallest and largest error seen (so a node that is always exact, such as a
            public one, has quantiles exactly 0); NaN where the quantile falls outside the
            histogram's range.

        Examples
        --------
        >>> from postdp import Laplace, Hierarchy
        >>> from postdp.analysis import ReleaseDesign, simulate
        >>> h = Hierarchy.from_parents(["T"], [None], [10])
        >>> res = simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=20000, rng=1)
        >>> abs(float(res.quantiles([0.5])[0, 0])) < 0.05
        True
        """
        p = np.atleast_1d(np.asarray(probs, dtype=np.float64))
        if ((p <= 0) | (p >= 1)).any():
            raise ValidationError(f"`probs` must lie in (0, 1); got {p.tolist()}")
        cum = np.cumsum(self.counts, axis=1) / self.n_draws  # includes the under-flow bin
        out = np.empty((self.counts.shape[0], p.size))
        grid, n_edges = self._grid(), self.counts.shape[1] - 1
        for j, pj in enumerate(p):
            k = np.argmax(cum >= pj, axis=1)  # first bin reaching pj
            inside = (k >= 1) & (k <= n_edges - 1)
            kk = np.clip(k, 1, n_edges - 1)
            rows = np.arange(cum.shape[0])
            before = cum[rows, kk - 1]
            width = np.maximum(cum[rows, kk] - before, 1e-300)
            frac = (pj - before) / width
            lo = grid[kk - 1] * self.half_range
            hi = grid[kk] * self.half_range
            out[:, j] = np.where(inside, lo + frac * (hi - lo), np.nan)
        if self.error_min is not None and self.error_max is not None:
            out = np.clip(out, self.error_min[:, None], self.error_max[:, None])
        return out

    def wasserstein_to_laplace(self, scale: float | ArrayLike, *, points: int = 2000) -> FloatArray:
        """W1 distance between each node's error histogram and Laplace(scale).

        Parameters
        ----------
        scale : float or array_like, shape (n,)
            Laplace scale λ to compare with ([zhu2021] Fig. 5 compares the post-processed
            error with the Laplace noise that was added).
        points : int, default 2000
            Quantiles of the Laplace law used to represent it.

        Returns
        -------
        ndarray, shape (n,)
            ``scipy.stats.wasserstein_distance`` between the binned errors (bin centres
            weighted by counts) and Laplace quantiles; exact up to half a bin width.

        Examples
        --------
        >>> from postdp import Laplace, Hierarchy
        >>> from postdp.analysis import ReleaseDesign, simulate
        >>> h = Hierarchy.from_parents(["T"], [None], [10])
        >>> res = simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=20000, rng=1)
        >>> float(res.wasserstein_to_laplace(1.0)[0]) < 0.05
        True
        """
        scales = np.broadcast_to(np.asarray(scale, dtype=np.float64), self.bias.shape)
        u = (np.arange(points) + 0.5) / points
        grid = self._grid()
        out = np.empty(self.bias.shape)
        for i in range(out.size):
            edges = grid * self.half_range[i]
            centre = 0.5 * (edges[1:] + edges[:-1])
            weights = self.counts[i, 1:-1].astype(np.float64)
            if weights.sum() == 0:
                out[i] = np.nan
                continue
            law = stats.laplace.ppf(u, scale=scales[i])
            out[i] = stats.wasserstein_distance(centre, law, u_weights=weights)
        return out

    def bias_verdict(self, *, level: float = 0.05, names: ArrayLike | None = None) -> BiasVerdict:
        """Whether the run shows a bias, judged against what chance alone gives.

        With ``m`` entities tested and no bias anywhere, about ``level x m`` of them have
        |bias| / SE above the two-sided ``level`` critical value, and the largest |z| is
        near the median of the largest of ``m`` absolute Student t values with n - 1
        degrees of freedom (the law of a mean over its estimated standard error; normal for
        many draws). The verdict is
        "systematic bias" when the flagged count passes its chance expectation by more than
        3 binomial standard deviations, or the largest |z| passes the 99% point of that
        maximum; otherwise "no bias detected".

        Parameters
        ----------
        level : float, default 0.05
            Two-sided level of each entity's test.
        names : array_like of str, optional
            A display name per entity (default: the ids).

        Returns
        -------
        BiasVerdict
            ``str()`` of it is the sentence a report's headline shows.

        Examples
        --------
        >>> from postdp import Hierarchy, Laplace
        >>> from postdp.analysis import ReleaseDesign, simulate
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [3, 1, 2])
        >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=4000, rng=0)
        >>> res.bias_verdict().detected  # (P+) near 0 is biased upward
        True
        """
        if not 0.0 < level < 1.0:
            raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
        labels = self.ids if names is None else np.asarray(names, dtype=object)
        if labels.shape != self.ids.shape:
            raise ValidationError(f"`names` needs one name per entity ({self.ids.size})")
        tested = self.bias_se > 0
        z = np.where(tested, np.abs(self.bias) / np.where(tested, self.bias_se, 1.0), 0.0)
        m = int(tested.sum())
        worst = int(np.argmax(z))
        df = self.n_draws - 1  # bias / SE of a mean of n draws: Student t, n - 1 dof
        critical = float(stats.t.isf(level / 2.0, df))
        flagged = int((z > critical).sum())
        expected = level * m
        spread = math.sqrt(m * level * (1.0 - level))
        limit = largest_abs_quantile(0.99, m, df=df)
        return BiasVerdict(
            tested=m,
            flagged=flagged,
            expected_flagged=expected,
            largest_z=float(z[worst]),
            expected_largest_z=largest_abs_quantile(0.5, m, df=df),
            largest_z_limit=limit,
            detected=bool(m and (flagged > expected + 3.0 * spread or z[worst] > limit)),
            worst=str(labels[worst]),
            worst_bias=float(self.bias[worst]),
            worst_half_width=float(1.96 * self.bias_se[worst]),
            level=level,
            critical=critical,
        )

    def confidence_interval(
        self, statistic: str = "bias", *, z: float = 1.96
    ) -> ConfidenceInterval:
        """Estimate ± z·SE for ``bias``, ``variance``, ``mse`` or ``mae`` (level 2Φ(z) - 1).

        Examples
        --------
        >>> from postdp import Laplace, Hierarchy
        >>> from postdp.analysis import ReleaseDesign, simulate
        >>> h = Hierarchy.from_parents(["T"], [None], [10])
        >>> res = simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=5000, rng=2)
        >>> lo, hi = res.confidence_interval()
        >>> bool(lo[0] < 0 < hi[0])
        True
        """
        if statistic not in ("bias", "variance", "mse", "mae"):
            raise ValidationError(
                f"`statistic` must be bias, variance, mse or mae; got {statistic!r}"
            )
        est = getattr(self, statistic)
        se = getattr(self, f"{statistic}_se")
        return ConfidenceInterval(est - z * se, est + z * se, math.erf(z / math.sqrt(2.0)))

    def to_frame(
        self,
        *,
        z: float = 1.96,
        quantiles: ArrayLike = (0.05, 0.5, 0.95),
        hierarchy: Any = None,
        names: Mapping[str, str] | None = None,
    ) -> pd.DataFrame:
        """One row per node: truth, bias, variance, MSE, MAE with their Monte Carlo standard
        errors and intervals, and error quantiles.

        Parameters
        ----------
        z : float, default 1.96
            Width of the intervals in standard errors (95% for a normal estimate).
        quantiles : array_like
            Error quantiles to add (columns ``q05``, ``q50``, ...).
        hierarchy : Hierarchy, optional
            The hierarchy simulated: adds each node's ``level`` (depth) and ``parent``.
        names : mapping of str to str, optional
            Readable names by id (e.g. the bundled files' ``name`` column): adds ``name``.

        Returns
        -------
        pandas.DataFrame
            ``id`` (then ``name``, ``level``, ``parent`` when asked), ``truth``, and for each
            of bias, variance, mse, mae the estimate, ``<stat>_se``, ``<stat>_lo`` and
            ``<stat>_hi``; the quantiles; ``n_draws``.

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy, simulate
        >>> from postdp.analysis import ReleaseDesign
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> r = simulate(ReleaseDesign(h, Geometric(1.0), "project"), n_draws=50, rng=0)
        >>> f = r.to_frame(hierarchy=h, names={"T": "total"})
        >>> list(f.columns[:6]), f["level"].tolist()
        (['id', 'name', 'level', 'parent', 'truth', 'bias'], [0, 1, 1])
        """
        frame = pd.DataFrame({"id": list(self.ids)})
        if names is not None:
            frame["name"] = [names.get(str(i), "") for i in self.ids]
        if hierarchy is not None:
            where = pd.Index(hierarchy.ids.astype(str)).get_indexer(
                pd.Index([str(i) for i in self.ids])
            )
            if (where < 0).any():
                raise ValidationError("`hierarchy` does not hold every simulated id")
            parents = hierarchy.parent[where]
            frame["level"] = hierarchy.depth[where]
            frame["parent"] = np.where(parents >= 0, hierarchy.ids[np.maximum(parents, 0)], "")
        frame["truth"] = self.truth
        for name in ("bias", "variance", "mse", "mae"):
            lo, hi = self.confidence_interval(name, z=z)
            frame[name] = getattr(self, name)
            frame[f"{name}_se"] = getattr(self, f"{name}_se")
            frame[f"{name}_lo"] = lo
            frame[f"{name}_hi"] = hi
        probs = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
        if probs.size:
            q = self.quantiles(probs)
            if self.exact_ids is not None and self.exact_ids.size:  # exact where kept
                where = pd.Index(self.ids).get_indexer(pd.Index(self.exact_ids))
                q[where] = self.exact_quantiles(probs)
            for j, pj in enumerate(probs):
                frame[f"q{round(100 * pj):02d}"] = q[:, j]
        frame["n_draws"] = self.n_draws
        return frame


def largest_abs_quantile(q: float, m: int, *, df: float = math.inf) -> float:
    """The q-quantile of the largest of ``m`` independent absolute Student t values with
    ``df`` degrees of freedom (absolute standard normals for ``df = inf``): what chance alone
    gives as the largest |estimate| / SE among ``m`` unbiased estimates.

    Parameters
    ----------
    q : float
        In (0, 1).
    m : int
        Number of estimates (0 gives 0).
    df : float, default inf
        Degrees of freedom: n - 1 for a mean of n draws over its estimated SE.

    Returns
    -------
    float
        x with P(max <= x) = q, i.e. (2 F(x) - 1)^m = q.

    Examples
    --------
    >>> round(largest_abs_quantile(0.5, 1), 4)  # the median of one |N(0, 1)|
    0.6745
    >>> round(largest_abs_quantile(0.5, 3195), 2)
    3.7
    """
    if not 0.0 < q < 1.0:
        raise ValidationError(f"`q` must lie strictly between 0 and 1; got {q!r}")
    if m <= 0:
        return 0.0
    tail = -math.expm1(math.log(q) / m)  # 1 - q^(1/m), accurate for large m
    law = stats.norm if math.isinf(df) else stats.t(df)
    return float(law.isf(tail / 2.0))


@dataclass(frozen=True)
class BiasVerdict:
    """A run's verdict on bias against the multiple-testing expectation (see
    :meth:`MonteCarloResult.bias_verdict`).

    Attributes
    ----------
    tested : int
        Entities with a positive standard error (those a public value fixes are not tested).
    flagged : int
        Tested entities whose |bias| / SE passes the two-sided ``level`` critical value.
    expected_flagged : float
        ``level x tested``: the flagged count chance alone gives.
    largest_z, expected_largest_z, largest_z_limit : float
        The largest |bias| / SE, and the median and 99% point of the largest of ``tested``
        absolute standard normals.
    detected : bool
        Whether the run shows a bias (see the method).
    worst : str
        The entity with the largest |bias| / SE, its ``worst_bias`` and the half-width
        ``worst_half_width`` of its 95% interval.
    level : float
    critical : float
        The |bias| / SE above which a count is flagged: the two-sided ``level`` point of
        Student t with n - 1 degrees of freedom (NaN when not given).

    Examples
    --------
    >>> v = BiasVerdict(3195, 154, 159.75, 3.54, 3.70, 4.6, False, "US", 1.0, 2.0, 0.05)
    >>> str(v).split(";")[0]
    'no bias detected: 154 flagged vs ~160 expected by chance'
    """

    tested: int
    flagged: int
    expected_flagged: float
    largest_z: float
    expected_largest_z: float
    largest_z_limit: float
    detected: bool
    worst: str
    worst_bias: float
    worst_half_width: float
    level: float
    critical: float = field(default=math.nan, kw_only=True)

    def __str__(self) -> str:
        if not self.tested:
            return "nothing to test: every count is fixed"
        if not self.detected:
            return (
                f"no bias detected: {self.flagged:,} flagged vs ~{self.expected_flagged:,.0f} "
                f"expected by chance; largest |z| {self.largest_z:.3g} vs "
                f"~{self.expected_largest_z:.2g} expected for {self.tested:,} counts"
            )
        share = self.flagged / self.tested
        return (
            f"systematic bias: {share:.1%} of {self.tested:,} counts flagged vs "
            f"{self.level:.0%} by chance; worst: {self.worst}, {self.worst_bias:+,.4g} "
            f"(±{self.worst_half_width:,.2g})"
        )

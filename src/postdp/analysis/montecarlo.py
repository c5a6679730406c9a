"""Monte Carlo audit of a release design: streaming, reproducible, parallel, memory-bounded.

A run of ``n_draws`` is cut into *chunks* whose size depends only on the hierarchy (never on
``batch``, the workers or the memory budget); chunk k draws its noise and rounding from the
k-th child of one ``SeedSequence``. Chunks are gathered in fixed *blocks* of
``BLOCK_CHUNKS``; a task reduces one block, chunk by chunk in order, to one set of statistics
(power sums, extremes and an integer histogram per node), and the blocks are combined in
order. The order of every floating-point addition is therefore fixed by the run, so a seed
gives bit-identical results for any batch size, worker count or Dask cluster, and a task
ships back one set of statistics, not one per chunk.

Memory is bounded by ``max_memory``, never by ``n_draws``: the working set of a batch of
draws (about ``8 x WORK_ARRAYS`` bytes per value) plus the histograms (int32 counts per node
and bin: one accumulator per task in flight and one total, and a transient int64 count of one
chunk). When the histograms of all nodes at the requested ``bins`` would not fit in half the
budget, fewer bins are used (quantiles are then accurate to the coarser bin width), and the
batch is cut to what the other half holds (results do not depend on it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, FloatArray, IntArray, NumArray, RNGLike
from postdp.analysis._engine import (
    BLOCK_CHUNKS,
    DEFAULT_MAX_MEMORY,
    EXTRA,
    _Plan,
    _run_block,
    _windowed,
    chunk_rows,
    combine_stats,
    fit_memory,
)
from postdp.analysis.design import ReleaseDesign
from postdp.analysis.memory import MemoryPlan, check_run_options, memory_plan
from postdp.analysis.table_design import TableDesign
from postdp.errors import ValidationError
from postdp.mechanisms import Budget

__all__ = ["MemoryPlan", "MonteCarloResult", "memory_plan", "simulate"]


@dataclass(frozen=True, slots=True, eq=False)
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
    edges : ndarray, shape (n, bins + 1)
        Histogram bin edges of each node's error.
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
        Sums a design adds beside the per-entity statistics (a :class:`TableDesign`'s
        per-geounit metric sums, see :meth:`TableDesign.metrics`); empty otherwise.

    Examples
    --------
    >>> from postdp import Laplace, Hierarchy
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [50, 20, 30])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project"), n_draws=2000, rng=0)
    >>> res.to_frame().columns[:4].tolist()
    ['id', 'truth', 'bias', 'bias_lo']
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
    edges: FloatArray
    counts: IntArray
    raw_ids: npt.NDArray[np.object_]
    raw_counts: IntArray
    budget: Budget
    error_min: FloatArray | None = None
    error_max: FloatArray | None = None
    exact_ids: npt.NDArray[np.object_] | None = None
    exact_errors: FloatArray | None = None
    extra: dict[str, FloatArray] = field(default_factory=dict)

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
        for j, pj in enumerate(p):
            k = np.argmax(cum >= pj, axis=1)  # first bin reaching pj
            inside = (k >= 1) & (k <= self.edges.shape[1] - 1)
            kk = np.clip(k, 1, self.edges.shape[1] - 1)
            rows = np.arange(cum.shape[0])
            before = cum[rows, kk - 1]
            width = np.maximum(cum[rows, kk] - before, 1e-300)
            frac = (pj - before) / width
            lo = self.edges[rows, kk - 1]
            hi = self.edges[rows, kk]
            out[:, j] = np.where(inside, lo + frac * (hi - lo), np.nan)
        if self.error_min is not None and self.error_max is not None:
            out = np.clip(out, self.error_min[:, None], self.error_max[:, None])
        return out

    def wasserstein_to_laplace(self, scale: float | ArrayLike, *, points: int = 2000) -> FloatArray:
        """W1 distance between each node's error histogram and Laplace(scale).

        Parameters
        ----------
        scale : float or array_like, shape (n,)
            Laplace scale λ to compare with (seed 000 Fig. 5 compares the post-processed
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
        centres = 0.5 * (self.edges[:, 1:] + self.edges[:, :-1])
        out = np.empty(self.bias.shape)
        for i in range(out.size):
            weights = self.counts[i, 1:-1].astype(np.float64)
            if weights.sum() == 0:
                out[i] = np.nan
                continue
            law = stats.laplace.ppf(u, scale=scales[i])
            out[i] = stats.wasserstein_distance(centres[i], law, u_weights=weights)
        return out

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
        self, *, z: float = 1.96, quantiles: ArrayLike = (0.05, 0.5, 0.95)
    ) -> pd.DataFrame:
        """One row per node: truth, bias, variance, MSE, MAE with intervals, and quantiles.

        Parameters
        ----------
        z : float, default 1.96
            Width of the intervals in standard errors (95% for a normal estimate).
        quantiles : array_like
            Error quantiles to add (columns ``q05``, ``q50``, ...).

        Returns
        -------
        pandas.DataFrame
        """
        frame = pd.DataFrame({"id": list(self.ids), "truth": self.truth})
        for name in ("bias", "variance", "mse", "mae"):
            lo, hi = self.confidence_interval(name, z=z)
            frame[name] = getattr(self, name)
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


def simulate(
    design: ReleaseDesign | TableDesign,
    truth: ArrayLike | None = None,
    *,
    n_draws: int,
    batch: int = 1000,
    rng: RNGLike = None,
    workers: int = 1,
    client: Any = None,
    bins: int = 400,
    raw: Sequence[str] = (),
    exact: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    max_memory: int = DEFAULT_MAX_MEMORY,
) -> MonteCarloResult:
    """Run ``design`` ``n_draws`` times on fixed true counts and summarise the errors per node.

    Parameters
    ----------
    design : ReleaseDesign or TableDesign
        A table design's entities are its (geounit, category node) counts; it is simulated
        on its table's counts (no ``truth``, no ``raw``), and the result's ``extra`` holds
        the sums behind the Census Bureau's metrics (:meth:`TableDesign.metrics`).
    truth : array_like, shape (n,), optional
        True counts (default: the design's hierarchy's), e.g. shifted counts (seed 000
        Fig. 4).
    n_draws : int
        Number of independent releases.
    batch : int, default 1000
        Rows processed at once; bounds memory. Results do not depend on it.
    rng : int or SeedSequence, optional
        One seed for the whole run (a ``Generator`` is accepted and spawns the run's seed).
    workers : int, default 1
        Local processes. Results do not depend on it.
    client : dask.distributed.Client, optional
        Run the chunks on a Dask cluster instead (same results for the same seed).
    bins : int, default 400
        Histogram bins per node, over ±8 standard deviations of the noise summed down to
        that node's level (errors beyond fall in two overflow bins); quantiles and
        Wasserstein distances come from these histograms.
    raw : sequence of str
        Node ids whose errors *before* post-processing are histogrammed too (seed 000
        Fig. 1).
    exact : sequence of str
        Node ids whose every error is kept, for exact quantiles
        (:meth:`MonteCarloResult.exact_quantiles`; ``to_frame`` uses them for these nodes).
        Costs 8 bytes per draw and node, on top of ``max_memory``: the one part of the
        statistics that grows with ``n_draws``, so keep the selection small.
    progress : callable(done, total), optional
        Called after each block of chunks.
    max_memory : int, default 768 MiB
        Bytes the statistics and the batches in flight may take; the batch is cut, and for
        very large hierarchies the bins reduced, to fit it (:func:`memory_plan`). Results do
        not depend on it except through the bins.

    Returns
    -------
    MonteCarloResult

    Examples
    --------
    >>> from postdp import Laplace, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [50, 20, 30])
    >>> d = ReleaseDesign(h, Laplace(1.0), "project")
    >>> a = simulate(d, n_draws=3000, batch=100, rng=5)
    >>> b = simulate(d, n_draws=3000, batch=3000, rng=5)
    >>> bool((a.bias == b.bias).all())
    True
    """
    if not isinstance(design, ReleaseDesign | TableDesign):
        raise TypeError(
            f"`design` must be a ReleaseDesign or TableDesign; got {type(design).__name__}"
        )
    if isinstance(design, TableDesign) and (len(raw) or design.step is None):
        raise ValidationError(
            "a TableDesign is simulated with its post-processing and without `raw`"
        )
    counts = design._truth(truth)
    n_total, batch_rows, n_workers, bins, max_memory = check_run_options(
        n_draws, batch, workers, bins, max_memory
    )
    n = design.n_entities
    bins_used, per_batch, _ = fit_memory(
        n,
        n_draws=n_total,
        batch=batch_rows,
        bins=int(bins),
        workers=1 if client is not None else n_workers,
        max_memory=int(max_memory),
    )
    keep_raw = design.entity_index(list(raw)) if len(raw) else np.zeros(0, dtype=np.int64)
    keep_exact = design.entity_index(list(exact)) if len(exact) else np.zeros(0, dtype=np.int64)
    chain = design.chain(counts) if isinstance(design, ReleaseDesign) and design.steps else None
    scale = design.error_scale()
    plan = _Plan(design, counts, scale, bins_used, keep_raw, keep_exact, chain)
    rows = chunk_rows(n)
    n_chunks = math.ceil(n_total / rows)
    sizes = [min(rows, n_total - k * rows) for k in range(n_chunks)]
    if isinstance(rng, np.random.Generator):
        root = rng.bit_generator.seed_seq.spawn(1)[0]  # type: ignore[attr-defined]
    elif isinstance(rng, np.random.SeedSequence):
        root = rng
    else:
        root = np.random.SeedSequence(None if rng is None else int(rng))
    seeds = root.spawn(n_chunks)
    blocks = [range(k, min(k + BLOCK_CHUNKS, n_chunks)) for k in range(0, n_chunks, BLOCK_CHUNKS)]
    tasks = [([seeds[k] for k in b], [sizes[k] for k in b]) for b in blocks]
    total: dict[str, NumArray] | None = None

    def absorb(result: dict[str, NumArray], done: int) -> None:
        nonlocal total
        if total is None:
            total = result
        else:
            combine_stats(total, result)  # in block order
        if progress:
            progress(done, len(tasks))

    args = (
        [plan] * len(tasks),
        [t[0] for t in tasks],
        [t[1] for t in tasks],
        [per_batch] * len(tasks),
    )
    if client is not None:
        window = 2 * max(1, len(client.scheduler_info().get("workers", {})))
        shipped = client.scatter(plan, broadcast=True)  # the plan travels once, not per task
        args = ([shipped] * len(tasks), *args[1:])
        _windowed(lambda *a: client.submit(_run_block, *a, pure=False), args, window, absorb)
    elif n_workers > 1:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            _windowed(lambda *a: pool.submit(_run_block, *a), args, 2 * n_workers, absorb)
    else:
        for done, (block_seeds, block_sizes) in enumerate(tasks, start=1):
            absorb(_run_block(plan, block_seeds, block_sizes, per_batch), done)
    assert total is not None
    return _summarise(plan, total)


def _summarise(plan: _Plan, total: dict[str, NumArray]) -> MonteCarloResult:
    ids = plan.design.entity_ids
    N = float(total["n"])
    m1, m2, m3, m4, mae = total["sums"] / N
    var = np.maximum(m2 - m1**2, 0.0) * N / (N - 1.0)
    central4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4
    var_se = np.sqrt(np.maximum(central4 - var**2, 0.0) / N)
    mse_se = np.sqrt(np.maximum(m4 - m2**2, 0.0) / N)
    mae_se = np.sqrt(np.maximum(m2 - mae**2, 0.0) / N)
    half = plan.edges_scale
    edges = np.linspace(-1.0, 1.0, plan.bins + 1)[None, :] * half[:, None]
    return MonteCarloResult(
        ids=ids,
        truth=plan.truth,
        n_draws=int(N),
        bias=m1,
        bias_se=np.sqrt(var / N),
        variance=var,
        variance_se=var_se,
        mse=m2,
        mse_se=mse_se,
        mae=mae,
        mae_se=mae_se,
        edges=edges,
        counts=np.ascontiguousarray(total["hist"].T),
        raw_ids=ids[plan.keep_raw],
        raw_counts=np.ascontiguousarray(total["raw"].T),
        budget=plan.design.budget,
        error_min=total["lo"],
        error_max=total["hi"],
        exact_ids=ids[plan.keep_exact],
        exact_errors=total["exact"],
        extra={k[len(EXTRA) :]: v for k, v in total.items() if k.startswith(EXTRA)},
    )

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
from typing import Any

import numpy as np

from postdp._typing import ArrayLike, NumArray, RNGLike
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
from postdp.analysis.memory import MemoryPlan, check_run_options, memory_plan
from postdp.analysis.result import MonteCarloResult
from postdp.analysis.simulation import SimulationDesign

__all__ = ["MemoryPlan", "MonteCarloResult", "memory_plan", "simulate"]


def simulate(
    design: SimulationDesign,
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
    design : ReleaseDesign or any SimulationDesign
        What is released (:mod:`postdp.analysis.simulation` states what a design gives the
        engine). A table design's entities are its (geounit, category node) counts; it is
        simulated with its post-processing (no ``raw``), and the result's ``extra``
        holds the sums behind the Census Bureau's metrics (:meth:`ReleaseDesign.metrics`).
    truth : array_like, optional
        True counts (default: the design's own), e.g. shifted counts ([zhu2021] Fig. 4):
        shape (n,) for a hierarchy design, (leaf geounits, detailed cells) for a table
        design.
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
        Node ids whose errors *before* post-processing are histogrammed too ([zhu2021]
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
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [50, 20, 30])
    >>> d = ReleaseDesign(h, Laplace(1.0), "project")
    >>> a = simulate(d, n_draws=3000, batch=100, rng=5)
    >>> b = simulate(d, n_draws=3000, batch=3000, rng=5)
    >>> bool((a.bias == b.bias).all())
    True
    """
    if not isinstance(design, SimulationDesign):
        raise TypeError(
            "`design` must be a ReleaseDesign or another design that follows "
            f"postdp.analysis.simulation's protocol; got {type(design).__name__}"
        )
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
    sim = design.simulation(truth, raw=bool(len(raw)))  # checks the run before any draw
    plan = _Plan(design, sim, bins_used, keep_raw, keep_exact)
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
        half_range=plan.edges_scale,
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

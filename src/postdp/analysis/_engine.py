"""The Monte Carlo engine's internals (private): chunks, blocks, the memory plan.

See :mod:`postdp.analysis.montecarlo` for the design: chunks of a size fixed by the
number of entities, reduced in fixed blocks (moments in order, histograms as integer counts), blocks
combined in order, memory bounded by a budget.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._kernels import N_SUMS, add_histogram, add_moments
from postdp._typing import FloatArray, IntArray, NumArray
from postdp.analysis.simulation import Simulation, SimulationDesign

__all__ = ["DEFAULT_MAX_MEMORY", "chunk_rows", "fit_memory"]


#: Each chunk holds at least this many values (rows x nodes).
CHUNK_VALUES = 1 << 18
#: Chunks per reduction block (one task); fixed so that sums never depend on the batch.
BLOCK_CHUNKS = 16
#: Arrays of a batch's size alive at once while a batch is simulated and reduced.
WORK_ARRAYS = 20
#: The fewest histogram bins a memory budget may leave.
MIN_BINS = 8
#: Prefix of the statistics keys a design adds beside the per-entity ones (e.g. a table's
#: per-geounit metric sums).
EXTRA = "extra:"
#: Default memory budget of ``simulate``, bytes.
DEFAULT_MAX_MEMORY = 768 << 20


def chunk_rows(n: int) -> int:
    """Rows per chunk for a hierarchy of ``n`` nodes (depends on nothing else)."""
    return max(1, math.ceil(CHUNK_VALUES / max(1, n)))


@dataclass(frozen=True, slots=True)
class _Plan:
    design: SimulationDesign
    sim: Simulation  # the design's prepared run (truth, histogram ranges, draws)
    bins: int
    keep_raw: IntArray  # entities whose pre-post-processing errors are histogrammed too
    keep_exact: IntArray  # entities whose every error is kept (exact quantiles)

    @property
    def truth(self) -> NumArray:
        return self.sim.truth

    @property
    def edges_scale(self) -> FloatArray:
        """Half-width of each entity's histogram range."""
        return self.sim.error_scale


def _new_stats(n: int, bins: int, n_raw: int, n_exact: int) -> dict[str, NumArray]:
    """Empty statistics of one block: power sums, extremes and int32 histograms, bin-major
    (shape (bins + 2, n): an under- and an overflow bin around ``bins`` equal bins)."""
    return {
        "n": np.array(0),
        "sums": np.zeros((N_SUMS, n)),
        "lo": np.full(n, np.inf),
        "hi": np.full(n, -np.inf),
        "hist": np.zeros((bins + 2, n), dtype=np.int32),
        "raw": np.zeros((bins + 2, n_raw), dtype=np.int32),
        "exact": np.zeros((0, n_exact)),
    }


def _count(
    plan: _Plan, err: FloatArray, hist: npt.NDArray[np.int32], nodes: IntArray | None
) -> None:
    """Histogram ``err`` on each node's range [-half, half] (integer counts, so the order of
    chunks does not matter)."""
    half = plan.edges_scale if nodes is None else plan.edges_scale[nodes]
    add_histogram(err, plan.bins / (2.0 * half), plan.bins / 2.0 + 1.0, hist)


def _run_block(
    plan: _Plan, seeds: Sequence[np.random.SeedSequence], sizes: Sequence[int], per_batch: int
) -> dict[str, NumArray]:
    """Simulate one block of chunks, ``per_batch`` chunks at a time, and reduce it to one set
    of statistics: every sum adds the block's rows in chunk order, whatever ``per_batch``."""
    stats = _new_stats(plan.truth.size, plan.bins, plan.keep_raw.size, plan.keep_exact.size)
    for start in range(0, len(sizes), per_batch):
        stop = min(start + per_batch, len(sizes))
        _simulate_chunks(plan, seeds[start:stop], sizes[start:stop], stats)
    return stats


def _simulate_chunks(
    plan: _Plan,
    seeds: Sequence[np.random.SeedSequence],
    sizes: Sequence[int],
    stats: dict[str, NumArray],
) -> None:
    """Simulate a group of chunks together and add their errors to ``stats`` in place."""
    out = plan.sim.release(seeds, sizes, plan.keep_raw)
    for sums in out.extra:  # chunk by chunk, in order: the same totals for any grouping
        for name, value in sums.items():
            key = EXTRA + name
            stats[key] = stats[key] + value if key in stats else value
    if plan.keep_raw.size and out.raw is not None:
        raw_err = np.asarray(out.raw, dtype=np.float64) - plan.truth[plan.keep_raw]
        _count(plan, raw_err, stats["raw"], plan.keep_raw)
    released = out.values
    released -= plan.truth  # the errors, in place
    _count(plan, released, stats["hist"], None)
    add_moments(released, stats["sums"], stats["lo"], stats["hi"])
    stats["n"] += released.shape[0]
    if plan.keep_exact.size:  # the selected entities' errors, in draw order
        stats["exact"] = np.concatenate([stats["exact"], released[:, plan.keep_exact]])


def combine_stats(total: dict[str, NumArray], part: dict[str, NumArray]) -> None:
    """Add one block's statistics to the run's total, in place (blocks in order)."""
    total["n"] += part["n"]
    total["sums"] += part["sums"]
    np.minimum(total["lo"], part["lo"], out=total["lo"])
    np.maximum(total["hi"], part["hi"], out=total["hi"])
    total["hist"] += part["hist"]
    total["raw"] += part["raw"]
    total["exact"] = np.concatenate([total["exact"], part["exact"]])
    for key in part:
        if key.startswith(EXTRA):
            total[key] = total[key] + part[key] if key in total else part[key]


def fit_memory(
    n: int, *, n_draws: int, batch: int, bins: int, workers: int = 1, max_memory: int
) -> tuple[int, int, int]:
    """Bins, chunks per batch and the estimated peak bytes of a run (see the module notes;
    the public view is :func:`postdp.analysis.memory_plan`).

    Parameters
    ----------
    n : int
        Nodes of the hierarchy.
    n_draws, batch, bins, workers : int
        As for :func:`simulate`.
    max_memory : int
        Bytes the statistics and the working batches may take together.

    Returns
    -------
    bins : int
        Histogram bins per node that fit half the budget (at most the requested ``bins``,
        at least ``MIN_BINS``).
    per_batch : int
        Chunks simulated at once (the batch, cut to the other half of the budget).
    estimate : int
        Estimated peak bytes of the statistics and working arrays.

    Examples
    --------
    >>> b, per, est = fit_memory(2_000_000, n_draws=20, batch=1000, bins=400, max_memory=2**31)
    >>> b < 400, per, est < 2**31
    (True, 3, True)
    """
    rows = chunk_rows(n)
    blocks_in_flight = max(1, workers) + 1  # one accumulator per task in flight, one total
    per_bin = n * 4 * blocks_in_flight + n * 8  # int32 accumulators + one int64 chunk count
    fit = int((max_memory // 2) // per_bin) - 2
    bins_used = max(MIN_BINS, min(int(bins), fit))
    hist_bytes = per_bin * (bins_used + 2)
    per_row = n * 8 * WORK_ARRAYS * max(1, workers)
    room_rows = max(rows, int((max_memory - hist_bytes) // max(1, per_row)))
    want_rows = min(max(int(batch), rows), max(int(n_draws), rows))
    per_batch = max(1, min(want_rows, room_rows) // rows)
    per_batch = min(per_batch, BLOCK_CHUNKS)
    estimate = hist_bytes + per_batch * rows * per_row
    return bins_used, per_batch, int(estimate)


def _windowed(
    submit: Callable[..., Any],
    args: tuple[list[Any], ...],
    window: int,
    absorb: Callable[[dict[str, NumArray], int], None],
) -> None:
    """Run the tasks with at most ``window`` in flight; absorb their results in task order."""
    pending: deque[Any] = deque()
    done = 0
    for task_args in zip(*args, strict=True):
        pending.append(submit(*task_args))
        if len(pending) >= window:
            done += 1
            future = pending.popleft()
            absorb(future.result(), done)
            if hasattr(future, "release"):
                future.release()
    while pending:
        done += 1
        future = pending.popleft()
        absorb(future.result(), done)
        if hasattr(future, "release"):
            future.release()

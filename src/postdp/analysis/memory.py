"""A Monte Carlo run's memory, known before it runs: the plan ``simulate`` follows and the
numbers ``postdp audit`` prints.

:func:`~postdp.analysis.simulate` draws in chunks whose size depends only on the number of
entities, reduces each block of chunks (one task) to fixed-size statistics (power sums,
extremes, int32 histograms) and holds a few batches of working arrays at once; so its memory
is bounded by ``max_memory`` whatever ``n_draws`` is. :func:`memory_plan` gives every number
of that plan for a design and the run's options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from postdp import _validation
from postdp._kernels import N_SUMS
from postdp.analysis._engine import BLOCK_CHUNKS, DEFAULT_MAX_MEMORY, chunk_rows, fit_memory
from postdp.analysis.simulation import SimulationDesign
from postdp.errors import ValidationError

__all__ = ["MemoryPlan", "memory_plan"]


@dataclass(frozen=True)
class MemoryPlan:
    """The memory plan of one Monte Carlo run (see :func:`memory_plan`).

    Attributes
    ----------
    entities : int
        Counts summarised per draw (nodes; a table's geounits x category nodes).
    n_draws : int
    bins : int
        Histogram bins per entity: the requested number, or fewer when the histograms
        would not fit half of ``max_memory``.
    draws_per_chunk : int
        Draws made at once (a fixed function of ``entities``).
    chunks_per_batch : int
        Chunks held at once by each process.
    draws_per_task : int
        Draws reduced to one set of statistics (a task, local or on Dask).
    tasks : int
    task_statistics_bytes : int
        Size of one task's statistics (what a Dask task sends back).
    solve_bytes : int
        A table design's draws being solved (one per process); 0 for a hierarchy.
    peak_bytes : int
        Estimated peak of the statistics, the batches in flight and the solves.
    max_memory : int
        The budget planned for.

    Examples
    --------
    >>> plan = memory_plan(3195, n_draws=10_000)
    >>> plan.tasks, plan.draws_per_task, plan.fits
    (8, 1328, True)
    """

    entities: int
    n_draws: int
    bins: int
    draws_per_chunk: int
    chunks_per_batch: int
    draws_per_task: int
    tasks: int
    task_statistics_bytes: int
    solve_bytes: int
    peak_bytes: int
    max_memory: int

    @property
    def fits(self) -> bool:
        """Whether the estimated peak is within ``max_memory``."""
        return self.peak_bytes <= self.max_memory

    def __str__(self) -> str:
        cut = "" if self.fits else f", over the budget of {self.max_memory / 2**20:,.0f} MB"
        return (
            f"about {self.peak_bytes / 2**20:,.0f} MB for {self.entities:,} entities x "
            f"{self.n_draws:,} draws ({self.tasks:,} tasks of {self.draws_per_task:,} draws, "
            f"{self.bins} histogram bins{cut})"
        )


def memory_plan(
    design: SimulationDesign | int,
    *,
    n_draws: int,
    batch: int = 1000,
    bins: int = 400,
    workers: int = 1,
    max_memory: int = DEFAULT_MAX_MEMORY,
) -> MemoryPlan:
    """The memory :func:`~postdp.analysis.simulate` will take for these options.

    Parameters
    ----------
    design : ReleaseDesign, any SimulationDesign, or int
        The design (or its number of entities, e.g. a hierarchy's nodes).
    n_draws, batch, bins, workers, max_memory
        As for :func:`~postdp.analysis.simulate` (``workers=1`` for a run on Dask).

    Returns
    -------
    MemoryPlan

    Raises
    ------
    ValidationError
        For options :func:`~postdp.analysis.simulate` refuses.

    Examples
    --------
    >>> plan = memory_plan(2_000_000, n_draws=20, max_memory=2**31)
    >>> plan.bins < 400, plan.chunks_per_batch, plan.fits
    (True, 3, True)
    >>> print(memory_plan(3195, n_draws=10_000))
    about 505 MB for 3,195 entities x 10,000 draws (8 tasks of 1,328 draws, 400 histogram bins)
    """
    n_total, batch_rows, n_workers, n_bins, budget = check_run_options(
        n_draws, batch, workers, bins, max_memory
    )
    if isinstance(design, SimulationDesign):
        n = design.n_entities
    elif isinstance(design, int | np.integer) and not isinstance(design, bool) and design > 0:
        n = int(design)
    else:
        raise TypeError(
            "`design` must be a design (a ReleaseDesign) or a positive number of "
            "entities; "
            f"got {design!r}"
        )
    bins_used, per_batch, estimate = fit_memory(
        n, n_draws=n_total, batch=batch_rows, bins=n_bins, workers=n_workers, max_memory=budget
    )
    rows = chunk_rows(n)
    per_task = rows * BLOCK_CHUNKS
    statistics = 8 + 8 * n * (N_SUMS + 2) + 4 * n * (bins_used + 2)  # as _new_stats makes
    solve = int(getattr(design, "solve_bytes", 0)) * n_workers  # a design's own solver
    return MemoryPlan(
        entities=n,
        n_draws=n_total,
        bins=bins_used,
        draws_per_chunk=rows,
        chunks_per_batch=per_batch,
        draws_per_task=per_task,
        tasks=math.ceil(n_total / per_task),
        task_statistics_bytes=statistics,
        solve_bytes=solve,
        peak_bytes=estimate + solve,
        max_memory=budget,
    )


def check_run_options(
    n_draws: Any, batch: Any, workers: Any, bins: Any, max_memory: Any
) -> tuple[int, int, int, int, int]:
    """The run options of ``simulate`` and ``memory_plan``, checked (ValidationError)."""
    (n_total,) = _validation.size_tuple(n_draws)
    (batch_rows,) = _validation.size_tuple(batch)
    (n_workers,) = _validation.size_tuple(workers)
    if n_total < 2 or batch_rows < 1 or n_workers < 1:
        raise ValidationError(
            "`n_draws` must be at least 2 and `batch`, `workers` at least 1; got "
            f"n_draws={n_draws}, batch={batch}, workers={workers}"
        )
    if bins < 2:
        raise ValidationError(f"`bins` must be at least 2; got {bins}")
    if isinstance(max_memory, bool) or not isinstance(max_memory, int | np.integer):
        raise ValidationError(f"`max_memory` must be a whole number of bytes; got {max_memory!r}")
    if max_memory < 1 << 20:
        raise ValidationError(f"`max_memory` must be at least 1 MiB; got {max_memory}")
    return n_total, batch_rows, n_workers, int(bins), int(max_memory)

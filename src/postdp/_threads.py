"""Native thread pools held to one thread (private).

The least-squares solves (P) run as many medium-sized BLAS calls. On a machine whose cores
are shared with other work, a multi-threaded BLAS waits for threads that have lost their
core: on 2 cores beside a job using both, (P) of a Vermont-sized state took 2.4 times its
noise floor with two BLAS threads and 1.4 times with one (``benchmarks/bench_schema.py``;
docs/scale.md), at the cost of about a tenth on a quiet machine. One thread also fixes a
sum's order, so the last bit of a solution does not depend on the machine's thread count or
on a Dask worker's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["one_thread"]


def one_thread() -> Any:
    """A context manager holding BLAS and OpenMP to one thread (``threadpoolctl``; about a
    millisecond to enter, so use it around a solve, not inside its loops)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)

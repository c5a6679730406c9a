"""The Dask cluster the suite's tests run tasks on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests._processes import processes_turn


@contextlib.contextmanager
def dask_client() -> Iterator[Any]:
    """A client of a LocalCluster of one worker process, one thread (the test is skipped
    without Dask).

    One process is enough to test the distributed path (tasks pickled, run in another
    interpreter, gathered back, in whatever order they finish); that results do not depend
    on which process runs a task is what the tests' ``workers=2`` runs check. Each worker
    process holds its own numpy, scipy, pandas and postdp (150-250 MB), beside the two
    pytest workers: a second one made the suite's peak memory. The cluster lives in the
    session's turn to start processes (:mod:`tests._processes`).
    """
    distributed = pytest.importorskip("dask.distributed")
    with (
        processes_turn(),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client

"""One test at a time starts worker processes (a process pool, a Dask cluster).

The suite's two pytest workers each hold 0.6-0.7 GB by mid-run; a test that starts two
worker processes adds 0.2-0.5 GB beside its own worker, and two such tests at once on both
workers made the suite's peak memory (measured 2026-12-02: 1,470 MiB, with four forked
children). A test that starts them takes :func:`processes_turn` (the ``processes`` marker,
or :func:`tests._dask.dask_client`): a lock file shared by the session's workers, so the
other worker's such test waits a few seconds instead. Where ``fcntl`` is missing (Windows)
or outside a session of the root ``conftest.py``, the turn is taken at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: The environment variable naming the session's lock file (set by the root conftest.py).
LOCK_ENV = "POSTDP_TESTS_PROCESSES_LOCK"

_held = [0]  # this process's nested turns (a marked test that also starts a Dask cluster)


@contextlib.contextmanager
def processes_turn() -> Iterator[None]:
    """Hold the session's turn to start worker processes for the ``with`` block."""
    path = os.environ.get(LOCK_ENV)
    if fcntl is None or not path or _held[0]:
        _held[0] += 1
        try:
            yield
        finally:
            _held[0] -= 1
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _held[0] += 1
        try:
            yield
        finally:
            _held[0] -= 1
            fcntl.flock(handle, fcntl.LOCK_UN)

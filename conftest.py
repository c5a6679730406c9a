"""Root test configuration: applies to the tests and to the doctests of the package."""

import os

# figures in doctests and tests are drawn off screen, whatever the machine's display
os.environ.setdefault("MPLBACKEND", "Agg")
# pyarrow allocates through the C library's malloc (held lean by pytest_configure below),
# not its own pool, which keeps the pages it frees: measured on tests/nmf and tests/data in
# one process, the large anonymous mappings left at the end fell from 75 to 15 MB (same time)
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


import contextlib
import ctypes
import sys

import pytest

#: glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8


def _glibc():
    """The C library when it is glibc (its malloc_trim and mallopt), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018 (musl has no malloc_trim)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()

#: The BLAS thread limit of a pytest-xdist worker (None outside one), held for the session.
_BLAS = None


def pytest_configure(config):
    """Each pytest-xdist worker runs BLAS on one thread: with one worker per core (the
    suite's default), more threads per worker only fight over the same cores (measured: the
    release-table guide and the TopDown bounds tests used 61 s of CPU with two BLAS threads,
    49 s with one).

    Under glibc, every test process keeps its heap lean over the hundreds of tests it runs:
    a fixed 1 MiB threshold for serving an allocation by its own mapping (glibc raises the
    threshold each time such a block is freed, up to 32 MiB, after which big arrays are
    carved out of the heap and fragment it), and at most two malloc arenas (the threads of
    BLAS, Arrow and Dask otherwise get one each). Measured on tests/nmf, tests/tables and
    the tables CLI in one process: peak 1,195 MiB before, 1,074 MiB after; 208 s, 217 s.
    """
    global _BLAS
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the session's process: its workers inherit
        import tempfile

        path = os.path.join(tempfile.gettempdir(), f"postdp-tests-{os.getpid()}.lock")
        os.environ.setdefault("POSTDP_TESTS_PROCESSES_LOCK", path)  # tests/_processes.py
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        _LIBC.mallopt(_M_ARENA_MAX, 2)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from threadpoolctl import threadpool_limits

        _BLAS = threadpool_limits(limits=1, user_api="blas")


@pytest.fixture(autouse=True)
def _ledger_of_this_test(tmp_path, monkeypatch):
    """Secure releases made by a test (or a doctest, or a command it runs) record themselves
    in a ledger of that test, never in the user's own (postdp's default is per user)."""
    monkeypatch.setenv("POSTDP_LEDGER", str(tmp_path / "postdp-ledger.jsonl"))


@pytest.fixture(autouse=True)
def _figures_closed_after_each_test():
    """Every figure a test or doctest drew is closed after it: pyplot keeps figures until
    closed, and the 21st open one warns (an error here), whichever test left the others."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of a file, give the memory its tests freed back to the system:
    glibc's heap (and pyarrow's own pool, when a user sets one) keep freed pages, so a worker's
    resident memory only grew over the suite (measured after the release-table guide's
    block-group release: 523 MB resident, 302 MB once both were released). No
    ``gc.collect()`` here: it gave back 3 MB there and cost about 0.16 s a file."""
    if nextitem is not None and nextitem.path == item.path:
        return
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def pytest_unconfigure(config):
    """Remove the session's lock file of tests/_processes.py (its own session only)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = os.environ.get("POSTDP_TESTS_PROCESSES_LOCK", "")
    if path.endswith(f"postdp-tests-{os.getpid()}.lock"):
        with contextlib.suppress(OSError):
            os.remove(path)

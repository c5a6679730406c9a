"""Shared fixtures and configuration of the test suite."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import numpy as np


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis's profiles, in every process that runs tests. CI runs hypothesis
    derandomised so a submission passes or fails the same way every time.

    pytest-xdist's controller runs none, so it imports neither hypothesis nor numpy: it is a
    process of the suite's peak memory (58 MiB with them, measured with two workers)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the controller of pytest-xdist's workers
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci",
        derandomize=True,
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("dev", max_examples=100, deadline=None)
    profile = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    settings.load_profile("ci" if os.environ.get("CI") else profile)


# A full run (no -k, -m or explicit paths) must collect at least this many tests, so a broken
# import or a misconfigured path cannot make the suite pass by running nothing.
MIN_TESTS = 100


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    full_run = (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.option.keyword
        and not config.option.markexpr
    )
    if full_run and len(session.items) < MIN_TESTS:
        raise pytest.UsageError(
            f"only {len(session.items)} tests collected; a full run must collect {MIN_TESTS}+"
        )


#: Test files that start a browser: they run first, each on a fresh worker, so the browser's
#: ~0.4 GB sits beside workers that hold their imports only, not beside two workers grown
#: through a run (the suite's peak memory; pyproject's --no-loadscope-reorder keeps this order).
FIRST_FILES = ("tests/report/test_browser.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the files for the workers: :data:`FIRST_FILES` first; then the files with a test
    marked ``processes``, for the same reason as the browser's (a worker process of 0.2 GB
    beside two pytest workers that have grown to 0.5-0.7 GB each made the suite's peak
    memory); then the others. Within each group, the files with the most tests go first
    (pytest-xdist's own order, which --no-loadscope-reorder turns off so that this one
    holds); tests keep their order within a file."""
    count: dict[str, int] = {}
    starts_processes: set[str] = set()
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        count[path] = count.get(path, 0) + 1
        if item.get_closest_marker("processes") is not None:
            starts_processes.add(path)
    rank = {
        path: (path not in FIRST_FILES, path not in starts_processes, -n)
        for path, n in count.items()
    }
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])


@pytest.fixture(autouse=True)
def _processes_turn(request: pytest.FixtureRequest):
    """A test marked ``processes`` (it starts worker processes) runs in the session's turn
    to start them: one such test at a time over the suite's workers (tests/_processes.py)."""
    if request.node.get_closest_marker("processes") is None:
        yield
        return
    from tests._processes import processes_turn

    with processes_turn():
        yield


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator for tests that need one."""
    import numpy as np

    return np.random.default_rng(20261121)

"""Shared fixtures and configuration of the test suite."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI runs hypothesis derandomised so a submission passes or fails the same way every time.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

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
    """Order the files for the workers: :data:`FIRST_FILES` first, then the files with the
    most tests (pytest-xdist's own order, which --no-loadscope-reorder turns off so that
    this one holds); tests keep their order within a file."""
    count: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        count[path] = count.get(path, 0) + 1
    rank = {path: (path not in FIRST_FILES, -n) for path, n in count.items()}
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
    return np.random.default_rng(20261121)

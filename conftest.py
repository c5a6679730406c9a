"""Root test configuration: applies to the tests and to the doctests of the package."""

import os

# figures in doctests and tests are drawn off screen, whatever the machine's display
os.environ.setdefault("MPLBACKEND", "Agg")


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _ledger_of_this_test(tmp_path, monkeypatch):
    """Secure releases made by a test (or a doctest, or a command it runs) record themselves
    in a ledger of that test, never in the user's own (postdp's default is per user)."""
    monkeypatch.setenv("POSTDP_LEDGER", str(tmp_path / "postdp-ledger.jsonl"))


@pytest.fixture(autouse=True)
def _figures_closed_after_each_test():
    """Every figure a test or doctest drew is closed after it: pyplot keeps figures until
    closed, and the 21st open one warns (an error here), whichever test left the others."""
    import sys

    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


#: Test files that measure a whole synthetic state (the District of Columbia: about 1.2 GB
#: at its peak, for a few seconds): one worker runs them all, so that two such peaks rarely
#: add up in two workers (pytest-xdist, --dist loadfile in pyproject.toml). The pages of
#: tests/test_docs.py run on the other worker's time: with them in this group, it ran 22
#: minutes while the other worker sat idle for 9.
ONE_WORKER = frozenset(
    {
        "tests/cli/test_measure_ledger.py",
        "tests/cli/test_nmf_cli.py",
        "tests/nmf/test_census_names.py",
        "tests/nmf/test_files.py",
        "tests/nmf/test_measure.py",
        "tests/nmf/test_runs.py",
        "tests/nmf/test_study.py",
    }
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, but the files of :data:`ONE_WORKER` share one worker."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "measures-a-state" if path in ONE_WORKER else path

    return Scheduling(config, log)

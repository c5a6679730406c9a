"""Peak memory and time of ``postdp postprocess`` by method, on one noisy-measurement run.

Run by hand (never collected by pytest)::

    python benchmarks/bench_postprocess_memory.py                  # District of Columbia
    python benchmarks/bench_postprocess_memory.py --states 10 --repeat 5
    python benchmarks/bench_postprocess_memory.py --methods project,topdown-2020,topdown

The run is measured once on the study path (``postdp measure --synthetic STATES --strategy
pl94-2020-persons --study --seed 1``: the synthetic 2020 persons population, the
production workload), into a temporary folder. Then each method is post-processed
``--repeat`` times, the methods taking turns, each time in a fresh process of the public
command line (``postdp postprocess RUN --output-dir OUT --method M``) so that its peak
resident memory is its own (``os.wait4``'s ``ru_maxrss`` of that child alone).

Printed per method: the median wall time and the median peak of the runs (each run's
too), then the ratio of each method's median peak to the first method's; the load
average (``os.getloadavg``) before and after. ``project`` is the BLUE, with its standard
deviations and the published tables' margins of error; ``topdown-2020`` the 2020
production estimator (its least squares and rounding, by subtree tasks).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _postdp(*args: str) -> list[str]:
    return [sys.executable, "-m", "postdp", *args]


def _child(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident GB of one child process (which must succeed)."""
    start = time.perf_counter()
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(job.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return seconds, usage.ru_maxrss / 1e6  # KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", default="11", help="state FIPS codes, e.g. 11 or 10,11")
    parser.add_argument("--methods", default="project,topdown-2020")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    methods = args.methods.split(",")
    work = Path(tempfile.mkdtemp(prefix="postdp-bench-"))
    try:
        run = work / "run"
        seconds, peak = _child(
            _postdp(
                "measure",
                "--synthetic",
                args.states,
                "--strategy",
                "pl94-2020-persons",
                "--output-dir",
                str(run),
                "--study",
                "--seed",
                "1",
                "--quiet",
            )
        )
        print(f"measured states {args.states} in {seconds:.1f} s (peak {peak:.2f} GB)")
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        times: dict[str, list[float]] = {m: [] for m in methods}
        peaks: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(args.repeat):
            for method in methods:
                out = work / "out"
                shutil.rmtree(out, ignore_errors=True)
                post = ["postprocess", str(run), "--output-dir", str(out), "--method", method]
                s, p = _child(_postdp(*post, "--quiet"))
                times[method].append(s)
                peaks[method].append(p)
        first = statistics.median(peaks[methods[0]])
        print(f"{'method':<16}{'median s':>10}{'median GB':>11}{'/ first':>9}  runs (s; GB)")
        for m in methods:
            med = statistics.median(peaks[m])
            runs = ", ".join(f"{s:.1f}" for s in times[m])
            gbs = ", ".join(f"{p:.2f}" for p in peaks[m])
            print(
                f"{m:<16}{statistics.median(times[m]):>10.1f}{med:>11.2f}{med / first:>9.2f}"
                f"  {runs}; {gbs}"
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

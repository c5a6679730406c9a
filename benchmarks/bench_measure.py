"""Measuring a run state by state, in one process and as Dask tasks on 1 and 2 workers.

Run by hand (never collected by pytest)::

    python benchmarks/bench_measure.py                       # DC and Delaware, study path
    python benchmarks/bench_measure.py --secure --scale 0.2  # postdp's exact sampler
    python benchmarks/bench_measure.py --states 11,10,44 --repeat 5
    python benchmarks/bench_measure.py --secure --scale 0.05 --cut-blocks 500  # subtree tasks

Each configuration measures the synthetic 2020 population of ``--states``
(``postdp.nmf.synthetic_population``, at ``--scale``) with the persons preset through
``postdp.nmf.measure_by_state``: ``here`` in this process, then the states as tasks on a
Dask LocalCluster of 1 and of 2 worker processes (one thread each; the cluster started
before the clock starts). On the study path the three write the same files. Printed: the
median wall time of ``--repeat`` runs of each, the median of the per-run ratios 2 workers /
1 worker, and the load average before and after (``os.getloadavg``). The ratio is bounded
below by the largest task's share of the work: the states are the tasks, and the subtrees
(counties, tracts) of a state above ``--cut-blocks`` blocks. When no state is cut, the
blocks by state and that bound (the busier worker's share of the blocks, states placed
largest first) are printed too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from postdp.nmf import measure_by_state, synthetic_population
from postdp.tables import load_strategy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", default="11,10")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--secure", action="store_true", help="postdp's exact sampler")
    parser.add_argument(
        "--cut-blocks", type=int, default=100_000, help="states above it cut into tasks"
    )
    args = parser.parse_args()
    from dask.distributed import Client, LocalCluster

    states = args.states.split(",")
    strategy = load_strategy("pl94-2020-persons")

    def tables(state: str):
        return strategy.tabulate(synthetic_population([state], seed=0, scale=args.scale))

    work = Path(tempfile.mkdtemp(prefix="bench-measure-"))
    print(f"states {states}, scale {args.scale}, {'secure' if args.secure else 'study'} path")
    print(f"load average before {os.getloadavg()[0]:.2f}")
    times: dict[str, list[float]] = {"here": [], "1 worker": [], "2 workers": []}
    clusters = {
        "1 worker": LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0"),
        "2 workers": LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0"),
    }
    clients = {k: Client(c) for k, c in clusters.items()}
    try:
        for r in range(args.repeat):
            for name in times:
                run = work / f"{name.replace(' ', '-')}-{r}"
                t0 = time.perf_counter()
                measure_by_state(
                    tables, states, run, strategy=strategy, secure=args.secure,
                    rng=None if args.secure else r, scheduler=clients.get(name),
                    cut_blocks=args.cut_blocks,
                )  # fmt: skip
                times[name].append(time.perf_counter() - t0)
                shutil.rmtree(run)
    finally:
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [b / a for a, b in zip(times["1 worker"], times["2 workers"], strict=True)]
    for name, runs in times.items():
        print(f"{name:<10} median {statistics.median(runs):8.1f} s   runs {runs}")
    print(f"2 workers / 1 worker: median ratio {statistics.median(ratios):.2f}")
    blocks = {s: tables(s).geography.leaves.size for s in states}
    if max(blocks.values()) <= args.cut_blocks:  # whole states as tasks: the balance's bound
        print(
            f"blocks by state {blocks}; {_balance(list(blocks.values())):.2f} of the blocks "
            "on the busier of 2 workers (states placed largest first on the less loaded)"
        )
    print(f"load average after {os.getloadavg()[0]:.2f}")


def _balance(sizes: list[int]) -> float:
    """The busier worker's share when tasks of these sizes go, largest first, to the less
    loaded of 2 workers: the ratio 2 / 1 workers cannot fall below it (blocks stand in
    for time)."""
    load = [0, 0]
    for size in sorted(sizes, reverse=True):
        load[load.index(min(load))] += size
    return max(load) / sum(sizes)


if __name__ == "__main__":
    main()

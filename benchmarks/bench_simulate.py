"""Monte Carlo audit speed on the county hierarchy against the noise-drawing floor.

Run by hand (never collected by pytest)::

    python benchmarks/bench_simulate.py                 # 10,000 draws
    python benchmarks/bench_simulate.py --draws 2000 --workers 2
    python benchmarks/bench_simulate.py --draws 100000 --scaling   # 1 vs 2 workers, Dask
    python benchmarks/bench_simulate.py --large         # ~112k nodes x 2,000; 2M x 20

The floor is drawing the Laplace noise alone for every node and draw, in the same batches
(``Laplace.sample`` of ``batch`` rows at a time: the noise plus the true counts, nothing else);
``simulate`` adds the post-processing, the per-node statistics and histograms. With
``--scaling`` it times (P+) with 1 and 2 local worker processes and on a Dask LocalCluster of 1
and 2 workers (medians of ``--repeat``), prints the speed-ups measured in this process, and the
peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from postdp import Laplace
from postdp.analysis import ReleaseDesign, memory_plan, simulate
from postdp.data import county_hierarchy, synthetic_hierarchy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--scale", type=float, default=10.0, help="Laplace scale lambda")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--scaling", action="store_true", help="1 vs 2 workers, and Dask")
    parser.add_argument(
        "--large", action="store_true", help="a ~112k-node tree x 2,000 and 2M nodes x 20"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one --large case, in a child
    args = parser.parse_args()
    if args.case:
        large_case(args.case, args.repeat)
        return
    if args.large:
        large(args)
        return
    if args.scaling:
        scaling(args)
        return

    h = county_hierarchy()
    m = Laplace.from_scale(args.scale)
    x = h.counts.astype(float)

    def floor_run() -> None:  # noise plus the true counts, batch by batch, nothing else
        for k, start in enumerate(range(0, args.draws, args.batch)):
            m.sample(x, rng=k, size=min(args.batch, args.draws - start))

    designs = {
        label: ReleaseDesign(h, m, steps)
        for label, steps in (
            ("none", "none"),
            ("(P)", "project"),
            ("top-down", "topdown"),
            ("(P+)", "project-nonneg"),
            ("(P+),round", "project-nonneg,round"),
        )
    }
    for design in designs.values():  # compile the statistics kernels, prepare the projectors
        simulate(design, n_draws=2, rng=0)
    # Each round times the floor and then every design, back to back, so a ratio compares
    # runs taken moments apart (the machine's speed drifts); medians over the rounds.
    floors: list[float] = []
    runs: dict[str, list[float]] = {label: [] for label in designs}
    ratios: dict[str, list[float]] = {label: [] for label in designs}
    for _ in range(args.repeat):
        floor = median_time(floor_run, 1)
        floors.append(floor)
        for label, design in designs.items():
            elapsed = median_time(
                lambda d=design: simulate(
                    d, n_draws=args.draws, batch=args.batch, rng=1, workers=args.workers
                ),
                1,
            )
            runs[label].append(elapsed)
            ratios[label].append(elapsed / floor)
    floor = statistics.median(floors)
    print(
        f"county hierarchy ({h.n:,} nodes), Laplace(lambda={args.scale:g}), {args.draws:,} "
        f"draws, batch {args.batch:,}, workers {args.workers}; medians of {args.repeat} rounds"
    )
    print(f"  noise floor            {floor:7.2f} s   {args.draws / floor:10,.0f} draws/s")
    for label in designs:
        elapsed = statistics.median(runs[label])
        ratio = statistics.median(ratios[label])
        print(
            f"  simulate {label:12s}  {elapsed:7.2f} s   {args.draws / elapsed:10,.0f} draws/s"
            f"   {ratio:5.2f}x floor  (rounds: {', '.join(f'{r:.2f}' for r in ratios[label])})"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory of this process {peak:,.0f} MB")


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def scaling(args: argparse.Namespace) -> None:
    """(P+) on the counties with 1 and 2 local processes and Dask workers."""
    from dask.distributed import Client, LocalCluster

    h = county_hierarchy()
    design = ReleaseDesign(h, Laplace.from_scale(args.scale), "project-nonneg")
    n = args.draws
    times = {}
    for workers in (1, 2):
        times[f"local {workers}"] = median_time(
            lambda w=workers: simulate(design, n_draws=n, rng=1, workers=w), args.repeat
        )
    for workers in (1, 2):
        with (
            LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cl,
            Client(cl) as client,
        ):
            simulate(design, n_draws=2_000, rng=1, client=client)  # warm the workers
            times[f"dask {workers}"] = median_time(
                lambda c=client: simulate(design, n_draws=n, rng=1, client=c), args.repeat
            )
    print(f"county (P+), {n:,} draws, medians of {args.repeat}")
    for label, seconds in times.items():
        print(f"  {label:8s} {seconds:7.2f} s")
    plan = memory_plan(design, n_draws=n, batch=1000, bins=400)
    shipped = plan.task_statistics_bytes
    rows = plan.draws_per_task
    print(
        f"  each task: {rows:,} draws of {h.n:,} nodes reduced to {shipped / 2**20:.1f} MiB of "
        f"statistics ({shipped / (rows * h.n * 8):.2f}x the bytes of its errors), "
        f"{plan.tasks} tasks"
    )
    print(f"  workers=2 vs 1: {times['local 1'] / times['local 2']:.2f}x faster")
    print(f"  Dask 2 vs 1 workers: {times['dask 1'] / times['dask 2']:.2f}x faster")
    print(f"  Dask 2 workers vs local 1 worker: {times['local 1'] / times['dask 2']:.2f}x faster")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory of this process {peak:,.0f} MB")


LARGE = {  # name: (fanout below the root, draws)
    "112k": ((51, 62, 34), 2_000),
    "2M": ((51, 62, 23, 27), 20),
}


def large_case(name: str, repeat: int) -> None:
    """(P+) at default settings on one large synthetic tree; runs in its own process so that
    its peak resident memory is its own."""
    fanout, draws = LARGE[name]
    h = synthetic_hierarchy(fanout, rng=0)
    m = Laplace.from_scale(10.0)
    x = h.counts.astype(float)
    design = ReleaseDesign(h, m, "project-nonneg")
    simulate(design, n_draws=2, rng=0)  # compile the kernels, prepare the projector
    rows = memory_plan(design, n_draws=draws).draws_per_chunk

    def floor_run() -> None:
        for k, start in enumerate(range(0, draws, rows)):
            m.sample(x, rng=k, size=min(rows, draws - start))

    floors, runs, ratios = [], [], []
    for _ in range(repeat):
        floors.append(median_time(floor_run, 1))
        runs.append(median_time(lambda: simulate(design, n_draws=draws, rng=1), 1))
        ratios.append(runs[-1] / floors[-1])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  {h.n:>9,} nodes x {draws:,} draws (P+): simulate {statistics.median(runs):6.2f} s, "
        f"floor {statistics.median(floors):6.2f} s, {statistics.median(ratios):4.2f}x floor "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}); peak RSS {peak:,.0f} MB"
    )


def large(args: argparse.Namespace) -> None:
    """Each large case in a fresh process (its peak memory alone), medians of --repeat."""
    print("large trees, default settings (batch 1000, 400 bins, max_memory 768 MiB)")
    for name in LARGE:
        subprocess.run(
            [sys.executable, __file__, "--case", name, "--repeat", str(args.repeat)], check=True
        )


if __name__ == "__main__":
    main()

"""Monte Carlo audit speed on the county hierarchy against the noise-drawing floor.

Run by hand (never collected by pytest)::

    python benchmarks/bench_simulate.py                 # 10,000 draws
    python benchmarks/bench_simulate.py --draws 2000 --workers 2
    python benchmarks/bench_simulate.py --draws 100000 --scaling   # 1 vs 2 workers, Dask

The floor is drawing the Laplace noise alone for every node and draw, in the same batches;
``simulate`` adds the post-processing, the per-node statistics and histograms. With
``--scaling`` it times (P+) with 1 and 2 local worker processes and on a Dask LocalCluster of 1
and 2 workers (medians of ``--repeat``), prints the speed-ups measured in this process, and the
peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from postdp import Laplace
from postdp.analysis import ReleaseDesign, simulate
from postdp.data import county_hierarchy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--scale", type=float, default=10.0, help="Laplace scale lambda")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--scaling", action="store_true", help="1 vs 2 workers, and Dask")
    args = parser.parse_args()
    if args.scaling:
        scaling(args)
        return

    h = county_hierarchy()
    m = Laplace.from_scale(args.scale)
    x = h.counts.astype(float)

    def floor_run() -> None:
        for _ in m.iter_samples(x, n_draws=args.draws, batch=args.batch, rng=1):
            pass

    def best(fn) -> float:
        return median_time(fn, args.repeat)

    floor = best(floor_run)
    print(
        f"county hierarchy ({h.n:,} nodes), Laplace(lambda={args.scale:g}), {args.draws:,} "
        f"draws, batch {args.batch:,}, workers {args.workers}"
    )
    print(f"  noise floor            {floor:7.2f} s   {args.draws / floor:10,.0f} draws/s")
    for label, steps in (
        ("none", "none"),
        ("(P)", "project"),
        ("top-down", "topdown"),
        ("(P+)", "project-nonneg"),
        ("(P+),round", "project-nonneg,round"),
    ):
        design = ReleaseDesign(h, m, steps)
        elapsed = best(
            lambda d=design: simulate(
                d, n_draws=args.draws, batch=args.batch, rng=1, workers=args.workers
            )
        )
        print(
            f"  simulate {label:12s}  {elapsed:7.2f} s   {args.draws / elapsed:10,.0f} draws/s"
            f"   {elapsed / floor:5.2f}x floor"
        )


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
    print(f"  workers=2 vs 1: {times['local 1'] / times['local 2']:.2f}x faster")
    print(f"  Dask 2 vs 1 workers: {times['dask 1'] / times['dask 2']:.2f}x faster")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory of this process {peak:,.0f} MB")


if __name__ == "__main__":
    main()

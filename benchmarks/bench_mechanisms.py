"""Throughput of the study path (numpy) against the release path (OpenDP).

Run by hand (never collected by pytest)::

    python benchmarks/bench_mechanisms.py            # 10^6 double geometric draws
    python benchmarks/bench_mechanisms.py --all      # every mechanism
    python benchmarks/bench_mechanisms.py --draws 200000

Prints draws per second of each path and their ratio. The study path draws a (draws, 1)
batch from one seed; the release path adds noise to a vector of ``draws`` zeros with
OpenDP's exact, CSPRNG-seeded sampler (one call), which is how a release uses it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--all", action="store_true", help="every mechanism, not only geometric")
    args = parser.parse_args()

    mechanisms = [Geometric(epsilon=1.0)]
    if args.all:
        mechanisms += [Laplace(epsilon=1.0), Gaussian(rho=0.5), DiscreteGaussian(rho=0.5)]
    n = args.draws
    print(f"{n:,} draws per path; best of {args.repeat} (release path: best of 1)")
    print(f"{'mechanism':<20}{'study draws/s':>16}{'release draws/s':>18}{'ratio':>10}")
    for m in mechanisms:
        zeros = np.zeros(1, dtype=np.int64 if m.discrete else np.float64)
        study = best_of(lambda m=m, z=zeros: m.sample(z, rng=0, size=n), args.repeat)
        vector = np.zeros(n, dtype=zeros.dtype)
        release = best_of(lambda m=m, v=vector: m.release(v), 1)
        print(f"{m.name:<20}{n / study:>16,.0f}{n / release:>18,.0f}{release / study:>10.0f}x")


if __name__ == "__main__":
    main()

"""The secure path's samplers against the study path's, per value, in one process.

Run by hand (never collected by pytest)::

    python benchmarks/bench_sampler.py                 # 1,000,000 values per scale, 3 runs
    python benchmarks/bench_sampler.py --values 4000000 --repeat 5
    python benchmarks/bench_sampler.py --opendp 20000  # also OpenDP, on 20,000 values

Timed at each scale, on the same number of values (discrete Gaussian noise added to
zeros):

- ``study``: the study path, ``DiscreteGaussian.sample`` (numpy's generator; not for
  publication);
- ``exact``: postdp's exact sampler on ``os.urandom``
  (:func:`postdp.mechanisms.exact.discrete_gaussian`, with the exact rational sigma^2);
- ``opendp`` (with ``--opendp N``): OpenDP's discrete Gaussian through postdp's release
  path, on N values (it is some 200 times slower than the study path).

Then the discrete Laplace (the geometric mechanism) the same way: ``Geometric.sample``
against :func:`postdp.mechanisms.exact.discrete_laplace` at epsilon 1, 3/7, 1/10 and 1/2000
(drawn by inversion) and 1/50000 and 1/10**7 (above scale 8192: the magnitude's quotient by
inversion and its remainder by rejection).

The scales are the 2020 persons design's: the smallest and largest sigma of its queries at
the blocks and the counties (``load_strategy("pl94-2020-persons")``, each query's exact
rho), plus sigma = 1.1 and 30 given as exact fractions. Printed per scale: the median time
per value of ``--repeat`` runs of each sampler and the median of the per-run ratios
exact/study (both timed back to back in each run), then the load average before and after
(``os.getloadavg``) and the process's resident peak (``ru_maxrss``). Memory does not grow
with the number of values beyond the output: the study sampler draws in batches of 65,536,
the exact one keeps 128 KB of random bits fetched ahead.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from postdp import DiscreteGaussian, Geometric
from postdp.mechanisms.exact import discrete_gaussian, discrete_laplace
from postdp.tables import load_strategy


def scales() -> list[tuple[str, Fraction]]:
    """sigma^2 of a few 2020 queries, exactly, and two round ones."""
    st = load_strategy("pl94-2020-persons")
    out = [("sigma 1.1", Fraction(121, 100)), ("sigma 30", Fraction(900))]
    names = st.levels
    for d in (2, len(names) - 1):  # the counties and the blocks
        level = {q: st.rho * st.level_shares[d] * s for q, s in st.query_shares[d].items()}
        for q in (min(level, key=level.get), max(level, key=level.get)):
            rho = level[q] / 2  # bounded neighbours: each query costs twice its rho
            out.append((f"{names[d]} {q}", 1 / (2 * rho)))
    return out


def laplace_scales() -> list[tuple[str, Fraction]]:
    """The geometric mechanism's scale 1/epsilon (sensitivity 1) at a few exact epsilons:
    four drawn by inversion whole, and two above scale 8192, in two parts."""
    eps = (
        Fraction(1),
        Fraction(3, 7),
        Fraction(1, 10),
        Fraction(1, 2000),
        Fraction(1, 50000),
        Fraction(1, 10**7),
    )
    return [(f"geometric eps {e}", 1 / e) for e in eps]


def _back_to_back(
    study: Callable[[int], object], exact: Callable[[], object], n: int, repeat: int
) -> str:
    """``study(run)`` then ``exact()`` timed back to back ``repeat`` times: the medians of
    the per-value times and of the per-run ratios exact/study, as printed columns."""
    per_study, per_exact, ratio = [], [], []
    for r in range(repeat):
        t0 = time.perf_counter()
        study(r)
        t1 = time.perf_counter()
        exact()
        t2 = time.perf_counter()
        per_study.append((t1 - t0) / n * 1e9)
        per_exact.append((t2 - t1) / n * 1e9)
        ratio.append((t2 - t1) / (t1 - t0))
    return (
        f"{statistics.median(per_study):9.0f} {statistics.median(per_exact):9.0f} "
        f"{statistics.median(ratio):11.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--opendp", type=int, default=0, metavar="N")
    args = parser.parse_args()
    load = os.getloadavg()
    n = args.values
    zeros = np.zeros(n, dtype=np.int64)
    print(f"{n:,} values per run, {args.repeat} runs; load average {load[0]:.2f}")
    print(f"{'scale':<34} {'sigma':>7} {'study ns':>9} {'exact ns':>9} {'exact/study':>11}", end="")
    print(f" {'opendp ns':>10}" if args.opendp else "")
    for label, sigma2 in scales():
        mech = DiscreteGaussian(rho=float(1 / (2 * sigma2)))
        discrete_gaussian(sigma2, 1000)  # its table built once, as in a release
        times = _back_to_back(
            lambda r, m=mech: m.sample(zeros, rng=r),
            lambda s=sigma2: discrete_gaussian(s, n),
            n,
            args.repeat,
        )
        line = f"{label:<34} {float(sigma2) ** 0.5:7.2f} {times}"
        if args.opendp:
            from postdp.mechanisms.release import opendp_sampler

            draw = opendp_sampler(mech)
            runs = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                draw(np.zeros(args.opendp, dtype=np.int64))
                runs.append((time.perf_counter() - t0) / args.opendp * 1e9)
            line += f" {statistics.median(runs):10.0f}"
        print(line, flush=True)
    print(f"{'scale':<34} {'scale':>7} {'study ns':>9} {'exact ns':>9} {'exact/study':>11}")
    for label, scale in laplace_scales():
        geo = Geometric(epsilon=float(1 / scale))
        discrete_laplace(scale, 1000)
        times = _back_to_back(
            lambda r, g=geo: g.sample(zeros, rng=r),
            lambda b=scale: discrete_laplace(b, n),
            n,
            args.repeat,
        )
        print(f"{label:<34} {float(scale):7.0f} {times}", flush=True)
    after = os.getloadavg()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average after {after[0]:.2f}; peak resident memory {peak:.0f} MB")


if __name__ == "__main__":
    main()

"""Coverage and width of table replicate intervals on the Pennsylvania block-group P1 table.

Run by hand (never collected by pytest)::

    python benchmarks/bench_table_intervals.py                       # defaults below
    python benchmarks/bench_table_intervals.py --draws 12 --replicates 30

The workload of ``bench_table_audit.py`` (detailed cells at every level, Gaussian, rho =
0.05 each; the state total public) on the real Pennsylvania P1 counts. For each
post-processing (``project-nonneg`` and ``project-nonneg,round`` by default), ``--draws``
releases are drawn, each gets replicate intervals (``replicate_intervals`` of its
``ReleaseDesign``, ``--replicates`` re-runs on the release as stand-in truth), and
``interval_coverage`` of the design reports the share of intervals covering the true
count and their mean width, by geographic level and true-count size bin. Each row's ``coverage_se``
is the binomial standard error over its counts (cells within a draw are dependent, so it
is optimistic). The linear-estimator expectation with R replicates, (R - 1) / (R + 1) x
level, is printed beside it (the level itself with ``--adjust``, the finite-replicate correction).
Prints seconds per post-processing and the peak resident memory.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

sys.path.insert(0, "benchmarks")

from bench_tables import workload

from postdp.analysis import ReleaseDesign, interval_coverage
from postdp.data import load_p1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=8)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument(
        "--postprocess", nargs="+", default=["project-nonneg", "project-nonneg,round"]
    )
    parser.add_argument(
        "--adjust", action="store_true", help="the finite-replicate correction (adjust=True)"
    )
    args = parser.parse_args()
    table = load_p1("pa-blockgroup")
    work = workload(table.categories, table.geography.n_levels)
    R = args.replicates
    print(
        f"Pennsylvania P1: {table.geography.n:,} geounits x {table.categories.n} category "
        f"nodes; {args.draws} releases x {R} replicates; nominal {args.level}, linear-"
        f"estimator expectation {args.level if args.adjust else (R - 1) / (R + 1) * args.level:.3f}"
        f"{' (adjusted)' if args.adjust else ''}"
    )
    for steps in args.postprocess:
        start = time.perf_counter()
        cov = interval_coverage(
            ReleaseDesign(table, work, steps),
            method="replicates",
            replicates=R,
            n_draws=args.draws,
            level=args.level,
            rng=0,
            adjust=args.adjust,
        )
        seconds = time.perf_counter() - start
        print(f"\n{steps}: {seconds:.0f} s")
        print(cov.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak resident memory {peak:.2f} GB")


if __name__ == "__main__":
    main()

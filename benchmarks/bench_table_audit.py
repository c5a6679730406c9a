"""The streaming table audit on the Pennsylvania block-group P1 table.

Run by hand (never collected by pytest)::

    python benchmarks/bench_table_audit.py             # medians of 3 runs
    python benchmarks/bench_table_audit.py --draws 40 --repeat 5

``simulate(ReleaseDesign(...))`` with the workload "detailed cells at every level (Gaussian,
rho = 0.05 each), state total public", for (P), top-down + rounding and (P+): seconds per
draw against drawing the noise alone (the floor: ``measure`` of the same draws), the
statistics' share, and the peak resident memory of a run in a fresh process (each design
runs in its own subprocess so its peak is its own). Then the same (P) audit with 2 worker
processes, checked bit-identical to 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
sys.path.insert(0, "benchmarks")
from bench_tables import workload
from postdp import simulate
from postdp.analysis import ReleaseDesign
from postdp.data import load_p1
from postdp.tables import measure

steps, draws, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
table = load_p1("pa-blockgroup")
work = workload(table.categories, table.geography.n_levels)
design = ReleaseDesign(table, work, steps)
simulate(design, n_draws=2, rng=99)  # compiled loops loaded
start = time.perf_counter()
for k in range(draws):
    measure(table, work, secure=False, rng=k)
floor = (time.perf_counter() - start) / draws
start = time.perf_counter()
result = simulate(design, n_draws=draws, rng=1, workers=workers)
per_draw = (time.perf_counter() - start) / draws
by_size, _ = design.metrics(result)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"floor": floor, "per_draw": per_draw, "peak_gb": peak,
                  "bias0": float(result.bias[0]), "mae_sum": float(result.mae.sum()),
                  "rmse_bg": float(by_size[by_size["level"] == 3]["rmse"].mean())}))
"""


def child(steps, draws, workers=1):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, steps, str(draws), str(workers)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average {' '.join(load)}; {args.draws} draws per run, medians of {args.repeat}")
    for steps in ("project", "topdown,round", "project-nonneg"):
        runs = [child(steps, args.draws) for _ in range(args.repeat)]
        per = statistics.median(r["per_draw"] for r in runs)
        ratio = statistics.median(r["per_draw"] / r["floor"] for r in runs)
        peak = max(r["peak_gb"] for r in runs)
        print(
            f"  {steps:15s} {per:.2f} s per draw = {ratio:.1f}x the noise floor "
            f"({statistics.median(r['floor'] for r in runs):.3f} s); peak RSS {peak:.2f} GB; "
            f"block-group RMSE of totals (by size bin, mean) {runs[0]['rmse_bg']:.2f}"
        )
    one = child("project", args.draws, 1)
    two = child("project", args.draws, 2)
    same = one["bias0"] == two["bias0"] and one["mae_sum"] == two["mae_sum"]
    print(
        f"  (P) with 2 worker processes: {two['per_draw']:.2f} s per draw (1 process: "
        f"{one['per_draw']:.2f}); same statistics as 1 process: {same}"
    )


if __name__ == "__main__":
    main()

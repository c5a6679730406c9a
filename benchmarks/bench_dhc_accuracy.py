"""The DHC persons design's TopDown against BLUE-then-restore, over many draws: mean
absolute error of single years of age by sex by geolevel, with its standard error over the
draws and the paired difference (TopDown minus restore) with a 95% interval.

Run by hand (never collected by pytest)::

    python benchmarks/bench_dhc_accuracy.py                      # DC at scale 0.001, 10 draws
    python benchmarks/bench_dhc_accuracy.py --state 10 --scale 0.002 --draws 10

The truth is ``postdp.data.synthetic_dhc_population([--state], seed=0, scale=--scale)``;
each draw measures ``load_strategy("dhc-2020-persons")`` on the study path (numpy's
generator, seed = the draw's number). Both estimators hold the same PL94 histogram per draw:
a PL94 release of the same persons (``top_down_2020`` of a ``pl94-2020-persons`` draw on the
tabulation geography, with the facility bounds of ``synthetic_facilities``; a DHC block is
its tabulation block), as production held the published PL94 release. (P) is designed once
(``TableProjector``) and solved per draw; ``restore_dhc`` restores it. Draws are independent,
so the standard error of a level's MAE is the standard deviation of the per-draw MAEs over
sqrt(draws), and the paired difference's interval is mean +- 1.96 x its standard error.

Printed: per draw the seconds of each step; then by level the MAE of each estimator (mean
and standard error over the draws) and the paired difference; the process's peak memory and
the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", default="11", help="a state's FIPS code (default 11)")
    parser.add_argument("--scale", type=float, default=0.001)
    parser.add_argument("--draws", type=int, default=10)
    args = parser.parse_args()

    from bench_dhc_county import dhc_truth, held_release  # the same as there (this folder)

    from postdp.postprocess import TableProjector, restore_dhc, top_down_2020
    from postdp.tables import Query, measure

    load = os.getloadavg()[0]
    strategy, truth = dhc_truth(args.state, args.scale)
    geo = truth.geography
    work = strategy.workload(truth)
    pl94_release = held_release(args.state, args.scale)
    age_sex = Query.marginal(strategy.schema, "sex * age").marginal_of
    true_counts = age_sex.apply(np.asarray(truth.counts()[:, truth.categories.leaves]))
    print(f"{args.draws} draws")
    t0 = time.perf_counter()
    projector = TableProjector(truth, work)
    print(f"(P) design {time.perf_counter() - t0:.1f} s")
    mae: dict[str, list[np.ndarray]] = {"(P)": [], "topdown-2020": [], "blue-restore": []}
    for r in range(args.draws):
        marks = [time.perf_counter()]
        draw = measure(truth, work, secure=False, rng=r)
        held = pl94_release(r)
        marks.append(time.perf_counter())
        blue = projector(draw)
        marks.append(time.perf_counter())
        released = top_down_2020(draw, held=held)
        marks.append(time.perf_counter())
        restored = restore_dhc(draw, held=held, integral=True, blue=blue)
        marks.append(time.perf_counter())
        for name, est in (("(P)", blue), ("topdown-2020", released), ("blue-restore", restored)):
            err = np.abs(age_sex.apply(est) - true_counts)
            mae[name].append(np.array([err[geo.depth == d].mean() for d in range(geo.n_levels)]))
        steps = np.diff(marks)
        print(
            f"  draw {r}: measure + PL94 release {steps[0]:.1f} s, (P) {steps[1]:.1f} s, "
            f"topdown {steps[2]:.1f} s, restore {steps[3]:.1f} s"
        )
        del draw, blue, released, restored
    n = args.draws
    stats = {k: np.stack(v) for k, v in mae.items()}  # (draws, levels)
    diff = stats["topdown-2020"] - stats["blue-restore"]
    print("single year of age x sex, MAE per count (mean +- s.e. over the draws):")
    print(f"  {'level':<20} {'(P)':>16} {'topdown-2020':>16} {'blue-restore':>16}  td - restore")
    for d, name in enumerate(strategy.levels):
        cols = []
        for k in ("(P)", "topdown-2020", "blue-restore"):
            col = stats[k][:, d]
            cols.append(f"{col.mean():8.3f} +- {col.std(ddof=1) / np.sqrt(n):5.3f}")
        dm, ds = diff[:, d].mean(), diff[:, d].std(ddof=1) / np.sqrt(n)
        print(
            f"  {name:<20} {cols[0]:>16} {cols[1]:>16} {cols[2]:>16}  "
            f"{dm:+.3f} [{dm - 1.96 * ds:+.3f}, {dm + 1.96 * ds:+.3f}]"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"peak resident memory {peak:.2f} GB")
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()

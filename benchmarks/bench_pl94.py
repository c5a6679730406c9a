"""The 2020 persons design end to end on a synthetic state: every estimator on the same
noisy measurements, timed, and measured with the Census Bureau's yardsticks.

Run by hand (never collected by pytest)::

    python benchmarks/bench_pl94.py                          # DC (~17,000 blocks), 3 runs
    python benchmarks/bench_pl94.py --states 50 --repeat 3   # Vermont
    python benchmarks/bench_pl94.py --draws 3 --report pl94.html
    python benchmarks/bench_pl94.py --spine optimised         # the production block groups
    python benchmarks/bench_pl94.py --spine optimised --bypass  # and its single-child bypass
    python benchmarks/bench_pl94.py --states 4 --aian 0.05    # the AIAN spine (Arizona)

Study path (numpy draws from fixed seeds). For each state: the synthetic 2020 population
(``postdp.nmf.synthetic_population``), the persons preset's workload
(``load_strategy("pl94-2020-persons").workload``: exact shares, discrete Gaussian noise, US
and state totals invariant), the noisy measurements drawn once per run (``measure``: the
noise floor), then on those same measurements:

- ``topdown-2020``: the Census Bureau's production TopDown
  (``postdp.project(..., method="topdown-2020")``: two least-squares and two L1 rounder
  passes per parent, integral);
- ``topdown``: ``postdp.top_down`` then ``postdp.round`` (consistent integers);
- ``project``: ``postdp.project(..., method="project")`` (the BLUE: unbiased, real-valued);
- ``blue-restore``: ``postdp.project(..., nonneg=True, method="blue-restore")`` then
  ``postdp.round``;
- ``blue-restore-int``: ``postdp.postprocess.blue_restore(..., integral=True)`` (each family
  rounded by the production rounder's flow as the restoration goes down).

With ``--bypass`` each geounit is measured with the budget of the production spine's
single-child bypass (``single_child_bypass``: a chain of only children measured once, at its
top); ``topdown`` (which weighs a level's geounits alike) is then left out.

With ``--aian SHARE`` a seeded SHARE of the tracts lie in AIAN areas (no real area list is
bundled) and the state is measured over the AIAN spine (``aian_branches``, then
``workload(..., aian=True)``: the branches measured as the spine's states, the state's
total invariant); ``topdown`` (its level of states has no noisy query) is left out.

With ``--facilities`` the measurements carry the 2020 structural constraints
(``facility_bounds(synthetic_facilities(table))``: group-quarters counts at least their
facilities, 0 where there is none, no minors in nursing), which ``topdown-2020`` and the
blue-restores hold, and the largest violation of each estimator is printed.

Printed: per estimator the median wall time of ``--repeat`` runs with its ratio to the
noise floor (median of the per-run ratios) and the peak of numpy's traced allocations
(tracemalloc) during the step, from one more, untimed run (tracing slows Python-heavy
steps); then, over ``--draws`` independent measurements, the MAE of the total
population by level per estimator (same draws for each), the reliability
threshold of the block groups, and with ``--report`` the side-by-side page
(``postdp.report.compare_estimators``). The whole state is held at once (every estimate is
geounits x 2,016 float64), so states up to about 100,000 blocks fit in 24 GB; larger ones
run subtree by subtree (``benchmarks/bench_schema.py --stream``).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import time
import tracemalloc

import numpy as np

import postdp
from postdp.data import facility_bounds, synthetic_facilities
from postdp.nmf import synthetic_population
from postdp.postprocess import blue_restore
from postdp.report import compare_estimators
from postdp.tables import (
    aian_branches,
    load_strategy,
    measure,
    optimised_block_groups,
    pl94_schema,
    single_child_bypass,
)

LEVELS = ["US", "State", "County", "Tract", "Block group", "Block"]
AIAN_LEVELS = ["US", "State", "Branch", "County", "Tract", "Block group", "Block"]


def _aian_flags(table, share, seed):
    """Whole tracts, each in an AIAN area with probability ``share`` (seeded)."""
    geo = table.geography
    tract = geo.parent[geo.parent[geo.leaves]]
    tracts = np.unique(tract)
    rng = np.random.default_rng(seed)
    return np.isin(tract, tracts[rng.random(tracts.size) < share])


def _estimators(m, table, rng):
    steps = {
        "topdown-2020": lambda: postdp.project(m, method="topdown-2020"),
        "topdown": lambda: postdp.round(postdp.top_down(m), table, rng=rng),
        "project": lambda: postdp.project(m, method="project"),
        "blue-restore": lambda: postdp.round(
            postdp.project(m, nonneg=True, method="blue-restore"), table, rng=rng
        ),
        "blue-restore-int": lambda: blue_restore(m, integral=True),
    }
    if m.budget_scale is not None or table.geography.n_levels > len(LEVELS):
        del steps["topdown"]  # it weighs a level's geounits alike; needs every level measured
    return steps


def _timed(step):
    start = time.perf_counter()
    out = step()
    return out, time.perf_counter() - start


def _peak(step):
    """Peak of numpy's traced allocations during ``step`` (a separate, untimed run:
    tracing slows Python-heavy steps)."""
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", default="11", help="comma-separated state FIPS (11: DC)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--draws", type=int, default=1, help="measurements for the metrics")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", default=None, help="write the side-by-side page here")
    parser.add_argument(
        "--spine",
        choices=["tabulation", "optimised"],
        default="tabulation",
        help="optimised: block groups regrouped in their tracts (optimised_block_groups)",
    )
    parser.add_argument(
        "--bypass",
        action="store_true",
        help="measure with the spine's single-child bypass (single_child_bypass)",
    )
    parser.add_argument(
        "--aian",
        type=float,
        default=None,
        metavar="SHARE",
        help="measure over the AIAN spine, this share of the tracts in AIAN areas",
    )
    parser.add_argument(
        "--facilities",
        action="store_true",
        help="measure with the 2020 structural constraints (synthetic facilities)",
    )
    args = parser.parse_args()
    if args.aian is not None and not 0 <= args.aian <= 1:
        parser.error(f"--aian must be a share in [0, 1]; got {args.aian}")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    strategy = load_strategy("pl94-2020-persons")
    for state in args.states.split(","):
        table = synthetic_population([state], seed=args.seed)
        aian = args.aian is not None
        if aian:
            table = aian_branches(table, aian=_aian_flags(table, args.aian, args.seed))
        if args.spine == "optimised":
            table = optimised_block_groups(table)
        geo = table.geography
        work = strategy.workload(table, aian=aian)
        scale = single_child_bypass(table, work, top=2 + aian) if args.bypass else None
        bounds = ()
        if args.facilities:
            bounds = facility_bounds(synthetic_facilities(table, seed=args.seed), geo)
        sizes = [len(geo.levels[d]) for d in range(geo.n_levels)]
        print(
            f"\n== state {state}: {int(table.counts()[0, 0]):,} people; geounits by level "
            + " > ".join(f"{n:,}" for n in sizes)
        )
        if scale is not None:
            print(f"  bypass: {int((scale == 0).sum()):,} geounits measured with their parent")
        times: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        peaks: dict[str, int] = {}
        for run in range(args.repeat):
            draw = functools.partial(
                measure, table, work, secure=False, rng=run, bounds=bounds, budget_scale=scale
            )
            m, floor = _timed(draw)
            times.setdefault("noise floor", []).append(floor)
            for name, step in _estimators(m, table, run).items():
                _, seconds = _timed(step)
                times.setdefault(name, []).append(seconds)
                ratios.setdefault(name, []).append(seconds / floor)
            if run == 0:
                peaks["noise floor"] = _peak(draw)
                for name, step in _estimators(m, table, run).items():
                    peaks[name] = _peak(step)
            del m
        for name, values in times.items():
            ratio = f"{statistics.median(ratios[name]):5.2f}x floor" if name in ratios else ""
            print(
                f"  {name:<13} median {statistics.median(values):7.2f} s "
                f"({', '.join(f'{v:.1f}' for v in values)}) {ratio:>13}  "
                f"peak {peaks[name] / 2**30:.2f} GB"
            )
        released: dict[str, list[np.ndarray]] = {}
        for k in range(args.draws):
            m = measure(table, work, secure=False, rng=1000 + k, bounds=bounds, budget_scale=scale)
            for name, step in _estimators(m, table, 2000 + k).items():
                released.setdefault(name, []).append(np.asarray(step(), dtype=np.float64))
            del m
        comparison = compare_estimators(
            {name: np.stack(v) for name, v in released.items()},
            table,
            schema=pl94_schema(),
            levels=AIAN_LEVELS if aian else LEVELS,
            reliability_level=geo.n_levels - 2,
        )
        print(f"  MAE of total population by level ({args.draws} draw(s), same for each):")
        print(comparison.total_mae().to_string(float_format=lambda v: f"{v:9.3f}"))
        print(f"  verdict: {comparison.verdict().value}: {comparison.verdict().detail}")
        for name, values in released.items():
            worst = max((b.violation(pl94_schema(), v) for b in bounds for v in values), default=0)
            if bounds:
                print(f"  largest violation of the structural bounds, {name}: {worst:g}")
        for name, threshold in comparison.reliability.items():
            print(f"  block-group reliability threshold, {name}: {threshold}")
        if args.report:
            page = comparison.report(command="python benchmarks/bench_pl94.py")
            print(f"  wrote {page.write(args.report)}")
    print(f"\nprocess peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")


if __name__ == "__main__":
    main()

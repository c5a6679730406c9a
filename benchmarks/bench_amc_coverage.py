"""Coverage of topdown-2020's AMC margins of error against the synthetic truth.

Run by hand (never collected by pytest)::

    python benchmarks/bench_amc_coverage.py                          # defaults below
    python benchmarks/bench_amc_coverage.py --seeds 1 2 --replicates 10

For each seed: the synthetic population of ``--states`` (``postdp.nmf.synthetic_population``
with that seed) measured with the 2020 persons preset (noise seeded by the same seed, as
``postdp measure --synthetic ... --study --seed S`` and ``postdp.nmf.synthetic_run`` do),
post-processed by ``topdown-2020``, then ``postdp.nmf.amc`` with ``--replicates`` K (seed
``--amc-seed``) gives every geounit's 90% margin of error of every P1-P5 row, the numbers
``postdp postprocess --method topdown-2020 --amc K`` writes to its ``moe`` form. Printed per
geolevel: the rows with a positive margin, the share of them whose |release - truth| is at
most the margin (nominal 0.90), and the rows the AMC gives a margin of 0 although the
release misses the truth there (the replicates never moved them: a stand-in cell at 0 that
topdown-2020 keeps at 0 in every replicate). The per-level share's standard error across
seeds is printed when more than one seed is run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from postdp import nmf
from postdp.data import pl94_tables
from postdp.nmf import synthetic_population
from postdp.postprocess import top_down_2020
from postdp.tables import load_strategy, measure

TABLES = [pl94_tables()[n] for n in ("P1", "P2", "P3", "P4", "P5")]


def rows(cells: np.ndarray) -> np.ndarray:
    return np.concatenate([t.apply(cells) for t in TABLES], axis=1)


def one_run(states: list[str], seed: int, replicates: int, amc_seed: int) -> dict:
    strategy = load_strategy("pl94-2020-persons")
    table = synthetic_population(states=states, seed=seed)
    m = measure(table, strategy.workload(table), secure=False, rng=seed)
    geo = table.geography
    truth = np.zeros((geo.n, table.categories.leaves.size))
    truth[geo.leaves] = table.dense_cells()
    truth = geo.aggregate(truth.T).T
    start = time.perf_counter()
    release = top_down_2020(m)
    _, _, moe = nmf.amc(
        m,
        release,
        method="topdown-2020",
        replicates=replicates,
        rng=amc_seed,
        queries=["total"],
        tables=TABLES,
    )
    seconds = time.perf_counter() - start
    error = np.abs(rows(release.astype(np.float64)) - rows(truth))
    out = {"seconds": seconds}
    for d in range(geo.n_levels):
        nodes = geo.levels[d]
        e, w = error[nodes], moe[nodes]
        positive = w > 0
        out[nmf.LEVELS_2020[d]] = (
            int(positive.sum()),
            float(np.mean(e[positive] <= w[positive])) if positive.any() else float("nan"),
            int(np.sum(~positive & (e > 0))),
            int(e.size),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", nargs="+", default=["11"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--replicates", type=int, default=10)
    parser.add_argument("--amc-seed", type=int, default=7)
    args = parser.parse_args()
    results = []
    for seed in args.seeds:
        r = one_run(args.states, seed, args.replicates, args.amc_seed)
        results.append(r)
        print(f"seed {seed}: release and {args.replicates} replicates in {r['seconds']:.0f} s")
        head = ("level", "rows moe>0", "covered", "moe=0, missed", "rows")
        print("  {:<12} {:>10} {:>8} {:>14} {:>8}".format(*head))
        for level in nmf.LEVELS_2020:
            if level in r:
                n, share, missed, total = r[level]
                print(f"  {level:<12} {n:>10} {share:>8.3f} {missed:>14} {total:>8}")
    if len(results) > 1:
        print("across seeds (mean, standard error):")
        for level in nmf.LEVELS_2020:
            shares = np.array([r[level][1] for r in results if level in r])
            if shares.size and np.isfinite(shares).all():
                se = shares.std(ddof=1) / np.sqrt(shares.size)
                print(f"  {level:<12} {shares.mean():.3f} +- {se:.3f}")


if __name__ == "__main__":
    main()

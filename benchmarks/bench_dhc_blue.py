"""(P)/BLUE of the 2020 DHC persons design on a small synthetic county, in memory.

Run by hand (never collected by pytest)::

    python benchmarks/bench_dhc_blue.py                   # 16 blocks, 3 repeats
    python benchmarks/bench_dhc_blue.py --blocks 32 --repeat 5

The design is ``load_strategy("dhc-2020-persons")`` (1,227,744 cells, ten queries per
geolevel, about 1.9 million noisy answers per geounit; ``shared/research/dhc-2020-design.md``
section 2.2) with the PL94 persons histogram (``hhgq8lev * votingage * hispanic * cenrace``)
held exactly at every geounit, as the production run held it (section 3.1). The geography
is one chain US > State > County > Prim > Tract_Subset_Group, then 2 tract subsets of 2
block groups each, and ``--blocks`` blocks shared among them.

The truth is a timing fixture, not the synthetic DHC population issue 46 asks for: each
block's ``--people`` persons sit in cells drawn uniformly among the 905,184 the edits allow.
Neither the time of (P) nor its variances depend on the counts.

Printed, medians of ``--repeat`` runs in this one process with the load average
(``os.getloadavg``) before and after:

- ``measure``: the noisy answers on the study path (numpy's generator): the noise floor;
- ``design``: :class:`postdp.postprocess.TableProjector` built from the design (the
  marginal basis and its tree shapes; once per design, reused by every draw);
- ``solve``: (P) of one draw, the detailed histogram of every geounit;
- ``margins``: the exact variances of single-year-of-age x sex (``sex * age``) at every
  geounit, from the design alone;

then the process's peak resident memory, the largest deviation of a geounit's PL94 marginal
from the held one (exactness), and of a parent's histogram from its children's sum.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np
from scipy import sparse


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KB on Linux


def _county(blocks: int, people: int, seed: int):  # type: ignore[no-untyped-def]
    from postdp import Hierarchy
    from postdp.tables import Table, dhc_schema, dhc_structural_zeros

    ids = ["US", "S", "C", "P", "G", "T1", "T2", "B11", "B12", "B21", "B22"]
    parents = [None, "US", "S", "C", "P", "G", "G", "T1", "T1", "T2", "T2"]
    groups = ["B11", "B12", "B21", "B22"]
    for b in range(blocks):
        ids.append(f"K{b:03d}")
        parents.append(groups[b % 4])
    geo = Hierarchy.from_parents(ids, parents)
    schema = dhc_schema()
    allowed = np.flatnonzero(~dhc_structural_zeros(schema))
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for b in range(blocks):
        cells = rng.choice(allowed, size=people)
        rows.append(np.full(people, b))
        cols.append(cells)
    counts = sparse.csr_array(
        (np.ones(blocks * people, dtype=np.int64), (np.concatenate(rows), np.concatenate(cols))),
        shape=(blocks, schema.size),
    )
    counts.sum_duplicates()
    return Table(geo, schema.categories(), counts), schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--people", type=int, default=40, help="persons per block")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from postdp.postprocess import TableProjector
    from postdp.tables import Measurement, Query, Workload, load_strategy, measure

    load = os.getloadavg()[0]
    start = time.perf_counter()
    table, schema = _county(args.blocks, args.people, seed=1)
    strategy = load_strategy("dhc-2020-persons")
    work = strategy.workload(table)
    (name,) = {q for _, q in strategy.held}  # the PL94 histogram, held at every level
    pl94 = Query.marginal(schema, name)
    held = [Measurement(d, pl94, None) for d, _ in strategy.held]
    workload = Workload([*work.measurements, *held], neighbours="bounded")
    print(
        f"{table.geography.n} geounits ({args.blocks} blocks), {schema.size:,} cells, "
        f"{sum(m.query.size for m in workload.at(0) if not m.public):,} noisy answers "
        f"per geounit; set up in {time.perf_counter() - start:.1f} s, peak {_peak_gb():.2f} GB"
    )
    times: dict[str, list[float]] = {"measure": [], "design": [], "solve": [], "margins": []}
    age_sex = Query.marginal(schema, "sex * age")
    for r in range(args.repeat):
        cells = var = None  # the last run's go first: one run's arrays at a time
        t0 = time.perf_counter()
        draws = measure(table, workload, secure=False, rng=r)
        t1 = time.perf_counter()
        projector = TableProjector(table, workload)
        t2 = time.perf_counter()
        cells = projector(draws)
        t3 = time.perf_counter()
        var = projector.query_variances(age_sex)
        t4 = time.perf_counter()
        for name, a, b in zip(times, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
            times[name].append(b - a)
        print(
            "  run " + str(r + 1) + ": "
            + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items())
        )  # fmt: skip
        del draws, projector
    truth = table.counts()
    leaves = table.categories.leaves
    geo = table.geography
    held_gap = np.abs(pl94.marginal_of.apply(cells) - pl94.marginal_of.apply(truth[:, leaves]))
    kids = np.zeros_like(cells)
    np.add.at(kids, geo.parent[geo.parent >= 0], cells[geo.parent >= 0])
    inner = ~geo.is_leaf
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        "median: " + ", ".join(f"{k} {v:.1f} s" for k, v in med.items())
        + f"; solve / measure {med['solve'] / med['measure']:.2f}"
    )  # fmt: skip
    print(f"peak resident memory {_peak_gb():.2f} GB")
    size = float(np.abs(cells).max())
    print(
        f"PL94 marginal against the held one: max |difference| {held_gap.max():.2e} "
        f"({held_gap.max() / size:.1e} of the largest |cell estimate|, {size:.0f})"
    )
    print(f"parents against their children's sums: max |difference| "
          f"{np.abs(cells[inner] - kids[inner]).max():.2e}")  # fmt: skip
    block = geo.leaves[0]
    sd = np.sqrt(var[block])
    print(f"single-year age x sex at a block: standard deviation {sd.min():.2f} to {sd.max():.2f}")
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()

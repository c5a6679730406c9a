"""The moonshot: a national block-level P1-shaped table released top-down with consistent,
unbiased integer rounding on one machine, streamed state by state.

Run by hand (never collected by pytest; tens of minutes)::

    python benchmarks/bench_moonshot.py                     # ~8.5 million blocks
    python benchmarks/bench_moonshot.py --states 4          # a quick rehearsal

Synthetic data: 52 states, each ``postdp.data.synthetic_table((62, 26, 3, 34))`` (about
3,200 counties, 84,000 tracts, 250,000 block groups and 8.5 million blocks with 63 sparse
detailed cells each; ~40 people per block), generated from its own seed and rebuilt when
needed, so no more than one state's table is held at once.

The release: detailed cells measured at every level (Gaussian, rho = 0.05 each; the
national total public), then top-down and rounding:

1. The nation and the states: a small table (nation > 52 states) measured at both levels
   and solved top-down, fixing every state's real-valued histogram.
2. Each state in turn: its subtree measured at its own levels, solved top-down below its
   fixed histogram (given as a public query at its root), and its part of the rounding
   circulation rounded with its boundary frozen (``_table_rounding_split``); only a small
   forest of leftover fractional edges is kept, with the state's integer cells.
3. The national step rounds the nation's edges with every state's leftovers.

Printed: wall time of each phase, the peak resident memory, and checks of the result
(integers; every parent the sum of its children at the state level and above; the
national total equal to its invariant; every block total within 1 of its top-down value).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import postdp
from postdp import Gaussian, Hierarchy
from postdp.data import synthetic_table
from postdp.postprocess._solvers.rounding_split import (
    _Part,
    _state_step,
    nation_offsets,
    national_step,
)
from postdp.postprocess._solvers.table_network import _network
from postdp.postprocess.rounding import _Q
from postdp.tables import Measurement, Query, Table, TableMeasurements, Workload, measure

FANOUT = (62, 26, 3, 34)
RHO = 0.05


def state_table(k, seed):
    return synthetic_table(FANOUT, leaf_mean=40.0, rng=np.random.SeedSequence([seed, k]))


def peak_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=52)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average {' '.join(f.read().split()[:3])}")
    start = time.perf_counter()
    # 1. the nation and the states
    rows = []
    for k in range(args.states):
        t = state_table(k, args.seed)
        rows.append(t.cells.sum(axis=0))
        cat, labels = t.categories, t.labels
        del t
    built = time.perf_counter() - start
    c = cat.leaves.size
    top_geo = Hierarchy(["US", *(f"S{k}" for k in range(args.states))], [-1] + [0] * args.states)
    top = Table(top_geo, cat, np.array(rows), labels)
    root_code = str(cat.ids[np.flatnonzero(cat.parent < 0)[0]])
    work = Workload(
        [Measurement(0, Query("total", [[root_code]]), None)]
        + [Measurement(d, Query.detailed(cat), Gaussian(rho=RHO)) for d in range(2)]
    )
    gen = np.random.default_rng(args.seed)
    state_rows = postdp.top_down(measure(top, work, secure=False, rng=gen))  # (1 + S, c)
    national_total = int(np.array(rows).sum())
    t1 = time.perf_counter()
    print(
        f"nation and states: {args.states} state tables generated and summed in {built:.0f} s;"
        f" top-down of the top table {t1 - start - built:.1f} s"
    )
    # 2. each state: top-down below its fixed histogram, then its part of the rounding
    results, finals, leftovers = [], [], []
    cells_mod = np.zeros(c, dtype=np.int64)
    blocks = 0
    worst_total = 0.0
    timing = {"generate": 0.0, "measure": 0.0, "topdown": 0.0, "round": 0.0}
    seeds = np.random.SeedSequence([args.seed, 99]).spawn(args.states + 1)
    for k in range(args.states):
        t0 = time.perf_counter()
        t = state_table(k, args.seed)
        geo = t.geography
        t_gen = time.perf_counter()
        sub_work = Workload(
            [Measurement(0, Query.detailed(cat), None)]
            + [
                Measurement(d, Query.detailed(cat), Gaussian(rho=RHO))
                for d in range(1, geo.n_levels)
            ]
        )
        measured = measure(t, sub_work, secure=False, rng=gen)
        values = list(measured.values)
        values[0] = state_rows[1 + k][None, :]  # the state's histogram, fixed from above
        sub = TableMeasurements(t, sub_work, tuple(values), False)
        t_meas = time.perf_counter()
        real = postdp.top_down(sub)
        t_td = time.perf_counter()
        leaves = geo.leaves
        low = np.floor(real[leaves])
        q = np.rint((real[leaves] - low) * _Q).astype(np.int64)
        low = low.astype(np.int64) + (q == _Q)
        q[q == _Q] = 0
        cells_mod = (cells_mod + q.sum(axis=0)) % _Q
        part_geo = Hierarchy(
            ["stand-in", *(f"n{i}" for i in range(geo.n))], np.concatenate([[-1], geo.parent + 1])
        )
        part = _Part(np.arange(geo.n + 1), part_geo, np.arange(leaves.size))
        net = _network.__wrapped__(part_geo, cat)
        offset, left, tails, heads = _state_step(part, net, cat, q, seeds[k], _Q)
        element = net.element_edges.reshape(leaves.size, c)
        ups = offset[element] == _Q
        results.append((offset[left].copy(), np.arange(left.size), tails, heads))
        where = np.flatnonzero(np.isin(element, left))  # cells open until the national step
        open_edges = element.reshape(-1)[where]
        final = (low + ups.astype(np.int64)).astype(np.int32)
        leftovers.append((where, left, open_edges, low.reshape(-1)[where].astype(np.int32)))
        totals_real = real[leaves].sum(axis=1)
        t_round = time.perf_counter()
        timing["generate"] += t_gen - t0
        timing["measure"] += t_meas - t_gen
        timing["topdown"] += t_td - t_meas
        timing["round"] += t_round - t_td
        blocks += leaves.size
        del t, measured, sub, real, net, offset, element, ups, low
        finals.append((final, totals_real))
        print(
            f"  state {k + 1}/{args.states}: {leaves.size:,} blocks; so far "
            f"{time.perf_counter() - start:.0f} s, peak RSS {peak_gb():.1f} GB",
            flush=True,
        )
    # 3. the national step
    t2 = time.perf_counter()
    top_net = _network.__wrapped__(Hierarchy(["root", "state"], [-1, 0]), cat)
    national_step(results, nation_offsets(cells_mod, cat, _Q), top_net, seeds[-1], _Q)
    released_rows = []
    for (final, totals_real), (where, left, open_edges, low_open), (offset, _, _, _) in zip(
        finals, leftovers, results, strict=True
    ):
        position = np.searchsorted(left, open_edges)
        final.reshape(-1)[where] = low_open + (offset[position] == _Q)
        released_rows.append(final.sum(axis=0, dtype=np.int64))
        gap = np.abs(final.sum(axis=1) - totals_real)
        worst_total = max(worst_total, float(gap.max(initial=0.0)))
    t3 = time.perf_counter()
    national = np.sum(released_rows, axis=0)
    total = time.perf_counter() - start
    print(
        f"national rounding step {t3 - t2:.1f} s; phases: generating {timing['generate']:.0f} s"
        f" (+{built:.0f} s for the top table), measuring {timing['measure']:.0f} s, top-down "
        f"{timing['topdown']:.0f} s, rounding {timing['round']:.0f} s"
    )
    print(
        f"{blocks:,} blocks x {c} cells released top-down with consistent rounding in "
        f"{total / 60:.1f} min wall; peak RSS {peak_gb():.1f} GB"
    )
    print(
        f"checks: national total {int(national.sum()):,} (invariant {national_total:,}); "
        f"largest |block total - its top-down value| {worst_total:.9f} (< 1 promised: "
        f"{worst_total < 1})"
    )


if __name__ == "__main__":
    main()

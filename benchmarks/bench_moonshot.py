"""The moonshot: a national block-level P1-shaped table released top-down with consistent,
unbiased integer rounding on one machine, streamed state by state, on the public API.

Run by hand (never collected by pytest; tens of minutes)::

    python benchmarks/bench_moonshot.py                     # ~8.5 million blocks
    python benchmarks/bench_moonshot.py --states 4          # a quick rehearsal

Synthetic data: 52 states, each ``postdp.data.synthetic_table((62, 26, 3, 34))`` (about
3,200 counties, 84,000 tracts, 250,000 block groups and 8.5 million blocks with 63 sparse
detailed cells each; ~40 people per block), generated from its own seed and rebuilt when
needed, so no more than one state's table is held at once.

The release: detailed cells measured at every level (Gaussian, rho = 0.05 each; the
national total public), then top-down and rounding, with public names only:

1. ``postdp.postprocess.project_by_subtree(top, subtree, method="topdown")``: the nation
   and the states solved top-down, then each state below its fixed histogram (each state
   measured from its own seed when asked for); each state's real-valued result is kept on
   disk (one ``.npy`` per state), never all in memory.
2. ``postdp.postprocess.round_by_subtree(top_values, top_table, subtree)``: each state's
   part of the rounding with its boundary frozen, the national step, then each state's
   integers (each state read twice from disk).

Printed: wall time of each phase, the peak resident memory, and checks of the result
(integers; every parent the sum of its children; the national total equal to its
invariant; every block total within 1 of its top-down value).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from postdp import Gaussian, Hierarchy
from postdp.data import synthetic_table
from postdp.postprocess import project_by_subtree, round_by_subtree
from postdp.tables import Measurement, Query, Table, Workload, measure

FANOUT = (62, 26, 3, 34)
RHO = 0.05


def state_table(k: int, seed: int) -> Table:
    """State k's table, its geounits renamed S<k>, S<k>/<id> (unique in the nation)."""
    t = synthetic_table(FANOUT, leaf_mean=40.0, rng=np.random.SeedSequence([seed, k]))
    geo = t.geography
    ids = [f"S{k}" if p < 0 else f"S{k}/{i}" for i, p in zip(geo.ids, geo.parent, strict=True)]
    parents = np.asarray([None if p < 0 else ids[p] for p in geo.parent], dtype=object)
    renamed = Hierarchy.from_parents(ids, parents)
    order = [f"S{k}/{i}" for i in geo.ids[geo.leaves]]
    position = {str(i): n for n, i in enumerate(renamed.ids[renamed.leaves])}
    cells = t.cells[np.argsort([position[i] for i in order])]
    return Table(renamed, t.categories, cells, t.labels)


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=52)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average {' '.join(f.read().split()[:3])}")
    start = time.perf_counter()
    rows = []
    for k in range(args.states):  # the states' histograms, for the top table
        t = state_table(k, args.seed)
        rows.append(np.asarray(t.cells.sum(axis=0)).ravel())
        cat, labels = t.categories, t.labels
        del t
    built = time.perf_counter() - start
    states = [f"S{k}" for k in range(args.states)]
    top_geo = Hierarchy.from_parents(["US", *states], np.asarray([None, *["US"] * len(states)]))
    top_table = Table(top_geo, cat, np.array(rows), labels)
    root_code = str(cat.ids[np.flatnonzero(cat.parent < 0)[0]])
    detailed = Query.detailed(cat)
    top_work = Workload(
        [Measurement(0, Query("total", [[root_code]]), None)]
        + [Measurement(d, detailed, Gaussian(rho=RHO)) for d in range(2)]
    )
    seeds = np.random.SeedSequence([args.seed, 99]).spawn(args.states + 2)
    top_m = measure(top_table, top_work, secure=False, rng=seeds[-1])
    national_total = int(np.array(rows).sum())
    blocks = [0]
    timing = {"measure": 0.0}

    def subtree(k: int):
        t0 = time.perf_counter()
        t = state_table(k, args.seed)
        work = Workload([Measurement(d, detailed, Gaussian(rho=RHO)) for d in range(1, 5)])
        m = measure(t, work, secure=False, rng=seeds[k])
        timing["measure"] += time.perf_counter() - t0
        return m

    with tempfile.TemporaryDirectory(prefix="moonshot-") as folder:
        kept = Path(folder)
        t1 = time.perf_counter()
        parts = project_by_subtree(top_m, subtree, method="topdown")
        upper = next(parts)
        for k, real in enumerate(parts):
            np.save(kept / f"{k}.npy", real)
            blocks[0] += int(np.load(kept / f"{k}.npy", mmap_mode="r").shape[0])
            print(
                f"  top-down state {k + 1}/{args.states}: {time.perf_counter() - start:.0f} s, "
                f"peak RSS {peak_gb():.1f} GB",
                flush=True,
            )
        t2 = time.perf_counter()
        worst = [0.0]
        sub_tables = {}

        def real_of(k: int):
            if k not in sub_tables:
                sub_tables.clear()
                sub_tables[k] = state_table(k, args.seed)
            return sub_tables[k], np.load(kept / f"{k}.npy")

        national = None
        n_blocks = 0
        for k, result in enumerate(round_by_subtree(upper, top_table, real_of, rng=seeds[-2])):
            if k == args.states:
                national = result
                break
            t, real = real_of(k)
            geo = t.geography
            assert result.dtype == np.int64
            gap = np.abs(result[geo.leaves].sum(axis=1) - real[geo.leaves].sum(axis=1))
            worst[0] = max(worst[0], float(gap.max(initial=0.0)))
            kids_ok = np.array_equal(
                result[geo.root], result[geo.leaves].sum(axis=0)
            )  # the state = its blocks
            assert kids_ok
            n_blocks += geo.leaves.size
        t3 = time.perf_counter()
    assert national is not None
    total = time.perf_counter() - start
    print(
        f"phases: generating the top {built:.0f} s; top-down {t2 - t1:.0f} s (of which "
        f"measuring {timing['measure']:.0f} s); rounding {t3 - t2:.0f} s"
    )
    print(
        f"{n_blocks:,} blocks x {cat.leaves.size} cells released top-down with consistent "
        f"rounding in {total / 60:.1f} min wall; peak RSS {peak_gb():.1f} GB"
    )
    print(
        f"checks: national total {int(national[0].sum()):,} (invariant {national_total:,}); "
        f"largest |block total - its top-down value| {worst[0]:.9f} (< 1 promised: "
        f"{worst[0] < 1})"
    )


if __name__ == "__main__":
    main()

"""Tables at the scale of a state: the Pennsylvania block-group P1 table.

Run by hand (never collected by pytest; part 2 needs the ``qp`` extra)::

    python benchmarks/bench_tables.py                  # both parts
    python benchmarks/bench_tables.py --skip-qp        # part 1 only
    python benchmarks/bench_tables.py --qp-tracts 40   # size of the Clarabel comparison

Part 1: on ``load_p1("pa-blockgroup")`` (state > 67 counties > 3,446 tracts > 10,173 block
groups; 63 detailed cells, 71 category nodes: 641k detailed cells of leaf geounits, 971,777
counts in all), one draw of the workload "detailed cells at every level, plus one race /
state total public", timed against drawing its noise
(the floor): (P) with its one-off preparation, (P+), top-down, top-down + unbiased rounding
(``postdp.round``); (P) again with one more query (one
race / two or more races at the tract level), which top-down's exact case excludes; medians
of ``--repeat`` runs, the ratio per run measured in this process, and the peak memory
(tracemalloc) of each step.

Part 3 (``--national``): a synthetic P1-shaped national tract-level table
(``postdp.data.synthetic_table``: nation > 52 states > ~3,200 counties > ~90,000 tracts x 63
cells), one draw of noise, (P), top-down + rounding (top-down locally and on a 2-worker
Dask LocalCluster, one task per state), medians of ``--repeat``, peak resident memory.

Part 2: (P) (with the tract-level aggregate) and (P+) (the plain workload; (P+) takes
any workload, but this one is what Part 1 times) against cvxpy + Clarabel on the same
workload restricted to the first
``--qp-tracts`` tracts of the state in GEOID order (with their counties and block groups: a
subtree of the state, so the same algorithm on a smaller geography; all 3,446 tracts is the
whole state), time of each and the largest difference; the ratio is the speed-up of postdp
over the general QP solver, with cvxpy's canonicalisation (a fresh problem per run, as postdp's
preparation is included) and against Clarabel's own solve time alone.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np

import postdp
from postdp import Gaussian
from postdp.data import load_p1
from postdp.hierarchy import Hierarchy
from postdp.postprocess import TableNonnegProjector, TableProjector
from postdp.tables import Measurement, Query, Table, Workload, measure


def workload(categories, levels, *, aggregate=False):
    items = [Measurement(0, Query("total", [["P1_001N"]]), None)]
    for d in range(levels):
        items.append(Measurement(d, Query.detailed(categories), Gaussian(rho=0.05)))
    if aggregate:  # one race / two or more races at the tract level
        items.append(Measurement(2, Query.nodes(["P1_002N", "P1_009N"]), Gaussian(rho=0.05)))
    return Workload(items)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def peak_mb(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def state_part(repeat):
    start = time.perf_counter()
    table = load_p1("pa-blockgroup")
    print(f"loaded the Pennsylvania P1 table in {time.perf_counter() - start:.2f} s: ", end="")
    print(f"{table.geography.n:,} geounits x {table.categories.n} categories")
    w = workload(table.categories, table.geography.n_levels)
    prep, projector = timed(lambda: TableProjector(table, w))
    print(f"  (P) preparation (once per geography and workload): {prep:.2f} s, ", end="")
    print(f"{len(projector._shapes)} distinct subtree shapes")
    rows = []
    for run in range(repeat):
        floor, draws = timed(lambda r=run: measure(table, w, secure=False, rng=r))
        gls, _ = timed(lambda d=draws: projector(d))
        topdown, real = timed(lambda d=draws: postdp.top_down(d))
        rounding, _ = timed(lambda v=real, r=run: postdp.round(v, table, rng=r))
        rows.append((floor, gls, topdown, rounding))
    floor, gls, topdown, rounding = (statistics.median(col) for col in zip(*rows, strict=True))
    ratios = np.array([(g / f, t / f, (t + r) / f) for f, g, t, r in rows])
    draws = measure(table, w, secure=False, rng=0)
    print(
        f"  noise floor (one draw of every query) {floor:.3f} s, peak "
        f"{peak_mb(lambda: measure(table, w, secure=False, rng=0)):.0f} MB"
    )
    print(
        f"  (P)       {gls:.3f} s = {np.median(ratios[:, 0]):.1f}x floor, peak "
        f"{peak_mb(lambda: projector(draws)):.0f} MB"
    )
    print(
        f"  top-down  {topdown:.3f} s = {np.median(ratios[:, 1]):.1f}x floor, peak "
        f"{peak_mb(lambda: postdp.top_down(draws)):.0f} MB"
    )
    TableNonnegProjector(table, w)(draws)  # loads the compiled loops (once per process)
    nonneg_runs = [timed(lambda: TableNonnegProjector(table, w)(draws)) for _ in range(repeat)]
    nonneg_time, nonneg = statistics.median(r[0] for r in nonneg_runs), nonneg_runs[-1][1]
    print(
        f"  (P+)      {nonneg_time:.3f} s = {nonneg_time / floor:.1f}x floor (preparation "
        f"included, one draw, median of {repeat}), certificate "
        f"{postdp.kkt_report(nonneg, draws).worst_relative():.1e}, "
        f"{float((nonneg[table.geography.leaves] == 0).mean()):.0%} of leaf cells at 0, peak "
        f"{peak_mb(lambda: TableNonnegProjector(table, w)(draws)):.0f} MB"
    )
    real = postdp.top_down(draws)
    print(
        f"  rounding  {rounding:.3f} s; top-down + rounding {topdown + rounding:.3f} s = "
        f"{np.median(ratios[:, 2]):.1f}x floor, peak "
        f"{peak_mb(lambda: postdp.round(real, table, rng=0)):.0f} MB"
    )
    kkt_time, report = timed(lambda: postdp.kkt_report(projector(draws), draws, nonneg=False))
    print(
        f"  (P) certificate: worst relative KKT residual {report.worst_relative():.1e} "
        f"(stationarity {report.stationarity / report.gradient_scale:.1e}, public "
        f"{report.public:.1e}, consistency {report.consistency:.1e}), in {kkt_time:.2f} s"
    )
    batch, _ = timed(lambda: projector(measure(table, w, secure=False, rng=9, size=8)))
    print(f"  (P) on a batch of 8 draws: {batch / 8:.3f} s per draw")
    richer = workload(table.categories, table.geography.n_levels, aggregate=True)
    prep, more = timed(lambda: TableProjector(table, richer))
    runs = []
    for run in range(repeat):
        floor_r, draws_r = timed(lambda r=run: measure(table, richer, secure=False, rng=r))
        runs.append((floor_r, timed(lambda d=draws_r: more(d))[0]))
    print(
        f"  (P) with the tract-level aggregate query: preparation {prep:.2f} s, solve "
        f"{statistics.median(r[1] for r in runs):.3f} s = "
        f"{statistics.median(r[1] / r[0] for r in runs):.1f}x floor"
    )


def qp_part(n_tracts, nonneg, repeat):
    """(P) with the tract-level aggregate query, or (P+) with the plain workload, against
    cvxpy + Clarabel on the first ``n_tracts`` tracts."""
    import cvxpy as cp
    import scipy.sparse as sp

    full = load_p1("pa-blockgroup")
    geo = full.geography
    ids = [str(i) for i in geo.ids]
    tracts = sorted(i for i in ids if len(i) == 11)[:n_tracts]
    counties = sorted({t[:5] for t in tracts})
    chosen = set(tracts)
    keep = ["42", *counties, *tracts, *(i for i in ids if len(i) == 12 and i[:11] in chosen)]
    index = {i: k for k, i in enumerate(ids)}
    parents = ["" if geo.parent[index[i]] < 0 else ids[geo.parent[index[i]]] for i in keep]
    sub_geo = Hierarchy.from_parents(keep, [p or None for p in parents])
    rows = [list(geo.leaves).index(index[i]) for i in (str(sub_geo.ids[j]) for j in sub_geo.leaves)]
    table = Table(sub_geo, full.categories, full.cells[rows])
    w = workload(table.categories, sub_geo.n_levels, aggregate=not nonneg)
    draws = measure(table, w, secure=False, rng=1)
    solver: Any = TableNonnegProjector if nonneg else TableProjector
    solver(table, w)(draws)  # loads the compiled loops (once per process)
    ours_runs = [timed(lambda: solver(table, w)(draws)) for _ in range(repeat)]
    ours_time, ours = statistics.median(r[0] for r in ours_runs), ours_runs[-1][1]
    certificate = postdp.kkt_report(ours, draws, nonneg=nonneg).worst_relative()
    entries = []
    for k, leaf in enumerate(sub_geo.leaves):
        node = int(leaf)
        while node >= 0:
            entries.append((node, k))
            node = int(sub_geo.parent[node])
    r, c = np.array(entries).T
    G = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(sub_geo.n, sub_geo.leaves.size))

    def build():
        X = cp.Variable((sub_geo.leaves.size, table.categories.leaves.size))
        objective, constraints = 0, []
        for m, values in zip(w.measurements, draws.values, strict=True):
            predicted = G[sub_geo.levels[m.level]] @ X @ m.query.matrix(table.categories).T
            if m.public:
                constraints.append(predicted == values)
            else:
                objective += cp.sum_squares(predicted - values) / m.variance
        if nonneg:
            constraints.append(X >= 0)
        return X, cp.Problem(cp.Minimize(objective), constraints)

    qp_runs, solve_runs = [], []
    for _ in range(repeat):  # a fresh problem each time: cvxpy caches its canonical form
        X, problem = build()
        qp_runs.append(timed(lambda p=problem: p.solve(solver=cp.CLARABEL))[0])
        solve_runs.append(problem.solver_stats.solve_time)
    qp_time, solve_time = statistics.median(qp_runs), statistics.median(solve_runs)
    diff = float(np.abs(G @ X.value - ours).max())
    name = "(P+) (detailed cells at every level, public state total)" if nonneg else "(P)"
    print(
        f"\nPart 2: {name} on the first {len(tracts)} tracts ({len(counties)} counties) "
        f"({sub_geo.n} geounits, {X.size:,} unknowns)"
    )
    print(
        f"  postdp {ours_time:.3f} s (preparation included; certificate {certificate:.1e}); "
        f"cvxpy + Clarabel {qp_time:.2f} s (status {problem.status}; runs "
        f"{', '.join(f'{t:.1f}' for t in qp_runs)} s), of which Clarabel's own solve "
        f"{solve_time:.2f} s; ratio {qp_time / ours_time:.0f}x with cvxpy's canonicalisation, "
        f"{solve_time / ours_time:.0f}x against the solve alone (medians of {repeat}); "
        f"max |diff| {diff:.2e}"
    )


def national_part(repeat):
    import resource

    from postdp.data import synthetic_table

    start = time.perf_counter()
    table = synthetic_table(rng=0)
    levels = [lvl.size for lvl in table.geography.levels]
    print(
        f"\nPart 3: synthetic national tract-level table {levels} x 63, built in "
        f"{time.perf_counter() - start:.1f} s"
    )
    w = workload(table.categories, table.geography.n_levels)
    prep, projector = timed(lambda: TableProjector(table, w))
    rows = []
    for run in range(repeat):
        floor, draws = timed(lambda r=run: measure(table, w, secure=False, rng=r))
        rows.append(
            (
                floor,
                timed(lambda d=draws: projector(d))[0],
                *timed(lambda d=draws: postdp.top_down(d)),
            )
        )
        rows[-1] = (
            *rows[-1][:3],
            timed(lambda v=rows[-1][3], r=run: postdp.round(v, table, rng=r))[0],
        )
    floor, gls, topdown, rounding = (statistics.median(col) for col in zip(*rows, strict=True))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"  noise {floor:.2f} s; (P) {gls:.2f} s = {gls / floor:.1f}x (preparation {prep:.1f} s);"
        f" top-down {topdown:.2f} s = {topdown / floor:.1f}x; rounding {rounding:.2f} s; top-down"
        f" + rounding {statistics.median(r[2] + r[3] for r in rows):.2f} s per draw; peak RSS"
        f" {peak:.2f} GB"
    )
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        draws = measure(table, w, secure=False, rng=0)
        postdp.top_down(draws, client=client)  # warm the workers
        times = [timed(lambda: postdp.top_down(draws, client=client))[0] for _ in range(repeat)]
        same = np.array_equal(postdp.top_down(draws, client=client), postdp.top_down(draws))
    print(
        "  top-down on a 2-worker Dask LocalCluster (one task per state): "
        f"{statistics.median(times):.2f} s; identical to the local run: {same}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-qp", action="store_true")
    parser.add_argument("--qp-tracts", type=int, default=20)
    parser.add_argument("--national", action="store_true", help="part 3 only")
    parser.add_argument("--qp-only", action="store_true", help="part 2 only")
    args = parser.parse_args()
    if args.national:
        national_part(args.repeat)
        return
    if not args.qp_only:
        print("Part 1: the Pennsylvania block-group P1 table, one draw")
        state_part(args.repeat)
    if not args.skip_qp:
        qp_part(args.qp_tracts, nonneg=False, repeat=args.repeat)
        qp_part(args.qp_tracts, nonneg=True, repeat=args.repeat)


if __name__ == "__main__":
    main()

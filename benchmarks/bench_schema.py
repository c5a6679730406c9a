"""The 2020 persons schema (2,016 cells) with its 11 marginals at every level: (P) in the
marginal basis against the noise floor.

Run by hand (never collected by pytest)::

    python benchmarks/bench_schema.py                        # nation > state > 60 > 3,000
    python benchmarks/bench_schema.py --tracts 600 --repeat 5
    python benchmarks/bench_schema.py --block-groups 3       # one more level, 3 per tract
    python benchmarks/bench_schema.py --top-down             # also top-down, rounding and
                                                             # blue-restore (with MAEs)
    python benchmarks/bench_schema.py --tracts 600 --block-groups 3 --blocks 10 --people 40
    python benchmarks/bench_schema.py --strategy pl94-2020-persons --counties 14 \
        --tracts 193 --block-groups 3 --blocks 42 --people 26   # a Vermont-sized state
    python benchmarks/bench_schema.py --stream 42           # a Pennsylvania-sized state,
                                                            # tract by tract (~30 min)
    python benchmarks/bench_schema.py --stream 42 --cut 2 --repeat 1 \
        --methods project,blue-restore-2020                 # the restoration, by county

The geography is synthetic: nation > state > ``--counties`` counties > ``--tracts``
tracts (spread evenly) [> ``--block-groups`` block groups per tract [> ``--blocks`` blocks
per block group]]. Every leaf holds about ``--people`` persons drawn from one state-wide,
very uneven distribution over the 2,016 cells (a few dozen cells hold most people). The
workload is the production one in shape: at every level the 11 marginals total, cenrace,
hispanic, votingage, hhinstlevels, hhgq, hispanic x cenrace, votingage x cenrace, votingage x
hispanic, votingage x hispanic x cenrace and detailed, each Gaussian with rho = 0.1 (the
budget split does not change the cost), plus the nation's total public; with
``--strategy``, the preset's own workload (exact shares, discrete Gaussian noise, the US
and state totals invariant; top-down keeps both).

Also timed: the variance of every count of the 11 marginals at every geounit
(``TableProjector.query_variances``, the margins of error of every published cell).

With ``--stream FIPS``: the synthetic 2020 population of one state
(``postdp.nmf.synthetic_population([FIPS])``; 42, Pennsylvania: 67 counties, ~3,300
tracts, ~9,400 block groups, ~320,000 blocks) under the persons preset (or ``--strategy``),
released subtree by subtree: the table and workload cut at the tracts (``--cut 3``; 2 for
the counties) with ``Table.split_at`` and ``Workload.split_at``, each subtree's answers
drawn from its own seed, then ``project_by_subtree`` (``"project"``, which draws each
subtree twice, and ``"topdown"``; ``--methods`` chooses, e.g. ``blue-restore-2020``, the
BLUE restored by subtree, whose BLUE draws each subtree twice too) and, with ``topdown``,
``postdp.round`` on the sparse block cells of the whole state. The noise floor is drawing
every answer once. Peak memory is the process's resident peak (``ru_maxrss``), everything
included.

With ``--neighbour`` every step runs beside another process that keeps every core busy
(matrix products on numpy's multi-threaded BLAS): (P) holds its own BLAS to one thread, so
it slows no more than the noise draw does (with two threads it waited on the threads that
had lost their core: 2.4 times the floor instead of 1.4).

Printed per step: the median wall time of ``--repeat`` runs, its ratio to the noise floor
(drawing the noise of the whole workload once, ``measure``) per run and the median of the
ratios, and the peak memory of the step (tracemalloc). The (P) step includes its one-off
preparation (``TableProjector``), which does not depend on the number of geounits beyond
the distinct subtree shapes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator

import numpy as np
from scipy import sparse

import postdp
from postdp import Gaussian, Hierarchy
from postdp.nmf import synthetic_population
from postdp.postprocess import TableProjector, blue_restore, project_by_subtree
from postdp.tables import Measurement, Query, Table, Workload, load_strategy, measure, pl94_schema

MARGINALS = [
    "total",
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "hispanic * cenrace",
    "votingage * cenrace",
    "votingage * hispanic",
    "votingage * hispanic * cenrace",
    "detailed",
]


def geography(tracts: int, block_groups: int, blocks: int = 0, n_counties: int = 60) -> Hierarchy:
    ids, parents = ["US", "ST"], [None, "US"]
    counties = [f"C{i:02d}" for i in range(n_counties)]
    ids += counties
    parents += ["ST"] * n_counties
    for t in range(tracts):
        ids.append(f"T{t:05d}")
        parents.append(counties[t % n_counties])
        for b in range(block_groups):
            ids.append(f"B{t:05d}{b}")
            parents.append(f"T{t:05d}")
            for k in range(blocks):
                ids.append(f"K{t:05d}{b}{k:03d}")
                parents.append(f"B{t:05d}{b}")
    return Hierarchy.from_parents(ids, parents)  # type: ignore[arg-type]


def population(geo: Hierarchy, people: int, rng: np.random.Generator) -> np.ndarray:
    """Every leaf's people drawn from one state-wide, very uneven distribution over the
    2,016 cells (Dirichlet(0.02) probabilities): a few dozen cells hold most people, as in
    the real file, so nearby geounits share their cells."""
    c = 2016
    probs = rng.dirichlet(np.full(c, 0.02))
    sizes = rng.poisson(people, size=geo.leaves.size)
    return np.array([rng.multinomial(n, probs) for n in sizes], dtype=np.int64)


def timed(step, repeat):
    times, peak = [], 0
    for _ in range(repeat):
        tracemalloc.start()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return times, peak


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def stream(args: argparse.Namespace) -> None:
    """A state released subtree by subtree (see the module docstring)."""
    start = time.perf_counter()
    table = synthetic_population([args.stream], seed=0)
    geo = table.geography
    work = load_strategy(args.strategy or "pl94-2020-persons").workload(table)
    top, subs = table.split_at(args.cut)
    top_work, sub_work = work.split_at(args.cut)
    leaf_total = np.asarray(table.cells.sum(axis=1)).astype(float)
    full = np.zeros(geo.n)
    full[geo.leaves] = leaf_total
    truth = geo.aggregate(full)
    every = geo.index([str(i) for s in subs for i in s.geography.ids])  # one lookup
    rows = np.split(every, np.cumsum([s.geography.n for s in subs])[:-1])
    t_rows = geo.index([str(i) for i in top.geography.ids])
    leaf_rows = np.concatenate(
        [
            np.searchsorted(geo.leaves, r[s.geography.leaves])
            for r, s in zip(rows, subs, strict=True)
        ]
    )
    print(
        f"state {args.stream}: {geo.n:,} geounits ({', '.join(f'{lv.size:,}' for lv in geo.levels)}"
        f" by level), {int(truth[0]):,} people, {table.cells.nnz:,} nonzero block cells; "
        f"built and cut in {time.perf_counter() - start:.0f} s; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    seeds = np.random.SeedSequence(1).spawn(len(subs) + 1)

    def top_draws():
        return measure(top, top_work, secure=False, rng=np.random.default_rng(seeds[-1]))

    def subtree(k):
        return measure(subs[k], sub_work, secure=False, rng=np.random.default_rng(seeds[k]))

    def floor():
        top_draws()
        for k in range(len(subs)):
            subtree(k)

    def solve(method):
        """Run one method; MAE of total population per level and, for top-down, the
        block cells (sparse, for the rounding)."""
        parts = project_by_subtree(top_draws(), subtree, method=method)
        upper = next(parts)
        errors = np.zeros(geo.n_levels)
        np.add.at(errors, geo.depth[t_rows], np.abs(upper.sum(axis=1) - truth[t_rows]))
        errors[args.cut] = 0.0  # counted below, as the subtrees' roots
        blocks = []
        for r, s, est in zip(rows, subs, parts, strict=True):
            g = s.geography
            np.add.at(errors, geo.depth[r], np.abs(est.sum(axis=1) - truth[r]))
            if method == "topdown":  # nonnegative and sparse: the rounding's input
                blocks.append(sparse.csr_array(est[g.leaves]))
        return errors, blocks

    counts = np.array([lv.size for lv in geo.levels], dtype=float)
    methods = [m.strip() for m in args.methods.split(",")]
    timings: dict[str, list[float]] = {"floor": [], "rounding": [], **{m: [] for m in methods}}
    results = {}
    blocks: list = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        floor()
        timings["floor"].append(time.perf_counter() - t0)
        print(
            f"  noise floor {timings['floor'][-1]:.1f} s, peak RSS {_peak_gb():.2f} GB", flush=True
        )
        for method in methods:
            t0 = time.perf_counter()
            errors, solved = solve(method)
            timings[method].append(time.perf_counter() - t0)
            print(
                f"  {method}: {timings[method][-1]:.1f} s, peak RSS {_peak_gb():.2f} GB",
                flush=True,
            )
            results[method] = errors
            blocks = solved or blocks
        if not blocks:  # no top-down: nothing to round
            continue
        t0 = time.perf_counter()
        cells = sparse.vstack(blocks).tocsr()[np.argsort(leaf_rows)]
        rounded = postdp.round(cells, table, rng=2)
        timings["rounding"].append(time.perf_counter() - t0)
        print(
            f"  rounding: {timings['rounding'][-1]:.1f} s, peak RSS {_peak_gb():.2f} GB", flush=True
        )
    f = timings["floor"]
    for name in methods:
        ratios = [t / x for t, x in zip(timings[name], f, strict=True)]
        print(
            f"{name}: median {statistics.median(timings[name]):.1f} s, "
            f"{statistics.median(ratios):.2f}x the floor (per run: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + ")"
        )
    print(f"noise floor: median {statistics.median(f):.1f} s; peak RSS {_peak_gb():.2f} GB")
    rounded_full = None
    if timings["rounding"]:
        both = [
            (t + r) / x for t, r, x in zip(timings["topdown"], timings["rounding"], f, strict=True)
        ]
        print(
            f"rounding median {statistics.median(timings['rounding']):.1f} s; top-down + "
            f"rounding {statistics.median(both):.2f}x the floor (per run: "
            + ", ".join(f"{r:.2f}" for r in both)
            + ")"
        )
        block_totals = np.asarray(rounded.sum(axis=1)).astype(float)
        rounded_full = np.zeros(geo.n)
        rounded_full[geo.leaves] = block_totals
        rounded_full = geo.aggregate(rounded_full)
    print("MAE of total population by level (last run):")
    for d in range(2, geo.n_levels):
        nodes = geo.levels[d]
        shown = [f"{name} {results[name][d] / counts[d]:.2f}" for name in methods]
        if rounded_full is not None:
            shown.append(f"rounded {np.abs(rounded_full[nodes] - truth[nodes]).mean():.2f}")
        print(f"  level {d} ({nodes.size:,}): " + ", ".join(shown))
    state = geo.levels[1][0]
    if rounded_full is not None:
        print(
            f"checks: the state's rounded total {int(rounded_full[state]):,} (invariant "
            f"{int(truth[state]):,}); integers {rounded.dtype}"
        )
    print(f"load after {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracts", type=int, default=3000)
    parser.add_argument("--block-groups", type=int, default=0)
    parser.add_argument("--blocks", type=int, default=0, help="blocks per block group")
    parser.add_argument("--people", type=int, default=1200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--top-down", action="store_true", help="also time top-down and rounding")
    parser.add_argument("--counties", type=int, default=60)
    parser.add_argument(
        "--strategy",
        help="a preset (postdp.tables.load_strategy), e.g. pl94-2020-persons: its exact shares, "
        "discrete Gaussian noise and invariants (needs --block-groups and --blocks)",
    )
    parser.add_argument(
        "--cut",
        type=int,
        default=3,
        help="with --stream, the level the state is cut at (2: counties, 3: tracts)",
    )
    parser.add_argument(
        "--methods",
        default="project,topdown",
        help="with --stream, the methods of project_by_subtree to time, separated by ','",
    )
    parser.add_argument(
        "--stream",
        metavar="FIPS",
        help="a state's synthetic 2020 population released subtree by subtree (e.g. 42)",
    )
    parser.add_argument(
        "--neighbour",
        action="store_true",
        help="run beside a busy neighbour: another process multiplying matrices on every "
        "core (numpy's BLAS) from before the first step to after the last",
    )
    args = parser.parse_args()
    if args.neighbour:
        with busy_neighbour():
            run(args)
    else:
        run(args)


@contextlib.contextmanager
def busy_neighbour() -> Iterator[None]:
    """Another process keeping every core busy (3000 x 3000 matrix products on numpy's
    multi-threaded BLAS, the kind of job a shared machine runs), started 10 s before."""
    code = "import numpy as np\na = np.random.rand(3000, 3000)\nwhile True:\n    a @ a\n"
    job = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(10)
        print(f"beside a busy neighbour (pid {job.pid}); load {os.getloadavg()[0]:.2f}")
        yield
    finally:
        job.kill()
        job.wait()


def run(args: argparse.Namespace) -> None:
    if args.stream:
        stream(args)
        return
    rng = np.random.default_rng(0)
    schema = pl94_schema()
    geo = geography(args.tracts, args.block_groups, args.blocks, args.counties)
    table = Table(geo, schema.categories(), population(geo, args.people, rng))
    if args.strategy:
        work = load_strategy(args.strategy).workload(table)
        items = list(work.measurements)
    else:
        items = [Measurement(0, Query.marginal(schema, "total"), None)]
        for d in range(geo.n_levels):
            for name in MARGINALS:
                if d == 0 and name == "total":
                    continue
                items.append(Measurement(d, Query.marginal(schema, name), Gaussian(rho=0.1)))
        work = Workload(items)
    counts = sum(m.query.size * geo.levels[m.level].size for m in items)
    print(
        f"geography: {geo.n:,} geounits over {geo.n_levels} levels; {schema.size:,} cells; "
        f"{len(items)} measurements, {counts:,} counts; load {os.getloadavg()[0]:.2f}"
    )
    draws = measure(table, work, secure=False, rng=1)
    floor, floor_peak = timed(lambda: measure(table, work, secure=False, rng=1), args.repeat)
    solve, solve_peak = timed(lambda: TableProjector(table, work)(draws), args.repeat)
    ratios = [s / f for s, f in zip(solve, floor, strict=True)]
    print(
        f"noise floor (measure): median {statistics.median(floor):.2f} s, "
        f"peak {floor_peak / 2**20:.0f} MiB"
    )
    print(
        f"(P), marginal basis, with preparation: median {statistics.median(solve):.2f} s, "
        f"{statistics.median(ratios):.2f}x the floor (per run: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + f"), peak {solve_peak / 2**20:.0f} MiB"
    )
    projector = TableProjector(table, work)
    queries = [Query.marginal(schema, name) for name in MARGINALS]

    def margins():
        return [projector.query_variances(q) for q in queries]

    moe, moe_peak = timed(margins, args.repeat)
    print(
        f"variances of the 11 marginals at every geounit ({sum(q.size for q in queries)} "
        f"counts each): median {statistics.median(moe):.2f} s, peak {moe_peak / 2**20:.0f} MiB"
    )
    if args.top_down:
        down, down_peak = timed(lambda: postdp.top_down(draws), args.repeat)
        ratios = [s / f for s, f in zip(down, floor, strict=True)]
        print(
            f"top-down (root, then each family in its parent's positive cells): median "
            f"{statistics.median(down):.2f} s, {statistics.median(ratios):.2f}x the floor "
            f"(per run: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"), peak {down_peak / 2**20:.0f} MiB"
        )
        solved = postdp.top_down(draws)
        rounding, round_peak = timed(lambda: postdp.round(solved, table, rng=2), args.repeat)
        both = [(d + r) / f for d, r, f in zip(down, rounding, floor, strict=True)]
        print(
            f"rounding (postdp.round, the fractional circulation): median "
            f"{statistics.median(rounding):.2f} s, peak {round_peak / 2**20:.0f} MiB; "
            f"top-down + rounding {statistics.median(both):.2f}x the floor"
        )
        restore, restore_peak = timed(lambda: blue_restore(draws), args.repeat)
        ratios = [s / f for s, f in zip(restore, floor, strict=True)]
        print(
            f"blue-restore (BLUE, then each family restored): median "
            f"{statistics.median(restore):.2f} s, {statistics.median(ratios):.2f}x the floor, "
            f"peak {restore_peak / 2**20:.0f} MiB"
        )
        truth = table.counts()[:, 0].astype(float)
        estimates = {
            "project": projector(draws).sum(axis=1),
            "topdown": solved.sum(axis=1),
            "blue-restore": blue_restore(draws).sum(axis=1),
        }
        print("MAE of total population by level (one draw):")
        for d in range(2, geo.n_levels):
            nodes = geo.levels[d]
            row = ", ".join(
                f"{name} {np.abs(e[nodes] - truth[nodes]).mean():.2f}"
                for name, e in estimates.items()
            )
            print(f"  level {d} ({nodes.size:,} geounits): {row}")
    est = projector(draws)
    state = int(geo.index("ST")[0])
    gap = np.abs(est[state] - est[geo.parent == state].sum(axis=0)).max()
    print(f"consistency (state minus the sum of its counties, largest cell): {gap:.2e}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

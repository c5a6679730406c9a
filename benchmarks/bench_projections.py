"""Speed and accuracy of postdp's projections against cvxpy + Clarabel, and at 10^6 leaves.

Run by hand (never collected by pytest; needs the ``qp`` extra for part 1)::

    python benchmarks/bench_projections.py              # both parts
    python benchmarks/bench_projections.py --skip-qp    # part 2 only
    python benchmarks/bench_projections.py --qp-draws 5 # fewer Clarabel solves

Part 1: (P+) on the bundled county hierarchy (3,195 nodes) with Laplace noise at lambda = 4
and lambda = 2000, postdp's prepared ``Projector`` against a parameterised cvxpy problem
solved by Clarabel (canonicalisation done once, outside the timings): time of a single
projection, time per draw when postdp projects a batch of 1,000 draws (Clarabel solves the
draws one after another; its per-draw time is measured on ``--qp-draws`` of them), and the
largest difference between the two solutions, with Clarabel at its default tolerances and
at tight ones.

Part 2: postdp alone on a synthetic nation > state > county > tract > block-group hierarchy
with about 10^6 leaves: time and peak memory (tracemalloc) of one projection by (P), (P+)
and top-down, next to the time of drawing the Laplace noise for the hierarchy once.

Part 3 (``--build``): building hierarchies at 10^6 and 10^7 nodes against the time of
drawing their noise (medians of ``--repeat`` runs, ratio per run in one process) and the
resident bytes per node beyond the ids; ``Hierarchy.from_codes`` on census-like code
columns (rows in geocode order); one-shot ``project()`` on a hierarchy it has not seen and
on one it has, against a prepared ``Projector``.

Part 4 (``--national``): a block-level nation (about 8.5 million nodes: 51 states, 63
counties each, 26 tracts per county, about 100 blocks per tract) built, noised, projected by
(P), (P+) and top-down and rounded to consistent integers, with the peak resident memory of
the process after each step (the issue's bound is 24 GB).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
import pandas as pd

from postdp import Hierarchy, Laplace, project
from postdp.data import county_hierarchy, synthetic_hierarchy
from postdp.postprocess import Projector, kkt_report, round_consistent, top_down


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def qp_part(n_qp):
    import cvxpy as cp

    from postdp.hierarchy import constraints

    h = county_hierarchy()
    A, b = constraints(h)
    y_par = cp.Parameter(h.n)
    v = cp.Variable(h.n)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(v - y_par)), [A @ v == b, v >= 0])
    tight = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "max_iter": 500}
    projector = Projector(h, nonneg=True)
    print("Part 1: (P+) on the county hierarchy (3,195 nodes), postdp vs cvxpy + Clarabel")
    for lam in (4.0, 2000.0):
        draws = Laplace.from_scale(lam).sample(h.counts.astype(float), rng=int(lam), size=1000)
        print(f"\n  lambda = {lam:g}: {(draws[:, h.leaves] < 0).mean():.1%} of noisy counties < 0")
        single, _ = best_of(lambda d=draws: projector(d[0]), repeat=20)
        batch, ours = best_of(lambda d=draws: projector(d), repeat=3)
        worst = kkt_report(ours, draws, h).worst_relative()
        print(f"    postdp single projection     {single * 1e3:9.3f} ms")
        print(
            f"    postdp batch of 1000 draws   {batch * 1e3:9.3f} ms = "
            f"{batch / 1000 * 1e3:.4f} ms/draw   (worst relative KKT residual {worst:.1e})"
        )
        for label, opts in (("default", {}), ("tight", tight)):
            y_par.value = draws[0]
            problem.solve(solver=cp.CLARABEL, **opts)  # warm-up: canonicalisation
            times, diffs, statuses = [], [], []
            for i in range(n_qp):
                y_par.value = draws[i]
                start = time.perf_counter()
                problem.solve(solver=cp.CLARABEL, **opts)
                times.append(time.perf_counter() - start)
                statuses.append(problem.status)
                if v.value is not None:
                    diffs.append(float(np.abs(v.value - ours[i]).max()))
            per = float(np.median(times))
            diff = f"{max(diffs):.3g}" if diffs else "n/a"
            print(
                f"    Clarabel ({label:7s}) per solve {per * 1e3:9.3f} ms  statuses "
                f"{sorted(set(statuses))}  max |diff| {diff}"
            )
            print(
                f"      ratios: single {per / single:8.0f}x   per draw in a batch "
                f"{per / (batch / 1000):8.0f}x"
            )


def large_part(repeat):
    print("\nPart 2: postdp on a synthetic hierarchy with about 10^6 leaves")
    start = time.perf_counter()
    h = synthetic_hierarchy(rng=0)
    print(
        f"  built in {time.perf_counter() - start:.2f} s: {h.n:,} nodes, levels "
        f"{[lvl.size for lvl in h.levels]}"
    )
    lam = 10.0
    m = Laplace.from_scale(lam)
    x = h.counts.astype(float)
    floor, noisy = best_of(lambda: m.sample(x, rng=1), repeat)
    vector_mb = h.n * 8 / 2**20
    print(
        f"  noise floor (one Laplace draw of every node): {floor * 1e3:.1f} ms; "
        f"one vector = {vector_mb:.1f} MB; {(noisy < 0).mean():.1%} of nodes < 0"
    )
    for label, kwargs in (
        ("(P)", {"nonneg": False}),
        ("(P+)", {"nonneg": True}),
        ("top-down", {"method": "topdown"}),
    ):
        start = time.perf_counter()
        projector = Projector(h, **kwargs)
        setup = time.perf_counter() - start
        elapsed, out = best_of(lambda p=projector: p(noisy), repeat)
        tracemalloc.start()
        projector(noisy)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        report = kkt_report(out, noisy, h, nonneg=kwargs.get("nonneg", True))
        consistency = float((report.constraint_violation / report.scale).max())
        kkt_rel = float((report.kkt_residual / (report.scale * report.gradient_scale)).max())
        kkt = "" if label == "top-down" else f", KKT {kkt_rel:.0e}"
        print(
            f"  {label:9s} {elapsed * 1e3:8.1f} ms = {elapsed / floor:4.2f}x floor   peak "
            f"{peak / 2**20:7.1f} MB = {peak / 2**20 / vector_mb:4.1f} vectors   setup "
            f"{setup:.2f} s   residuals: consistency {consistency:.0e}{kkt}"
        )


def _peak_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _census_codes(rows, rng):
    """Code columns of census-like leaves (56 states, counties, tracts, blocks), sorted."""
    state = np.sort(rng.integers(1, 57, rows))
    df = pd.DataFrame({"STATE": state, "COUNTY": rng.integers(1, 60, rows) * 2 - 1})
    df["TRACT"] = rng.integers(1, 60, rows) * 100
    df = df.sort_values(["STATE", "COUNTY", "TRACT"], kind="stable").reset_index(drop=True)
    df["BLOCK"] = df.groupby(["STATE", "COUNTY", "TRACT"]).cumcount() + 1000
    df["pop"] = rng.geometric(0.02, rows) - 1
    return df


def build_part(repeat):
    print("\nPart 3: building hierarchies against drawing their noise")
    m = Laplace.from_scale(10.0)
    for label, fanout in (("10^6", (51, 62, 23, 14)), ("10^7", (51, 62, 23, 140))):
        builds, noises = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            h = synthetic_hierarchy(fanout, rng=0)
            builds.append(time.perf_counter() - start)
            x = h.counts.astype(float)
            start = time.perf_counter()
            m.sample(x, rng=1)
            noises.append(time.perf_counter() - start)
            del x
        tracemalloc.start()
        h = synthetic_hierarchy(fanout, rng=0)
        resident, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        ratios = np.array(builds) / np.array(noises)
        print(
            f"  synthetic {label}: {h.n:,} nodes, build {np.median(builds):.2f} s, noise "
            f"{np.median(noises):.2f} s, ratio median {np.median(ratios):.1f}x "
            f"(runs {', '.join(f'{r:.1f}' for r in ratios)}); resident "
            f"{resident / h.n:.0f} B/node (ids made on demand), peak {peak / h.n:.0f} B/node"
        )
        del h
    df = _census_codes(1_000_000, np.random.default_rng(0))
    columns = ["STATE", "COUNTY", "TRACT", "BLOCK"]
    builds, noises = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        h = Hierarchy.from_codes(df, columns, count="pop", widths=[2, 3, 6, 4])
        builds.append(time.perf_counter() - start)
        start = time.perf_counter()
        m.sample(h.counts.astype(float), rng=1)
        noises.append(time.perf_counter() - start)
    ratios = np.array(builds) / np.array(noises)
    print(
        f"  from_codes, 10^6 rows in geocode order: {h.n:,} nodes, build "
        f"{np.median(builds):.2f} s = {np.median(ratios):.1f}x its noise; "
        f"ids made on demand in {_timed(lambda: h.ids):.2f} s"
    )
    h = synthetic_hierarchy((51, 62, 23, 14), rng=0)
    x = m.sample(h.counts.astype(float), rng=1)
    for label, nonneg in (("(P)", False), ("(P+)", True)):
        prepared = Projector(h, nonneg=nonneg)
        rows = []
        for _ in range(repeat):
            fresh = synthetic_hierarchy((51, 62, 23, 14), rng=0)
            rows.append(
                (
                    _timed(lambda p=prepared: p(x)),
                    _timed(lambda f=fresh, n=nonneg: project(x, f, nonneg=n)),
                    _timed(lambda f=fresh, n=nonneg: project(x, f, nonneg=n)),
                )
            )
        ready, first, again = np.median(np.array(rows), axis=0)
        print(
            f"  project() {label:5s} prepared {ready * 1e3:6.1f} ms; one-shot on a new "
            f"hierarchy {first / ready:4.1f}x, on one seen before {again / ready:4.2f}x"
        )


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def national_part():
    print("\nPart 4: a block-level nation")
    start = time.perf_counter()
    h = synthetic_hierarchy((51, 63, 26, 100), rng=0)
    print(
        f"  built {h.n:,} nodes (levels {[lvl.size for lvl in h.levels]}) in "
        f"{time.perf_counter() - start:.1f} s; peak RSS {_peak_gb():.2f} GB"
    )
    m = Laplace.from_scale(5.0)
    x = m.sample(h.counts.astype(float), rng=1)
    for label, fn in (
        ("(P)", lambda: project(x, h, nonneg=False)),
        ("(P+)", lambda: project(x, h, nonneg=True)),
        ("top-down", lambda: top_down(x, h, nonneg=True)),
    ):
        start = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - start
        gap = float(h.layout.family_gaps(out[h.layout.order]).max()) / max(1.0, float(out.max()))
        print(
            f"  {label:9s} {elapsed:6.2f} s, relative consistency gap {gap:.0e}, min "
            f"{out.min():.3g}; peak RSS {_peak_gb():.2f} GB"
        )
    start = time.perf_counter()
    rounded = round_consistent(out, h, rng=2)
    exact = int(h.layout.family_gaps(rounded[h.layout.order].astype(float)).max())
    print(
        f"  rounded   {time.perf_counter() - start:6.2f} s, largest |parent - sum| {exact}, "
        f"max |rounded - real| {np.abs(rounded - out).max():.3f}; peak RSS {_peak_gb():.2f} GB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qp-draws", type=int, default=20, help="Clarabel solves per setting")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (part 2)")
    parser.add_argument("--skip-qp", action="store_true", help="skip part 1 (needs cvxpy)")
    parser.add_argument("--build", action="store_true", help="part 3 only: building")
    parser.add_argument("--national", action="store_true", help="part 4 only: 8.5M nodes")
    args = parser.parse_args()
    if args.build or args.national:
        if args.build:
            build_part(args.repeat)
        if args.national:
            national_part()
        return
    if not args.skip_qp:
        qp_part(args.qp_draws)
    large_part(args.repeat)


if __name__ == "__main__":
    main()

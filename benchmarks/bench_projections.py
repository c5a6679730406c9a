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
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from postdp import Laplace
from postdp.data import county_hierarchy, synthetic_hierarchy
from postdp.postprocess import Projector, kkt_report


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qp-draws", type=int, default=20, help="Clarabel solves per setting")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (part 2)")
    parser.add_argument("--skip-qp", action="store_true", help="skip part 1 (needs cvxpy)")
    args = parser.parse_args()
    if not args.skip_qp:
        qp_part(args.qp_draws)
    large_part(args.repeat)


if __name__ == "__main__":
    main()

"""Title I fairness audit of all districts: time against drawing the noise alone.

Run by hand (never collected by pytest)::

    python benchmarks/bench_fairness.py                  # 10,000 draws
    python benchmarks/bench_fairness.py --draws 2000
"""

from __future__ import annotations

import argparse
import time

from postdp import Laplace
from postdp.data import load_title1
from postdp.decisions import allotment_fairness
from postdp.postprocess import clamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    table = load_title1()
    x = table.poor_5_17.to_numpy(dtype=float)
    w = table.weight.to_numpy()
    m = Laplace(0.1)
    start = time.perf_counter()
    for _ in m.iter_samples(x, n_draws=args.draws, batch=args.batch, rng=0):
        pass
    floor = time.perf_counter() - start
    start = time.perf_counter()
    rep = allotment_fairness(
        x, w, m, amount=6.5e9, postprocess=clamp, n_draws=args.draws, batch=args.batch, rng=0
    )
    elapsed = time.perf_counter() - start
    print(f"{len(x):,} districts x {args.draws:,} draws (Laplace eps 0.1, clamp, $6.5B)")
    print(f"  noise alone        {floor:6.2f} s")
    print(
        f"  fairness audit     {elapsed:6.2f} s = {elapsed / floor:.2f}x the noise; "
        f"alpha ${rep.alpha:,.0f}, cost of privacy ${rep.cost_of_privacy():,.0f}"
    )


if __name__ == "__main__":
    main()

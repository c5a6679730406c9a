"""The 2020 DHC persons design end to end on a synthetic county: population, measure (the
noisy measurement files), read, (P)/BLUE, its margins, the 2020 TopDown of the DHC (its two
outer passes, the PL94 histogram held), and the accuracy of single years of age by sex by
geolevel against the truth and against theory.

Run by hand (never collected by pytest)::

    python benchmarks/bench_dhc_county.py                      # DC at scale 0.001, 3 runs
    python benchmarks/bench_dhc_county.py --state 10 --scale 0.002 --repeat 3

The truth is ``postdp.data.synthetic_dhc_population([--state], scale=--scale)``: a state's
2020 persons (default the District of Columbia's) shrunk by --scale, with ages, sexes and
relationships, on the DHC's eight-level spine (DC at scale 0.001: 690 persons in one tract,
24 geounits; Delaware at 0.002: three counties). The design is
``load_strategy("dhc-2020-persons")`` (about 1.9 million noisy answers per geounit). No PL94
histogram is held here (the production held the published PL94 release; a study holding the
true one would flatter every estimator), so (P) is the BLUE of the DHC's own measurements.
``topdown-2020`` cannot run without it (the design holds it exactly): it holds a PL94 release
of the same persons, ``top_down_2020`` of a ``pl94-2020-persons`` draw on the tabulation
geography (``postdp.nmf.synthetic_population``, same seed and scale; the facility bounds of
``postdp.data.synthetic_facilities``, as production held them), each DHC geounit's
histogram the sum of its blocks' (a DHC block is its tabulation block).

Printed per run, then medians of --repeat runs in this one process with the load average
(``os.getloadavg``) before and after:

- ``measure``: ``postdp measure --synthetic <state> --strategy dhc-2020-persons --study``
  in process: the population, the draw, the files written;
- ``floor``: the draw alone in memory (``postdp.tables.measure`` of the same workload on
  numpy's generator): the noise floor every estimator sits on;
- ``read``: ``postdp.nmf.read`` of the run;
- ``design``: :class:`postdp.postprocess.TableProjector` of the run's table and workload;
- ``solve``: (P) of the draw, every geounit's 1,227,744 cells;
- ``margins``: the exact variances of ``sex * age`` (232 counts) at every geounit;
- ``pl94``: the PL94 release held (measure and ``top_down_2020`` of the PL94 design);
- ``topdown``: ``top_down_2020`` of the DHC draw with that release held;
- ``restore``: BLUE-then-restore (``restore_dhc`` of the (P) above, in the DHC's two
  passes, that release held);

then the process's peak resident memory, and by geolevel the mean absolute error of (P)'s
``sex * age`` counts against the truth over the runs, beside what theory gives for an
unbiased estimate with those variances and normal errors (sqrt(2 / pi) x the mean standard
deviation); the ratio should be near 1; and the same MAE for ``topdown-2020`` and the
restoration.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", default="11", help="a state's FIPS code (default 11)")
    parser.add_argument("--scale", type=float, default=0.001)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from postdp import nmf
    from postdp.cli import main as postdp
    from postdp.postprocess import TableProjector, restore_dhc, top_down_2020
    from postdp.tables import Query, measure

    load = os.getloadavg()[0]
    strategy, truth = dhc_truth(args.state, args.scale)
    pl94_release = held_release(args.state, args.scale)
    geo = truth.geography
    age_sex = Query.marginal(strategy.schema, "sex * age")
    true_counts = age_sex.marginal_of.apply(np.asarray(truth.counts()[:, truth.categories.leaves]))
    steps = ("measure", "floor", "read", "design", "solve", "margins", "pl94", "topdown", "restore")
    times: dict[str, list[float]] = {k: [] for k in steps}
    errors, sds, td_errors, rs_errors = [], [], [], []
    for r in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            t0 = time.perf_counter()
            argv = ["measure", "--synthetic", args.state, "--population-scale", str(args.scale)]
            argv += ["--strategy", "dhc-2020-persons", "--study", "--seed", str(r)]
            assert postdp([*argv, "--output-dir", str(run), "--quiet"]) == 0
            t1 = time.perf_counter()
            floor = measure(truth, strategy.workload(truth), secure=False, rng=r)
            t2 = time.perf_counter()
            del floor
            draw = nmf.read(run)
            t3 = time.perf_counter()
        projector = TableProjector(draw.table, draw.workload)
        t4 = time.perf_counter()
        cells = projector(draw)
        t5 = time.perf_counter()
        var = projector.query_variances(age_sex)
        t6 = time.perf_counter()
        # the run's geounits are the truth's, in its order (ids: the truth's)
        order = geo.index([str(i) for i in draw.table.geography.ids])
        held = pl94_release(r)[order]
        t7 = time.perf_counter()
        released = top_down_2020(draw, held=held)
        t8 = time.perf_counter()
        restored = restore_dhc(draw, held=held, integral=True, blue=cells)  # (P) from above
        t9 = time.perf_counter()
        marks = (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9)
        for k, name in enumerate(steps):
            times[name].append(marks[k + 1] - marks[k])
        estimate = age_sex.marginal_of.apply(cells)
        errors.append(np.abs(estimate - true_counts[order]))
        td_errors.append(np.abs(age_sex.marginal_of.apply(released) - true_counts[order]))
        rs_errors.append(np.abs(age_sex.marginal_of.apply(restored) - true_counts[order]))
        sds.append(np.sqrt(np.maximum(var, 0.0)))
        depth = draw.table.geography.depth
        print(f"  run {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()))
        del draw, projector, cells, released, restored
    med = {k: statistics.median(v) for k, v in times.items()}
    print("median: " + ", ".join(f"{k} {v:.1f} s" for k, v in med.items()))
    print(
        f"measure / floor {med['measure'] / med['floor']:.2f}; "
        f"(P) design + solve / floor {(med['design'] + med['solve']) / med['floor']:.2f}"
    )
    print(f"peak resident memory {_peak_gb():.2f} GB")
    err, sd, td, rs = np.stack(errors), np.stack(sds), np.stack(td_errors), np.stack(rs_errors)
    print("single year of age x sex against the truth, by geolevel (MAE per count):")
    print("  level                 geounits  (P) MAE  theory  ratio  topdown-2020  blue-restore")
    for d, name in enumerate(strategy.levels):
        at = depth == d
        mae = float(err[:, at].mean())
        theory = float(np.sqrt(2 / np.pi) * sd[:, at].mean())
        print(
            f"  {name:<20} {int(at.sum()):>9} {mae:8.3f} {theory:7.3f}  {mae / theory:5.2f}"
            f"  {float(td[:, at].mean()):12.3f}  {float(rs[:, at].mean()):12.3f}"
        )
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


def dhc_truth(state: str, scale: float) -> tuple[Any, Any]:
    """The DHC persons design and a state's synthetic DHC population at ``scale`` (the
    truth), described in one printed line."""
    from postdp.data import synthetic_dhc_population
    from postdp.tables import load_strategy

    strategy = load_strategy("dhc-2020-persons")
    truth = synthetic_dhc_population([state], seed=0, scale=scale)
    geo = truth.geography
    print(
        f"{int(truth.cells.sum()):,} persons, {geo.n} geounits (levels "
        f"{', '.join(str(level.size) for level in geo.levels)}), {strategy.schema.size:,} cells"
    )
    return strategy, truth


def held_release(state: str, scale: float) -> Any:
    """The PL94 release a DHC study holds, a fresh one per seed:
    ``postdp.analysis.HeldRelease`` of the same persons (``pl94-2020-persons`` on the
    tabulation geography, ``top_down_2020`` with the synthetic facility bounds, as the
    production held the published release; the DHC's edits need their no-minors-in-nursing
    zero), each DHC geounit's histogram the sum of its blocks'."""
    from postdp.analysis import HeldRelease
    from postdp.data import facility_bounds, synthetic_facilities
    from postdp.nmf import synthetic_population

    pl94 = synthetic_population(states=[state], seed=0, scale=scale)
    bounds = facility_bounds(synthetic_facilities(pl94, seed=0), pl94.geography)
    return HeldRelease(pl94, bounds=bounds)


if __name__ == "__main__":
    main()

"""The 2020 DHC persons design post-processed through its noisy measurement files, held to
the PL94 release of the same persons: ``postdp postprocess DHC_RUN --method topdown-2020
--held PL94_OUT``, in process and by subtree tasks on a Dask LocalCluster of two workers.
Study path: synthetic populations, noise from numpy's generator (``--study``).

Run by hand (never collected by pytest)::

    python benchmarks/bench_dhc_subtrees.py                     # Delaware at 0.002, 3 runs
    python benchmarks/bench_dhc_subtrees.py --state 11 --scale 0.001 --cut-blocks 8

Each run, in fresh folders:

- ``measure``: ``postdp measure --synthetic <state> --strategy dhc-2020-persons
  --facilities synthetic --study`` (the DHC draw written as files, with the group-quarters
  bounds by detailed type: the floor every post-processing sits on);
- ``pl94``: the PL94 run of the same persons (``pl94-2020-persons``, the synthetic
  facilities' bounds) and its release, ``postdp postprocess --method topdown-2020``;
- ``local``: ``postdp postprocess`` of the DHC run held to that release (record switching
  meeting the bounds), in process (a state of at most 100 blocks one task);
- ``dask``: the same on the two workers, the state cut for tasks of at most
  ``--cut-blocks`` geounits (default 20), checked equal to
  ``local`` file by file (``--no-dask``: skipped, for a county too large for two
  workers' memory).

Each run prints how many geounits of each level its release leaves outside their
group-quarters bounds (the manifest's ``bounds_unmet``). Then medians of --repeat runs
with the load average (``os.getloadavg``) before and after,
the peak resident memory of this process and of each worker (``ru_maxrss``), and the mean
absolute error of single years of age by sex (232 counts a geounit) in the released files
against the truth, by geolevel (``postdp.nmf.evaluate``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KB on Linux


def _same(a: Path, b: Path, levels: tuple[str, ...]) -> bool:
    """Whether two releases hold the same rows at every level (files may be cut apart)."""
    import pandas as pd

    for level in levels:
        x, y = (pd.read_parquet(o / "long" / f"{level}.parquet") for o in (a, b))
        keys = list(x.columns[:-1])
        x, y = (f.astype(dict.fromkeys(keys, str)).sort_values(keys, ignore_index=True)
                for f in (x, y))  # fmt: skip
        if not x.equals(y):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", default="10", help="a state's FIPS code (default 10)")
    parser.add_argument("--scale", type=float, default=0.002)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cut-blocks", type=int, default=20)
    parser.add_argument(
        "--facilities",
        choices=("synthetic", "none"),
        default="synthetic",
        help="the DHC run's group-quarters bounds by detailed type (none: no record "
        "switching; the PL94 run keeps its bounds, whose nursing zero the DHC's edits need)",
    )
    parser.add_argument(
        "--no-dask", action="store_true", help="in process only (a county too large for two)"
    )
    args = parser.parse_args()

    from bench_dhc_county import dhc_truth  # the same truth as there (this folder)

    from postdp import nmf
    from postdp.cli import main as postdp

    load = os.getloadavg()[0]
    strategy, truth = dhc_truth(args.state, args.scale)
    geo = truth.geography
    levels = tuple(strategy.levels)
    steps = ("measure", "pl94", "local") + (() if args.no_dask else ("dask",))
    times: dict[str, list[float]] = {k: [] for k in steps}
    errors = []
    cluster = client = None
    if not args.no_dask:
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=":0")  # fmt: skip
        client = Client(cluster)
    try:
        for r in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                run, pl94, release, local, tasks = (
                    Path(tmp) / n for n in ("dhc", "pl94", "release", "local", "tasks")
                )
                common = ["measure", "--synthetic", args.state, "--population-scale"]
                common += [str(args.scale), "--study", "--quiet"]
                t0 = time.perf_counter()
                bounds = [] if args.facilities == "none" else ["--facilities", "synthetic"]
                assert postdp([*common, "--strategy", "dhc-2020-persons", *bounds,
                               "--seed", str(2 * r), "--output-dir", str(run)]) == 0  # fmt: skip
                t1 = time.perf_counter()
                assert postdp([*common, "--strategy", "pl94-2020-persons", "--facilities",
                               "synthetic", "--seed", str(2 * r + 1), "--output-dir",
                               str(pl94)]) == 0  # fmt: skip
                assert postdp(["postprocess", str(pl94), "--method", "topdown-2020",
                               "--output-dir", str(release), "--quiet"]) == 0  # fmt: skip
                t2 = time.perf_counter()
                nmf.postprocess(run, local, method="topdown-2020", held=release)
                t3 = time.perf_counter()
                if client is not None:
                    nmf.postprocess(run, tasks, method="topdown-2020", held=release,
                                    scheduler=client, cut_blocks=args.cut_blocks)  # fmt: skip
                    ok = _same(local, tasks, levels)
                    assert ok, "the Dask run differs from the local one"
                else:
                    tasks = local
                t4 = time.perf_counter()
                marks = (t0, t1, t2, t3, t4)
                for k, name in enumerate(steps):
                    times[name].append(marks[k + 1] - marks[k])
                manifest = json.loads((tasks / "postdp-manifest.json").read_text())
                unmet = manifest.get("bounds_unmet")
                if unmet is not None:
                    print(f"  run {r + 1}: geounits outside their bounds, by level: {unmet}")
                scores = nmf.evaluate(tasks, queries=["sex * age"])
                scores["error"] = scores["mae"] * scores["counts"]
                errors.append(scores.groupby("level", sort=False)[["error", "counts"]].sum())
                print(
                    f"  run {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items())
                )
        workers = {} if client is None else client.run(
            lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        )  # fmt: skip
    finally:
        if client is not None and cluster is not None:
            client.close()
            cluster.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print("median: " + ", ".join(f"{k} {v:.1f} s" for k, v in med.items()))
    print(f"local / measure {med['local'] / med['measure']:.2f}" + (
        f"; dask / measure {med['dask'] / med['measure']:.2f}" if "dask" in med else ""
    ))  # fmt: skip
    print(f"peak resident memory: this process {_peak_gb():.2f} GB; workers "
          + ", ".join(f"{v:.2f} GB" for v in workers.values()))  # fmt: skip
    pooled = sum(errors[1:], errors[0])
    print("single year of age x sex in the released files against the truth (MAE per count;")
    print("postdp.nmf.evaluate, pooled over the runs and size bins):")
    for d, name in enumerate(levels):
        row = pooled.loc[name]
        mae = row["error"] / row["counts"]
        print(f"  {name:<20} {geo.levels[d].size:>5} geounits  {mae:7.3f}")
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()

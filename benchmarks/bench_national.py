"""The national release as two commands: ``postdp measure`` then ``postdp postprocess``.

Run by hand (never collected by pytest)::

    python benchmarks/bench_national.py --states 11,10,44        # a rehearsal: 3 states
    python benchmarks/bench_national.py --states all             # the 50 states and DC
    python benchmarks/bench_national.py --states 06 --facilities # the 2020 bounds too
    python benchmarks/bench_national.py --states all --strategy pl94-2020-p1  # P1-shaped

Drives the public command line on the synthetic persons population
(``postdp.nmf.synthetic_population``, the 2020 tallies) with the 2020 persons preset, or
with postdp's P1-shaped preset (``--strategy pl94-2020-p1``: the persons budget on the 63
race cells):

1. ``postdp measure --synthetic STATES --strategy S --study --seed 1 --output-dir RUN
   --scheduler ADDRESS`` (the states, and the counties and tracts of a state cut at
   ``--cut-blocks``, as tasks; the run renamed into place when complete);
2. ``postdp postprocess RUN --method topdown-2020 --output-dir OUT --scheduler ADDRESS``,

both on a Dask LocalCluster this script starts (``--workers``; its workers restarted
between the two, so that each command's peak on them is its own), or in-process with
``--workers 0``.

Printed: the load average, wall time and peak RSS of each command (the client), every Dask
worker's peak RSS, the run's and the output's size on disk, the bytes each subtree task
ships (its arguments, pickled), blocks per second, and the time per block extrapolated to
the nation's 8.13 million blocks when fewer states are run.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from postdp.nmf import read, subtrees, synthetic_states

NATION_BLOCKS = 8_132_968


def _command() -> list[str]:
    script = Path(sys.executable).with_name("postdp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "postdp"]


def _timed(args: list[str]) -> tuple[float, float]:
    """Wall seconds and the command's own peak RSS (GB) of one CLI run (``wait4``: that
    process only, not the Dask workers, which this script started)."""
    start = time.perf_counter()
    proc = subprocess.Popen([*_command(), *args])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{args[0]} failed with status {proc.returncode}")
    return wall, usage.ru_maxrss / 2**20


def _size_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


def _worker_peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", default="11,10,44", help="FIPS codes, or 'all'")
    parser.add_argument("--method", default="topdown-2020")
    parser.add_argument("--strategy", default="pl94-2020-persons", help="the measure preset")
    parser.add_argument("--workers", type=int, default=2, help="0: in-process")
    parser.add_argument("--keep", metavar="DIR", help="keep the run and output here")
    parser.add_argument(
        "--cut-blocks",
        type=int,
        help="states above this: county by county (default: each command's own, 100,000 "
        "blocks for measure and 50,000 for postprocess)",
    )
    parser.add_argument(
        "--facilities",
        action="store_true",
        help="measure with the synthetic group-quarters facilities (the 2020 structural "
        "bounds, held by topdown-2020)",
    )
    args = parser.parse_args()
    states = synthetic_states() if args.states == "all" else args.states.split(",")
    with open("/proc/loadavg") as f:
        print(
            f"load average {' '.join(f.read().split()[:3])}; states {len(states)}; "
            f"--strategy {args.strategy}"
        )
    folder = Path(args.keep or tempfile.mkdtemp(prefix="national-"))
    folder.mkdir(parents=True, exist_ok=True)
    run, out = folder / "run", folder / "out"
    cut = [] if args.cut_blocks is None else ["--cut-blocks", str(args.cut_blocks)]
    for path in (run, out):
        if path.exists():
            shutil.rmtree(path)
    cluster = client = None
    extra: list[str] = []
    if args.workers:
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
        extra = ["--scheduler", cluster.scheduler_address]
    wall_m, peak_m = _timed(
        ["measure", "--synthetic", ",".join(states), "--strategy", args.strategy,
         "--study", "--seed", "1",
         "--output-dir", str(run), *cut, "--quiet", *extra,
         *(["--facilities", "synthetic"] if args.facilities else [])]
    )  # fmt: skip
    top = read(run, levels=2)
    on_workers = ""
    if client is not None:
        peaks = client.run(_worker_peak)
        on_workers = "; workers' peak RSS " + ", ".join(f"{v:.2f}" for v in peaks.values()) + " GB"
    print(
        f"measure: {wall_m:.0f} s wall, peak RSS {peak_m:.2f} GB{on_workers}; run "
        f"{_size_gb(run):.2f} GB on disk; {len(subtrees(run))} subtrees"
    )
    if client is not None:  # each command's own peak on the workers
        client.restart()
    wall_p, peak_p = _timed(
        ["postprocess", str(run), "--method", args.method, "--output-dir", str(out), "--quiet",
         *cut, *extra]
    )  # fmt: skip
    workers = ""
    if client is not None:
        peaks = client.run(_worker_peak)
        workers = "; workers' peak RSS " + ", ".join(f"{v:.2f}" for v in peaks.values()) + " GB"
        client.close()
        cluster.close()
    names = tuple(json.loads((run / "postdp-nmf.json").read_text())["levels"])
    one = ("006", 1, ("006",), None, str(run), str(out), names, args.cut_blocks or 50_000)
    batch = ("006", 3, tuple(f"006037{t:06d}" for t in range(1000)), "006037", *one[4:])
    shipped = len(pickle.dumps(one))  # a task's arguments: paths and geocodes
    per_member = (len(pickle.dumps(batch)) - shipped) / 1000
    manifest = json.loads((out / "postdp-manifest.json").read_text())
    parts = sorted((out / "wide" / "Block.parquet").rglob("part-*.parquet"))
    blocks = sum(pq.ParquetFile(f).metadata.num_rows for f in parts)
    print(
        f"postprocess --method {args.method}: {wall_p:.0f} s wall, client peak RSS "
        f"{peak_p:.2f} GB{workers}; output {_size_gb(out):.2f} GB, {len(manifest['files'])} "
        f"files; each subtree task ships {shipped / 1024:.1f} KB "
        f"(+{per_member:.0f} bytes per geocode of a batch) "
        f"({len(top.table.geography.leaves)} states, {len(parts)} state or batch tasks "
        "writing blocks)"
    )
    per_block = (wall_m + wall_p) / blocks
    print(
        f"total {(wall_m + wall_p) / 60:.1f} min for {blocks:,} blocks; at this rate the "
        f"nation's {NATION_BLOCKS:,} blocks: {per_block * NATION_BLOCKS / 3600:.1f} h "
        f"(measure {wall_m / blocks * NATION_BLOCKS / 3600:.1f} h, postprocess "
        f"{wall_p / blocks * NATION_BLOCKS / 3600:.1f} h), run on disk "
        f"{_size_gb(run) / blocks * NATION_BLOCKS:.0f} GB"
    )
    if not args.keep:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()

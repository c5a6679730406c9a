"""A secure ``postdp measure`` reserves its budget in the ledger and draws without the
ledger's lock; the ledger says what became of every draw; a waiting command is told which
command holds the lock; killed commands' temporaries are removed by the next one into the
same place (issue 41)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import postdp.nmf
from postdp import privacy as _ledger
from postdp.cli import main
from tests.cli._helpers import TABLE, postdp_command

pytest.importorskip("opendp")

RHO = 293764 / 114921  # the persons preset's budget


@pytest.fixture
def fast_release(monkeypatch):
    """The secure samplers (OpenDP's and postdp's exact one) stood in by a fast integer
    draw (these tests are about the bookkeeping, not the sampler); returns the list of
    draws made."""
    from postdp.mechanisms import _base

    rng = np.random.default_rng(0)
    calls = []

    def release(self, x):
        calls.append(1)
        return np.asarray(x) + rng.integers(-3, 4, size=np.shape(x))

    def exact(mechanism, x, **kwargs):
        return release(mechanism, x)

    monkeypatch.setattr(_base.NoiseMechanism, "release", release)
    import postdp.mechanisms.release as samplers

    monkeypatch.setattr(samplers, "exact_release", exact)
    return calls


def _records(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def _measure(tmp_path: Path, ledger: Path, run: str = "run") -> list[str]:
    return [
        "measure",
        "--synthetic",
        "11",
        "--population-scale",
        "0.05",
        "--ledger",
        str(ledger),
        "--quiet",
        "--output-dir",
        str(tmp_path / run),
    ]


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(proc.stdout)


def test_the_draw_runs_outside_the_lock_on_a_counted_reservation(
    tmp_path, monkeypatch, fast_release
):
    ledger = tmp_path / "ledger.jsonl"
    real = postdp.nmf.measure_by_state
    seen = {}

    def draw(*args, **kwargs):
        # another command can take the lock now, and the ledger already counts this draw
        fd = os.open(ledger.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the lock is held
        finally:
            os.close(fd)
        records = _records(ledger)
        seen["status"] = [r["status"] for r in records]
        seen["spent"] = _ledger.spent_on(records, records[0]["input_sha256"])
        return real(*args, **kwargs)

    monkeypatch.setattr(postdp.nmf, "measure_by_state", draw)
    assert main(_measure(tmp_path, ledger)) == 0
    assert seen["status"] == ["reserved"]
    assert seen["spent"].releases == 1 and seen["spent"].pending == 1
    assert seen["spent"].rho == pytest.approx(RHO)
    records = _records(ledger)
    assert [r["status"] for r in records] == ["reserved", "published"]
    assert records[0]["pid"] == os.getpid() and "measure --synthetic 11" in records[0]["command"]
    spent = _ledger.spent_on(records, records[0]["input_sha256"])
    assert (spent.releases, spent.pending) == (1, 0) and spent.rho == pytest.approx(RHO)
    assert not (tmp_path / "ledger.jsonl.lock").exists()  # the holder's note is gone


def test_a_waiting_release_names_the_command_holding_the_lock(tmp_path):
    (tmp_path / "good.csv").write_text(TABLE)
    ledger = tmp_path / "ledger.jsonl"
    cleanup: list = []
    _ledger.lock(ledger, "--ledger", cleanup, holder="postdp measure --synthetic 11 -o big")
    try:
        proc = subprocess.Popen(
            [
                *postdp_command(),
                *["release", "--input", str(tmp_path / "good.csv")],
                *["-o", str(tmp_path / "out.csv"), "--ledger", str(ledger)],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready, _, _ = select.select([proc.stderr], [], [], 120)
        line = proc.stderr.readline() if ready else ""
    finally:
        while cleanup:
            cleanup.pop()()
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, rest
    assert line.startswith(f"postdp: waiting for the ledger {str(ledger)!r}"), line
    assert f"(pid {os.getpid()}: postdp measure --synthetic 11 -o big)" in line, line
    assert len(_records(ledger)) == 1


def test_a_measure_beaten_to_its_folder_says_its_draw_is_recorded_unpublished(
    tmp_path, monkeypatch, capsys, fast_release
):
    ledger = tmp_path / "ledger.jsonl"
    run = tmp_path / "run"
    real = postdp.nmf.measure_by_state

    def draw_while_another_writes(*args, **kwargs):
        out = real(*args, **kwargs)
        run.mkdir()
        (run / "theirs").write_text("another command's run\n")
        return out

    monkeypatch.setattr(postdp.nmf, "measure_by_state", draw_while_another_writes)
    assert main(_measure(tmp_path, ledger)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing was written there" in err
    assert "records this draw as drawn, not published (its budget counts" in err
    assert sorted(p.name for p in run.iterdir()) == ["theirs"]
    records = _records(ledger)
    assert [r["status"] for r in records] == ["reserved", "drawn, not published"]
    spent = _ledger.spent_on(records, records[0]["input_sha256"])
    assert (spent.releases, spent.pending) == (1, 0) and spent.rho == pytest.approx(RHO)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_live_reservation_of_the_folder_refuses_a_second_measure_before_it_draws(
    tmp_path, capsys, fast_release
):
    ledger = tmp_path / "ledger.jsonl"
    theirs = {
        "time": "2030-01-01T00:00:00+00:00",
        "input": "synthetic population states=10 seed=0",
        "input_sha256": "0" * 64,
        "budget": {"epsilon": 0.0, "rho": RHO},
        "output": str(tmp_path / "run"),
        "status": "reserved",
        "reservation": "abc",
        "pid": os.getppid(),  # alive: it runs these tests
        "host": os.uname().nodename,
        "command": "postdp measure --synthetic 10 --output-dir run",
    }
    ledger.write_text(json.dumps(theirs) + "\n")
    assert main(_measure(tmp_path, ledger)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is drawing into it; nothing was drawn" in err
    assert f"pid {os.getppid()}" in err
    assert fast_release == [] and not (tmp_path / "run").exists()
    assert len(_records(ledger)) == 1
    # killed (its process gone): it no longer blocks the folder, but its budget counts
    theirs.update(pid=_dead_pid(), input_sha256=_records(ledger)[0]["input_sha256"])
    assert main([*_measure(tmp_path, ledger), "--ledger", str(tmp_path / "other.jsonl")]) == 0
    own = _records(tmp_path / "other.jsonl")[0]
    theirs.update(input_sha256=own["input_sha256"])
    ledger.write_text(json.dumps(theirs) + "\n")
    assert main(_measure(tmp_path, ledger, "run2")) == 0
    statement = json.loads((tmp_path / "run2" / "privacy.json").read_text())
    assert statement["ledger"]["earlier_releases_of_this_input"] == 1
    assert statement["ledger"]["earlier_budget"]["rho"] == pytest.approx(RHO)


def test_a_failed_measure_withdraws_or_keeps_its_reservation(
    tmp_path, monkeypatch, capsys, fast_release
):
    ledger = tmp_path / "ledger.jsonl"
    import postdp.cli.nmf_measure as command

    # fails before the draw: the reservation is withdrawn and counts nothing
    def no_folder(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(command.tempfile, "mkdtemp", no_folder)
    assert main(_measure(tmp_path, ledger)) == 2
    monkeypatch.undo()
    from postdp.mechanisms import _base

    monkeypatch.setattr(_base.NoiseMechanism, "release", lambda self, x: np.asarray(x))
    records = _records(ledger)
    assert [r["status"] for r in records] == ["reserved", "withdrawn"]
    assert _ledger.spent_on(records, records[0]["input_sha256"]).releases == 0

    # fails during the draw: drawn, not published, and it counts
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(postdp.nmf, "measure_by_state", broken)
    assert main(_measure(tmp_path, ledger)) == 2
    records = _records(ledger)
    assert [r["status"] for r in records][2:] == ["reserved", "drawn, not published"]
    spent = _ledger.spent_on(records, records[0]["input_sha256"])
    assert spent.releases == 1 and spent.rho == pytest.approx(RHO)
    capsys.readouterr()


def test_stale_temporaries_of_killed_commands_are_removed_by_the_next_one(tmp_path, capsys):
    # the names postdp gives its temporaries: .<name>.<host>-<pid>.<random>.tmp
    tag = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    dead, alive = _dead_pid(), os.getppid()
    day_old = time.time() - 2 * 24 * 3600
    stale = [
        f".run.{tag}-{dead}.k1.tmp",  # a killed measure's folder
        ".run.abcd_123.tmp",  # an older postdp's, untouched for two days
        f".out.csv.{tag}-{dead}.x1y2z3.tmp",  # a killed release's output ...
        f".out.csv.privacy.json.{tag}-{dead}.q9.tmp",  # ... and statement
    ]
    kept = [
        f".run.{tag}-{alive}.k2.tmp",  # a live process's
        ".run.efgh_456.tmp",  # an older postdp's, recent: it may be running
        f".runs.{tag}-{dead}.k3.tmp",  # another name's
        ".run.notours",
        f".out.csv.{tag}-{dead}.note",
    ]
    for name in stale + kept:
        path = tmp_path / name
        if name.startswith(".run"):
            path.mkdir()
            (path / "part").write_text("x")
        else:
            path.write_text("x")
    os.utime(tmp_path / ".run.abcd_123.tmp", (day_old, day_old))
    study = ["--study", "--seed", "1"]
    assert (
        main(
            [
                "measure",
                "--synthetic",
                "11",
                "--population-scale",
                "0.05",
                *study,
                "--quiet",
                "--output-dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    (tmp_path / "good.csv").write_text(TABLE)
    assert (
        main(
            [
                "release",
                "--input",
                str(tmp_path / "good.csv"),
                "-o",
                str(tmp_path / "out.csv"),
                *study,
            ]
        )
        == 0
    )
    capsys.readouterr()
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & set(stale), names & set(stale)
    assert set(kept) <= names


def test_a_measure_knows_records_in_another_order_or_layout_as_the_same_input(
    tmp_path, capsys, fast_release
):
    import pandas as pd

    from postdp.tables import pl94_schema

    from ..nmf.conftest import small_table
    from .test_nmf_cli import _person_records

    ledger = tmp_path / "ledger.jsonl"

    def earlier(source: Path, run: str) -> int:
        argv = ["measure", "--input", str(source), "--ledger", str(ledger), "--quiet"]
        assert main([*argv, "--output-dir", str(tmp_path / run)]) == 0, capsys.readouterr()
        statement = json.loads((tmp_path / run / "privacy.json").read_text())
        return int(statement["ledger"]["earlier_releases_of_this_input"])

    people = _person_records(small_table(4))
    people.to_parquet(tmp_path / "persons.parquet")
    # the same people: rows shuffled, numbers as numbers, split into a folder by county
    again = people.sample(frac=1.0, random_state=5).reset_index(drop=True)
    for column in ("GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE"):
        again[column] = again[column].astype("int16")
    again["TABTRACTCE"] = again["TABTRACTCE"].astype(int)
    again.to_parquet(tmp_path / "split", partition_cols=["TABBLKCOU"])
    fewer = people.iloc[1:]
    fewer.to_parquet(tmp_path / "fewer.parquet")
    assert earlier(tmp_path / "persons.parquet", "p1") == 0
    assert earlier(tmp_path / "split", "p2") == 1
    assert earlier(tmp_path / "fewer.parquet", "p3") == 0  # one person less: another input
    # block histograms: the wide form and the long form (zeros left out) are one input (the
    # small table's blocks: the District's 16,790 took 4 GB as a long frame)
    t = small_table(5)
    geo = t.geography
    wide = pd.DataFrame(t.dense_cells(), columns=list(pl94_schema().cells))
    wide.insert(0, "geocode", geo.ids[geo.leaves].astype(str))
    wide.to_parquet(tmp_path / "wide.parquet")
    long = wide.melt(id_vars="geocode", var_name="category", value_name="count")
    long[long["count"] > 0].sample(frac=1.0, random_state=1).to_parquet(tmp_path / "long.parquet")
    assert earlier(tmp_path / "wide.parquet", "h1") == 0
    assert earlier(tmp_path / "long.parquet", "h2") == 1


def test_the_privacy_statement_and_the_ledger_name_the_sampler(tmp_path, capsys):
    """A secure measure draws with postdp's exact sampler by default (real draws here) and
    says so, with its version, in the statement, the ledger and the last line."""
    ledger = tmp_path / "ledger.jsonl"
    args = _measure(tmp_path, ledger)
    args.remove("--quiet")
    assert main(args) == 0
    statement = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert statement["sampler"] == f"postdp-exact {postdp.__version__}"
    assert _records(ledger)[-1]["sampler"] == statement["sampler"]
    assert f"secure (postdp-exact {postdp.__version__})" in capsys.readouterr().err


def test_opendp_is_named_when_it_draws(tmp_path, fast_release):
    from postdp.mechanisms.release import opendp_version

    ledger = tmp_path / "ledger.jsonl"
    assert main([*_measure(tmp_path, ledger), "--sampler", "opendp"]) == 0
    statement = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert statement["sampler"] == f"opendp {opendp_version()}"
    assert fast_release  # drawn through the OpenDP route (stood in)


def test_a_study_measure_refuses_a_sampler(tmp_path, capsys):
    args = ["measure", "--synthetic", "11", "--study", "--seed", "1", "--sampler", "opendp"]
    assert main([*args, "--output-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sampler opendp" in err[0]
    assert not (tmp_path / "run").exists()


def _files(run: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(run)): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "privacy.json"
    }


@pytest.mark.processes
def test_a_measure_on_dask_is_the_same_run_ledger_record_and_statement(tmp_path):
    """Two states measured as Dask tasks (--scheduler ADDRESS), cut into county and tract
    tasks (--cut-blocks): on the study path every file is the one-process run's, byte for
    byte (each state and subtree has its own stream, wherever it runs); on the secure path
    (the exact sampler, in the worker) the ledger gets one record and the statement names
    the same sampler as a run in one process."""
    from tests._dask import dask_client

    study = ["measure", "--synthetic", "11,10", "--population-scale", "0.02", "--quiet"]
    study += ["--study", "--seed", "8", "--cut-blocks", "60"]  # county and tract tasks too
    secure = ["measure", "--synthetic", "11", "--population-scale", "0.02", "--quiet"]
    with dask_client() as client:
        address = ["--scheduler", client.scheduler.address]
        assert main([*study, *address, "--output-dir", str(tmp_path / "dask")]) == 0
        ledger = tmp_path / "ledger.jsonl"
        secure += ["--ledger", str(ledger)]
        assert main([*secure, *address, "--output-dir", str(tmp_path / "sd")]) == 0
    assert main([*study, "--output-dir", str(tmp_path / "here")]) == 0
    assert _files(tmp_path / "dask") == _files(tmp_path / "here")
    cut = [n for n in _files(tmp_path / "here") if Path(n).name != "part-0.parquet"]
    assert len(cut) > 4  # the county and tract files of the cut subtrees
    assert main([*secure, "--output-dir", str(tmp_path / "sh")]) == 0
    records = _records(ledger)
    assert [r["status"] for r in records] == ["reserved", "published"] * 2
    assert records[1]["sampler"] == records[3]["sampler"] != ""
    a, b = (json.loads((tmp_path / r / "privacy.json").read_text()) for r in ("sd", "sh"))
    assert b["ledger"]["earlier_releases_of_this_input"] == 1  # the Dask run's one record
    for s in (a, b):
        del s["output"], s["time"], s["ledger"]
    assert a == b
    assert a["sampler"].startswith("postdp-exact ")
    assert _files(tmp_path / "sd") != _files(tmp_path / "sh")  # fresh noise, same layout
    assert _files(tmp_path / "sd").keys() == _files(tmp_path / "sh").keys()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--sampler", "numpy"], "--sampler"),
        (["--scheduler", "local", "--workers", "0"], "--workers"),
        (["--scheduler", "tcp://10.0.0.1:8786"], "--scheduler 'tcp://10.0.0.1:8786'"),
    ],
)
def test_bad_sampler_and_scheduler_options_draw_nothing(
    tmp_path, monkeypatch, capsys, fast_release, extra, named
):
    """One line naming the flag, exit 2, no run and nothing drawn; an unreachable scheduler
    (its refusal stood in, not Dask's ten seconds of retries) is met before the draw, so the
    reservation is withdrawn, not counted."""
    distributed = pytest.importorskip("dask.distributed")

    def refused(*args, **kwargs):
        raise OSError("Timed out trying to connect to tcp://10.0.0.1:8786")

    monkeypatch.setattr(distributed, "Client", refused)
    ledger = tmp_path / "ledger.jsonl"
    assert main([*_measure(tmp_path, ledger), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run").exists() and not fast_release
    statuses = [r["status"] for r in _records(ledger)] if ledger.exists() else []
    assert statuses in ([], ["reserved", "withdrawn"])

"""The release ledger follows the input, serialises concurrent releases, and a release is
all or nothing: recorded and in place, or neither, whatever fails or interrupts it."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from postdp.cli import main
from postdp.privacy import _ledger
from tests.cli._helpers import TABLE, postdp_command

pytest.importorskip("opendp")


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_default_ledger_is_per_user_and_found_wherever_the_output_goes(
    tmp_path, monkeypatch, capsys
):
    # the scenario: two releases into L/, a third into M/; no --ledger given
    monkeypatch.delenv("POSTDP_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "good.csv").write_text(TABLE)
    base = ["release", "--input", str(tmp_path / "good.csv"), "--epsilon", "1"]
    for out in ("L/a.csv", "L/b.csv"):
        assert main([*base, "-o", str(tmp_path / out)]) == 0
    capsys.readouterr()
    ledger = tmp_path / "xdg" / "postdp" / "ledger.jsonl"
    assert _ledger.default_path() == ledger.resolve()
    assert len(_lines(ledger)) == 2
    # the cap sees both earlier releases (3 + 3 + 3 = 9 > 8): refused, nothing written
    assert main([*base, "-o", str(tmp_path / "M/c.csv"), "--budget-cap", "8"]) == 2
    err = capsys.readouterr().err
    assert "record 2 earlier release(s) of this input" in err and "epsilon = 9" in err
    assert not (tmp_path / "M").exists() and len(_lines(ledger)) == 2
    assert main([*base, "-o", str(tmp_path / "M/c.csv"), "--budget-cap", "9"]) == 0
    out = capsys.readouterr().out
    assert "2 earlier release(s) of this input; cumulative budget now epsilon = 9" in out
    statement = json.loads((tmp_path / "M/c.csv.privacy.json").read_text())
    assert statement["ledger"]["path"] == str(ledger.resolve())
    assert statement["ledger"]["earlier_releases_of_this_input"] == 2
    assert statement["ledger"]["earlier_budget"]["epsilon"] == pytest.approx(6)
    assert len(_lines(ledger)) == 3
    # POSTDP_LEDGER names another ledger, --ledger overrides both
    monkeypatch.setenv("POSTDP_LEDGER", str(tmp_path / "team.jsonl"))
    assert _ledger.default_path() == (tmp_path / "team.jsonl").resolve()


def test_an_older_ledger_beside_the_output_is_still_counted(tmp_path, capsys):
    (tmp_path / "good.csv").write_text(TABLE)
    base = ["release", "--input", str(tmp_path / "good.csv"), "--epsilon", "1"]
    old = tmp_path / "old"
    assert main([*base, "-o", str(old / "a.csv"), "--ledger", str(old / _ledger.LEDGER_NAME)]) == 0
    capsys.readouterr()
    assert main([*base, "-o", str(old / "b.csv"), "--budget-cap", "5"]) == 2
    assert "and the older ledger" in (err := capsys.readouterr().err)
    assert "record 1 earlier release(s)" in err
    assert main([*base, "-o", str(old / "b.csv")]) == 0
    statement = json.loads((old / "b.csv.privacy.json").read_text())
    assert statement["ledger"]["also_read"] == [str(old / _ledger.LEDGER_NAME)]


def _release_args(folder: Path, out: str, *extra: str) -> list[str]:
    return ["release", "--input", str(folder / "good.csv"), "-o", str(folder / out), *extra]


@pytest.mark.processes
def test_concurrent_releases_cannot_pass_the_budget_cap(tmp_path):
    # Two releases of epsilon 3 each against a cap of 4, started together: the ledger's lock
    # serialises them, so exactly one is published and the other is refused by the cap.
    (tmp_path / "good.csv").write_text(TABLE)
    env = {**os.environ, "POSTDP_LEDGER": str(tmp_path / "ledger.jsonl")}
    for round_ in range(3):
        procs = [
            subprocess.Popen(
                [
                    *postdp_command(),
                    *_release_args(tmp_path, f"r{round_}/{k}.csv", "--epsilon", "1"),
                    "--budget-cap",
                    str(4 + 3 * round_),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            for k in range(2)
        ]
        results = [(p.returncode, p.communicate(timeout=120)[1].decode()) for p in procs]
        results = [(p.returncode, err) for p, (_, err) in zip(procs, results, strict=True)]
        codes = sorted(code for code, _ in results)
        assert codes == [0, 2], results
        refused = next(err for code, err in results if code == 2)
        assert "--budget-cap" in refused
        # each round adds exactly one release of epsilon 3 (each cap leaves room for one)
        records = _lines(tmp_path / "ledger.jsonl")
        assert len(records) == round_ + 1
        written = list((tmp_path / f"r{round_}").glob("*.csv"))
        assert len(written) == 1


@pytest.mark.processes
def test_concurrent_releases_to_one_absent_output_never_replace_each_other(tmp_path):
    (tmp_path / "good.csv").write_text(TABLE)
    for round_ in range(3):
        out = f"same{round_}.csv"
        procs = [
            subprocess.Popen(
                [*postdp_command(), *_release_args(tmp_path, out, "--study", "--seed", str(k))],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for k in range(2)
        ]
        results = [(p.returncode, p.communicate(timeout=120)[1].decode()) for p in procs]
        results = [(p.returncode, err) for p, (_, err) in zip(procs, results, strict=True)]
        assert sorted(code for code, _ in results) == [0, 2], results
        assert not list(tmp_path.glob(f".{out}*"))  # no temporaries left


def test_an_output_that_appears_after_the_checks_is_not_replaced(tmp_path, monkeypatch):
    # another process creates the output while this release draws: the release must not
    # replace it, must take back its ledger line and leave no privacy statement of its own
    import postdp.tables

    (tmp_path / "good.csv").write_text(TABLE)
    out = tmp_path / "out.csv"
    real = postdp.tables.add_noise

    def draw_while_another_writes(*args, **kwargs):
        out.write_text("another process's release\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(postdp.tables, "add_noise", draw_while_another_writes)
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("")
    assert main(_release_args(tmp_path, "out.csv", "--ledger", str(ledger))) == 2
    assert out.read_text() == "another process's release\n"
    assert not (tmp_path / "out.csv.privacy.json").exists()
    assert ledger.read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "good.csv",
        "ledger.jsonl",
        "out.csv",
    ]


def test_a_failed_ledger_write_leaves_nothing_changed(tmp_path, monkeypatch, capsys):
    # disk full where the ledger is: "nothing was published" must be true of every file,
    # the earlier release's privacy statement included (with --overwrite)
    (tmp_path / "good.csv").write_text(TABLE)
    (tmp_path / "out.csv").write_text("earlier release\n")
    (tmp_path / "out.csv.privacy.json").write_text('{"earlier": true}\n')
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("")

    def disk_full(handle, line):
        handle.write(line[:10])  # a partial line, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_ledger, "_write_line", disk_full)
    argv = _release_args(tmp_path, "out.csv", "--ledger", str(ledger), "--overwrite")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "could not record the release" in err and "nothing was published" in err
    assert (tmp_path / "out.csv").read_text() == "earlier release\n"
    assert (tmp_path / "out.csv.privacy.json").read_text() == '{"earlier": true}\n'
    assert ledger.read_text() == ""
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_interrupt_scan_over_the_final_phase(tmp_path, capsys):
    """Ctrl-C at every line executed from the start of the write to the end of the command:
    what the command reports must match the disk (output, statement and ledger)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")
    (tmp_path / "good.csv").write_text(TABLE)
    out, statement = tmp_path / "out.csv", tmp_path / "out.csv.privacy.json"
    ledger = tmp_path / "ledger.jsonl"
    argv = _release_args(tmp_path, "out.csv", "--ledger", str(ledger), "--overwrite")
    cli = str(Path(_ledger.__file__).parents[1])  # the package: cli, privacy, _files
    from postdp.cli import _ledger as cli_ledger

    publish = cli_ledger.publish

    def run(stop_at: int | None) -> tuple[int, int]:
        """Run once, interrupting at the stop_at-th line after publish() starts; return
        the status and the number of lines counted."""
        count = [0]

        def local(frame, event, arg):
            if stop_at is not None and count[0] >= stop_at:
                return None  # interrupted: the rest runs untraced
            if event == "line":
                count[0] += 1
                if count[0] == stop_at:
                    sys.settrace(None)
                    os.kill(os.getpid(), signal.SIGINT)
            return local

        def tracer(frame, event, arg):
            return local if frame.f_code.co_filename.startswith(cli) else None

        def traced(*args, **kwargs):  # the trace starts with publish(): nothing before it
            sys.settrace(tracer)  # pays for tracing (the suite's slowest test without this)
            return publish(*args, **kwargs)

        cli_ledger.publish = traced
        try:
            status = main(argv)
        finally:
            sys.settrace(None)
            cli_ledger.publish = publish
        return status, count[0]

    status, total = run(None)
    assert status == 0 and total > 20
    capsys.readouterr()
    outcomes = set()
    for stop in range(1, total + 1):
        out.write_text("earlier release\n")
        statement.write_text('{"earlier": true}\n')
        before = len(_lines(ledger))
        status, _ = run(stop)
        err = capsys.readouterr().err
        assert status in (0, 130), err
        records = _lines(ledger)
        if status == 130:
            assert err.count("\n") == 1 and err.startswith("postdp: interrupted while"), err
            written = err.split("written: ", 1)[1].split(";")[0]
            said_written = str(out) in written
        else:
            said_written = True
        if said_written:  # in place, with its statement and its one ledger line
            assert len(records) == before + 1
            assert pd.read_csv(out)["path"].eq("secure").all()
            assert (
                json.loads(statement.read_text())["output_sha256"] == (records[-1]["output_sha256"])
            )
        else:  # nothing of it anywhere
            assert out.read_text() == "earlier release\n"
            assert statement.read_text() == '{"earlier": true}\n'
            assert len(records) == before
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
        outcomes.add((status, said_written))
    assert {(130, False), (130, True)} <= outcomes

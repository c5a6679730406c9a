"""The release discipline of the command line (issue 10): nothing drawn before every check,
outputs atomic, Ctrl-C safe, releases recorded in a ledger, study draws unmistakable."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import resource
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from postdp.cli import main
from tests.cli._helpers import (
    TABLE,
    TRUE_COUNTS,
    mentions_true_count,
    postdp_command,
    run_postdp_process,
    snapshot,
    write_inputs,
)

# -- nothing reaches a sampler before every check has passed ------------------------------
FAILING_LATE = [
    ["--budget-cap", "2"],  # needs the ledger and the budget
    ["--postprocess", "project,modified:T=abc"],
    ["--postprocess", "project", "--public", "01"],  # derived public node
    ["--mechanism", "laplace", "--epsilon", "1,1,1e200"],  # only the last level is bad
    ["--ledger", "ledger_bad.jsonl"],
    ["-o", "existing.csv"],
    ["-o", "t.csv", "--overwrite"],
    ["--keep", "nope"],
]


@pytest.mark.parametrize("extra", FAILING_LATE, ids=lambda e: " ".join(e))
def test_a_failing_option_never_reaches_the_sampler(extra, spy, tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["release", "--input", "t.csv", "-o", "out.csv", *extra]) == 2
    assert spy == []
    assert snapshot(tmp_path) == before
    assert capsys.readouterr().err.count("\n") == 1


def test_the_spy_sees_a_valid_release(spy, tmp_path, monkeypatch, capsys):
    """Control: the same spy does see the draws of a release that passes its checks."""
    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["release", "--input", "t.csv", "-o", "out.csv"]) == 0
    assert spy == ["release"] * 3  # one OpenDP call per level
    assert main(["release", "--input", "t.csv", "-o", "s.csv", "--study", "--seed", "1"]) == 0
    assert spy.count("study") == 3


def test_an_interrupt_that_a_library_turns_into_its_own_error_still_exits_130(
    tmp_path, monkeypatch, capsys
):
    """pandas' C parser reports Ctrl-C inside its read callback as a parse error."""
    import os

    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    real_read_csv = pd.read_csv

    def interrupted_read_csv(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here and raises
        except KeyboardInterrupt:
            raise pd.errors.ParserError("Calling read(nbytes) on source failed") from None
        return real_read_csv(*args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", interrupted_read_csv)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background
    assert main(["release", "--input", "t.csv", "-o", "out.csv"]) == 130
    err = capsys.readouterr().err
    assert "interrupted while" in err and "readable" not in err
    assert not (tmp_path / "out.csv").exists()
    # the handler is put back: whatever handled SIGINT before is in force again
    assert signal.getsignal(signal.SIGINT) is before


# -- random malformed inputs -----------------------------------------------------------------
_CORRUPTIONS = {
    "count-text": lambda t: t.replace("01001,01,7919", "01001,01,seven"),
    "count-float": lambda t: t.replace("01001,01,7919", "01001,01,7919.25"),
    "count-empty": lambda t: t.replace("01001,01,7919", "01001,01,"),
    "count-negative": lambda t: t.replace("01001,01,7919", "01001,01,-1"),
    "sum-off": lambda t: t.replace("02,US,96810", "02,US,96811"),
    "duplicate": lambda t: t + "02,US,0,Dup\n",
    "orphan": lambda t: t + "9,nowhere,0,Lost\n",
    "two-roots": lambda t: t + "XX,,0,Other\n",
    "cycle": lambda t: t.replace("US,,104729", "US,01001,104729"),
    "no-count-column": lambda t: t.replace("count", "total", 1),
    "ragged": lambda t: t + "02099,02,0,a,b,c,d\n",
    "truncated": lambda t: "id,parent,cou",
    "binary": lambda t: "\x00\x01\x02",
}
_BAD_OPTIONS = [
    ["--epsilon", "0"],
    ["--epsilon", "1e-30"],
    ["--epsilon", "1e300"],
    ["--epsilon", ""],
    ["--epsilon", "1,2"],
    ["--rho", "1"],
    ["--sensitivity", "-2"],
    ["--delta", "5"],
    ["--postprocess", "nope"],
    ["--postprocess", "modified:T=x"],
    ["--public", "ghost"],
    ["--keep", "nothing"],
    ["--seed", "7"],
    ["--budget-cap", "0.5"],
]


@settings(max_examples=40, deadline=None)
@given(
    corruption=st.sampled_from(sorted(_CORRUPTIONS)),
    option=st.sampled_from(_BAD_OPTIONS),
    corrupt_file=st.booleans(),
    position=st.integers(0, 1),
)
def test_random_malformed_tables_and_options_are_rejected_cleanly(
    corruption, option, corrupt_file, position
):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        text = _CORRUPTIONS[corruption](TABLE) if corrupt_file else TABLE
        (root / "in.csv").write_text(text)
        (root / "old.csv").write_text("an earlier release\n")
        before = snapshot(root)
        base = ["release", "--input", str(root / "in.csv"), "-o", str(root / "old.csv")]
        argv = [*base, *option] if position else [*base[:1], *option, *base[1:]]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
        message = err.getvalue()
        assert status == 2
        assert message.count("\n") == 1 and "Traceback" not in message
        assert not any(count in message for count in TRUE_COUNTS)
        assert snapshot(root) == before


# -- the ledger ------------------------------------------------------------------------------
def test_ledger_records_each_release_and_caps_the_budget(tmp_path, capsys):
    write_inputs(tmp_path)
    table = tmp_path / "t.csv"
    first, second = tmp_path / "r1.csv", tmp_path / "r2.csv"
    assert main(["release", "--input", str(table), "-o", str(first)]) == 0
    assert "0 earlier release(s)" in capsys.readouterr().out
    argv = ["release", "--input", str(table), "--epsilon", "0.5", "-o", str(second)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 earlier release(s) of this input; cumulative budget now epsilon = 4.5" in out
    ledger = tmp_path / "postdp-ledger.jsonl"
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(records) == 2
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    assert {r["input_sha256"] for r in records} == {digest}
    assert records[1]["budget"] == {"epsilon": 1.5, "rho": 0.0}
    assert [lvl["epsilon"] for lvl in records[1]["levels"]] == [0.5, 0.5, 0.5]
    assert records[1]["output_sha256"] == hashlib.sha256(second.read_bytes()).hexdigest()
    assert records[0]["opendp_version"] and records[0]["postdp_version"]
    assert not mentions_true_count(ledger.read_text())
    # a third release would pass the cap: refused before drawing, nothing written
    third = tmp_path / "r3.csv"
    assert main([*argv[:-1], str(third), "--budget-cap", "5"]) == 2
    assert "--budget-cap 5" in capsys.readouterr().err
    assert not third.exists() and len(ledger.read_text().splitlines()) == 2
    # another ledger knows nothing of them (away from the folder of the older default
    # ledger file, postdp-ledger.jsonl beside an output, which is always counted)
    other = tmp_path / "project" / "other.jsonl"
    elsewhere = tmp_path / "project" / "r3.csv"
    assert main([*argv[:-1], str(elsewhere), "--budget-cap", "5", "--ledger", str(other)]) == 0
    assert len(other.read_text().splitlines()) == 1
    # beside the older ledger it is counted even with --ledger
    assert main([*argv[:-1], str(third), "--budget-cap", "5", "--ledger", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"and the older ledger {str(tmp_path / 'postdp-ledger.jsonl')!r} record 3" in err
    assert not third.exists()


def test_failed_write_leaves_the_old_file_and_no_ledger_line(tmp_path):
    """A write that fails after the draw (here: the file size limit, like a full disk) is one
    line, exit 2; the earlier output is intact and the release is not recorded."""
    write_inputs(tmp_path)
    out = tmp_path / "existing.csv"
    before = out.read_bytes()

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (60, 60))

    done = subprocess.run(
        [*postdp_command(), "release", "--input", "t.csv", "-o", "existing.csv", "--overwrite"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "could not write" in done.stderr
    assert out.read_bytes() == before
    assert not (tmp_path / "postdp-ledger.jsonl").exists()
    assert not list(tmp_path.glob(".existing.csv.*"))


# -- study draws are unmistakable; inputs are read as text ---------------------------------
def test_study_and_secure_files_say_which_they_are(tmp_path, capsys):
    write_inputs(tmp_path)
    table = str(tmp_path / "t.csv")
    study, secure = tmp_path / "study.csv", tmp_path / "secure.csv"
    assert main(["release", "--input", table, "--study", "--seed", "2", "-o", str(study)]) == 0
    said = capsys.readouterr().out
    assert "NOT a private release" in said and "privacy budget spent" not in said
    assert main(["release", "--input", table, "-o", str(secure)]) == 0
    assert "privacy budget spent: epsilon = 3" in capsys.readouterr().out
    assert set(pd.read_csv(study)["path"]) == {"study"}
    assert set(pd.read_csv(secure)["path"]) == {"secure"}
    assert "true_count" not in pd.read_csv(secure).columns


def test_ids_are_text_encodings_and_bom(tmp_path, capsys):
    path = tmp_path / "na.csv"
    path.write_text("id,parent,count\nNA,,5\nNone,NA,2\nnull,NA,3\n")
    out = tmp_path / "o.csv"
    assert main(["release", "--input", str(path), "--study", "-o", str(out)]) == 0
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert frame["id"].tolist() == ["NA", "None", "null"]
    assert frame["parent"].tolist() == ["", "NA", "NA"]
    write_inputs(tmp_path)
    latin = tmp_path / "latin-out.csv"
    argv = ["release", "--input", str(tmp_path / "latin.csv"), "--encoding", "latin-1"]
    assert main([*argv, "--keep", "name", "--study", "-o", str(latin)]) == 0
    assert "Doña Ana" in latin.read_text(encoding="utf-8")
    bom = tmp_path / "bom-out.csv"
    argv = ["release", "--input", str(tmp_path / "bom.csv"), "--study", "-o", str(bom)]
    assert main(argv) == 0
    assert pd.read_csv(bom, dtype=str)["id"].tolist()[:2] == ["US", "01"]


def test_derived_public_nodes_are_named_and_allowed_on_request(tmp_path, capsys):
    write_inputs(tmp_path)
    out = tmp_path / "o.csv"
    argv = ["release", "--input", str(tmp_path / "t.csv"), "--study", "-o", str(out)]
    argv += ["--postprocess", "project", "--public", "01", "--allow-derived-public"]
    assert main(argv) == 0
    assert "also published exactly (derived from --public): 01001" in capsys.readouterr().out
    released = pd.read_csv(out, dtype={"id": str}).set_index("id")["released_count"]
    assert released["01001"] == pytest.approx(released["01"])


def test_audit_replaces_only_its_own_folder_and_leaves_no_stale_files(tmp_path, capsys):
    write_inputs(tmp_path)
    folder = tmp_path / "aud"
    argv = ["audit", "--input", str(tmp_path / "t.csv"), "--draws", "20", "--quiet"]
    argv += ["--no-figures", "--output-dir", str(folder)]
    assert main([*argv, "--shifts", "0,5"]) == 0
    assert (folder / "shifted.csv").exists()
    assert main([*argv, "--shifts", ""]) == 2  # exists: needs --overwrite
    assert main([*argv, "--shifts", "", "--overwrite"]) == 0
    assert not (folder / "shifted.csv").exists()  # no stale file from the earlier design
    manifest = json.loads((folder / "postdp-manifest.json").read_text())
    assert sorted(manifest["files"]) == sorted(
        p.name for p in folder.iterdir() if p.name != "postdp-manifest.json"
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".aud")] == []


# -- Ctrl-C ------------------------------------------------------------------------------------
def _big_table(path: Path) -> int:
    """A 3-level table of about 240,000 nodes (a write that takes a while)."""
    states, per_state = 400, 600
    ids = ["US"] + [f"S{s}" for s in range(states)]
    parents = [""] + ["US"] * states
    leaf_ids = [f"S{s}L{k}" for s in range(states) for k in range(per_state)]
    leaf_parents = [f"S{s}" for s in range(states) for _ in range(per_state)]
    counts_leaf = np.arange(len(leaf_ids)) % 97
    counts_state = counts_leaf.reshape(states, per_state).sum(axis=1)
    frame = pd.DataFrame(
        {
            "id": ids + leaf_ids,
            "parent": parents + leaf_parents,
            "count": [int(counts_state.sum()), *counts_state.tolist(), *counts_leaf.tolist()],
        }
    )
    frame.to_csv(path, index=False)
    return len(frame)


def _interrupt(args, cwd, delay):
    proc = subprocess.Popen(
        [*postdp_command(), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.slow
def test_sigint_during_release_never_leaves_a_partial_output(tmp_path):
    n = _big_table(tmp_path / "big.csv")
    out = tmp_path / "out.csv"
    previous = b"an earlier release\n"
    args = ["release", "--input", "big.csv", "--study", "--seed", "1", "-o", "out.csv"]
    args += ["--overwrite", "--postprocess", "project"]
    start = time.perf_counter()
    full = run_postdp_process(args, tmp_path)
    elapsed = time.perf_counter() - start
    assert full.returncode == 0, full.stderr
    statuses = []
    for fraction in (0.15, 0.45, 0.75, 0.95):
        out.write_bytes(previous)
        status, err = _interrupt(args, tmp_path, max(0.25, fraction * elapsed))
        statuses.append(status)
        # -2: the signal came after the run had finished, while the interpreter was
        # shutting down (its handlers already reset); the output must then be complete
        assert status in (0, 130, -signal.SIGINT), err
        written = err.split("written: ", 1)[-1].split(";")[0] if status == 130 else ""
        if status == 130 and "out.csv" not in written:
            assert err.count("\n") == 1 and err.startswith("postdp: interrupted while"), err
            assert out.read_bytes() == previous
        else:  # finished, or interrupted after the output was moved into place (and said so)
            frame = pd.read_csv(out)
            assert len(frame) == n and frame["path"].eq("study").all()
        assert not list(tmp_path.glob(".out.csv.*"))
    assert 130 in statuses


@pytest.mark.slow
def test_sigint_during_audit_keeps_the_old_folder_or_writes_a_complete_one(tmp_path):
    args = ["audit", "--draws", "600", "--shifts", "0,10", "--no-figures", "--quiet"]
    args += ["--output-dir", "aud"]
    start = time.perf_counter()
    first = run_postdp_process(args, tmp_path)
    elapsed = time.perf_counter() - start
    assert first.returncode == 0, first.stderr
    old = snapshot(tmp_path / "aud")
    statuses = []
    for fraction in (0.15, 0.5, 0.85):
        status, err = _interrupt(
            [*args, "--overwrite", "--seed", "5"], tmp_path, max(0.25, fraction * elapsed)
        )
        statuses.append(status)
        assert status in (0, 130, -signal.SIGINT), err  # -2: after the run (see above)
        now = snapshot(tmp_path / "aud")
        if status == 130:
            assert err.count("\n") == 1 and err.startswith("postdp: interrupted while"), err
            # a Ctrl-C before the folder's swap keeps the old one; one that lands after the
            # swap (while the summary prints) says so, and the new folder is complete
            if "written: nothing" in err:
                assert now == old, err
            else:
                assert "aud" in err.split("written:")[1], err
        old = now  # what the next interrupted run must keep (this one may have replaced it)
        manifest = json.loads((tmp_path / "aud" / "postdp-manifest.json").read_text())
        assert all((tmp_path / "aud" / name).exists() for name in manifest["files"])
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".aud")] == []
    assert 130 in statuses


def test_an_audit_file_is_marked_as_holding_true_counts(tmp_path, monkeypatch, capsys):
    """--audit writes the true counts: every row says so, the statement says so, and a
    warning is printed (issue 22: rows said path = secure with no word)."""
    import json as _json

    import pandas as _pd

    from postdp.cli import main as _main

    monkeypatch.chdir(tmp_path)
    assert _main(["release", "--epsilon", "1", "--audit", "-o", "a.csv"]) == 0
    err = capsys.readouterr().err
    assert "holds the TRUE counts" in err and "never publish it" in err
    rows = _pd.read_csv(tmp_path / "a.csv", dtype={"id": str, "parent": str})
    assert set(rows["path"]) == {"secure+audit"} and "true_count" in rows
    assert _json.loads((tmp_path / "a.csv.privacy.json").read_text())["contains_true_counts"]
    args = ["release", "--study", "--seed", "1", "--epsilon", "1", "--audit", "-o", "s.csv"]
    assert _main(args) == 0
    assert set(_pd.read_csv(tmp_path / "s.csv")["path"]) == {"study+audit"}


def test_every_output_follows_the_umask(tmp_path, monkeypatch):
    """One mode policy for files and folders of every command: 0666 / 0777 less the umask
    (issue 22: audit and fairness folders were 0700, release folders 0755)."""
    import os as _os
    import stat as _stat

    from postdp.cli import main as _main

    monkeypatch.chdir(tmp_path)
    previous = _os.umask(0o027)
    try:
        assert _main(["release", "--epsilon", "1", "-o", "r/out.csv"]) == 0
        audit = ["audit", "--draws", "10", "--no-figures", "--quiet", "--output-dir", "A"]
        assert _main([*audit, "--epsilon", "1"]) == 0
    finally:
        _os.umask(previous)

    def mode(path):
        return _stat.S_IMODE((tmp_path / path).stat().st_mode)

    assert mode("r") == 0o750 and mode("A") == 0o750
    assert mode("r/out.csv") == 0o640 and mode("r/out.csv.privacy.json") == 0o640
    assert all(mode(p.relative_to(tmp_path)) == 0o640 for p in (tmp_path / "A").iterdir())

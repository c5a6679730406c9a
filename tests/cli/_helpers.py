"""Files and helpers shared by the command-line safety tests."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path

#: Distinctive true counts: a message that contains one of them has leaked a count.
TRUE_COUNTS = ("104729", "7919", "96810")

TABLE = (
    "id,parent,count,name\n"
    "US,,104729,Nation\n"
    "01,US,7919,Alpha\n"
    "02,US,96810,Beta\n"
    "01001,01,7919,Alpha One\n"
    "02013,02,96810,Beta One\n"
)


def mentions_true_count(text: str) -> bool:
    """Whether a true count appears in ``text`` as a number of its own (hex digests, whose
    random digits can hold any short run, are skipped)."""
    import re

    without_digests = re.sub(r"[0-9a-f]{64}", "", text)
    return any(token in TRUE_COUNTS for token in re.findall(r"\d+", without_digests))


def postdp_command() -> list[str]:
    """The installed ``postdp`` console script, or ``python -m postdp`` without one."""
    script = Path(sys.executable).with_name("postdp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "postdp"]


def write_inputs(folder: Path) -> None:
    """A valid table, malformed variants of it, an existing output and some folders."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.csv").write_text(TABLE)
    (folder / "latin.csv").write_bytes(TABLE.replace("Alpha One", "Doña Ana").encode("latin-1"))
    (folder / "bom.csv").write_bytes(TABLE.encode("utf-8-sig"))
    variants = {
        "off.csv": TABLE.replace("US,,104729", "US,,104730"),
        "big.csv": TABLE.replace("104729", "10000000000000000000"),
        "big52.csv": TABLE.replace("104729", str(2**52)),
        "frac.csv": TABLE.replace("01001,01,7919", "01001,01,7919.5"),
        "neg.csv": TABLE.replace("01001,01,7919", "01001,01,-7919"),
        "nan.csv": TABLE.replace("01001,01,7919", "01001,01,NaN"),
        "dup.csv": TABLE + "01001,01,0,Again\n",
        "orphan.csv": TABLE + "03001,03,0,Nowhere\n",
        "noroot.csv": TABLE.replace("US,,104729", "US,02013,104729"),
        "ragged.csv": TABLE + "02014,02,1,x,y,z\n",
        "emptyid.csv": TABLE + ",02,0,No id\n",
        "header.csv": "id,parent,count,name\n",
    }
    for name, text in variants.items():
        (folder / name).write_text(text)
    (folder / "empty.csv").write_bytes(b"")
    (folder / "existing.csv").write_text("an earlier release\n")
    (folder / "outdir").mkdir(exist_ok=True)
    (folder / "notmine").mkdir(exist_ok=True)
    (folder / "notmine" / "thesis.tex").write_text("not postdp's\n")
    (folder / "prev").mkdir(exist_ok=True)
    (folder / "prev" / "audit.csv").write_text("id\nUS\n")
    (folder / "prev" / "postdp-manifest.json").write_text('{"files": ["audit.csv"]}\n')
    (folder / "ledger_bad.jsonl").write_text("this is not json\n")


def snapshot(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (and every folder, as '<dir>')."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder)] = "<dir>"
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, folder)] = hashlib.sha256(handle.read()).hexdigest()
    return out


def run_postdp(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``postdp.cli.main`` with ``args`` in this process, as the console script would
    run in ``cwd``: its standard output and error captured, its exit status returned.

    It stands in for a fresh ``postdp`` process (which pays for importing numpy, pandas and
    scipy each time) wherever a test checks what a command says, writes and returns; the
    tests of signals, concurrent commands and resource limits use :func:`run_postdp_process`.
    Like the process: the working folder is ``cwd``, Python's warnings start ignored (the
    command's own handler then prints them as one line, as in a process), a ledger of the
    case's folder stands in for the user's when no test has set one, and an uncaught
    exception prints its traceback and gives status 1. Not thread-safe (the working folder
    and the standard streams are the process's): run cases one after another.
    """
    from postdp.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    ledger = os.environ.get("POSTDP_LEDGER")
    if ledger is None:  # never the user's own ledger (see run_postdp_process)
        os.environ["POSTDP_LEDGER"] = str(Path(cwd) / "postdp-ledger.jsonl")
    try:
        os.chdir(cwd)
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            try:
                status = main(list(args))
            except SystemExit as stop:  # as the interpreter reports sys.exit(...)
                if stop.code is not None and not isinstance(stop.code, int):
                    print(stop.code, file=sys.stderr)
                status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
            except Exception:
                traceback.print_exc()
                status = 1
    finally:
        os.chdir(here)
        if ledger is None:
            del os.environ["POSTDP_LEDGER"]
    return subprocess.CompletedProcess(
        ["postdp", *args], status, stdout=out.getvalue(), stderr=err.getvalue()
    )


def run_postdp_process(
    args: Sequence[str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed entry point with ``args`` in ``cwd``, as a real process."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    # never the user's own ledger, even from module-scoped fixtures (run before the
    # per-test one of conftest.py): a ledger of the case's folder
    env.setdefault("POSTDP_LEDGER", str(Path(cwd) / "postdp-ledger.jsonl"))
    return subprocess.run(
        [*postdp_command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def copy_inputs(source: Path, target: Path) -> Path:
    """A private copy of the input folder for one case."""
    shutil.copytree(source, target)
    return target

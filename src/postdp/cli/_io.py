"""Reading inputs strictly and writing outputs atomically (the command line's file layer).

The order every writing command follows: read and validate the inputs, check every output
path (creatable, writable, not an input, not there already unless ``--overwrite``), draw,
then write each file to a temporary name in its own folder and ``os.replace`` it into place
(a folder output is filled under a temporary name, its manifest written last, then renamed).
An interrupted or failed write removes its temporary files and leaves what was there before.
The atomic writes themselves, the temporaries' names and the removal of those that killed
commands left are :mod:`postdp._files`', shared with the library.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from postdp._files import (
    atomic_file,
    current_umask,
    remove_stale_temporaries,
    sigint_held,
    temporary_prefix,
)
from postdp._files import probe as _probe
from postdp.cli._options import CliError

__all__ = [
    "MANIFEST",
    "OutputDir",
    "RunState",
    "check_output_dir",
    "check_output_file",
    "read_table",
]

#: Written last into every output folder; a folder without it was not written by postdp.
MANIFEST = "postdp-manifest.json"


@dataclass
class RunState:
    """What a command has done so far, for the line printed on Ctrl-C."""

    phase: str = "starting"
    written: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    interrupted: bool = False
    cleanup: list[Callable[[], None]] = field(default_factory=list)  # run when the command ends

    def close(self) -> None:
        """Run the cleanups (e.g. let a ledger lock go), last taken first; Ctrl-C waits."""
        with sigint_held():
            while self.cleanup:
                self.cleanup[-1]()
                self.cleanup.pop()

    def written_now(self, path: str) -> None:
        """Record ``path`` as complete (it left the pending list)."""
        self.pending = [p for p in self.pending if p != path]
        self.written.append(path)

    def describe(self) -> str:
        done = ", ".join(self.written) if self.written else "nothing"
        text = f"interrupted while {self.phase}; written: {done}"
        if self.pending:
            text += f"; not written (earlier files left as they were): {', '.join(self.pending)}"
        return text


# -- input --------------------------------------------------------------------------------
def read_text(path_text: str, flag: str, encoding: str) -> tuple[str, Path, str]:
    """The decoded text of an input file, its resolved path and its SHA-256."""
    path = Path(path_text).expanduser()
    if not path.exists():
        raise CliError(f"{flag} {path_text!r}: no such file")
    if not path.is_file():
        raise CliError(f"{flag} {path_text!r}: not a regular file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CliError(f"{flag} {path_text!r}: cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        shown = "utf-8" if encoding == "utf-8-sig" else encoding
        raise CliError(
            f"{flag} {path_text!r}: not valid {shown} text (byte {exc.start}); give its "
            "encoding with --encoding, e.g. --encoding latin-1"
        ) from None
    return text, path.resolve(), hashlib.sha256(raw).hexdigest()


def read_table(path_text: str, flag: str, encoding: str) -> tuple[Any, Path, str]:
    """A CSV read with every column as text ('01' keeps its zero, 'NA' is not missing)."""
    import pandas as pd

    text, path, digest = read_text(path_text, flag, encoding)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(f"{flag} {path_text!r}: not a readable CSV table ({first})") from None
    if frame.empty:
        raise CliError(f"{flag} {path_text!r}: the table has no rows")
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame, path, digest


_TOO_LARGE = "is 2**52 (about 4.5e15) or more, more than postdp releases exactly"


def parse_counts(column: Any, ids: Sequence[str], *, integers: bool, flag: str, name: str) -> Any:
    """Counts from a text column, strictly: whole numbers for integer mechanisms, finite and
    nonnegative always. Messages name the column, row and id, never a count."""
    import numpy as np
    import pandas as pd

    from postdp._validation import MAX_COUNT

    text = pd.Series(column, dtype=str).str.strip()

    def check(bad: Any, what: str) -> None:
        rows = np.flatnonzero(np.asarray(bad))
        if rows.size:
            row = int(rows[0])
            raise CliError(f"{flag} {name!r}: the count at row {row + 1} (id {ids[row]!r}) {what}")

    check(text == "", "is empty")
    if integers:
        check(
            ~text.str.fullmatch(r"[+-]?\d+"),
            "is not a whole number (integer mechanisms need integer counts)",
        )
        digits = text.str.lstrip("+-").str.lstrip("0").str.len()
        check(text.str.startswith("-") & (digits > 0), "is negative")
        check(digits > 16, _TOO_LARGE)
        values = text.astype(np.int64).to_numpy()
        check(values >= MAX_COUNT, _TOO_LARGE)
        return values
    numbers = pd.to_numeric(text, errors="coerce")
    check(numbers.isna(), "is not a number")
    out = numbers.to_numpy(dtype=np.float64)
    check(~np.isfinite(out), "is not finite")
    check(out < 0, "is negative")
    check(out >= MAX_COUNT, _TOO_LARGE)
    return out


# -- output paths -------------------------------------------------------------------------
def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output_file(
    text: str, flag: str, *, inputs: Sequence[Path], overwrite: bool, others: Sequence[Path] = ()
) -> Path:
    """Validate an output file path before anything is drawn; return it resolved."""
    if not text.strip():
        raise CliError(f"{flag} {text!r}: an output path is needed")
    path = Path(text).expanduser()
    for source in inputs:
        if _same(path, source):
            raise CliError(f"{flag} {text!r}: is an input of this command; refusing to replace it")
    for other in others:
        if _same(path, other):
            raise CliError(f"{flag} {text!r}: is also another output of this command")
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise CliError(f"{flag} {text!r}: is a folder; give a file name")
        if not path.is_file():
            raise CliError(f"{flag} {text!r}: is not a regular file; refusing to replace it")
        if not overwrite:
            raise CliError(f"{flag} {text!r}: already exists; pass --overwrite to replace it")
    _probe(path.parent, flag, text)
    return path.resolve()


def check_output_dir(text: str, flag: str, *, inputs: Sequence[Path], overwrite: bool) -> Path:
    """Validate an output folder: new, empty, or (with --overwrite) one postdp wrote."""
    if not text.strip():
        raise CliError(f"{flag} {text!r}: an output folder is needed")
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise CliError(f"{flag} {text!r}: exists and is not a folder")
    for source in inputs:
        if source == path or path in source.parents:
            raise CliError(f"{flag} {text!r}: holds an input of this command")
    if path.exists():
        entries = list(path.iterdir())
        if entries:
            if not (path / MANIFEST).is_file():
                raise CliError(
                    f"{flag} {text!r}: exists and holds files postdp did not write; give a new "
                    "or empty folder"
                )
            if not overwrite:
                raise CliError(
                    f"{flag} {text!r}: holds an earlier run; pass --overwrite to replace it"
                )
        if path == Path.cwd().resolve() or path.parent == path:
            raise CliError(f"{flag} {text!r}: give a folder of its own, not this one")
    _probe(path.parent, flag, text)
    return path


def write_atomic(
    path: Path,
    write: Callable[[Path], None],
    done: Callable[[], None] | None = None,
    *,
    overwrite: bool,
) -> None:
    """Write ``path`` through ``write(tmp)`` atomically (then ``done()``, see
    :func:`atomic_file`); without ``overwrite`` never over a file that appeared after the
    checks. An OSError becomes a CliError."""
    try:
        with atomic_file(path, done, exclusive=not overwrite) as tmp:
            write(tmp)
    except FileExistsError:
        raise CliError(appeared(path)) from None
    except OSError as exc:
        raise CliError(
            f"could not write {str(path)!r} ({exc.strerror or exc}); nothing was written there"
        ) from None


def appeared(path: Path) -> str:
    """The message for an output that another process created after this one checked it."""
    return (
        f"{str(path)!r} appeared while this command ran (another process wrote it); it was "
        "not replaced (pass --overwrite to replace it) and nothing was written there"
    )


class OutputDir:
    """Files of one run, written under a temporary folder and renamed into place at the end.

    The manifest (``postdp-manifest.json``: what the run was and which files it wrote) is
    written last; an existing folder is replaced only after the new one is complete.
    """

    def __init__(self, path: Path, state: RunState, *, overwrite: bool) -> None:
        self.path = path
        self.state = state
        self.overwrite = overwrite
        self.files: list[str] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(
            tempfile.mkdtemp(dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp")
        )
        os.chmod(self.tmp, 0o777 & ~current_umask())  # see MODES (mkdtemp makes it 0700)

    def file(self, name: str) -> Path:
        """Where to write ``name`` (inside the temporary folder)."""
        self.files.append(name)
        self.state.pending = [str(self.path / f) for f in self.files]
        return self.tmp / name

    def commit(self, manifest: dict[str, Any]) -> list[Path]:
        """Write the manifest and move the folder into place; return the final file paths."""
        (self.tmp / MANIFEST).write_text(
            json.dumps({**manifest, "files": self.files}, indent=2) + "\n", encoding="utf-8"
        )
        old = None
        with sigint_held():  # the swap and its record happen together or not at all
            if self.overwrite and self.path.exists():
                old = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.old."))
                os.replace(self.path, old / "previous")
            try:  # onto nothing or an empty folder; a folder filled meanwhile is kept
                os.rename(self.tmp, self.path)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise CliError(appeared(self.path)) from None
                raise
            self.state.pending = []
            self.state.written.append(str(self.path))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        remove_stale_temporaries(self.path)
        return [self.path / f for f in [*self.files, MANIFEST]]

    def discard(self) -> None:
        """Remove the temporary folder (after a failure or an interrupt)."""
        shutil.rmtree(self.tmp, ignore_errors=True)

"""Writing files atomically and fingerprinting them: the one file layer of every package.

Every file postdp writes (the command line's outputs, the ledger's privacy statements, the
noisy measurement files and post-processed runs of :mod:`postdp.nmf`) is written to a
temporary name beside it, flushed, and moved into place with ``os.replace`` (or, where an
existing file must not be replaced, a hard link), so a reader sees the old file or the
whole new one, never a part. An interrupted or failed write removes its temporary.

*Temporaries.* Their names say whose they are, ``.<name>.<host>-<pid>.<random>.tmp``
(:func:`temporary_prefix`; ``<host>`` is 8 hex digits of the machine's name), and a command
that has put ``<name>`` in place removes the stale ones of the same ``<name>``
(:func:`remove_stale_temporaries`): those of this machine whose process is gone, and those it
cannot check (another machine's, or the older names without a pid, ``.<name>.<random>.tmp``)
once untouched for a day. A live process's temporaries, and anything not named so, are never
touched. A temporary is created with the mode the final file would get (:data:`MODES`).

*Fingerprints.* :func:`sha256` of a file's bytes; :func:`fingerprint` of a folder (each
file's path and digest).

*Ctrl-C.* :func:`sigint_held` holds an interrupt back over a block (a move and its record),
delivering it when the block ends.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from postdp.errors import ValidationError

__all__ = [
    "MODES",
    "STALE_AFTER",
    "atomic_file",
    "current_umask",
    "fingerprint",
    "fsync_file",
    "new_temporary",
    "pid_alive",
    "place",
    "probe",
    "remove_stale_temporaries",
    "sha256",
    "sigint_held",
    "temporary_prefix",
    "write_atomic",
    "write_text",
]


# -- fingerprints --------------------------------------------------------------------------
def sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (Ctrl-C waits until the file is closed again)."""
    digest = hashlib.sha256()
    with sigint_held():
        fd = os.open(path, os.O_RDONLY)
        try:
            while block := os.read(fd, 1 << 20):
                digest.update(block)
        finally:
            os.close(fd)
    return digest.hexdigest()


def fingerprint(folder: Path) -> str:
    """SHA-256 over a folder's files: each one's path (relative, POSIX) and the SHA-256 of
    its bytes, so that a folder changed in any byte, a file edited in place with its size
    kept included, has another fingerprint. Hidden files and folders (a killed writer's
    temporaries) are left out."""
    digest = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            digest.update(f"{rel.as_posix()}:{sha256(p)}\n".encode())
    return digest.hexdigest()


# -- writing -------------------------------------------------------------------------------
def probe(folder: Path, flag: str, shown: str) -> None:
    """Raise unless a file can be created in ``folder`` (or in its nearest existing parent)."""
    target = folder
    while not target.exists():
        if target.parent == target:
            break
        target = target.parent
    if not target.is_dir():
        raise ValidationError(f"{flag} {shown!r}: {str(target)!r} is not a folder")
    try:
        handle, name = tempfile.mkstemp(dir=target, prefix=".postdp-probe-")
    except OSError as exc:
        raise ValidationError(
            f"{flag} {shown!r}: cannot write in {str(target)!r} ({exc.strerror})"
        ) from None
    os.close(handle)
    os.unlink(name)


@contextmanager
def atomic_file(
    path: Path, done: Callable[[], None] | None = None, *, exclusive: bool = False
) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is moved to ``path`` atomically
    and ``done()`` runs (e.g. to record that ``path`` is written), with Ctrl-C held back
    until both are over, so an interrupt never falls between the two. ``exclusive``: the
    move fails (FileExistsError) if ``path`` exists by then (another process wrote it after
    the checks) instead of replacing it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with sigint_held():  # created and known together, so it is always removed
            tmp = new_temporary(path)
        yield tmp
        fsync_file(tmp)
        with sigint_held():
            place(tmp, path, exclusive=exclusive)
            if done is not None:
                done()
    finally:
        with sigint_held():
            if tmp is not None and tmp.exists():
                tmp.unlink()
    remove_stale_temporaries(path)  # reached only when it was put in place


def place(tmp: Path, path: Path, *, exclusive: bool) -> None:
    """Move ``tmp`` to ``path``; with ``exclusive``, never over an existing file: a hard
    link creates the name only if it is free (where the file system has no hard links, the
    name is reserved with O_EXCL first)."""
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(tmp, path)
    else:
        os.unlink(tmp)


_HELD: dict[str, Any] = {"depth": 0, "pending": False, "previous": None}


@contextmanager
def sigint_held() -> Iterator[None]:
    """Hold back Ctrl-C over a block (file moves and their records): an interrupt that
    arrives inside is delivered when the block ends.

    Python runs signal handlers in the main thread whichever thread the system hands the
    signal to, so the handler itself is swapped for one that only notes the interrupt
    (masking SIGINT in the main thread is not enough: a BLAS or progress-bar thread can
    take the signal, and the handler then still runs inside the block)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _HELD["depth"] == 0:

        def note(signum: int, frame: object) -> None:
            _HELD["pending"] = True

        _HELD["pending"] = False
        _HELD["previous"] = signal.signal(signal.SIGINT, note)
    _HELD["depth"] += 1
    try:
        yield
    finally:
        _HELD["depth"] -= 1
        if _HELD["depth"] == 0:
            previous = _HELD["previous"]
            signal.signal(signal.SIGINT, previous)
            if _HELD["pending"]:
                _HELD["pending"] = False
                if callable(previous):
                    previous(signal.SIGINT, None)
                elif previous != signal.SIG_IGN:
                    raise KeyboardInterrupt


def fsync_file(path: Path) -> None:
    """Flush a written file to disk (its descriptor is never left open by Ctrl-C)."""
    with sigint_held():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: Path, write: Callable[[Path], Any], *, exclusive: bool = False) -> None:
    """Write ``path`` through ``write(tmp)`` (``tmp`` a temporary beside it) and move it into
    place (see :func:`atomic_file`); an error leaves what was at ``path`` before."""
    with atomic_file(path, exclusive=exclusive) as tmp:
        write(tmp)


def write_text(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_file`)."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), exclusive=exclusive)


# -- temporaries -------------------------------------------------------------------------
def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def temporary_prefix(path: Path) -> str:
    """The start of the name of a temporary beside ``path``: ``.<name>.<host>-<pid>.``."""
    return f".{path.name}.{_host_tag()}-{os.getpid()}."


#: How long a temporary whose process cannot be checked is left alone (seconds).
STALE_AFTER = 24 * 3600


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the stale temporaries of ``path`` left beside it by killed commands (see the
    module notes for the rule); return what was removed. Best effort: errors are ignored."""
    new = re.compile(r"([0-9a-f]{8})-(\d+)\.[A-Za-z0-9_]+")
    old = re.compile(r"[A-Za-z0-9_]{8}")
    start, host = f".{path.name}.", _host_tag()
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if not (name.startswith(start) and name.endswith(".tmp")):
            continue
        middle = name[len(start) : -len(".tmp")]
        try:
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        match = new.fullmatch(middle)
        if match and match.group(1) == host:
            pid = int(match.group(2))
            stale = pid != os.getpid() and not pid_alive(pid)
        elif match or old.fullmatch(middle):
            stale = age > STALE_AFTER
        else:
            continue
        if not stale:
            continue
        target = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(target)
            else:
                target.unlink()
        except OSError:
            continue
        removed.append(target)
    return removed


def new_temporary(path: Path) -> Path:
    """An empty temporary file beside ``path`` with the mode a new file gets from the umask
    (``mkstemp`` alone makes it private to the owner): see :data:`MODES`."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp")
    try:
        os.chmod(name, 0o666 & ~current_umask())
    finally:
        os.close(handle)
    return Path(name)


#: The permission policy of every file and folder postdp writes: what ``touch`` and
#: ``mkdir`` would give under the process's umask (0644 and 0755 under the usual 022).
MODES = "files 0666 & ~umask, folders 0777 & ~umask"


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- processes -----------------------------------------------------------------------------
def pid_alive(pid: int, host: str | None = None) -> bool:
    """Whether process ``pid`` runs on this machine (True when that cannot be told: another
    host, or a system where asking could harm the process). The one test behind three
    decisions: a temporary whose process is gone is stale, a ledger lock holder that is gone
    is not named, and a ledger reservation whose process is gone is not "drawing now"."""
    if host is not None and host != socket.gethostname():
        return True
    if sys.platform == "win32" or pid <= 0:  # pragma: no cover - os.kill(pid, 0) kills there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True

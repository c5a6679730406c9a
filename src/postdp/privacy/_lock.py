"""The ledger's lock: one command at a time between a budget check and its record.

A release holds an exclusive lock on the ledger from the budget check to the append, so
concurrent releases are serialised: the second sees the first's record (and
``--budget-cap`` or a :class:`~postdp.privacy.Ledger`'s cap counts it); a measure holds it
while it reserves and while it settles (:mod:`postdp.privacy._reservations`). The holder
writes who it is (pid, host, command) to ``<ledger>.lock`` while it holds the lock, so a
command that waits says which command it waits for.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from postdp._files import pid_alive, sigint_held
from postdp.errors import ValidationError

__all__ = ["held", "holder_of", "lock"]


def holder_of(args: Any) -> str:
    """The command a lock holder names itself by: ``postdp`` and the words it was given."""
    import shlex

    words = getattr(args, "_words", None)
    text = "postdp " + shlex.join(words) if words else f"postdp {getattr(args, 'command', '')}"
    return text if len(text) <= 300 else text[:297] + "..."


def _holder_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _who_holds(path: Path) -> str:
    """``another postdp command (pid N: postdp ...)`` from the holder file, or a plain
    phrase when the holder has not written it yet or has died."""
    try:
        held = json.loads(_holder_file(path).read_text(encoding="utf-8"))
        pid, host, command = int(held["pid"]), str(held["host"]), str(held["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another postdp command holds it"
    if not pid_alive(pid, host):
        return "another postdp command holds it"
    where = "" if host == socket.gethostname() else f" on {host}"
    return f"another postdp command holds it (pid {pid}{where}: {command})"


def lock(
    path: Path, flag: str, cleanup: list[Callable[[], None]], holder: str | None = None
) -> None:
    """Take the exclusive lock of a ledger, waiting for another postdp command that holds
    it; the function that lets it go is added to ``cleanup`` before the wait, so an
    interrupt never leaves it held.

    The lock is taken on the ledger's folder (an advisory ``flock``); on Windows, on a
    ``<ledger>.lock`` file beside it. Once held, ``holder`` (the command, see
    :func:`holder_of`) is written with the pid and host to ``<ledger>.lock`` (POSIX), removed
    again before the lock goes, so a command that waits can say which command it waits
    for; a holder killed outright leaves the file, which the next holder overwrites and a
    waiting command ignores once its pid is gone."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        target, mode = path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT
    else:
        target, mode = path.parent, os.O_RDONLY
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with sigint_held():
            fd = os.open(target, mode, 0o666)
            cleanup.append(lambda: os.close(fd))  # closing the descriptor lets the lock go
    except OSError as exc:
        raise ValidationError(
            f"{flag} {str(path)!r}: cannot take its lock on {str(target)!r} ({exc.strerror})"
        ) from None
    _acquire(fd, path)
    if holder is not None and sys.platform != "win32":
        _announce(path, holder, cleanup)


def _announce(path: Path, holder: str, cleanup: list[Callable[[], None]]) -> None:
    """Write who holds the lock to ``<ledger>.lock`` (best effort: a folder that allows
    the ledger but not this file only loses the name in the waiting message)."""
    target = _holder_file(path)
    text = json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": holder,
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    with sigint_held():
        try:
            target.write_text(text + "\n", encoding="utf-8")
        except OSError:
            return

        def remove() -> None:
            with suppress(OSError):
                target.unlink()

        cleanup.append(remove)


@contextmanager
def held(path: Path, flag: str, holder: str | None) -> Iterator[None]:
    """Hold the ledger's lock over a block (see :func:`lock`)."""
    cleanup: list[Callable[[], None]] = []
    try:
        lock(path, flag, cleanup, holder)
        yield
    finally:
        with sigint_held():
            while cleanup:
                cleanup.pop()()


def _acquire(fd: int, path: Path) -> None:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt
        import time

        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return
            except OSError:
                time.sleep(0.1)
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(
            f"postdp: waiting for the ledger {str(path)!r}: {_who_holds(path)}",
            file=sys.stderr,
            flush=True,
        )
        fcntl.flock(fd, fcntl.LOCK_EX)

"""Names of the temporary files and folders that outputs are written under, and the
removal of the stale ones that killed commands left.

Every output is written under a temporary name beside it and moved into place
(:mod:`postdp.cli._io`). A process killed outright cannot remove its temporaries. Their
names say whose they are, ``.<name>.<host>-<pid>.<random>.tmp`` (:func:`temporary_prefix`;
``<host>`` is 8 hex digits of the machine's name), and a command that has put ``<name>`` in
place removes the stale ones of the same ``<name>`` (:func:`remove_stale_temporaries`):
those of this machine whose process is gone, and those it cannot check (another machine's,
or the older names without a pid, ``.<name>.<random>.tmp``) once untouched for a day. A live
process's temporaries, and anything not named so, are never touched. A temporary is created
with the mode the final file would get (:data:`MODES`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

from postdp.cli._pids import pid_alive

__all__ = [
    "MODES",
    "STALE_AFTER",
    "current_umask",
    "new_temporary",
    "remove_stale_temporaries",
    "temporary_prefix",
]


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

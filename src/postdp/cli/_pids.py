"""Whether a process still runs, told from its pid (and the machine it ran on).

The one test behind three decisions of the command line: a temporary whose process is gone
is stale (:mod:`postdp.cli._temporaries`), a ledger lock holder that is gone is not named
(:mod:`postdp.cli._ledger_lock`), and a reservation whose process is gone is not "drawing
now" (:mod:`postdp.cli._ledger_reservations`).
"""

from __future__ import annotations

import os
import socket
import sys

__all__ = ["pid_alive"]


def pid_alive(pid: int, host: str | None = None) -> bool:
    """Whether process ``pid`` runs on this machine (True when that cannot be told: another
    host, or a system where asking could harm the process)."""
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

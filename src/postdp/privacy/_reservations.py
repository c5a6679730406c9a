"""Reservations: a ledger's budget taken before a long draw made without its lock.

A secure ``postdp measure`` draws for minutes to hours, so it does not hold the ledger's
lock (:mod:`postdp.privacy._lock`) while it draws: under the lock it appends a
``reserved`` record (its budget, input, output folder, pid and command), which counts
against every cap at once; it draws without the lock; then, under the lock again, it
appends the outcome with the same ``reservation`` id: ``published``, ``drawn, not
published`` (the draw was made but its run was not put in place, e.g. another command
created the folder first; its budget still counts: the noise existed on disk) or
``withdrawn`` (nothing was drawn; the budget no longer counts). A reservation counts once,
with the status of its last record (:func:`postdp.privacy.spent_on`). A measure that is
killed leaves its reservation ``reserved``: it keeps counting, as noise may have been drawn
and seen. (postdp versions before reservations count each line of a reservation
separately: more than was spent, never less.)
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postdp._files import pid_alive, sigint_held
from postdp.errors import ValidationError
from postdp.privacy._ledger import (
    CONTENT_KEY,
    PUBLISHED,
    RESERVED,
    UNPUBLISHED,
    WITHDRAWN,
    Spent,
    append,
    read,
    spent_on,
    truncate,
)
from postdp.privacy._lock import held

__all__ = ["NotRecordedError", "Reservation", "reserve"]


@dataclass
class Reservation:
    """A budget reserved in a ledger by a command that draws without holding its lock
    (see the module notes); :meth:`close` appends its outcome."""

    path: Path
    base: dict[str, Any]  # the reservation's record (its id in "reservation")
    holder: str
    closed: str | None = None

    @property
    def id(self) -> str:
        return str(self.base["reservation"])

    def _entry(self, status: str, record: dict[str, Any] | None) -> dict[str, Any]:
        entry = {**self.base, **(record or {})}
        entry.update(
            status=status,
            reservation=self.id,
            time=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )
        if status == WITHDRAWN:  # counts nothing, also for readers without reservations
            entry["budget"] = {"epsilon": 0.0, "rho": 0.0}
            entry["reserved_budget"] = self.base["budget"]
        return entry

    def close(self, status: str, record: dict[str, Any] | None = None) -> None:
        """Append the outcome (``drawn, not published`` or ``withdrawn``; ``published``
        goes through :meth:`publish`) under the lock. Raises OSError if it cannot be
        written (the reservation then keeps counting)."""
        with held(self.path, "--ledger", self.holder):
            append(self.path, self._entry(status, record))
        self.closed = status

    def publish(self, record: dict[str, Any], place: Callable[[], None]) -> None:
        """Under the lock: append ``record`` as ``published``, then ``place()`` the output.
        If the append fails, raise :class:`NotRecordedError` (nothing placed). If ``place``
        raises, the line is taken back, ``drawn, not published`` appended (if it can be:
        :attr:`closed` says) and the error raised again."""
        with held(self.path, "--ledger", self.holder):
            try:
                before = append(self.path, self._entry(PUBLISHED, record))
            except OSError as exc:
                raise NotRecordedError(exc.errno, exc.strerror) from None
            try:
                place()
            except BaseException:
                truncate(self.path, before)
                try:
                    append(self.path, self._entry(UNPUBLISHED, record))
                    self.closed = UNPUBLISHED
                except OSError:
                    pass
                raise
            self.closed = PUBLISHED


class NotRecordedError(OSError):
    """A reservation's outcome could not be appended to its ledger."""


def reserve(
    path: Path,
    record: dict[str, Any],
    holder: str,
    *,
    target: str,
    busy: Callable[[dict[str, Any]], str],
    keep: Callable[[Reservation], None] | None = None,
) -> tuple[Reservation, Spent]:
    """Under the ledger's lock: what the ledger records for the input of ``record`` (its
    ``input_sha256`` and content digest), then a ``reserved`` record of ``record``'s budget.

    ``target`` is where the command will write (its ``output``): a reservation of the same
    target not closed, by a process alive on this machine, means another command is
    drawing into it; ``busy(that record)`` is then raised as a CliError, before this one
    draws or reserves anything. ``keep(reservation)`` runs as soon as it is in the
    ledger, with Ctrl-C held back between the two (e.g. to have it settled at the end
    whatever happens); Ctrl-C while waiting for the lock stops the command as usual."""
    base = {
        **record,
        "status": RESERVED,
        "reservation": uuid.uuid4().hex,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": holder,
    }
    with held(path, "--ledger", holder):
        records = read(path, "--ledger")
        last: dict[str, dict[str, Any]] = {}
        for r in records:
            if r.get("reservation") is not None:
                last[str(r["reservation"])] = r
        for r in last.values():
            if (
                r.get("status") == RESERVED
                and r.get("output") == target
                and pid_alive(int(r.get("pid", 0)), r.get("host"))
            ):
                raise ValidationError(busy(r))
        spent = spent_on(records, str(record["input_sha256"]), record.get(CONTENT_KEY))
        reservation = Reservation(path, base, holder)
        with sigint_held():
            try:
                append(path, base)
            except OSError as exc:
                raise ValidationError(
                    f"--ledger {str(path)!r}: could not reserve the budget "
                    f"({exc.strerror or exc}); nothing was drawn"
                ) from None
            if keep is not None:
                keep(reservation)
    return reservation, spent

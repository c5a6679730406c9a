"""The release ledger: one JSON line per secure release, so repeated releases are visible.

A retried or repeated release of the same people spends privacy again. Every secure release
recorded in a ledger appends a line (time, input digests, mechanism and budget, output
digest, versions; never a true count) to a ledger that follows the *input*, not the output:
one ledger per user by default (see :func:`default_path`; ``--ledger``, ``Ledger(path)`` or
the ``POSTDP_LEDGER`` environment variable name another), so every release of the same input
is found in it wherever its outputs went.

*The same input.* A record holds two digests of its input, of its bytes and of its content;
a record counts against an input when either matches (:func:`same_input`; the digests are
:mod:`postdp.privacy._content`'s).

*The lock.* A release holds the ledger's exclusive lock (:mod:`postdp.privacy._lock`) from
the budget check to the append, so concurrent releases are serialised.

*Reservations.* A long draw made without the lock reserves its budget first and appends the
outcome afterwards (:mod:`postdp.privacy._reservations`); the records of one reservation
count once, with the status of its last record.

*The cap.* :class:`Ledger` refuses a release whose budget, added to what the ledger records
for the same input, would pass its cap (:func:`over_cap`), before anything is drawn.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from postdp._files import probe, sigint_held
from postdp.errors import BudgetCapError, ValidationError
from postdp.mechanisms.budget import Budget
from postdp.privacy._lock import held

__all__ = [
    "CONTENT_KEY",
    "LEDGER_NAME",
    "Ledger",
    "LedgerUse",
    "Spent",
    "append",
    "default_path",
    "over_cap",
    "read",
    "same_input",
    "spent_on",
]

#: The record's field with the digest of its input's content (:mod:`postdp.privacy._content`).
CONTENT_KEY = "input_content_sha256"

#: The statuses of a reservation's records (:mod:`postdp.privacy._reservations`).
RESERVED, PUBLISHED, UNPUBLISHED, WITHDRAWN = (
    "reserved",
    "published",
    "drawn, not published",
    "withdrawn",
)

#: The name of the per-folder ledgers that postdp 0.x wrote beside each output (still read).
LEDGER_NAME = "postdp-ledger.jsonl"


def default_path() -> Path:
    """The ledger a secure release uses when none is named (``--ledger``, ``Ledger(path)``).

    ``$POSTDP_LEDGER`` if set; otherwise ``postdp/ledger.jsonl`` in the user's data folder
    (``$XDG_DATA_HOME``, by default ``~/.local/share``; ``%LOCALAPPDATA%`` on Windows).
    """
    named = os.environ.get("POSTDP_LEDGER", "").strip()
    if named:
        return Path(named).expanduser().resolve()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return (base.expanduser() / "postdp" / "ledger.jsonl").resolve()


@dataclass(frozen=True)
class Spent:
    """Releases of one input recorded in a ledger and their summed budget."""

    releases: int
    epsilon: float
    rho: float
    pending: int = 0  # of the releases: reservations not closed (drawing now, or killed)


@dataclass(frozen=True)
class LedgerUse:
    """The ledger a release consulted and will append to, and what it found."""

    path: Path
    spent: Spent
    also_read: list[Path] = field(default_factory=list)  # older ledgers beside the output

    def describe(self) -> dict[str, Any]:
        """For the privacy statement: which ledgers were consulted and what they hold."""
        return {
            "path": str(self.path),
            "also_read": [str(p) for p in self.also_read],
            "earlier_releases_of_this_input": self.spent.releases,
            "earlier_budget": {"epsilon": self.spent.epsilon, "rho": self.spent.rho},
        }


def read(path: Path, flag: str) -> list[dict[str, Any]]:
    """The records of a ledger (none if it does not exist yet)."""
    if not path.exists():
        return []
    if not path.is_file():
        raise ValidationError(f"{flag} {str(path)!r}: is not a file")
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{flag} {str(path)!r}: cannot be read as a ledger ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            float(record["budget"]["epsilon"]) + float(record["budget"]["rho"])
            str(record["input_sha256"])
        except (ValueError, KeyError, TypeError):
            raise ValidationError(
                f"{flag} {str(path)!r}: line {number} is not a postdp ledger record"
            ) from None
        records.append(record)
    return records


def same_input(record: dict[str, Any], input_sha256: str, content: str | None) -> bool:
    """Whether a record is of this input: the same bytes, or the same content."""
    if record["input_sha256"] == input_sha256:
        return True
    return content is not None and record.get(CONTENT_KEY) == content


def spent_on(records: list[dict[str, Any]], input_sha256: str, content: str | None = None) -> Spent:
    """Budget recorded for releases of this input (sequential composition): records whose
    ``input_sha256`` is the input's bytes digest or whose content digest is ``content``.

    The records of one reservation count once, as their last record says: not at all
    when ``withdrawn``, else with their budget (``reserved`` ones are pending)."""
    counted: list[dict[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    for r in records:
        if not same_input(r, input_sha256, content):
            continue
        if r.get("reservation") is None:
            counted.append(r)
        else:
            last[str(r["reservation"])] = r
    counted += [r for r in last.values() if r.get("status") != WITHDRAWN]
    return Spent(
        len(counted),
        sum(float(r["budget"]["epsilon"]) for r in counted),
        sum(float(r["budget"]["rho"]) for r in counted),
        sum(1 for r in last.values() if r.get("status") == RESERVED),
    )


def check_writable(path: Path, flag: str) -> None:
    """Raise unless the ledger can be appended to (checked before anything is drawn)."""
    if path.exists():
        if not path.is_file():
            raise ValidationError(f"{flag} {str(path)!r}: is not a file")
        if not os.access(path, os.W_OK):
            raise ValidationError(f"{flag} {str(path)!r}: cannot be written")
    probe(path.parent, flag, str(path))


def append(path: Path, record: dict[str, Any]) -> int:
    """Append one record as a JSON line and flush it to disk; return the ledger's size
    before (to take the line back with :func:`truncate`). A failed append is taken back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    size = None
    try:
        with path.open("ab", buffering=0) as handle:
            size = handle.seek(0, os.SEEK_END)
            _write_line(handle, line)
    except BaseException:
        if size is not None:
            truncate(path, size)
        raise
    return size


def _write_line(handle: Any, line: bytes) -> None:
    handle.write(line)
    handle.flush()
    os.fsync(handle.fileno())


def truncate(path: Path, size: int) -> None:
    """Cut a ledger back to ``size`` bytes (taking back an append this process made while
    it held the lock)."""
    try:
        with path.open("r+b") as handle:
            handle.truncate(size)
            os.fsync(handle.fileno())
    except OSError:
        pass


def over_cap(spent: Spent, cost: Budget, cap: float, delta: float) -> float | None:
    """The epsilon at ``delta`` of what ``spent`` records and ``cost`` together (sequential
    composition, the zCDP terms converted with the optimal bound) when it passes ``cap``
    (by more than a relative 1e-12); None when it stays within it."""
    total = Budget(epsilon=spent.epsilon + cost.epsilon, rho=spent.rho + cost.rho)
    epsilon = total.to_approx_dp(delta)
    return epsilon if epsilon > cap * (1 + 1e-12) else None


class Ledger:
    """A privacy ledger: the releases of the library's secure paths, recorded and capped.

    Pass one as ``ledger=`` to :meth:`Mechanism.release
    <postdp.mechanisms.Mechanism.release>`, :func:`postdp.tables.measure` (secure) or
    :func:`postdp.nmf.write`: each release appends one JSON line (time, the digests of its
    input, mechanism and budget, the digest of its output, versions; never a true count)
    while holding the ledger's lock, and a release whose budget, added to what the ledger
    records for the same input, would pass ``cap`` is refused with
    :class:`~postdp.errors.BudgetCapError` before any noise is drawn. The file is the one
    ``postdp release`` and ``postdp measure`` write (``--ledger``): the command line and the
    library count against each other.

    Parameters
    ----------
    path : path, optional
        The ledger file, created on the first release (default :func:`default_path`:
        ``$POSTDP_LEDGER``, else ``postdp/ledger.jsonl`` in the user's data folder).
    cap : float, optional
        The most epsilon, at ``delta``, that the releases of one input may spend together
        (their budgets composed sequentially). None: no cap (every release is recorded).
    delta : float, default 1e-10
        The delta at which budgets with a zCDP part are compared with ``cap``.

    Examples
    --------
    >>> import tempfile
    >>> from postdp import Geometric, Ledger
    >>> ledger = Ledger(tempfile.mkdtemp() + "/ledger.jsonl", cap=1.5)
    >>> noisy = Geometric(epsilon=1.0).release([10, 20, 30], ledger=ledger)
    >>> ledger.spent([10, 20, 30]).epsilon
    1.0
    >>> Geometric(epsilon=1.0).release([10, 20, 30], ledger=ledger)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    postdp.errors.BudgetCapError: the ledger ... records 1 earlier release(s) of this input; ...
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        cap: float | None = None,
        delta: float = 1e-10,
    ) -> None:
        self.path = default_path() if path is None else Path(path).expanduser().resolve()
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, int | float):
                raise TypeError(f"`cap` must be a real number or None; got {type(cap).__name__}")
            if not (math.isfinite(cap) and cap > 0):
                raise ValidationError(f"`cap` must be positive and finite; got {cap!r}")
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise TypeError(f"`delta` must be a real number; got {type(delta).__name__}")
        if not 0.0 < delta < 1.0:
            raise ValidationError(f"`delta` must lie in (0, 1); got {delta!r}")
        self.cap = None if cap is None else float(cap)
        self.delta = float(delta)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, cap={self.cap!r}, delta={self.delta!r})"

    def records(self) -> list[dict[str, Any]]:
        """Every record of the ledger, in order (none before the first release).

        Returns
        -------
        list of dict
        """
        return read(self.path, "ledger")

    def spent(self, input: Any = None, *, content: str | None = None) -> Spent:
        """What the ledger records for one input: its releases and their summed budget.

        Parameters
        ----------
        input : array_like or str, optional
            The true values a release was drawn from (digested as
            :meth:`Mechanism.release <postdp.mechanisms.Mechanism.release>` does) or an
            input digest (``input_sha256``).
        content : str, optional
            A content digest (``input_content_sha256``; :func:`table_content` for a table).

        Returns
        -------
        Spent
        """
        from postdp.privacy._content import array_content

        if input is None and content is None:
            raise ValidationError("give `input` or `content`")
        digest = "" if input is None else input if isinstance(input, str) else array_content(input)
        return spent_on(self.records(), digest, content)

    def _refuse(self, spent: Spent, cost: Budget) -> None:
        if self.cap is None:
            return
        total = over_cap(spent, cost, self.cap, self.delta)
        if total is not None:
            pending = f" ({spent.pending} of them still drawing or killed)" if spent.pending else ""
            raise BudgetCapError(
                f"the ledger {str(self.path)!r} records {spent.releases} earlier release(s) "
                f"of this input{pending}; with this one the budget would be epsilon = "
                f"{total:.6g} at delta = {self.delta:g}, over its cap of {self.cap:g}; "
                "nothing was drawn"
            )

    @contextmanager
    def recording(self, cost: Budget, record: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Record one release around its draw: under the ledger's lock, refuse it if it
        would pass the cap, run the block (which draws, and may add fields such as
        ``output_sha256`` to the entry it is given), then append the entry.

        Parameters
        ----------
        cost : Budget
            The release's privacy cost.
        record : dict
            Its record: ``input_sha256`` (and optionally ``input_content_sha256``) and
            anything JSON can hold but true counts.

        Yields
        ------
        dict
            The entry that is appended when the block ends without an error (nothing is
            appended when it raises).

        Raises
        ------
        BudgetCapError
            Before the block runs, if the release would pass the cap.
        """
        check_writable(self.path, "ledger")
        with held(self.path, "ledger", f"postdp (python, pid {os.getpid()})"):
            records = read(self.path, "ledger")
            spent = spent_on(records, str(record["input_sha256"]), record.get(CONTENT_KEY))
            self._refuse(spent, cost)
            entry = {
                "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "postdp_version": _postdp_version(),
                **record,
                "budget": {"epsilon": cost.epsilon, "rho": cost.rho},
            }
            yield entry
            with sigint_held():
                append(self.path, entry)

    def publish(
        self,
        cost: Budget,
        record: dict[str, Any],
        place: Callable[[dict[str, Any]], None],
        *,
        drawn: str | None = None,
    ) -> dict[str, Any]:
        """Record the publication of a draw and put its output in place, together.

        Under the ledger's lock: when the ledger holds the draw ``drawn`` (the id that
        :func:`postdp.tables.measure` gave it), the publication is appended as its last
        record, so it counts once; otherwise the release is refused if it would pass the cap
        and appended as a new one. Then ``place(entry)`` puts the output in place; if it
        raises, the line is taken back.

        Parameters
        ----------
        cost : Budget
            The release's privacy cost (when it was not recorded before).
        record : dict
            Its record (``input_sha256``, ``output``, ``output_sha256``, ...).
        place : callable
            Called with the entry appended (e.g. to write it into a privacy statement).
        drawn : str, optional
            The id of the draw's record.

        Returns
        -------
        dict
            The entry appended.

        Raises
        ------
        BudgetCapError
            If a release not recorded before would pass the cap (nothing is placed).
        """
        check_writable(self.path, "ledger")
        with held(self.path, "ledger", f"postdp (python, pid {os.getpid()})"):
            records = read(self.path, "ledger")
            earlier = [r for r in records if drawn is not None and r.get("reservation") == drawn]
            entry: dict[str, Any] = {
                "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "postdp_version": _postdp_version(),
            }
            if earlier:
                entry = {**earlier[0], **entry, **record, "budget": earlier[0]["budget"]}
                entry.update(status=PUBLISHED, reservation=drawn)
            else:
                content = record.get(CONTENT_KEY)
                self._refuse(spent_on(records, str(record["input_sha256"]), content), cost)
                entry.update(record, budget={"epsilon": cost.epsilon, "rho": cost.rho})
            with sigint_held():
                before = append(self.path, entry)
                try:
                    place(entry)
                except BaseException:
                    truncate(self.path, before)
                    raise
            return entry


def _postdp_version() -> str:
    """The installed postdp's version (the package's metadata; read without importing the
    package's root, which sits above this layer)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("postdp")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


def new_reservation() -> dict[str, str]:
    """The fields that make a record the first of a reservation drawn and not yet
    published (a later record with the same id, e.g. its publication, replaces it)."""
    return {"reservation": uuid.uuid4().hex, "status": UNPUBLISHED}

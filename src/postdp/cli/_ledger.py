"""The release ledger: one JSON line per secure release, so repeated releases are visible.

A retried or repeated release of the same people spends privacy again. Every secure
``postdp release`` appends a line (time, input digests, mechanism and budget per level,
post-processing, output path and SHA-256, versions) to a ledger that follows the *input*,
not the output: one ledger per user (see :func:`default_path`; ``--ledger`` or the
``POSTDP_LEDGER`` environment variable name another), so every release of the same input
is found in it wherever its outputs went.

*The same input.* A record holds two digests of its input, of its bytes and of its
content; a record counts against an input when either matches (:func:`same_input`; the
digests are :mod:`postdp.cli._ledger_content`'s).

*The lock.* A release holds the ledger's exclusive lock (:mod:`postdp.cli._ledger_lock`)
from the budget check to the append, so concurrent releases are serialised. The append and
the moves of the output and its privacy statement into place happen together, with Ctrl-C
held back; a release that cannot be recorded leaves nothing behind.

*Reservations.* A secure ``postdp measure`` reserves its budget before it draws, without
the lock, and appends the outcome afterwards (:mod:`postdp.cli._ledger_reservations`); the
records of one reservation count once, with the status of its last record.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from postdp.cli._ledger_content import hierarchy_content, table_content
from postdp.cli._ledger_lock import holder_of, lock
from postdp.cli._options import CliError

__all__ = [
    "CONTENT_KEY",
    "LEDGER_NAME",
    "LedgerUse",
    "Spent",
    "append",
    "default_path",
    "hierarchy_content",
    "spent_on",
    "table_content",
]

#: The record's field with the digest of its input's content (:mod:`postdp.cli._ledger_content`).
CONTENT_KEY = "input_content_sha256"

#: The statuses of a reservation's records (:mod:`postdp.cli._ledger_reservations`).
RESERVED, PUBLISHED, UNPUBLISHED, WITHDRAWN = (
    "reserved",
    "published",
    "drawn, not published",
    "withdrawn",
)

#: The name of the per-folder ledgers that postdp 0.x wrote beside each output (still read).
LEDGER_NAME = "postdp-ledger.jsonl"


def default_path() -> Path:
    """The ledger a secure release uses when ``--ledger`` is not given.

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
        raise CliError(f"{flag} {str(path)!r}: is not a file")
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{flag} {str(path)!r}: cannot be read as a ledger ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            float(record["budget"]["epsilon"]) + float(record["budget"]["rho"])
            str(record["input_sha256"])
        except (ValueError, KeyError, TypeError):
            raise CliError(
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
    from postdp.cli._io import _probe

    if path.exists():
        if not path.is_file():
            raise CliError(f"{flag} {str(path)!r}: is not a file")
        if not os.access(path, os.W_OK):
            raise CliError(f"{flag} {str(path)!r}: cannot be written")
    _probe(path.parent, flag, str(path))


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


def statement_path(output: Path) -> Path:
    """Where the privacy statement of a release goes: ``<output>.privacy.json``."""
    return output.with_name(output.name + ".privacy.json")


#: The deltas of the (epsilon, delta) curve in a privacy statement.
STATEMENT_DELTAS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12)


def statement(
    record: dict[str, Any],
    *,
    secure: bool,
    derived: list[str],
    public: list[str] | None = None,
    ledger: LedgerUse | None = None,
) -> dict[str, Any]:
    """The privacy statement of a release, from its ledger record (``public``: the ids the
    --public flag resolved to, when the record holds the flag as typed; ``ledger``: the
    ledger consulted, None on the study path)."""
    from postdp.mechanisms import Budget

    budget = Budget(epsilon=record["budget"]["epsilon"], rho=record["budget"]["rho"])
    public = list(record.get("public") or []) if public is None else list(public)
    for m in record.get("measurements", []):
        if m["mechanism"] == "public":
            public.append(f"query {m['query']} at level {m['level']}")
    return {
        "path": "secure" if secure else "study (numpy draws: NOT a private release)",
        "neighbouring_relation": "add or remove one person: every count that contains the "
        "person changes by at most the mechanism's sensitivity",
        "composition": "parallel over the disjoint geounits of a level; sequential over "
        "levels and over the queries of a level; zCDP terms converted with the optimal "
        "rho -> (epsilon, delta) bound",
        **{k: v for k, v in record.items() if k != "time"},
        "epsilon_delta": [
            {"delta": delta, "epsilon": budget.to_approx_dp(delta)} for delta in STATEMENT_DELTAS
        ],
        "public_invariants": {
            "published_exactly": public,
            "also_determined_exactly": derived,
            "note": "invariants are released without noise: they, and every count they "
            "determine, carry no privacy protection; the budget above covers the rest",
        },
        "ledger": (
            ledger.describe()
            if ledger is not None
            else "none consulted: a study-path draw is not a release and is not recorded"
        ),
        "time": record.get("time"),
    }


def publish(
    output: Path,
    frame: Any,
    ledger: LedgerUse | None,
    record: Callable[[str], dict[str, Any]],
    privacy: Callable[[dict[str, Any]], dict[str, Any]],
    done: Callable[[], None] | None = None,
    *,
    overwrite: bool,
) -> None:
    """Write ``frame`` as CSV to ``output`` with its privacy statement (``privacy(record)``)
    beside it and, for a secure release, ``record(sha256 of the written bytes)`` appended to
    the ledger; all or nothing.

    Both files are written to temporary names first. Then, with Ctrl-C held back, the
    record is appended, the statement and the output are moved into place and ``done()``
    runs (e.g. to record the output as written). If the append fails, nothing is moved; if
    a move fails (without ``overwrite``, a file that another process created meanwhile),
    the record is taken back and a statement this release created is removed.
    """
    from postdp.cli._io import fsync_file, sha256, sigint_held
    from postdp.cli._temporaries import new_temporary

    statement_file = statement_path(output)
    exclusive = not overwrite
    temporaries: list[Path] = []
    try:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            with sigint_held():  # created and known together, so they are always removed
                tmp_out = new_temporary(output)
                temporaries.append(tmp_out)
                tmp_statement = new_temporary(statement_file)
                temporaries.append(tmp_statement)
            frame.to_csv(tmp_out, index=False)
            entry = record(sha256(tmp_out))
            text = json.dumps(privacy(entry), indent=2) + "\n"
            tmp_statement.write_text(text, encoding="utf-8")
            for tmp in temporaries:
                fsync_file(tmp)
        except OSError as exc:
            raise CliError(
                f"could not write {str(output)!r} ({exc.strerror or exc}); nothing was "
                "written there"
            ) from None
        with sigint_held():
            _record_and_place(
                [(tmp_statement, statement_file), (tmp_out, output)], ledger, entry, exclusive
            )
            if done is not None:
                done()
    finally:
        with sigint_held():
            _remove(temporaries)
    from postdp.cli._temporaries import remove_stale_temporaries

    remove_stale_temporaries(output)  # reached only once both are in place
    remove_stale_temporaries(statement_file)


def _record_and_place(
    moves: list[tuple[Path, Path]], ledger: LedgerUse | None, entry: dict[str, Any], exclusive: bool
) -> None:
    """Append ``entry`` to the ledger, then make each move; on a failed move, undo the
    append and the moves made (all or nothing)."""
    from postdp.cli._io import appeared, place

    before = None
    if ledger is not None:
        try:
            before = append(ledger.path, entry)
        except OSError as exc:
            raise CliError(
                f"--ledger {str(ledger.path)!r}: could not record the release "
                f"({exc.strerror or exc}); nothing was published"
            ) from None
    created: list[Path] = []
    for tmp, target in moves:
        try:
            place(tmp, target, exclusive=exclusive)
        except OSError as exc:
            if exclusive:
                _remove(created)
            if ledger is not None and before is not None:
                truncate(ledger.path, before)
            if isinstance(exc, FileExistsError):
                raise CliError(appeared(target)) from None
            raise CliError(
                f"could not write {str(target)!r} ({exc.strerror or exc}); nothing was published"
            ) from None
        created.append(target)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass


def release_outputs(
    args: Any,
    inputs: list[Path],
    input_sha256: str,
    *,
    secure: bool,
    state: Any,
    content: str | None = None,
) -> tuple[Path, LedgerUse | None]:
    """Check a release's output, its privacy statement and (secure path) its ledger before
    anything is drawn; return the output path and the ledger in use.

    On the secure path the ledger's lock is taken after the paths are checked (a bad path is
    refused at once, without waiting for another release) and held (``state.cleanup``)
    until the command ends, so the budget check, the draw and the append see no other
    release; an output another process creates meanwhile is never replaced (exclusive
    placement in :func:`publish`). ``content``: the input's content digest (the ledger
    counts the records of the same bytes or the same content).
    """
    from postdp.cli._io import check_output_file
    from postdp.cli._options import typed

    ledger = None
    if secure:
        ledger = Path(args.ledger).expanduser().resolve() if args.ledger else default_path()
        check_writable(ledger, "--ledger")
    shown = typed(args, "--output", "-o")
    output = check_output_file(args.output, shown, inputs=inputs, overwrite=args.overwrite)
    check_output_file(
        str(statement_path(output)),
        f"{shown} (its privacy statement)",
        inputs=inputs,
        overwrite=args.overwrite,
    )
    if ledger is None:
        return output, None
    if ledger in (*inputs, output, statement_path(output)):
        raise CliError(f"--ledger {str(ledger)!r}: is an input or an output")
    lock(ledger, "--ledger", state.cleanup, holder_of(args))
    records = read(ledger, "--ledger")
    also = []
    beside = output.parent / LEDGER_NAME  # where postdp 0.x kept a ledger per folder
    if beside.is_file() and beside != ledger:
        older = read(beside, f"{shown} (the older ledger beside it)")
        seen = {(r.get("output_sha256"), r.get("time")) for r in records}
        extra = [r for r in older if (r.get("output_sha256"), r.get("time")) not in seen]
        if any(same_input(r, input_sha256, content) for r in extra):
            also.append(beside)
        records += extra
    return output, LedgerUse(ledger, spent_on(records, input_sha256, content), also)

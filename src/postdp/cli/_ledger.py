"""The release ledger: one JSON line per secure release, so repeated releases are visible.

A retried or repeated release of the same people spends privacy again. Every secure
``postdp release`` appends a line (time, input SHA-256, mechanism and budget per level,
post-processing, output path and SHA-256, versions) to a ledger file, by default
``postdp-ledger.jsonl`` beside the output, before the output is moved into place; it reads
the ledger first to report, and cap with ``--budget-cap``, the budget already spent on the
same input (same SHA-256).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from postdp.cli._options import CliError

__all__ = ["LEDGER_NAME", "Spent", "append", "spent_on"]

LEDGER_NAME = "postdp-ledger.jsonl"


@dataclass(frozen=True)
class Spent:
    """Releases of one input recorded in a ledger and their summed budget."""

    releases: int
    epsilon: float
    rho: float


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


def spent_on(records: list[dict[str, Any]], input_sha256: str) -> Spent:
    """Budget recorded for releases of the input with this SHA-256 (sequential composition)."""
    mine = [r for r in records if r["input_sha256"] == input_sha256]
    return Spent(
        len(mine),
        sum(float(r["budget"]["epsilon"]) for r in mine),
        sum(float(r["budget"]["rho"]) for r in mine),
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


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a JSON line and flush it to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def publish(
    output: Path,
    frame: Any,
    ledger_path: Path | None,
    record: Callable[[str], dict[str, Any]],
) -> None:
    """Write ``frame`` as CSV to ``output`` atomically; for a secure release, append
    ``record(sha256 of the written bytes)`` to the ledger before the file is moved into
    place (a release that cannot be recorded is not published)."""
    from postdp.cli._io import sha256, write_atomic
    from postdp.cli._options import CliError

    def write(tmp: Path) -> None:
        frame.to_csv(tmp, index=False)
        if ledger_path is not None:
            try:
                append(ledger_path, record(sha256(tmp)))
            except OSError as exc:
                raise CliError(
                    f"--ledger {str(ledger_path)!r}: could not record the release "
                    f"({exc.strerror}); nothing was published"
                ) from None

    write_atomic(output, write)

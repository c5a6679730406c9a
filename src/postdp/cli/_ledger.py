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


def statement_path(output: Path) -> Path:
    """Where the privacy statement of a release goes: ``<output>.privacy.json``."""
    return output.with_name(output.name + ".privacy.json")


#: The deltas of the (epsilon, delta) curve in a privacy statement.
STATEMENT_DELTAS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12)


def statement(
    record: dict[str, Any], *, secure: bool, derived: list[str], public: list[str] | None = None
) -> dict[str, Any]:
    """The privacy statement of a release, from its ledger record (``public``: the ids the
    --public flag resolved to, when the record holds the flag as typed)."""
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
        "time": record.get("time"),
    }


def publish(
    output: Path,
    frame: Any,
    ledger_path: Path | None,
    record: Callable[[str], dict[str, Any]],
    privacy: Callable[[dict[str, Any]], dict[str, Any]],
    done: Callable[[], None] | None = None,
) -> None:
    """Write ``frame`` as CSV to ``output`` atomically, with its privacy statement
    (``privacy(record)``) beside it; for a secure release, append ``record(sha256 of the
    written bytes)`` to the ledger; both before the output is moved into place (a release
    that cannot be recorded is not published). ``done()`` runs right after the move, with
    Ctrl-C held back until it returns (e.g. to record the output as written)."""
    from postdp.cli._io import sha256, write_atomic
    from postdp.cli._options import CliError

    def write(tmp: Path) -> None:
        frame.to_csv(tmp, index=False)
        entry = record(sha256(tmp))
        text = json.dumps(privacy(entry), indent=2) + "\n"

        def write_statement(target: Path) -> None:
            target.write_text(text, encoding="utf-8")

        write_atomic(statement_path(output), write_statement)
        if ledger_path is not None:
            try:
                append(ledger_path, entry)
            except OSError as exc:
                raise CliError(
                    f"--ledger {str(ledger_path)!r}: could not record the release "
                    f"({exc.strerror}); nothing was published"
                ) from None

    write_atomic(output, write, done)


def release_outputs(
    args: Any, inputs: list[Path], input_sha256: str, *, secure: bool
) -> tuple[Path, Path | None, Spent | None]:
    """Check a release's output, its privacy statement and (secure path) its ledger before
    anything is drawn; return the output path, the ledger path and what the ledger records
    as already spent on this input."""
    from postdp.cli._io import check_output_file
    from postdp.cli._options import typed

    shown = typed(args, "--output", "-o")
    output = check_output_file(args.output, shown, inputs=inputs, overwrite=args.overwrite)
    check_output_file(
        str(statement_path(output)),
        f"{shown} (its privacy statement)",
        inputs=inputs,
        overwrite=args.overwrite,
    )
    if not secure:
        return output, None, None
    ledger = (
        Path(args.ledger).expanduser().resolve() if args.ledger else output.parent / LEDGER_NAME
    )
    if ledger in (*inputs, output):
        raise CliError(f"--ledger {str(ledger)!r}: is an input or the output")
    check_writable(ledger, "--ledger")
    return output, ledger, spent_on(read(ledger, "--ledger"), input_sha256)

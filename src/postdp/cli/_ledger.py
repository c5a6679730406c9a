"""The command line's side of the release ledger: checking a release's output, statement
and ledger before anything is drawn, and publishing the three together.

The ledger itself (records, digests, lock, reservations, cap) and the privacy statement
are the library's, :mod:`postdp.privacy`; ``postdp release`` calls it through
:func:`release_outputs` (the ledger's lock taken, what it records for the input read) and
:func:`publish` (the output and its statement moved into place with the record appended, all
or nothing, Ctrl-C held back).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from postdp._files import (
    fsync_file,
    new_temporary,
    place,
    remove_stale_temporaries,
    sha256,
    sigint_held,
)
from postdp.cli._options import CliError
from postdp.privacy import (
    LEDGER_NAME,
    LedgerUse,
    append,
    check_writable,
    default_path,
    holder_of,
    lock,
    read,
    same_input,
    spent_on,
    statement_path,
    truncate,
)

__all__ = ["publish", "release_outputs"]


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
    remove_stale_temporaries(output)  # reached only once both are in place
    remove_stale_temporaries(statement_file)


def _record_and_place(
    moves: list[tuple[Path, Path]], ledger: LedgerUse | None, entry: dict[str, Any], exclusive: bool
) -> None:
    """Append ``entry`` to the ledger, then make each move; on a failed move, undo the
    append and the moves made (all or nothing)."""
    from postdp.cli._io import appeared

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

"""The privacy statement of a release: what it spent, under which relation, and what it
left unprotected, written beside its output (``<output>.privacy.json``) or inside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from postdp._files import write_text
from postdp.mechanisms.budget import Budget
from postdp.privacy._ledger import LedgerUse

__all__ = ["STATEMENT_DELTAS", "statement", "statement_path", "write_statement"]


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
    """The privacy statement of a release, from its ledger record.

    Parameters
    ----------
    record : dict
        The release's ledger record (its ``budget``; every field but ``time`` is copied).
    secure : bool
        False for a study-path draw (said so in the statement: not a private release).
    derived : list of str
        What the public invariants determine exactly besides themselves.
    public : list of str, optional
        The public (invariant) counts (default: the record's ``public``); the record's
        measurements whose mechanism is ``public`` are added.
    ledger : LedgerUse, optional
        The ledger consulted and what it held; None on the study path.

    Returns
    -------
    dict
        JSON-ready: path, neighbouring relation, composition, the record, the (epsilon,
        delta) curve at :data:`STATEMENT_DELTAS`, the public invariants and the ledger.
    """
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


def write_statement(path: Path, content: dict[str, Any]) -> Path:
    """Write a privacy statement (indented JSON) to ``path`` atomically: a temporary file
    beside it, moved into place, so a reader never sees a part of one.

    Parameters
    ----------
    path : path
    content : dict
        The statement (:func:`statement`).

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(content, indent=2) + "\n")
    return path

"""A run written with a ledger (:func:`postdp.nmf.write`'s ``ledger=``): its publication
recorded, its privacy statement (``privacy.json``) inside it, and the swap into place, together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from postdp._files import fingerprint
from postdp.privacy import Ledger
from postdp.tables import TableMeasurements

__all__ = ["publish"]


def publish(
    measurements: TableMeasurements,
    tmp: Path,
    run: Path,
    ledger: Ledger,
    *,
    swap: Callable[[Path, Path], None],
) -> None:
    """Record the run in ``ledger`` and swap it in, its privacy statement inside it."""
    from postdp.privacy import CONTENT_KEY, statement, table_content, write_statement

    work = measurements.workload
    content = table_content(measurements.table)
    record = {
        "input": "table",
        "input_sha256": content,
        CONTENT_KEY: content,
        "output": str(run.resolve()),
        "output_sha256": fingerprint(tmp),
        "path": "secure",
        "measurements": [
            {
                "level": m.level,
                "query": m.query.name,
                "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                "epsilon": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().epsilon,
                "rho": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().rho,
            }
            for m in work.measurements
        ],
    }

    def place(entry: dict[str, Any]) -> None:
        write_statement(tmp / "privacy.json", statement(entry, secure=True, derived=[]))
        swap(tmp, run)

    ledger.publish(work.budget, record, place, drawn=measurements.recorded)

"""Reproduce the seeds' tables and figures on the bundled data (``postdp reproduce``).

Each reproduction prints every number it reproduces next to the seed's printed value (or the
seed's claim, for figures that print none), with the difference and the tolerance that counts
as agreement, draws the figure, and explains what cannot be reproduced. Study path: numpy
draws from fixed seeds; nothing here publishes counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from postdp.report import Headline, Report, ReportTable
from postdp.reproduce._core import (
    REGISTRY,
    Comparison,
    Reproduction,
    Settings,
    comparison_frame,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Comparison",
    "Reproduction",
    "comparison_frame",
    "reproduce",
    "reproduction_report",
    "reproductions",
    "requirements",
]

_MODULES = ("seed000", "seed002_allotments", "seed002_rules", "seed003", "seed004")


def _load() -> None:
    import importlib

    for name in _MODULES:
        importlib.import_module(f"postdp.reproduce.{name}")


def reproductions() -> dict[str, str]:
    """Every reproduction's name and what it reproduces, in seed order.

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> names = reproductions()
    >>> "seed003-table3" in names and names["seed004-alpha"].startswith("α*")
    True
    """
    _load()
    items = sorted(REGISTRY.values(), key=lambda i: (i.seed, _natural(i.name)))
    return {i.name: i.what for i in items}


def requirements(name: str) -> tuple[str, ...]:
    """The optional modules one reproduction needs beyond matplotlib and Jinja2 (e.g.
    ``("sklearn",)`` for the learned proxies of [fioretto2021] Fig. 7).

    Examples
    --------
    >>> requirements("seed002-fig7"), requirements("seed004-alpha")
    (('sklearn',), ())
    """
    names = reproductions()
    if name not in names:
        from postdp.errors import ValidationError

        raise ValidationError(f"unknown reproduction {name!r}; one of {', '.join(names)}")
    return REGISTRY[name].needs


def _natural(name: str) -> tuple[object, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def reproduce(name: str, *, fast: bool = False) -> Reproduction:
    """Run one reproduction.

    Parameters
    ----------
    name : str
        One of :func:`reproductions`.
    fast : bool, default False
        Fewer draws (the tolerances widen with the Monte Carlo error, so agreement still
        means agreement).

    Returns
    -------
    Reproduction

    Examples
    --------
    >>> res = reproduce("seed003-table3")
    >>> res.rows[0].published, round(res.rows[0].reproduced, 2), res.rows[0].status
    (0.21, 0.21, 'agrees')
    """
    names = reproductions()
    if name not in names:
        from postdp.errors import ValidationError

        raise ValidationError(f"unknown reproduction {name!r}; one of {', '.join(names)}")
    return REGISTRY[name].run(Settings(fast=fast))


def _verdict(frame: pd.DataFrame) -> Headline:
    """The page's verdict in words: reproduced, reproduced with explained differences, or
    not reproduced (naming the first rows that differ or fail without an explanation)."""
    bad = frame[frame["status"].isin(["differs", "fails"])]
    explained = int((frame["status"] == "differs (explained)").sum())
    checked = int(frame["status"].isin(["agrees", "holds", "differs (explained)"]).sum())
    if len(bad):
        named = "; ".join(f"{r.item}: {r.quantity}" for r in bad.head(3).itertuples())
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return Headline(
            "verdict",
            "not reproduced",
            f"{len(bad)} of {len(bad) + checked} rows differ or fail with no explanation "
            f"({named}{more})",
        )
    if explained:
        return Headline(
            "verdict",
            "reproduced, with explained differences",
            f"{checked - explained} rows agree or hold; {explained} differ for the reasons "
            "given in the notes",
        )
    return Headline("verdict", "reproduced", f"all {checked} checked rows agree or hold")


def reproduction_report(results: Sequence[Reproduction], *, command: str = "") -> Report:
    """The HTML page comparing every reproduced number with the seeds (a :class:`Report`).

    Parameters
    ----------
    results : sequence of Reproduction
    command : str, default ""

    Returns
    -------
    postdp.report.Report

    Examples
    --------
    >>> rep = reproduction_report([reproduce("seed003-table3")])
    >>> rep.headline[0].value, rep.headline[1].value
    ('reproduced', '10 of 10')
    """
    frame = comparison_frame(results)
    numeric = frame[frame["status"].isin(["agrees", "differs", "differs (explained)"])]
    claims = frame[frame["status"].isin(["holds", "fails"])]
    headline = [
        Headline(
            "printed numbers reproduced",
            f"{int((numeric['status'] == 'agrees').sum())} of {len(numeric)}",
            "within the stated tolerance (half a unit of the last printed digit plus 4.5 "
            "Monte Carlo standard errors where we simulate)",
        ),
        Headline(
            "differences explained",
            f"{int((numeric['status'] == 'differs (explained)').sum())}",
            "with the evidence in the notes",
        ),
        Headline(
            "claims of figures that hold",
            f"{int((claims['status'] == 'holds').sum())} of {len(claims)}",
            "each checked on our numbers with Monte Carlo intervals",
        ),
    ]
    headline.insert(0, _verdict(frame))
    names = reproductions()
    notes = [f"{r.name}: {n}" for r in results for n in r.notes]
    return Report(
        title="The seeds' results, reproduced",
        summary=f"{len(results)} reproductions on the bundled public data: every printed "
        "number next to ours, the figures redrawn, and what cannot be reproduced, with why.",
        design={r.name: names.get(r.name, "") for r in results},
        privacy="Study path only: simulations with numpy's generator from fixed seeds on "
        "public data; nothing was published and no privacy was spent.",
        headline=headline,
        tables=[
            ReportTable(
                "Every reproduced number",
                frame,
                "published: the seed's printed value or claim; reproduced: ours; status: "
                "agrees (within tolerance), differs, differs (explained), holds/fails (a "
                "claim checked on our numbers) or shown (a value the seed only plots).",
                max_rows=10_000,
            )
        ],
        figures=[f for r in results for _, f in r.figures],
        notes=notes,
        command=command,
    )

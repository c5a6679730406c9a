"""What a reproduction returns, the registry of reproductions, and the comparison page.

Study path: every reproduction draws with numpy's generator from fixed seeds; nothing here
publishes counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = [
    "REGISTRY",
    "Comparison",
    "Reproduction",
    "Settings",
    "comparison_frame",
    "register",
]


@dataclass(frozen=True, slots=True)
class Settings:
    """How hard a reproduction works: ``fast`` cuts the draws (the test suite's subset)."""

    fast: bool = False

    def draws(self, full: int, fast: int) -> int:
        """The number of draws: ``full`` as in the seed, or ``fast``."""
        return fast if self.fast else full


@dataclass(frozen=True, slots=True)
class Comparison:
    """One reproduced number next to the seed's printed value.

    Parameters
    ----------
    quantity : str
        What the number is.
    reproduced : float
        Our value.
    published : float or str or None
        The seed's printed value, or its printed claim (qualitative), or None when the seed
        prints none (a figure only).
    tolerance : float or None
        The largest |reproduced - published| that counts as agreement (half a unit of the
        last printed digit plus z standard errors of a Monte Carlo value); None for claims.
    holds : bool or None
        For a qualitative claim: whether our numbers support it.
    note : str
        How the value was obtained, or why it differs (with the evidence).

    Examples
    --------
    >>> c = Comparison("Var AZ", 186.6667, 186.67, 0.005)
    >>> c.status, round(c.difference, 4)
    ('agrees', -0.0033)
    """

    quantity: str
    reproduced: float
    published: float | str | None = None
    tolerance: float | None = None
    holds: bool | None = None
    note: str = ""
    explained: bool = False

    @property
    def difference(self) -> float:
        """reproduced - published (NaN when the seed printed no number)."""
        if isinstance(self.published, int | float):
            return float(self.reproduced) - float(self.published)
        return math.nan

    @property
    def status(self) -> str:
        """``agrees``, ``differs``, ``differs (explained)``, ``holds``, ``fails`` or
        ``shown`` (a value the seed shows only in a figure)."""
        if isinstance(self.published, int | float):
            ok = self.tolerance is not None and abs(self.difference) <= self.tolerance
            if ok:
                return "agrees"
            return "differs (explained)" if self.explained else "differs"
        if self.holds is not None:
            return "holds" if self.holds else "fails"
        return "shown"


@dataclass(slots=True)
class Reproduction:
    """The numbers, figures and notes of one reproduced table or figure.

    Attributes
    ----------
    name : str
    rows : list of Comparison
    figures : list of (file name, ReportFigure)
    notes : list of str
        What is approximate, what the seed leaves unsaid, what cannot be reproduced and why.
    """

    name: str
    rows: list[Comparison] = field(default_factory=list)
    figures: list[tuple[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def figure(self, file: str, ax: Any, *, title: str, alt: str, caption: str) -> None:
        """Add the figure holding ``ax`` (drawn to PNG now)."""
        from postdp.report import ReportFigure

        ax.figure.tight_layout()
        self.figures.append(
            (file, ReportFigure.from_axes(ax, title=title, alt=alt, caption=caption))
        )


@dataclass(frozen=True, slots=True)
class Item:
    """A registered reproduction: its name, seed, what it covers, and the function."""

    name: str
    seed: str
    what: str
    run: Callable[[Settings], Reproduction]
    needs: tuple[str, ...] = ()  # optional modules beyond matplotlib and jinja2


REGISTRY: dict[str, Item] = {}


def register(
    name: str, seed: str, what: str, *, needs: tuple[str, ...] = ()
) -> Callable[[Any], Any]:
    """Decorator adding a reproduction to :data:`REGISTRY`."""

    def add(run: Callable[[Settings], Reproduction]) -> Callable[[Settings], Reproduction]:
        REGISTRY[name] = Item(name, seed, what, run, needs)
        return run

    return add


def comparison_frame(results: Sequence[Reproduction]) -> pd.DataFrame:
    """Every reproduced number of ``results``, one row each, with its status."""
    rows = []
    for res in results:
        for c in res.rows:
            rows.append(
                {
                    "item": res.name,
                    "quantity": c.quantity,
                    "published": c.published if c.published is not None else "",
                    "reproduced": float(c.reproduced),
                    "difference": c.difference,
                    "tolerance": c.tolerance if c.tolerance is not None else math.nan,
                    "status": c.status,
                    "note": c.note,
                }
            )
    frame = pd.DataFrame(rows)
    frame["published"] = frame["published"].astype(str)
    return frame

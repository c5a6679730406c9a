"""The words of a fairness study: figure captions and headline cards (private; used by
:mod:`postdp.report.fairness_study`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import FloatArray
from postdp.report._model import Headline, format_value

__all__ = ["CAPTIONS", "section203_headlines", "title1_headlines"]

CAPTIONS = {
    "title1": (
        "Bias of each district's allotment against its count of poor children "
        "([fioretto2021], Fig. 2)",
        "Bias in dollars of every school district's Title I allotment against its true "
        "count of poor children, one series per epsilon.",
        "A point above zero is a district that receives more on average than without noise. "
        "{direction}"
        "Each bias is a Monte Carlo mean: its 95% interval is bias ± 1.96 SE (bias_lo, "
        "bias_hi in the table), so points within that band of zero show no detectable bias.",
    ),
    "section203": (
        "Decision error against the distance to the thresholds ([fioretto2021], Fig. 3)",
        "Probability that the noisy Section 203 decision differs from the true one, against "
        "each record's margin to the nearest threshold.",
        "Errors concentrate near a margin of zero: records close to a threshold flip often, "
        "records far from it almost never. Each probability is a Monte Carlo frequency with "
        "standard error sqrt(p(1 - p)/draws).",
    ),
}


def title1_headlines(tag: str, rep: Any, name: str, big: int) -> list[Headline]:
    noise = rep.alpha_noise_bound()
    reading = "above it: unfair" if rep.alpha > noise else "within it: no unfairness shown"
    return [
        Headline(
            f"fairness bound α ({tag})",
            _dollars(rep.alpha),
            "largest minus smallest bias of an allotment, in dollars; simulation noise alone "
            f"gives up to {_dollars(noise)} (99%, from the two largest SEs) ({reading})",
        ),
        Headline(
            f"dollars misallocated ({tag})",
            _dollars(rep.cost_of_privacy()),
            "sum of the expected losses of the districts that lose (cost of privacy, "
            "[fioretto2021] Def. 4)",
        ),
        Headline(
            f"largest district ({tag})",
            _dollars(float(rep.bias[big])),
            f"{name}: bias ± ${1.96 * float(rep.bias_se[big]):,.0f} (95%)",
        ),
    ]


def _dollars(value: float) -> str:
    return ("−$" if value < 0 else "$") + format_value(abs(value))


def section203_headlines(tag: str, rep: Any, truth: FloatArray) -> list[Headline]:
    err = np.abs(rep.bias)
    return [
        Headline(
            f"mean decision error ({tag})",
            f"{err.mean():.3f}",
            f"probability (0 to 1) that a record's decision flips, averaged over "
            f"{truth.size:,} records ({int(truth.sum()):,} covered)",
        ),
        Headline(
            f"fairness bound α ({tag})",
            f"{rep.absolute_alpha:.3f}",
            "largest minus smallest decision-error probability; simulation noise alone gives "
            f"up to {rep.alpha_noise_bound():.3f} (99%) ("
            + (
                "above it: unfair"
                if rep.absolute_alpha > rep.alpha_noise_bound()
                else "within it: no unfairness shown"
            )
            + ")",
        ),
        Headline(
            f"records with errors above 0.1 ({tag})",
            f"{int((err > 0.1).sum()):,} of {truth.size:,}",
            "the ones close to a threshold",
        ),
    ]

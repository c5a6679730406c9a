"""Streaming statistics of errors over Monte Carlo draws (private; one implementation for
the audit engine and the fairness engines).

Each batch of errors (draws on axis 0, entities last) is reduced to power sums, absolute
sums and extremes per entity; totals are combined in place, in a fixed batch order, so a
seed gives identical results however the draws are batched or distributed.
"""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, NumArray

__all__ = ["Accumulator", "combine", "power_sums"]


def power_sums(err: FloatArray, *, order: int = 4) -> dict[str, NumArray]:
    """Σ e, Σ e², ... up to ``order``, Σ |e|, min and max of the errors over axis 0."""
    out: dict[str, NumArray] = {"n": np.array(err.shape[0]), "s1": err.sum(axis=0)}
    power = err * err  # in place below: this runs on every value
    out["s2"] = power.sum(axis=0)
    for k in range(3, order + 1):
        power *= err
        out[f"s{k}"] = power.sum(axis=0)
    np.abs(err, out=power)
    out["sabs"] = power.sum(axis=0)
    out["lo"] = err.min(axis=0)
    out["hi"] = err.max(axis=0)
    return out


def combine(total: dict[str, NumArray], part: dict[str, NumArray]) -> dict[str, NumArray]:
    """Add ``part`` into ``total`` in place (sums add; ``lo``/``hi`` take min/max)."""
    for key, value in part.items():
        if key == "lo":
            np.minimum(total[key], value, out=total[key])
        elif key == "hi":
            np.maximum(total[key], value, out=total[key])
        else:
            total[key] += value
    return total


class Accumulator:
    """Running statistics of a per-entity error, batch after batch."""

    def __init__(self, *, order: int = 2) -> None:
        self.order = order
        self.total: dict[str, NumArray] | None = None

    def add(self, err: FloatArray) -> None:
        """Absorb a batch of errors, shape (draws, entities)."""
        part = power_sums(err, order=self.order)
        self.total = part if self.total is None else combine(self.total, part)

    @property
    def count(self) -> int:
        """Draws absorbed so far."""
        return 0 if self.total is None else int(self.total["n"])

    def mean_and_se(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Mean, its standard error, and the mean absolute value per entity."""
        assert self.total is not None
        n = float(self.total["n"])
        mean: FloatArray = self.total["s1"] / n
        var = np.maximum(self.total["s2"] / n - mean**2, 0.0) * n / max(n - 1.0, 1.0)
        mae: FloatArray = self.total["sabs"] / n
        return mean, np.sqrt(var / n), mae

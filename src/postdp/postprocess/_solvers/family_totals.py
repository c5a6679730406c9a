"""The children's totals in the 2020 TopDown (private): least-squares pass 0 (the totals
closest to their noisy totals, a weighted simplex projection), the rounder's largest
remainders."""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError
from postdp.postprocess._solvers.simplex import weighted_simplex
from postdp.tables import Measurement

__all__ = ["largest_remainders", "pass_zero"]


def pass_zero(
    totals: list[tuple[int, Measurement]],
    values: list[FloatArray],
    rows: IntArray,
    total: float,
    a: FloatArray | None = None,
) -> FloatArray:
    """Least-squares pass 0: children's totals >= 0 adding up to ``total``, closest to their
    noisy totals (several measurements of the total combined by their weights; child j's
    distance weighted by a_j)."""
    weight = sum(1.0 / m.variance for _, m in totals)
    y = sum(values[i][rows, 0] / m.variance for i, m in totals) / weight
    h = np.ones(rows.size) if a is None else a
    return weighted_simplex(np.asarray(y, dtype=np.float64), h, total)


def largest_remainders(t: FloatArray, total: int) -> IntArray:
    """Integers, each the floor or ceiling of t, adding up to ``total``, L1-closest to t."""
    base = np.floor(t).astype(np.int64)
    extra = total - int(base.sum())
    if not 0 <= extra <= t.size:
        raise ConvergenceError("the children's totals do not add up to the parent's")
    order = np.argsort(-(t - base), kind="stable")
    base[order[:extra]] += 1
    return base

"""The one interval type of postdp's results (confidence and credible intervals)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp._typing import FloatArray
from postdp.errors import ValidationError

__all__ = ["ConfidenceInterval"]


@dataclass(frozen=True, slots=True, eq=False)
class ConfidenceInterval:
    """Lower and upper ends of intervals at one level, one pair per entity.

    Used for Monte Carlo confidence intervals (estimate ± z·SE) and for posterior credible
    intervals. Unpacks as ``low, high = interval``.

    Attributes
    ----------
    low, high : ndarray, shape (n,)
        The ends, ``low <= high``.
    level : float
        Nominal coverage in (0, 1), e.g. 0.95.

    Examples
    --------
    >>> import numpy as np
    >>> ci = ConfidenceInterval(np.array([0.0, 1.0]), np.array([2.0, 3.0]), 0.95)
    >>> low, high = ci
    >>> ci.contains([1.0, 5.0]).tolist(), ci.width.tolist()
    ([True, False], [2.0, 2.0])
    """

    low: FloatArray
    high: FloatArray
    level: float

    def __post_init__(self) -> None:
        low = np.asarray(self.low, dtype=np.float64)
        high = np.asarray(self.high, dtype=np.float64)
        if low.shape != high.shape:
            raise ValidationError(
                f"`low` and `high` must have one shape; got {low.shape} and {high.shape}"
            )
        if not 0.0 < float(self.level) < 1.0:
            raise ValidationError(f"`level` must lie strictly between 0 and 1; got {self.level!r}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "level", float(self.level))

    def __iter__(self) -> Iterator[FloatArray]:
        return iter((self.low, self.high))

    @property
    def width(self) -> FloatArray:
        """``high - low``."""
        out: FloatArray = self.high - self.low
        return out

    def contains(self, values: object) -> npt.NDArray[np.bool_]:
        """Whether each value lies in its interval (ends included).

        Examples
        --------
        >>> ConfidenceInterval(np.array([0.0]), np.array([1.0]), 0.9).contains([1.0]).tolist()
        [True]
        """
        x = np.asarray(values, dtype=np.float64)
        return (self.low <= x) & (x <= self.high)

    def to_frame(self) -> pd.DataFrame:
        """One row per entity: low, high, level.

        Examples
        --------
        >>> ConfidenceInterval(np.array([0.0]), np.array([1.0]), 0.9).to_frame()
           low  high  level
        0  0.0   1.0    0.9
        """
        return pd.DataFrame({"low": self.low, "high": self.high, "level": self.level})

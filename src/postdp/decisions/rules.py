"""Decision rules as composable predicates: thresholds, ratios, and/or/xor ([fioretto2021] §4-5)."""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from postdp import _validation
from postdp._typing import ArrayLike
from postdp.errors import ValidationError

__all__ = ["Composite", "Ratio", "Rule", "Threshold", "section203_margin", "section203_rule"]

BoolArray = npt.NDArray[np.bool_]
Data = Mapping[str, ArrayLike]
Comparison = Literal[">", ">=", "<", "<="]
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _feature(data: Data, name: str) -> npt.NDArray[np.float64]:
    if name not in data:
        raise ValidationError(f"rule feature {name!r} is not in the data; it has {sorted(data)}")
    return _validation.real_array(name, data[name]).astype(np.float64)


class Rule(ABC):
    """A yes/no decision per entity, evaluated on named count arrays (any batch shape).

    Rules compose with ``&`` (and), ``|`` (or) and ``^`` (xor).

    Examples
    --------
    >>> r = Threshold("x", 10) & Ratio("y", "x", 0.5)
    >>> r({"x": [20, 20, 5], "y": [15, 5, 4]}).tolist()
    [True, False, False]
    """

    @abstractmethod
    def __call__(self, data: Data) -> BoolArray:
        """Evaluate the rule; arrays broadcast, so draws can sit on leading axes."""

    @property
    @abstractmethod
    def features(self) -> frozenset[str]:
        """Names of the counts the rule reads."""

    def __and__(self, other: Rule) -> Rule:
        return Composite("and", self, other)

    def __or__(self, other: Rule) -> Rule:
        return Composite("or", self, other)

    def __xor__(self, other: Rule) -> Rule:
        return Composite("xor", self, other)


@dataclass(frozen=True, slots=True)
class Threshold(Rule):
    """``feature > threshold`` (or another comparison).

    Examples
    --------
    >>> Threshold("x", 3, compare=">=")({"x": [2, 3]}).tolist()
    [False, True]
    """

    feature: str
    threshold: float
    compare: Comparison = field(default=">", kw_only=True)

    def __post_init__(self) -> None:
        if self.compare not in _COMPARE:
            raise ValidationError(
                f"`compare` must be one of {list(_COMPARE)}; got {self.compare!r}"
            )

    def __call__(self, data: Data) -> BoolArray:
        out: BoolArray = _COMPARE[self.compare](_feature(data, self.feature), self.threshold)
        return out

    @property
    def features(self) -> frozenset[str]:
        return frozenset({self.feature})


@dataclass(frozen=True, slots=True)
class Ratio(Rule):
    """``numerator / denominator > threshold`` (or another comparison).

    A denominator <= 0 (possible for noisy counts) makes the predicate False: there is no
    population to qualify. Documented handling, never a NaN.

    Examples
    --------
    >>> Ratio("a", "b", 0.05)({"a": [1, 6, 3], "b": [100, 100, 0]}).tolist()
    [False, True, False]
    """

    numerator: str
    denominator: str
    threshold: float
    compare: Comparison = field(default=">", kw_only=True)

    def __post_init__(self) -> None:
        if self.compare not in _COMPARE:
            raise ValidationError(
                f"`compare` must be one of {list(_COMPARE)}; got {self.compare!r}"
            )

    def __call__(self, data: Data) -> BoolArray:
        num = _feature(data, self.numerator)
        den = _feature(data, self.denominator)
        positive = den > 0
        ratio = num / np.where(positive, den, 1.0)
        out: BoolArray = positive & _COMPARE[self.compare](ratio, self.threshold)
        return out

    @property
    def features(self) -> frozenset[str]:
        return frozenset({self.numerator, self.denominator})


@dataclass(frozen=True, slots=True)
class Composite(Rule):
    """Two rules joined by ``and``, ``or`` or ``xor``.

    Examples
    --------
    >>> (Threshold("x", 0) ^ Threshold("x", 5))({"x": [-1, 3, 9]}).tolist()
    [False, True, False]
    """

    op: Literal["and", "or", "xor"]
    left: Rule
    right: Rule

    def __call__(self, data: Data) -> BoolArray:
        a, b = self.left(data), self.right(data)
        if self.op == "and":
            return a & b
        if self.op == "or":
            return a | b
        if self.op == "xor":
            return a ^ b
        raise ValidationError(f"unknown operator {self.op!r}")

    @property
    def features(self) -> frozenset[str]:
        return self.left.features | self.right.features


def section203_rule() -> Rule:
    """The Section 203 rule P^M of [fioretto2021] §4 on x^s, x^sp, x^spe.

    (x^sp/x^s > 0.05 or x^sp > 10^4) and x^spe/x^sp > 0.0131, with the bundled data's
    columns: x^s = ``vacit_total``, x^sp = ``vaclep``, x^spe = ``illit``.

    Parameters
    ----------
    None

    Returns
    -------
    Rule

    Examples
    --------
    >>> rule = section203_rule()
    >>> rule({"vacit_total": [1000, 10**6], "vaclep": [100, 20000], "illit": [1, 1000]}).tolist()
    [False, True]
    """
    return (Ratio("vaclep", "vacit_total", 0.05) | Threshold("vaclep", 1e4)) & Ratio(
        "illit", "vaclep", 0.0131
    )


def section203_margin(data: Data) -> npt.NDArray[np.float64]:
    """Relative distance of each record's true Section 203 decision to flipping.

    For (A or B) and C with A: x^sp/x^s > 0.05, B: x^sp > 10^4, C: x^spe/x^sp > 0.0131, the
    margin of a condition is |value - threshold| / threshold. A positive decision flips when
    C fails or when every true part of (A or B) fails, so its margin is
    min(max(margins of the true parts of A, B), margin of C). A negative decision flips
    only when every failing part of the rule comes true: C if it fails, and the nearer of
    A and B if both fail, so its margin is the max of those. Used to order decision errors
    by distance to the thresholds ([fioretto2021] Fig. 3).

    Parameters
    ----------
    data : mapping with ``vacit_total``, ``vaclep``, ``illit``

    Returns
    -------
    ndarray of float, shape (n,)
        Nonnegative; zero only for a record exactly at a threshold it must cross.

    Examples
    --------
    >>> section203_margin({"vacit_total": [100_000], "vaclep": [6_000], "illit": [100]}).round(3)
    array([0.2])
    >>> section203_margin({"vacit_total": [100_000], "vaclep": [4_000], "illit": [100]}).round(3)
    array([0.2])
    """
    st = _feature(data, "vacit_total")
    sp = _feature(data, "vaclep")
    spe = _feature(data, "illit")
    share = sp / np.where(st > 0, st, 1.0)
    dist_a = np.abs(share - 0.05) / 0.05
    dist_b = np.abs(sp - 1e4) / 1e4
    dist_c = np.abs(spe / np.maximum(sp, 1.0) - 0.0131) / 0.0131
    a, b, c = share > 0.05, sp > 1e4, spe / np.maximum(sp, 1.0) > 0.0131
    positive_margin = np.minimum(
        np.maximum(np.where(a, dist_a, 0.0), np.where(b, dist_b, 0.0)), dist_c
    )
    negative_margin = np.maximum(
        np.where(a | b, 0.0, np.minimum(dist_a, dist_b)), np.where(c, 0.0, dist_c)
    )
    out: npt.NDArray[np.float64] = np.where((a | b) & c, positive_margin, negative_margin)
    return out

"""How decision errors and fairness bounds compose across predicates ([fioretto2021] §5.3:
Lemmas 1-3 for the error probabilities of and/or/xor, Thms 5-6 for the bound α)."""

from __future__ import annotations

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.decisions.fairness import FairnessReport
from postdp.errors import ValidationError

__all__ = ["and_error", "composition_bound", "or_error", "xor_error"]


def _probs(*values: ArrayLike) -> list[FloatArray]:
    out = []
    for v in values:
        arr = np.asarray(v, dtype=np.float64)
        if ((arr < 0) | (arr > 1)).any():
            raise ValidationError("decision-error probabilities must lie in [0, 1]")
        out.append(arr)
    return out


def and_error(b1: ArrayLike, b2: ArrayLike, p1: ArrayLike, p2: ArrayLike) -> FloatArray:
    """Error probability of P1 ∧ P2 from those of P1 and P2 ([fioretto2021] Lemma 1).

    Parameters
    ----------
    b1, b2 : array_like
        |B| of each predicate (its error probability), independent noise.
    p1, p2 : array_like of bool
        True value of each predicate.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> float(and_error(0.1, 0.2, True, True))  # b1 + b2 - b1 b2
    0.28
    """
    e1, e2 = _probs(b1, b2)
    t1, t2 = np.asarray(p1, dtype=bool), np.asarray(p2, dtype=bool)
    out: FloatArray = np.select(
        [~t1 & ~t2, ~t1 & t2, t1 & ~t2],
        [e1 * e2, e1 * (1 - e2), (1 - e1) * e2],
        e1 + e2 - e1 * e2,
    )
    return out


def or_error(b1: ArrayLike, b2: ArrayLike, p1: ArrayLike, p2: ArrayLike) -> FloatArray:
    """Error probability of P1 ∨ P2 ([fioretto2021] Lemma 2).

    Parameters
    ----------
    b1, b2 : array_like
        |B| of each predicate (its error probability), independent noise.
    p1, p2 : array_like of bool
        True value of each predicate.

    Returns
    -------
    ndarray

    Notes
    -----
    P1 ∨ P2 = ¬(¬P1 ∧ ¬P2), and negating a predicate changes neither its error
    probability nor whether the composite errs, so Lemma 2 is Lemma 1 on the negated truths.

    Examples
    --------
    >>> float(or_error(0.1, 0.2, False, False))  # b1 + b2 - b1 b2
    0.28
    """
    return and_error(b1, b2, ~np.asarray(p1, dtype=bool), ~np.asarray(p2, dtype=bool))


def xor_error(b1: ArrayLike, b2: ArrayLike) -> FloatArray:
    """Error probability of P1 ⊕ P2, whatever the truth values ([fioretto2021] Lemma 3).

    Parameters
    ----------
    b1, b2 : array_like
        |B| of each predicate, independent noise.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> float(xor_error(0.1, 0.2))  # b1 + b2 - 2 b1 b2
    0.26
    """
    e1, e2 = _probs(b1, b2)
    out: FloatArray = e1 + e2 - 2 * e1 * e2
    return out


def composition_bound(
    first: FairnessReport | tuple[float, float],
    second: FairnessReport | tuple[float, float],
    *,
    op: str = "and",
) -> float:
    """Fairness bound of a composed predicate ([fioretto2021] Thm 5 for and/or, Thm 6 for xor).

    Parameters
    ----------
    first, second : FairnessReport or (alpha, min_bias)
        The two predicates P1 and P2: a report of each (its α on absolute biases and its
        smallest absolute bias B̲ are read from it), or the pair (α, B̲) directly.
    op : {"and", "or", "xor"}

    Returns
    -------
    float
        and/or: α1 + B̲1 + α2 + B̲2 - (α1 + B̲1)(α2 + B̲2) - B̲1 B̲2;
        xor: α1 (1 - 2B̲2) + α2 (1 - 2B̲1) - 2 α1 α2.

    Examples
    --------
    >>> round(composition_bound((0.1, 0.01), (0.05, 0.02), op="and"), 6)
    0.1721
    >>> composition_bound((0.0, 0.1), (0.0, 0.2), op="xor")  # Corollary 3: fair stays fair
    0.0
    """
    a1, m1 = _alpha_and_floor(first, "first")
    a2, m2 = _alpha_and_floor(second, "second")
    if op in ("and", "or"):
        return a1 + m1 + a2 + m2 - (a1 + m1) * (a2 + m2) - m1 * m2
    if op == "xor":
        return a1 * (1 - 2 * m2) + a2 * (1 - 2 * m1) - 2 * a1 * a2
    raise ValidationError(f"`op` must be 'and', 'or' or 'xor'; got {op!r}")


def _alpha_and_floor(value: FairnessReport | tuple[float, float], name: str) -> tuple[float, float]:
    """(α, smallest |B|) of a predicate, from its report or given directly."""
    if isinstance(value, FairnessReport):
        return value.absolute_alpha, float(np.abs(value.bias).min())
    try:
        alpha, floor = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValidationError(
            f"`{name}` must be a FairnessReport or a pair (alpha, min_bias); got {value!r}"
        ) from None
    for label, v in (("alpha", alpha), ("min_bias", floor)):
        if not 0.0 <= v <= 1.0:
            raise ValidationError(f"`{name}` {label} must lie in [0, 1]; got {v!r}")
    return alpha, floor

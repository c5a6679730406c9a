"""Proportional allotments (Title I basic grants, [fioretto2021] §4) and their curvature."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError

__all__ = [
    "allot",
    "allotment_hessian_trace",
    "numerical_hessian_trace",
    "predicted_allotment_bias",
]


def _multipliers(multipliers: ArrayLike, n: int) -> FloatArray:
    w = _validation.real_array("multipliers", multipliers).astype(np.float64)
    if w.shape != (n,):
        raise ValidationError(
            f"`multipliers` must have shape ({n},), one per entity; got {w.shape}"
        )
    bad = ~(w > 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(
            "`multipliers` must be positive (every entity needs its multiplier); got "
            f"{w[i].item()!r} at index {i}"
        )
    return w


def allot(x: ArrayLike, multipliers: ArrayLike, *, amount: float = 1.0) -> FloatArray:
    """The proportional allotment P^F_i = a_i x_i / Σ_j a_j x_j, times an amount.

    Parameters
    ----------
    x : array_like, shape (..., n)
        Counts of each entity (e.g. poor children 5-17 per school district); leading axes
        are draws.
    multipliers : array_like, shape (n,)
        Positive multipliers a_i (e.g. the Title I state expenditure factor).
    amount : float, default 1
        Amount distributed (1 gives shares; 6.5e9 the Title I basic grants in dollars).

    Returns
    -------
    ndarray, shape (..., n)

    Raises
    ------
    ValidationError
        If a weight is missing or not positive, or a draw's weighted total Σ a_j x_j is not
        positive (noisy counts without post-processing can cause it on tiny problems).

    Examples
    --------
    >>> allot([10, 30], [1.0, 1.0], amount=100).tolist()
    [25.0, 75.0]
    """
    values = _validation.real_array("x", x).astype(np.float64)
    if values.ndim == 0:
        raise ValidationError("`x` must have at least one axis (the entities)")
    w = _multipliers(multipliers, values.shape[-1])
    amount = _validation.positive_real("amount", amount)
    total = (values * w).sum(axis=-1, keepdims=True)
    if (total <= 0).any():
        raise ValidationError(
            "the weighted total Σ a_j x_j must be positive in every draw; got "
            f"{total.min().item()!r}"
        )
    out: FloatArray = amount * values * w / total
    return out


def allotment_hessian_trace(x: ArrayLike, multipliers: ArrayLike) -> FloatArray:
    """Tr(H P^F_i) in closed form ([fioretto2021], Example 1).

    Tr(H P^F_i) = 2 a_i (x_i Σ_j a_j² - a_i Z) / Z³ with Z = Σ_j a_j x_j.

    Parameters
    ----------
    x : array_like, shape (n,)
    multipliers : array_like, shape (n,)

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> allotment_hessian_trace([1.0, 1.0], [1.0, 1.0]).tolist()
    [0.0, 0.0]
    """
    values = _validation.real_array("x", x).astype(np.float64)
    w = _multipliers(multipliers, values.shape[-1])
    Z = float((values * w).sum())
    out: FloatArray = 2 * w * (values * (w**2).sum() - w * Z) / Z**3
    return out


def numerical_hessian_trace(
    problem: Callable[[FloatArray], FloatArray], x: ArrayLike, *, step: float | None = None
) -> FloatArray:
    """Tr(H P_i)(x) for every entity i of any allotment function, by central differences.

    Parameters
    ----------
    problem : callable
        Maps counts of shape (m, n) to allotments of shape (m, n) (a batch of inputs).
    x : array_like, shape (n,)
    step : float, optional
        Finite-difference step (default 1e-3 x max(1, |x|)).

    Returns
    -------
    ndarray, shape (n,)
        Σ_j (P_i(x + h e_j) - 2 P_i(x) + P_i(x - h e_j)) / h², all 2n + 1 inputs in one batch.

    Examples
    --------
    >>> w = np.array([1.0, 2.0, 3.0])
    >>> x = np.array([5.0, 1.0, 2.0])
    >>> tr = numerical_hessian_trace(lambda v: allot(v, w), x)
    >>> bool(np.allclose(tr, allotment_hessian_trace(x, w), rtol=1e-5))
    True
    """
    values = _validation.real_array("x", x).astype(np.float64)
    n = values.size
    h = step if step is not None else 1e-3 * max(1.0, float(np.abs(values).max()))
    eye = np.eye(n) * h
    batch = np.concatenate([values[None, :], values + eye, values - eye])
    out = np.asarray(problem(batch), dtype=np.float64)
    centre, plus, minus = out[0], out[1 : n + 1], out[n + 1 :]
    trace: FloatArray = ((plus + minus - 2 * centre) / h**2).sum(axis=0)
    return trace


def predicted_allotment_bias(
    x: ArrayLike, multipliers: ArrayLike, variance: ArrayLike, *, amount: float = 1.0
) -> FloatArray:
    """Second-order prediction of the bias of P^F under noise of the given variances (Thm 3).

    B_i ≈ ½ Σ_j Var(η_j) ∂²P_i/∂x_j², which for equal variances is ½ Var(η) Tr(H P_i); for
    P^F the diagonal second derivatives are 2 a_i x_i a_j² / Z³ (j ≠ i) and
    2 a_i³ x_i / Z³ - 2 a_i² / Z² (j = i).

    Parameters
    ----------
    x : array_like, shape (n,)
    multipliers : array_like, shape (n,)
    variance : float or array_like, shape (n,)
        Variance of the noise on each count.
    amount : float, default 1

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> x, w = np.array([10.0, 90.0]), np.ones(2)
    >>> bool(np.allclose(predicted_allotment_bias(x, w, 2.0),
    ...                  0.5 * 2.0 * allotment_hessian_trace(x, w)))
    True
    """
    values = _validation.real_array("x", x).astype(np.float64)
    w = _multipliers(multipliers, values.size)
    var = np.broadcast_to(
        _validation.real_array("variance", variance).astype(np.float64), values.shape
    )
    Z = float((values * w).sum())
    out: FloatArray = amount * (w * values * float((var * w**2).sum()) / Z**3 - w**2 * var / Z**2)
    return out

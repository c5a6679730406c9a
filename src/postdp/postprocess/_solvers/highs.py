"""HiGHS, called directly through its own Python interface (private).

``scipy.optimize.linprog`` solves with the same HiGHS, but prepares each call in Python:
it validates and copies the inputs, builds a table of every HiGHS option, checks each
option given, and makes a new solver. For one large linear program that is nothing; the
2020 rounder solves one small network per family (hundreds of thousands for the nation),
where it was three quarters of the time of the rounding (synthetic District of Columbia:
linprog 5.96 s against 2.15 s here for its first 400 families, the same optima to 5e-11).

Each thread keeps one solver and passes it one model after another; a model passed
replaces the last one, its solution and its basis, so every solve starts afresh (the same
answer as a new solver's). Logging is off from the solver's creation: HiGHS then writes
nothing to the standard output, not even its banner.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from postdp._typing import FloatArray

__all__ = ["LinearResult", "solve_equalities", "solve_quadratic"]

_local = threading.local()


@dataclass(frozen=True, slots=True)
class LinearResult:
    """A solved linear program: ``optimal``, the ``x`` and objective ``fun`` when it is,
    and HiGHS's ``message`` for its model status."""

    optimal: bool
    x: FloatArray | None
    fun: float
    message: str


def _solver(name: str = "highs") -> Any:
    """This thread's solver ``name`` (the linear programs' or the quadratic ones': a QP's
    Hessian never meets a later linear program)."""
    h = getattr(_local, name, None)
    if h is None:
        import highspy

        # the bare solver class: highspy.Highs's constructor logs the banner before any
        # option can be set (it enables its callbacks), this one logs nothing until told
        h = highspy._Highs()  # type: ignore[attr-defined]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")  # networks: presolve costs more than it saves
        h.setOptionValue("threads", 1)
        setattr(_local, name, h)
    return h


def solve_equalities(
    cost: FloatArray, A: Any, rhs: FloatArray, lower: FloatArray, upper: FloatArray
) -> LinearResult:
    """min cost' x subject to A x = rhs and lower <= x <= upper, by HiGHS's dual simplex.

    ``A`` is a scipy sparse matrix (rows: constraints, columns: variables); presolve is
    off (the rounder's networks gain nothing from it)."""
    import highspy

    csc = A.tocsc()
    if not csc.has_sorted_indices:
        csc.sort_indices()
    n_rows, n_cols = csc.shape
    b = np.ascontiguousarray(rhs, dtype=np.float64)
    h = _solver()
    # the arrays' own overload: no Python list is made of any of them
    status = h.passModel(
        n_cols, n_rows, csc.nnz,
        int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize), 0.0,
        np.ascontiguousarray(cost, dtype=np.float64),
        np.ascontiguousarray(lower, dtype=np.float64),
        np.ascontiguousarray(upper, dtype=np.float64),
        b, b,
        csc.indptr.astype(np.int32, copy=False),
        csc.indices.astype(np.int32, copy=False),
        csc.data.astype(np.float64, copy=False),
        np.zeros(n_cols, dtype=np.int32),  # every column continuous
    )  # fmt: skip
    return _run(h, status)


def solve_quadratic(
    hessian: Any,
    cost: FloatArray,
    A: Any,
    rhs: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
) -> LinearResult:
    """min 1/2 x'Qx + cost' x subject to A x = rhs and lower <= x <= upper, by HiGHS's
    active-set QP solver (Q positive semidefinite; ``hessian`` its lower triangle, any
    scipy sparse matrix). Scale the objective to Q's diagonal near 1: HiGHS's tolerances
    are absolute (a family's Q of 0.001 I stalled it; divided by 0.001 it took 17 ms)."""
    import highspy
    from scipy import sparse

    csc = A.tocsc()
    csc.sort_indices()
    q = sparse.tril(hessian, format="csc")
    q.sort_indices()
    n_rows, n_cols = csc.shape
    b = np.ascontiguousarray(rhs, dtype=np.float64)
    h = _solver("qp")
    # an active set takes about one step per unknown and row; a stall ends as not optimal
    h.setOptionValue("qp_iteration_limit", 20 * (n_cols + n_rows) + 1000)
    status = h.passModel(
        n_cols, n_rows, csc.nnz, q.nnz,
        int(highspy.MatrixFormat.kColwise), int(highspy.HessianFormat.kTriangular),
        int(highspy.ObjSense.kMinimize), 0.0,
        np.ascontiguousarray(cost, dtype=np.float64),
        np.ascontiguousarray(lower, dtype=np.float64),
        np.ascontiguousarray(upper, dtype=np.float64),
        b, b,
        csc.indptr.astype(np.int32), csc.indices.astype(np.int32),
        csc.data.astype(np.float64),
        q.indptr.astype(np.int32), q.indices.astype(np.int32), q.data.astype(np.float64),
        np.zeros(n_cols, dtype=np.int32),
    )  # fmt: skip
    return _run(h, status)


def _run(h: Any, status: Any) -> LinearResult:
    """Solve the model passed (``status``: what passing it returned) and read the answer."""
    import highspy

    if status != highspy.HighsStatus.kOk:
        return LinearResult(False, None, float("nan"), f"HiGHS refused the model ({status})")
    h.run()
    model = h.getModelStatus()
    message = h.modelStatusToString(model)
    if model != highspy.HighsModelStatus.kOptimal:
        return LinearResult(False, None, float("nan"), message)
    x = np.array(h.getSolution().col_value, dtype=np.float64)
    return LinearResult(True, x, float(h.getInfo().objective_function_value), message)

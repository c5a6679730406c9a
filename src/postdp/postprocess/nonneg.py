"""(P+) for tables: the nonnegative least-squares table, exactly, without a QP solver.

The problem is (P) of :mod:`postdp.postprocess.gls` with every detailed cell of every
leaf geounit >= 0. Its solution is (P) with the right set of leaf cells held at 0 (the
active set), found by block principal pivoting (Judice and Pires, as for hierarchies in
:mod:`postdp.postprocess._solvers.active_set`): solve (P) with the current set held at 0; a free
cell below 0 joins the set, a held cell whose multiplier is below 0 leaves it; all at once
while the number of wrong cells falls, then one at a time (Murty's least-index rule,
finite for this strictly convex problem).

The inner solve is the same Kalman filter and smoother on the geography as (P), with a
held cell a noise-free measurement "cell = 0" at its leaf geounit. Held cells differ from
leaf to leaf, so the c x c matrices are per geounit here (not per subtree shape), computed
in batched numpy per level: O(geounits x c^3) per round, one draw at a time.

Multipliers: the gradient of the objective at a leaf cell is the sum, over the geounits on
its path from the root, of each geounit's own weighted residual A' W (A t - y); public
queries add a multiplier per (geounit, query group), found by least squares over the free
cells (where the reduced gradient must vanish). At held cells the reduced gradient is the
cell's multiplier, which must be >= 0.

A one-cell table (a hierarchy of counts) takes the hierarchy's pivoting over the leaves,
every draw at once (:mod:`postdp.postprocess._solvers.one_cell`). :func:`nnls_report` is
the (P+) certificate of a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._kernels import FlatTree
from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.postprocess._solvers.certificate import checked_estimate
from postdp.postprocess._solvers.nonneg_pivoting import BoolArray, Draw
from postdp.postprocess._solvers.one_cell import solve_one_cell
from postdp.postprocess.gls import TableProjector
from postdp.tables import Table, TableMeasurements, Workload
from postdp.tables.bypass import uniform_budget

__all__ = ["TableNonnegProjector", "TableNonnegReport", "nnls_report"]


@dataclass(frozen=True, eq=False)
class TableNonnegProjector:
    """(P+) for one table geography, category tree and workload, for many draws.

    Parameters
    ----------
    table : Table
        Supplies the geography and the category tree (its counts are not read).
    workload : Workload
        Any noisy and public queries (public ones at any level), as for
        :class:`TableProjector`.

    Raises
    ------
    ValidationError
        As :class:`TableProjector`.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[0, 3], [1, 0]])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), None)]
    ...              + [Measurement(d, Query.detailed(cat), Gaussian(rho=0.5)) for d in (0, 1)])
    >>> out = TableNonnegProjector(t, w)(measure(t, w, secure=False, rng=4))
    >>> bool(out.min() >= 0), float(out[0].sum())  # nonnegative; the public total holds
    (True, 4.0)
    """

    table: Table
    workload: Workload
    _base: TableProjector = field(init=False, repr=False)
    _leaf_layout: BoolArray = field(init=False, repr=False)
    _diagonal: bool = field(init=False, repr=False)
    _node_level: npt.NDArray[np.int64] = field(init=False, repr=False)
    _tree: FlatTree = field(init=False, repr=False)

    def __post_init__(self) -> None:
        geo = self.table.geography
        base = TableProjector(self.table, self.workload)
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "_leaf_layout", geo.is_leaf[geo.layout.order])
        base._dense()  # (P+) works with the dense matrices of each level
        below = [base._levels[d] for d in range(1, geo.n_levels)]
        diagonal = (
            geo.n_levels > 1
            and not self._leaf_layout[0]
            and all((r > 0).all() and (A.sum(axis=1) == 1).all() for A, r, _ in below)
        )
        object.__setattr__(self, "_diagonal", diagonal)
        lay = geo.layout
        object.__setattr__(
            self, "_node_level", np.repeat(np.arange(geo.n_levels), np.diff(lay.bounds))
        )
        object.__setattr__(self, "_tree", _flat_families(lay))

    def __call__(self, measurements: TableMeasurements) -> FloatArray:
        """The (P+) estimate: nonnegative detailed histograms of every geounit.

        Parameters
        ----------
        measurements : TableMeasurements
            Answers of this projector's workload (leading draw axes allowed).

        Returns
        -------
        ndarray, shape (..., geography.n, n_detailed)
            Rows in the order of ``geography.ids``; every leaf cell >= 0, every parent the
            sum of its children, public queries held.

        Raises
        ------
        ValidationError
            If the public queries cannot be met by a nonnegative table.
        ConvergenceError
            If pivoting does not finish within its round limit (please report the input).
        """
        uniform_budget(measurements, "(P+)")
        if measurements.workload is not self.workload:
            raise ValidationError("the measurements come from a different workload")
        geo = self.table.geography
        c = self.table.categories.leaves.size
        lead = measurements.values[0].shape[:-2]
        solved = solve_one_cell(measurements, nonneg=True)
        if solved is not None:
            return solved
        B = int(np.prod(lead)) if lead else 1
        ys = [self._base._answers(measurements, d, B) for d in range(geo.n_levels)]
        out = np.empty((B, geo.n, c))
        for b in range(B):
            out[b] = Draw(self, [y[b] for y in ys]).solve()
        result: FloatArray = out[:, geo.layout.position].reshape(*lead, geo.n, c)
        return result


@dataclass(frozen=True)
class TableNonnegReport:
    """How exactly a table estimate satisfies the optimality conditions of (P+).

    Attributes
    ----------
    consistency : float
        Largest |parent cell - sum of its children's cells|.
    public : float
        Largest |P t - b| over the public queries.
    negative : float
        Largest -t over the leaf cells (0 when every cell is >= 0).
    stationarity : float
        Largest |reduced gradient| over the positive leaf cells.
    dual : float
        Largest -(reduced gradient) over the leaf cells at 0 (their multipliers must be
        >= 0); cells of a public group with no positive cell are exempt (that group's
        multiplier is free and can make theirs as large as needed).
    gradient_scale : float
        Size of the gradient's terms (max |A' W y| and |A' W A t| over geounits, at
        least 1): divide by it for a relative residual.
    value_scale : float
        max(1, largest |t|): the scale of the other residuals.

    Examples
    --------
    >>> TableNonnegReport(0.0, 0.0, 0.0, 1e-9, 0.0, 10.0, 5.0).worst_relative()
    1e-10
    """

    consistency: float
    public: float
    negative: float
    stationarity: float
    dual: float
    gradient_scale: float
    value_scale: float

    def worst_relative(self) -> float:
        """The largest of the residuals, each relative to its scale."""
        return max(
            self.stationarity / self.gradient_scale,
            self.dual / self.gradient_scale,
            self.public / self.value_scale,
            self.consistency / self.value_scale,
            self.negative / self.value_scale,
        )


def nnls_report(estimate: FloatArray, measurements: TableMeasurements) -> TableNonnegReport:
    """KKT residuals of a (P+) estimate of a table (one draw), from the estimate alone.

    Parameters
    ----------
    estimate : ndarray, shape (geography.n, n_detailed)
        E.g. the output of :class:`TableNonnegProjector` for one draw.
    measurements : TableMeasurements
        The draw it was computed from.

    Returns
    -------
    TableNonnegReport
        Leaf cells above 0 must have a reduced gradient of 0, cells at 0 a reduced gradient
        >= 0 (their multiplier); the public multipliers are fitted on the positive cells.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[0, 3], [1, 0]])
    >>> w = Workload([Measurement(d, Query.detailed(cat), Gaussian(rho=0.5)) for d in (0, 1)])
    >>> m = measure(t, w, secure=False, rng=4)
    >>> nnls_report(TableNonnegProjector(t, w)(m), m).worst_relative() < 1e-9
    True
    """
    table, workload = measurements.table, measurements.workload
    geo = table.geography
    t, consistency, value_scale = checked_estimate(estimate, measurements)
    projector = TableNonnegProjector(table, workload)
    ys = [projector._base._answers(measurements, d, 1)[0] for d in range(geo.n_levels)]
    draw = Draw(projector, ys)
    if draw.publics:
        draw.public_matrix = draw._public_matrix()[0]
    laid = t[geo.layout.order]
    leaf = draw.leaf[:, None]
    held = leaf & (laid <= 0)
    mu = draw.multipliers(laid, held)
    public = 0.0
    for d, groups, totals in draw.publics:
        b0, b1 = int(geo.layout.bounds[d]), int(geo.layout.bounds[d + 1])
        public = max(public, float(np.abs(laid[b0:b1] @ groups.T - totals).max(initial=0.0)))
    scale = 1.0  # size of the gradient's terms, as in the (P) report
    for d in range(geo.n_levels):
        A, r, _ = draw.levels[d]
        noisy = r > 0
        if noisy.any():
            b0, b1 = int(geo.layout.bounds[d]), int(geo.layout.bounds[d + 1])
            An, wn = A[noisy], 1.0 / r[noisy]
            terms = (draw.ys[d][:, noisy] * wn, laid[b0:b1] @ An.T * wn)
            scale = max(scale, *(float(np.abs(x @ An).max(initial=0.0)) for x in terms))
    return TableNonnegReport(
        consistency=consistency,
        public=public,
        negative=float(np.maximum(-laid[leaf[:, 0]], 0.0).max(initial=0.0)),
        stationarity=float(np.abs(mu[leaf & ~(laid <= 0)]).max(initial=0.0)),
        dual=float(np.maximum(-mu[held], 0.0).max(initial=0.0)),  # +inf: a free multiplier
        gradient_scale=scale,
        value_scale=value_scale,
    )


def _flat_families(lay: Any) -> FlatTree:
    """The geography's families as flat arrays (levels top down), as the compiled loops
    take them; the coefficient fields are unused here."""
    levels = len(lay.parents)
    none_i, none_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    return FlatTree(
        parent=np.concatenate([none_i, *lay.parents]).astype(np.int64),
        start=np.concatenate(
            [none_i, *(lay.bounds[d + 1] + lay.starts[d] for d in range(levels))]
        ).astype(np.int64),
        size=np.concatenate([none_i, *lay.sizes]).astype(np.int64),
        level=np.cumsum([0, *(p.size for p in lay.parents)]).astype(np.int64),
        own=none_f,
        kids=none_f,
        share=none_f,
    )

"""An optimality certificate for (P) on a table: the KKT conditions, checked exactly.

The estimate t (a detailed histogram per geounit, parents the sums of their children)
minimises sum_g sum_{noisy q at g's level} w_q |A_q t_g - y_{q,g}|^2 subject to the public
queries P_g t_g = b_g. With r_g = sum_q w_q A_q' (A_q t_g - y_{q,g}) the gradient of a
geounit's own terms, stationarity says that multipliers lambda exist with, for every leaf
geounit l, sum over the geounits g on the path root..l of (r_g + P_g' lambda_g) = 0.

Checked bottom-up without guessing the multipliers: for each geounit, the set of values
that the running sum above it may take for its whole subtree to be stationary is an affine
subspace (a point when no public query lies in the subtree): a leaf's is -r_l + range(P_l'),
a parent's is the intersection of its children's, shifted by -r_g and widened by
range(P_g'). Where the children's sets do not meet, the least-squares gap is the
stationarity residual of that family; at the root the running sum must be 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.tables import TableMeasurements

__all__ = ["TableKKTReport", "table_kkt_report"]


@dataclass(frozen=True)
class TableKKTReport:
    """How exactly a table estimate satisfies the optimality conditions of (P).

    Attributes
    ----------
    consistency : float
        Largest |parent cell - sum of its children's cells|.
    public : float
        Largest |P t - b| over the public queries.
    stationarity : float
        Largest stationarity gap (see the module notes), in the units of the gradient.
    gradient_scale : float
        Size of the gradient terms (max |A' W y| + |A' W A t| over geounits): divide by it
        for a relative residual.
    value_scale : float
        max(1, largest |t|): the scale of the consistency and public residuals.

    Examples
    --------
    >>> report = TableKKTReport(0.0, 1e-9, 1e-8, 100.0, 50.0)
    >>> report.worst_relative()
    1e-10
    """

    consistency: float
    public: float
    stationarity: float
    gradient_scale: float
    value_scale: float

    def worst_relative(self) -> float:
        """The largest of the residuals, each relative to its scale."""
        return max(
            self.stationarity / self.gradient_scale,
            self.public / self.value_scale,
            self.consistency / self.value_scale,
        )

    def to_frame(self) -> pd.DataFrame:
        """One row with the residuals."""
        return pd.DataFrame([self.__dict__])


def table_kkt_report(estimate: FloatArray, measurements: TableMeasurements) -> TableKKTReport:
    """KKT residuals of a (P) estimate of a table (one draw).

    Parameters
    ----------
    estimate : ndarray, shape (geography.n, n_detailed)
        Detailed histograms of every geounit, e.g. ``postdp.project(m, nonneg=False)``.
    measurements : TableMeasurements
        The draw it was computed from.

    Returns
    -------
    TableKKTReport

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.postprocess.table_projection import project_table
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), None)]
    ...              + [Measurement(d, Query.detailed(cat), Geometric(epsilon=1.0))
    ...                 for d in range(2)])
    >>> m = measure(Table(geo, cat, [[3, 4], [5, 6]]), w, secure=False, rng=0)
    >>> table_kkt_report(project_table(m, cells=True), m).worst_relative() < 1e-12
    True
    """
    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    t = np.asarray(estimate, dtype=float)
    c = cat.leaves.size
    if t.shape != (geo.n, c):
        raise ValidationError(f"`estimate` must have shape {(geo.n, c)}; got {t.shape}")
    if measurements.values[0].ndim != 2:
        raise ValidationError("kkt_report checks one draw of a table; index the draws first (m[0])")
    grad = np.zeros((geo.n, c))
    scale = np.zeros(geo.n)
    publics: list[list[FloatArray]] = [[] for _ in range(geo.n_levels)]
    public_gap = 0.0
    for m, y in zip(workload.measurements, measurements.values, strict=True):
        A = m.query.matrix(cat)
        nodes = geo.levels[m.level]
        fitted = t[nodes] @ A.T
        if m.public:
            public_gap = max(public_gap, float(np.abs(fitted - y).max(initial=0.0)))
            publics[m.level].append(A)
            continue
        w = 1.0 / m.variance
        grad[nodes] += w * (fitted - y) @ A
        scale[nodes] = np.maximum(
            scale[nodes],
            np.maximum(np.abs(w * y @ A).max(axis=1), np.abs(w * fitted @ A).max(axis=1)),
        )
    kids = np.zeros_like(t)
    np.add.at(kids, geo.parent[geo.parent >= 0], t[geo.parent >= 0])
    internal = ~geo.is_leaf
    consistency = float(np.abs(t[internal] - kids[internal]).max(initial=0.0))
    depth = geo.depth
    bases = [
        _orth(np.vstack(p).T) if p else np.zeros((c, 0)) for p in publics
    ]  # range(P') per level
    point = -grad.copy()
    basis: list[FloatArray] = [bases[depth[g]] for g in range(geo.n)]
    gap = 0.0
    lay = geo.layout
    for d in range(len(lay.parents) - 1, -1, -1):
        c0 = lay.bounds[d + 1]
        for f, p_pos in enumerate(lay.parents[d]):
            lo = c0 + lay.starts[d][f]
            kids_nodes = lay.order[lo : lo + lay.sizes[d][f]]
            g = int(lay.order[p_pos])
            meet, span, miss = _intersect(
                [point[k] for k in kids_nodes], [basis[k] for k in kids_nodes]
            )
            gap = max(gap, miss)
            point[g] = meet - grad[g]
            basis[g] = _orth(np.hstack([span, bases[depth[g]]]))
    root = geo.root
    Q = basis[root]
    at_root = point[root] - Q @ (Q.T @ point[root])  # distance from 0 to the root's set
    gap = max(gap, float(np.abs(at_root).max(initial=0.0)))
    return TableKKTReport(
        consistency,
        public_gap,
        gap,
        max(1.0, float(scale.max(initial=0.0))),
        max(1.0, float(np.abs(t).max(initial=0.0))),
    )


def _orth(M: FloatArray) -> FloatArray:
    """An orthonormal basis of the column space of M."""
    if M.shape[1] == 0:
        return M
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    keep = s > 1e-10 * max(1.0, float(s.max(initial=0.0)))
    return U[:, keep]


def _intersect(
    points: list[FloatArray], bases: list[FloatArray]
) -> tuple[FloatArray, FloatArray, float]:
    """Least-squares meeting point of affine subspaces {p + Q z}, the basis of the
    intersection of their directions, and the largest distance from the point to one."""
    if all(Q.shape[1] == 0 for Q in bases):
        meet = np.mean(points, axis=0)
        miss = max(float(np.abs(p - meet).max()) for p in points)
        return meet, bases[0], miss
    c = points[0].size
    M_sum = np.zeros((c, c))
    rhs = np.zeros(c)
    for p, Q in zip(points, bases, strict=True):
        M = np.eye(c) - Q @ Q.T
        M_sum += M
        rhs += M @ p
    vals, vecs = np.linalg.eigh(M_sum)
    small = vals <= 1e-10 * len(points)
    inv = np.where(small, 0.0, 1.0 / np.where(small, 1.0, vals))
    meet = vecs @ (inv * (vecs.T @ rhs))
    miss = 0.0
    for p, Q in zip(points, bases, strict=True):
        off = (meet - p) - Q @ (Q.T @ (meet - p))
        miss = max(miss, float(np.abs(off).max(initial=0.0)))
    return meet, vecs[:, small], miss

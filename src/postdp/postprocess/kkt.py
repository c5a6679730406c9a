"""Optimality certificates of the projections: (P) and (P+) checked from a candidate alone.

Counts: :func:`kkt_report` checks every draw of (P) or (P+) on the leaf values, the free
coordinates of the consistent vectors. A table's detailed cells (one draw): (P) by
:func:`gls_report`, (P+) by :func:`~postdp.postprocess.nonneg.nnls_report` (the reduced
gradients of the pivoting in :mod:`postdp.postprocess.nonneg`).

(P) of a table: t (a detailed histogram per geounit, parents the sums of their children)
minimises sum_g sum_{noisy q at g's level} w_q |A_q t_g - y_{q,g}|^2 subject to the public
queries P_g t_g = b_g; with r_g = sum_q w_q A_q' (A_q t_g - y_{q,g}), stationarity asks for
multipliers lambda with sum over the path root..l of (r_g + P_g' lambda_g) = 0 at every leaf
geounit l. Checked bottom-up without guessing lambda: the values the running sum above a
geounit may take for its subtree to be stationary form an affine subspace (a leaf's
-r_l + range(P_l'); a parent's the intersection of its children's, shifted by -r_g and
widened by range(P_g')); the least-squares gap where children's sets do not meet, and the
root's distance from 0, are the stationarity residual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec, resolve_public
from postdp.postprocess._solvers.certificate import checked_estimate
from postdp.postprocess._solvers.one_cell import counts_only
from postdp.postprocess._solvers.tree_solve import TreeProblem, leaf_multipliers
from postdp.tables import TableMeasurements

__all__ = ["ProjectionReport", "TableKKTReport", "gls_report", "kkt_report"]


@dataclass(frozen=True, slots=True)
class ProjectionReport:
    """How far a candidate solution is from satisfying (P) or (P+), per draw.

    Attributes
    ----------
    objective : ndarray, shape (B,)
        Σ w_i (v_i - y_i)².
    constraint_violation : ndarray, shape (B,)
        Largest |v_parent - Σ v_children| and |v_public - value|.
    nonneg_violation : ndarray, shape (B,)
        Largest max(0, -v_i) (0 for (P)).
    kkt_residual : ndarray, shape (B,)
        Largest violation of stationarity and complementarity, measured on the bound
        multipliers of the leaves (see Notes of :func:`kkt_report`).
    scale : ndarray, shape (B,)
        max(1, max |y|, max public value): the unit of the relative residuals.
    gradient_scale : float
        Largest weight times the number of levels: the unit of the multipliers.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy, project
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> y = np.array([3.0, -5.0, 6.0])
    >>> kkt_report(project(y, h), y, h).worst_relative() < 1e-12
    True
    """

    objective: FloatArray
    constraint_violation: FloatArray
    nonneg_violation: FloatArray
    kkt_residual: FloatArray
    scale: FloatArray
    gradient_scale: float

    def worst_relative(self) -> float:
        """The largest relative residual of any kind over all draws.

        Returns
        -------
        float

        Examples
        --------
        >>> r = ProjectionReport(*(np.zeros(1),) * 4, np.ones(1), 1.0)
        >>> r.worst_relative()
        0.0
        """
        rel = np.concatenate(
            [
                self.constraint_violation / self.scale,
                self.nonneg_violation / self.scale,
                self.kkt_residual / (self.scale * self.gradient_scale),
            ]
        )
        return float(rel.max(initial=0.0))

    def to_frame(self) -> pd.DataFrame:
        """One row per draw: objective, constraint and sign violations, KKT residual, scale.

        Examples
        --------
        >>> import numpy as np
        >>> from postdp import Hierarchy, project
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
        >>> y = np.array([[3.0, 1.0, 1.0]])
        >>> list(kkt_report(project(y, h), y, h).to_frame().columns)[:2]
        ['objective', 'constraint_violation']
        """
        return pd.DataFrame(
            {
                "objective": np.ravel(self.objective),
                "constraint_violation": np.ravel(self.constraint_violation),
                "nonneg_violation": np.ravel(self.nonneg_violation),
                "kkt_residual": np.ravel(self.kkt_residual),
                "scale": np.ravel(self.scale),
            }
        )


def kkt_report(
    solution: ArrayLike,
    noisy: ArrayLike | TableMeasurements,
    hierarchy: Hierarchy | None = None,
    *,
    nonneg: bool = True,
    public: PublicSpec = None,
    weights: ArrayLike | None = None,
) -> Any:
    """Check a candidate solution of (P) / (P+) against its optimality conditions.

    Parameters
    ----------
    solution, noisy : array_like, shape (..., n)
        Candidate projections and the noisy values they came from. Or, for a table, one
        draw's detailed cells of every geounit, shape (geography.n, n_detailed) (as
        :func:`postdp.project` returns them), and the :class:`~postdp.tables.TableMeasurements`
        of that draw: the report is then a :class:`TableNonnegReport` ((P+)) or a
        :class:`TableKKTReport` ((P), ``nonneg=False``).
    hierarchy : Hierarchy
        Required for counts; left out for table measurements.
    nonneg : bool, default True
        Check (P+) (True) or (P) (False).
    public : mapping, sequence of str, "root" or None
        Invariant nodes, as given to :func:`postdp.project`.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ProjectionReport, TableNonnegReport or TableKKTReport
        One entry per draw (counts); one draw's residuals (tables).

    Notes
    -----
    On the consistent vectors the leaf values z are free coordinates, so the KKT conditions
    of (P+) read: μ_ℓ = 0 where z_ℓ > 0 and μ_ℓ >= 0 where z_ℓ = 0, with μ the gradient of
    ½ Σ w (v - y)² in z plus the multipliers of the public nodes above ℓ. The residual is the
    largest |μ_ℓ| over positive leaves and max(0, -μ_ℓ) over zero leaves (for (P), |μ_ℓ| over
    all free leaves). The consistency and public constraints are reported separately.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> y = np.array([3.0, -5.0, 6.0])
    >>> report = kkt_report(np.array([3.0, 0.0, 3.0]), y, h)  # not the optimum
    >>> float(report.kkt_residual[0]) > 0
    True
    """
    from postdp.postprocess.projections import _noisy, _weights

    if isinstance(noisy, TableMeasurements):
        from postdp.postprocess.nonneg import nnls_report

        counts_only(hierarchy, public, weights)
        estimate = np.asarray(solution, dtype=np.float64)
        return (nnls_report if nonneg else gls_report)(estimate, noisy)
    if hierarchy is None:
        raise ValidationError("`hierarchy` is required to check counts")
    V, _ = _noisy(solution, hierarchy.n)
    Y, _ = _noisy(noisy, hierarchy.n)
    if V.shape != Y.shape:
        raise ValidationError(f"`solution` and `noisy` differ in shape: {V.shape} vs {Y.shape}")
    w = _weights(weights, hierarchy.n)
    pub = resolve_public(hierarchy, public=public)
    prob = TreeProblem.build(hierarchy, w, pub)
    lay = hierarchy.layout
    Vl, Yl = V[:, lay.order], Y[:, lay.order]
    B = V.shape[0]
    violation = lay.family_gaps(Vl)
    if pub.mask.any():
        off = np.abs(V[:, pub.mask] - pub.values[pub.mask]).max(axis=1)
        violation = np.maximum(violation, off)
    scale = np.maximum(1.0, np.abs(Y).max(axis=1))
    scale = np.maximum(scale, pub.values.max(initial=0.0))
    negative = np.maximum(0.0, -V.min(axis=1)) if nonneg else np.zeros(B)
    tol = 1e-12 * scale[:, None]
    positive = prob.free_leaf & (Vl > tol) if nonneg else np.broadcast_to(prob.free_leaf, Vl.shape)
    mu = leaf_multipliers(prob, Vl, Yl, inactive=positive)
    at_zero = prob.free_leaf & ~positive
    residual = np.maximum(
        np.where(positive, np.abs(mu), 0.0).max(axis=1),
        np.where(at_zero, np.maximum(0.0, -mu), 0.0).max(axis=1),
    )
    objective = (w * (V - Y) ** 2).sum(axis=1)
    return ProjectionReport(
        objective, violation, negative, residual, scale, float(w.max() * hierarchy.n_levels)
    )


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


def gls_report(estimate: FloatArray, measurements: TableMeasurements) -> TableKKTReport:
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
    >>> from postdp import project
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), None)]
    ...              + [Measurement(d, Query.detailed(cat), Geometric(epsilon=1.0))
    ...                 for d in range(2)])
    >>> m = measure(Table(geo, cat, [[3, 4], [5, 6]]), w, secure=False, rng=0)
    >>> gls_report(project(m, nonneg=False), m).worst_relative() < 1e-12
    True
    """
    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    t, consistency, value_scale = checked_estimate(estimate, measurements)
    c = cat.leaves.size
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
        value_scale,
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

"""Optimality checks of a projection: constraint violations, KKT residual, objective."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec, resolve_public
from postdp.postprocess._solvers.tree_solve import TreeProblem, leaf_multipliers
from postdp.tables import TableMeasurements

__all__ = ["ProjectionReport", "kkt_report"]


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
        from postdp.postprocess._project_tables import kkt_measurements

        return kkt_measurements(solution, noisy, hierarchy, nonneg, public, weights)
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

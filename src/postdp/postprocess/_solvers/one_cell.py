"""The one-cell solver: (P), (P+) and top-down of a hierarchy of counts (private).

A hierarchy of counts is the table with one detailed cell per geounit. Its (P), (P+) and
top-down have scalar solvers, batched over draws (:class:`CountsSolver`: the O(n)
two-pass tree solve, block pivoting over the leaves, the vectorised family split), which
:class:`~postdp.postprocess.Projector` runs on counts and
:class:`~postdp.postprocess.TableProjector`, :class:`~postdp.postprocess.TableNonnegProjector`
(through :func:`solve_one_cell`) and :func:`postdp.top_down` pick for a one-cell table
(:func:`one_cell`) in place of the c x c filter that a table with more cells needs. Its
variances (:func:`one_cell_variances`) are the c x c filter's recursion with scalars, one
array operation per level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import PostdpError, ValidationError
from postdp.hierarchy import Hierarchy, Layout, PublicNodes, check_feasible, resolve_public
from postdp.postprocess._solvers.active_set import solve_nonneg
from postdp.postprocess._solvers.simplex import TopDownPlan
from postdp.postprocess._solvers.tree_solve import TreeProblem, two_pass
from postdp.tables import TableMeasurements

__all__ = [
    "CountsSolver",
    "OneCell",
    "counts_only",
    "one_cell",
    "one_cell_variances",
    "solve_one_cell",
]


@dataclass(frozen=True, slots=True, eq=False)
class CountsSolver:
    """(P), (P+) (whole-tree) or top-down (``levels=True``) of a hierarchy's counts, prepared.

    Everything that does not depend on the noisy values: the two-pass coefficients of the
    exact problem, or the top-down plan.
    """

    layout: Layout
    nonneg: bool
    exact: TreeProblem | None
    topdown: TopDownPlan | None

    @classmethod
    def build(
        cls, h: Hierarchy, weights: FloatArray, pub: PublicNodes, *, nonneg: bool, levels: bool
    ) -> CountsSolver:
        """Prepare the solver (``levels``: level by level, else the whole tree at once)."""
        if not levels:
            return cls(h.layout, nonneg, TreeProblem.build(h, weights, pub), None)
        return cls(h.layout, nonneg, None, TopDownPlan.build(h, weights, pub, nonneg=nonneg))

    def solve(self, Y: FloatArray) -> FloatArray:
        """The rows of ``Y`` (float64, shape (B, n), id order, finite) solved, overwriting
        ``Y``."""
        lay = self.layout
        Yl = Y if lay.identity else Y[:, lay.order]
        if self.topdown is not None:
            X = self.topdown.run(Yl)
        elif self.nonneg:
            assert self.exact is not None
            X = solve_nonneg(self.exact, Yl)
        else:
            assert self.exact is not None
            X = two_pass(self.exact, Yl, overwrite=True)
        out: FloatArray = X if lay.identity else X[:, lay.position]
        return out


@dataclass(frozen=True, eq=False)
class OneCell:
    """A one-cell table's measurements as a hierarchy's weighted counts.

    The problem is the table's: each geounit's noisy answers combine into their
    inverse-variance mean with the sum of their weights, and a public query fixes every
    geounit of its level.

    Attributes
    ----------
    geography : Hierarchy
    noisy : ndarray, shape (B, geography.n)
        Each geounit's combined noisy answer, rows in the order of ``geography.ids``.
    weights : ndarray, shape (geography.n,)
        The sum of the inverse variances of its answers (1 where a public query fixes it).
    public : dict
        Geounit id to its public value.
    """

    geography: Hierarchy
    noisy: FloatArray
    weights: FloatArray
    public: dict[Any, float]

    def solve(self, *, nonneg: bool, levels: bool = False) -> FloatArray | None:
        """The hierarchy's (P) / (P+) or top-down (``levels=True``), shape (B, n); None
        when the hierarchy's solver refuses the public values (the general table solver
        then gives its own answer or error).

        Parameters
        ----------
        nonneg : bool
        levels : bool, default False
            Level by level (top-down) rather than the whole tree at once.

        Returns
        -------
        ndarray or None
        """
        geo = self.geography
        try:
            pub = resolve_public(geo, public=self.public or None)
            check_feasible(geo, public=pub, nonneg=nonneg)
        except PostdpError:
            return None
        solver = CountsSolver.build(geo, self.weights, pub, nonneg=nonneg, levels=levels)
        return solver.solve(self.noisy.copy())


def one_cell(measurements: TableMeasurements) -> OneCell | None:
    """The one-cell table's measurements as weighted counts, or None when the table has
    more than one detailed cell, is measured with budget factors, leaves a geographic
    level unmeasured, or holds public answers that differ between draws or within a level's
    geounit (the general solvers handle those).

    Parameters
    ----------
    measurements : TableMeasurements

    Returns
    -------
    OneCell or None

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T"], [None])
    >>> w = Workload([Measurement(0, Query.detailed(cat), None),
    ...               Measurement(1, Query.detailed(cat), Laplace(epsilon=1.0))])
    >>> counts = one_cell(measure(Table(geo, cat, [[3], [4]]), w, secure=False, rng=0))
    >>> counts.public, counts.weights.tolist()
    ({'S': 7.0}, [1.0, 0.5, 0.5])
    """
    table = measurements.table
    geo, cat = table.geography, table.categories
    if cat.leaves.size != 1 or measurements.budget_scale is not None:
        return None
    lead = measurements.values[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    total = np.zeros((B, geo.n))
    weight = np.zeros(geo.n)
    fixed = np.full(geo.n, np.nan)
    for m, values in zip(measurements.workload.measurements, measurements.values, strict=True):
        nodes = geo.levels[m.level]
        y = np.asarray(values, dtype=np.float64).reshape(B, nodes.size, -1)
        if not (m.query.matrix(cat) == 1).all():  # pragma: no cover - every query is the cell
            return None
        if not m.public:
            w = 1.0 / m.variance
            total[:, nodes] += w * y.sum(axis=-1)
            weight[nodes] += w * y.shape[-1]
            continue
        value = y[0, :, 0]
        seen = fixed[nodes]
        if (y != value[None, :, None]).any() or (~np.isnan(seen) & (seen != value)).any():
            return None
        fixed[nodes] = value
    public = ~np.isnan(fixed)
    if not (public | (weight > 0)).all():
        return None
    noisy = np.where(public, fixed, total / np.where(weight > 0, weight, 1.0))
    weights = np.where(public, 1.0, weight)
    at = np.flatnonzero(public)
    return OneCell(
        geo, noisy, weights, dict(zip(geo.ids[at].tolist(), fixed[at].tolist(), strict=True))
    )


def solve_one_cell(measurements: TableMeasurements, *, nonneg: bool) -> FloatArray | None:
    """The fast path of the table projectors: a one-cell table's (P) or (P+) by the
    hierarchy's solvers, every draw at once.

    Parameters
    ----------
    measurements : TableMeasurements
    nonneg : bool
        (P+) (the pivoting over the leaves) rather than (P) (the two-pass solve).

    Returns
    -------
    ndarray, shape (..., geography.n, 1), or None
        Rows in the order of ``geography.ids``; None when :func:`one_cell` declines the
        table or the hierarchy's solver refuses its public values (the caller then runs
        the general c x c solver).
    """
    counts = one_cell(measurements)
    if counts is None:
        return None
    solved = counts.solve(nonneg=nonneg)
    if solved is None:
        return None
    lead = measurements.values[0].shape[:-2]
    return solved.reshape(*lead, measurements.table.geography.n, 1)


def one_cell_variances(
    geography: Hierarchy,
    levels: list[tuple[FloatArray, FloatArray]],
    scale: FloatArray | None = None,
) -> FloatArray | None:
    """Variance of every geounit's (P) estimate of a one-cell table, from the design alone.

    The recursion of :meth:`~postdp.postprocess._solvers.kalman_tree.TreeGLS.covariances`
    with 1 x 1 matrices ([zhu2021] Thm 7; the Rauch-Tung-Striebel smoother on the
    geography), one array operation per level instead of one matrix per geounit. Upward, a
    leaf's variance is 1 / I (I: the information of its noisy answers, scale times the sum
    of a^2 / r over its rows a x + noise of variance r) and an inner geounit's is
    S / (1 + S I), S the sum of its children's; a public answer makes it 0. Downward,
    ``P_c = v_c + v_c^2 (P_p - S_p) / S_p^2`` (0 in place of 1 / S_p when S_p is 0).

    Parameters
    ----------
    geography : Hierarchy
    levels : list of (ndarray (k, 1), ndarray (k,))
        Per geographic level, its answers' coefficients and noise variances (0: public).
    scale : ndarray, shape (geography.n,), optional
        Each geounit's multiple of its level's budget, in id order (0: not measured).

    Returns
    -------
    ndarray, shape (geography.n,), or None
        In layout order; None when a leaf geounit has no noisy answer of its own (the
        matrix filter then decides, or refuses the design).
    """
    lay = geography.layout
    s = np.ones(geography.n) if scale is None else np.asarray(scale, dtype=np.float64)[lay.order]
    leaf = geography.is_leaf[lay.order]
    var = np.zeros(geography.n)
    summed = np.zeros(geography.n)
    for d in range(geography.n_levels - 1, -1, -1):
        A, r = levels[d]
        a = A[:, 0]
        noisy = r > 0
        b0, b1 = int(lay.bounds[d]), int(lay.bounds[d + 1])
        if d < len(lay.parents):
            c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
            summed[lay.parents[d]] = np.add.reduceat(var[c0:c1], lay.starts[d])
        info = s[b0:b1] * float(np.sum(a[noisy] ** 2 / r[noisy]))
        at_leaf = leaf[b0:b1]
        if (at_leaf & ~(info > 0)).any():
            return None
        if (a[~noisy] != 0).any():  # a public answer fixes every geounit of the level
            continue  # var stays 0
        S = summed[b0:b1]
        inner = S / (1.0 + S * info)
        var[b0:b1] = np.where(at_leaf, 1.0 / np.where(at_leaf, info, 1.0), inner)
    out = var.copy()
    for d in range(len(lay.parents)):
        parents = lay.parents[d]
        S = summed[parents]
        inv = np.divide(1.0, S, out=np.zeros_like(S), where=S > 0)
        middle = np.repeat((out[parents] - S) * inv**2, lay.sizes[d])
        c0, c1 = int(lay.bounds[d + 1]), int(lay.bounds[d + 2])
        out[c0:c1] = var[c0:c1] + var[c0:c1] ** 2 * middle
    return np.maximum(out, 0.0, out=out)  # -1e-17 where a public parent leaves v - v


def counts_only(hierarchy: Hierarchy | None, public: Any, weights: Any) -> None:
    """Refuse the options of counts (a hierarchy, public nodes, weights) with a table's
    measurements, which carry their geography, public queries and weights."""
    for name, value in (("hierarchy", hierarchy), ("public", public), ("weights", weights)):
        if value is not None:
            raise ValidationError(
                f"`{name}` is for counts; table measurements carry their geography, public "
                "queries and weights in their workload"
            )

"""(P) for tables: generalised least squares over every measured (geounit, query) count.

The unknowns are the detailed histograms t_g (one vector of c cells per geounit); a parent's
histogram is the sum of its children's, aggregates are sums of detailed cells, so every
estimate is consistent both ways by construction. The objective is
sum over measurements m and geounits g of its level of w_m |A_m t_g - y_{m,g}|^2, with
public (invariant) queries held exactly.

Algorithm: the two-pass tree solver of [zhu2021] (its Thm 7 GLS,
computed as in Hay et al.'s two passes) with c x c matrices in place of scalar variances --
the Gaussian (Kalman) filter and smoother on the geography. Upward, each subtree gives an
estimate mu_g of t_g with covariance S_g: leaves from their own measurements
(S = (A' W A)^-1), internal nodes from the sum of their children's (mu, S) updated with their
own measurements (a Kalman step; public queries are measurements without noise). Downward,
the root takes its estimate and each child gets mu_c + S_c S_sum^+ (t_parent - mu_sum), the
least-squares split of its parent's histogram. The c x c matrices depend only on the shape
of a subtree and the workload, never on the draws: they are computed once per distinct
subtree shape (a signature), so the work is O(geounits x c^2) per draw with a few hundred
matrix factorisations, batched over draws (leading axes).

A one-cell table (a hierarchy of counts) takes the hierarchy's O(n) two-pass solve instead
(:mod:`postdp.postprocess._solvers.one_cell`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from postdp._threads import one_thread
from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.kalman_tree import TreeGLS
from postdp.postprocess._solvers.marginal_basis import MarginalBasis, held_at_zero, table_schema
from postdp.postprocess._solvers.one_cell import one_cell_variances, solve_one_cell
from postdp.tables import Query, Table, TableMeasurements, Workload, category_matrix
from postdp.tables.bypass import check_budget_scale
from postdp.tables.published import PublishedTable

__all__ = ["TableProjector", "gls_cells"]

#: The most detailed cells the dense tree solver takes (its c x c matrices: 3.2 GB here).
_DENSE_CELLS = 20_000


@dataclass(frozen=True, eq=False)
class TableProjector:
    """(P) for one table geography, category tree and workload, prepared for many draws.

    Parameters
    ----------
    table : Table
        Supplies the geography and the category tree (its counts are not read).
    workload : Workload
    budget_scale : ndarray, optional
        Per geounit (id order), the multiple of its level's budget it was measured with
        (:attr:`TableMeasurements.budget_scale`; the production spine's bypass): its noisy
        answers weigh that much more, nothing where it is 0.

    Raises
    ------
    ValidationError
        If the measurements at a leaf geounit's level do not identify every detailed cell
        (then least squares has no unique answer; measure the detailed cells there), or a
        geounit measured with no budget has siblings.

    Examples
    --------
    >>> from postdp import Gaussian
    >>> from postdp.data import load_p1
    >>> from postdp.tables import Measurement, Query, Workload, measure
    >>> t = load_p1("us-county")
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=0.1))
    ...               for d in range(3)])
    >>> projector = TableProjector(t, w)
    >>> projector(measure(t, w, secure=False, rng=0, size=2)).shape  # two draws
    (2, 3274, 63)
    """

    table: Table
    workload: Workload
    budget_scale: FloatArray | None = field(default=None, kw_only=True)
    _levels: list[tuple[FloatArray, FloatArray, list[int]]] = field(init=False, repr=False)
    _tree: TreeGLS | None = field(init=False, repr=False)
    _basis: MarginalBasis | None = field(init=False, repr=False)
    _scalar: FloatArray | None = field(init=False, repr=False)  # one cell: P per geounit

    def __post_init__(self) -> None:
        geo, cat = self.table.geography, self.table.categories
        object.__setattr__(self, "_basis", None)
        object.__setattr__(self, "_tree", None)
        scale = check_budget_scale(self.budget_scale, geo, self.workload, spend=False)
        object.__setattr__(self, "budget_scale", scale)
        object.__setattr__(self, "_scalar", self._one_cell_variances())
        if table_schema(cat, self.workload) is not None:
            # every query a marginal of the table's schema: the marginal basis, no c x c
            basis = MarginalBasis(geo, self.workload, scale=scale)
            object.__setattr__(self, "_basis", basis)
            return
        if self._scalar is None:  # else the design is sound: no filter until a solve needs it
            self._dense()

    def _dense(self) -> TreeGLS:
        """The dense tree solver (c x c matrices), prepared on first use."""
        if self._tree is not None:
            return self._tree
        c = self.table.categories.leaves.size
        if c > _DENSE_CELLS:
            raise ValidationError(
                f"this table has {c:,} detailed cells: the dense solver's c x c matrices "
                f"would take {8 * c * c / 2**30:,.0f} GiB each; measure marginals of one "
                "schema (Query.marginal), which the marginal basis solves without them"
            )
        levels = level_matrices(self.table, self.workload)
        object.__setattr__(self, "_levels", levels)
        per_level = [(A, r) for A, r, _ in levels]
        tree = TreeGLS(self.table.geography, per_level, c, scale=self.budget_scale)
        object.__setattr__(self, "_tree", tree)
        return tree

    def _one_cell_variances(self) -> FloatArray | None:
        """Each geounit's variance (layout order) when the table has one detailed cell and
        every leaf geounit noisy answers of its own, by the scalar recursion; else None."""
        if self.table.categories.leaves.size != 1:
            return None
        levels = [(A, r) for A, r, _ in level_matrices(self.table, self.workload)]
        return one_cell_variances(self.table.geography, levels, self.budget_scale)

    def _row_variances(self, Q: FloatArray) -> FloatArray:
        """The diagonal of Q P Q' at every geounit (layout order), P its covariance."""
        if self._scalar is not None:  # P is 1 x 1
            out: FloatArray = self._scalar[:, None] * (Q[:, 0] ** 2)[None, :]
            return out
        (out,) = self._dense().row_variances([Q])
        return out

    def __call__(self, measurements: TableMeasurements) -> FloatArray:
        """The (P) estimate: detailed histograms of every geounit.

        Parameters
        ----------
        measurements : TableMeasurements
            Answers of this projector's workload (leading draw axes allowed).

        Returns
        -------
        ndarray, shape (..., geography.n, n_detailed)
            Rows in the order of ``geography.ids``; :func:`postdp.tables.expand`-style
            aggregation gives every category node.
        """
        if measurements.workload is not self.workload:
            raise ValidationError("the measurements come from a different workload")
        measurements = answered(measurements, self.budget_scale)
        geo = self.table.geography
        lead = measurements.values[0].shape[:-2]
        B = int(np.prod(lead)) if lead else 1
        c = self.table.categories.leaves.size
        solved = solve_one_cell(measurements, nonneg=False)
        if solved is not None:
            return solved
        with one_thread():  # degrades like the noise draw, not worse, on shared cores
            if self._basis is not None:
                values = [v.reshape(B, *v.shape[-2:]) for v in measurements.values]
                result: FloatArray = self._basis.solve(values, B).reshape(*lead, geo.n, c)
                return result
            tree = self._dense()
            ys = [self._answers(measurements, d, B) for d in range(geo.n_levels)]
            out = tree.solve(ys)  # layout order
            result = out[:, geo.layout.position].reshape(*lead, geo.n, c)
        return result

    def variances(self) -> FloatArray:
        """Exact variance of every (geounit, category node) estimate of this projector.

        Computed from the design alone (mechanisms, weights, geography; never the counts),
        so margins of error built on it cost no privacy. Exact when the weights are the
        inverse noise variances (the default: (P) is then generalised least squares).

        Returns
        -------
        ndarray, shape (geography.n, categories.n)
            Rows in the order of ``geography.ids``; 0 for counts a public query fixes.
        """
        return _smoothed_variances(self)

    def query_variances(self, query: Query) -> FloatArray:
        """Variance of every count of ``query`` at every geounit (margins of error of any
        published table, measured or not), from the design alone.

        Parameters
        ----------
        query : Query
            Any query of the table's categories; a schema marginal
            (:meth:`Query.marginal`) is computed in the marginal basis without c x c
            matrices.

        Returns
        -------
        ndarray, shape (geography.n, query.size)
            Rows in the order of ``geography.ids``.

        Examples
        --------
        >>> from postdp import Gaussian, Hierarchy
        >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
        >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
        >>> t = Table(geo, s.categories(), [[1, 2, 3, 4], [5, 6, 7, 8]])
        >>> w = Workload([Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=0.5))
        ...               for d in (0, 1)])
        >>> TableProjector(t, w).query_variances(Query.marginal(s, "total")).round(4).tolist()
        [[2.6667], [2.6667], [2.6667]]
        """
        basis, marginal = self._basis, query.marginal_of
        if basis is not None and marginal is not None and marginal.schema == basis.schema:
            return basis.marginal_variances(marginal)
        geo = self.table.geography
        Q = query.matrix(self.table.categories)
        out = self._row_variances(Q)
        return held_at_zero(out[geo.layout.position])

    def cell_precision(self, geounit: int) -> FloatArray:
        """The inverse of the covariance of one geounit's detailed estimate, from the design
        alone (a schema table measured by marginals).

        Parameters
        ----------
        geounit : int
            Its row in ``geography.ids`` order.

        Returns
        -------
        ndarray, shape (n_detailed, n_detailed)
            Positive definite; a direction an invariant fixes (variance 0) gets the largest
            precision of the others.

        Raises
        ------
        ValidationError
            For a table that is not a schema table measured by marginals.

        Examples
        --------
        >>> from postdp import Gaussian, Hierarchy
        >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
        >>> s = Schema([Attribute("a", ["0", "1"])])
        >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
        >>> t = Table(geo, s.categories(), [[1, 2], [3, 4]])
        >>> w = Workload([Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=0.5))
        ...               for d in (0, 1)])
        >>> P = TableProjector(t, w)  # the root's cells: variance 2/3 each, independent
        >>> P.cell_precision(0).round(6).tolist()
        [[1.5, 0.0], [0.0, 1.5]]
        """
        if self._basis is None:
            raise ValidationError(
                "cell_precision needs a schema table measured by marginals (Query.marginal)"
            )
        n = self.table.geography.n
        if isinstance(geounit, bool) or not isinstance(geounit, int | np.integer):
            raise ValidationError(f"`geounit` must be an int; got {geounit!r}")
        if not 0 <= geounit < n:
            raise ValidationError(f"`geounit` must be in 0..{n - 1}; got {geounit}")
        return self._basis.cell_precision(int(geounit))

    def table_variances(self, table: PublishedTable) -> FloatArray:
        """Variance of every row of a published table at every geounit, from the design
        alone (the squares of its margins of error over 1.645 at 90%).

        A row is a sum of detailed cells, and rows overlap (P1's total holds every other
        row): its variance is that of the sum, the cells' covariances included, not the
        sum of the cells' variances.

        Parameters
        ----------
        table : PublishedTable
            A table over a schema whose cells are this table's detailed cells (e.g.
            :func:`postdp.data.pl94_tables` for the 2020 persons schema).

        Returns
        -------
        ndarray, shape (geography.n, table.size)
            Rows in the order of ``geography.ids``, columns in :attr:`PublishedTable.codes`
            order; 0 where an invariant fixes the row (the state total under the 2020
            invariants).

        Raises
        ------
        ValidationError
            If the table's schema cells are not this table's detailed cells.

        Notes
        -----
        With a marginal basis (every query a marginal of the schema) each block of rows,
        a Kronecker product, is computed as a marginal is (no c x c matrix); otherwise
        Q P Q' with the dense c x c covariance P of each geounit.

        Examples
        --------
        >>> from postdp import Gaussian, Hierarchy
        >>> from postdp.tables import (Attribute, Block, Measurement, PublishedTable, Query,
        ...                            Schema, Table, Workload)
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
        >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
        >>> t = Table(geo, s.categories(), [[1, 2, 3, 4], [5, 6, 7, 8]])
        >>> w = Workload([Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=0.5))
        ...               for d in (0, 1)])
        >>> tab = PublishedTable("T", "All", "everyone", s,
        ...     [Block(["T_1", "T_2"], [np.ones((1, 2)), np.array([[1.0, 1], [1, 0]])])],
        ...     ["Total", "x"])
        >>> TableProjector(t, w).table_variances(tab).round(4).tolist()[1]
        [2.6667, 1.3333]
        """
        basis = self._basis
        schema = table.schema
        if (
            basis is not None
            and basis.schema.shape == schema.shape
            and basis.schema.cells == schema.cells
        ):
            return np.concatenate([basis.marginal_variances(b) for b in table.blocks], axis=1)
        geo = self.table.geography
        Q = table_matrix(table, self.table.categories)
        out = self._row_variances(Q)
        return held_at_zero(out[geo.layout.position])

    def _answers(self, measurements: TableMeasurements, d: int, B: int) -> FloatArray:
        self._dense()  # the stacked 0/1 matrices of each level
        return level_answers(self.table.geography, self._levels[d], measurements, d, B)


def table_matrix(table: PublishedTable, categories: Hierarchy) -> FloatArray:
    """A published table's (rows, detailed cells) matrix with its columns in the order of
    ``categories``' leaves (the order of an estimate's cells), matched by cell name."""
    leaves = [str(categories.ids[j]) for j in categories.leaves]
    cells = table.schema.cells
    if sorted(leaves) != sorted(cells):
        raise ValidationError(
            f"table {table.name}: its schema's cells are not the detailed cells of the table"
        )
    where = {c: j for j, c in enumerate(cells)}
    return table.matrix()[:, [where[c] for c in leaves]]


def level_matrices(
    table: Table, workload: Workload
) -> list[tuple[FloatArray, FloatArray, list[int]]]:
    """Per geographic level: the stacked 0/1 matrices of its queries, their variances and
    the measurements' positions in the workload (the dense solver's inputs)."""
    geo, cat = table.geography, table.categories
    levels = []
    for d in range(geo.n_levels):
        ms = workload.at(d)
        if ms:
            A = np.vstack([m.query.matrix(cat) for m in ms])
            r = np.concatenate([np.full(m.query.size, m.variance) for m in ms])
        else:
            A, r = np.zeros((0, cat.leaves.size)), np.zeros(0)
        levels.append((A, r, [workload.measurements.index(m) for m in ms]))
    return levels


def level_answers(
    geo: Hierarchy,
    level: tuple[FloatArray, FloatArray, list[int]],
    measurements: TableMeasurements,
    d: int,
    B: int,
) -> FloatArray:
    """Level d's answers stacked as :func:`level_matrices` stacks its queries, (B,
    geounits of the level in layout order, rows)."""
    lay = geo.layout
    A, _, which = level
    nodes = geo.levels[d]
    y = np.zeros((B, nodes.size, A.shape[0]))
    col = 0
    for i in which:
        values = measurements.values[i]
        k = values.shape[-1]
        y[:, :, col : col + k] = values.reshape(B, nodes.size, k)
        col += k
    laid = np.empty_like(y)
    laid[:, lay.position[nodes] - lay.bounds[d]] = y
    return laid


def gls_cells(measurements: TableMeasurements) -> FloatArray:
    """(P): the consistent table closest to the measurements in weighted least squares.

    Parameters
    ----------
    measurements : TableMeasurements

    Returns
    -------
    ndarray, shape (..., geography.n, n_detailed)
        The detailed cells of every geounit (:func:`postdp.tables.expand` gives every
        category node), consistent across geography (up to rounding error); public
        queries hold exactly. Unbiased ([zhu2021], Thm 7). ``postdp.project(m,
        nonneg=False)`` is this.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[10, 20], [30, 40]])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), None),
    ...               Measurement(1, Query.detailed(cat), Geometric(epsilon=1.0))])
    >>> est = gls_cells(measure(t, w, secure=False, rng=0))
    >>> bool(abs(est[0].sum() - 100) < 1e-9)  # the public total holds
    True
    """
    projector = TableProjector(
        measurements.table, measurements.workload, budget_scale=measurements.budget_scale
    )
    return projector(measurements)


def _smoothed_variances(projector: TableProjector) -> FloatArray:
    """Variance of every (geounit, category node) (P) estimate, shape (geography.n,
    categories.n), rows in the order of ``geography.ids``."""
    table = projector.table
    geo, cat = table.geography, table.categories
    if projector._basis is not None:  # the schema's category tree: total, then the cells
        basis = projector._basis
        total = basis.marginal_variances(basis.schema.marginal("total"))
        cells = basis.marginal_variances(basis.schema.marginal("detailed"))
        full = np.empty((geo.n, cat.n))
        full[:, cat.root] = total[:, 0]
        full[:, cat.leaves] = cells
        return held_at_zero(full)
    C = category_matrix(cat).astype(np.float64)  # category node x detailed cell
    out = projector._row_variances(C)  # layout order
    return held_at_zero(out[geo.layout.position])


def answered(m: TableMeasurements, scale: FloatArray | None) -> TableMeasurements:
    """``m`` with 0 in place of the NaN answers of geounits measured with no budget (their
    rows carry no weight), refused unless its budget factors are the projector's."""
    mine = m.budget_scale
    if mine is None and scale is None:
        return m
    if mine is None or scale is None or not np.array_equal(mine, scale):
        raise ValidationError("the measurements' budget_scale is not the projector's")
    geo = m.table.geography
    values = []
    for x, v in zip(m.workload.measurements, m.values, strict=True):
        gone = scale[geo.levels[x.level]] == 0
        if x.public or not gone.any():
            values.append(v)
            continue
        v = v.copy()
        v[..., gone, :] = 0.0
        values.append(v)
    return replace(m, values=tuple(values))

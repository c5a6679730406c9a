"""Integers: unbiased rounding of values, and rounding that keeps counts and tables consistent.

:func:`stochastic_round` rounds each value on its own. :func:`round` keeps a hierarchy's
counts or a table consistent; a hierarchy (the one-cell table) takes the level-by-level
rounding of :func:`round_consistent`, vectorised over draws.

What can and cannot be promised. For a table (geography x categories) four wishes compete:
integers that are (1) consistent across geography, (2) consistent across categories,
(3) each within 1 of its real-valued input, for every count, detailed or aggregate, at every
geounit, and (4) unbiased. With both trees three levels deep, (1)-(3) alone can be
impossible (the 4 x 4 example in :func:`round`'s Notes), and on other inputs a
rounding within 1 exists but no distribution over such roundings has the input as its mean
(a linear program in ``tests/tables/test_table_rounding.py`` finds one). So no method can
promise all four. :func:`round` of a table promises (1), (2) and (4) exactly, and (3) for the
counts that matter most and that can be kept together: every detailed cell and every total
of every geounit, and every count of the root and of the leaf geounits. Only aggregates
strictly between the total and the detailed cells, at geounits strictly between the root
and the leaves (e.g. a county's "two or more races"), can move by more than 1.

Method: those counts form two laminar families of sets of (leaf geounit, detailed cell)
pairs -- (a) the root's category tree, then each detailed cell down the geography; (b) each
leaf geounit's category tree, then the totals up the geography -- and the union of two
laminar families is totally unimodular. Drawn as one circulation (family (a)'s edges point
down, family (b)'s up, the root's total closes the circuit), a table is a flow and every
count of the two families an edge. Dependent rounding (as in Gandhi, Khuller,
Parthasarathy and Srinivasan's bipartite rounding) walks to a cycle of fractional edges
and moves the flow along it up or down, with the probabilities that keep every edge's
mean, until every edge is an integer: each count of the families ends at the floor or
ceiling of its input, every vertex keeps flow in = flow out (consistency), and every count
keeps its mean (unbiased). Fractional parts are held as exact integers (units of 2**-36),
so consistency is exact. A compiled loop does the walk; the work is about linear in the
number of cells.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from postdp import _rng, _validation
from postdp._kernels import cycle_round_rows
from postdp._typing import ArrayLike, FloatArray, IntArray, RNGLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.dense_network import _network, _offsets
from postdp.postprocess._solvers.level_rounding import _MAX_ABS, _Q, round_consistent
from postdp.postprocess._solvers.rounding_split import round_split
from postdp.postprocess._solvers.sparse_network import sparse_network
from postdp.tables import Table

__all__ = ["round", "round_consistent", "stochastic_round"]

_SPARSE_CELLS = 256  # from this many detailed cells on, the walk uses the fractional edges only


def stochastic_round(x: ArrayLike, *, rng: RNGLike = None) -> IntArray:
    """Round each value up with probability equal to its fractional part (unbiased).

    Parameters
    ----------
    x : array_like
        Finite values, any shape; real values below 2**52 in magnitude (float64 holds no
        fractional part beyond it; integer arrays are taken whole).
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    ndarray of int64, same shape
        ⌊x⌋ + 1 with probability x - ⌊x⌋, else ⌊x⌋; so E[result] = x. Integers come back
        unchanged.

    Raises
    ------
    ValidationError
        For a non-finite value, or a real value of magnitude 2**52 or more.

    Notes
    -----
    Seed [fioretto2021] eq. (28): rounding after post-processing keeps the
    allotments unbiased only if the rounding itself is unbiased.

    Examples
    --------
    >>> stochastic_round([1.0, 2.25, -0.5], rng=0).tolist()
    [1, 2, 0]
    """
    values = _validation.real_array("x", x)
    if values.dtype == np.int64:
        return values.astype(np.int64)  # a copy
    if np.abs(values).max(initial=0.0) >= _MAX_ABS:
        raise ValidationError(
            "`x` must stay below 2**52 in magnitude to be rounded (float64 holds no "
            "fractional part beyond that)"
        )
    gen = _rng.as_generator(rng)
    low = np.floor(values)
    return (low + (gen.random(values.shape) < values - low)).astype(np.int64)


def _round_cells(
    values: ArrayLike,
    table: Table,
    *,
    rng: RNGLike = None,
    atol: float = 1e-6,
    split: bool = False,
    client: Any = None,
) -> IntArray:
    """Round a consistent real-valued table to a consistent integer table, unbiasedly: the
    table case of :func:`postdp.round`, whose documentation states the contract.

    Parameters
    ----------
    values : array_like, shape (..., geography.n, n_detailed), or sparse matrix
    table : Table
    rng, atol, split, client
        As in :func:`postdp.round`.

    Returns
    -------
    ndarray of int64 (sparse csr_array for sparse input)

    """
    if not isinstance(table, Table):
        raise TypeError(f"`table` must be a Table; got {type(table).__name__}")
    given: Any = values
    if sparse.issparse(given):  # the leaf cells only, one draw
        result: IntArray = _round_leaf_cells(given, table, _rng.as_generator(rng))
        return result
    geo, cat = table.geography, table.categories
    c = cat.leaves.size
    arr = _validation.real_array("values", values)
    if arr.ndim < 2 or arr.shape[-2:] != (geo.n, c):
        raise ValidationError(
            f"`values` must have shape (..., {geo.n}, {c}) (geounits x detailed cells); got "
            f"shape {arr.shape}"
        )
    shape = arr.shape
    B = int(np.prod(shape[:-2]))
    X = arr.reshape(B, geo.n, c).astype(np.float64, copy=False)
    big = float(np.abs(X).max(initial=0.0))
    if big >= _MAX_ABS:
        raise ValidationError(
            "`values` must stay below 2**52 in magnitude to be rounded (float64 holds no "
            "fractional part beyond that)"
        )
    leaves = geo.leaves
    sums = geo.aggregate(np.where(geo.is_leaf[:, None], X, 0.0).transpose(0, 2, 1))
    gap = float(np.abs(sums.transpose(0, 2, 1) - X).max(initial=0.0))
    if gap > atol * max(1.0, big):
        raise ValidationError(
            "`values` must be consistent across geography (every parent = the sum of its "
            f"children, cell by cell) before rounding; the largest gap is {gap:g}"
        )
    gen = _rng.as_generator(rng)
    if geo.n == 1 or c == 1:  # one tree only: the one-dimensional rounding
        tree, flat = (cat, _full_rows(X[:, 0], cat)) if geo.n == 1 else (geo, X[..., 0])
        rounded = round_consistent(flat, tree, rng=gen, atol=atol)
        one = rounded[:, cat.leaves][:, None, :] if geo.n == 1 else rounded[..., None]
        return one.reshape(shape)
    few = c >= _SPARSE_CELLS  # walk the fractional edges only
    splitting = split and geo.n_levels > 2 and not few
    net = None if splitting or few else _network(geo, cat)
    low = np.floor(X[:, leaves])
    q = np.rint((X[:, leaves] - low) * _Q).astype(np.int64)
    low = low.astype(np.int64) + (q == _Q)
    q[q == _Q] = 0
    out = np.empty((B, geo.n, c), dtype=np.int64)
    for b in range(B):  # one draw at a time: memory of one network
        if few:
            out[b] = _with_parents(low[b] + _round_sparse(q[b], geo, cat, gen), geo)
            continue
        if splitting:
            cells = low[b] + round_split(q[b], geo, cat, gen, _Q, client)
            out[b] = _with_parents(cells, geo)
            continue
        assert net is not None
        offset = _offsets(q[b], geo, cat, net.sets)
        cycle_round_rows(
            net.tail,
            net.head,
            net.adj_start,
            net.adj_edge,
            offset[None],
            gen.random((1, offset.size)),
            _Q,
        )
        cells = low[b] + (offset[net.element_edges] == _Q).reshape(leaves.size, c)
        out[b] = _with_parents(cells, geo)
    return out.reshape(shape)


def round(
    values: Any,
    over: Hierarchy | Table,
    *,
    rng: RNGLike = None,
    atol: float = 1e-6,
    split: bool = False,
    client: Any = None,
) -> Any:
    """Round consistent real values to consistent integers, unbiasedly: counts or tables.

    One verb for both models (a hierarchy of counts is the one-cell table): the top-down
    rounding of :func:`round_consistent` for a :class:`~postdp.Hierarchy`, the dependent
    rounding of a table's detailed cells along its geography for a
    :class:`~postdp.tables.Table`.

    Parameters
    ----------
    values : array_like, shape (..., n), or (..., geography.n, n_detailed), or sparse matrix
        Counts: every node's, in ``hierarchy.ids`` order, every parent equal to the sum of
        its children (to ``atol``). Tables: the detailed histogram of every geounit, rows
        in the order of ``geography.ids``, every geographic parent equal to the sum of its
        children cell by cell (to ``atol`` relative to the largest value): e.g. the output
        of :func:`~postdp.project` or :func:`~postdp.top_down` on table measurements.
        Leading axes are draws. Magnitudes below 2**52. Or a ``scipy.sparse`` matrix of
        the leaf geounits' detailed cells only, shape (leaf geounits, n_detailed), rows in
        the order of
        ``geography.leaves`` (as :attr:`Table.cells <postdp.tables.Table>` holds a sparse
        table; the parents are their sums): one draw, with memory following the stored
        cells, for tables too large to hold densely (e.g. the leaves of
        :func:`~postdp.postprocess.project_by_subtree`'s subtrees).
    over : Hierarchy or Table
        The structure the values are consistent over (a table's counts are not read).
    rng : int, numpy.random.Generator, SeedSequence or None
    atol : float, default 1e-6
        Tolerance of the consistency check, relative to max(1, max |values|).
    split : bool, default False
        Round each first-level geounit's subtree (each state) on its own with its boundary
        frozen, then the national part with what is left: the same guarantees, memory of
        the largest state instead of the nation (a different random stream than without).
        Not needed (and ignored) for tables of 256 or more detailed cells, such as the
        2,016-cell persons schema: their rounding works on the fractional counts only
        (:mod:`postdp.postprocess._solvers.sparse_network`), so its memory follows the cells that
        are not integers (a few dozen per block after top-down), not geounits x cells.
    client : dask.distributed.Client, optional
        With ``split``, run the states as Dask tasks (the same result as locally).

    Returns
    -------
    ndarray of int64, same shape (a ``scipy.sparse`` csr_array of the leaf cells for a sparse
    ``values``, usable as a :class:`~postdp.tables.Table`'s cells)
        Counts: as :func:`round_consistent` (every parent exactly the sum of its children,
        every count the floor or the ceiling of its input, unbiased). Tables: integers
        with every geographic parent exactly the sum of its children in every detailed
        cell (and so in every aggregate, aggregates being sums of detailed cells).
        Every detailed cell and every total of every geounit, and every category count of
        the root and of each leaf geounit, is the floor or the ceiling of its input (so
        within 1; integers are kept). Every count, detailed or aggregate, is unbiased
        (E[result] = input, up to the quantisation of fractional parts to multiples of
        2**-36). Internal geounits are taken as the sums of their leaf geounits.

    Raises
    ------
    ValidationError
        If the input is not consistent across geography, has the wrong shape, or holds
        magnitudes of 2**52 or more.

    Notes
    -----
    Aggregates strictly between a geounit's total and its detailed cells, at geounits
    strictly between the root and the leaves, are unbiased but can move by more than 1.
    No rounding can avoid that in general: take a geography root > {m1 > {g0, g1},
    m2 > {g2, g3}} and categories Total > {A > {a0, a1}, B > {b0, b1}} with
    g1 = (0, .5, 0, .5), g2 = (.5, 0, .5, 0), g3 = (0, 0, 0, .5) and g0 = 0 (cells a0, a1,
    b0, b1). Counts that are integers must stay: g1's total (1) makes g1.a1 + g1.b1 = 1; the
    root's b1 (1) makes g1.b1 + g3.b1 = 1; the root's A (1) makes g2.a0 + g1.a1 = 1; g2's
    total makes g2.a0 + g2.b0 = 1; m2's B (1) makes g2.b0 + g3.b1 = 1. Together they give
    2 g1.a1 = 1, which no integer meets.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> r = round(np.array([3.0, 1.5, 1.5]), h, rng=0)
    >>> int(r[0]), int(r[1] + r[2])
    (3, 3)
    >>> from postdp.tables import Table
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(h, cat, [[0, 0], [0, 0]])
    >>> v = np.array([[3.0, 2.0], [1.5, 0.5], [1.5, 1.5]])  # detailed cells of T, a, b
    >>> r = round(v, t, rng=0)
    >>> bool((r[0] == r[1] + r[2]).all()), bool((np.abs(r - v) < 1).all())
    (True, True)
    """
    if isinstance(over, Table):
        return _round_cells(values, over, rng=rng, atol=atol, split=split, client=client)
    if isinstance(over, Hierarchy):
        if split or client is not None:
            raise ValidationError("`split` and `client` are for tables")
        return round_consistent(values, over, rng=rng, atol=atol)
    raise TypeError(f"`over` must be a Hierarchy or a Table; got {type(over).__name__}")


def _round_sparse(q: IntArray, geo: Hierarchy, cat: Hierarchy, gen: Any) -> IntArray:
    """0/1 per leaf cell: the dependent rounding walked on the fractional edges only."""
    rows, cols = np.nonzero(q)
    up = np.zeros(q.shape, dtype=np.int64)
    up[rows, cols] = _round_parts(rows, cols, q[rows, cols], geo, cat, gen)
    return up


def _round_parts(
    rows: IntArray, cols: IntArray, parts: IntArray, geo: Hierarchy, cat: Hierarchy, gen: Any
) -> IntArray:
    """0/1 per fractional leaf cell (leaf position ``rows``, cell ``cols``, fractional part
    ``parts`` in units of 1/Q): the walk on the circulation of the fractional counts."""
    net = sparse_network(geo, cat, rows, cols, parts)
    offset = net.offset[None].copy()
    cycle_round_rows(
        net.tail, net.head, net.adj_start, net.adj_edge, offset, gen.random(offset.shape), _Q
    )
    up: IntArray = (offset[0, net.leaf_edge] == _Q).astype(np.int64)
    return up


def _round_leaf_cells(values: Any, table: Table, gen: Any) -> Any:
    """:func:`round` of a table given as a sparse matrix of the leaf geounits' cells (one draw)."""
    geo, cat = table.geography, table.categories
    shape = (geo.leaves.size, cat.leaves.size)
    m = sparse.csr_array(values, dtype=np.float64)
    if m.shape != shape:
        raise ValidationError(
            f"a sparse `values` must hold the leaf geounits' detailed cells, shape {shape}; "
            f"got shape {m.shape}"
        )
    m.sum_duplicates()
    data = np.asarray(m.data)
    if not np.isfinite(data).all():
        raise ValidationError("`values` must be finite")
    if float(np.abs(data).max(initial=0.0)) >= _MAX_ABS:
        raise ValidationError(
            "`values` must stay below 2**52 in magnitude to be rounded (float64 holds no "
            "fractional part beyond that)"
        )
    coo = m.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    low = np.floor(data)
    q = np.rint((data - low) * _Q).astype(np.int64)
    low = low.astype(np.int64) + (q == _Q)
    q[q == _Q] = 0
    frac = q != 0
    if frac.any() and (geo.n == 1 or cat.leaves.size == 1):  # one tree: a dense row or column
        full = np.zeros((geo.n, cat.leaves.size))
        full[geo.leaves] = m.toarray()
        full = _with_parents_float(full[geo.leaves], geo)
        out = _round_cells(full, table, rng=gen)[geo.leaves]
        return sparse.csr_array(out)
    if frac.any():
        low[frac] += _round_parts(rows[frac], cols[frac], q[frac], geo, cat, gen)
    rounded = sparse.csr_array((low, (rows, cols)), shape=shape, dtype=np.int64)
    rounded.eliminate_zeros()
    return rounded


def _with_parents_float(cells: FloatArray, geo: Hierarchy) -> FloatArray:
    """Every geounit's cells (rows = geography.ids) from the leaf geounits' (real)."""
    full = np.zeros((cells.shape[1], geo.n))
    full[:, geo.leaves] = cells.T
    out: FloatArray = geo.aggregate(full).T
    return out


def _with_parents(cells: IntArray, geo: Hierarchy) -> IntArray:
    """Every geounit's detailed cells from the leaf geounits' (rows = geography.ids)."""
    full = np.zeros((cells.shape[1], geo.n), dtype=np.int64)
    full[:, geo.leaves] = cells.T
    out: IntArray = geo.aggregate(full).T
    return out


def _full_rows(rows: FloatArray, categories: Hierarchy) -> FloatArray:
    """Every category node of each row of detailed cells."""
    full = np.zeros((rows.shape[0], categories.n))
    full[:, categories.leaves] = rows
    out: FloatArray = categories.aggregate(full)
    return out

"""(P) and top-down of a table too large to hold at once, one subtree at a time.

A state's 2020 persons file at block level has 2,603 noisy answers per block (the 11
marginals of the 2,016 cells): about 6 GB of answers and 5 GB per estimate for a state of
300,000 blocks. Cut the geography at one level (the counties): the *top* (the root down to
the cut level, with the cut geounits' own measurements) and one *subtree* per cut geounit
(its descendants' measurements). Only the top and one subtree are then ever held.

(P) is generalised least squares on a tree, a Gaussian smoother, and a subtree's cells are
independent of every answer outside it given its root's histogram. So (P) runs in three
steps that give the numbers of solving the whole table at once:

1. upward, for each subtree: the estimate of its root's histogram from its own answers and
   its covariance (the two-pass solver's upward pass; in the marginal basis for a schema
   table, c values and one s x s matrix per type, otherwise c values and a c x c matrix);
2. the top, solved with each cut geounit's summary standing for its children;
3. downward, for each subtree: the smoother's downward pass below its root's final
   histogram from step 2.

Top-down needs one pass: the top is solved, then each subtree below its root's fixed
histogram (a public detailed query at its root, as the Census Bureau's TopDown does state
by state).

BLUE, then restore (:func:`~postdp.postprocess.blue_restore`) takes both: the BLUE by the
three steps above, the top restored from its part of it (the root in the BLUE's precision
there, which the top's solve knows from the subtrees' summaries), then each subtree
restored below its root's restored histogram as the BLUE's downward pass reaches it. A
family's restoration needs only its parent's restored histogram and its children's BLUE,
so the result is the whole table's (the same whole numbers with ``integral``).

Memory: the top's arrays, one subtree's answers and estimate, and the summaries (for the
2020 persons schema about 4 x 2,016 floats per cut geounit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from postdp._threads import one_thread
from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.kalman_tree import TreeGLS
from postdp.postprocess._solvers.marginal_basis import (
    MarginalBasis,
    held_at_zero,
    table_schema,
    workload_basis,
)
from postdp.postprocess.estimators import (
    BLUE_RESTORE,
    BLUE_RESTORE_2020,
    PROJECT,
    estimator,
    estimators,
)
from postdp.postprocess.gls import (
    answered,
    level_answers,
    level_matrices,
    table_matrix,
)
from postdp.postprocess.topdown import top_down_cells
from postdp.tables import Measurement, Query, TableMeasurements, Workload
from postdp.tables.bypass import uniform_budget
from postdp.tables.published import PublishedTable

__all__ = ["project_by_subtree"]


def project_by_subtree(
    top: TableMeasurements,
    subtree: Callable[[int], TableMeasurements],
    *,
    method: str = PROJECT.name,
    variances: Sequence[Query | PublishedTable] = (),
) -> Iterator[Any]:
    """(P) or top-down of a large table, holding the top and one subtree at a time.

    Parameters
    ----------
    top : TableMeasurements
        The upper levels: a table whose leaf geounits, all at its deepest level (the cut
        level, e.g. the counties of a state), are the roots of the subtrees, with every
        measurement of these levels (the cut geounits' own included).
    subtree : callable
        ``subtree(k)`` returns the measurements of the k-th leaf of
        ``top.table.geography`` (in the order of ``geography.leaves``) and its
        descendants: a table rooted at that geounit (same id, same detailed cells), with
        no measurement at its level 0 (the root's own are in ``top``), as many draws as
        ``top``. Called twice per subtree with ``method="project"`` and the restorations
        (upward, then downward) and once with ``"topdown"``; it must return the same
        answers each time (read them from a file, or draw them from a fixed seed).
    method : str, default "project"
        An estimator that streams (:attr:`~postdp.postprocess.Estimator.streams`):
        ``"project"``: (P), generalised least squares (the BLUE), the same numbers as
        :class:`~postdp.postprocess.TableProjector` on the whole table. ``"topdown"``:
        the same numbers as :func:`~postdp.top_down` on the whole table.
        ``"blue-restore"``, ``"blue-restore-2020"``: the same numbers as
        :func:`~postdp.postprocess.blue_restore` (``integral=True`` for the second) on the
        whole table (a schema table; the cut level measured by noisy marginals, whose
        metric its families take; ``subtree(k)`` called twice, as for ``"project"``).
    variances : sequence of Query or PublishedTable, default ()
        With an estimator whose variances are known (``"project"``): queries, or
        published tables (:func:`postdp.data.pl94_tables`), whose estimates' variances
        to compute as well, for every geounit (from the design alone: they cost no
        privacy); names unique. For a schema table a query must be a
        marginal of the schema (:meth:`Query.marginal`) and a table over the schema's
        cells. Equal to :meth:`TableProjector.query_variances` and
        :meth:`TableProjector.table_variances` on the whole table.

    Returns
    -------
    iterator of ndarray, or of (ndarray, dict) with ``variances``
        First the top's detailed histograms, shape (..., top geounits, n_detailed), then
        each subtree's, (..., its geounits, n_detailed), its root included (equal to the
        top's row for it), k = 0, 1, ... Rows in each geography's id order. The work is
        done as the iterator is consumed. With ``variances``, each item is the histograms
        and a dict from query (or table) name to variances, shape (geounits, query size),
        same rows.

    Raises
    ------
    ValidationError
        At the call for a bad ``method`` or ``top``; while iterating, for a subtree that
        does not fit the top (its root, cells, draws, or a level-0 measurement).

    Notes
    -----
    The top's solve stands each cut geounit's children by their subtree's summary: the
    estimate of the cut geounit from its descendants' answers alone and its covariance,
    from the upward pass of :class:`~postdp.postprocess.TableProjector`'s two-pass
    solver. Given the cut geounit's histogram a subtree's cells do not depend on the
    rest of the table (the estimate is a Gaussian smoother on the geography), so the
    downward pass below the top's answer completes the whole table's solution exactly.
    For a schema table every step runs in the marginal basis; the subtrees must measure
    marginals the top measures too (e.g. the same marginals at every level).

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> q = Query.detailed(cat)
    >>> top = Table(Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"]), cat,
    ...             [[3, 1], [2, 2]])
    >>> subs = [Table(Hierarchy.from_parents([g, g + "1", g + "2"], [None, g, g]), cat,
    ...               rows) for g, rows in [("a", [[1, 1], [2, 0]]), ("b", [[2, 2], [0, 0]])]]
    >>> top_work = Workload([Measurement(d, q, Gaussian(rho=1.0)) for d in range(2)])
    >>> sub_work = Workload([Measurement(1, q, Gaussian(rho=1.0))])
    >>> top_m = measure(top, top_work, secure=False, rng=0)
    >>> parts = list(project_by_subtree(
    ...     top_m, lambda k: measure(subs[k], sub_work, secure=False, rng=k + 1)))
    >>> [p.shape for p in parts]
    [(3, 2), (3, 2), (3, 2)]
    >>> bool(np.allclose(parts[1][0], parts[0][1]))  # subtree a's root is the top's row a
    True
    """
    est = estimator(method)
    if not est.streams:
        fit = ", ".join(e.name for e in estimators("table") if e.streams)
        raise ValidationError(f"`method` {method!r} is not solved by subtree; use {fit}")
    if not isinstance(top, TableMeasurements):
        raise TypeError(f"`top` must be TableMeasurements; got {type(top).__name__}")
    geo = top.table.geography
    if geo.n == 1 or not np.all(geo.depth[geo.leaves] == geo.n_levels - 1):
        raise ValidationError(
            "`top` must stop at the cut level: every leaf geounit of its geography at its "
            "deepest level (the roots of the subtrees)"
        )
    wanted = list(variances)
    if est.name in (BLUE_RESTORE.name, BLUE_RESTORE_2020.name):
        if wanted:
            raise ValidationError(f"`variances`: {method!r} has none")
        return _restored(top, subtree, integral=est.integral)
    if est.level_by_level:
        uniform_budget(top, f"project_by_subtree(method={method!r})")
        if wanted and not est.variances:
            raise ValidationError(f"`variances`: {method!r} has none")
        return _top_down(top, subtree)
    schema = table_schema(top.table.categories, top.workload)
    for q in wanted:
        if isinstance(q, PublishedTable):
            if schema is not None and not _fits(q, schema):
                raise ValidationError(
                    f"`variances`: table {q.name!r} is not over the table's schema's cells"
                )
            if schema is None:
                table_matrix(q, top.table.categories)  # refused unless over the table's cells
            continue
        if not isinstance(q, Query):
            raise TypeError(
                f"`variances` must hold Query or PublishedTable objects; got {type(q).__name__}"
            )
        if schema is not None and (q.marginal_of is None or q.marginal_of.schema != schema):
            raise ValidationError(
                f"`variances`: query {q.name!r} is not a marginal of the table's schema"
            )
    names = [q.name for q in wanted]
    if len(set(names)) != len(names):
        raise ValidationError(f"`variances`: names must be unique; got {names}")
    return _blue(top, subtree, wanted)


def _fits(table: PublishedTable, schema: Any) -> bool:
    """Whether a published table's blocks apply to ``schema``'s cells as they are."""
    return bool(table.schema.shape == schema.shape and table.schema.cells == schema.cells)


def _lead(measurements: TableMeasurements) -> tuple[int, ...]:
    return tuple(measurements.values[0].shape[:-2])


def _subtree(top: TableMeasurements, subtree: Callable[[int], TableMeasurements], k: int) -> Any:
    """Subtree k's measurements, checked against the top."""
    sub = subtree(k)
    if not isinstance(sub, TableMeasurements):
        raise TypeError(f"subtree({k}) must return TableMeasurements; got {type(sub).__name__}")
    geo, cat = top.table.geography, top.table.categories
    expected = str(geo.ids[geo.leaves[k]])
    got = str(sub.table.geography.ids[sub.table.geography.root])
    if got != expected:
        raise ValidationError(f"subtree({k}) is rooted at {got!r}; expected {expected!r}")
    cells = sub.table.categories
    if not np.array_equal(cells.ids[cells.leaves], cat.ids[cat.leaves]):
        raise ValidationError(f"subtree({k}) has other detailed cells than `top`")
    if sub.workload.at(0):
        raise ValidationError(
            f"subtree({k}) measures its root; the root's measurements belong to `top`"
        )
    if _lead(sub) != _lead(top):
        raise ValidationError(
            f"subtree({k}) has draws of shape {_lead(sub)}; `top` has {_lead(top)}"
        )
    return sub


def _top_down(
    top: TableMeasurements, subtree: Callable[[int], TableMeasurements]
) -> Iterator[FloatArray]:
    geo, cat = top.table.geography, top.table.categories
    schema = table_schema(cat, top.workload)
    detailed = Query.detailed(cat) if schema is None else Query.marginal(schema, "detailed")
    upper = top_down_cells(top)
    yield upper
    for k, g in enumerate(geo.leaves):
        sub = _subtree(top, subtree, k)
        work = Workload(
            [Measurement(0, detailed, None), *sub.workload.measurements],
            neighbours=sub.workload.neighbours,
        )
        fixed = upper[..., g : g + 1, :]
        yield top_down_cells(TableMeasurements(sub.table, work, (fixed, *sub.values), sub.secure))


def _restored(
    top: TableMeasurements, subtree: Callable[[int], TableMeasurements], *, integral: bool
) -> Iterator[FloatArray]:
    """BLUE, then restore, by subtree: the whole table's BLUE (:func:`_blue`), the top
    restored from it in the BLUE's precision at the root (its deepest families in the
    ordered passes, as above the leaves), then each subtree restored below its root's
    restored histogram."""
    from postdp.postprocess.restore import check_blue_restore, check_restore_options, restore_blue

    check_blue_restore(top.table, top.workload)
    check_restore_options(top.workload, integral=integral, root_metric="blue")
    cut = top.table.geography.n_levels - 1
    if not any(not m.public for m in top.workload.at(cut)):
        raise ValidationError(
            "blue-restore by subtree needs noisy measurements at the cut level (its metric); "
            f"level {cut} of `top` has none"
        )
    held = {m.query.name for m in top.workload.at(cut) if m.public}
    restoring: dict[str, Any] = {}
    parts = _blue(top, subtree, [], restoring=restoring)
    first = next(parts)
    below = restoring["levels"] - 1  # the whole table's deepest level, below the cut
    upper = restore_blue(
        top, first, precision=restoring["precision"], leaf_level=cut + below, integral=integral
    )
    yield upper
    geo = top.table.geography
    for g, (blue, sub) in zip(geo.leaves, parts, strict=True):
        check_blue_restore(sub.table, sub.workload, held=held)
        check_restore_options(sub.workload, integral=integral, root_metric="blue")
        yield restore_blue(sub, blue, root=upper[..., g, :], leaf_level=below, integral=integral)


class _Solver:
    """One tree's (P) in the marginal basis (a schema table) or with c x c matrices."""

    def __init__(self, m: TableMeasurements, basis: Any, below: list[FloatArray] | None) -> None:
        self.geo = m.table.geography
        scale = m.budget_scale  # each geounit's own budget factor, if any
        if basis is not None:
            self.marginal = MarginalBasis(
                self.geo, m.workload, basis=basis, below=below, scale=scale
            )
            return
        self.levels = level_matrices(m.table, m.workload)
        c = m.table.categories.leaves.size
        cov = None if below is None else below[0]
        per_level = [(A, r) for A, r, _ in self.levels]
        self.tree = TreeGLS(self.geo, per_level, c, cov, scale=scale)

    def _values(self, m: TableMeasurements, B: int) -> list[FloatArray]:
        m = answered(m, m.budget_scale)
        return [v.reshape(B, *v.shape[-2:]) for v in m.values]

    def _ys(self, m: TableMeasurements, B: int) -> list[FloatArray]:
        m = answered(m, m.budget_scale)
        return [level_answers(self.geo, self.levels[d], m, d, B) for d in range(self.geo.n_levels)]

    def upward(self, answers: list[Any], B: int) -> list[tuple[FloatArray, FloatArray]]:
        """Per type, the root's estimate from :meth:`answers` alone and its covariance."""
        if hasattr(self, "marginal"):
            return self.marginal.upward(answers, B)
        return [self.tree.upward(answers)]

    def variances(
        self,
        queries: list[Query | PublishedTable],
        cat: Hierarchy,
        root: list[FloatArray] | None = None,
    ) -> dict[str, FloatArray]:
        """Each query's (or published table's rows') variances at every geounit (rows in id
        order); ``root``: the root's final covariance (per type in the marginal basis) from
        the larger tree."""
        if hasattr(self, "marginal"):
            basis = self.marginal
            out: dict[str, FloatArray] = {}
            for q in queries:
                if isinstance(q, PublishedTable):  # its blocks: disjoint rows, in turn
                    parts = [basis.marginal_variances(b, root) for b in q.blocks]
                    out[q.name] = np.concatenate(parts, axis=1)
                elif q.marginal_of is not None:
                    out[q.name] = basis.marginal_variances(q.marginal_of, root)
            return out
        matrices = [
            table_matrix(q, cat) if isinstance(q, PublishedTable) else q.matrix(cat)
            for q in queries
        ]
        rows = self.tree.row_variances(matrices, None if root is None else root[0])
        position = self.geo.layout.position
        return {q.name: held_at_zero(v[position]) for q, v in zip(queries, rows, strict=True)}

    def covariance_at(self, node: int) -> list[FloatArray]:
        """The final covariance of geounit ``node`` (row in id order), per type in the
        marginal basis: what the subtree rooted there takes as ``root``."""
        if hasattr(self, "marginal"):
            return self.marginal.type_covariances(node)
        position = int(self.geo.layout.position[node])
        return [next(P for k, P in self.tree.covariances() if k == position)]

    def answers(self, m: TableMeasurements, B: int) -> list[Any]:
        """What :meth:`solve` takes: ``m``'s answers, arranged for this solver (a list that
        :meth:`solve` empties as it goes, so drop ``m`` first to have them freed)."""
        return self._values(m, B) if hasattr(self, "marginal") else self._ys(m, B)

    def solve(
        self,
        answers: list[Any],
        B: int,
        below: list[FloatArray] | None = None,
        root: FloatArray | None = None,
    ) -> FloatArray:
        if hasattr(self, "marginal"):
            return self.marginal.solve(answers, B, below=below, root=root)
        out = self.tree.solve(answers, below=None if below is None else below[0], root=root)
        result: FloatArray = out[:, self.geo.layout.position]
        return result


def _blue(
    top: TableMeasurements,
    subtree: Callable[[int], TableMeasurements],
    queries: list[Query | PublishedTable],
    *,
    restoring: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """The BLUE of the top, then of each subtree (with ``queries``' variances); with
    ``restoring`` (a dict), what a restoration needs is put in it before the top is
    yielded -- ``"precision"``, the root's (the marginal basis's
    :meth:`~MarginalBasis.cell_precision`), and ``"levels"``, the most levels of a subtree
    -- and each subtree comes with its measurements, ``(estimate, measurements)``."""
    geo, cat = top.table.geography, top.table.categories
    lead = _lead(top)
    B = int(np.prod(lead)) if lead else 1
    basis: Any = None
    if table_schema(cat, top.workload) is not None:
        # the top's basis only: its leaves stand for subtrees, so the top alone need not
        # identify their cells (a tree built on it without them could not be solved)
        basis = workload_basis(top.workload)  # with the block matrices, made once
    lay = geo.layout
    slot = lay.position[geo.leaves] - int(lay.bounds[-2])  # each subtree's place in `below`
    solvers: list[_Solver | None] = []
    summaries = []
    for k in range(geo.leaves.size):
        sub = _subtree(top, subtree, k)
        try:
            solver = _Solver(sub, basis, None)
        except ValueError as err:  # a marginal the top's basis does not hold
            raise ValidationError(f"subtree({k}): {err}") from None
        if restoring is not None:
            levels = max(restoring.get("levels", 1), sub.table.geography.n_levels)
            restoring["levels"] = levels
        answers = solver.answers(sub, B)
        del sub  # its answers freed one by one as the upward pass rotates them
        with one_thread():
            summaries.append(solver.upward(answers, B))
        solvers.append(solver)
    n_types = len(summaries[0])
    below_cov, below_est = [], []
    for t in range(n_types):
        cov = np.empty((slot.size, *summaries[0][t][1].shape))
        est = np.empty((summaries[0][t][0].shape[0], slot.size, summaries[0][t][0].shape[1]))
        for k, parts in enumerate(summaries):
            est[:, slot[k]], cov[slot[k]] = parts[t]
        below_cov.append(cov)
        below_est.append(est)
    del summaries
    top_solver = _Solver(top, basis, below_cov)
    with one_thread():
        upper = top_solver.solve(top_solver.answers(top, B), B, below=below_est)
    c = cat.leaves.size
    first = upper.reshape(*lead, geo.n, c)
    if restoring is not None:
        assert hasattr(top_solver, "marginal")  # a schema table (checked by the caller)
        restoring["precision"] = top_solver.marginal.cell_precision(int(geo.root))
    yield (first, top_solver.variances(queries, cat)) if queries else first
    for k, g in enumerate(geo.leaves):
        sub = _subtree(top, subtree, k)
        below_root = solvers[k]
        assert below_root is not None
        solvers[k] = None  # its tree arrays are not needed again
        n = sub.table.geography.n
        answers = below_root.answers(sub, B)
        if restoring is not None:
            with one_thread():
                est = below_root.solve(answers, B, root=upper[:, g]).reshape(*lead, n, c)
            yield est, sub
            continue
        del sub  # its answers freed as the solve takes them, not held while it writes
        with one_thread():
            est = below_root.solve(answers, B, root=upper[:, g]).reshape(*lead, n, c)
        if not queries:
            yield est
            continue
        var = below_root.variances(queries, cat, top_solver.covariance_at(int(g)))
        del below_root
        yield est, var

"""Top-down: each parent's histogram split among its children, level by level.

At the root, the histogram closest (in the measurements' weighted least squares) to the
root's own measurements among the nonnegative ones that meet the root's public queries;
below, for each family and each detailed cell, the children's cells are the nonnegative
values that add up to the parent's cell and are closest to the children's own estimates
(the Census Bureau's TopDown order: nation, then states, ... ; its per-level problem is
nonnegative least squares with the parent's histogram as the constraint).

Exactness: when the noisy queries of a level are detailed cells (the usual workload: every
detailed cell measured at every level, any number of times, any weights), the level's
least-squares matrix is diagonal and the family problem separates into one Euclidean
projection onto a simplex per (family, detailed cell), solved exactly by sorting
(vectorised over all families, cells and draws). When some level's noisy queries group
cells (e.g. "one race" and "two or more races" at the tract level), the cells of a family
are coupled: each level is then solved as one exact nonnegative least-squares problem over
all its families at once (:class:`~postdp.postprocess.TableNonnegProjector` on a forest
whose parents' histograms are public), and the root likewise.

A one-cell table (a hierarchy of counts, public values at the root only) takes the
hierarchy's vectorised family split (:class:`~postdp.postprocess._solvers.simplex.TopDownPlan`,
through :mod:`postdp.postprocess._solvers.one_cell`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.marginal_basis import identifies_cells, table_schema
from postdp.postprocess._solvers.one_cell import one_cell
from postdp.postprocess._solvers.simplex import weighted_simplex
from postdp.postprocess.topdown2020.family import LevelQuadratic
from postdp.postprocess.topdown2020.level import split_level
from postdp.postprocess.topdown2020.root import certified_root
from postdp.tables import Measurement, Query, Table, TableMeasurements, Workload
from postdp.tables.bypass import uniform_budget

__all__ = ["check_top_down", "top_down_cells"]


def top_down_cells(measurements: TableMeasurements, *, client: Any = None) -> FloatArray:
    """Top-down post-processing of a table: nonnegative, consistent both ways.

    Parameters
    ----------
    measurements : TableMeasurements
        Every level's noisy queries must identify every detailed cell (e.g. the detailed
        cells themselves, several measurements combined by their weights, plus any grouped
        queries); public queries only at the root, except for a schema table measured by
        marginals: there an invariant may be kept at a level below the root where it is
        also one of the level above (the state totals of the 2020 design, under a public
        national total), and each family is then split with its children's invariants held.
    client : dask.distributed.Client, optional
        Run the subtrees below the first level (the states, for a national table) as Dask
        tasks. Below that level each subtree is split on its own, one partition per
        first-level geounit, locally too, so the result is the same array with or without
        a client. Used when every noisy query is of single cells (the separable case);
        a workload with grouped queries runs locally.

    Returns
    -------
    ndarray, shape (..., geography.n, n_detailed)
        Detailed histograms of every geounit, nonnegative; every parent equals the sum of
        its children; every public query it keeps holds exactly.

    Raises
    ------
    ValidationError
        For public queries below the root (see above), or a level whose noisy queries do
        not identify every detailed cell.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[0, 20], [30, 1]])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), None)]
    ...              + [Measurement(d, Query.detailed(cat), Geometric(epsilon=1.0))
    ...                 for d in range(2)])
    >>> out = top_down_cells(measure(t, w, secure=False, rng=0))
    >>> bool(out.min() >= 0), float(out[0].sum()), bool(np.allclose(out[0], out[1] + out[2]))
    (True, 51.0, True)
    """
    uniform_budget(measurements, "top-down")
    table = measurements.table
    check_top_down(table, measurements.workload)
    counts = one_cell(measurements) if client is None else None
    if counts is not None and set(counts.public) <= {table.geography.ids[table.geography.root]}:
        solved = counts.solve(nonneg=True, levels=True)  # the hierarchy's family split
        if solved is not None:
            lead = measurements.values[0].shape[:-2]
            return solved.reshape(*lead, table.geography.n, 1)
    if not _separable(table, measurements.workload):
        return _coupled_top_down(measurements)
    geo, cat = table.geography, table.categories
    c = cat.leaves.size
    column = np.full(cat.n, -1, dtype=np.int64)
    column[cat.leaves] = np.arange(c)
    lead = measurements.values[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    lay = geo.layout
    estimates = []  # per level, (B, n_level, c) in layout order, and the cell weights
    for d in range(geo.n_levels):
        est, weight = _own_estimate(measurements, d, B, c)
        laid = np.empty_like(est)
        laid[:, lay.position[geo.levels[d]] - lay.bounds[d]] = est
        estimates.append((laid, weight))
    out = np.empty((B, geo.n, c))
    out[:, 0] = _root(measurements, estimates[0][0][:, 0], estimates[0][1], B)
    if len(lay.parents):
        c0, c1 = lay.bounds[1], lay.bounds[2]
        out[:, c0:c1] = _split(estimates[1][0], out[:, :1], lay.starts[0], lay.sizes[0])
    tasks = _partitions(lay, [e for e, _ in estimates])
    if client is None:
        results = [_split_subtree(out[:, p], parts) for p, parts, _ in tasks]
    else:
        futures = [
            client.submit(_split_subtree, out[:, p], parts, pure=False) for p, parts, _ in tasks
        ]
        results = client.gather(futures)
    for (_, _, ranges), pieces in zip(tasks, results, strict=True):
        for (lo, hi), piece in zip(ranges, pieces, strict=True):
            out[:, lo:hi] = piece
    result: FloatArray = out[:, lay.position].reshape(*lead, geo.n, c)
    return result


Part = tuple[FloatArray, IntArray, IntArray, IntArray]


def _partitions(
    lay: Any, estimates: list[FloatArray]
) -> list[tuple[int, list[Part], list[tuple[int, int]]]]:
    """One task per geounit of the first level: its layout position; for each deeper level
    the slice of estimates with its families (starts relative to the slice, sizes, and each
    family's parent as an index into the previous level's slice); and where the results go
    (layout ranges). A subtree's geounits are contiguous at every level of the layout."""
    tasks: list[tuple[int, list[Part], list[tuple[int, int]]]] = []
    if len(lay.parents) < 2:
        return tasks
    for p in range(int(lay.bounds[1]), int(lay.bounds[2])):
        lo, hi = p, p + 1  # layout positions of the subtree at the current level
        parts: list[Part] = []
        ranges: list[tuple[int, int]] = []
        for d in range(1, len(lay.parents)):
            first, last = (int(i) for i in np.searchsorted(lay.parents[d], [lo, hi]))
            if first == last:
                break
            level_size = int(lay.bounds[d + 2] - lay.bounds[d + 1])
            starts = lay.starts[d]
            a = int(starts[first])
            b = int(starts[last]) if last < starts.size else level_size
            parts.append(
                (
                    estimates[d + 1][:, a:b],
                    starts[first:last] - a,
                    lay.sizes[d][first:last],
                    lay.parents[d][first:last] - lo,
                )
            )
            ranges.append((int(lay.bounds[d + 1]) + a, int(lay.bounds[d + 1]) + b))
            lo, hi = ranges[-1]
        if parts:
            tasks.append((p, parts, ranges))
    return tasks


def _split_subtree(top: FloatArray, parts: list[Part]) -> list[FloatArray]:
    """Split one subtree level by level, from its top geounit's histogram (B, c)."""
    above = top[:, None, :]
    out = []
    for estimate, starts, sizes, parents in parts:
        piece = _split(estimate, above[:, parents], starts, sizes)
        out.append(piece)
        above = piece
    return out


def check_top_down(table: Table, workload: Workload) -> None:
    """Raise :class:`ValidationError` unless top-down can run ``workload`` exactly.

    Called before any noise is drawn (e.g. by the command line).

    Parameters
    ----------
    table : Table
    workload : Workload

    Returns
    -------
    None
        Returns quietly when top-down can run this workload: public queries only at the
        root, and at every level noisy queries that identify every detailed cell (at the
        root, noisy and public queries together).

    Raises
    ------
    ValidationError
        Naming the query or level at fault.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "a"], [None, "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[1, 2]])
    >>> check_top_down(t, Workload([Measurement(d, Query.detailed(cat), Geometric(epsilon=1.0))
    ...                             for d in range(2)]))
    """
    cat = table.categories
    c = cat.leaves.size
    in_basis = table_schema(cat, workload) is not None
    for d in range(table.geography.n_levels):
        if in_basis:  # marginals: the rank test in the marginal basis, no c x c matrix
            for m in workload.at(d):
                above = {q.query.name for q in workload.at(d - 1) if q.public} if d else set()
                if m.public and d != 0 and m.query.name not in above:
                    raise ValidationError(
                        f"top-down keeps an invariant below the root only where it is also "
                        f"one of the level above (so the children's invariants add up to "
                        f"their parent's); query {m.query.name!r} is public at level {d} but "
                        f"not at level {d - 1} (use postdp.project)"
                    )
            used = [m.query.marginal_of for m in workload.at(d) if not m.public or d == 0]
            if not identifies_cells([q for q in used if q is not None]):
                raise ValidationError(
                    f"top-down for tables needs the noisy queries of every level to identify "
                    f"every detailed cell; those of level {d} do not"
                )
            continue
        info = np.zeros((c, c))
        every_cell = False  # a query of every cell on its own identifies them, no rank test
        for m in workload.measurements:
            if m.level != d:
                continue
            if m.public and d != 0:
                raise ValidationError(
                    f"top-down for tables keeps public queries at the root only; query "
                    f"{m.query.name!r} is public at level {d} (use postdp.project)"
                )
            if not m.public or d == 0:  # the root may be fixed by its invariants instead
                A = m.query.matrix(cat)
                every_cell = every_cell or (A.shape[0] == c and bool((A.sum(axis=1) == 1).all()))
                if not every_cell:
                    info += A.T @ A / (m.variance if not m.public else 1.0)
        if not every_cell and np.linalg.matrix_rank(info) < c:
            raise ValidationError(
                f"top-down for tables needs the noisy queries of every level to identify "
                f"every detailed cell; those of level {d} do not"
            )


def _separable(table: Table, workload: Workload) -> bool:
    """Every noisy query of single detailed cells and the root's public groups disjoint:
    the family problems split into one simplex projection per detailed cell."""
    in_basis = table_schema(table.categories, workload) is not None
    for m in workload.measurements:
        if m.public:
            continue
        marginal = m.query.marginal_of
        if in_basis and marginal is not None:  # single cells: every attribute kept
            if any(f is not None for f in marginal.factors):
                return False
        elif (m.query.matrix(table.categories).sum(axis=1) != 1).any():
            return False
    try:
        _root_groups(table, workload)
    except ValidationError:
        return False
    return True


def _coupled_top_down(measurements: TableMeasurements) -> FloatArray:
    """Top-down when cells are coupled: the root, then each level's families all at once,
    each an exact (P+) problem (parents' histograms public, the level's own queries).
    For a schema table measured by marginals, the families below the root are solved one
    by one in their parent's positive cells (:mod:`postdp.postprocess.topdown2020.family`)."""
    from postdp.postprocess.nonneg import TableNonnegProjector

    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    c = cat.leaves.size
    lead = measurements.values[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    values = [v.reshape(B, *v.shape[-2:]) for v in measurements.values]
    out = np.empty((B, geo.n, c))
    in_basis = table_schema(cat, workload) is not None
    for d in range(geo.n_levels):
        kids = geo.levels[d]
        own = [(i, m) for i, m in enumerate(workload.measurements) if m.level == d]
        noisy = [
            (i, m) for i, m in enumerate(workload.measurements) if m.level == d and not m.public
        ]
        quadratic = (
            LevelQuadratic(
                [m.query.marginal_of.cell_groups() for _, m in noisy],  # type: ignore[union-attr]
                [1.0 / m.variance for _, m in noisy],
            )
            if in_basis
            else None
        )
        whole = [i for i, m in own if m.public and _every_cell(m.query, cat)]
        if d == 0 and whole:  # the root's histogram is public (fixed from above)
            out[:, 0] = values[whole[0]][:, 0]
            continue
        if (
            d == 0
            and quadratic is not None
            and identifies_cells(
                [m.query.marginal_of for _, m in noisy]  # type: ignore[misc]
            )
        ):
            out[:, 0] = _schema_root(values, workload, noisy, quadratic, B)
            continue
        if d > 0 and quadratic is not None:  # each family in its free cells, no c x c matrix
            parents, up = np.unique(geo.parent[kids], return_inverse=True)
            publics = [(i, m) for i, m in own if m.public]
            groups = [m.query.marginal_of.cell_groups() for _, m in publics]  # type: ignore[union-attr]
            for b in range(B):
                answers = [values[i][b] for i, _ in noisy]
                fixed = [(gr, values[i][b]) for gr, (i, _) in zip(groups, publics, strict=True)]
                out[b, kids] = split_level(out[b, parents], up, answers, quadratic, fixed)
            continue
        if d == 0:
            forest = Hierarchy(["root"], [-1])
            items = [Measurement(0, m.query, m.mechanism, weight=m.weight) for _, m in own]
            answers = [values[i] for i, _ in own]
        else:
            parents, up = np.unique(geo.parent[kids], return_inverse=True)
            ids = ["root", *(f"p{i}" for i in range(parents.size))]
            ids += [f"k{i}" for i in range(kids.size)]
            forest = Hierarchy(ids, [-1, *([0] * parents.size), *(1 + up)])
            items = [Measurement(1, Query.detailed(cat), None)]
            items += [Measurement(2, m.query, m.mechanism, weight=m.weight) for _, m in own]
            answers = [out[:, parents], *(values[i] for i, _ in own)]
        zeros = np.zeros((forest.leaves.size, c), dtype=np.int64)
        work = Workload(items)
        family = TableMeasurements(Table(forest, cat, zeros), work, tuple(answers), False)
        solved = TableNonnegProjector(family.table, work)(family)
        out[:, kids] = solved[:, forest.levels[-1]]
    result: FloatArray = out.reshape(*lead, geo.n, c)
    return result


def _every_cell(query: Query, categories: Hierarchy) -> bool:
    """Whether ``query`` asks for every detailed cell on its own (in any order)."""
    if query.size != categories.leaves.size or any(len(g) != 1 for g in query.groups):
        return False
    return {str(g[0]) for g in query.groups} == {str(c) for c in categories.ids[categories.leaves]}


def _schema_root(
    values: list[FloatArray],
    workload: Workload,
    noisy: list[tuple[int, Measurement]],
    quadratic: LevelQuadratic,
    B: int,
) -> FloatArray:
    """The root histogram of a schema table (B, c) when its noisy marginals identify every
    cell: nonnegative least squares with the public marginals held, certified."""
    c = quadratic.groups[0].size
    every = np.arange(c)
    H = quadratic.block(every)
    rows, publics = [], []
    for i, m in enumerate(workload.measurements):
        if m.level == 0 and m.public:
            groups = m.query.marginal_of.cell_groups()  # type: ignore[union-attr]
            rows.append(np.arange(m.query.size)[:, None] == groups[None, :])
            publics.append(i)
    C = np.vstack(rows).astype(float) if rows else np.zeros((0, c))
    out = np.empty((B, c))
    for b in range(B):
        lin = quadratic.linear([values[i][b] for i, _ in noisy], every)[0]
        g = np.concatenate([values[i][b, 0] for i in publics]) if publics else np.zeros(0)
        if (g < 0).any():
            raise ValidationError("a public query at the root has a negative total")
        out[b] = certified_root(H, lin, C, g, who="top-down")
    return out


def _level_cells(
    table: Table, workload: Workload, d: int
) -> tuple[list[tuple[int, IntArray, float]], FloatArray]:
    """For the noisy measurements of level ``d`` (single cells: the separable case):
    (index, cell of each count, weight), and the weight of every detailed cell."""
    c = table.categories.leaves.size
    weight = np.zeros(c)
    items = []
    for i, m in enumerate(workload.measurements):
        if m.level != d or m.public:
            continue
        cells = np.argmax(m.query.matrix(table.categories), axis=1)
        weight[cells] += 1.0 / m.variance
        items.append((i, cells, 1.0 / m.variance))
    return items, weight


def _root_groups(table: Table, workload: Workload) -> list[tuple[int, int, IntArray]]:
    """(measurement index, group, its cells) of the root's public queries, disjoint."""
    fixed = np.zeros(table.categories.leaves.size, dtype=bool)
    out = []
    for i, m in enumerate(workload.measurements):
        if m.level != 0 or not m.public:
            continue
        for g, row in enumerate(m.query.matrix(table.categories)):
            cells = np.flatnonzero(row)
            if fixed[cells].any():
                raise ValidationError(
                    f"public queries at the root overlap (query {m.query.name!r}); top-down "
                    "needs disjoint public groups"
                )
            fixed[cells] = True
            out.append((i, g, cells))
    return out


def _own_estimate(
    measurements: TableMeasurements, d: int, B: int, c: int
) -> tuple[FloatArray, FloatArray]:
    """Each geounit's weighted least-squares histogram from its level's noisy detailed
    measurements, and the weight (information) of each cell."""
    items, weight = _level_cells(measurements.table, measurements.workload, d)
    n_level = measurements.table.geography.levels[d].size
    total = np.zeros((B, n_level, c))
    for i, cells, w in items:
        total[:, :, cells] += w * measurements.values[i].reshape(B, n_level, -1)
    return total / np.where(weight > 0, weight, 1.0), weight


def _root(
    measurements: TableMeasurements, estimate: FloatArray, weight: FloatArray, B: int
) -> FloatArray:
    """The root histogram: nonnegative, public groups exact, weighted least squares."""
    out = np.maximum(estimate, 0.0)
    for i, g, cells in _root_groups(measurements.table, measurements.workload):
        target = measurements.values[i].reshape(B, -1)[:, g]
        if (target < 0).any():
            raise ValidationError("a public query at the root has a negative total")
        if cells.size == 1:  # a public cell: its value (it may have no noisy measurement)
            out[:, cells[0]] = target
            continue
        for b in range(B):
            out[b, cells] = weighted_simplex(estimate[b, cells], weight[cells], target[b])
    return out


def _split(
    estimate: FloatArray, parent: FloatArray, starts: IntArray, sizes: IntArray
) -> FloatArray:
    """Children's cells: for each (draw, family, cell), the nonnegative values closest to
    the children's estimates that add up to the parent's cell (a simplex projection)."""
    B, n_kids, c = estimate.shape
    families = sizes.size
    family = np.repeat(np.arange(families), sizes)
    # one segment per (draw, cell, family); within it the children in any order
    v = np.transpose(estimate, (0, 2, 1)).reshape(-1)  # (B, c, n_kids) flattened
    segment = (np.arange(B * c)[:, None] * families + family[None, :]).reshape(-1)
    target = np.transpose(parent, (0, 2, 1)).reshape(-1)  # (B, c, families)
    order = np.lexsort((-v, segment))
    vs, seg = v[order], segment[order]
    first = np.flatnonzero(np.diff(seg, prepend=-1))
    csum = np.cumsum(vs)
    base = np.repeat(csum[first] - vs[first], np.diff(np.append(first, vs.size)))
    rank = np.arange(vs.size) - np.repeat(first, np.diff(np.append(first, vs.size))) + 1
    tau = (csum - base - target[seg]) / rank
    valid = vs - tau > 0
    # the last valid position of each segment gives its threshold
    last = np.maximum.reduceat(np.where(valid, np.arange(vs.size), -1), first)
    thresh = np.where(last >= 0, tau[np.maximum(last, 0)], np.inf)
    t_sorted = np.maximum(vs - np.repeat(thresh, np.diff(np.append(first, vs.size))), 0.0)
    t = np.empty_like(v)
    t[order] = t_sorted
    return np.transpose(t.reshape(B, c, n_kids), (0, 2, 1))

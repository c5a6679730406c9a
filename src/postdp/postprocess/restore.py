"""BLUE, then restore: the best linear unbiased estimate of a schema table, made
nonnegative family by family while staying as close to it as possible.

The estimate of every geounit and cell is first the BLUE (the GLS (P) of
:class:`~postdp.postprocess.TableProjector`, every invariant held: unbiased, with exact
standard deviations from :meth:`TableProjector.query_variances`). It can be negative.
Restoring it level by level, as top-down does, keeps each family's result close to the
BLUE: the root minimises (x - x_blue)' P_0 (x - x_blue) over nonnegative x that meet the
root's invariants, P_0 the inverse of the BLUE's covariance at the root (the precision of
every level's measurements together: a marginal the lower levels pin down, such as the
Hispanic count, moves little; ``root_metric="measurements"`` takes H_0, the root's own
measurements' information, as postdp 0.1 did), then every parent's children minimise
sum_j (x_j - blue_j)' H_d (x_j - blue_j) over nonnegative x_j adding up to the parent's
restored histogram and meeting their own invariants. H_d is
the information matrix of level d's noisy marginals (the identity where they do not
identify every cell; for a level measured by nothing noisy, such as the AIAN spine's states,
the next level's, each geounit weighed by its children's combined information), so a cell
the BLUE knows well moves little; a geounit measured with its own multiple s_j of its
level's budget (``budget_scale``) weighs s_j H_d. Each problem is solved exactly, with
its certificate, by the top-down family solver
(:mod:`postdp.postprocess.topdown2020.family`), with b_j = H_d blue_j in place of the
noisy answers' A' W y. The result is nonnegative, consistent both ways and meets every
invariant; :func:`~postdp.round` makes it integral.

Below the root and above the leaves (the states, counties, tracts and block groups of the
2020 spine), each family is restored in the order the 2020 production TopDown solved it
(``shared/research/pl94-2020-design.md`` section 1.6): first the children's totals,
nearest the BLUE's totals, nonnegative and adding up to the parent's (a weighted simplex
projection); then the cells, as above, with each child's total held within 0.1 of its
restored total. In one pass, a small child's cells raised to 0 would take persons from
its larger siblings, making small geounits too large and large ones too small by more
than TopDown does (``docs/accuracy.md``); held totals confine that exchange to each
child's own cells. A level with public totals holds them exactly instead, and the leaves'
families (the blocks) take one pass, as in production (``ordered=False``: one pass
everywhere).

Structural bounds (``bounds``, e.g. the 2020 group-quarters bounds) are rows of every
family's restoration (:mod:`postdp.postprocess.topdown2020.family`); with ``integral=True``
each family, restored against its integral parent, is rounded by the production rounder's
flow keeping them, so the release is whole numbers meeting every bound; a family restored
totals first is rounded in the same order (the totals by largest remainders, then the
cells with those totals, as production's two rounder passes).

This is the estimator the 2026 BlueDown paper (arXiv:2603.10099) describes in outline --
BLUE over the hierarchy, then per-parent restoration -- solved here with postdp's exact
projections instead of a mixed-integer program.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.marginal_basis import identifies_cells, table_schema
from postdp.postprocess._solvers.simplex import weighted_simplex
from postdp.postprocess.topdown2020.dhc import is_dhc, top_down_dhc
from postdp.postprocess.topdown2020.family import LevelQuadratic
from postdp.postprocess.topdown2020.level import split_level
from postdp.postprocess.topdown2020.passes import (
    SLACK,
    round_totals_first,
    totals_first,
    weighted,
)
from postdp.postprocess.topdown2020.root import bounded_root, certified_root
from postdp.postprocess.topdown2020.rounding import round_nested, rounder_chain
from postdp.postprocess.topdown2020.structural import FamilyRows, StructuralPlan, rounder_limits
from postdp.tables import CountBounds, Measurement, Table, TableMeasurements, Workload
from postdp.tables.bypass import only_children_unmeasured
from postdp.tables.schema import Marginal, Schema

__all__ = ["blue_restore", "check_blue_restore", "restore_dhc"]


def blue_restore(
    measurements: TableMeasurements,
    *,
    bounds: Sequence[CountBounds] | None = None,
    integral: bool = False,
    rounders: Sequence[str] | None = None,
    ordered: bool = True,
    root_metric: str | None = None,
    held: ArrayLike | None = None,
) -> FloatArray:
    """The BLUE of a schema table, restored to nonnegative family by family (for the DHC
    persons design, in its two outer passes with the PL94 histogram ``held``: see
    :func:`restore_dhc`).

    Parameters
    ----------
    measurements : TableMeasurements
        A schema table measured by marginals (leading draw axes allowed). Invariants may be
        at any level where the level above keeps them too (as for top-down).
    bounds : sequence of CountBounds, optional
        Structural bounds every restored geounit meets (e.g. the 2020 group-quarters
        bounds and nursing zero, :func:`postdp.data.facility_bounds`); default the
        measurements' own (``measurements.bounds``).
    integral : bool, default False
        Round as the restoration goes down: the root and then every family, once
        restored against its (integral) parent, is rounded by the production rounder's
        flow (each cell the floor of its restored value plus 0 or 1, L1-closest over
        ``rounders``, keeping the parent, the public totals and the bounds; a lower bound
        must be on one of ``rounders``). Public marginals other than totals are then
        refused.
    rounders : sequence of str, optional
        The rounder's queries with ``integral`` (default the 2020 production list on the
        schema's attributes, as :func:`~postdp.postprocess.top_down_2020`'s).
    ordered : bool, default True
        Below the root and above the leaves, restore each family in the 2020 production's
        order (see the module notes): the children's totals first, then their cells with
        each total held within 0.1 of its restored value (and, with ``integral``, the
        totals rounded before the cells). False restores every family in one pass, totals
        and cells together (postdp 0.1's restoration, whose nonnegativity moves persons
        from larger to smaller siblings: ``docs/accuracy.md``).
    root_metric : {"blue", "measurements"}, optional
        The distance the root is restored in: the BLUE's own precision there (the inverse
        of its covariance, :meth:`TableProjector.cell_precision`: every level's
        measurements, so a marginal the levels below pin down moves little), or the
        information of the root's own measurements (H_0, postdp 0.1). Default "blue"
        ("measurements" for the DHC, whose BLUE precision over 423,360 cells is not formed).
    held : array_like of int, shape (geography.n, 2016), optional
        The DHC design only (and required there, with ``integral=True``): each geounit's
        PL94 persons histogram, held exactly (as :func:`~postdp.postprocess.top_down_2020`).

    Returns
    -------
    ndarray, shape (..., geography.n, n_detailed)
        Nonnegative detailed histograms (whole numbers with ``integral``); every parent the
        sum of its children; every invariant exact; every bound met.

    Raises
    ------
    ValidationError
        For a table that is not a schema table measured by marginals, or an invariant not
        kept at the level above.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload, measure
    >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
    >>> t = Table(geo, s.categories(), [[0, 1, 0, 2], [3, 0, 0, 1]])
    >>> w = Workload([Measurement(0, Query.marginal(s, "total"), None)]
    ...              + [Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=0.5))
    ...                 for d in range(2)])
    >>> out = blue_restore(measure(t, w, secure=False, rng=1))
    >>> bool(out.min() >= 0), float(out[0].sum()), bool(np.allclose(out[0], out[1] + out[2]))
    (True, 7.0, True)
    """
    from postdp.postprocess.gls import TableProjector

    table, workload = measurements.table, measurements.workload
    if is_dhc(check_blue_restore(table, workload)):
        return restore_dhc(
            measurements, held=held, integral=integral, rounders=rounders, bounds=bounds,
            ordered=ordered, root_metric=root_metric or "measurements",
        )  # fmt: skip
    if held is not None:
        raise ValidationError("`held` is for the DHC persons design (dhc_schema()'s tables)")
    root_metric = root_metric or "blue"
    check_restore_options(workload, integral=integral, root_metric=root_metric)
    scale = only_children_unmeasured(table.geography, measurements.budget_scale, "blue_restore")
    projector = TableProjector(table, workload, budget_scale=scale)
    blue = projector(measurements)
    root = int(table.geography.root)
    precise = projector.cell_precision(root) if root_metric == "blue" else None
    return restore_blue(
        measurements, blue, precision=precise, bounds=bounds, integral=integral,
        rounders=rounders, ordered=ordered,
    )  # fmt: skip


def restore_dhc(
    measurements: TableMeasurements,
    *,
    held: ArrayLike | None,
    integral: bool,
    rounders: Sequence[str] | None = None,
    bounds: Sequence[CountBounds] | None = None,
    ordered: bool = True,
    root_metric: str = "measurements",
    blue: FloatArray | None = None,
) -> FloatArray:
    """BLUE, then restore, for the DHC persons design: the BLUE of every geounit (the GLS
    (P) of :class:`~postdp.postprocess.TableProjector`, exact over the non-nested marginals),
    then its restoration in the DHC's two outer passes per parent
    (:mod:`postdp.postprocess.topdown2020.dhc`), with the BLUE's answers to every measured
    query in place of the noisy ones: so each family minimises sum_j (x_j - blue_j)' H_d
    (x_j - blue_j) over the 40-age-group cells (H_d the level's information from its
    measured queries coarser than them; PL94 held), rounds, then splits single years
    nearest the BLUE's detailed cells with the rounded 40-group counts held, and rounds.
    The root is restored in its own measurements' information (``root_metric`` is
    "measurements": the BLUE's precision over 423,360 cells is not formed), the PL94
    histogram held. Integral only (``integral=True``): the design rounds between passes.

    Restoring any estimate that is itself a feasible release (whole, nonnegative,
    consistent, the PL94 histograms held) gives it back.

    Parameters
    ----------
    measurements : TableMeasurements
        Of a :func:`postdp.tables.dhc_schema` table measured by
        ``load_strategy("dhc-2020-persons")`` (leading draw axes allowed).
    held : array_like of int, shape (geography.n, 2016)
        Each geounit's PL94 persons histogram, held exactly (as
        :func:`~postdp.postprocess.top_down_2020`'s ``held``).
    integral : bool
        Must be True (the design rounds between its passes).
    rounders, bounds
        ``rounders`` is not taken on the DHC (the production's rounder queries are used);
        ``bounds`` may be one set on ``relgq``, the group-quarters bounds of
        :func:`postdp.data.dhc_facility_bounds`, met by record switching as
        :func:`~postdp.postprocess.top_down_2020` meets them.
    ordered : bool, default True
        Must be True (the production's ordered passes).
    root_metric : {"measurements"}, default "measurements"
    blue : ndarray, shape (..., geography.n, 1227744), optional
        A BLUE computed already (e.g. by one :class:`~postdp.postprocess.TableProjector`
        kept for several draws: its design is most of the cost); default: computed here.
        The noisy answers are then not read (only the public totals).

    Returns
    -------
    ndarray of float64, shape (..., geography.n, 1227744)
        Whole numbers: nonnegative, consistent, every PL94 histogram the one held.

    Raises
    ------
    ValidationError
        For ``integral=False``, another ``root_metric``, ``ordered=False``, rounders,
        bounds other than one set on ``relgq`` (or ones record switching cannot meet where
        they are required), a ``held`` that is missing or not a consistent PL94 histogram
        per geounit the edits allow, or a ``blue`` of another shape.

    Examples
    --------
    The restoration rounds between its passes, so it is integral only (refused before
    anything is solved; a county's design, no answer drawn):

    >>> from postdp.data import synthetic_dhc_population
    >>> from postdp.tables import TableMeasurements, load_strategy
    >>> t = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    >>> w = load_strategy("dhc-2020-persons").workload(t)
    >>> nan = [np.full((t.geography.levels[m.level].size, 1), np.nan) for m in w.measurements]
    >>> try:
    ...     restore_dhc(TableMeasurements(t, w, tuple(nan), False), held=None, integral=False)
    ... except ValueError as err:
    ...     print(str(err)[:46])
    blue-restore on the DHC rounds between its two
    """
    from postdp.postprocess.gls import TableProjector
    from postdp.postprocess.topdown2020.driver import dhc_plan

    if not integral:
        raise ValidationError(
            "blue-restore on the DHC rounds between its two passes (40 age groups, then "
            "single years): pass integral=True (the blue-restore-2020 method)"
        )
    if root_metric != "measurements":
        raise ValidationError(
            "blue-restore on the DHC restores the root in its measurements' information "
            "(root_metric='measurements'): the BLUE's precision over 423,360 cells is not "
            "formed"
        )
    if not ordered:
        raise ValidationError("blue-restore on the DHC runs the production's ordered passes")
    table, workload = measurements.table, measurements.workload
    plan = dhc_plan(table, workload, held, rounders, bounds or (), False,
                    measurements.budget_scale)  # fmt: skip
    assert plan is not None  # a DHC table
    if blue is None:
        blue = TableProjector(table, workload, budget_scale=plan.scale)(measurements)
    blue = np.asarray(blue, dtype=np.float64)
    geo = table.geography
    if blue.shape != (*measurements.values[0].shape[:-2], geo.n, plan.c):
        raise ValidationError(
            f"`blue` must have shape {(*measurements.values[0].shape[:-2], geo.n, plan.c)}; "
            f"got {blue.shape}"
        )
    answers = []
    level_rows: dict[int, FloatArray] = {}
    for i, m in enumerate(workload.measurements):
        if m.public:
            answers.append(np.asarray(measurements.values[i], dtype=np.float64))
            continue
        if m.level not in level_rows:  # once a level: its ten queries share the rows
            nodes = geo.levels[m.level]
            first, n = int(nodes[0]), nodes.size
            consecutive = np.array_equal(nodes, np.arange(first, first + n))
            level_rows[m.level] = (
                blue[..., first : first + n, :] if consecutive else blue[..., nodes, :]
            )  # a view where it can be
        rows = level_rows[m.level]
        if m.query.size == plan.c:
            answers.append(rows)
        else:
            flat = rows.reshape(-1, plan.c)
            own = m.query.marginal_of.apply(flat)  # type: ignore[union-attr]
            answers.append(own.reshape(*rows.shape[:-1], m.query.size))
    del blue, level_rows  # the caller's; the answers keep what they need
    out: FloatArray = top_down_dhc(plan, workload, answers, None, dtype=np.float64)
    return out


def check_restore_options(workload: Workload, *, integral: bool, root_metric: str) -> None:
    """Refuse, before anything is solved, options :func:`blue_restore` cannot honour."""
    if root_metric not in ("blue", "measurements"):
        raise ValidationError(
            f"`root_metric` must be 'blue' or 'measurements'; got {root_metric!r}"
        )
    if integral and any(m.public and m.query.size != 1 for m in workload.measurements):
        raise ValidationError(
            "blue-restore with integral=True keeps public totals only; the workload has "
            "other public marginals"
        )


def restore_blue(
    measurements: TableMeasurements,
    blue: FloatArray,
    *,
    precision: FloatArray | None = None,
    root: FloatArray | None = None,
    leaf_level: int | None = None,
    bounds: Sequence[CountBounds] | None = None,
    integral: bool = False,
    rounders: Sequence[str] | None = None,
    ordered: bool = True,
) -> FloatArray:
    """Restore a given BLUE family by family (:func:`blue_restore`'s second step; the
    subtree path of :func:`~postdp.postprocess.project_by_subtree` calls it on the top and
    on each subtree).

    Parameters
    ----------
    measurements : TableMeasurements
        The measurements the BLUE was estimated from (their metrics, public answers and
        bounds), already checked (:func:`check_blue_restore`, :func:`check_restore_options`).
    blue : ndarray, shape (..., geography.n, n_detailed)
        The BLUE of every geounit (of the whole table, for a part of it).
    precision : ndarray, shape (n_detailed, n_detailed), optional
        The root's metric (the BLUE's precision there); default the root's measurements'
        information.
    root : ndarray, shape (..., n_detailed), optional
        The root's histogram, restored already (a subtree below its larger tree's answer):
        the root is not restored again, and the measurements hold nothing at level 0.
    leaf_level : int, optional
        The level, in this table, of the whole table's deepest geounits, whose families
        take one pass (default this table's deepest; a part of a table cut into subtrees
        gives the whole's).
    bounds, integral, rounders, ordered
        As :func:`blue_restore`.

    Returns
    -------
    ndarray, shape (..., geography.n, n_detailed)
    """
    table, workload = measurements.table, measurements.workload
    geo = table.geography
    schema = table_schema(table.categories, workload)
    assert schema is not None  # checked by the caller
    c = schema.size
    if bounds is None:
        bounds = measurements.bounds
    chain, cell_weight = rounder_chain(schema, rounders) if integral else ([], 1.0)
    structural = StructuralPlan(schema, bounds, geo.n, chain) if bounds else None
    lead = measurements.values[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    scale = only_children_unmeasured(geo, measurements.budget_scale, "blue_restore")
    blue = blue.reshape(B, geo.n, c)
    deepest = geo.n_levels - 1 if leaf_level is None else leaf_level  # one pass there
    values = [v.reshape(B, *v.shape[-2:]) for v in measurements.values]
    out = np.empty((B, geo.n, c))
    if root is not None:
        out[:, geo.root] = np.asarray(root, dtype=np.float64).reshape(B, c)
    for d in range(1 if root is not None else 0, geo.n_levels):
        nodes = geo.levels[d]
        weight = None if scale is None else scale[nodes]
        metric = _metric(workload, d)
        if metric is None and d > 0 and not any(not m.public for m in workload.at(d)):
            metric, weight = _borrowed(workload, geo, d, scale)
        if metric is None:  # the Euclidean distance where the level's queries leave cells unknown
            quadratic = LevelQuadratic([np.arange(c)], [1.0])
            used = [schema.marginal("detailed")]
        else:
            quadratic, used = metric
        publics = [(i, m) for i, m in enumerate(workload.measurements) if m.level == d and m.public]
        for b in range(B):
            own = [q.apply(blue[b, nodes]) for q in used]  # A_q blue: b = H blue
            fixed = [
                (m.query.marginal_of.cell_groups(), values[i][b])  # type: ignore[union-attr]
                for i, m in publics
            ]
            totals = _public_totals(publics, values, b)
            if d == 0:
                every = np.arange(c)
                H = quadratic.block(every) if precision is None else precision
                lin = quadratic.linear(own, every)[0] if precision is None else H @ blue[b, 0]
                out[b, 0], root_rows = _root(H, lin, fixed, c, structural, geo.root)
                if integral:
                    out[b, 0] = round_nested(
                        out[b, :1],
                        chain,
                        cell_weight=cell_weight,
                        totals=None if totals is None else np.rint(totals[:1]).astype(np.int64),
                        total_weight=1.0,
                        **rounder_limits(root_rows),
                    ).x[0]
            else:
                parents, up = np.unique(geo.parent[nodes], return_inverse=True)
                rounder = (chain, cell_weight) if integral else None
                if ordered and d < deepest and totals is None:
                    out[b, nodes] = _totals_first(
                        out[b, parents], up, blue[b, nodes].sum(axis=1), own, quadratic,
                        structural=structural, geounits=nodes, rounder=rounder, weight=weight,
                    )  # fmt: skip
                else:
                    out[b, nodes] = split_level(
                        out[b, parents], up, own, quadratic, fixed, structural=structural,
                        geounits=nodes, rounder=rounder, totals=totals, weight=weight,
                    )  # fmt: skip
    result: FloatArray = out.reshape(*lead, geo.n, c)
    return result


def _totals_first(
    parents_out: FloatArray,
    parent_of: np.ndarray,
    blue_totals: FloatArray,
    own: list[FloatArray],
    quadratic: LevelQuadratic,
    *,
    structural: StructuralPlan | None,
    geounits: np.ndarray,
    rounder: tuple[list[tuple[np.ndarray, float]], float] | None,
    weight: FloatArray | None,
) -> FloatArray:
    """Every family of one level in the production's order: the children's totals nearest
    the BLUE's (nonnegative, adding up to the parent's: a weighted simplex projection, child
    j weighed by its budget factor), then their cells nearest the BLUE in the level's
    metric with each total within 0.1 of those (:func:`totals_first`), then (``rounder``)
    the totals and the cells rounded in that order (:func:`round_totals_first`)."""
    out = np.zeros((parent_of.size, parents_out.shape[1]))
    order = np.argsort(parent_of, kind="stable")
    edges = np.searchsorted(parent_of[order], np.arange(parents_out.shape[0] + 1))
    for f in range(parents_out.shape[0]):
        kids = order[edges[f] : edges[f + 1]]
        p = parents_out[f]
        cells = np.flatnonzero(p > 0)
        if kids.size <= 1 or not cells.size:
            out[np.ix_(kids, cells)] = p[cells]
            continue
        a = None if weight is None else weight[kids]
        h = np.ones(kids.size) if a is None else a
        first = weighted_simplex(blue_totals[kids], h, float(p[cells].sum()))
        b = weighted(quadratic.linear([y[kids] for y in own], cells), a)
        bound = None if structural is None else structural.family(cells, geounits[kids])
        x = totals_first(quadratic.block(cells), b, p[cells], first, bound, a, SLACK)
        if rounder is not None:
            chain = [(groups[cells], w) for groups, w in rounder[0]]
            parent = np.rint(p[cells]).astype(np.int64)
            out[np.ix_(kids, cells)] = round_totals_first(x, chain, rounder[1], parent, bound)
        else:
            out[np.ix_(kids, cells)] = x
    return out


def _metric(workload: Workload, d: int) -> tuple[LevelQuadratic, list[Marginal]] | None:
    """Level ``d``'s information metric and its marginals, None where its noisy marginals
    leave cells unknown."""
    noisy = [m for m in workload.at(d) if not m.public]
    used = [m.query.marginal_of for m in noisy if m.query.marginal_of is not None]
    if not noisy or len(used) < len(noisy) or not identifies_cells(used):
        return None
    quadratic = LevelQuadratic([q.cell_groups() for q in used], [1.0 / m.variance for m in noisy])
    return quadratic, used


def _borrowed(
    workload: Workload, geo: Hierarchy, d: int, scale: FloatArray | None
) -> tuple[tuple[LevelQuadratic, list[Marginal]] | None, FloatArray | None]:
    """A level measured by nothing noisy (the AIAN spine's states, known by their branches):
    the metric of the level below, each geounit weighed by the information of its children's
    sum, 1 / sum_j (1 / s_j); None where that level leaves cells unknown or a child has no
    budget."""
    metric = _metric(workload, d + 1) if d + 1 < geo.n_levels else None
    kids = geo.levels[d + 1] if metric is not None else np.zeros(0, dtype=np.int64)
    s = np.ones(kids.size) if scale is None else scale[kids]
    if metric is None or (s <= 0).any():
        return None, None if scale is None else scale[geo.levels[d]]
    spread = np.bincount(geo.parent[kids], weights=1.0 / s, minlength=geo.n)
    weight: FloatArray = 1.0 / spread[geo.levels[d]]
    return metric, None if (weight == 1.0).all() else weight


def _root(
    H: FloatArray,
    lin: FloatArray,
    fixed: list[tuple[np.ndarray, FloatArray]],
    c: int,
    structural: StructuralPlan | None,
    root: int,
) -> tuple[FloatArray, FamilyRows | None]:
    """The root restored: the nonnegative histogram meeting its invariants (and its
    structural bounds, returned for the rounder) that minimises 1/2 x'Hx - lin'x, i.e.
    nearest the BLUE in the metric H when lin = H blue."""
    every = np.arange(c)
    rows = [np.arange(v.shape[1])[:, None] == g[None, :] for g, v in fixed]
    C = np.vstack(rows).astype(float) if rows else np.zeros((0, c))
    g = np.concatenate([v[0] for _, v in fixed]) if fixed else np.zeros(0)
    bound = None if structural is None else structural.family(every, np.array([root]))
    if bound is None:
        return certified_root(H, lin, C, g, who="blue_restore"), None
    x = bounded_root(H, lin, C, g, bound.C, bound.lo[0], bound.hi[0], who="blue_restore")
    x[bound.fixed[0]] = 0.0
    return x, bound


def _public_totals(
    publics: list[tuple[int, Measurement]], values: list[FloatArray], b: int
) -> FloatArray | None:
    """The level's public totals (one per geounit), if it has them."""
    for i, m in publics:
        if m.query.size == 1:
            out: FloatArray = values[i][b][:, 0]
            return out
    return None


def check_blue_restore(table: Table, workload: Workload, *, held: set[str] | None = None) -> Schema:
    """Refuse, before anything is drawn, a design :func:`blue_restore` cannot run.

    Parameters
    ----------
    table : Table
    workload : Workload
    held : set of str, optional
        A subtree's: the public queries its root's level keeps in the larger tree (its
        own measurements hold nothing at level 0).

    Returns
    -------
    Schema
        The schema the workload's marginals are of.

    Raises
    ------
    ValidationError
        For a table that is not a schema table measured by marginals, or an invariant not
        kept at the level above.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
    >>> s = Schema([Attribute("a", ["0", "1"])])
    >>> t = Table(Hierarchy.from_parents(["S", "p"], [None, "S"]), s.categories(), [[1, 2]])
    >>> w = Workload([Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=1.0))
    ...               for d in range(2)])
    >>> check_blue_restore(t, w) is not None
    True
    """
    geo, cat = table.geography, table.categories
    schema = table_schema(cat, workload)
    if schema is None:
        raise ValidationError(
            "blue-restore needs a schema table measured by marginals (Query.marginal)"
        )
    for d in range(1, geo.n_levels):
        above = {m.query.name for m in workload.at(d - 1) if m.public}
        if d == 1 and held is not None:
            above = set(held)
        for m in workload.at(d):
            if m.public and m.query.name not in above:
                raise ValidationError(
                    f"blue-restore keeps an invariant below the root only where the level "
                    f"above keeps it too; {m.query.name!r} is public at level {d} but not "
                    f"at level {d - 1}"
                )
    return schema

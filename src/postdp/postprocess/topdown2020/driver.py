"""The Census Bureau's 2020 TopDown as it ran, with open solvers: per parent, two
least-squares passes and two rounder passes (``shared/research/pl94-2020-design.md``
section 1.6; the production ``L2PlusRounderWithBackup_interleaved`` optimiser).

For a schema table measured by marginals with a noisy ``total`` at every level below the
root (the 2020 persons design, ``load_strategy("pl94-2020-persons")``):

- The root (the nation): nonnegative least squares of every noisy query, its public totals
  held; then one rounder pass over ``total`` and the rounder queries.
- Each parent's children, at the levels above the leaves (states, counties, tracts, block
  groups):

  1. least-squares pass 0, ``total`` only: the children's totals closest to their noisy
     totals (weighted), nonnegative, adding up to the parent's rounded total (a simplex
     projection; a public total is its value);
  2. least-squares pass 1, every other noisy query: nonnegative cells adding up to the
     parent's rounded histogram, with each child's total within tau + 0.1 of pass 0's, tau
     the smallest tolerance at which pass 0's totals can be held (0 here: without
     structural constraints they always can; the production ``opt_tol_slack`` is the 0.1);
  3. rounder pass 0, ``total``: integer totals, each the floor or the ceiling of pass 1's,
     adding up to the parent's, L1-closest (largest remainders; with structural bounds that
     those totals cannot hold, the L1-closest totals that can, by a flow);
  4. rounder pass 1: integer cells (each pass 1's floor plus 0 or 1) with those totals and
     the parent's cells, L1-closest over ``hhgq``, ``hhgq * hispanic``,
     ``hhgq * hispanic * cenrace``, ``hhgq * votingage * hispanic * cenrace`` and
     ``detailed``.

- The leaves' families (the blocks): one least-squares pass over every noisy query and one
  rounder pass over ``total`` and the rounder queries, as in production.

A cell the parent holds at 0 is 0 in every child. Every least-squares family is solved
exactly with its KKT certificate (:mod:`postdp.postprocess.topdown2020.family`,
:mod:`~postdp.postprocess.topdown2020.root`)
and every rounder pass is a minimum-cost flow certified optimal by its linear program's bound
(:mod:`~postdp.postprocess.topdown2020.rounding`), where production used Gurobi.

The structural constraints (``bounds``; the group-quarters bounds and the no-minors-in-
nursing zero of :func:`postdp.data.facility_bounds`) are rows of every pass: a count held at
0 holds its cells at 0, a lower bound is an inequality row of the family solver
(:mod:`~postdp.postprocess.topdown2020.family`); pass 1's tolerance is the smallest at
which pass 0's totals can be held with them (a linear program) plus the slack; the rounder's
first pass keeps the largest remainders' totals when the second pass can meet the bounds
with them (they are then the L1-closest that can), else rounds the totals by a flow that
meets the bounds; its second pass keeps them.

Geounits measured with their own multiple of their level's budget (``budget_scale``; the
production spine's bypass, :func:`postdp.tables.single_child_bypass`) weigh that much more
in every least-squares pass, as the production's per-geounit variances did; one with no
budget must be an only child (it is then its parent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp._typing import ArrayLike, FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.postprocess._solvers.marginal_basis import identifies_cells, table_schema
from postdp.postprocess.topdown2020.dhc import DhcPlan, is_dhc, top_down_dhc
from postdp.postprocess.topdown2020.family import LevelQuadratic
from postdp.postprocess.topdown2020.passes import (
    SLACK,
    child_weight,
    families,
    level_quadratic,
    pass_zero,
    round_totals_first,
    solve_pass,
    total_rows,
    totals_first,
    weighted,
)
from postdp.postprocess.topdown2020.passes import largest_remainders as _largest_remainders
from postdp.postprocess.topdown2020.root import bounded_root, certified_root
from postdp.postprocess.topdown2020.rounding import (
    PRODUCTION_ROUNDERS,
    round_nested,
    rounder_chain,
)
from postdp.postprocess.topdown2020.structural import (
    StructuralPlan,
    rounder_limits,
)
from postdp.tables import Table, TableMeasurements, Workload
from postdp.tables.bounds import CountBounds
from postdp.tables.bypass import only_children, only_children_unmeasured

__all__ = ["ROUNDER_QUERIES", "check_top_down_2020", "top_down_2020"]

#: The production rounder's second pass (``total`` is its first).
ROUNDER_QUERIES = PRODUCTION_ROUNDERS


def top_down_2020(
    measurements: TableMeasurements,
    *,
    rounders: Sequence[str] | None = None,
    slack: float = SLACK,
    root: ArrayLike | None = None,
    cut: bool = False,
    bounds: Sequence[CountBounds] | None = None,
    held: ArrayLike | None = None,
    reach: Any = None,
) -> IntArray:
    """The 2020 production TopDown on a schema table's measurements (see the module notes;
    for the DHC persons design, :func:`postdp.tables.dhc_schema`'s tables, its two outer
    passes per parent with the PL94 histogram ``held``:
    :mod:`postdp.postprocess.topdown2020.dhc`).

    Parameters
    ----------
    measurements : TableMeasurements
        Of a schema table measured by marginals with a noisy ``total`` at every level below
        the root (e.g. ``load_strategy("pl94-2020-persons").workload(table)``); public
        queries only ``total`` (the 2020 invariants: the nation's and the states' totals).
    rounders : sequence of str, optional
        The second rounder pass's queries, coarse to fine, each nested in the one before
        (marginal names or ``"detailed"``); default :data:`ROUNDER_QUERIES` on the
        schema's attributes (each query without the attributes the schema lacks, so
        ``("detailed",)`` for table P1's 63 race cells).
    slack : float, default 0.1
        How far a child's total may move from least-squares pass 0's.
    root : array_like of int, shape (..., n_detailed), optional
        The root's histogram, fixed: the measurements are of a subtree whose root was
        solved above it (e.g. a state, from a run of the nation and the states), and
        every family below is solved exactly as in the whole tree's run. The root's own
        measurements, if any, are then not used.
    cut : bool, default False
        The table's deepest level is a cut through a deeper geography (e.g. a state's
        counties, each solved later as a subtree with ``root=``), not its leaves: its
        families are solved as the inner ones are (two least-squares passes), exactly as
        in the whole tree's run.
    bounds : sequence of CountBounds, optional
        Structural bounds held at every geounit by every pass (e.g. the 2020
        group-quarters bounds and nursing zero, :func:`postdp.data.facility_bounds`);
        default the measurements' own (``measurements.bounds``); a lower bound must be on a
        rounder query.
        The first least-squares pass then holds them through its tolerance (the smallest
        at which its totals can be held with them, plus ``slack``), and the rounder's
        first pass rounds the totals by a flow that meets them.
    held : array_like of int, shape (geography.n, 2016), optional
        The DHC design only (and required there): each geounit's PL94 persons histogram
        (``hhgq8lev * votingage * hispanic * cenrace``, :attr:`Strategy.held`; the
        production held the published PL94 release), every parent its children's sum.
        Every pass holds it exactly. ``rounders`` is then not taken (the production's DHC
        rounder queries are used), ``bounds`` may be one set on ``relgq``, the
        group-quarters bounds of :func:`postdp.data.dhc_facility_bounds` (kept out of both
        passes and met afterwards by record switching:
        :mod:`~postdp.postprocess.topdown2020.switching`), and ``cut`` changes nothing
        (every level runs the same two passes).
    reach : scipy.sparse array, shape (leaves, columns), optional
        The DHC design with ``bounds`` only: each leaf's deliverability to the blocks
        below it, the sum of its blocks' ``Switcher.block_reach`` (record switching keeps
        every split deliverable). Default: the leaves are the blocks, their reach made of
        ``held`` and ``bounds``. A subtree task whose leaves lie above the blocks (``postdp
        postprocess``'s cut tasks and top) passes its own.

    Returns
    -------
    ndarray of int64, shape (..., geography.n, n_detailed)
        Detailed histograms of every geounit: nonnegative integers, every parent the sum of
        its children, every public total exact, every bound met.

    Raises
    ------
    ValidationError
        For a table that is not a schema table measured by marginals, a root (not fixed by
        ``root``) whose noisy queries do not identify every detailed cell, a level below
        the root without a noisy ``total``, public queries other than ``total``, or rounder
        queries that do not nest; for the DHC design, a ``held`` that is missing, of
        another shape, not consistent, in a PL94 cell every edit forbids, or not adding up
        to the public totals, ``rounders`` given, ``bounds`` other than one set on
        ``relgq`` with the households unbounded, or ``bounds`` that record switching cannot
        meet where they are required (down to the last two levels).

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> from postdp.tables import load_strategy, pl94_schema
    >>> from postdp.tables import Table, measure
    >>> s = pl94_schema()
    >>> ids = ["US", "S", "C", "T", "G", "B1", "B2"]
    >>> geo = Hierarchy.from_parents(ids, [None, "US", "S", "C", "T", "G", "G"])
    >>> cells = np.zeros((2, s.size), dtype=int); cells[:, [0, 63, 1000]] = [[9, 3, 1], [4, 0, 2]]
    >>> t = Table(geo, s.categories(), cells)
    >>> m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=0)
    >>> out = top_down_2020(m)
    >>> int(out[0].sum()), bool((out[4] == out[5] + out[6]).all()), out.dtype.name
    (19, True, 'int64')
    """
    if bounds is None:
        bounds = measurements.bounds
    dhc = dhc_plan(
        measurements.table, measurements.workload, held, rounders, bounds, root is not None,
        measurements.budget_scale, reach,
    )  # fmt: skip
    if dhc is not None:
        lead = measurements.values[0].shape[:-2]
        fixed = None if root is None else _fixed_root(root, lead, dhc.c)
        released: IntArray = top_down_dhc(
            dhc, measurements.workload, list(measurements.values), fixed
        )
        return released
    plan = _Plan(
        measurements.table,
        measurements.workload,
        rounders,
        bounds,
        measurements.budget_scale,
        root_fixed=root is not None,
    )
    lead = measurements.values[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    geo = measurements.table.geography
    values = [v.reshape(B, *v.shape[-2:]) for v in measurements.values]
    out = np.zeros((B, geo.n, plan.c), dtype=np.int64)
    fixed = None if root is None else _fixed_root(root, lead, plan.c)
    for b in range(B):
        out[b, 0] = plan.root([v[b] for v in values]) if fixed is None else fixed[b]
        draw = [v[b] for v in values]
        for d in range(1, geo.n_levels):
            if d in plan.through:
                continue  # solved with the level below, from the level above
            kids = geo.levels[d]
            above = geo.parent[kids]
            grouped = d - 1 in plan.through
            if grouped:
                above = geo.parent[above]
            leaves = d == geo.n_levels - 1 and not cut
            for parent, rows in families(kids, above):
                if grouped:
                    out[b, rows] = plan.grouped(d, out[b, parent], rows, _rows(geo, d, rows), draw)
                else:
                    out[b, rows] = plan.family(
                        d, out[b, parent], rows, _rows(geo, d, rows), draw, slack, leaves
                    )
            if grouped:
                np.add.at(out[b], geo.parent[kids], out[b, kids])
    return out.reshape(*lead, geo.n, plan.c)


def check_top_down_2020(
    table: Table,
    workload: Workload,
    *,
    rounders: Sequence[str] | None = None,
    held: ArrayLike | None = None,
) -> None:
    """Refuse, before anything is drawn, a design :func:`top_down_2020` cannot run.

    Parameters
    ----------
    table : Table
    workload : Workload
    rounders : sequence of str, optional
        As :func:`top_down_2020`.
    held : array_like of int, optional
        As :func:`top_down_2020` (the DHC design); checked when given, else the rest of
        the DHC design is (its histograms may come with each draw's measurements).

    Returns
    -------
    None

    Raises
    ------
    ValidationError
        As :func:`top_down_2020`.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
    >>> s = Schema([Attribute("a", ["0", "1"])])
    >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
    >>> t = Table(geo, s.categories(), [[1, 2], [0, 3]])
    >>> w = Workload([Measurement(d, Query.marginal(s, "detailed"), Gaussian(rho=1.0))
    ...               for d in range(2)])
    >>> try:
    ...     check_top_down_2020(t, w, rounders=["detailed"])
    ... except ValueError as err:
    ...     print(str(err)[:40])
    topdown-2020 needs a noisy or public tot
    """
    schema = table_schema(table.categories, workload)
    if held is None and schema is not None and is_dhc(schema):
        # the DHC's PL94 histograms may come with the measurements (a study's, per draw):
        # everything else is checked now, against no one held
        held = np.zeros((table.geography.n, DhcPlan.N_PL94), dtype=np.int64)
    if dhc_plan(table, workload, held, rounders, (), False, None) is None:
        _Plan(table, workload, rounders)


def dhc_plan(
    table: Table,
    work: Workload,
    held: ArrayLike | None,
    rounders: Sequence[str] | None,
    bounds: Sequence[CountBounds],
    root_fixed: bool,
    scale: FloatArray | None,
    reach: Any = None,
) -> DhcPlan | None:
    """The DHC design's plan for a table of the DHC persons schema, else None (and
    ``held`` refused: it belongs to that design)."""
    schema = table_schema(table.categories, work)
    if schema is None or not is_dhc(schema):
        if held is not None or reach is not None:
            what = "`held`" if held is not None else "`reach`"
            raise ValidationError(f"{what} is for the DHC persons design (dhc_schema()'s tables)")
        return None
    if rounders is not None:
        raise ValidationError("topdown-2020 on the DHC runs the production's rounder queries")
    other = [b for b in bounds if b.query != "relgq"]
    if other or len(bounds) > 1:
        raise ValidationError(
            "topdown-2020 on the DHC takes one set of bounds, on 'relgq' (the group-quarters "
            "bounds of postdp.data.dhc_facility_bounds, met by record switching); got "
            + ", ".join(repr(b.query) for b in bounds)
        )
    scale = only_children_unmeasured(table.geography, scale, "top_down_2020", root_fixed=root_fixed)
    if reach is not None and not bounds:
        raise ValidationError("`reach` is for record switching: give the DHC's `bounds` too")
    return DhcPlan(table, work, held, scale, root_fixed, bounds[0] if bounds else None, reach)


def _fixed_root(root: ArrayLike, lead: tuple[int, ...], c: int) -> IntArray:
    """The fixed root histograms, one per draw: nonnegative whole numbers."""
    values = np.asarray(root, dtype=np.float64)
    if values.shape != (*lead, c):
        raise ValidationError(f"`root` must have shape {(*lead, c)}; got {values.shape}")
    if not np.isfinite(values).all() or (values < 0).any() or (values != np.rint(values)).any():
        raise ValidationError("`root` must hold nonnegative whole numbers")
    return values.astype(np.int64).reshape(-1, c)


def _rows(geo: object, d: int, rows: IntArray) -> IntArray:
    """Positions of geounits ``rows`` among their level's (the measurements' row order)."""
    level = geo.levels[d]  # type: ignore[attr-defined]
    where = np.empty(int(level.max()) + 1, dtype=np.int64)
    where[level] = np.arange(level.size)
    return where[rows]


class _Plan:
    """What every solve needs: per level the noisy queries (total apart), their quadratic
    forms, the public totals; the rounder's nested groups."""

    def __init__(
        self,
        table: Table,
        work: Workload,
        rounders: Sequence[str] | None,
        bounds: Sequence[CountBounds] = (),
        scale: FloatArray | None = None,
        root_fixed: bool = False,
    ) -> None:
        self.scale = only_children_unmeasured(
            table.geography, scale, "top_down_2020", root_fixed=root_fixed
        )
        schema = table_schema(table.categories, work)
        if schema is None:
            raise ValidationError(
                "topdown-2020 needs a schema table measured by marginals (e.g. the 2020 "
                "persons preset's workload)"
            )
        self.c = schema.size
        self.through: set[int] = set()  # levels solved with the one below (AIAN spine states)
        self.levels: list[dict[str, Any]] = []
        for d in range(table.geography.n_levels):
            mine = [(i, m) for i, m in enumerate(work.measurements) if m.level == d]
            public = [(i, m) for i, m in mine if m.public]
            if any(m.query.size != 1 for _, m in public):
                raise ValidationError(
                    "topdown-2020 keeps public totals only (the 2020 invariants); level "
                    f"{d} has public {[m.query.name for _, m in public if m.query.size != 1]}"
                )
            noisy = [(i, m) for i, m in mine if not m.public]
            totals = [(i, m) for i, m in noisy if m.query.size == 1]
            others = [(i, m) for i, m in noisy if m.query.size != 1]
            alone = only_children(table.geography, table.geography.levels[d]).all()
            if d > 0 and not totals and not public and not alone:
                raise ValidationError(
                    f"topdown-2020 needs a noisy or public total at every level below the "
                    f"root; level {d} has none"
                )
            if d > 0 and public and not noisy and not alone:
                if d + 2 >= table.geography.n_levels or d - 1 in self.through:
                    raise ValidationError(
                        f"topdown-2020: level {d} has public totals and no noisy query; it "
                        "is solved with the level below, which must be measured and must "
                        "not be the leaves"
                    )
                self.through.add(d)
            self.levels.append(
                {
                    "public": public[0][0] if public else None,
                    "totals": totals,
                    "all": level_quadratic(noisy),
                    "others": level_quadratic(others),
                    "noisy": [i for i, _ in noisy],
                    "other_ids": [i for i, _ in others],
                }
            )
        root_noisy = [m.query for m in work.measurements if m.level == 0 and not m.public]
        pins = identifies_cells([q.marginal_of for q in root_noisy if q.marginal_of])
        if not root_fixed and not pins:
            raise ValidationError(
                "topdown-2020: the root's noisy queries "
                f"({', '.join(q.name for q in root_noisy) or 'none'}) do not identify every "
                "detailed cell, so its least squares has no unique answer (the 2020 "
                "production measured 'detailed' at the nation); measure queries at level 0 "
                "that identify the cells"
            )
        self.chain, self.cell_weight = rounder_chain(schema, rounders)
        self.structural = StructuralPlan(schema, bounds, table.geography.n, self.chain)
        self.root_id = table.geography.root
        self.geography = table.geography

    def root(self, values: list[FloatArray]) -> IntArray:
        """The root's integer histogram: least squares, then one rounder pass."""
        level = self.levels[0]
        quad: LevelQuadratic = level["all"]
        every = np.arange(self.c)
        H = quad.block(every)
        lin = quad.linear([values[i][:1] for i in level["noisy"]], every)[0]
        if level["public"] is not None:
            total = float(values[level["public"]][0, 0])
            C, g = np.ones((1, self.c)), np.array([total])
        else:
            total, C, g = None, np.zeros((0, self.c)), np.zeros(0)
        rows = self.structural.family(every, np.array([self.root_id]))
        if rows is None:
            x = certified_root(H, lin, C, g, who="top_down_2020")
        else:
            x = bounded_root(H, lin, C, g, rows.C, rows.lo[0], rows.hi[0], who="top_down_2020")
            x[rows.fixed[0]] = 0.0
        totals = None if total is None else np.array([round(total)])
        rounded = round_nested(
            x[None],
            self.chain,
            cell_weight=self.cell_weight,
            totals=totals,
            total_weight=1.0,
            **rounder_limits(rows),
        )
        out: IntArray = rounded.x[0]
        return out

    def family(
        self,
        d: int,
        parent: IntArray,
        geounits: IntArray,
        rows: IntArray,
        values: list[FloatArray],
        slack: float,
        leaves: bool,
    ) -> IntArray:
        """One parent's children (``geounits``; ``rows`` among their level's) at level
        ``d``: integer histograms (k, c)."""
        k = rows.size
        out = np.zeros((k, self.c), dtype=np.int64)
        cells = np.flatnonzero(parent > 0)
        if k == 1 or not cells.size:
            out[:, cells] = parent[cells] if k == 1 else 0
            return out
        level = self.levels[d]
        p = parent[cells].astype(np.float64)
        a = self._weight(geounits)
        public = None if level["public"] is None else values[level["public"]][rows, 0]
        chain = [(g[cells], w) for g, w in self.chain]
        bound = self.structural.family(cells, geounits) if self.structural else None
        G, g = total_rows(public, cells.size)
        totals = None if public is None else np.rint(public).astype(np.int64)
        if leaves:  # one pass of each, as production does for the blocks
            quad: LevelQuadratic = level["all"]
            b = weighted(quad.linear([values[i][rows] for i in level["noisy"]], cells), a)
            x = solve_pass(quad.block(cells), b, p, G, g, None, bound, a)
            rounded = round_nested(
                x,
                chain,
                cell_weight=self.cell_weight,
                parent=parent[cells],
                totals=totals,
                total_weight=1.0,
                **rounder_limits(bound),
            )
            out[:, cells] = rounded.x
            return out
        quad = level["others"]
        b = weighted(quad.linear([values[i][rows] for i in level["other_ids"]], cells), a)
        H = quad.block(cells)
        if public is not None:  # a public total is pass 0's answer and holds exactly
            x = solve_pass(H, b, p, G, g, None, bound, a)
            out[:, cells] = self._round(x, chain, parent[cells], totals, bound).x
            return out
        first = pass_zero(level["totals"], values, rows, float(p.sum()), a)
        x = totals_first(H, b, p, first, bound, a, slack)
        out[:, cells] = round_totals_first(x, chain, self.cell_weight, parent[cells], bound)
        return out

    def grouped(
        self, d: int, parent: IntArray, geounits: IntArray, rows: IntArray, values: list[FloatArray]
    ) -> IntArray:
        """A grandparent's grandchildren at level ``d`` (the AIAN spine's branches), the
        level above them measured by public totals only (the states): as a family, each
        group's totals adding up to its public total (the production's ``State_total``
        rows). Pass 0 is a weighted simplex per group; pass 1 then holds each branch's total
        at pass 0's (production let a group's branches trade up to the slack between them,
        with their sum held); the rounder rounds each group's totals by largest remainders
        to its total."""
        groups, group = np.unique(self.geography.parent[geounits], return_inverse=True)
        states = _rows(self.geography, d - 1, groups)
        target = np.rint(values[self.levels[d - 1]["public"]][states, 0])
        out = np.zeros((rows.size, self.c), dtype=np.int64)
        cells = np.flatnonzero(parent > 0)
        if rows.size == 1 or not cells.size:
            out[:, cells] = parent[cells] if rows.size == 1 else 0
            return out
        level = self.levels[d]
        a = self._weight(geounits)
        first = np.empty(rows.size)
        totals = np.empty(rows.size, dtype=np.int64)
        for g in range(groups.size):
            mine = np.flatnonzero(group == g)
            if level["public"] is not None:
                first[mine] = values[level["public"]][rows[mine], 0]
            else:
                first[mine] = pass_zero(
                    level["totals"], values, rows[mine], float(target[g]),
                    None if a is None else a[mine],
                )  # fmt: skip
            totals[mine] = _largest_remainders(first[mine], int(target[g]))
        bound = self.structural.family(cells, geounits) if self.structural else None
        G, g_rows = total_rows(first, cells.size)
        quad: LevelQuadratic = level["others"]
        b = weighted(quad.linear([values[i][rows] for i in level["other_ids"]], cells), a)
        p = parent[cells].astype(np.float64)
        x = solve_pass(quad.block(cells), b, p, G, g_rows, None, bound, a)
        chain = [(grp[cells], w) for grp, w in self.chain]
        out[:, cells] = self._round(x, chain, parent[cells], totals, bound).x
        return out

    def _weight(self, geounits: IntArray) -> FloatArray | None:
        """The children's budget factors, None when all are 1."""
        return child_weight(self.scale, geounits)

    def _round(self, x: FloatArray, chain: Any, parent: IntArray, totals: Any, bound: Any) -> Any:
        """Rounder pass 1: the cells, the children's totals fixed, the bounds held."""
        return round_nested(
            x,
            chain,
            cell_weight=self.cell_weight,
            parent=parent,
            totals=totals,
            **rounder_limits(bound),
        )

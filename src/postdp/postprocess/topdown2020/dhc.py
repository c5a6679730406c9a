"""The 2020 TopDown of the DHC persons design: two outer passes per parent, the PL94
histogram held at every geounit (private; run by :func:`~postdp.postprocess.top_down_2020`).

The production ordering (``shared/research/dhc-2020-design.md`` section 4.2, strategy
``DecompTestStrategyRegularOrderingDHCP_20220811_exp_21_1``, the same at every geolevel):

- **Outer pass 0**, on the 40-age-group histogram ``relgq * age_40_groups * hispanic *
  cenrace * sex`` (423,360 cells; the production's q9): least squares of every measured
  query coarser than it (q1 to q9; the detailed query is not), nonnegative, the children
  adding up to the parent's pass-0 cells and each child's PL94 histogram (``hhgq8lev *
  votingage * hispanic * cenrace``) equal to the one it is held to; then the rounder over
  ``hispanic * sex * votingage * hhgq8lev * cenrace``, ``hispanic * sex * age_18_64_116 *
  hhgq8lev * cenrace``, q8 and the 40-group cells, with the PL94 histogram held.
- **Outer pass 1**, on the detailed cells: least squares of ``detailed`` alone, each child's
  40-group cells held at pass 0's rounded counts (each multi-year group split into single
  years); then the rounder over the detailed cells with those counts held.

At the root the same two passes run with no parent: pass 0's least squares is over every
40-group cell the edits admit inside a positive held PL94 cell (up to 423,360 unknowns), so it
is solved matrix-free (:mod:`postdp.postprocess._solvers.grouped_nnls`: the PL94 cells are the
groups whose sums are held); pass 1's is a simplex projection per 40-group cell. Below the
root a family's unknowns are the parent's positive cells (its persons bound them), solved
exactly by :mod:`~postdp.postprocess.topdown2020.family` with the PL94 (pass 0) or 40-group
(pass 1) cells as each child's public rows; every rounder pass is the minimum-cost flow of
:mod:`~postdp.postprocess.topdown2020.rounding`, the held counts as bounds equal on both sides.

A cell the parent holds at 0 is 0 in every child, so the 32 edits hold everywhere once the root
keeps them (its unknowns are the admissible cells only).

Given the group-quarters bounds (``hhgq_total_lb/ub`` on the 24 detailed types,
:func:`postdp.data.dhc_facility_bounds`), they are kept out of both passes, as in production,
and met afterwards by record switching (:mod:`~postdp.postprocess.topdown2020.switching`):
at the root, then after each family's last rounding (required down to Tract_Subset, best
effort at Block_Group and Block), each child's 40-group cells recounted from the result.
The switching is given every geounit's held PL94 histogram, so each split it leaves can be
carried down to the blocks.

A family (k children, m the parent's positive cells) is solved matrix-free
(:mod:`~postdp.postprocess.topdown2020.family_free`: a few (k, m) arrays), its memory
growing with k m, never m^2, so a county's tract-subset groups run; should that not
settle, densely (:mod:`~postdp.postprocess.topdown2020.family_rows`: HiGHS's active set on
k dense m x m blocks) while k m^2 is at most :data:`DENSE_ENTRIES`. On random families of
8 to 10 children over 700 to 1,400 cells the dense solve took 130 to 250 s, the
matrix-free one under 1 s (the same optimum to 1.5e-10).

Memory: the answer (geounits x 1,227,744 int64) and the 40-group answer beside it, and a
family's (k, m) arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from postdp._typing import ArrayLike, BoolArray, FloatArray, IntArray
from postdp.errors import ConvergenceError, ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.grouped_nnls import MarginalGram, grouped_nnls
from postdp.postprocess._solvers.simplex import project_families
from postdp.postprocess.topdown2020.family import LevelQuadratic
from postdp.postprocess.topdown2020.family_free import solve_family_free
from postdp.postprocess.topdown2020.family_rows import solve_family_rows
from postdp.postprocess.topdown2020.passes import certified, child_weight, families, weighted
from postdp.postprocess.topdown2020.rounding import round_nested
from postdp.postprocess.topdown2020.switching import FIRST_GQ, Switcher
from postdp.tables import Table, Workload, dhc_schema, dhc_structural_zeros
from postdp.tables.bounds import CountBounds
from postdp.tables.schema import Marginal, Schema
from postdp.tables.strategies import PL94_IN_DHC

__all__ = ["COARSE", "DENSE_ENTRIES", "PASS0_ROUNDERS", "DhcPlan", "is_dhc", "top_down_dhc"]

#: Outer pass 0's histogram: the DHC persons cells with age in the 40 groups (the q9 query).
COARSE = "relgq * age_40_groups * hispanic * cenrace * sex"
#: Outer pass 0's rounder queries above the 40-group cells, coarse to fine (production's).
PASS0_ROUNDERS = (
    "hispanic * sex * votingage * hhgq8lev * cenrace",
    "hispanic * sex * age_18_64_116 * hhgq8lev * cenrace",
    "hispanic * sex * age_40_groups * relship_and_eight_level_GQ * cenrace",
)
#: The DAS geocode widths (on the DHC spine: Block_Group and Block) at which record switching
#: is best effort: at the others the group-quarters bounds are required (the production's
#: ``require_feasible_postproc_dim = 1,1,1,1,1,1,0,0``, indexed by geocode width).
BEST_EFFORT_WIDTHS = (13, 16)
#: The DHC spine's geocode widths below the root (``dhc-2020-design.md`` section 4.4).
SPINE_WIDTHS = (2, 5, 6, 11, 12, 13, 16)
#: A table whose ids are not the DHC spine's geocodes: best effort at its last levels.
BEST_EFFORT_LEVELS = 2
#: The largest k m^2 (k children, m the parent's positive cells) of a family the dense
#: solver takes when the matrix-free one does not settle: about 240 MB of HiGHS's
#: Hessian blocks.
DENSE_ENTRIES = 30_000_000


def is_dhc(schema: Schema) -> bool:
    """Whether ``schema`` is the DHC persons schema."""
    dhc = dhc_schema()
    return schema is dhc or (schema.shape == dhc.shape and schema.names == dhc.names)


def best_effort(geo: Hierarchy) -> BoolArray:
    """Whether each geounit's group-quarters bounds are best effort: by its id's width as a
    DHC spine geocode (Block_Group and Block), as the production decided, so that a
    subtree's or a cut task's table, whose levels count from its own root, decides as the
    whole run does; for ids that are not the spine's, the table's last
    :data:`BEST_EFFORT_LEVELS` levels."""
    below = geo.depth > 0
    widths = np.array([len(i) if i.isdigit() else -1 for i in map(str, geo.ids)])
    if below.any() and np.isin(widths[below], SPINE_WIDTHS).all():
        spine: BoolArray = below & np.isin(widths, BEST_EFFORT_WIDTHS)
        return spine
    best: BoolArray = geo.depth >= geo.n_levels - BEST_EFFORT_LEVELS
    return best


def _first_cells(groups: IntArray, n: int) -> IntArray:
    """Each group's first cell (the group's representative)."""
    first = np.empty(n, dtype=np.int64)
    first[groups[::-1]] = np.arange(groups.size)[::-1]
    return first


class DhcPlan:
    """What every solve of a DHC run needs: the fine-to-40-group map, each level's pass-0
    quadratic over the 40-group cells and its detailed measurement, the rounder chain and
    the held PL94 histograms (validated)."""

    #: The cells of the PL94 persons histogram held (``PL94_IN_DHC``).
    N_PL94 = 2016

    def __init__(
        self,
        table: Table,
        work: Workload,
        held: ArrayLike | None,
        scale: FloatArray | None,
        root_fixed: bool,
        gq_bounds: CountBounds | None = None,
        reach: Any = None,
    ) -> None:
        schema = dhc_schema()
        geo = table.geography
        self.geography, self.c = geo, schema.size
        self.cell_index = np.arange(self.c)  # the detailed query's counts: the cells
        self.coarse_of = Marginal(schema, COARSE).cell_groups()
        self.C = int(self.coarse_of.max()) + 1
        rep = _first_cells(self.coarse_of, self.C)
        self.admissible = ~dhc_structural_zeros(schema)
        self.coarse_admissible = np.bincount(self.coarse_of, self.admissible, self.C) > 0
        pl94 = Marginal(schema, PL94_IN_DHC)
        self.pl94 = pl94.cell_groups()[rep]
        self.n_pl94 = pl94.size
        assert self.n_pl94 == self.N_PL94
        self.chain: list[tuple[IntArray, float]] = [(self.pl94, 0.0)] + [
            (Marginal(schema, name).cell_groups()[rep], 1.0) for name in PASS0_ROUNDERS
        ]
        self.scale = scale
        self.levels: list[dict[str, Any]] = []
        shared: dict[str, IntArray] = {}
        for d in range(geo.n_levels):
            coarse, weights, ids, detailed = [], [], [], None
            for i, m in enumerate(work.measurements):
                if m.level != d:
                    continue
                if m.public:
                    if m.query.size != 1:
                        raise ValidationError(
                            "topdown-2020 on the DHC keeps public totals only (the PL94 "
                            f"histogram is `held`); level {d} has public {m.query.name!r}"
                        )
                    continue
                if m.query.size == self.c:
                    detailed = (i, 1.0 / m.variance)
                    continue
                if m.query.name not in shared:  # the same queries at every level: once
                    groups = m.query.marginal_of.cell_groups()  # type: ignore[union-attr]
                    shared[m.query.name] = groups[rep]
                    if not np.array_equal(groups, shared[m.query.name][self.coarse_of]):
                        raise ValidationError(
                            f"topdown-2020 on the DHC: {m.query.name!r} (level {d}) is neither "
                            "'detailed' nor coarser than the 40 age groups of its first pass"
                        )
                coarse.append(shared[m.query.name])
                weights.append(1.0 / m.variance)
                ids.append(i)
            if detailed is None or not coarse:
                if d == 0 and root_fixed:
                    self.levels.append({})
                    continue
                raise ValidationError(
                    f"topdown-2020 on the DHC needs 'detailed' and coarser noisy queries at "
                    f"every level; level {d} lacks "
                    + ("'detailed'" if detailed is None else "the coarser ones")
                )
            self.levels.append(
                {"quad": LevelQuadratic(coarse, weights), "ids": ids, "detailed": detailed}
            )
        self.held = self._held(held, work)
        self.switcher = None if gq_bounds is None else self._switcher(gq_bounds, schema, reach)
        #: geounits whose group-quarters bounds record switching left unmet, by level of
        #: this table (where they are best effort only: :func:`best_effort`)
        self.unmet: dict[int, int] = {}
        self.best_effort = best_effort(geo)

    def _switcher(self, bounds: CountBounds, schema: Schema, reach: Any) -> Switcher:
        """The record switching of ``bounds`` (on relgq: households unbounded), its splits
        kept deliverable to the blocks by ``reach`` (default: the leaves are the blocks)."""
        geo = self.geography
        bounds.check(schema, geo.n)
        households = slice(0, FIRST_GQ)
        if (bounds.lower[:, households] > 0).any() or np.isfinite(
            bounds.upper[:, households]
        ).any():
            raise ValidationError(
                "topdown-2020 on the DHC bounds the group-quarters types only: the household "
                "relationships' bounds must be 0 and inf"
            )
        switcher = Switcher.of_schema(
            schema, bounds.lower[:, FIRST_GQ:], bounds.upper[:, FIRST_GQ:], geography=geo
        )
        if reach is None:
            leaves = geo.leaves
            reach = switcher.block_reach(
                self.held[leaves], bounds.upper[leaves, FIRST_GQ:], bounds.lower[leaves, FIRST_GQ:]
            )
            switcher.leaf_blocks = True
        elif reach.shape != (geo.leaves.size, switcher.column[-1]):
            raise ValidationError(
                f"`reach` must have shape {(geo.leaves.size, int(switcher.column[-1]))}; "
                f"got {reach.shape}"
            )
        switcher.reach = sparse.csr_array(reach)
        return switcher

    def switch(self, d: int, x: Any, geounits: IntArray, *, root: bool = False) -> None:
        """Record switching of level ``d``'s siblings ``x`` (in place; or the root's):
        required but where :func:`best_effort` says otherwise."""
        assert self.switcher is not None
        left = self.switcher.repair(x, geounits, root=root)
        required = (left > 0) & ~self.best_effort[geounits]
        if required.any():
            where = str(self.geography.ids[geounits[np.argmax(required)]])
            more = f" (and {int(required.sum()) - 1} of its siblings)" if required.sum() > 1 else ""
            raise ValidationError(
                f"record switching could not meet the group-quarters bounds of geounit "
                f"{where!r}{more}, where they are required: no split of the persons of "
                "each PL94 answer among its detailed types meets them (hold a PL94 release "
                "that met the same facilities' bounds)"
            )
        if left.any():
            self.unmet[d] = self.unmet.get(d, 0) + int((left > 0).sum())

    def _held(self, held: ArrayLike | None, work: Workload) -> IntArray:
        geo = self.geography
        if held is None:
            raise ValidationError(
                "topdown-2020 on the DHC needs `held`: each geounit's PL94 persons histogram "
                f"({self.n_pl94} cells of {PL94_IN_DHC!r}), which the design holds exactly "
                "(`postdp postprocess --held`, or top_down_2020(..., held=))"
            )
        values = np.asarray(held, dtype=np.float64)
        if values.shape != (geo.n, self.n_pl94):
            raise ValidationError(
                f"`held` must have shape {(geo.n, self.n_pl94)}; got {values.shape}"
            )
        if not np.isfinite(values).all() or (values < 0).any() or (values != np.rint(values)).any():
            raise ValidationError("`held` must hold nonnegative whole numbers")
        out = values.astype(np.int64)
        if not np.array_equal(geo.aggregate(out.T).T, out):  # each parent its leaves' sum
            raise ValidationError("`held` is not consistent: a parent is not its children's sum")
        reachable = np.bincount(self.pl94, self.coarse_admissible, self.n_pl94) > 0
        if (out[:, ~reachable] > 0).any():
            raise ValidationError(
                "`held` puts persons in a PL94 cell every DHC edit forbids (e.g. under-18s "
                "in nursing facilities)"
            )
        return out

    def check_totals(self, work: Workload, values: list[FloatArray]) -> None:
        """The public totals (the invariants) must be the held histograms' totals."""
        for i, m in enumerate(work.measurements):
            if m.public and m.query.size == 1:
                rows = self.geography.levels[m.level]
                if not np.allclose(values[i][:, 0], self.held[rows].sum(axis=1)):
                    raise ValidationError(
                        f"`held` does not add up to the public totals of level {m.level}"
                    )

    # -- the root -------------------------------------------------------------------------

    def root(self, values: list[FloatArray]) -> tuple[IntArray, IntArray]:
        """The root's 40-group and detailed histograms."""
        level, h = self.levels[0], self.held[self.geography.root]
        cells = np.flatnonzero(self.coarse_admissible & (h[self.pl94] > 0))
        cells = cells[np.argsort(self.pl94[cells], kind="stable")]
        labels, group = np.unique(self.pl94[cells], return_inverse=True)
        quad: LevelQuadratic = level["quad"]
        gram = MarginalGram([g[cells] for g in quad.groups], quad.weights)
        b = quad.linear([values[i][:1] for i in level["ids"]], cells)[0]
        target = h[labels].astype(np.float64)
        scale = max(1.0, float(np.abs(b).max(initial=0.0)), gram.lipschitz() * target.max())
        res = grouped_nnls(gram, b, group, target, tol=1e-11 * scale)
        if res.worst > 1e-9 * scale:
            raise ConvergenceError(
                f"the DHC root's least squares is not certified (KKT residual {res.worst:.3g})"
            )
        coarse = np.zeros(self.C, dtype=np.int64)
        coarse[cells] = round_nested(
            res.x[None],
            [(g[cells], w) for g, w in self.chain],
            cell_weight=1.0,
            totals=np.array([h.sum()]),
            bounds=[(h[None].astype(float), h[None].astype(float)), None, None, None],
        ).x[0]
        return coarse, self._root_split(values, coarse)

    def _root_split(self, values: list[FloatArray], coarse: IntArray) -> IntArray:
        """Pass 1 at the root: each 40-group count split into its admissible single years,
        the detailed answers projected onto those sums, then rounded with them held."""
        cells = np.flatnonzero(self.admissible & (coarse[self.coarse_of] > 0))
        cells = cells[np.argsort(self.coarse_of[cells], kind="stable")]
        labels, sizes = np.unique(self.coarse_of[cells], return_counts=True)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        i, _ = self.levels[0]["detailed"]
        y = np.asarray(values[i][0, cells], dtype=np.float64)
        ones = np.ones(cells.size)
        x = project_families(
            y[None], starts, sizes, coarse[labels][None].astype(float), ones, ones > 0
        )
        out = np.zeros(self.c, dtype=np.int64)
        out[cells] = round_nested(
            x,
            [(self.coarse_of[cells], 0.0)],
            cell_weight=1.0,
            totals=np.array([coarse.sum()]),
            bounds=[(coarse[None].astype(float), coarse[None].astype(float))],
        ).x[0]
        return out

    # -- a family -------------------------------------------------------------------------

    def family(
        self,
        d: int,
        parent: tuple[IntArray, IntArray],
        geounits: IntArray,
        rows: IntArray,
        values: list[FloatArray],
    ) -> tuple[IntArray, IntArray]:
        """One parent's children at level ``d``: their 40-group (k, 423,360) and detailed
        (k, 1,227,744) histograms."""
        coarse_p, detailed_p = parent
        k = geounits.size
        if k == 1:
            return coarse_p[None].copy(), detailed_p[None].copy()
        level, a = self.levels[d], child_weight(self.scale, geounits)
        h = self.held[geounits]
        coarse = np.zeros((k, self.C), dtype=np.int64)
        cells = np.flatnonzero(coarse_p > 0)
        if cells.size:
            quad: LevelQuadratic = level["quad"]
            b = weighted(quad.linear([values[i][rows] for i in level["ids"]], cells), a)
            x = _split(quad, cells, b, coarse_p[cells].astype(float), self.pl94[cells], h, a)
            coarse[:, cells] = round_nested(
                x,
                [(grp[cells], w) for grp, w in self.chain],
                cell_weight=1.0,
                parent=coarse_p[cells],
                totals=h.sum(axis=1),
                bounds=[(h.astype(float), h.astype(float)), None, None, None],
            ).x
        detailed = np.zeros((k, self.c), dtype=np.int64)
        cells = np.flatnonzero(detailed_p > 0)
        if cells.size:
            i, w = level["detailed"]
            b = weighted(w * np.asarray(values[i][rows][:, cells], dtype=np.float64), a)
            one = LevelQuadratic([self.cell_index], [w])  # the detailed query alone
            x = _split(
                one, cells, b, detailed_p[cells].astype(float), self.coarse_of[cells], coarse, a
            )
            detailed[:, cells] = round_nested(
                x,
                [(self.coarse_of[cells], 0.0)],
                cell_weight=1.0,
                parent=detailed_p[cells],
                totals=h.sum(axis=1),
                bounds=[(coarse.astype(float), coarse.astype(float))],
            ).x
        return coarse, detailed


def _split(
    quad: LevelQuadratic,
    cells: IntArray,
    b: FloatArray,
    p: FloatArray,
    labels: IntArray,
    counts: IntArray,
    a: Any,
) -> FloatArray:
    """A family's least-squares split over the parent's positive ``cells`` with each child's
    counts in each label held (``counts``: (k, labels)), certified by its KKT residuals
    (:func:`~postdp.postprocess.topdown2020.passes.certified`): matrix-free, or should that
    not settle, dense while k m^2 is at most :data:`DENSE_ENTRIES`."""
    present, where = np.unique(labels, return_inverse=True)
    g = counts[:, present].astype(np.float64)
    k, m = b.shape
    gram = MarginalGram([groups[cells] for groups in quad.groups], quad.weights)
    try:
        return certified(solve_family_free, gram, b, p, labels=where, g=g, weight=a)
    except ConvergenceError:
        if k * m * m > DENSE_ENTRIES:
            raise
    G = np.zeros((present.size, m))
    G[where, np.arange(m)] = 1.0
    return certified(solve_family_rows, quad.block(cells), b, p, G=G, g=g, weight=a)


def top_down_dhc(
    plan: DhcPlan,
    work: Workload,
    answers: list[FloatArray],
    root: IntArray | None,
    dtype: type = np.int64,
) -> Any:
    """Every draw's detailed histograms (..., n, c) from ``answers`` (one array per
    measurement of ``work``, leading draw axes allowed: the noisy answers, or for the
    restoration the BLUE's; ``root``: the fixed root per draw), whole numbers of ``dtype``
    (float64 holds them exactly: the restoration's float answer made without a copy)."""
    geo = plan.geography
    lead = answers[0].shape[:-2]
    B = int(np.prod(lead)) if lead else 1
    values = [v.reshape(B, *v.shape[-2:]) for v in answers]
    out: Any = np.zeros((B, geo.n, plan.c), dtype=dtype)
    for b in range(B):
        draw = [v[b] for v in values]
        plan.check_totals(work, draw)
        coarse = np.zeros((geo.n, plan.C), dtype=np.int64)
        if root is None:
            coarse[0], out[b, 0] = plan.root(draw)
            if plan.switcher is not None:
                plan.switch(0, out[b, :1], np.array([geo.root]), root=True)
                coarse[0] = np.bincount(plan.coarse_of, out[b, 0], plan.C).astype(np.int64)
        else:
            out[b, 0] = root[b]
            coarse[0] = np.bincount(plan.coarse_of, root[b], plan.C).astype(np.int64)
            if (np.bincount(plan.pl94, coarse[0], plan.n_pl94) != plan.held[geo.root]).any():
                raise ValidationError("`root` is not the PL94 histogram `held` gives the root")
        for d in range(1, geo.n_levels):
            kids = geo.levels[d]
            where = np.empty(int(kids.max()) + 1, dtype=np.int64)
            where[kids] = np.arange(kids.size)
            for parent, mine in families(kids, geo.parent[kids]):
                coarse[mine], detailed = plan.family(
                    d, (coarse[parent], out[b, parent].astype(np.int64)), mine, where[mine], draw
                )
                if plan.switcher is not None and mine.size > 1:
                    plan.switch(d, detailed, mine)  # then the 40-group cells anew
                    for row, child in enumerate(mine):
                        coarse[child] = np.bincount(plan.coarse_of, detailed[row], plan.C)
                out[b, mine] = detailed
    return out.reshape(*lead, geo.n, plan.c)

"""The DHC's record switching (private): persons moved between cells of one PL94 answer
until every geounit's persons per detailed group-quarters type meet its facility bounds.

The 2020 DHC persons run bounded, at every geounit, the persons of each of the 24 detailed
group-quarters types by its facilities (``hhgq_total_lb/ub``: at least one person per
facility, none where there is none), but kept those bounds out of its least squares and
rounders: after the last rounding of each family a heuristic moved persons between
histogram cells *within the same PL94 answer* (``hhgq8lev * votingage * hispanic *
cenrace``) until they held, required for the children at US to Tract_Subset and best effort
at Block_Group and Block (``dhc-2020-design.md`` sections 3 and 4.3). The production's move
rules are not published in the design notes; these are postdp's own.

**What can move.** Within a family the parent is fixed above and every child's PL94
histogram is held, so per major group ``G`` (hhgq8lev level) and PL94 answer ``a`` (voting
age, origin and race within ``G``) only the split of the child's persons among ``G``'s
detailed types may change, and only so that the children still sum to the parent. With
``y[j, t, a]`` child ``j``'s persons of type ``t`` and answer ``a``, the reachable splits
are exactly the integer ``y >= 0`` with ``sum_j y[j, t, a]`` the parent's and
``sum_t y[j, t, a]`` the child's held count. At the root (no parent) every admissible split
of its held counts is reachable.

**Exact repair.** Among those, the repair takes one with the least total violation of the
bounds, and among those one that moves the fewest persons: a small integer program per
major group with a violation (it is not a network flow: child, type and answer are three
crossed indices), solved by HiGHS (``scipy.optimize.milp``). A bound left unmet is
therefore unmeetable by any switching within PL94 answers, not a heuristic's miss.

**Looking ahead to the blocks.** Meeting a geounit's bounds is not enough for its children
to meet theirs: a parent's 53 persons of a correctional type whose only facilities lie in a
child holding 13 correctional persons (by its PL94 histogram) cannot be handed down. With
the blocks' held PL94 histograms and bounds (``reach``: :meth:`Switcher.block_reach`), the
repair also keeps every child's split *deliverable*: for every set ``S`` of ``G``'s types
and answer ``a``, ``sum_{t in S} y[j, t, a]`` at most the held answer-``a`` persons of
``j``'s blocks that allow a type of ``S`` (upper bound above 0). By the supply-demand
theorem (Gale 1957; Hall's condition for transport) that is exactly when the split can be
carried down to the blocks with every block's held histogram and every type only where it
is allowed, and it is inherited: a deliverable parent always has deliverable splits for its
children (sum the block-level delivery by child). The allowed-type upper bounds are then
met at every level below whenever they are met at the root. Lower bounds (a person per
facility) enter as a necessary condition: over every answer, ``sum_{t in S} y[j, t, :]`` at
most what ``j``'s blocks allowing a type of ``S`` can spare for it (their held persons of
``G`` less the lower bounds of ``G``'s other types); it is not sufficient, so a lower bound
below may still be left unmet (best effort at blocks; refused where required). The bounds
come first: the least
violation of the geounits' own bounds is kept before any cap (a cap the held histograms
cannot meet never costs a bound).

Turning the types' counts into cells: within ``(t, a)`` the children exchange cells the
parent has (so the edits hold), exchanges of the very same cell (sex and age) between two
types first, so a child's ages move as little as they can; at the root a person moves to
the same sex and age of the new type if that cell is admissible, else to the nearest age.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from postdp._typing import BoolArray, FloatArray, IntArray
from postdp.errors import ConvergenceError

#: The first relgq code of a group-quarters type (0-17 are household relationships).
FIRST_GQ = 18
#: The detailed group-quarters types (relgq 18 to 41).
N_GQ = 24


class Switcher:
    """The record switching of one DHC run: its cells' PL94 answers, the admissible cells,
    the types' major groups and every geounit's bounds per detailed type.

    ``pl94_of``: each detailed cell's PL94 answer; ``major``: each of the 24 types' major
    group (hhgq8lev level); ``lower``/``upper``: (n geounits, 24) bounds (``upper`` may be
    inf); ``shape``: the schema's (relgq first, so a type's cells are one run of
    ``stride``). With ``geography`` and ``reach`` (its leaves' deliverability columns,
    :meth:`block_reach` of their blocks summed: a leaf may be a block or a subtree task's
    leaf above them) the repair keeps every split deliverable to the blocks (module
    notes)."""

    def __init__(
        self,
        pl94_of: IntArray,
        admissible: BoolArray,
        major: IntArray,
        lower: FloatArray,
        upper: FloatArray,
        shape: tuple[int, ...],
        *,
        geography: Any = None,
        reach: Any = None,
    ) -> None:
        self.pl94_of, self.admissible = pl94_of, admissible
        self.lower, self.upper = lower, upper
        self.stride = int(np.prod(shape[1:]))
        offsets = np.unravel_index(np.arange(self.stride), shape[1:])
        self.sex_at, self.age_at = offsets[0], offsets[1]
        self.groups = [np.flatnonzero(major == g) for g in np.unique(major)]
        # each type's cells by their answer within the type's group (answers shared by
        # the group's types: the same votingage x hispanic x cenrace)
        self.answers: list[IntArray] = []  # per group: the PL94 answers, global codes
        self.local: list[IntArray] = [np.empty(0, dtype=np.int64)] * N_GQ
        for types in self.groups:
            codes = np.unique(np.concatenate([pl94_of[self._block(t)] for t in types.tolist()]))
            self.answers.append(codes)
            for t in types.tolist():
                self.local[t] = np.searchsorted(codes, pl94_of[self._block(t)])
        # the deliverability columns: per group, every nonempty set of its types (a bit
        # mask over the group's types) by answer, then each set over every answer
        self.column = np.cumsum(
            [0]
            + [
                (2**types.size - 1) * (codes.size + 1)
                for types, codes in zip(self.groups, self.answers, strict=True)
            ]
        )
        self.geography, self.reach = geography, reach
        #: whether the geography's leaves are the blocks (their reach their own)
        self.leaf_blocks = False
        if geography is not None:
            # each leaf's ancestor at every depth (itself at its own; -1 below it)
            leaves = geography.leaves
            depth = geography.depth
            self.ancestor = np.full((geography.n_levels, leaves.size), -1, dtype=np.int64)
            node = leaves.copy()
            for d in range(geography.n_levels - 1, -1, -1):
                here = depth[node] == d
                self.ancestor[d, here] = node[here]
                step = here & (d > 0)
                node[step] = geography.parent[node[step]]

    @classmethod
    def of_schema(
        cls, schema: Any, lower: FloatArray, upper: FloatArray, *, geography: Any = None
    ) -> Switcher:
        """The switching of :func:`postdp.tables.dhc_schema`'s cells under bounds ``lower``
        and ``upper`` ((n geounits, 24); empty for :meth:`block_reach` alone)."""
        from postdp.tables import Marginal, dhc_structural_zeros
        from postdp.tables.strategies import PL94_IN_DHC

        stride = schema.size // schema.shape[0]
        groups = Marginal(schema, "hhgq8lev").cell_groups()
        major = groups[(FIRST_GQ + np.arange(N_GQ)) * stride]
        return cls(
            Marginal(schema, PL94_IN_DHC).cell_groups(),
            ~dhc_structural_zeros(schema),
            major,
            lower,
            upper,
            schema.shape,
            geography=geography,
        )

    def block_reach(self, held: Any, upper: Any, lower: Any = None) -> Any:
        """The deliverability columns of blocks (sparse, (blocks, columns)). For each group
        and nonempty set ``S`` of its types: per answer ``a``, a block's held persons of
        answer ``a`` if it allows a type of ``S`` (upper bound above 0), else 0; then, over
        every answer, the persons it can spare for ``S``: its held persons of the group
        less the lower bounds of the group's other types (none below 0), if it allows a
        type of ``S``. A geounit's are the sum of its blocks' (``held``: (blocks, PL94
        cells), dense or sparse; ``upper``, ``lower``: (blocks, 24), no lower bounds by
        default)."""
        held = sparse.csr_array(held, dtype=np.float64)
        upper = np.asarray(upper)
        lower = np.zeros(upper.shape) if lower is None else np.asarray(lower, dtype=np.float64)
        pieces = []
        for types, codes in zip(self.groups, self.answers, strict=True):
            h = sparse.csr_array(held[:, codes])
            total = np.asarray(h.sum(axis=1)).ravel()
            allowed = upper[:, types] > 0
            spare = []
            for mask in range(1, 2**types.size):
                bits = (mask >> np.arange(types.size)) & 1 == 1
                reach = np.asarray(allowed[:, bits].any(axis=1), dtype=np.float64)
                pieces.append(sparse.csr_array(h.multiply(reach.reshape(-1, 1))))
                others = lower[:, types[~bits]].sum(axis=1)
                spare.append(np.maximum(total - others, 0.0) * reach)
            pieces.append(sparse.csr_array(np.stack(spare, axis=1)))
        return sparse.hstack(pieces, format="csr")

    def _block(self, t: int) -> slice:
        start = (FIRST_GQ + t) * self.stride
        return slice(start, start + self.stride)

    def counts(self, x: IntArray) -> IntArray:
        """Persons per detailed type, (k, 24), of histograms ``x`` (k, cells)."""
        gq = x[:, FIRST_GQ * self.stride : (FIRST_GQ + N_GQ) * self.stride]
        counts: IntArray = gq.reshape(x.shape[0], N_GQ, self.stride).sum(axis=2)
        return np.rint(counts).astype(np.int64)

    def violation(self, x: IntArray, geounits: IntArray) -> FloatArray:
        """Each geounit's total distance to its bounds."""
        n = self.counts(x).astype(np.float64)
        lo, hi = self.lower[geounits], self.upper[geounits]
        gap: FloatArray = (np.maximum(n - hi, 0.0) + np.maximum(lo - n, 0.0)).sum(axis=1)
        return gap

    def repair(self, x: Any, geounits: IntArray, *, root: bool = False) -> IntArray:
        """``x`` (k, cells): siblings' histograms (or the root's, ``root=True``) repaired
        in place (module notes); returns each one's remaining violation."""
        if not root and x.shape[0] < 2:
            return np.rint(self.violation(x, geounits)).astype(np.int64)
        for g, types in enumerate(self.groups):
            split = self._split(x, types)
            if not split.any() and not (self.lower[np.ix_(geounits, types)] > 0).any():
                continue  # no one of this group and no facility of it
            caps = self._caps(geounits, g, types, root)
            if self._meets(split, geounits, types, caps):
                continue
            target = self._solve(split, geounits, g, types, caps, root)
            if root:
                self._root_cells(x, types, split, target)
            else:
                self._cells(x, types, split, target)
        return np.rint(self.violation(x, geounits)).astype(np.int64)

    # -- the splits --------------------------------------------------------------------------

    def _split(self, x: Any, types: IntArray) -> IntArray:
        """``y[j, t, a]``: each row's persons of the group's ``types`` by answer."""
        n_ans = int(self.local[types[0]].max()) + 1
        y = np.zeros((x.shape[0], types.size, n_ans), dtype=np.int64)
        for i, t in enumerate(types):
            block = x[:, self._block(t)]
            rows, cols = np.nonzero(block)
            np.add.at(
                y[:, i], (rows, self.local[t][cols]), np.rint(block[rows, cols]).astype(np.int64)
            )
        return y

    def _caps(
        self, geounits: IntArray, g: int, types: IntArray, root: bool
    ) -> list[tuple[IntArray, IntArray]]:
        """The deliverability caps of rows ``geounits``: pairs ``(S, cap)``, ``S`` positions
        in ``types``, ``cap`` (k, answers) the held persons of the rows' blocks allowing a
        type of ``S``; none without the blocks' reach. A set of two or more types is kept
        only where its cap is below its types' caps summed (a block allows two of them);
        the others follow from the single types'."""
        geo = self.geography
        if geo is None or self.reach is None:
            return []
        if self.leaf_blocks and not root and geo.is_leaf[geounits].all():
            return []  # a block's caps are its upper bounds' zeros: nothing more to keep
        k = geounits.size
        if root:
            row_of = np.zeros(geo.leaves.size, dtype=np.int64)
        else:
            d = int(geo.depth[geounits[0]])
            position = np.full(geo.n, -1, dtype=np.int64)
            position[geounits] = np.arange(k)
            row_of = np.full(geo.leaves.size, -1, dtype=np.int64)
            mine = self.ancestor[d] >= 0
            row_of[mine] = position[self.ancestor[d, mine]]
        take = np.flatnonzero(row_of >= 0)
        member = sparse.csr_array(
            (np.ones(take.size), (row_of[take], take)), shape=(k, geo.leaves.size)
        )
        A, M = self.answers[g].size, 2**types.size - 1
        cols = self.reach[:, self.column[g] : self.column[g + 1]]
        slab = np.rint(np.asarray((member @ cols).todense())).astype(np.int64)
        caps, spare = slab[:, : M * A].reshape(k, M, A), slab[:, M * A :]
        out: list[tuple[IntArray, IntArray]] = []
        for mask in range(1, M + 1):
            members = np.flatnonzero((mask >> np.arange(types.size)) & 1)
            cap = caps[:, mask - 1]
            apart = sum(caps[:, (1 << int(i)) - 1] for i in members)
            if members.size == 1 or (cap < apart).any():
                out.append((members, cap))
            if (spare[:, mask - 1] < cap.sum(axis=1)).any():  # lower bounds below bind
                out.append((members, spare[:, mask - 1]))
        return out

    def _meets(
        self, y: IntArray, geounits: IntArray, types: IntArray, caps: list[tuple[Any, Any]]
    ) -> bool:
        n = y.sum(axis=2)
        lo, hi = self.lower[np.ix_(geounits, types)], self.upper[np.ix_(geounits, types)]
        if ((n < lo) | (n > hi)).any():
            return False
        return all(
            (y[:, s].sum(axis=1 if cap.ndim == 2 else (1, 2)) <= cap).all() for s, cap in caps
        )

    def _solve(
        self,
        y0: IntArray,
        geounits: IntArray,
        g: int,
        types: IntArray,
        caps: list[tuple[Any, Any]],
        root: bool,
    ) -> IntArray:
        """The reachable split with the least violation of the bounds, then of the caps,
        then the fewest persons moved: HiGHS's integer programs (module notes).

        Variables: ``y`` (k, T, A); ``d >= y0 - y``, the persons moved out of each
        ``(j, t, a)``; a slack per bound and cap row. One program prices every slack above
        every possible move; should it leave a bound unmet while a cap is broken too, a
        second finds the least violation of the bounds alone and a third keeps it."""
        k, T, A = y0.shape
        ny = k * T * A
        j_ = np.arange(k)[:, None, None]
        t_ = np.arange(T)[None, :, None]
        a_ = np.arange(A)[None, None, :]

        def sums(labels: IntArray, n_rows: int) -> Any:
            """(n_rows, ny): row ``r`` sums the ``y`` labelled ``r`` (-1: none)."""
            flat = np.broadcast_to(labels, (k, T, A)).ravel()
            keep = flat >= 0
            data = (np.ones(int(keep.sum())), (flat[keep], np.flatnonzero(keep)))
            return sparse.csr_array(data, shape=(n_rows, ny))

        held = y0.sum(axis=1).ravel()  # each row's persons per answer: held
        hard = [(sums(j_ * A + a_, k * A), held, held)]
        if not root:  # the parent: the rows' sum, fixed
            parent = y0.sum(axis=0).ravel()
            hard.append((sums(t_ * A + a_ + 0 * j_, T * A), parent, parent))
        lo = self.lower[np.ix_(geounits, types)].ravel()
        hi = self.upper[np.ix_(geounits, types)].ravel()
        per_type = sums(j_ * T + t_ + 0 * a_, k * T)
        below, above = np.flatnonzero(lo > 0), np.flatnonzero(np.isfinite(hi))
        soft = [  # (rows, low, high, the slack's sign)
            (per_type[below], lo[below], np.full(below.size, np.inf), 1.0),
            (per_type[above], np.full(above.size, -np.inf), hi[above], -1.0),
        ]
        n_bound = below.size + above.size
        for s, cap in caps:
            if cap.ndim == 2:  # per answer
                member = np.where(np.isin(t_, s), j_ * A + a_, -1)
                rows = sums(member, k * A)
            else:  # over every answer: the persons the blocks can spare for the set
                rows = sums(np.where(np.isin(t_, s), j_ + 0 * a_, -1), k)
            soft.append((rows, np.full(cap.size, -np.inf), cap.ravel(), -1.0))
        n_slack = sum(rows.shape[0] for rows, *_ in soft)
        n_var = 2 * ny + n_slack

        def wide(rows: Any, d: Any = None, slack: Any = None) -> Any:
            m = rows.shape[0]
            d = sparse.csr_array((m, ny)) if d is None else d
            slack = sparse.csr_array((m, n_slack)) if slack is None else slack
            return sparse.hstack([rows, d, slack], format="csr")

        matrix, low, high = [], [], []
        for rows, lo_, hi_ in hard:
            matrix.append(wide(rows))
            low.append(lo_)
            high.append(hi_)
        start = 0
        for rows, lo_, hi_, sign in soft:
            m = rows.shape[0]
            pick = (np.full(m, sign), (np.arange(m), start + np.arange(m)))
            matrix.append(wide(rows, slack=sparse.csr_array(pick, shape=(m, n_slack))))
            low.append(lo_)
            high.append(hi_)
            start += m
        eye = sparse.identity(ny, format="csr")
        matrix.append(wide(eye, d=eye))  # y + d >= y0
        low.append(y0.ravel())
        high.append(np.full(ny, np.inf))
        upper = np.full(n_var, np.inf)
        if root:  # no person into a cell the edits forbid
            for i, t in enumerate(types):
                allowed = np.zeros(A, dtype=bool)
                allowed[self.local[t][self.admissible[self._block(t)]]] = True
                upper[np.flatnonzero(np.broadcast_to(~allowed & (t_ == i), (k, T, A)).ravel())] = 0
        bound_slack = np.zeros(n_var)
        bound_slack[2 * ny : 2 * ny + n_bound] = 1.0

        def solve(cost: FloatArray, most: float | None = None) -> FloatArray:
            rows, lows, highs = list(matrix), list(low), list(high)
            if most is not None:  # the bounds' violation held at its least
                rows.append(sparse.csr_array(bound_slack[None]))
                lows.append(np.array([-np.inf]))
                highs.append(np.array([most]))
            res = milp(
                cost,
                constraints=LinearConstraint(
                    sparse.vstack(rows, format="csr"),
                    np.concatenate(lows).astype(float),
                    np.concatenate(highs).astype(float),
                ),
                integrality=np.ones(n_var),
                bounds=Bounds(np.zeros(n_var), upper),
                options={"mip_rel_gap": 0.0},
            )
            if res.x is None or res.status != 0:
                raise ConvergenceError(f"record switching's integer program failed: {res.message}")
            out: FloatArray = np.rint(res.x)
            return out

        price = 2.0 * float(y0.sum()) + 1.0  # above every possible move (at most the persons)
        moves = np.concatenate([np.zeros(ny), np.ones(ny), np.zeros(n_slack)])
        slacks = np.concatenate([np.zeros(2 * ny), np.full(n_slack, price)])
        x = solve(moves + slacks)
        unmet = float(bound_slack @ x)
        if unmet > 0 and n_slack > n_bound:  # a cap may have been kept at a bound's cost
            least = float(bound_slack @ solve(bound_slack))
            if least < unmet:
                x = solve(moves + slacks, most=least)
        y: IntArray = x[:ny].astype(np.int64).reshape(k, T, A)
        return y

    # -- cells ---------------------------------------------------------------------------------

    def _cells(self, x: Any, types: IntArray, y0: IntArray, y: IntArray) -> None:
        """Children exchange cells of the parent so that their splits become ``y``: the
        same cell between two types first, then any cell of the answer."""
        change = y - y0  # (k, T, A): + takes, - gives, within each (t, a)
        for a in np.flatnonzero(np.abs(change).sum(axis=(0, 1))):
            cells = [
                (FIRST_GQ + t) * self.stride + np.flatnonzero(self.local[t] == a) for t in types
            ]
            # swaps: child r gives (t, a, o) and takes (u, a, o); child q the reverse
            for i, j in itertools.permutations(range(types.size), 2):
                for r in np.flatnonzero((change[:, i, a] < 0) & (change[:, j, a] > 0)):
                    for q in np.flatnonzero((change[:, j, a] < 0) & (change[:, i, a] > 0)):
                        both = np.flatnonzero((x[r, cells[i]] > 0) & (x[q, cells[j]] > 0))
                        for o in both:
                            room = (-change[r, i, a], change[r, j, a], -change[q, j, a])
                            have = (change[q, i, a], x[r, cells[i][o]], x[q, cells[j][o]])
                            n = int(min(*room, *have))
                            if n <= 0:
                                continue
                            x[r, cells[i][o]] -= n
                            x[q, cells[i][o]] += n
                            x[q, cells[j][o]] -= n
                            x[r, cells[j][o]] += n
                            change[r, i, a] += n
                            change[q, i, a] -= n
                            change[q, j, a] += n
                            change[r, j, a] -= n
            for i in range(types.size):  # what is left: any cell of (t, a), largest first
                takers = list(np.flatnonzero(change[:, i, a] > 0))
                for r in np.flatnonzero(change[:, i, a] < 0):
                    for c in cells[i][np.argsort(-x[r, cells[i]], kind="stable")]:
                        while change[r, i, a] < 0 and x[r, c] > 0 and takers:
                            q = takers[0]
                            n = int(min(-change[r, i, a], x[r, c], change[q, i, a]))
                            x[r, c] -= n
                            x[q, c] += n
                            change[r, i, a] += n
                            change[q, i, a] -= n
                            if change[q, i, a] == 0:
                                takers.pop(0)
        if change.any():  # pragma: no cover - the split is the children's sum by design
            raise ConvergenceError("record switching could not place its exchanges in cells")

    def _root_cells(self, x: Any, types: IntArray, y0: IntArray, y: IntArray) -> None:
        """The root's persons move type within their answer: to the same sex and age of the
        new type where admissible, else the admissible cell of the answer nearest in age."""
        change = (y - y0)[0]  # (T, A)
        for a in np.flatnonzero(np.abs(change).sum(axis=0)):
            gone: list[int] = []  # offsets of the persons taken out
            for i, t in enumerate(types):
                own = np.flatnonzero(self.local[t] == a)
                block = (FIRST_GQ + t) * self.stride
                for o in own[np.argsort(-x[0, block + own], kind="stable")]:
                    n = int(min(-change[i, a], x[0, block + o]))
                    if n > 0:
                        x[0, block + o] -= n
                        change[i, a] += n
                        gone.extend([int(o)] * n)
            for i, t in enumerate(types):
                block = (FIRST_GQ + t) * self.stride
                able = np.flatnonzero(
                    (self.local[t] == a) & self.admissible[block : block + self.stride]
                )
                while change[i, a] > 0:
                    o = gone.pop()
                    near = np.abs(self.age_at[able] - self.age_at[o]) * 2
                    target = int(able[np.argmin(near + (self.sex_at[able] != self.sex_at[o]))])
                    x[0, block + target] += 1
                    change[i, a] -= 1

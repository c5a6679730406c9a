"""Table (P) in the marginal basis: a schema's GLS split into many tiny independent ones.

Every measured query of a schema table is a marginal, a Kronecker product of one factor per
attribute: the identity (the attribute is kept), an all-ones row (summed out) or a recode's
0/1 matrix. For each attribute k let W_k be the span of the class indicators of every
non-identity factor the workload applies to it (all-ones, recode classes) and r_k its
dimension; U_k = [basis of W_k | basis of its orthogonal complement] is orthogonal. In the
coordinates z = (U_1 x ... x U_K)' x of a histogram x:

- a kept attribute's answers, rotated by U_k', are the coordinates z along k themselves
  (an orthogonal rotation keeps the noise white with the same variance, and public answers
  exact);
- a summed-out or recoded attribute's answers are H z_W with H = F U_k[:, :r_k]: they see
  only the first r_k coordinates along k (F vanishes on the complement of W_k).

So a coordinate tuple (i_1, ..., i_K) falls in the *type* tau = {k : i_k < r_k}, and the
coordinates of one type and one choice of complement indices form a block of prod_{k in
tau} r_k unknowns per geounit, measured only by the marginals whose factors outside tau are
identities (through the Kronecker product of I_{r_k} or H over tau). The geographic sums act
coordinate by coordinate. The whole problem is therefore 2^K families of identical tiny tree
problems (for the 2020 persons schema: 16 types, blocks of at most 3 unknowns), each solved
exactly by :class:`~postdp.postprocess._solvers.kalman_tree.TreeGLS` with the blocks as a
batch axis, then rotated back. Cost per geounit and draw about c x (sum of r_k + sizes); no c x c
matrix is formed. The result is the same least-squares solution as the dense solver
(tested to 1e-9 on random schemas with recodes and public queries).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.kalman_tree import TreeGLS
from postdp.tables import Workload
from postdp.tables.schema import Marginal, Schema, leaf_codes

__all__ = ["MarginalBasis", "identifies_cells", "marginal_workload", "table_schema"]


class Factored(Protocol):
    """Counts that are one Kronecker product of a factor per schema attribute (None: the
    attribute kept): a :class:`~postdp.tables.schema.Marginal`, or a
    :class:`~postdp.tables.Block` of a published table's rows (which may overlap)."""

    @property
    def factors(self) -> Sequence[FloatArray | None]: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def size(self) -> int: ...


def marginal_workload(workload: Workload) -> Schema | None:
    """The schema when every query of ``workload`` is a marginal of one schema, else None."""
    marginals = [m.query.marginal_of for m in workload.measurements]
    if not marginals or any(m is None for m in marginals):
        return None
    first = marginals[0]
    assert first is not None
    # equal schemas built apart (two dhc_schema() calls) are one schema
    if any(m.schema is not first.schema and m.schema != first.schema for m in marginals if m):
        return None
    return first.schema


def table_schema(categories: Hierarchy, workload: Workload) -> Schema | None:
    """The schema when every query of ``workload`` is a marginal of one schema whose cells
    are the detailed cells of ``categories`` (the marginal-basis solvers apply), else None."""
    schema = marginal_workload(workload)
    if schema is None:
        return None
    key = (id(categories), id(schema))
    if key not in _FITS:
        if len(_FITS) > 256:
            _FITS.clear()
        cells = leaf_codes(categories)
        _FITS[key] = (categories, schema, cells == schema.cells)  # both kept: ids stay unique
    return schema if _FITS[key][2] else None


_FITS: dict[tuple[int, int], tuple[Hierarchy, Schema, bool]] = {}


class MarginalBasis:
    """(P) of a schema workload on a geography, prepared once for many draws.

    Memory: :meth:`solve` holds the answers rotated into the basis and one (draws, geounits,
    cells) array of coordinates, plus each type's tree arrays in turn; the first
    :meth:`marginal_variances` keeps every type's block covariances, geounits x the sum
    over types of (block size)^2 floats (80 per geounit for the persons schema)."""

    __slots__ = (
        "_covs",
        "bases",
        "geography",
        "marginals",
        "ranks",
        "schema",
        "types",
        "variances",
    )

    def __init__(
        self,
        geography: Hierarchy,
        workload: Workload,
        *,
        basis: tuple[list[FloatArray], list[int], dict[object, FloatArray]] | None = None,
        below: list[FloatArray] | None = None,
        scale: FloatArray | None = None,
    ) -> None:
        schema = marginal_workload(workload)
        if schema is None:
            raise ValueError("the workload is not made of marginals of one schema")
        self.schema, self.geography = schema, geography
        # per type, on demand: the distinct (g, s, s) and each geounit's, in id order
        self._covs: dict[int, tuple[FloatArray, IntArray]] = {}
        self.marginals: list[Marginal] = []
        self.variances: list[float] = []
        for m in workload.measurements:
            assert m.query.marginal_of is not None
            self.marginals.append(m.query.marginal_of)
            self.variances.append(m.variance)
        self.bases: list[FloatArray] = []
        self.ranks: list[int] = []
        for k, n in enumerate(schema.shape):
            factors = [q.factors[k] for q in self.marginals]
            if basis is None:
                U, r = _attribute_basis(factors, n)
            else:  # another tree's basis (a subtree solved apart): it must hold these factors
                U, r = basis[0][k], basis[1][k]
                if not _spans(U, r, factors):
                    raise ValueError(
                        f"a marginal summarises attribute {schema.attributes[k].name!r} in a "
                        "way the other tree's workload does not"
                    )
            self.bases.append(U)
            self.ranks.append(r)
        levels = [m.level for m in workload.measurements]
        # each (marginal, type) block matrix, shared with the trees built on the same basis
        matrices: dict[object, FloatArray] = {} if basis is None else basis[2]
        self.types: list[tuple[tuple[int, ...], TreeGLS, list[list[int]]]] = []
        K = len(schema.shape)
        for size in range(K + 1):
            for tau in itertools.combinations(range(K), size):
                if any(self.ranks[k] == 0 for k in tau):
                    continue
                if any(self.ranks[k] == schema.shape[k] for k in range(K) if k not in tau):
                    continue  # an attribute outside tau has no complement: the type is empty
                per_level: list[tuple[FloatArray, FloatArray]] = []
                which: list[list[int]] = []
                stacks: dict[tuple[str, ...], FloatArray] = {}  # this type's, by marginals
                s = math.prod(self.ranks[k] for k in tau)
                for d in range(geography.n_levels):
                    mats, var, used = [], [], []
                    for j, (q, lev) in enumerate(zip(self.marginals, levels, strict=True)):
                        if lev != d or any(
                            q.factors[k] is not None for k in range(K) if k not in tau
                        ):
                            continue
                        key = (q.name, tau)
                        if key not in matrices:
                            matrices[key] = _type_matrix(q, tau, self.bases, self.ranks)
                        M = matrices[key]
                        mats.append(M)
                        var.append(np.full(M.shape[0], self.variances[j]))
                        used.append(j)
                    # levels measuring the same marginals share one stacked matrix (the
                    # DHC's eight levels: 31 MB each for its largest types)
                    names = tuple(self.marginals[j].name for j in used)
                    if names not in stacks:
                        stacks[names] = np.vstack(mats) if mats else np.zeros((0, s))
                    A = stacks[names]
                    noise = np.concatenate(var) if var else np.zeros(0)
                    per_level.append((A, noise))
                    which.append(used)
                t = len(self.types)
                cov = None if below is None else below[t]
                # trees on a shared basis without `below` share their shapes (same matrices)
                pool: Any = None
                if basis is not None and below is None:
                    pool = matrices.setdefault(("pool", t), ({}, []))  # type: ignore[arg-type]
                tree = TreeGLS(geography, per_level, s, cov, pool, scale)
                self.types.append((tau, tree, which))

    def solve(
        self,
        values: list[FloatArray],
        B: int,
        *,
        below: list[FloatArray] | None = None,
        root: FloatArray | None = None,
    ) -> FloatArray:
        """Detailed histograms (B, geography.n, c), rows in the order of geography.ids, from
        the answers ``values[j]`` of shape (B, geounits of its level, size_j).

        ``below``: per type, the leaves' subtree estimates in basis coordinates (B m_tau,
        leaves in layout order, s), as :meth:`upward` gives them (with ``below`` covariances
        given at construction). ``root`` (B, c): the root's histogram fixed from outside."""
        geo, schema = self.geography, self.schema
        lay = geo.layout
        shape, K = schema.shape, len(schema.shape)
        rotated = self._rotate(values, B)
        fixed = None if root is None else self._to_basis(root.reshape(B, 1, schema.size))
        z = np.zeros((B, geo.n, *shape))
        for t, (tau, tree, _) in enumerate(self.types):
            ys = self._type_answers(rotated, t, B)
            top = None if fixed is None else self._block(fixed, tau)[:, 0]
            est = tree.solve(ys, below=None if below is None else below[t], root=top)
            del ys
            self._unblock(est[:, lay.position], tau, z)
            del est
        del rotated
        # back to cells in place, a chunk of geounits at a time (no second array of z's size)
        step = max(1, (1 << 21) // max(1, B * schema.size))
        for a in range(0, geo.n, step):
            part = z[:, a : a + step]
            for k in range(K):
                part = np.moveaxis(
                    np.tensordot(part, self.bases[k], axes=([2 + k], [1])), -1, 2 + k
                )
            z[:, a : a + step] = part
        return z.reshape(B, geo.n, schema.size)

    def upward(self, values: list[FloatArray], B: int) -> list[tuple[FloatArray, FloatArray]]:
        """Per type, the root's estimate from this tree's answers alone in basis coordinates
        (B m_tau, s) and its covariance (s, s): what a larger tree takes as ``below``."""
        rotated = self._rotate(values, B)
        return [
            tree.upward(self._type_answers(rotated, t, B))
            for t, (_, tree, _) in enumerate(self.types)
        ]

    def _rotate(self, values: list[Any], B: int) -> list[FloatArray]:
        """Each marginal's answers (B, geounits, *its shape), kept attributes rotated; each
        entry of ``values`` is let go (set to None) once rotated, so answers nothing else
        holds are freed as their rotated copies are made."""
        rotated = []
        for j, q in enumerate(self.marginals):
            y, values[j] = values[j], None
            y = y.reshape(B, y.shape[1], *q.shape)
            kept = [k for k in range(len(q.shape)) if q.factors[k] is None]
            if not kept:
                rotated.append(y)
                continue
            out = np.empty(y.shape)
            step = max(1, (1 << 22) // max(1, B * q.size))  # geounits at a time
            for a in range(0, y.shape[1], step):
                t = y[:, a : a + step]
                for k in kept:  # a kept attribute: rotate its answers
                    t = np.moveaxis(np.tensordot(t, self.bases[k], axes=([2 + k], [0])), -1, 2 + k)
                out[:, a : a + step] = t
            del y
            rotated.append(out)
        return rotated

    def _to_basis(self, cells: FloatArray) -> FloatArray:
        """Histograms (B, n, c) as basis coordinates (B, n, *schema.shape)."""
        z = cells.reshape(*cells.shape[:2], *self.schema.shape)
        for k in range(len(self.schema.shape)):
            z = np.moveaxis(np.tensordot(z, self.bases[k], axes=([2 + k], [0])), -1, 2 + k)
        return z

    def _type_answers(self, rotated: list[FloatArray], t: int, B: int) -> list[FloatArray]:
        """Type t's answers per level (B m_tau, geounits of the level in layout order, k_d)."""
        geo, shape, ranks = self.geography, self.schema.shape, self.ranks
        lay, K = geo.layout, len(shape)
        tau, _, which = self.types[t]
        others = [k for k in range(K) if k not in tau]
        m_tau = math.prod(shape[k] - ranks[k] for k in others)
        # batch axes: draws, then the complement coordinates of the other attributes
        order = [0, *(2 + k for k in others), 1, *(2 + k for k in tau)]
        ys = []
        for d in range(geo.n_levels):
            nodes = geo.levels[d]
            parts = []
            for j in which[d]:
                q = self.marginals[j]
                index = [slice(None), slice(None)]
                for k in range(K):
                    if k in tau:
                        index.append(slice(0, ranks[k]) if q.factors[k] is None else slice(None))
                    else:
                        index.append(slice(ranks[k], None))
                parts.append(np.transpose(rotated[j][tuple(index)], order))
            width = [math.prod(part.shape[2 + len(others) :]) for part in parts]
            laid = np.empty((B * m_tau, nodes.size, sum(width)))
            rows = lay.position[nodes] - lay.bounds[d]
            at = 0
            for part, w in zip(parts, width, strict=True):  # straight into place: no concatenation
                laid[:, rows, at : at + w] = part.reshape(B * m_tau, nodes.size, w)
                at += w
            ys.append(laid)
        return ys

    def _block(self, z: FloatArray, tau: tuple[int, ...]) -> FloatArray:
        """Coordinates (B, n, *schema.shape) of type tau as (B m_tau, n, s)."""
        shape, ranks, K = self.schema.shape, self.ranks, len(self.schema.shape)
        others = [k for k in range(K) if k not in tau]
        index = [slice(None), slice(None)]
        for k in range(K):
            index.append(slice(0, ranks[k]) if k in tau else slice(ranks[k], None))
        part = z[tuple(index)]
        order = [0, *(2 + k for k in others), 1, *(2 + k for k in tau)]
        m_tau = math.prod(shape[k] - ranks[k] for k in others)
        return np.transpose(part, order).reshape(z.shape[0] * m_tau, z.shape[1], -1)

    def _unblock(self, est: FloatArray, tau: tuple[int, ...], z: FloatArray) -> None:
        """Write type tau's coordinates (B m_tau, n, s), rows in id order, into ``z``."""
        shape, ranks, K = self.schema.shape, self.ranks, len(self.schema.shape)
        others = [k for k in range(K) if k not in tau]
        B, n = z.shape[0], z.shape[1]
        est = est.reshape(B, *(shape[k] - ranks[k] for k in others), n, *(ranks[k] for k in tau))
        pos = {k: 1 + i for i, k in enumerate(others)}
        pos.update({k: len(others) + 2 + i for i, k in enumerate(tau)})
        est = np.transpose(est, [0, len(others) + 1, *(pos[k] for k in range(K))])
        index = [slice(None), slice(None)]
        for k in range(K):
            index.append(slice(0, ranks[k]) if k in tau else slice(ranks[k], None))
        z[tuple(index)] = est

    def type_covariances(self, node: int, root: list[FloatArray] | None = None) -> list[FloatArray]:
        """Per type, the block covariance (s, s) of geounit ``node``'s final estimate (row
        ``node`` in id order): what a subtree rooted there takes as ``root``."""
        out = []
        for t in range(len(self.types)):
            mats, which = self._type_covs(t, root)
            out.append(mats[which[node]])
        return out

    def _type_covs(self, t: int, root: list[FloatArray] | None) -> tuple[FloatArray, IntArray]:
        """Type t's block covariances: the distinct matrices (g, s, s) and each geounit's
        (n,), in id order; kept for later calls (a basis is asked with one ``root``
        throughout: a subtree's is fixed by its larger tree). The children of one family
        and shape share one matrix, so g is about the number of families, not of
        geounits."""
        if t not in self._covs:
            geo, tree = self.geography, self.types[t][1]
            mats: list[FloatArray] = []
            which = np.empty(geo.n, dtype=np.int64)
            for groups in tree.covariance_groups(None if root is None else root[t]):
                for positions, P in groups:
                    which[positions] = len(mats)
                    mats.append(P)
            self._covs[t] = (np.stack(mats), which[geo.layout.position])
        return self._covs[t]

    def cell_precision(self, node: int) -> FloatArray:
        """The inverse of the covariance of geounit ``node``'s final detailed estimate (c x
        c, cells in schema order), from the design alone.

        In the basis the covariance is block diagonal: type tau's block covariance C,
        repeated once per choice of complement indices; so the precision is U (blocks of
        C^-1) U' with U the Kronecker product of the attribute bases. A direction an
        invariant fixes (variance 0, to rounding) gets the largest precision of the
        others: the precision stays positive definite, and a restoration that holds the
        invariant exactly is not changed by it."""
        from scipy import sparse

        shape, ranks, K = self.schema.shape, self.ranks, len(self.schema.shape)
        covs = self.type_covariances(node)
        eigen = [np.linalg.eigh((C + C.T) / 2) for C in covs]
        largest = max((float(w.max()) for w, _ in eigen if w.size), default=1.0)
        floor = 1e-12 * max(1.0, largest)  # as held_at_zero: below it, an exact 0
        known = [1.0 / w[w > floor] for w, _ in eigen if (w > floor).any()]
        top = max((float(p.max()) for p in known), default=1.0)
        grid = np.arange(self.schema.size).reshape(shape)
        rows, cols, data = [], [], []
        for (tau, _, _), (w, V) in zip(self.types, eigen, strict=True):
            inverse = (V * np.where(w > floor, 1.0 / np.maximum(w, floor), top)) @ V.T
            spans = [range(ranks[k]) if k in tau else range(ranks[k], shape[k]) for k in range(K)]
            sel = grid[np.ix_(*spans)]  # this type's coordinates, one axis per attribute
            others = [k for k in range(K) if k not in tau]
            sel = np.transpose(sel, [*others, *tau]).reshape(-1, inverse.shape[0])
            rows.append(np.repeat(sel, sel.shape[1], axis=1).ravel())
            cols.append(np.tile(sel, (1, sel.shape[1])).ravel())
            data.append(np.broadcast_to(inverse.ravel(), (sel.shape[0], inverse.size)).ravel())
        c = self.schema.size
        Hz = sparse.csr_array(
            (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(c, c)
        )
        U: FloatArray = np.ones((1, 1))
        for k in range(K):
            U = np.asarray(np.kron(U, self.bases[k]), dtype=np.float64)
        H: FloatArray = U @ (Hz @ U.T)
        return (H + H.T) / 2

    def marginal_variances(
        self, marginal: Factored, root: list[FloatArray] | None = None
    ) -> FloatArray:
        """Variance of every count of ``marginal`` at every geounit, shape (geography.n,
        marginal.size), rows in the order of geography.ids (from the design alone).

        ``marginal`` is any Kronecker product of one factor per attribute: a schema's
        marginal, or a block of a published table's rows (:class:`postdp.tables.Block`,
        whose rows overlap: a row's variance is that of the sum of its cells, covariances
        included, not the sum of their variances).

        ``root``: per type, the root's final block covariance when this tree is a subtree
        solved below a larger one's answer (:meth:`type_covariances` of that tree).

        With G_k = F_k U_k for the marginal's factor F_k (the identity if kept), a type tau
        adds diag(V C V') over the attributes in tau (V the Kronecker product of their G_k's
        first r_k columns, C the block covariance) times, for each attribute outside tau,
        the row sums of squares of G_k's complement columns."""
        geo, schema = self.geography, self.schema
        K = len(schema.shape)
        G = [
            self.bases[k] if f is None else f @ self.bases[k]
            for k, f in enumerate(marginal.factors)
        ]
        total = np.zeros((geo.n, *marginal.shape))
        for t, (tau, _, _) in enumerate(self.types):
            others = [k for k in range(K) if k not in tau]
            outside = [np.sum(G[k][:, self.ranks[k] :] ** 2, axis=1) for k in others]
            if any(not e.any() for e in outside):
                continue  # a summed-out attribute outside tau: this type adds nothing
            # an attribute of tau with one direction scales V's rows by its one column: its
            # squares join the weight, and V spans the wider attributes alone (the DHC's
            # relgq x age types would otherwise make V 423,360 x 1,160)
            wide = tuple(k for k in tau if self.ranks[k] > 1)
            V: FloatArray = np.ones((1, 1))
            for k in wide:
                V = np.asarray(np.kron(V, G[k][:, : self.ranks[k]]), dtype=np.float64)
            mats, which = self._type_covs(t, root)
            inner = _quadratic_rows(V, mats)  # one row per distinct matrix
            rows = [G[k].shape[0] for k in wide]
            weight = np.ones([1] * (K + 1))  # the other attributes, broadcast
            scales = [G[k][:, 0] ** 2 for k in tau if k not in wide]
            narrow = [k for k in tau if k not in wide]
            for k, e in zip([*others, *narrow], [*outside, *scales], strict=True):
                weight = weight * e.reshape([1] + [e.size if i == k else 1 for i in range(K)])
            # (n, rows of every attribute, in attribute order), a chunk of geounits at a
            # time: no temporary as large as the result
            step = max(1, (1 << 21) // max(1, marginal.size))
            for a in range(0, geo.n, step):
                part = inner[which[a : a + step]]
                total[a : a + step] += _place(part.reshape(len(part), *rows), wide, K) * weight
        return held_at_zero(total.reshape(geo.n, marginal.size))


def held_at_zero(variances: FloatArray) -> FloatArray:
    """``variances`` with the rounding residue of the counts an invariant fixes set to 0.

    Those variances are exactly 0, but the sums that give them leave a residue of either
    sign (about 1e-15 of the largest); a value below 1e-12 times the largest (at least 1)
    is taken for such a residue, so no variance is negative and no standard deviation NaN.
    """
    out = np.asarray(variances, dtype=np.float64)
    floor = 1e-12 * max(1.0, float(out.max())) if out.size else 0.0
    out[out < floor] = 0.0
    return out


def identifies_cells(marginals: list[Marginal]) -> bool:
    """Whether noisy answers to ``marginals`` (of one schema) determine every detailed cell:
    in the basis of these marginals, every type's stacked block has full column rank (the
    information matrix is block diagonal over types), checked without any c x c matrix."""
    if not marginals:
        return False
    schema = marginals[0].schema
    key = (id(schema), tuple(q.name for q in marginals))
    if key not in _IDENTIFIES:
        if len(_IDENTIFIES) > 256:
            _IDENTIFIES.clear()
        _IDENTIFIES[key] = (schema, _identifies(marginals))  # the schema kept: ids stay unique
    return _IDENTIFIES[key][1]


_IDENTIFIES: dict[tuple[int, tuple[str, ...]], tuple[Schema, bool]] = {}


def _identifies(marginals: list[Marginal]) -> bool:
    schema = marginals[0].schema
    K = len(schema.shape)
    bases, ranks = [], []
    for k, n in enumerate(schema.shape):
        basis, r = _attribute_basis([q.factors[k] for q in marginals], n)
        bases.append(basis)
        ranks.append(r)
    for size in range(K + 1):
        for tau in itertools.combinations(range(K), size):
            if any(ranks[k] == 0 for k in tau):
                continue
            if any(ranks[k] == schema.shape[k] for k in range(K) if k not in tau):
                continue  # no coordinates of this type
            mats = [
                _type_matrix(q, tau, bases, ranks)
                for q in marginals
                if all(q.factors[k] is None for k in range(K) if k not in tau)
            ]
            s = math.prod(ranks[k] for k in tau)
            if not mats or np.linalg.matrix_rank(np.vstack(mats)) < s:
                return False
    return True


def _type_matrix(
    q: Marginal, tau: tuple[int, ...], bases: list[FloatArray], ranks: list[int]
) -> FloatArray:
    """How marginal ``q`` sees one block of type ``tau``: the Kronecker product over tau of
    I_{r_k} (a kept attribute) or F_k U_k[:, :r_k]."""
    M: FloatArray = np.ones((1, 1))
    for k in tau:
        f = q.factors[k]
        part = np.eye(ranks[k]) if f is None else f @ bases[k][:, : ranks[k]]
        M = np.asarray(np.kron(M, part), dtype=np.float64)
    return M


def _place(term: FloatArray, tau: tuple[int, ...], K: int) -> FloatArray:
    """``term`` of shape (n, rows of the attributes in tau) with length-1 axes inserted for
    the other attributes (broadcastable against (n, rows of every attribute))."""
    shape = [term.shape[0]]
    for k in range(K):
        shape.append(term.shape[1 + tau.index(k)] if k in tau else 1)
    return term.reshape(shape)


def workload_basis(
    workload: Workload,
) -> tuple[list[FloatArray], list[int], dict[object, FloatArray]]:
    """The attribute bases and ranks of ``workload``'s marginals, as ``MarginalBasis(...,
    basis=)`` takes them (with an empty cache of block matrices): the basis alone, no tree
    built, so a workload that solves nothing by itself (a top whose leaf level's queries do
    not identify the cells, its subtrees below them) gives one."""
    schema = marginal_workload(workload)
    if schema is None:
        raise ValueError("the workload is not made of marginals of one schema")
    marginals = [m.query.marginal_of for m in workload.measurements]
    bases, ranks = [], []
    for k, n in enumerate(schema.shape):
        U, r = _attribute_basis([q.factors[k] for q in marginals if q is not None], n)
        bases.append(U)
        ranks.append(r)
    return bases, ranks, {}


def _spans(basis: FloatArray, r: int, factors: list[FloatArray | None]) -> bool:
    """Whether the first ``r`` columns of ``basis`` span the rows of every non-identity
    factor (an attribute basis built for another workload)."""
    rows = [f for f in factors if f is not None]
    if not rows:
        return True
    M = np.vstack(rows)
    return bool(np.abs(M @ basis[:, r:]).max(initial=0.0) <= 1e-10 * max(1.0, np.abs(M).max()))


def _attribute_basis(factors: list[FloatArray | None], n: int) -> tuple[FloatArray, int]:
    """U_k (n x n, orthogonal) whose first r columns span the rows of every non-identity
    factor applied to one attribute, and r."""
    rows = [f for f in factors if f is not None]
    if not rows:
        return np.eye(n), 0
    _, sv, vt = np.linalg.svd(np.vstack(rows), full_matrices=True)
    r = int(np.sum(sv > 1e-10 * max(1.0, float(sv.max()))))
    basis: FloatArray = vt.T
    return basis, r


def _quadratic_rows(V: FloatArray, mats: FloatArray) -> FloatArray:
    """``out[g, a] = V[a] @ mats[g] @ V[a]``, by matrix products (BLAS), a few matrices at a
    time: a three-operand einsum loops over every (g, a, b, c) in C without BLAS, minutes for
    the DHC's 1,160-wide types."""
    g, b = mats.shape[0], V.shape[1]
    out = np.empty((g, V.shape[0]))
    step = max(1, (1 << 24) // max(1, V.shape[0] * b))  # (step, a, b) products: 128 MB
    for g0 in range(0, g, step):
        W = np.matmul(V, mats[g0 : g0 + step])  # (step, a, b)
        out[g0 : g0 + step] = np.sum(W * V, axis=2)
    return out

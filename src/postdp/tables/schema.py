"""Schemas: the detailed cells of a table as the product of named attributes.

A :class:`Schema` lists attributes (e.g. the 2020 redistricting persons file: ``hhgq`` (8)
x ``votingage`` (2) x ``hispanic`` (2) x ``cenrace`` (63) = 2,016 cells), each with the
labels of its levels and optional *recodes*: a recode groups an attribute's levels into
disjoint classes (``hhinstlevels`` groups the 8 ``hhgq`` levels into household,
institutional and non-institutional). The detailed cells are the product, the last
attribute varying fastest (C order), as in the Census Bureau's histograms.

A :class:`Marginal` names some attributes or recodes (``"votingage * hispanic * cenrace"``)
and sums out the others: one count for every combination of the named levels. Its matrix is
the Kronecker product of one small factor per attribute (an identity, an all-ones row or a
recode's 0/1 matrix), so it is applied to a batch of histograms attribute by attribute and
never formed at full size. Every cell is in exactly one count of a marginal, so adding or
removing one person changes one count by one: sensitivity 1 (L1 and L2), the accounting of
:mod:`postdp.tables.workload`.

One model for every table: :meth:`Schema.categories` is the category tree of the schema
(root ``total`` over the detailed cells), so a schema table is a :class:`~postdp.tables.Table`
and a marginal is a :class:`~postdp.tables.Query` (:meth:`Query.marginal`); a category tree
such as P1's is the one-attribute case.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["Attribute", "Marginal", "Recode", "Schema"]

#: Separator of the level labels in a detailed cell's code (``household|18+|hispanic|...``).
CELL_SEPARATOR = "|"


@dataclass(frozen=True)
class Recode:
    """Disjoint classes of an attribute's levels, e.g. household / institutional / other.

    Parameters
    ----------
    name : str
    groups : mapping of str to sequence of int
        Label of each class and the attribute's level indices it holds. Classes must not
        share a level; levels in no class are left out of the recode's counts.

    Examples
    --------
    >>> r = Recode("adult", {"no": [0], "yes": [1, 2]})
    >>> r.labels, r.matrix(3).tolist()
    (('no', 'yes'), [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    """

    name: str
    groups: Mapping[str, tuple[int, ...]]

    def __init__(self, name: str, groups: Mapping[str, Sequence[int]]) -> None:
        object.__setattr__(self, "name", str(name))
        object.__setattr__(
            self, "groups", {str(k): tuple(int(i) for i in v) for k, v in groups.items()}
        )
        if not self.groups or any(not g for g in self.groups.values()):
            raise ValidationError(f"recode {self.name!r} needs non-empty classes")
        flat = [i for g in self.groups.values() for i in g]
        if len(flat) != len(set(flat)):
            raise ValidationError(f"recode {self.name!r}: its classes share a level")

    @property
    def labels(self) -> tuple[str, ...]:
        """The class labels, in order."""
        return tuple(self.groups)

    def matrix(self, size: int) -> FloatArray:
        """0/1 matrix (classes x the attribute's levels)."""
        out = np.zeros((len(self.groups), size))
        for row, levels in enumerate(self.groups.values()):
            if min(levels) < 0 or max(levels) >= size:
                raise ValidationError(f"recode {self.name!r}: a level index outside 0..{size - 1}")
            out[row, list(levels)] = 1.0
        return out


@dataclass(frozen=True)
class Attribute:
    """One attribute of a schema: its name, the labels of its levels and its recodes.

    Parameters
    ----------
    name : str
    levels : sequence of str
        Distinct labels, in the order of the attribute's cells (no ``|`` in them).
    recodes : sequence of Recode, optional
        Groupings of the levels that marginals may name instead of the attribute.

    Examples
    --------
    >>> a = Attribute("votingage", ["under 18", "18+"])
    >>> a.size, a.levels[1]
    (2, '18+')
    """

    name: str
    levels: tuple[str, ...]
    recodes: tuple[Recode, ...] = field(default=())

    def __init__(self, name: str, levels: Sequence[str], *, recodes: Sequence[Recode] = ()) -> None:
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "levels", tuple(str(v) for v in levels))
        object.__setattr__(self, "recodes", tuple(recodes))
        if not self.levels or len(set(self.levels)) != len(self.levels):
            raise ValidationError(f"attribute {self.name!r} needs distinct level labels")
        if any(CELL_SEPARATOR in v for v in self.levels):
            raise ValidationError(
                f"attribute {self.name!r}: level labels cannot hold {CELL_SEPARATOR!r}"
            )
        for r in self.recodes:
            r.matrix(self.size)  # checks the level indices

    @property
    def size(self) -> int:
        """Number of levels."""
        return len(self.levels)


@dataclass(frozen=True)
class Schema:
    """Named attributes whose product is a table's detailed cells (last varies fastest).

    Parameters
    ----------
    attributes : sequence of Attribute
        Attribute and recode names must all differ.

    Examples
    --------
    >>> adult = Recode("adult", {"no": [0], "yes": [1, 2]})
    >>> s = Schema([Attribute("sex", ["m", "f"]),
    ...             Attribute("age", ["0-17", "18-64", "65+"], recodes=[adult])])
    >>> s.shape, s.size, s.cells[:2]
    ((2, 3), 6, ('m|0-17', 'm|18-64'))
    >>> s.marginal(["adult"]).apply(np.arange(6.0)).tolist()
    [3.0, 12.0]
    """

    attributes: tuple[Attribute, ...]

    def __init__(self, attributes: Sequence[Attribute]) -> None:
        object.__setattr__(self, "attributes", tuple(attributes))
        if not self.attributes:
            raise ValidationError("a schema needs at least one attribute")
        names = [a.name for a in self.attributes]
        names += [r.name for a in self.attributes for r in a.recodes]
        if len(set(names)) != len(names) or {"total", "detailed"} & set(names):
            raise ValidationError(
                "attribute and recode names must differ from each other and from "
                "'total' and 'detailed'"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        # the attributes alone: the caches (cell codes, category tree, queries) are never
        # shipped; where it lands an equal schema already there is taken, caches and all
        return (_interned, (self.attributes,))

    @classmethod
    def shared(cls, attributes: Sequence[Attribute]) -> Schema:
        """The schema of ``attributes``, one object per distinct schema in this process, so
        that its caches (cell codes, category tree, queries: some 400 MB for the DHC
        persons schema's 1,227,744 cells) are made once however often it is rebuilt, e.g.
        by every read of a run's subtree.

        Parameters
        ----------
        attributes : sequence of Attribute

        Returns
        -------
        Schema
            Equal to ``Schema(attributes)``; the same object for equal attributes.

        Examples
        --------
        >>> a = [Attribute("sex", ["m", "f"])]
        >>> Schema.shared(a) is Schema.shared(list(a)), Schema.shared(a) == Schema(a)
        (True, True)
        """
        return _interned(tuple(attributes))

    @property
    def names(self) -> tuple[str, ...]:
        """The attribute names, in order."""
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Levels per attribute."""
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of detailed cells (the product of the attribute sizes)."""
        return math.prod(self.shape)

    @functools.cached_property
    def cells(self) -> tuple[str, ...]:
        """Code of every detailed cell: its level labels joined by ``|``, in cell order."""
        return tuple(
            CELL_SEPARATOR.join(p) for p in itertools.product(*(a.levels for a in self.attributes))
        )

    @functools.cached_property
    def _cell_codes(self) -> npt.NDArray[np.object_]:
        """:attr:`cells` as an object array (made once: the DHC's has 1.2 million)."""
        out = np.asarray(self.cells, dtype=object)
        out.flags.writeable = False
        return out

    @functools.cached_property
    def _queries(self) -> dict[str, Any]:
        """:meth:`Query.marginal`'s queries of this schema by name, made once each."""
        return {}

    def categories(self, *, rounders: Sequence[Sequence[str] | str] = ()) -> Hierarchy:
        """The category tree of a schema table: root ``total`` over the detailed cells, with
        the counts of nested marginals (``rounders``) as the nodes in between.

        Parameters
        ----------
        rounders : sequence of marginals, optional
            Marginals (as for :meth:`marginal`) that each refine the next coarser one, e.g.
            ``["hhgq", "hhgq * hispanic", "hhgq * hispanic * cenrace"]``. Their counts
            become category nodes named ``"<marginal>=<label>"``, so a rounding of the
            table (:func:`postdp.round`) keeps each within 1 at the root
            and at the leaf geounits, as it does every category node. Marginals that are
            not nested cannot be such a tree and are refused: :func:`rounding_plan` keeps
            the ones that nest and states the bound the rounding gives the others. The
            detailed cells stay the leaves, in cell order, so marginal queries and the
            marginal basis are unchanged.

        Returns
        -------
        Hierarchy

        Examples
        --------
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
        >>> tree = s.categories(rounders=["a"])
        >>> tree.ids.tolist()
        ['total', 'a=0', 'a=1', '0|x', '0|y', '1|x', '1|y']
        """
        if isinstance(rounders, str):
            rounders = [rounders]
        if not rounders:
            return self._categories
        cells = self.cells
        ids: list[str] = ["total"]
        parents: list[str | None] = [None]
        owner = np.full(self.size, "total", dtype=object)  # each cell's finest node so far
        index = {c: i for i, c in enumerate(cells)}
        previous: Marginal | None = None
        seen: set[str] = set()
        for terms in rounders:
            m = self.marginal(terms)
            if m.name in seen:
                raise ValidationError(f"rounder {m.name!r} is given twice")
            seen.add(m.name)
            groups = m.groups()
            if sum(len(g) for g in groups) != self.size:
                raise ValidationError(
                    f"rounder {m.name!r} leaves cells out (a recode that does not cover its "
                    "attribute); rounders must partition the cells"
                )
            if previous is not None and not _refines(m, previous):
                raise ValidationError(
                    f"rounders must be nested, each refining the one before: {m.name!r} does "
                    f"not refine {previous.name!r} (postdp.tables.rounding_plan keeps the ones "
                    "that nest and bounds the others)"
                )
            for label, group in zip(m.labels, groups, strict=True):
                node = f"{m.name}={label}"
                members = [index[c] for c in group]
                ids.append(node)
                parents.append(str(owner[members[0]]))
                owner[members] = node
            previous = m
        ids += list(cells)
        parents += [str(o) for o in owner]
        return Hierarchy.from_parents(ids, parents)  # type: ignore[arg-type]

    @functools.cached_property
    def _categories(self) -> Hierarchy:
        """``total`` over the detailed cells, built from index arrays and made once per
        schema (the DHC's 1,227,744 cells took seconds and a gigabyte through
        :meth:`Hierarchy.from_parents`'s text ids)."""
        ids = np.empty(self.size + 1, dtype=object)
        ids[0] = "total"
        ids[1:] = self.cells
        if len(set(self.cells)) != self.size or "total" in self.cells:
            parents = np.array([None, *["total"] * self.size], dtype=object)
            return Hierarchy.from_parents(ids, parents)  # raises its own error
        parent = np.zeros(self.size + 1, dtype=np.int64)
        parent[0] = -1
        return Hierarchy._trusted(parent, None, ids=ids)

    def marginal(self, terms: Sequence[str] | str) -> Marginal:
        """The marginal over attributes or recodes, e.g. ``["votingage", "cenrace"]`` or
        ``"votingage * cenrace"``; ``"total"`` (or ``[]``) and ``"detailed"`` too."""
        return Marginal(self, terms)

    def _term(self, name: str) -> tuple[int, FloatArray | None, tuple[str, ...]]:
        """(attribute index, factor or None for the identity, labels) of a term."""
        for k, a in enumerate(self.attributes):
            if a.name == name:
                return k, None, a.levels
            for r in a.recodes:
                if r.name == name:
                    return k, r.matrix(a.size), r.labels
        known = ", ".join([*self.names, *(r.name for a in self.attributes for r in a.recodes)])
        raise ValidationError(f"{name!r} is not an attribute or recode of the schema ({known})")


#: The schemas unpickled in this process, by their attributes' names and sizes (a few).
_INTERNED: dict[tuple[tuple[str, int], ...], list[Schema]] = {}


def _interned(attributes: tuple[Attribute, ...]) -> Schema:
    """The schema of ``attributes``: one already unpickled in this process if equal (its
    caches kept: a task's DHC queries are made once per worker, not once per task)."""
    key = tuple((a.name, a.size) for a in attributes)
    seen = _INTERNED.setdefault(key, [])
    for schema in seen:
        if schema.attributes == attributes:
            return schema
    schema = Schema(attributes)
    seen.append(schema)
    return schema


def leaf_codes(categories: Hierarchy) -> tuple[str, ...]:
    """The codes of a category tree's detailed cells, in order (comparable with
    :attr:`Schema.cells`), without a Python call per cell."""
    return tuple(categories.ids[categories.leaves].tolist())  # ids are text


@dataclass(frozen=True)
class Marginal:
    """The counts of a schema's histogram summed over every attribute not named.

    Parameters
    ----------
    schema : Schema
    terms : sequence of str or str
        Attribute or recode names (at most one per attribute), or one string joined with
        ``*``; ``"total"`` and ``"detailed"`` (every attribute) are accepted.

    Notes
    -----
    The counts are ordered as the product of the terms' levels in the schema's attribute
    order, the last varying fastest. Applying the marginal to ``(..., cells)`` costs
    about (batch x cells) per attribute and never forms its matrix.

    Examples
    --------
    >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y", "z"])])
    >>> m = Marginal(s, "b")
    >>> m.name, m.labels, m.apply(np.arange(6.0)).tolist()
    ('b', ('x', 'y', 'z'), [3.0, 5.0, 7.0])
    """

    schema: Schema
    terms: tuple[str, ...]
    factors: tuple[FloatArray | None, ...] = field(repr=False, compare=False)
    kept: tuple[tuple[str, ...] | None, ...] = field(repr=False, compare=False)

    def __init__(self, schema: Schema, terms: Sequence[str] | str) -> None:
        if not isinstance(schema, Schema):
            raise TypeError(f"`schema` must be a Schema; got {type(schema).__name__}")
        words = [t.strip() for t in terms.split("*")] if isinstance(terms, str) else list(terms)
        words = [str(w) for w in words if str(w).strip()]
        if words == ["total"]:
            words = []
        elif words == ["detailed"]:
            words = list(schema.names)
        factors: list[FloatArray | None] = [np.ones((1, n)) for n in schema.shape]
        kept: list[tuple[str, ...] | None] = [None] * len(schema.shape)
        named: dict[int, str] = {}
        for w in words:
            k, factor, labels = schema._term(w)
            if k in named:
                raise ValidationError(
                    f"{w!r} and {named[k]!r} both recode attribute {schema.names[k]!r}; a "
                    "marginal takes one of them"
                )
            named[k] = w
            factors[k], kept[k] = factor, labels
        order = sorted(named)
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "terms", tuple(named[k] for k in order))
        object.__setattr__(self, "factors", tuple(factors))
        object.__setattr__(self, "kept", tuple(kept))

    @property
    def name(self) -> str:
        """``total``, ``detailed`` or the terms joined by `` * `` (the Census spelling)."""
        if not self.terms:
            return "total"
        if self.terms == self.schema.names:
            return "detailed"
        return " * ".join(self.terms)

    @property
    def shape(self) -> tuple[int, ...]:
        """Counts along each attribute (1 where it is summed out)."""
        return tuple(
            n if f is None else f.shape[0]
            for n, f in zip(self.schema.shape, self.factors, strict=True)
        )

    @property
    def size(self) -> int:
        """Counts per geounit."""
        return math.prod(self.shape)

    @property
    def labels(self) -> tuple[str, ...]:
        """Label of every count (the kept levels joined by ``|``; ``total`` for the total)."""
        parts = [labels for labels in self.kept if labels is not None]
        if not parts:
            return ("total",)
        return tuple(CELL_SEPARATOR.join(p) for p in itertools.product(*parts))

    def apply(self, x: FloatArray) -> FloatArray:
        """The marginal of histograms ``x`` of shape (..., cells): shape (..., size)."""
        x = np.asarray(x)
        if x.shape[-1:] != (self.schema.size,):
            raise ValidationError(
                f"histograms must have {self.schema.size} cells on the last axis; got {x.shape}"
            )
        return apply_factors(x, self.schema.shape, self.factors)

    def cell_groups(self) -> IntArray:
        """The count each detailed cell falls in, shape (schema.size,); -1 for a cell no
        count includes (a level outside every class of a recode).

        Examples
        --------
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y", "z"])])
        >>> Marginal(s, "b").cell_groups().tolist()
        [0, 1, 2, 0, 1, 2]
        """
        return self._cell_groups

    def count_matrix(self) -> Any:
        """The 0/1 matrix (counts x detailed cells) as a ``scipy.sparse`` csr_array, made
        from :meth:`cell_groups` once per marginal (one nonzero per counted cell).

        Examples
        --------
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y", "z"])])
        >>> Marginal(s, "a").count_matrix().toarray().tolist()
        [[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]]
        """
        return self._count_matrix

    @functools.cached_property
    def _count_matrix(self) -> Any:
        from scipy import sparse

        group = self.cell_groups()
        kept = group >= 0
        # a column per cell with at most one 1 (its count): built as columns, one byte a 1
        index = np.int32 if max(self.size, self.schema.size) < 2**31 else np.int64
        rows: IntArray = group[kept].astype(index)
        starts: IntArray = np.concatenate([[0], np.cumsum(kept)]).astype(index)
        ones = np.ones(rows.size, dtype=np.int8)
        columns = sparse.csc_array((ones, rows, starts), shape=(self.size, self.schema.size))
        return columns.tocsr()

    @functools.cached_property
    def _cell_groups(self) -> IntArray:
        index = np.zeros(self.schema.shape, dtype=np.int64)
        missing = np.zeros(self.schema.shape, dtype=bool)
        K = len(self.schema.shape)
        for k, (factor, rows) in enumerate(zip(self.factors, self.shape, strict=True)):
            n = self.schema.shape[k]
            if factor is None:
                which = np.arange(n)
            else:
                member = factor.astype(bool)
                which = np.where(member.any(axis=0), np.argmax(member, axis=0), -1)
            axis = [n if i == k else 1 for i in range(K)]
            index = index * rows + np.maximum(which, 0).reshape(axis)
            missing = missing | (which < 0).reshape(axis)
        out: IntArray = np.where(missing, -1, index).ravel()
        out.flags.writeable = False  # made once, shared by every caller
        return out

    def groups(self) -> list[tuple[str, ...]]:
        """Each count's detailed cell codes (for :class:`~postdp.tables.Query`), in C order:
        the rows of the Kronecker product of the attributes' 0/1 membership matrices."""
        from scipy import sparse

        member: Any = sparse.csr_array(np.ones((1, 1), dtype=np.int8))
        for k, factor in enumerate(self.factors):
            n = self.schema.shape[k]
            rows = np.eye(n, dtype=np.int8) if factor is None else (factor != 0).astype(np.int8)
            member = sparse.kron(member, sparse.csr_array(rows), format="csr")
        member.sort_indices()
        cells = tuple(self.schema._cell_codes[member.indices].tolist())
        return [cells[a:b] for a, b in itertools.pairwise(member.indptr.tolist())]


def apply_factors(
    x: FloatArray, shape: tuple[int, ...], factors: Sequence[FloatArray | None]
) -> FloatArray:
    """A Kronecker product of per-attribute factors applied to histograms ``x`` of shape
    (..., prod(shape)), attribute by attribute (None: the attribute kept): shape (...,
    prod of the factors' rows)."""
    lead = x.shape[:-1]
    out = x.reshape(*lead, *shape)
    base = len(lead)
    summed = [
        k for k, f in enumerate(factors) if f is not None and f.shape[0] == 1 and (f == 1).all()
    ]
    if summed:  # the cheap reductions first: the factors below then act on fewer counts
        out = out.sum(axis=tuple(base + k for k in summed), keepdims=True)
    given = {k: f for k, f in enumerate(factors) if f is not None and k not in summed}
    for k, factor in sorted(given.items(), key=lambda kf: kf[1].shape[0] / kf[1].shape[1]):
        out = np.moveaxis(np.tensordot(out, factor, axes=([base + k], [1])), -1, base + k)
    rows = [n if f is None else f.shape[0] for n, f in zip(shape, factors, strict=True)]
    return out.reshape(*lead, math.prod(rows))


def _refines(fine: Marginal, coarse: Marginal) -> bool:
    """Whether every count of ``fine`` adds up cells of a single count of ``coarse``."""
    which = {}
    for k, group in enumerate(coarse.groups()):
        for cell in group:
            which[cell] = k
    return all(len({which.get(c, -1) for c in group}) == 1 for group in fine.groups())

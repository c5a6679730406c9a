"""What a rounding of a schema table promises for each marginal, nested or not.

:func:`postdp.round` rounds the detailed cells of a table so that, at the
root and at every leaf geounit, every node of the table's category tree (the detailed
cells, the total and each rounder count, :meth:`Schema.categories`) moves by less than 1,
and at the other geounits the cells and the total do. Rounder marginals that nest form such
a tree; marginals that cross (``hhgq`` and ``votingage``) cannot share one, and no rounding
can keep every count of crossing marginals within 1 together with the geography in general
(see the notes of :func:`postdp.round`). :func:`rounding_plan` keeps, in the order given,
each rounder that refines the last one kept (a nested chain, within 1) and states for every other
marginal the bound the tree does give.

The bound. A count adds up a set S of detailed cells. Write d(T) for the change of the
cells T's sum. Under a tree node v whose count moves by less than 1, with children u,
d(S within v) = sum_u d(S within u) = d(v) - d(v outside S), so

    B(S, v) = 0 if S misses v; 1 if S covers v; else min(sum_u B(S, u), 1 + sum_u B(v - S, u))

bounds |d(S)| (strictly, when it is at least 1), the cells being the leaves (B = 1 for a
cell in S). At geounits other than the root and the leaves only the cells and the total
are promised, so the same recursion runs on the two-level tree total > cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from postdp._typing import IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables.schema import Marginal, Schema, _refines

__all__ = ["RoundingPlan", "rounding_plan"]


@dataclass(frozen=True)
class RoundingPlan:
    """A category tree for rounding, and what it promises for any marginal.

    Attributes
    ----------
    schema : Schema
    categories : Hierarchy
        The table's category tree: the kept rounders as nested nodes
        (:meth:`Schema.categories`).
    within_one : tuple of str
        The rounders kept in the tree: each of their counts moves by less than 1 at the
        root and the leaf geounits.
    set_aside : tuple of str
        The rounders that do not nest with those kept (or leave cells out): see
        :meth:`bound`.

    Examples
    --------
    >>> from postdp.tables import Attribute, Schema
    >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    >>> plan = rounding_plan(s, ["a", "b"])  # "b" crosses "a"
    >>> plan.within_one, plan.set_aside
    (('a',), ('b',))
    >>> plan.bound("b").tolist()  # each b count adds one cell of a=0 and one of a=1
    [2, 2]
    """

    schema: Schema
    categories: Hierarchy
    within_one: tuple[str, ...]
    set_aside: tuple[str, ...]

    def bound(self, marginal: Sequence[str] | str | Marginal, *, inner: bool = False) -> IntArray:
        """The promised bound on how far each count of ``marginal`` moves in rounding.

        Parameters
        ----------
        marginal : Marginal, or terms as for :meth:`Schema.marginal`
        inner : bool, default False
            False: at the root and the leaf geounits (every tree node within 1). True: at
            the other geounits (only the cells and the total within 1).

        Returns
        -------
        ndarray of int, shape (marginal.size,)
            B per count: |rounded - input| < B where B >= 1, and = 0 where B = 0 (a count
            with no cells). 1 for the total, the cells and the kept rounders.
        """
        m = marginal if isinstance(marginal, Marginal) else self.schema.marginal(marginal)
        if m.schema is not self.schema:
            raise ValidationError("the marginal belongs to another schema")
        groups = m.cell_groups()
        member = np.arange(m.size)[:, None] == groups[None, :]  # (counts, cells)
        tree = self.categories
        if inner:
            ids = ["total", *self.schema.cells]
            tree = Hierarchy.from_parents(ids, [None, *["total"] * self.schema.size])  # type: ignore[arg-type]
        return _tree_bound(tree, member)


def rounding_plan(schema: Schema, rounders: Sequence[Sequence[str] | str]) -> RoundingPlan:
    """Keep the rounders that nest (in the order given) and plan the rounding around them.

    Parameters
    ----------
    schema : Schema
    rounders : sequence of marginals
        As for :meth:`Schema.categories`, in any mix (repeats ignored): a rounder is kept
        when it partitions the cells and refines the last one kept; the others are set
        aside (their counts stay integers and unbiased, within :meth:`RoundingPlan.bound`).

    Returns
    -------
    RoundingPlan

    Examples
    --------
    >>> from postdp.tables import pl94_schema
    >>> plan = rounding_plan(pl94_schema(), ["hhgq", "votingage", "hhgq * votingage"])
    >>> plan.within_one, plan.set_aside
    (('hhgq', 'hhgq * votingage'), ('votingage',))
    >>> int(plan.bound("votingage").max())  # a votingage count spans the 8 hhgq nodes
    8
    """
    kept: list[Marginal] = []
    aside: list[str] = []
    for terms in rounders:
        m = schema.marginal(terms)
        if m.name in aside or any(m.name == k.name for k in kept):
            continue  # given twice: once is enough
        partition = (m.cell_groups() >= 0).all()
        if partition and (not kept or _refines(m, kept[-1])):
            kept.append(m)
        else:
            aside.append(m.name)
    names = tuple(m.name for m in kept)
    return RoundingPlan(
        schema=schema,
        categories=schema.categories(rounders=names),
        within_one=names,
        set_aside=tuple(aside),
    )


def _tree_bound(tree: Hierarchy, member: np.ndarray) -> IntArray:
    """B(S, root) of the module docstring for every row S of ``member`` (over the tree's
    leaves in order), all rows at once, levels bottom up."""
    n = tree.n
    rows = member.shape[0]
    inside = np.zeros((rows, n), dtype=np.int64)  # B(S within v, v)
    outside = np.zeros((rows, n), dtype=np.int64)  # B(v - S, v)
    covered = np.zeros((rows, n), dtype=np.int64)  # cells of v in S
    size = np.zeros(n, dtype=np.int64)  # cells of v
    leaves = tree.leaves
    inside[:, leaves] = member
    outside[:, leaves] = ~member
    covered[:, leaves] = member
    size[leaves] = 1
    for d in range(tree.n_levels - 1, 0, -1):
        nodes = tree.levels[d]
        parents = tree.parent[nodes]
        sum_in = np.zeros((rows, n), dtype=np.int64)
        sum_out = np.zeros((rows, n), dtype=np.int64)
        np.add.at(sum_in.T, parents, inside[:, nodes].T)
        np.add.at(sum_out.T, parents, outside[:, nodes].T)
        np.add.at(covered.T, parents, covered[:, nodes].T)
        np.add.at(size, parents, size[nodes])
        up = np.unique(parents)
        full = covered[:, up] == size[up]
        empty = covered[:, up] == 0
        mixed_in = np.minimum(sum_in[:, up], 1 + sum_out[:, up])
        mixed_out = np.minimum(sum_out[:, up], 1 + sum_in[:, up])
        inside[:, up] = np.where(empty, 0, np.where(full, 1, mixed_in))
        outside[:, up] = np.where(full, 0, np.where(empty, 1, mixed_out))
    out: IntArray = inside[:, int(tree.root)]
    return out

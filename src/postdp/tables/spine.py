"""The first stage of the Census Bureau's optimised spine: block groups regrouped inside
their tracts (``shared/research/pl94-2020-design.md`` section 1.5).

The 2020 production run did not release over the tabulation block groups: inside each tract
of n blocks it formed its own groups of at most floor(sqrt(n)) + 12 blocks (``fanout_cutoff``
= 12), chosen greedily so that the groups cut as few off-spine entities (places, minor civil
divisions, and per tract the blocks holding each combination of group-quarters types) as
possible. Here the off-spine entities are what the caller gives (one label per block); blocks
with one label are kept together and cut into near-equal consecutive groups (in the table's
block order) of at most the cap, so no group straddles two labels. Without labels a tract's
blocks are cut into the fewest near-equal consecutive groups within the cap.

The AIAN branches (:func:`aian_branches`): the production spine split each state into the
part inside the American Indian and Alaska Native areas it listed (``aian_areas``) and the
part outside, and every county, tract and block group below into its parts in each branch
(``define_spines.py``, ``make_grfc_ids``). The state's total stayed invariant, not each
part's (``manipulate_nodes.py``, ``makeChildGroups``): here the state stays a geounit, with
its invariant total, and the branches are a level of their own below it.

The second stage (a parent with a single child bypassed) is in :mod:`postdp.tables.bypass`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from postdp._typing import ArrayLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables._table import Table

__all__ = ["FANOUT_CUTOFF", "aian_branches", "optimised_block_groups"]

#: The production ``fanout_cutoff``: a block group holds at most floor(sqrt(n)) + 12 blocks.
FANOUT_CUTOFF = 12


def optimised_block_groups(
    table: Table, *, fanout_cutoff: int = FANOUT_CUTOFF, offspine: ArrayLike | None = None
) -> Table:
    """The table over regrouped block groups: the level above the leaves replaced, inside
    each of its parents (the tracts), by groups of at most floor(sqrt(n)) + ``fanout_cutoff``
    of the parent's n leaves.

    Parameters
    ----------
    table : Table
        Leaves (blocks) all at the deepest level, at least three levels.
    fanout_cutoff : int, default 12
    offspine : array_like, shape (n_leaf_geounits,), optional
        One label per leaf (in ``geography.leaves`` order), e.g. its place: a group never
        holds leaves of two labels.

    Returns
    -------
    Table
        The same leaves (ids, cells, order) and every geounit above the regrouped level;
        new groups named ``<parent id>g<k>``.

    Raises
    ------
    ValidationError
        For leaves at different depths, a geography of fewer than three levels, a negative
        cutoff or labels of the wrong length.

    Examples
    --------
    >>> ids = ["T"] + [f"G{k}" for k in range(2)] + [f"b{k}" for k in range(40)]
    >>> parents = [None, "T", "T"] + ["G0"] * 39 + ["G1"]
    >>> t = Table(Hierarchy.from_parents(ids, parents),
    ...           Hierarchy.from_parents(["all"], [None]), np.ones((40, 1), dtype=int))
    >>> new = optimised_block_groups(t)          # 40 blocks: groups of at most 6 + 12
    >>> [int((new.geography.parent == g).sum()) for g in new.geography.levels[1]]
    [14, 13, 13]
    """
    geo = table.geography
    if int(fanout_cutoff) != fanout_cutoff or fanout_cutoff < 0:
        raise ValidationError(f"`fanout_cutoff` must be an integer >= 0; got {fanout_cutoff!r}")
    leaves = geo.leaves
    deepest = geo.n_levels - 1
    if geo.n_levels < 3 or (geo.depth[leaves] != deepest).any():
        raise ValidationError(
            "regrouping block groups needs every leaf at the deepest of at least 3 levels"
        )
    labels = (
        np.zeros(leaves.size, dtype=np.int64)
        if offspine is None
        else pd.factorize(np.asarray(offspine, dtype=object))[0]
    )
    if labels.shape != (leaves.size,):
        raise ValidationError(f"`offspine` must give one label per leaf ({leaves.size})")
    tract_of = geo.parent[geo.parent[leaves]]
    ids = geo.ids.astype(str)
    keep = np.flatnonzero(geo.depth < deepest - 1)
    new_ids = list(ids[keep])
    new_parents: list[str | None] = [
        None if geo.parent[i] < 0 else ids[geo.parent[i]] for i in keep
    ]
    group_of = np.empty(leaves.size, dtype=object)
    order = np.lexsort((np.arange(leaves.size), labels, tract_of))
    for tract in np.unique(tract_of):
        mine = order[tract_of[order] == tract]
        cap = math.isqrt(mine.size) + int(fanout_cutoff)
        k = 0
        for label in pd.unique(labels[mine]):
            run = mine[labels[mine] == label]
            for piece in np.array_split(run, math.ceil(run.size / cap)):
                name = f"{ids[tract]}g{k}"
                new_ids.append(name)
                new_parents.append(str(ids[tract]))
                group_of[piece] = name
                k += 1
    new_ids += list(ids[leaves])
    new_parents += list(group_of)
    if len(set(new_ids)) != len(new_ids):
        raise ValidationError("a regrouped block group's id collides with an existing id")
    return replace(
        table, geography=Hierarchy.from_parents(new_ids, np.asarray(new_parents, dtype=object))
    )


def aian_branches(table: Table, *, aian: ArrayLike, level: int = 1) -> Table:
    """The table over the AIAN spine: below each geounit of ``level`` (the states), a level
    of branches (its AIAN part and its other part), and every geounit further down split
    into its parts in each branch.

    Parameters
    ----------
    table : Table
        Every leaf deeper than ``level``.
    aian : array_like of bool, shape (n_leaf_geounits,)
        Whether each leaf (block, in ``geography.leaves`` order) is in an AIAN area of the
        spine (the production listed the federal and state legal areas, joint-use areas,
        Hawaiian Home Lands, OTSAs and ANVSAs, not TDSAs or SDTSAs).
    level : int, default 1
        The level whose geounits are split into branches.

    Returns
    -------
    Table
        One level more. Geounits down to ``level`` keep their ids; a branch and every part
        below it are named by the branch's flag (``1`` AIAN, ``0`` not) and the geounit's id,
        as the production's geocodes were (``"101"``, ``"001"``, ``"101001"``); the leaves
        keep their ids and cells, in a possibly different order. A geounit with no AIAN leaf
        has one branch, its ``0`` part.

    Raises
    ------
    ValidationError
        For a level that is not above every leaf, or flags of the wrong length.

    Examples
    --------
    >>> ids = ["US", "01", "01001", "b1", "b2", "b3"]
    >>> geo = Hierarchy.from_parents(ids, [None, "US", "01", "01001", "01001", "01001"])
    >>> t = Table(geo, Hierarchy.from_parents(["all"], [None]), [[4], [5], [6]])
    >>> new = aian_branches(t, aian=[True, False, False])
    >>> [list(new.geography.ids[new.geography.levels[d]]) for d in (2, 3)]
    [['001', '101'], ['001001', '101001']]
    >>> new.geography.n_levels, new.counts()[new.geography.index(["101001", "01"]), 0].tolist()
    (5, [4, 15])
    """
    geo = table.geography
    if int(level) != level or not 0 <= level < geo.n_levels - 1:
        raise ValidationError(
            f"`level` must be a level above the leaves (0 to {geo.n_levels - 2}); got {level!r}"
        )
    leaves = geo.leaves
    if (geo.depth[leaves] <= level).any():
        raise ValidationError(f"every leaf must be deeper than `level` ({level})")
    flag = np.asarray(aian)
    if flag.shape != (leaves.size,) or flag.dtype.kind not in "bi":
        raise ValidationError(f"`aian` must give one flag (bool) per leaf ({leaves.size})")
    flag = flag.astype(bool)
    mask = np.zeros(geo.n, dtype=np.int64)  # bit 0: a leaf off the AIAN areas below, bit 1: on
    mask[leaves] = np.where(flag, 2, 1)
    for d in range(geo.n_levels - 1, level, -1):
        nodes = geo.levels[d]
        np.bitwise_or.at(mask, geo.parent[nodes], mask[nodes])
    ids = geo.ids.astype(str)
    new_ids: list[str] = []
    new_parents: list[str | None] = []
    depth = geo.depth  # a property computed on each access: taken once
    for i in np.flatnonzero(depth <= level):
        new_ids.append(str(ids[i]))
        new_parents.append(None if geo.parent[i] < 0 else str(ids[geo.parent[i]]))
    inner = np.flatnonzero(depth >= level)
    inner = inner[np.isin(inner, leaves, invert=True)]
    for i in inner:
        for bit, code in ((1, "0"), (2, "1")):
            if mask[i] & bit:
                new_ids.append(code + str(ids[i]))
                up = geo.parent[i]
                new_parents.append(str(ids[i]) if depth[i] == level else code + str(ids[up]))
    codes = np.where(flag, "1", "0").astype(object)
    new_ids += list(ids[leaves])
    new_parents += list(codes + ids[geo.parent[leaves]].astype(object))
    if len(set(new_ids)) != len(new_ids):
        raise ValidationError("a branch's id collides with an existing id")
    branched = Hierarchy.from_parents(new_ids, np.asarray(new_parents, dtype=object))
    old_row = pd.Index(ids[leaves]).get_indexer(branched.ids[branched.leaves].astype(str))
    cells = table.cells[old_row]
    return replace(table, geography=branched, cells=cells)

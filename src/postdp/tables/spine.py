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

The second stage of the production spine (a parent with a single child bypassed, its budget
moved to the child) changes the budget per geounit, which a level-by-level workload does not
express; it is not done here.
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

__all__ = ["FANOUT_CUTOFF", "optimised_block_groups"]

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

"""The optimised spine's first stage (issue 25; ``shared/research/pl94-2020-design.md``
section 1.5): block groups regrouped inside their tracts to at most floor(sqrt(n)) + 12
blocks; the same blocks, cells and totals; off-spine labels never split across a group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from postdp.data import synthetic_population
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Table, optimised_block_groups


def _check(old, new, cutoff=12):
    g_old, g_new = old.geography, new.geography
    assert g_new.n_levels == g_old.n_levels
    np.testing.assert_array_equal(g_new.ids[g_new.leaves], g_old.ids[g_old.leaves])
    assert (new.cells != old.cells).nnz == 0 if old.is_sparse else (new.cells == old.cells).all()
    # every level above the regrouped one is unchanged, with the same totals
    above = g_old.depth < g_old.n_levels - 2
    pos = {str(i): k for k, i in enumerate(g_new.ids)}
    same = [pos[str(i)] for i in g_old.ids[above]]
    np.testing.assert_array_equal(new.counts()[same], old.counts()[above])
    tracts = g_new.levels[g_new.n_levels - 3]
    groups = g_new.levels[g_new.n_levels - 2]
    for tract in tracts:
        mine = groups[g_new.parent[groups] == tract]
        n = sum(int((g_new.parent == g).sum()) for g in mine)
        sizes = [int((g_new.parent == g).sum()) for g in mine]
        assert max(sizes) <= math.isqrt(n) + cutoff
    return g_new


def test_a_synthetic_state_regrouped_within_the_cap():
    old = synthetic_population(["11"], seed=3)
    new = optimised_block_groups(old)
    g = _check(old, new)
    # about as many groups as the cap forces: each tract's blocks in ceil(n / cap) groups
    tracts = g.levels[3]
    expected = 0
    for tract in tracts:
        n = int(sum((g.parent == b).sum() for b in g.levels[4][g.parent[g.levels[4]] == tract]))
        expected += math.ceil(n / (math.isqrt(n) + 12))
    assert g.levels[4].size == expected


def test_off_spine_labels_are_never_split_across_a_group():
    rng = np.random.default_rng(0)
    ids = ["S", "T1", "T2", "G1", "G2", "G3"] + [f"b{k}" for k in range(90)]
    parents = [None, "S", "S", "T1", "T1", "T2"] + ["G1"] * 30 + ["G2"] * 20 + ["G3"] * 40
    geo = Hierarchy.from_parents(ids, parents)
    cat = Hierarchy.from_parents(["all", "x", "y"], [None, "all", "all"])
    old = Table(geo, cat, rng.integers(0, 5, (90, 2)))
    places = rng.choice(["p1", "p2", "p3"], 90)
    new = optimised_block_groups(old, offspine=places, fanout_cutoff=2)
    g = _check(old, new, cutoff=2)
    leaf_place = dict(zip(g.ids[g.leaves], places, strict=True))
    for group in g.levels[2]:
        kids = g.ids[g.parent == group]
        assert len({leaf_place[k] for k in kids}) == 1
    with pytest.raises(ValidationError, match="one label per leaf"):
        optimised_block_groups(old, offspine=places[:-1])
    with pytest.raises(ValidationError, match="fanout_cutoff"):
        optimised_block_groups(old, fanout_cutoff=-1)
    shallow = Table(Hierarchy.from_parents(["S", "a"], [None, "S"]), cat, [[1, 2]])
    with pytest.raises(ValidationError, match="at least 3 levels"):
        optimised_block_groups(shallow)

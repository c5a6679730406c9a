"""The optimised spine's first stage (issue 25; ``shared/research/pl94-2020-design.md``
section 1.5): block groups regrouped inside their tracts to at most floor(sqrt(n)) + 12
blocks; the same blocks, cells and totals; off-spine labels never split across a group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import synthetic_population
from postdp.tables import Table, aian_branches, optimised_block_groups


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
    old = synthetic_population(["11"], seed=3, scale=0.1)  # a tenth of DC: 1,682 blocks
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


def test_aian_branches_split_every_geounit_below_the_states_into_its_parts():
    """The AIAN spine (``pl94-2020-design.md`` section 1.5; ``define_spines.py``): a level of
    branches below each state, every county, tract and block group split into its parts in
    each branch; the blocks, their cells and every total above the branches unchanged."""
    old = synthetic_population(["10", "11"], seed=2, scale=0.2)
    geo = old.geography
    rng = np.random.default_rng(4)
    tract = geo.parent[geo.parent[geo.leaves]]
    state = geo.ids[geo.parent[geo.parent[tract]]]
    picked = rng.choice(np.unique(tract[state == "10"]), 6, replace=False)
    flags = np.isin(tract, picked) | (rng.random(geo.leaves.size) < 0.01) & (state == "10")
    new = aian_branches(old, aian=flags)
    g = new.geography
    assert g.n_levels == geo.n_levels + 1
    # the blocks and their cells, reordered by id
    pos = {str(b): k for k, b in enumerate(geo.ids[geo.leaves])}
    back = np.array([pos[str(b)] for b in g.ids[g.leaves]])
    assert sorted(back.tolist()) == list(range(geo.leaves.size))
    assert (new.cells != old.cells[back]).nnz == 0
    # the levels above the branches keep their ids and totals
    t_new, t_old = _totals(new), _totals(old)
    for d in range(2):
        np.testing.assert_array_equal(
            t_new[g.index(list(geo.ids[geo.levels[d]]))], t_old[geo.levels[d]]
        )
    # branches: 010 and 110 for Delaware, only 011 for the District
    assert sorted(g.ids[g.levels[2]].tolist()) == ["010", "011", "110"]
    flag_of = dict(zip(geo.ids[geo.leaves], flags, strict=True))
    old_pos = {str(i): k for k, i in enumerate(geo.ids)}
    for d in range(2, g.n_levels - 1):
        for node in rng.permutation(g.levels[d])[:12]:
            name = str(g.ids[node])
            kids = np.flatnonzero(g.parent == node)
            if d < g.n_levels - 2:  # the parts below carry the branch's flag
                assert all(str(k).startswith(name[0]) for k in g.ids[kids])
            # a part holds exactly its geounit's blocks in its branch
            below = g.leaves[np.isin(g.leaves, _descendants(g, node))]
            assert {bool(flag_of[b]) for b in g.ids[below]} == {name[0] == "1"}
            whole = old_pos[name[1:]]
            mine = set(geo.ids[geo.leaves[np.isin(geo.leaves, _descendants(geo, whole))]])
            assert set(g.ids[below]) == {b for b in mine if bool(flag_of[b]) == (name[0] == "1")}
    # the parts of a geounit add up to it
    assert t_new[g.index(["010", "110"])].sum() == t_old[geo.index(["10"])][0]
    assert t_new[g.index(["110"])][0] == old.cells[np.flatnonzero(flags)].sum()


def _totals(table):
    geo = table.geography
    out = np.zeros(geo.n, dtype=np.int64)
    out[geo.leaves] = np.asarray(table.cells.sum(axis=1)).ravel()
    for d in range(geo.n_levels - 1, 0, -1):
        np.add.at(out, geo.parent[geo.levels[d]], out[geo.levels[d]])
    return out


def _descendants(geo, node):
    out, frontier = [], [node]
    while frontier:
        kids = np.flatnonzero(np.isin(geo.parent, frontier))
        out.extend(kids.tolist())
        frontier = kids.tolist()
    return np.array(out, dtype=np.int64)


def test_aian_branches_refuse_bad_flags_and_levels():
    t = synthetic_population(["11"], seed=0, scale=0.05)
    n = t.geography.leaves.size
    with pytest.raises(ValidationError, match="one flag"):
        aian_branches(t, aian=np.zeros(n - 1, dtype=bool))
    with pytest.raises(ValidationError, match="one flag"):
        aian_branches(t, aian=np.full(n, 0.5))
    with pytest.raises(ValidationError, match="`level`"):
        aian_branches(t, aian=np.zeros(n, dtype=bool), level=5)
    no_aian = aian_branches(t, aian=np.zeros(n, dtype=bool))  # one branch, the 0 part
    assert no_aian.geography.ids[no_aian.geography.levels[2]].tolist() == ["011"]

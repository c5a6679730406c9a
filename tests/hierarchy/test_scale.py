"""Hierarchies built on integers: shuffled node orders, code columns, deferred ids, memory."""

import pickle

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.data import synthetic_hierarchy
from postdp.errors import HierarchyError


def _reference_levels(parent):
    """Depth by walking up from every node (the plain definition)."""
    depth = np.zeros(parent.size, dtype=int)
    for i in range(parent.size):
        j = i
        while parent[j] >= 0:
            j = parent[j]
            depth[i] += 1
    return depth


@pytest.mark.parametrize("seed", range(4))
def test_any_node_order_gives_the_same_tree(seed):
    rng = np.random.default_rng(seed)
    h = synthetic_hierarchy((3, 4, 3), rng=seed)
    perm = rng.permutation(h.n)
    inverse = np.argsort(perm)
    parent = np.where(h.parent[perm] >= 0, inverse[np.maximum(h.parent[perm], 0)], -1)
    shuffled = Hierarchy(h.ids[perm], parent, h.counts[perm])
    assert not shuffled.layout.identity and h.layout.identity
    np.testing.assert_array_equal(shuffled.depth, _reference_levels(parent))
    for d, level in enumerate(shuffled.levels):
        np.testing.assert_array_equal(level, np.flatnonzero(shuffled.depth == d))
    lay = shuffled.layout
    np.testing.assert_array_equal(lay.order[lay.position], np.arange(h.n))
    laid = shuffled.counts[lay.order]
    assert lay.family_gaps(laid.astype(float)).max() == 0
    # the layout's families are the real families: every child sits under its parent
    for d in range(len(lay.starts)):
        c0 = lay.bounds[d + 1]
        kids = lay.order[c0 + np.arange(lay.sizes[d].sum())]
        np.testing.assert_array_equal(parent[kids], lay.order[lay.parents[d][lay.family(d)]])


def test_counts_that_do_not_add_up_are_found_in_any_order():
    h = synthetic_hierarchy((2, 3), jitter=False, rng=1)
    counts = h.counts.copy()
    counts[4] += 1  # a county off by one
    perm = np.random.default_rng(0).permutation(h.n)
    inverse = np.argsort(perm)
    parent = np.where(h.parent[perm] >= 0, inverse[np.maximum(h.parent[perm], 0)], -1)
    with pytest.raises(HierarchyError, match=r"differ at '1\.0' \(at '1\.0' by") as caught:
        Hierarchy(h.ids[perm], parent, counts[perm])
    assert str(int(counts[4])) not in str(caught.value)


def test_a_self_loop_in_breadth_first_order_is_a_cycle():
    with pytest.raises(HierarchyError, match="cycle"):
        Hierarchy(["r", "a", "b"], [-1, 0, 2])


def _census_like(rng, rows):
    state = np.sort(rng.integers(1, 6, rows))
    county = rng.integers(1, 30, rows)
    df = pd.DataFrame({"STATE": state, "COUNTY": county})
    df = df.sort_values(["STATE", "COUNTY"], kind="stable").reset_index(drop=True)
    df["BLOCK"] = df.groupby(["STATE", "COUNTY"]).cumcount() + rng.integers(1, 3)
    df["pop"] = rng.integers(0, 40, rows)
    return df


def _codes_by_hand(df, widths, root="US"):
    """The tree from_codes should build, made with dictionaries (the plain definition)."""
    text = [
        df[c].astype(str).str.zfill(w)
        for c, w in zip(["STATE", "COUNTY", "BLOCK"], widths, strict=True)
    ]
    totals, parents = {root: 0}, {root: None}
    for i in range(len(df)):
        path = ""
        for k in range(3):
            node = path + text[k].iloc[i]
            parents.setdefault(node, path or root)
            totals[node] = totals.get(node, 0) + int(df["pop"].iloc[i])
            path = node
        totals[root] += int(df["pop"].iloc[i])
    return totals, parents


@pytest.mark.parametrize("shuffle", [False, True])
def test_from_codes_matches_a_tree_made_by_hand(shuffle):
    rng = np.random.default_rng(3)
    df = _census_like(rng, 300)
    if shuffle:
        df = df.sample(frac=1.0, random_state=1)
    h = Hierarchy.from_codes(df, ["STATE", "COUNTY", "BLOCK"], count="pop", widths=[2, 3, 4])
    totals, parents = _codes_by_hand(df, [2, 3, 4])
    assert h.layout.identity  # breadth-first, families together, whatever the row order
    ids = list(h.ids)
    assert sorted(ids) == sorted(totals)
    assert dict(zip(ids, h.counts.tolist(), strict=True)) == totals
    got_parents = {i: (None if p < 0 else ids[p]) for i, p in zip(ids, h.parent, strict=True)}
    assert got_parents == parents
    for level in h.levels[1:]:  # siblings in code order
        names = [ids[j] for j in level]
        assert names == sorted(names, key=lambda s: (ids[h.parent[ids.index(s)]], len(s), s))


def test_from_codes_reads_one_code_written_two_ways_as_one():
    df = pd.DataFrame({"S": ["1", "01", "2"], "C": [1, 2, 1], "pop": [1, 2, 3]})
    h = Hierarchy.from_codes(df, ["S", "C"], count="pop", widths=[2, 3])
    assert list(h.ids) == ["US", "01", "02", "01001", "01002", "02001"]
    assert h.counts.tolist() == [6, 3, 3, 1, 2, 3]


def test_from_codes_checks_ids_across_levels_when_lengths_meet():
    df = pd.DataFrame({"S": ["1", "11"], "C": ["1", "0"], "pop": [1, 1]})
    with pytest.raises(HierarchyError, match="duplicate ids: '11'"):
        Hierarchy.from_codes(df, ["S", "C"], count="pop")  # "1"+"1" is also state "11"
    df = pd.DataFrame({"S": ["US", "01"], "C": ["1", "2"], "pop": [1, 1]})
    with pytest.raises(HierarchyError, match="duplicate ids: 'US'"):
        Hierarchy.from_codes(df, ["S", "C"], count="pop")
    dup = pd.DataFrame({"S": [1, 1, 2], "C": [5, 5, 5], "pop": [1, 1, 1]})
    with pytest.raises(HierarchyError, match="duplicate leaf codes: '01005'"):
        Hierarchy.from_codes(dup, ["S", "C"], count="pop", widths=[2, 3])


def test_synthetic_ids_are_made_on_demand_and_survive_pickling():
    h = synthetic_hierarchy((3, 2), jitter=False, rng=0)
    assert h._ids is None
    copy = pickle.loads(pickle.dumps(h))
    assert list(copy.ids) == ["0", "1.0", "1.1", "1.2", *[f"2.{i}" for i in range(6)]]
    assert list(h.ids) == list(copy.ids) and h._ids is not None
    np.testing.assert_array_equal(copy.counts, h.counts)
    with pytest.raises(AttributeError, match="immutable"):
        h.counts = None


def test_resident_memory_per_node_beyond_the_ids():
    """Stated in the Hierarchy docstring: 24 bytes per node in breadth-first order."""
    h = synthetic_hierarchy((20, 30, 10), rng=0)
    arrays = {id(a): a for a in (h.parent, h.counts, h.layout.order, h.layout.position)}
    bases = [x if x.base is None else x.base for x in h.levels]
    arrays.update({id(b): b for b in bases})
    owned = sum(a.nbytes for a in arrays.values() if a.base is None)
    per_family = sum(
        x.nbytes for t in (h.layout.starts, h.layout.parents, h.layout.sizes) for x in t
    )
    assert (owned + per_family) / h.n < 40
    assert owned / h.n == 24

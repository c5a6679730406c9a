"""Rounding a table subtree by subtree (postdp.postprocess.round_by_subtree): the contract of
postdp.round (consistent integers, each cell and total within 1, unbiased), one subtree's
values at a time."""

from __future__ import annotations

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.data import synthetic_table
from postdp.errors import ValidationError
from postdp.postprocess import round_by_subtree
from postdp.tables import Table


def _real(seed: int = 0):
    """A P1-shaped table (63 cells) cut at the states, with real consistent values: each
    leaf's counts plus fractions, the parents their sums."""
    table = synthetic_table((3, 2, 3), leaf_mean=6.0, rng=seed)
    gen = np.random.default_rng(seed)
    leaves = table.dense_cells() + gen.random(table.cells.shape) * (
        gen.random(table.cells.shape) < 0.4
    )
    geo = table.geography
    full = np.zeros((leaves.shape[1], geo.n))
    full[:, geo.leaves] = leaves.T
    values = geo.aggregate(full).T
    top, subs = table.split_at(1)
    index = {str(i): n for n, i in enumerate(geo.ids)}

    def rows(t):
        return values[[index[str(i)] for i in t.geography.ids]]

    return top, subs, rows(top), [rows(s) for s in subs]


def test_rounded_subtrees_are_consistent_integers_within_one():
    top, subs, top_values, sub_values = _real()
    calls = []

    def subtree(k):
        calls.append(k)
        return subs[k], sub_values[k]

    parts = list(round_by_subtree(top_values, top, subtree, rng=1))
    assert calls == [0, 1, 2, 0, 1, 2]  # twice each: the part, then the result
    *states, nation = parts
    for s, got, real in zip(subs, states, sub_values, strict=True):
        geo = s.geography
        assert got.dtype == np.int64 and got.shape == real.shape
        assert np.all(np.abs(got - real) < 1)  # every detailed cell of every geounit
        totals = got.sum(axis=1) - real.sum(axis=1)
        assert np.all(np.abs(totals) < 1)
        for node in range(geo.n):  # every parent the sum of its children
            kids = np.flatnonzero(geo.parent == node)
            if kids.size:
                assert np.array_equal(got[node], got[kids].sum(axis=0))
    g = top.geography
    assert np.array_equal(nation[g.leaves], np.array([s[0] for s in states]))
    assert np.array_equal(nation[g.root], nation[g.leaves].sum(axis=0))
    assert np.all(np.abs(nation - top_values) < 1)


@pytest.mark.statistical
def test_round_by_subtree_is_unbiased():
    """Mean over 300 seeds of every leaf cell within z = 4 of its input, the standard error
    the sample's; a cell that never moved must be one whose run of equal draws has
    probability 1e-6 or more if unbiased ((1 - f)^300 or f^300, f its fractional part)."""
    top, subs, top_values, sub_values = _real(0)
    assert len(subs) >= 3
    n = 300
    draws = []
    for seed in range(n):
        parts = list(
            round_by_subtree(top_values, top, lambda k: (subs[k], sub_values[k]), rng=seed)
        )
        draws.append(
            np.concatenate([p[s.geography.leaves] for p, s in zip(parts[:-1], subs, strict=True)])
        )
    draws = np.asarray(draws, dtype=np.float64)
    real = np.concatenate([v[s.geography.leaves] for v, s in zip(sub_values, subs, strict=True)])
    mean, sd = draws.mean(axis=0), draws.std(axis=0, ddof=1)
    moving = sd > 0
    assert moving.sum() > 20
    assert np.all(np.abs(mean - real)[moving] <= 4 * sd[moving] / np.sqrt(n))
    f = real - np.floor(real)
    still = ~moving
    stayed_down = draws[0][still] == np.floor(real[still])
    chance = np.where(stayed_down, (1 - f[still]) ** n, f[still] ** n)
    assert np.all((f[still] == 0) | (chance >= 1e-6))


def test_round_by_subtree_refuses_what_it_cannot_round():
    top, subs, top_values, sub_values = _real()
    bad = top_values.copy()
    bad[0, 0] += 0.5
    with pytest.raises(ValidationError, match="sum of its children"):
        round_by_subtree(bad, top, lambda k: (subs[k], sub_values[k]))
    shifted = [v + 0 for v in sub_values]
    shifted[1] = shifted[1].copy()
    shifted[1][0, 0] += 0.5
    with pytest.raises(ValidationError, match="root's values differ"):
        list(round_by_subtree(top_values, top, lambda k: (subs[k], shifted[k])))
    from postdp.tables import pl94_schema

    s = pl94_schema()
    geo = Hierarchy.from_parents(["US", "a", "b"], [None, "US", "US"])
    wide = Table(geo, s.categories(), np.zeros((2, s.size), dtype=int))
    with pytest.raises(ValidationError, match="fractional cells"):
        round_by_subtree(np.zeros((3, s.size)), wide, lambda k: None)

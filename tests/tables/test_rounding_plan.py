"""What rounding promises for crossing marginals (issue 23): ``rounding_plan`` keeps the
rounders that nest (within 1) and bounds every other marginal's counts by the recursion of
``postdp/tables/rounding_plan.py``; the bound is checked by hand and held by every one of
many roundings of released schema tables, at the root and leaves and at inner geounits."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy
from postdp.tables import (
    Attribute,
    Measurement,
    Query,
    Recode,
    Schema,
    Table,
    Workload,
    measure,
    rounding_plan,
)
from tests.tables._reference import random_schema, random_terms, random_tree

SCHEMA = Schema(
    [
        Attribute("g", ["h", "i", "n"], recodes=[Recode("inst", {"H": [0], "I": [1, 2]})]),
        Attribute("v", ["u18", "18+"]),
        Attribute("r", ["a", "b", "c"]),
    ]
)


def test_hand_computed_bounds():
    """Two attributes of two levels (cells 0|x, 0|y, 1|x, 1|y). With rounder "a" kept, a
    count of "b" takes one cell under a=0 and one under a=1: each part moves by less than
    1 (min(1, 1 + 1)), so the count by less than 2 = min(1 + 1, 1 + 2). With the flat tree
    of the inner geounits: min(2, 1 + 2) = 2 too; three cells of four: min(3, 1 + 1) = 2."""
    s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    plan = rounding_plan(s, ["a", "b", "detailed"])
    assert plan.within_one == ("a", "detailed") and plan.set_aside == ("b",)
    assert plan.bound("b").tolist() == [2, 2]
    assert plan.bound("b", inner=True).tolist() == [2, 2]
    assert plan.bound("a").tolist() == [1, 1] and plan.bound("total").tolist() == [1]
    assert plan.bound("a", inner=True).tolist() == [2, 2]  # a is not a node there
    assert plan.bound("detailed").tolist() == [1, 1, 1, 1]
    three = Schema([Attribute("a", ["0", "1", "2", "3"], recodes=[Recode("t", {"T": [0, 1, 2]})])])
    flat = rounding_plan(three, [])
    assert flat.set_aside == () and flat.bound("t").tolist() == [2]


def test_a_recode_that_leaves_cells_out_is_set_aside():
    plan = rounding_plan(SCHEMA, ["inst", "g", "v"])
    assert plan.within_one == ("inst", "g") and plan.set_aside == ("v",)
    assert plan.bound("inst").tolist() == [1, 1]
    partial = Schema([Attribute("a", ["x", "y", "z"], recodes=[Recode("p", {"P": [0, 1]})])])
    plan = rounding_plan(partial, ["p", "a"])
    assert plan.within_one == ("detailed",) and plan.set_aside == ("p",)  # "a" is every cell
    assert plan.bound("p").tolist() == [2]  # two cells of three: min(2, 1 + 1)


def _released(seed, rounders):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=36) if seed else SCHEMA
    rounders = rounders or [random_terms(rng, schema) for _ in range(3)]
    plan = rounding_plan(schema, rounders)
    geo = random_tree(rng, int(rng.integers(3, 7)), "g")
    table = Table(geo, plan.categories, rng.integers(0, 4, (geo.leaves.size, schema.size)))
    items = [Measurement(0, Query.marginal(schema, "total"), None)]
    for d in range(geo.n_levels):
        for name in ("detailed", schema.marginal(random_terms(rng, schema)).name):
            if name != "total":
                items.append(Measurement(d, Query.marginal(schema, name), Gaussian(rho=0.2)))
    items = list({(m.level, m.query.name): m for m in items}.values())
    draws = measure(table, Workload(items), secure=False, rng=seed)
    return plan, table, postdp.project(draws, nonneg=True)


@pytest.mark.parametrize(
    ("seed", "rounders"),
    [(0, ["inst", "v", "g * v", "r"]), *((s, None) for s in range(1, 9))],
)
def test_every_rounding_keeps_the_promised_bounds(seed, rounders):
    plan, table, cells = _released(seed, rounders)
    geo, schema = table.geography, plan.schema
    rng = np.random.default_rng(seed)
    marginals = [*plan.within_one, *plan.set_aside, "total", "detailed"]
    marginals += [schema.marginal(random_terms(rng, schema)).name for _ in range(3)]
    draws = np.stack([postdp.round(cells, table, rng=k) for k in range(150)])
    outer = [int(geo.root), *geo.leaves.tolist()]
    inner = [g for g in range(geo.n) if g not in outer]
    for name in dict.fromkeys(marginals):
        m = schema.marginal(name)
        moved = np.abs(m.apply(draws.astype(float)) - m.apply(cells))  # (R, geounits, counts)
        for where, bound in ((outer, plan.bound(m)), (inner, plan.bound(m, inner=True))):
            if not where:
                continue
            gap = moved[:, where].max(axis=(0, 1))
            assert (gap < np.maximum(bound, 1e-9) + 1e-9).all(), (name, gap, bound)
        if name in plan.within_one:
            assert (plan.bound(m) == 1).all()


def test_crossing_rounders_are_refused_by_categories_with_a_pointer():
    with pytest.raises(postdp.errors.ValidationError, match="rounding_plan"):
        SCHEMA.categories(rounders=["g", "v"])
    with pytest.raises(postdp.errors.ValidationError, match="'g' is given twice"):
        SCHEMA.categories(rounders=["g", "g"])
    assert rounding_plan(SCHEMA, ["g", "v", "g", "v"]).set_aside == ("v",)


def test_a_foreign_marginal_is_refused():
    other = Schema([Attribute("a", ["0", "1"])])
    with pytest.raises(postdp.errors.ValidationError, match="another schema"):
        rounding_plan(SCHEMA, []).bound(other.marginal("a"))


def test_geography_is_unused_by_the_plan():
    """The plan depends on the schema and rounders alone (no table needed)."""
    plan = rounding_plan(SCHEMA, ["g", "g * v"])
    assert plan.categories.n == 1 + 3 + 6 + SCHEMA.size
    assert isinstance(plan.categories, Hierarchy)

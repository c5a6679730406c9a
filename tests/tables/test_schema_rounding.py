"""Rounding a schema table (issue 23): nested marginals as rounder nodes of the category
tree (``Schema.categories(rounders=...)``). ``postdp.round``'s contract for tables then covers them:
integers, every geographic parent exactly the sum of its children, every marginal an
integer, each rounder marginal within 1 at the root and the leaf geounits, and every count
unbiased (per-count z-tests over many roundings, width from the sample)."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy
from postdp.errors import ValidationError
from postdp.tables import (
    Attribute,
    Measurement,
    Query,
    Recode,
    Schema,
    Table,
    Workload,
    expand,
    measure,
)

SCHEMA = Schema(
    [
        Attribute(
            "g", ["h", "i1", "i2", "n"], recodes=[Recode("inst", {"H": [0], "I": [1, 2], "N": [3]})]
        ),
        Attribute("v", ["u18", "18+"]),
        Attribute("r", ["a", "b", "c"]),
    ]
)
ROUNDERS = ["inst", "g", "g * v"]


def _released():
    rng = np.random.default_rng(11)
    geo = Hierarchy.from_parents(
        ["S", "p", "q", "p1", "p2", "q1", "q2", "q3"], [None, "S", "S", "p", "p", "q", "q", "q"]
    )
    cat = SCHEMA.categories(rounders=ROUNDERS)
    table = Table(geo, cat, rng.integers(0, 6, (geo.leaves.size, SCHEMA.size)))
    items = [Measurement(0, Query.marginal(SCHEMA, "total"), None)]
    for d in range(geo.n_levels):
        for name in ("g * v", "v * r", "detailed"):
            items.append(Measurement(d, Query.marginal(SCHEMA, name), Gaussian(rho=0.3)))
    from postdp.postprocess import TableProjector

    assert TableProjector(table, Workload(items))._basis is not None  # rounders keep it
    draws = measure(table, Workload(items), secure=False, rng=5)
    cells = postdp.project(draws, nonneg=True)
    return table, cells, expand(cells, geo, cat)


def test_the_rounder_tree_holds_the_nested_marginals():
    cat = SCHEMA.categories(rounders=ROUNDERS)
    assert [str(cat.ids[j]) for j in cat.leaves] == list(SCHEMA.cells)
    assert {"inst=H", "g=i1", "g * v=i2|18+"} <= set(cat.ids.tolist())
    ups = [cat.ids[p] if p >= 0 else None for p in cat.parent]
    parent = dict(zip(cat.ids.tolist(), ups, strict=True))
    assert parent["g=i1"] == "inst=I" and parent["g * v=i1|u18"] == "g=i1"
    assert parent["i1|u18|b"] == "g * v=i1|u18"


def test_non_nested_rounders_are_refused():
    with pytest.raises(ValidationError, match="'v' does not refine 'g'"):
        SCHEMA.categories(rounders=["g", "v"])
    partial = Schema([Attribute("a", ["x", "y", "z"], recodes=[Recode("p", {"P": [0, 1]})])])
    with pytest.raises(ValidationError, match="leaves cells out"):
        partial.categories(rounders=["p"])


def test_rounding_is_exact_integral_within_one_and_unbiased():
    table, cells, full = _released()
    geo, cat = table.geography, table.categories
    R = 600
    draws = np.stack([postdp.round(cells, table, rng=k) for k in range(R)])
    assert draws.dtype == np.int64
    # every geographic parent is exactly the sum of its children, cell by cell
    for node in range(geo.n):
        kids = np.flatnonzero(geo.parent == node)
        if kids.size:
            assert (draws[:, node] == draws[:, kids].sum(axis=1)).all()
    counts = np.stack([cat.aggregate(_embed(d, cat)) for d in draws])  # every category node
    # within 1 for the rounder marginals (and the cells and totals) at the root and leaves
    for node in [int(geo.root), *geo.leaves.tolist()]:
        gap = np.abs(counts[:, node] - full[node])
        assert (gap < 1 + 1e-9).all(), (node, gap.max())
    # unbiased: every count's mean over the roundings against its input, z = 4.5 (many tests)
    mean, sd = counts.mean(axis=0), counts.std(axis=0, ddof=1)
    se = sd / np.sqrt(R)
    zero = sd == 0
    assert (np.abs(mean - full)[~zero] <= 4.5 * se[~zero] + 1e-9).all()
    # a count that never moved: its input must be so near an integer that never moving had
    # probability above 1e-6 ((1 - d)^R >= 1e-6, i.e. d <= -log(1e-6) / R about)
    assert (np.abs(mean - full)[zero] <= -np.log(1e-6) / R).all()


def _embed(cells, cat):
    full = np.zeros((*cells.shape[:-1], cat.n))
    full[..., cat.leaves] = cells
    return full

"""(P)/BLUE for marginal workloads whose recodes overlap without nesting (issue 46 part 2).

The 2020 DHC persons queries recode age three ways that do not form a tree (``age_10_groups``'
35-115 against ``age_18_64_116``'s 18-64, ``shared/research/dhc-2020-design.md`` section 5,
point 2). The marginal basis (``postdp/postprocess/_solvers/marginal_basis.py``) takes, per
attribute, the span of every class indicator the workload applies to it, nested or not; these
tests hold it to the dense null-space GLS of ``tests/tables/_reference.py`` (estimates and
variances at 1e-9) and to cvxpy + Clarabel, on random small schemas whose first attribute
has two recodes that straddle each other.
"""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import Gaussian
from postdp.postprocess import TableNonnegProjector, TableProjector
from postdp.tables import Measurement, Query, Table, Workload, measure
from tests.tables._reference import (
    assert_equals_dense_gls,
    assert_top_down_matches_reference,
    qp_table,
    random_marginal_workload,
    random_overlapping_schema,
    random_terms,
    random_tree,
)


def _nested(fine, coarse):
    """Whether every class of ``fine`` lies inside one class of ``coarse``."""
    where = {level: c for c, levels in coarse.groups.items() for level in levels}
    return all(len({where.get(v) for v in levels}) == 1 for levels in fine.groups.values())


def _case(seed, *, detailed_everywhere=False):
    """A random geography and overlapping schema; each level measures the two straddling
    recodes of the first attribute (so the non-nested pair is always in the workload),
    random other marginals, the detailed cells where a level has leaves, and sometimes a
    public marginal."""
    rng = np.random.default_rng(seed)
    schema = random_overlapping_schema(rng)
    geo = random_tree(rng, int(rng.integers(2, 7)), "g")
    table = Table(geo, schema.categories(), rng.integers(0, 15, (geo.leaves.size, schema.size)))
    rest = [a.name for a in schema.attributes[1:]]

    def chosen(d):
        names = [" * ".join(["r0a", *rest[:1]]), "r0b"]
        names += [schema.marginal(random_terms(rng, schema)).name for _ in range(2)]
        if detailed_everywhere or geo.is_leaf[geo.levels[d]].any():
            names.append("detailed")
        return names

    return table, random_marginal_workload(rng, schema, geo, chosen)


def test_the_first_attributes_recodes_overlap_without_nesting():
    for seed in range(30):
        r0a, r0b = random_overlapping_schema(np.random.default_rng(seed)).attributes[0].recodes
        assert not _nested(r0a, r0b) and not _nested(r0b, r0a), seed


@pytest.mark.parametrize("seed", range(30))
def test_blue_of_non_nested_marginals_equals_dense_gls(seed):
    """Estimates of every (geounit, category node) and their exact variances at 1e-9; the
    basis of the first attribute spans both recodes' classes (rank = classes of each, less
    the all-ones vector they share), so no c x c matrix is formed."""
    table, workload = _case(seed)
    projector = assert_equals_dense_gls(table, workload, seed)
    basis = projector._basis
    assert basis is not None
    a0 = basis.schema.attributes[0]
    classes = sum(len(r.groups) for r in a0.recodes)
    stacked = np.vstack([r.matrix(a0.size) for r in a0.recodes])
    assert basis.ranks[0] == np.linalg.matrix_rank(stacked) == min(classes - 1, a0.size)


@pytest.mark.parametrize("seed", range(10))
def test_margins_of_any_marginal_equal_the_dense_covariances(seed):
    """diag(Q P Q') for marginals over either recode (and both crossed with the others),
    P the dense c x c covariance of each geounit's estimate."""
    table, workload = _case(seed)
    projector = TableProjector(table, workload)
    schema = projector._basis.schema
    dense = dict(projector._dense().covariances())  # layout position -> c x c
    positions = table.geography.layout.position
    rng = np.random.default_rng(seed + 50)
    names = ["r0a", "r0b", *(schema.marginal(random_terms(rng, schema)).name for _ in range(3))]
    for name in names:
        query = Query.marginal(schema, name)
        Q = query.matrix(table.categories)
        ref = np.array([np.diag(Q @ dense[p] @ Q.T) for p in positions])
        ours = projector.query_variances(query)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9 * max(1.0, ref.max()), err_msg=name)


@pytest.mark.parametrize("seed", range(5))
def test_projections_of_non_nested_marginals_match_clarabel(seed):
    """(P) and (P+) of the whole table equal cvxpy + Clarabel (tight), and (P+) carries its
    KKT certificate at 1e-9."""
    table, workload = _case(seed)
    draws = measure(table, workload, secure=False, rng=seed + 100)
    for nonneg in (False, True):
        ours = postdp.project(draws, nonneg=nonneg)
        ref = qp_table(draws, nonneg=nonneg)
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * scale)
    plus = TableNonnegProjector(table, workload)(draws)
    assert plus.min() >= 0 and postdp.kkt_report(plus, draws).worst_relative() < 1e-9


@pytest.mark.parametrize("seed", range(5))
def test_top_down_families_of_non_nested_marginals_match_clarabel(seed):
    """Top-down with the detailed cells at every level: each family's nonnegative split
    under non-nested marginals equals a per-family Clarabel solve."""
    table, workload = _case(seed, detailed_everywhere=True)
    items = [m for m in workload.measurements if not m.public or m.level == 0]
    draws = measure(table, Workload(items), secure=False, rng=seed)
    assert_top_down_matches_reference(draws)


def test_equal_schemas_built_apart_are_one_schema():
    """Marginals of two equal schema objects (two ``dhc_schema()`` calls) are solved in the
    marginal basis, as if built from one; a schema that differs is not."""
    from postdp.tables import Attribute, Recode, Schema

    def make(*recodes):
        return Schema([Attribute("a", ["0", "1", "2"], recodes=recodes), Attribute("b", "xy")])

    # the same cells, but another schema: it has a recode the others have not
    one, two, other = make(), make(), make(Recode("r", {"lo": [0], "hi": [1, 2]}))
    assert one is not two and one == two and one != other
    geo = random_tree(np.random.default_rng(0), 4, "g")
    table = Table(geo, one.categories(), np.ones((geo.leaves.size, one.size), dtype=np.int64))
    items = [
        Measurement(d, Query.marginal(one, "detailed"), Gaussian(rho=0.5))
        for d in range(geo.n_levels)
    ]
    items.append(Measurement(0, Query.marginal(two, "a"), Gaussian(rho=0.5)))
    assert TableProjector(table, Workload(items))._basis is not None
    items[-1] = Measurement(0, Query.marginal(other, "a"), Gaussian(rho=0.5))
    assert TableProjector(table, Workload(items))._basis is None  # the dense solver


def test_a_table_too_large_for_the_dense_solver_is_refused_before_allocating():
    """Queries that are not marginals of one schema take the dense solver's c x c matrices;
    with more than 20,000 detailed cells that is refused in one line, naming the remedy,
    instead of asking numpy for terabytes."""
    from postdp import Hierarchy
    from postdp.errors import ValidationError

    c = 20_001
    cat = Hierarchy.from_parents(["T", *(f"c{i}" for i in range(c))], [None, *["T"] * c])
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    table = Table(geo, cat, np.zeros((2, c), dtype=np.int64))
    w = Workload([Measurement(1, Query.detailed(cat), Gaussian(rho=1.0))])
    with pytest.raises(ValidationError, match=r"20,001 detailed cells.*Query\.marginal"):
        TableProjector(table, w)


@pytest.mark.parametrize("seed", [4, 6, 9])
def test_parents_equal_their_childrens_sums_when_variances_span_ten_orders(seed):
    """(P) is consistent to rounding even when the noise variances span 1e-5 to 1e5 and a
    public marginal is held at every inner level (the DHC's single-year ages beside its held
    histogram make the covariances this ill-conditioned): the downward split is applied
    once more to what the children's sums still miss of their parent. With one split these
    seeds' parents missed their children's sums by 1.7e-10 to 5.9e-10 of the largest
    estimate; with two, by at most 1.1e-11."""
    rng = np.random.default_rng(seed)
    schema = random_overlapping_schema(rng, max_size=60)
    geo = random_tree(rng, 12, "g")
    table = Table(geo, schema.categories(), rng.integers(0, 15, (geo.leaves.size, schema.size)))
    names = ["r0a", "r0b", "detailed", schema.marginal(random_terms(rng, schema)).name]
    items = [
        Measurement(d, Query.marginal(schema, q), Gaussian(rho=float(10.0 ** rng.uniform(-5, 5))))
        for d in range(geo.n_levels)
        for q in dict.fromkeys(names)
    ]
    items += [Measurement(d, Query.marginal(schema, "r0a"), None) for d in range(geo.n_levels - 1)]
    cells = postdp.project(measure(table, Workload(items), secure=False, rng=3), nonneg=False)
    kids = np.zeros_like(cells)
    np.add.at(kids, geo.parent[geo.parent >= 0], cells[geo.parent >= 0])
    inner = ~geo.is_leaf
    assert np.abs(cells[inner] - kids[inner]).max() <= 5e-11 * float(np.abs(cells).max())

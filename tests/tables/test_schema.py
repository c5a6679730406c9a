"""Schemas and marginal queries (issue 23, first step): the PL94 persons schema, marginals
applied attribute by attribute equal to their 0/1 matrices, and schema tables through the
existing table model (measure, (P)) against a dense least-squares reference."""

from __future__ import annotations

import numpy as np
import pytest

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
    measure,
    pl94_schema,
)
from tests.tables._reference import blue_table, random_schema, random_terms

# sizes from shared/research/pl94-2020-design.md ("Marginal query sizes")
PL94_SIZES = {
    "total": 1,
    "cenrace": 63,
    "hispanic": 2,
    "votingage": 2,
    "hhinstlevels": 3,
    "hhgq": 8,
    "hispanic * cenrace": 126,
    "votingage * cenrace": 126,
    "votingage * hispanic": 4,
    "votingage * hispanic * cenrace": 252,
    "detailed": 2016,
}


def test_the_pl94_persons_schema_and_its_eleven_marginals():
    s = pl94_schema()
    assert s.names == ("hhgq", "votingage", "hispanic", "cenrace") and s.size == 2016
    for name, size in PL94_SIZES.items():
        m = s.marginal(name)
        assert (m.name, m.size, len(m.labels)) == (name, size, size)
    races = s.attributes[3].levels
    assert races[:6] == ("white", "black", "aian", "asian", "nhpi", "sor")
    assert races[-1] == "white+black+aian+asian+nhpi+sor"
    numraces = s.marginal("numraces").apply(np.ones(2016))
    assert numraces.tolist() == [32.0 * k for k in (6, 15, 20, 15, 6, 1)]  # C(6, k) x 8x2x2
    assert s.marginal("hhinstlevels").apply(np.ones(2016)).tolist() == [252.0, 1008.0, 756.0]


@pytest.mark.parametrize("seed", range(25))
def test_a_marginal_applied_by_attribute_equals_its_matrix(seed):
    rng = np.random.default_rng(seed)
    s = random_schema(rng)
    cat = s.categories()
    x = rng.integers(0, 9, (3, 2, s.size)).astype(float)
    for _ in range(4):
        terms = random_terms(rng, s)
        m = s.marginal(terms)
        A = Query.marginal(s, terms).matrix(cat)  # checks the groups are disjoint
        assert A.shape == (m.size, s.size)
        np.testing.assert_array_equal(m.apply(x), x @ A.T)
        # every cell in exactly one count: sensitivity 1 for add/remove
        np.testing.assert_array_equal(A.sum(axis=0), np.ones(s.size))


def test_bad_schemas_and_marginals():
    with pytest.raises(ValidationError, match="distinct level labels"):
        Attribute("a", ["x", "x"])
    with pytest.raises(ValidationError, match="share a level"):
        Recode("r", {"p": [0, 1], "q": [1]})
    with pytest.raises(ValidationError, match=r"outside 0\.\.1"):
        Attribute("a", ["x", "y"], recodes=[Recode("r", {"p": [2]})])
    s = pl94_schema()
    with pytest.raises(ValidationError, match="'race' is not an attribute or recode"):
        s.marginal(["race"])
    with pytest.raises(ValidationError, match="both recode attribute 'hhgq'"):
        s.marginal("hhgq * hhinstlevels")
    with pytest.raises(ValidationError, match="must differ"):
        Schema([Attribute("a", ["x"]), Attribute("a", ["y"])])
    with pytest.raises(ValidationError, match="2016 cells"):
        s.marginal("hhgq").apply(np.ones(5))


def test_a_schema_table_is_a_table_and_its_projection_is_least_squares():
    """The one model: a schema's category tree, marginal queries in a workload, measure and
    (P); the result equals the dense generalised least-squares solution."""
    from tests.tables._reference import qp_table

    rng = np.random.default_rng(5)
    s = Schema(
        [
            Attribute("sex", ["m", "f"]),
            Attribute(
                "age", ["0-17", "18-64", "65+"], recodes=[Recode("adult", {"n": [0], "y": [1, 2]})]
            ),
        ]
    )
    geo = Hierarchy.from_parents(["S", "a", "b", "a1", "a2", "b1"], [None, "S", "S", "a", "a", "b"])
    table = Table(geo, s.categories(), rng.integers(0, 20, (geo.leaves.size, s.size)))
    items = [Measurement(0, Query.marginal(s, "total"), None)]
    for d, terms in ((0, "sex * adult"), (1, "age"), (1, "sex"), (2, "detailed")):
        items.append(Measurement(d, Query.marginal(s, terms), Gaussian(rho=0.5)))
    work = Workload(items)
    draws = measure(table, work, secure=False, rng=3, size=2)
    detailed = table.detailed()
    for m, values in zip(work.measurements, draws.values, strict=True):
        if m.public:
            marginal = s.marginal(m.query.name)
            np.testing.assert_array_equal(values[0], marginal.apply(detailed[geo.levels[0]]))
    ours = blue_table(draws)
    for k in range(2):
        one = measure(table, work, secure=False, rng=3, size=2)
        one = type(one)(one.table, one.workload, tuple(v[k] for v in one.values), False)
        ref = qp_table(one)
        leaves = table.categories.leaves
        np.testing.assert_allclose(ours[k][:, leaves], ref, rtol=1e-7, atol=1e-6)

"""The 2020 DHC persons design as data: schema, recodes, edits and the production strategy.

Every number checked here is from ``shared/research/dhc-2020-design.md`` (sections 1.1,
1.3, 2.1, 2.2 and 3.1, themselves from the Census Bureau's DHC production code): the
schema's 1,227,744 cells, the ten queries' sizes, rho = 24811/5000 and epsilon 25.42 at
delta = 1e-10, the per-level rhos, and the 32 edits leaving 905,184 admissible cells.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import postdp
from postdp.tables import DHC_EDITS, dhc_schema, dhc_structural_zeros, load_strategy, pl94_schema
from postdp.tables.strategies import PL94_IN_DHC

# (query as the production code spells it, answers per geounit): design notes section 2.2
QUERIES = [
    ("age_18_64_116 * relgq_4_groups", 12),
    ("age_18_64_116 * sex", 6),
    ("age_38_groups * sex", 76),
    ("hispanic * sex", 4),
    ("sex * relgq_4_groups", 8),
    ("gq_constr_groups * age_10_groups", 60),
    ("popSehsdTargetsRelship", 19),
    ("hispanic * sex * age_40_groups * relship_and_eight_level_GQ * cenrace", 252_000),
    ("relgq * age_40_groups * hispanic * cenrace * sex", 423_360),
    ("detailed", 1_227_744),
]


def test_schema_has_the_production_shape_and_query_sizes() -> None:
    s = dhc_schema()
    assert s.names == ("relgq", "sex", "age", "hispanic", "cenrace")
    assert s.shape == (42, 2, 116, 2, 63)
    assert s.size == 1_227_744
    for query, size in QUERIES:
        assert s.marginal(query).size == size, query


@pytest.mark.parametrize(
    ("recode", "size"),
    [
        ("age_18_64_116", 3),
        ("age_10_groups", 10),
        ("age_38_groups", 38),
        ("age_40_groups", 40),
        ("votingage", 2),
        ("relgq_4_groups", 4),
        ("gq_constr_groups", 6),
        ("popSehsdTargetsRelship", 19),
        ("relship_and_eight_level_GQ", 25),
        ("hhgq8lev", 8),
    ],
)
def test_every_recode_partitions_its_attribute(recode: str, size: int) -> None:
    """Each production recode puts every level of its attribute in exactly one class
    (design notes 1.3: 'every one used below is a partition')."""
    s = dhc_schema()
    m = s.marginal(recode)
    assert m.size == size
    groups = m.cell_groups()
    assert (groups >= 0).all()  # no cell left out
    counts = np.bincount(groups, minlength=size)
    assert counts.sum() == s.size and (counts > 0).all()


def test_the_age_groups_overlap_without_nesting() -> None:
    """age_10_groups' 0-2 is three of age_38_groups' single years, and age_38_groups' 15-17
    is three of age_40_groups' single years; age_10_groups' 35-115 spans many groups."""
    s = dhc_schema()
    labels = {name: s.marginal(name).labels for name in ("age_10_groups", "age_38_groups")}
    assert labels["age_10_groups"][:5] == ("0-2", "3-14", "15", "16", "17")
    assert labels["age_38_groups"][14:17] == ("14", "15-17", "18-19")
    assert s.marginal("age_40_groups").labels[14:19] == ("14", "15", "16", "17", "18-19")
    assert s.marginal("age_38_groups").labels[-1] == "110-115"


def test_the_pl94_marginal_is_the_pl94_histogram_count_for_count() -> None:
    """hhgq8lev * votingage * hispanic * cenrace has PL94's 2,016 cell codes in PL94's order,
    and on a random population it equals the PL94 histogram tabulated directly (relgq
    0-17 household, 18-23 adult correctional, ..., age 18+ voting age)."""
    s = dhc_schema()
    m = s.marginal(PL94_IN_DHC)
    assert m.labels == pl94_schema().cells
    rng = np.random.default_rng(3)
    n = 20_000
    relgq = rng.integers(0, 42, n)
    sex = rng.integers(0, 2, n)
    age = rng.integers(0, 116, n)
    hisp = rng.integers(0, 2, n)
    race = rng.integers(0, 63, n)
    cell = np.ravel_multi_index((relgq, sex, age, hisp, race), s.shape)
    hist = np.bincount(cell, minlength=s.size).astype(float)
    hhgq = np.select(
        [relgq < 18, relgq < 24, relgq < 27, relgq < 28, relgq < 33, relgq < 34, relgq < 36],
        [0, 1, 2, 3, 4, 5, 6],
        7,
    )
    pl94_cell = np.ravel_multi_index((hhgq, (age >= 18).astype(int), hisp, race), (8, 2, 2, 63))
    direct = np.bincount(pl94_cell, minlength=2016)
    assert np.array_equal(m.apply(hist), direct)


def test_the_edits_leave_905184_admissible_cells() -> None:
    """32 edits, 1,280 (relgq, age) pairs, 322,560 structural zeros (design notes 3.1)."""
    assert len(DHC_EDITS) == 32
    assert len({e.name for e in DHC_EDITS}) == 32
    zeros = dhc_structural_zeros()
    assert zeros.shape == (1_227_744,)
    assert int(zeros.sum()) == 1_227_744 - 905_184 == 322_560
    pairs = zeros.reshape(42, 2, 116, 2, 63)[:, 0, :, 0, 0]  # the same for sex, hispanic, race
    assert int(pairs.sum()) == 1_280
    assert np.array_equal(zeros.reshape(42, 2, 116, 2, 63).all(axis=(1, 3, 4)), pairs)
    # spot checks against the notes' table
    assert pairs[0, 14] and not pairs[0, 15]  # householders under 15
    assert pairs[27, 19] and not pairs[27, 20]  # nursing facilities under 20
    assert pairs[32, 2] and not pairs[32, 3] and not pairs[32, 30] and pairs[32, 31]
    assert pairs[39, 76] and not pairs[39, 75]
    for free in (9, 14, 15, 17, 28, 29, 30, 36, 40, 41):  # no edit (40's is not in production)
        assert not pairs[free].any(), free


def test_the_strategy_is_the_production_run_exactly() -> None:
    d = load_strategy("dhc-2020-persons")
    assert d.rho == Fraction(24811, 5000)
    assert round(d.budget.to_approx_dp(1e-10), 2) == 25.42
    assert d.levels == (
        "US", "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group",
        "Block",
    )  # fmt: skip
    level_rho = [d.rho * g for g in d.level_shares]
    assert level_rho == [
        Fraction(949, 10000),
        Fraction(12987, 10000),
        Fraction(62, 125),
        Fraction(3107, 5000),
        Fraction(3107, 5000),
        Fraction(868, 625),
        Fraction(43, 100),
        Fraction(11, 1000),
    ]
    assert sum(d.level_shares) == 1
    for shares in d.query_shares:
        assert list(shares) == [q for q, _ in QUERIES]  # the production order
        assert sum(shares.values()) == 1
    rho = {
        (d.levels[k], q): d.rho * d.level_shares[k] * s
        for k, shares in enumerate(d.query_shares)
        for q, s in shares.items()
    }
    assert rho["State", "gq_constr_groups * age_10_groups"] == Fraction(3996, 10000)
    assert rho["County", "popSehsdTargetsRelship"] == Fraction(1240, 10000)
    assert rho["Tract_Subset", "detailed"] == Fraction(868, 10000)
    assert rho["Block", "detailed"] == Fraction(11, 10000)
    sigma = d.sigma_table().set_index(["level", "query"])["sigma"]
    assert round(float(sigma["Block", "detailed"]), 2) == 30.15
    assert round(float(sigma["US", "gq_constr_groups * age_10_groups"]), 2) == 5.85
    assert d.held == tuple((k, PL94_IN_DHC) for k in range(8))
    assert d.invariants == ((0, "total"), (1, "total"))


def test_the_data_namespace_reaches_the_designs() -> None:
    """The fixed names of the specification: postdp.data.dhc_schema, load_strategy and
    synthetic_population (the latter postdp.nmf's, imported on first use)."""
    assert postdp.data.dhc_schema().size == 1_227_744
    assert postdp.data.load_strategy("dhc-2020-persons").rho == Fraction(24811, 5000)
    assert postdp.data.synthetic_population is postdp.nmf.synthetic_population
    with pytest.raises(AttributeError):
        _ = postdp.data.not_a_name  # type: ignore[attr-defined]


def test_marginal_queries_travel_as_their_schema_and_name() -> None:
    """A Dask task ships its workload: a DHC marginal pickles to a few kilobytes (not its
    1.2 million groups), lands equal, and the schema it lands on is made once per process,
    so a worker builds each query once for all its tasks; other queries pickle whole."""
    import pickle

    from postdp.tables import Query, dhc_schema

    detailed = Query.marginal(dhc_schema(), "detailed")
    data = pickle.dumps(detailed)
    assert len(data) < 20_000
    one, two = pickle.loads(data), pickle.loads(pickle.dumps(detailed))
    assert one == detailed and one.marginal_of is not None
    assert one.marginal_of.schema == dhc_schema()
    assert one is two  # the second landing finds the first's schema and query
    plain = Query("pair", [["a"], ["b", "c"]])
    again = pickle.loads(pickle.dumps(plain))
    assert again == plain and again.marginal_of is None

"""Sparse leaf histograms (issue 23): a table given as nonzero cells only keeps them so,
and ``measure`` answers every query level by level without a dense histogram; everything
equals the dense table's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from postdp import Gaussian, Hierarchy
from postdp.errors import HierarchyError, ValidationError
from postdp.tables import Measurement, Query, Table, Workload, measure, pl94_schema
from tests.tables._reference import blue_table

GEO = Hierarchy.from_parents(
    ["S", "a", "b", "a1", "a2", "b1", "c"], [None, "S", "S", "a", "a", "b", "S"]
)  # a ragged tree: c is a leaf at depth 1


def _tables():
    s = pl94_schema()
    rng = np.random.default_rng(3)
    dense = np.zeros((GEO.leaves.size, s.size), dtype=np.int64)
    for row in range(dense.shape[0]):  # about 40 people in a handful of the 2,016 cells
        dense[row, rng.choice(s.size, 12, replace=False)] = rng.integers(1, 6, 12)
    cat = s.categories(rounders=["hhgq"])
    return s, Table(GEO, cat, dense), Table(GEO, cat, sparse.csr_array(dense))


def test_a_sparse_table_keeps_only_its_nonzero_cells():
    _, dense, sp = _tables()
    assert sp.is_sparse and not dense.is_sparse
    assert sp.cells.nnz == int((dense.cells != 0).sum())  # memory grows with the nonzeros
    np.testing.assert_array_equal(sp.counts(), dense.counts())
    for d in range(GEO.n_levels):
        np.testing.assert_array_equal(sp.level_detailed(d).toarray(), dense.level_detailed(d))


def test_measure_on_a_sparse_table_never_makes_it_dense(monkeypatch):
    s, dense, sp = _tables()
    names = ["total", "hhgq", "votingage * hispanic * cenrace", "detailed"]
    items = [
        Measurement(d, Query.marginal(s, q), Gaussian(rho=0.2)) for d in range(3) for q in names
    ]
    items.append(Measurement(1, Query("hhgq nodes", [["hhgq=household"]]), Gaussian(rho=0.1)))
    work = Workload(items)
    expected = measure(dense, work, secure=False, rng=5, size=2)

    def refuse(self):
        raise AssertionError("a dense histogram of every geounit was made")

    monkeypatch.setattr(Table, "detailed", refuse)
    monkeypatch.setattr(Table, "counts", refuse)
    got = measure(sp, work, secure=False, rng=5, size=2)
    for a, b in zip(got.values, expected.values, strict=True):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    # (P) of the marginals alone (the marginal basis) from the sparse table's answers
    marginals = Workload(items[:-1])
    got = measure(sp, marginals, secure=False, rng=6)
    expected = measure(dense, marginals, secure=False, rng=6)
    np.testing.assert_allclose(blue_table(got), blue_table(expected), atol=1e-9)


def test_bad_sparse_cells_are_refused():
    s = pl94_schema()
    cat = s.categories()
    with pytest.raises(ValidationError, match="must have shape"):
        Table(GEO, cat, sparse.csr_array((3, s.size), dtype=np.int64))
    bad = sparse.csr_array(([-1], ([0], [0])), shape=(GEO.leaves.size, s.size))
    with pytest.raises(HierarchyError, match="nonnegative"):
        Table(GEO, cat, bad)
    half = sparse.csr_array(([0.5], ([0], [0])), shape=(GEO.leaves.size, s.size))
    with pytest.raises(ValidationError, match="whole numbers"):
        Table(GEO, cat, half)


@pytest.mark.parametrize("seed", range(10))
def test_a_sparse_schema_tables_answers_equal_the_query_matrix(seed):
    """Marginals of a sparse schema table are answered from each cell's count index
    (no c x c category matrix): the same integers as the 0/1 matrix, and as the dense
    table's, on public queries (exact answers)."""
    from tests.tables._reference import random_schema, random_terms

    rng = np.random.default_rng(seed)
    schema = random_schema(rng) if seed else pl94_schema()
    geo = Hierarchy.from_parents(["S", "a", "b", "c"], [None, "S", "S", "S"])
    cells = rng.integers(0, 3, (3, schema.size)) * (rng.random((3, schema.size)) < 0.2)
    dense = Table(geo, schema.categories(), cells)
    thin = Table(geo, schema.categories(), sparse.csr_array(cells))
    names = list(dict.fromkeys(schema.marginal(random_terms(rng, schema)).name for _ in range(6)))
    work = Workload([Measurement(1, Query.marginal(schema, n), None) for n in names])
    for q, a, b in zip(
        work.measurements,
        measure(thin, work, secure=False, rng=0).values,
        measure(dense, work, secure=False, rng=0).values,
        strict=True,
    ):
        np.testing.assert_array_equal(a, cells @ q.query.matrix(dense.categories).T)
        np.testing.assert_array_equal(a, b)

"""Exact variances of published tables' rows under (P): TableProjector.table_variances and
the streamed blue's (project_by_subtree with tables) against dense GLS covariances.

A row of a published table (P1's total, "Two or more races", ...) is a sum of detailed
cells and the rows overlap, so its variance is diag(Q P Q') with P the covariance of the
geounit's estimated cells, not the sum of its cells' variances."""

from __future__ import annotations

import numpy as np
import pytest

from postdp import Gaussian, Hierarchy
from postdp.data import pl94_tables
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector, project_by_subtree
from postdp.tables import (
    Block,
    Measurement,
    PublishedTable,
    Query,
    Table,
    Workload,
    measure,
    pl94_schema,
)

from ._reference import below, random_schema, random_terms, random_tree


def random_published(rng, schema, name="T"):
    """Two blocks of random overlapping 0/1 rows per attribute (an all-ones row and the
    identity among them sometimes), as a printed table has."""
    blocks, k = [], 0
    for _ in range(2):
        factors = []
        for n in schema.shape:
            rows = [np.ones(n)] if rng.random() < 0.5 else []
            rows += [rng.integers(0, 2, n).astype(float) for _ in range(int(rng.integers(1, 3)))]
            factors.append(np.eye(n) if rng.random() < 0.25 else np.array(rows))
        size = int(np.prod([f.shape[0] for f in factors]))
        blocks.append(Block([f"{name}_{k + j:03d}" for j in range(size)], factors))
        k += size
    return PublishedTable(name, "random", "all", schema, blocks, [f"r{j}" for j in range(k)])


def reference_variances(table, workload, published):
    """diag(Q_g P Q_g') at every geounit g from the null-space GLS covariance P of every
    leaf geounit's cells (rows of every geounit's histogram by ``below``), no tree solver."""
    from scipy import linalg

    geo, cat = table.geography, table.categories
    G = below(geo)
    noisy, weights, public = [], [], []
    for m in workload.measurements:
        rows = np.kron(G[geo.levels[m.level]], m.query.matrix(cat))
        if m.public:
            public.append(rows)
        else:
            noisy.append(rows)
            weights.append(np.full(rows.shape[0], 1.0 / m.variance))
    M, w = np.vstack(noisy), np.concatenate(weights)
    Z = linalg.null_space(np.vstack(public)) if public else np.eye(M.shape[1])
    cov = Z @ np.linalg.solve(Z.T @ (M.T * w) @ M @ Z, Z.T)
    leaves = [str(cat.ids[j]) for j in cat.leaves]
    where = {c: j for j, c in enumerate(published.schema.cells)}
    T = published.matrix()[:, [where[c] for c in leaves]]  # columns in the table's order
    out = np.empty((geo.n, published.size))
    for g in range(geo.n):
        A = np.kron(G[g][None, :], T)
        out[g] = np.sum((A @ cov) * A, axis=1)
    return out


def _schema_design(seed):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=40)
    geo = random_tree(rng, int(rng.integers(2, 6)), "g")
    table = Table(geo, schema.categories(), rng.integers(0, 9, (geo.leaves.size, schema.size)))
    items = [Measurement(0, Query.marginal(schema, "total"), None)]  # an invariant total
    for d in range(geo.n_levels):
        names = {"detailed", schema.marginal(random_terms(rng, schema)).name}
        for name in sorted(names):
            rho = float(rng.uniform(0.2, 1.0))
            items.append(Measurement(d, Query.marginal(schema, name), Gaussian(rho=rho)))
    return rng, schema, table, Workload(items)


@pytest.mark.parametrize("seed", range(8))
def test_table_variances_equal_the_dense_gls_covariance(seed):
    """Random schemas, random overlapping tables: the marginal basis's block variances
    equal diag(Q P Q') of the null-space GLS reference; the root's total is 0."""
    rng, schema, table, work = _schema_design(seed)
    published = random_published(rng, schema)
    projector = TableProjector(table, work)
    assert projector._basis is not None
    ours = projector.table_variances(published)
    ref = reference_variances(table, work, published)
    assert ours.shape == (table.geography.n, published.size)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9 * max(1.0, ref.max()))
    total = PublishedTable(
        "T0", "t", "all", schema, [Block(["all"], [np.ones((1, n)) for n in schema.shape])], ["x"]
    )
    v = projector.table_variances(total)
    assert v[table.geography.root, 0] == 0.0  # the invariant, exactly
    np.testing.assert_allclose(v, reference_variances(table, work, total), atol=1e-9)


def test_dense_path_matches_cells_by_name_not_position():
    """A category tree whose leaves are the schema's cells in another order takes the
    dense path (no marginal basis): the table's columns are matched by cell name."""
    rng, schema, table, work = _schema_design(3)
    published = random_published(rng, schema)
    cells = list(schema.cells)
    order = rng.permutation(len(cells))
    cat = Hierarchy.from_parents(
        ["total", *[cells[j] for j in order]], [None] * 1 + ["total"] * len(cells)
    )
    shuffled = Table(table.geography, cat, table.dense_cells()[:, order])
    projector = TableProjector(shuffled, work)
    assert projector._basis is None
    np.testing.assert_allclose(
        projector.table_variances(published),
        TableProjector(table, work).table_variances(published),
        rtol=1e-9,
        atol=1e-9,
    )


def test_pl94_table_rows_are_not_sums_of_cell_variances():
    """The real P1, P2 and P5 on a state of two counties measured with the 2020 persons
    marginals (its total invariant): their rows' variances equal the dense GLS covariance's
    Q P Q' (4,032 unknowns); P1's total at a county is not the sum of its cells'."""
    s = pl94_schema()
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    table = Table(geo, s.categories(), np.zeros((2, s.size), dtype=np.int64))
    names = ["total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq"]
    names += ["hispanic * cenrace", "votingage * cenrace", "votingage * hispanic"]
    names += ["votingage * hispanic * cenrace", "detailed"]
    items = [Measurement(0, Query.marginal(s, "total"), None)]
    items += [
        Measurement(d, Query.marginal(s, q), Gaussian(rho=0.02 * (1 + d)))
        for d in (0, 1)
        for q in names
    ]
    work = Workload(items)
    projector = TableProjector(table, work)
    tables = pl94_tables(["P1", "P2", "P5"])
    cells = projector.query_variances(Query.marginal(s, "detailed"))
    for name, published in tables.items():
        ours = projector.table_variances(published)
        ref = _pl94_reference(geo, work, published)
        np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-9 * ref.max(), err_msg=name)
        if name != "P5":  # P1_001N, P2_001N: the invariant total population
            assert ours[geo.root, 0] == 0.0
    p1 = projector.table_variances(tables["P1"])
    assert p1[1, 0] > 0 and abs(p1[1, 0] - cells[1].sum()) > 0.5 * p1[1, 0]


def _pl94_reference(geo, work, published):
    """Q P Q' for a root and two leaves from the information matrix (c = 2,016 cells each):
    H = [[O + S, S], [S, O + S]] with O the leaves' own Gram sum and S the root's, each
    marginal's Gram matrix the Kronecker product of its factors' F'F; H's inverse from its
    two halves (O + 2S on the sum, O on the difference); the invariant root total held by
    the bordered system."""
    c = published.schema.size
    own, shared, public = np.zeros((c, c)), np.zeros((c, c)), []
    for m in work.measurements:
        marginal = m.query.marginal_of
        if m.public:
            public.append(m.query.matrix(published.schema.categories()))  # Q of A = [Q, Q]
            continue
        gram = np.ones((1, 1))
        for f, n in zip(marginal.factors, published.schema.shape, strict=True):
            gram = np.kron(gram, np.eye(n) if f is None else f.T @ f)
        if m.level == 0:
            shared += gram / m.variance
        else:
            own += gram / m.variance
    plus, minus = np.linalg.inv(own + 2 * shared), np.linalg.inv(own)
    # H^-1 = [[P + M, P - M], [P - M, P + M]] / 2 (P = plus, M = minus) is never formed: a
    # row [T, T] (the root) has R H^-1 R' = 2 T P T', a row [T, 0] or [0, T] (a leaf)
    # (T (P + M) T') / 2; the public answers A = [Q, Q] give K = H^-1 A' = [P Q'; P Q'], so
    # A K = 2 Q P Q' and R K = 2 T P Q' (root) or T P Q' (leaf), and the bordered system's
    # covariance is H^-1 - K (A K)^-1 K'
    A = np.vstack(public)
    PQ = plus @ A.T
    AK_inv = np.linalg.inv(2 * A @ PQ)
    T = published.matrix()

    def diag(left, middle):
        return np.sum((left @ middle) * left, axis=1)

    out = np.empty((3, published.size))
    out[0] = 2 * diag(T, plus) - diag(2 * T @ PQ, AK_inv)
    out[1] = out[2] = 0.5 * diag(T, plus + minus) - diag(T @ PQ, AK_inv)
    return out


def test_streamed_blue_gives_the_whole_tables_table_variances():
    """project_by_subtree(..., variances=[table]) per subtree equals the whole table's
    TableProjector.table_variances (each subtree from its root's covariance in the top)."""
    from .test_table_stream import _check_variances, _schema_case

    for seed in (0, 1):
        table, work = _schema_case(seed, ragged=seed == 0)
        schema = work.measurements[0].query.marginal_of.schema
        published = random_published(np.random.default_rng(seed), schema)
        draws = measure(table, work, secure=False, rng=1)
        _check_variances(draws, 1 + seed, [published, Query.marginal(schema, "total")])


def test_a_table_of_another_schema_is_refused():
    from .test_table_stream import _schema_case, split

    table, work = _schema_case(2)
    other = random_published(np.random.default_rng(0), pl94_schema())
    top, subs = split(measure(table, work, secure=False, rng=0), 1)
    with pytest.raises(ValidationError, match="table 'T' is not over the table's schema's"):
        project_by_subtree(top, subs.__getitem__, variances=[other])
    with pytest.raises(ValidationError, match="table T: its schema's cells are not"):
        TableProjector(table, work).table_variances(other)

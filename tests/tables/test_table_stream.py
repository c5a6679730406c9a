"""(P) and top-down one subtree at a time equal the whole table's (project_by_subtree)."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp import Gaussian, Hierarchy
from postdp.errors import ValidationError
from postdp.postprocess import TableProjector, blue_restore, project_by_subtree
from postdp.tables import (
    Measurement,
    PublishedTable,
    Query,
    Table,
    TableMeasurements,
    Workload,
    measure,
)

from ._reference import random_schema, random_terms, random_tree, small_pl94_state


def _geography(rng, ragged=True):
    """root > 2-3 geounits > 1-3 children > 0-3 grandchildren each (1-3 unless
    ``ragged``)."""
    ids, parents = ["R"], [None]
    for a in range(int(rng.integers(2, 4))):
        ids.append(f"C{a}")
        parents.append("R")
        for b in range(int(rng.integers(1, 4))):
            ids.append(f"T{a}{b}")
            parents.append(f"C{a}")
            for e in range(int(rng.integers(0 if ragged else 1, 4))):
                ids.append(f"B{a}{b}{e}")
                parents.append(f"T{a}{b}")
    return Hierarchy.from_parents(ids, parents)


def _schema_case(seed, ragged=True):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng, max_size=48)
    geo = _geography(rng, ragged)
    table = Table(geo, schema.categories(), rng.integers(0, 6, (geo.leaves.size, schema.size)))
    extra = [schema.marginal(random_terms(rng, schema)).name for _ in range(2)]
    names = list(dict.fromkeys(["detailed", *extra]))
    items = [
        Measurement(d, Query.marginal(schema, n), Gaussian(rho=float(rng.uniform(0.2, 1))))
        for d in range(geo.n_levels)
        for n in names
        if not (d == 0 and n == "total")
    ]
    if "total" in names or rng.random() < 0.5:
        items.append(Measurement(0, Query.marginal(schema, "total"), None))
    return table, Workload(items)


def _tree_case(seed):
    rng = np.random.default_rng(seed)
    cat = random_tree(rng, int(rng.integers(3, 8)), "c")
    geo = _geography(rng)
    table = Table(geo, cat, rng.integers(0, 30, (geo.leaves.size, cat.leaves.size)))
    items = [Measurement(d, Query.detailed(cat), Gaussian(rho=0.5)) for d in range(geo.n_levels)]
    items.append(Measurement(0, Query("root", [[str(cat.ids[cat.root])]]), None))
    return table, Workload(items)


def split(measurements, cut):
    """The top (levels <= cut) and each cut geounit's subtree, with their answers."""
    table, work = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    cells = np.zeros((geo.n, cat.leaves.size), dtype=np.int64)
    cells[geo.leaves] = table.dense_cells()
    cells = geo.aggregate(cells.T).T
    rows = {d: {int(g): i for i, g in enumerate(geo.levels[d])} for d in range(geo.n_levels)}

    def part(nodes, shift):
        nodes = np.sort(nodes)
        local = {int(g): i for i, g in enumerate(nodes)}
        parents = [local.get(int(geo.parent[g]), -1) for g in nodes]
        sub_geo = Hierarchy([str(geo.ids[g]) for g in nodes], parents)
        sub = Table(sub_geo, cat, cells[nodes[sub_geo.leaves]])
        items, values = [], []
        for m, v in zip(work.measurements, measurements.values, strict=True):
            d = m.level - shift
            if 0 <= d < sub_geo.n_levels and not (shift and d == 0):
                items.append(Measurement(d, m.query, m.mechanism, weight=m.weight))
                pick = [rows[m.level][int(g)] for g in nodes[sub_geo.levels[d]]]
                values.append(v[..., pick, :])
        w = Workload(items, neighbours=work.neighbours)
        return TableMeasurements(sub, w, tuple(values), measurements.secure)

    top = part(np.flatnonzero(geo.depth <= cut), 0)
    subs = []
    for g in geo.levels[cut]:
        inside = np.zeros(geo.n, dtype=bool)
        inside[g] = True
        for d in range(cut + 1, geo.n_levels):
            nodes = geo.levels[d]
            inside[nodes] = inside[geo.parent[nodes]]
        subs.append(part(np.flatnonzero(inside), cut))
    return top, subs


def _check(draws, cut, method, reference):
    top, subs = split(draws, cut)
    calls = []

    def subtree(k):
        calls.append(k)
        return subs[k]

    parts = list(project_by_subtree(top, subtree, method=method))
    geo = draws.table.geography
    whole = reference(draws)
    scale = max(1.0, float(np.abs(whole).max()))
    index = {str(g): i for i, g in enumerate(geo.ids)}
    top_rows = [index[str(g)] for g in top.table.geography.ids]
    np.testing.assert_allclose(parts[0], whole[..., top_rows, :], rtol=0, atol=1e-9 * scale)
    for sub, est in zip(subs, parts[1:], strict=True):
        rows = [index[str(g)] for g in sub.table.geography.ids]
        np.testing.assert_allclose(est, whole[..., rows, :], rtol=0, atol=1e-9 * scale)
    return calls


@pytest.mark.parametrize("seed", range(10))
def test_blue_by_subtree_equals_the_whole_tables_in_the_marginal_basis(seed):
    """Upward summaries, the top, then each subtree below its root: the BLUE of the whole
    table to 1e-9, two draws at once, whether the cut is at level 1 or 2."""
    cut = 1 + seed % 2
    table, work = _schema_case(seed, ragged=cut == 1)
    draws = measure(table, work, secure=False, rng=seed, size=2)
    calls = _check(draws, cut, "project", TableProjector(table, work))
    n = table.geography.levels[cut].size
    assert calls == [*range(n), *range(n)]  # upward, then downward


@pytest.mark.parametrize("seed", range(6))
def test_blue_by_subtree_equals_the_whole_tables_with_dense_matrices(seed):
    """A category-tree table (the c x c solver): the same equality."""
    table, work = _tree_case(seed)
    draws = measure(table, work, secure=False, rng=seed)
    _check(draws, 1, "project", TableProjector(table, work))


@pytest.mark.parametrize("seed", range(6))
def test_top_down_by_subtree_equals_the_whole_tables(seed):
    table, work = _schema_case(seed)
    draws = measure(table, work, secure=False, rng=seed, size=2)
    calls = _check(draws, 1, "topdown", postdp.top_down)
    assert calls == list(range(table.geography.levels[1].size))  # one pass


@pytest.mark.parametrize("seed", range(8))
def test_blue_restore_by_subtree_equals_the_whole_tables(seed):
    """BLUE, then restore, by subtree: the top restored from the whole table's BLUE in the
    BLUE's precision at the root (its cut families in the ordered passes), each subtree
    below its restored root; the whole table's blue_restore to 1e-9, two draws at once,
    cut at level 1 or 2; the subtrees read twice (the BLUE's two passes)."""
    cut = 1 + seed % 2
    table, work = _schema_case(seed, ragged=cut == 1)
    draws = measure(table, work, secure=False, rng=seed, size=2)
    calls = _check(draws, cut, "blue-restore", blue_restore)
    n = table.geography.levels[cut].size
    assert calls == [*range(n), *range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_integral_blue_restore_by_subtree_equals_the_whole_tables(seed):
    """``blue-restore-2020`` (rounded family by family as it goes down): the same whole
    numbers as on the whole table."""
    table, work = _schema_case(seed)
    draws = measure(table, work, secure=False, rng=seed)
    top, subs = split(draws, 1)
    parts = list(project_by_subtree(top, lambda k: subs[k], method="blue-restore-2020"))
    whole = blue_restore(draws, integral=True)
    index = {str(g): i for i, g in enumerate(table.geography.ids)}
    for part, m in zip(parts, [top, *subs], strict=True):
        rows = [index[str(g)] for g in m.table.geography.ids]
        np.testing.assert_array_equal(part, whole[rows])
        assert np.array_equal(part, np.rint(part))


def test_blue_restore_by_subtree_refuses_what_it_cannot_restore():
    """A cut level without noisy measurements (the metric of its families), variances
    asked of a restoration, and a subtree's invariant the cut level does not keep."""
    table, work = _schema_case(0)
    draws = measure(table, work, secure=False, rng=0)
    top, subs = split(draws, 1)
    with pytest.raises(ValidationError, match="`variances`: 'blue-restore' has none"):
        project_by_subtree(
            top, lambda k: subs[k], method="blue-restore",
            variances=[work.measurements[0].query],
        )  # fmt: skip
    bare = [m for m in top.workload.measurements if m.level == 0]
    kept = [v for m, v in zip(top.workload.measurements, top.values, strict=True) if m.level == 0]
    unmeasured = TableMeasurements(top.table, Workload(bare), tuple(kept), secure=False)
    with pytest.raises(ValidationError, match="noisy measurements at the cut level"):
        next(project_by_subtree(unmeasured, lambda k: subs[k], method="blue-restore"))
    sub = subs[0]
    schema = sub.workload.measurements[0].query.marginal_of.schema
    public = Measurement(1, Query.marginal(schema, "total"), None)
    total = sub.table.geography.levels[1].size
    values = (*sub.values, np.zeros((total, 1)))
    extra = TableMeasurements(
        sub.table, Workload([*sub.workload.measurements, public]), values, secure=False
    )
    parts = project_by_subtree(top, lambda k: extra if k == 0 else subs[k], method="blue-restore")
    next(parts)
    with pytest.raises(ValidationError, match="'total' is public at level 1 but not at level 0"):
        next(parts)


def test_the_2020_preset_by_county_equals_the_whole_state():
    """The persons preset (state totals invariant) cut at the counties: both methods."""
    table, work = small_pl94_state(3)
    draws = measure(table, work, secure=False, rng=4)
    _check(draws, 2, "project", TableProjector(table, work))
    _check(draws, 2, "topdown", postdp.top_down)
    _check(draws, 2, "blue-restore", blue_restore)
    _check(draws, 2, "blue-restore-2020", lambda m: blue_restore(m, integral=True))


def _check_variances(measurements, cut, queries):
    """Streamed variances of ``queries`` (or published tables) against the whole table's
    query_variances (table_variances)."""
    top, subs = split(measurements, cut)
    parts = list(project_by_subtree(top, subs.__getitem__, variances=queries))
    geo = measurements.table.geography
    whole = TableProjector(measurements.table, measurements.workload)
    index = {str(g): i for i, g in enumerate(geo.ids)}
    tables = [top.table, *(s.table for s in subs)]
    plain = list(project_by_subtree(top, subs.__getitem__))
    for (est, var), bare, table in zip(parts, plain, tables, strict=True):
        np.testing.assert_array_equal(est, bare)  # the estimates are unchanged
        rows = [index[str(g)] for g in table.geography.ids]
        assert set(var) == {q.name for q in queries}
        for q in queries:
            if isinstance(q, PublishedTable):
                expected = whole.table_variances(q)[rows]
            else:
                expected = whole.query_variances(q)[rows]
            assert var[q.name].shape == expected.shape
            scale = max(1.0, float(expected.max()))  # 0 for invariants, up to rounding
            np.testing.assert_allclose(var[q.name], expected, rtol=1e-9, atol=1e-9 * scale)


@pytest.mark.parametrize("seed", range(4))
def test_streamed_blue_variances_equal_the_whole_tables(seed):
    """Each subtree's variances start from its root's covariance in the top's solve (the
    smoother's downward recursion, [zhu2021] Thm 7): equal to TableProjector.query_variances
    on the whole table, for the schema's marginals and for a category tree's queries."""
    table, work = _schema_case(seed, ragged=seed % 2 == 0)
    draws = measure(table, work, secure=False, rng=seed)
    schema = work.measurements[0].query.marginal_of.schema
    names = {"total", "detailed", *(m.query.name for m in work.measurements)}
    _check_variances(draws, 1 + seed % 2, [Query.marginal(schema, n) for n in sorted(names)])
    tree_table, tree_work = _tree_case(seed)
    tree_draws = measure(tree_table, tree_work, secure=False, rng=seed)
    cat = tree_table.categories
    _check_variances(tree_draws, 1, [Query.detailed(cat), Query("root", [[str(cat.ids[0])]])])


def test_the_2020_presets_variances_by_county_equal_the_whole_states():
    table, work = small_pl94_state(3)
    draws = measure(table, work, secure=False, rng=4)
    schema = work.measurements[0].query.marginal_of.schema
    names = sorted({m.query.name for m in work.measurements})
    _check_variances(draws, 2, [Query.marginal(schema, n) for n in names])


def test_bad_calls_are_refused():
    table, work = _schema_case(0)
    draws = measure(table, work, secure=False, rng=0)
    top, subs = split(draws, 1)
    plain = Query("cells", [[str(c)] for c in table.categories.ids[table.categories.leaves]])
    with pytest.raises(ValidationError, match="unknown post-processing method 'x'"):
        project_by_subtree(top, subs.__getitem__, method="x")
    with pytest.raises(ValidationError, match="must stop at the cut level"):
        project_by_subtree(draws, subs.__getitem__)
    with pytest.raises(ValidationError, match="`variances`: 'topdown' has none"):
        project_by_subtree(top, subs.__getitem__, method="topdown", variances=[plain])
    with pytest.raises(ValidationError, match="query 'cells' is not a marginal of the table's"):
        project_by_subtree(top, subs.__getitem__, variances=[plain])
    with pytest.raises(ValidationError, match=r"subtree\(0\) is rooted at 'C1'; expected 'C0'"):
        list(project_by_subtree(top, lambda k: subs[1 - k]))
    sub = subs[0]
    first = sub.workload.measurements[0]
    rooted = TableMeasurements(
        sub.table,
        Workload([Measurement(0, first.query, first.mechanism), *sub.workload.measurements]),
        (sub.values[0][..., :1, :], *sub.values),
        False,
    )
    with pytest.raises(ValidationError, match=r"subtree\(0\) measures its root"):
        list(project_by_subtree(top, lambda k: rooted))
    two = measure(table, work, secure=False, rng=0, size=2)
    with pytest.raises(ValidationError, match=r"subtree\(0\) has draws of shape \(\); `top`"):
        list(project_by_subtree(split(two, 1)[0], subs.__getitem__))


@pytest.mark.parametrize("as_sparse", [False, True])
def test_a_table_cut_at_a_level_keeps_every_count(as_sparse):
    from scipy import sparse

    rng = np.random.default_rng(5)
    geo = _geography(rng, ragged=False)
    cat = random_tree(rng, 6, "c")
    cells = rng.integers(0, 4, (geo.leaves.size, cat.leaves.size))
    table = Table(geo, cat, sparse.csr_array(cells) if as_sparse else cells)
    for level in (1, 2):
        top, subs = table.split_at(level)
        assert top.is_sparse == as_sparse and all(s.is_sparse == as_sparse for s in subs)
        index = {str(g): i for i, g in enumerate(geo.ids)}
        whole = table.detailed()
        rows = [index[str(g)] for g in top.geography.ids]
        np.testing.assert_array_equal(top.detailed(), whole[rows])
        roots = [str(top.geography.ids[g]) for g in top.geography.leaves]
        assert [str(s.geography.ids[s.geography.root]) for s in subs] == roots
        assert sum(s.geography.n for s in subs) + top.geography.n - len(subs) == geo.n
        for sub in subs:
            rows = [index[str(g)] for g in sub.geography.ids]
            np.testing.assert_array_equal(sub.detailed(), whole[rows])
            np.testing.assert_array_equal(
                geo.parent[rows[1:]], [rows[p] for p in sub.geography.parent[1:]]
            )
    with pytest.raises(ValidationError, match="`level` must be an integer from 1 to 2"):
        table.split_at(3)
    ragged = Table(
        Hierarchy.from_parents(["R", "a", "b", "a1", "a11"], [None, "R", "R", "a", "a1"]),
        cat,
        np.zeros((2, cat.leaves.size), dtype=int),
    )
    with pytest.raises(ValidationError, match="geounit 'b' is a leaf above level 2"):
        ragged.split_at(2)


def test_a_workload_cut_at_a_level_keeps_its_budget():
    from fractions import Fraction

    from postdp.tables import load_strategy

    _, work = small_pl94_state(0)
    top, below = work.split_at(2)
    assert {m.level for m in top.measurements} == {0, 1, 2}
    assert {m.level for m in below.measurements} == {1, 2, 3}
    assert len(top.measurements) + len(below.measurements) == len(work.measurements)
    rho = sum(Fraction(r) for r in top.exact_rho + below.exact_rho if r is not None)
    assert rho == load_strategy("pl94-2020-persons").rho
    assert top.budget.rho + below.budget.rho == pytest.approx(work.budget.rho, rel=1e-12)
    assert below.neighbours == work.neighbours == "bounded"
    with pytest.raises(ValidationError, match="`level` 5 leaves no measurement below the cut"):
        work.split_at(5)


def test_a_county_by_county_release_of_the_2020_preset():
    """Table.split_at and Workload.split_at feed project_by_subtree: consistent output,
    the state's invariant total kept, every county's subtree below its top-down row."""
    table, work = small_pl94_state(1)
    top, subs = table.split_at(2)
    top_work, sub_work = work.split_at(2)
    top_m = measure(top, top_work, secure=False, rng=0)
    seeds = np.random.SeedSequence(1).spawn(len(subs))

    def subtree(k):
        return measure(subs[k], sub_work, secure=False, rng=np.random.default_rng(seeds[k]))

    for method in ("project", "topdown"):
        parts = list(project_by_subtree(top_m, subtree, method=method))
        upper = parts[0]
        for k, (sub, est) in enumerate(zip(subs, parts[1:], strict=True)):
            np.testing.assert_allclose(est[0], upper[top.geography.leaves[k]], atol=1e-9)
            geo = sub.geography
            kids = np.zeros_like(est)
            np.add.at(kids, geo.parent[1:], est[1:])
            inner = ~geo.is_leaf
            np.testing.assert_allclose(est[inner], kids[inner], atol=1e-8 * max(1, est.max()))
            if method == "topdown":
                assert est.min() >= 0
        states = top.geography.levels[1]
        np.testing.assert_allclose(
            upper[states].sum(axis=1), top.detailed()[states].sum(axis=1), atol=1e-8
        )


def test_trees_sharing_a_shape_pool_solve_as_alone():
    """Subtrees built on one basis share their shapes; trees whose matrices differ at a
    level never mix them up (each equals its solve without the pool)."""
    from postdp.postprocess._solvers.kalman_tree import TreeGLS

    rng = np.random.default_rng(2)
    pool = ({}, [])
    for _ in range(6):
        geo = _geography(rng)
        c = 2
        levels = []
        for _d in range(geo.n_levels):
            rows = int(rng.integers(2, 4))
            A = rng.integers(0, 2, (rows, c)).astype(float)
            A[0] = 1.0
            A[1] = [1.0, 0.0]
            levels.append((A, np.full(rows, float(rng.choice([1.0, 2.0])))))
        ys = [
            rng.normal(size=(1, lv.size, levels[d][0].shape[0])) for d, lv in enumerate(geo.levels)
        ]
        alone = TreeGLS(geo, levels, c).solve(ys)
        shared = TreeGLS(geo, levels, c, pool=pool).solve(ys)
        np.testing.assert_allclose(shared, alone, rtol=0, atol=1e-12)
    assert len(pool[1]) > 0

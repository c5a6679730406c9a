"""Random small tables and workloads, and their least-squares solutions by cvxpy + Clarabel."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
from scipy import linalg

import postdp
from postdp import Gaussian, Hierarchy, Laplace
from postdp.tables import Measurement, Query, Table, Workload, category_matrix, expand

CLARABEL_TIGHT = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "max_iter": 500}


def blue_table(measurements):
    """(P) of table measurements at every (geounit, category node): ``postdp.project``'s
    detailed cells expanded to the category tree."""
    table = measurements.table
    cells = postdp.project(measurements, nonneg=False)
    return expand(cells, table.geography, table.categories)


def random_tree(rng, n, prefix):
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    return Hierarchy([f"{prefix}{i}" for i in range(n)], parent)


def random_case(seed):
    """A random geography, category tree, table and workload (public queries included)."""
    rng = np.random.default_rng(seed)
    geo = random_tree(rng, int(rng.integers(2, 12)), "g")
    cat = random_tree(rng, int(rng.integers(2, 8)), "c")
    table = Table(geo, cat, rng.integers(0, 30, (geo.leaves.size, cat.leaves.size)))
    measurements = []
    for d in range(geo.n_levels):
        if geo.is_leaf[geo.levels[d]].any() or rng.random() < 0.5:
            mech = Laplace(epsilon=float(rng.uniform(0.2, 2)))
            weight = float(rng.uniform(0.5, 3)) if rng.random() < 0.3 else None
            measurements.append(Measurement(d, Query.detailed(cat), mech, weight=weight))
        if rng.random() < 0.6:
            leaves = cat.leaves[rng.permutation(cat.leaves.size)]
            k = int(rng.integers(1, leaves.size + 1))
            groups = np.array_split(leaves[:k], int(rng.integers(1, k + 1)))
            query = Query("q", [[str(cat.ids[j]) for j in g] for g in groups])
            public = rng.random() < 0.3 and not geo.is_leaf[geo.levels[d]].all()
            mech = None if public else Gaussian(rho=float(rng.uniform(0.1, 1)))
            measurements.append(Measurement(d, query, mech))
    return table, Workload(measurements)


def below(geo):
    """0/1 matrix (geounits x leaf geounits): which leaves each geounit adds up."""
    G = np.zeros((geo.n, geo.leaves.size))
    for k, leaf in enumerate(geo.leaves):
        node = int(leaf)
        while node >= 0:
            G[node, k] = 1.0
            node = int(geo.parent[node])
    return G


def qp_table(measurements, *, nonneg=False):
    """Weighted least squares over every measured count, public ones held, by Clarabel."""
    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    G = below(geo)
    scale = max(1.0, max(float(np.abs(v).max()) for v in measurements.values))
    X = cp.Variable((geo.leaves.size, cat.leaves.size))
    objective, constraints = 0, []
    for m, values in zip(workload.measurements, measurements.values, strict=True):
        predicted = G[geo.levels[m.level]] @ X @ m.query.matrix(cat).T
        if m.public:
            constraints.append(predicted == values / scale)
        else:
            objective += cp.sum_squares(predicted - values / scale) / m.variance
    if nonneg:
        constraints.append(X >= 0)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    assert problem.status == cp.OPTIMAL, problem.status
    return G @ X.value * scale


def qp_top_down(measurements, own, weights, ours):
    """Top-down by Clarabel, family by family, given our parents' histograms (a per-family
    reference): the root from its own estimate, then every family's split."""
    table = measurements.table
    geo = table.geography
    root = cp.Variable(own[0].shape[-1])
    constraints = [root >= 0]
    for m, values in zip(measurements.workload.measurements, measurements.values, strict=True):
        if m.level == 0 and m.public:
            constraints.append(m.query.matrix(table.categories) @ root == values[0])
    objective = cp.sum(cp.multiply(weights[0], cp.square(root - own[0][0])))
    cp.Problem(cp.Minimize(objective), constraints).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    out = {0: root.value}
    for node in range(geo.n):
        kids = np.flatnonzero(geo.parent == node)
        if not kids.size:
            continue
        d = int(geo.depth[kids[0]])
        rows = [int(np.flatnonzero(geo.levels[d] == k)[0]) for k in kids]
        T = cp.Variable((kids.size, own[d].shape[-1]))
        objective = cp.sum(cp.multiply(weights[d][None, :], cp.square(T - own[d][rows])))
        problem = cp.Problem(cp.Minimize(objective), [T >= 0, cp.sum(T, axis=0) == ours[node]])
        problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
        for k, kid in enumerate(kids):
            out[int(kid)] = T.value[k]
    return np.array([out[i] for i in range(geo.n)])


def qp_top_down_grouped(measurements, ours):
    """Top-down for any workload by Clarabel, family by family, given our parents'
    histograms: the root's nonnegative least squares with its public queries held, then
    each family's children by nonnegative least squares on their own queries, adding up to
    the parent's cells."""
    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    c = cat.leaves.size

    def fit(T, d, rows):
        objective, constraints = 0, []
        for m, values in zip(workload.measurements, measurements.values, strict=True):
            if m.level != d:
                continue
            A = m.query.matrix(cat)
            if m.public:
                constraints.append(T @ A.T - values[rows] == 0)
            else:
                objective += cp.sum_squares(T @ A.T - values[rows]) / m.variance
        return objective, constraints

    root = cp.Variable((1, c))
    objective, constraints = fit(root, 0, [0])
    problem = cp.Problem(cp.Minimize(objective), [*constraints, root >= 0])
    problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    out = {0: root.value[0]}
    for node in range(geo.n):
        kids = np.flatnonzero(geo.parent == node)
        if not kids.size:
            continue
        d = int(geo.depth[kids[0]])
        rows = [int(np.flatnonzero(geo.levels[d] == k)[0]) for k in kids]
        T = cp.Variable((kids.size, c))
        objective, _ = fit(T, d, rows)
        problem = cp.Problem(cp.Minimize(objective), [T >= 0, cp.sum(T, axis=0) == ours[node]])
        problem.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
        for k, kid in enumerate(kids):
            out[int(kid)] = T.value[k]
    return np.array([out[i] for i in range(geo.n)])


def dense_gls(measurements):
    """Estimate and covariance of every (geounit, category node), shape (geo.n, cat.n)."""
    table, workload = measurements.table, measurements.workload
    geo, cat = table.geography, table.categories
    G = below(geo)
    C = category_matrix(cat).astype(float)
    noisy_rows, noisy_y, noisy_w, pub_rows, pub_y = [], [], [], [], []
    for m, values in zip(workload.measurements, measurements.values, strict=True):
        Q = m.query.matrix(cat)
        rows = np.kron(G[geo.levels[m.level]], Q)  # (n_level * k) x (n_leaf * c)
        if m.public:
            pub_rows.append(rows)
            pub_y.append(np.ravel(values))
        else:
            y, w = np.ravel(values), np.full(rows.shape[0], 1.0 / m.variance)
            if measurements.budget_scale is not None:  # each geounit's own budget factor
                per = np.repeat(measurements.budget_scale[geo.levels[m.level]], m.query.size)
                rows, y, w = rows[per > 0], y[per > 0], w[per > 0] * per[per > 0]
            noisy_rows.append(rows)
            noisy_y.append(y)
            noisy_w.append(w)
    M, y, w = np.vstack(noisy_rows), np.concatenate(noisy_y), np.concatenate(noisy_w)
    unknowns = M.shape[1]
    if pub_rows:
        P, p = np.vstack(pub_rows), np.concatenate(pub_y)
        x0 = np.linalg.lstsq(P, p, rcond=None)[0]
        Z = linalg.null_space(P)
    else:
        x0, Z = np.zeros(unknowns), np.eye(unknowns)
    H = Z.T @ (M.T * w) @ M @ Z
    cov = Z @ np.linalg.solve(H, Z.T)
    est = x0 + cov @ (M.T * w) @ (y - M @ x0)
    leaves = est.reshape(geo.leaves.size, cat.leaves.size)
    values = G @ leaves @ C.T
    agg = np.kron(G, C)  # (geo.n * cat.n) x unknowns
    variances = np.einsum("ij,jk,ik->i", agg, cov, agg).reshape(geo.n, cat.n)
    return values, variances


def assert_equals_dense_gls(table, workload, seed):
    """(P) and its variances equal the dense null-space GLS reference at 1e-9; returns the
    projector."""
    from postdp.postprocess import TableProjector
    from postdp.tables import measure

    draws = measure(table, workload, secure=False, rng=seed)
    projector = TableProjector(table, workload)
    ref, ref_var = dense_gls(draws)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(blue_table(draws), ref, rtol=0, atol=1e-9 * scale)
    noise = max(m.variance for m in workload.measurements)
    np.testing.assert_allclose(projector.variances(), ref_var, rtol=0, atol=1e-9 * noise)
    return projector


def assert_top_down_matches_reference(draws):
    """Top-down is nonnegative, consistent across geography and equal to the per-family
    Clarabel reference at 1e-6."""
    geo = draws.table.geography
    ours = postdp.top_down(draws)
    assert ours.min() >= 0
    kids = np.zeros_like(ours)
    np.add.at(kids, geo.parent[geo.parent >= 0], ours[geo.parent >= 0])
    np.testing.assert_allclose(ours[~geo.is_leaf], kids[~geo.is_leaf], rtol=0, atol=1e-8)
    ref = qp_top_down_grouped(draws, ours)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * scale)


def random_schema(rng, *, max_size=None):
    """2 to 4 attributes of 2 to 7 levels, each with a random recode (a partition of its
    levels) with probability 0.6; at most ``max_size`` cells when given."""
    from postdp.tables import Attribute, Recode, Schema

    while True:
        attributes = []
        for k in range(int(rng.integers(2, 5))):
            n = int(rng.integers(2, 8))
            recodes = []
            if rng.random() < 0.6:
                parts = np.array_split(rng.permutation(n), int(rng.integers(1, n + 1)))
                classes = {f"c{j}": p.tolist() for j, p in enumerate(parts)}
                recodes.append(Recode(f"r{k}", classes))
            attributes.append(Attribute(f"a{k}", [f"v{i}" for i in range(n)], recodes=recodes))
        schema = Schema(attributes)
        if max_size is None or schema.size <= max_size:
            return schema


def random_overlapping_schema(rng, *, max_size=60):
    """Like :func:`random_schema`, but the first attribute has two recodes whose classes
    overlap without nesting (the DHC's age groups: contiguous spans cut at different
    points, some classes of each straddling a cut of the other), and the others up to two
    recodes of contiguous spans each (which may or may not nest)."""
    from postdp.tables import Attribute, Recode, Schema

    def spans(name, n, cuts):
        bounds = [0, *sorted(cuts), n]
        return Recode(name, {f"s{a}": list(range(a, b)) for a, b in itertools.pairwise(bounds)})

    while True:
        attributes = []
        for k in range(int(rng.integers(2, 4))):
            n = int(rng.integers(4 if k == 0 else 2, 8))
            recodes = []
            if k == 0:  # cut at 1 and 3 against a cut at 2: {1, 2} straddles {0, 1} | {2, ..}
                lo = int(rng.integers(1, n - 2))
                recodes = [spans("r0a", n, [lo, lo + 2]), spans("r0b", n, [lo + 1])]
            else:
                for j in range(int(rng.integers(0, 3))):
                    m = int(rng.integers(1, n))
                    cuts = rng.choice(np.arange(1, n), size=m - 1, replace=False).tolist()
                    recodes.append(spans(f"r{k}{'ab'[j]}", n, cuts))
            attributes.append(Attribute(f"a{k}", [f"v{i}" for i in range(n)], recodes=recodes))
        schema = Schema(attributes)
        if schema.size <= max_size:
            return schema


def random_marginal_workload(rng, schema, geo, chosen):
    """Each level's marginals ``chosen(d)`` (a list of names; it may draw from ``rng``),
    each noisy (Laplace or Gaussian at a random budget), and at a level with non-leaf
    geounits, half the time, one more random marginal held exactly (public)."""
    items, names = [], set()
    for d in range(geo.n_levels):
        for name in dict.fromkeys(chosen(d)):
            mech = Laplace(epsilon=float(rng.uniform(0.3, 2))) if rng.random() < 0.3 else None
            mech = mech or Gaussian(rho=float(rng.uniform(0.1, 1)))
            items.append(Measurement(d, Query.marginal(schema, name), mech))
            names.add((d, name))
        if not geo.is_leaf[geo.levels[d]].all() and rng.random() < 0.5:
            name = schema.marginal(random_terms(rng, schema)).name
            if (d, name) not in names:  # a public marginal, held exactly
                items.append(Measurement(d, Query.marginal(schema, name), None))
    return Workload(items)


def random_terms(rng, schema):
    """A random marginal: each attribute kept, recoded (any of its recodes) or summed out."""
    terms = []
    for a in schema.attributes:
        pick = int(rng.integers(0, 3))
        if pick == 1:
            terms.append(a.name)
        elif pick == 2 and a.recodes:
            # one recode: no draw, so the streams of older tests' cases stay as they were
            j = int(rng.integers(0, len(a.recodes))) if len(a.recodes) > 1 else 0
            terms.append(a.recodes[j].name)
    return terms


def small_pl94_state(seed, people=30):
    """A six-level persons table for the 2020 presets (US > 2 states > 3 counties > 3
    tracts > 3 block groups > 4 blocks of ``people`` each, from one sparse race mix), and
    the persons preset's workload on it."""
    from postdp import Hierarchy
    from postdp.tables import Table, load_strategy, pl94_schema

    s = pl94_schema()
    rng = np.random.default_rng(seed)
    ids = ["US", "S1", "S2", "C1", "C2", "C3", "T1", "T2", "T3", "G1", "G2", "G3"]
    ids += ["K1", "K2", "K3", "K4"]
    parents = [None, "US", "US", "S1", "S1", "S2", "C1", "C2", "C3", "T1", "T2", "T3"]
    parents += ["G1", "G1", "G2", "G3"]
    geo = Hierarchy.from_parents(ids, parents)
    probs = rng.dirichlet(np.full(s.size, 0.03))
    cells = np.array([rng.multinomial(people, probs) for _ in range(4)])
    table = Table(geo, s.categories(), cells)
    return table, load_strategy("pl94-2020-persons").workload(table)

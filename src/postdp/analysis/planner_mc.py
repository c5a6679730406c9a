"""Budget planning by Monte Carlo on common random numbers, for nonlinear chains.

The exact planner (:mod:`postdp.analysis.planner`) minimises (P) variances, which the design
alone determines. For (P+), top-down, clamping or rounding the error depends on the counts
and must be simulated. Here one fixed set of standard noise draws (and one fixed seed for a
rounding step) is scaled by each candidate split's noise scales, so the objective is a
deterministic function of the split and every split is judged on the same noise (a
hierarchy's draws go through its release chain, a table's through its measured queries and
its table :class:`~postdp.analysis.ReleaseDesign`); it is
minimised by Nelder-Mead over the simplex (a softmax parametrisation), from the equal split
and two random starts. Continuous noise only (Laplace, Gaussian): discrete noise would make
the objective piecewise constant. A plan computed from true counts depends on them: it is a
study, to be published only if those counts are public or synthetic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from postdp._typing import FloatArray, IntArray, NumArray
from postdp.analysis.design import ReleaseDesign
from postdp.analysis.planner import BudgetPlan, _mechanism, given_split, once_per_split
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import (
    Measurement,
    Query,
    Table,
    TableMeasurements,
    Workload,
    category_matrix,
    measure,
)

__all__ = ["plan_mae_budget"]


def plan_mae_budget(
    hierarchy: Hierarchy | Table,
    postprocess: str,
    *,
    total: float,
    mechanism: Literal["laplace", "gaussian"] = "laplace",
    weights: Sequence[float] | None = None,
    public: Sequence[str] | Sequence[tuple[int, Query]] | None = None,
    queries: Sequence[tuple[int, Query]] | None = None,
    categories: Sequence[str] | None = None,
    bins: Sequence[int] = (0, 10, 100, 1_000, 10_000),
    draws: int = 200,
    compare: Sequence[float] | None = None,
    rng: int = 0,
    progress: Callable[[], object] | None = None,
) -> BudgetPlan:
    """The per-level split of ``total`` minimising the size-binned MAE of a release chain.

    For nonlinear chains ((P+), top-down, clamp, rounding) the error is not the (P)
    variance: this planner measures, by Monte Carlo, each level's mean absolute error
    averaged over true-count size bins (each non-empty bin counts equally, so small places
    are not drowned by large ones), weighted across levels. The draws use common random
    numbers: one fixed set of standard noise draws, scaled by each split's noise scales, so
    the objective is a deterministic, continuous function of the split and different splits
    are compared on the same noise (Nelder-Mead on the simplex; continuous noise only).

    Parameters
    ----------
    hierarchy : Hierarchy or Table
        Must hold the true counts (planning with them is a study, not a release: the
        objective depends on the data, so publish a plan only if the counts used are public
        or synthetic). A table's split is over its measured ``queries``, its error that of
        the chosen category counts of every geounit, binned by the geounits' totals.
    postprocess : str
        A hierarchy's chain (e.g. ``"project-nonneg,round"``) or a table's estimator (e.g.
        ``"topdown"``, ``"project-nonneg"``), as for :class:`ReleaseDesign`.
    total : float
        Epsilon (laplace) or rho (gaussian).
    mechanism : {"laplace", "gaussian"}
    weights : sequence of float, optional
        Per level, root first (default: the leaf level only).
    public : sequence of str, optional
        Public node ids (their counts published exactly); for a table, (level, query)
        pairs published exactly.
    queries : sequence of (int, Query), optional
        Tables (required): the measured (level, query) pairs, each to receive a share.
    categories : sequence of str, optional
        Tables: the category nodes whose errors count (default: the detailed cells).
    bins : sequence of int
        Lower edges of the size bins.
    draws : int, default 200
        Common random draws (memory: draws x nodes x 8 bytes, twice).
    compare : sequence of float, optional
        A split to evaluate on the same draws; it must spend exactly ``total``.
    rng : int, default 0
    progress : callable, optional
        Called with no argument once per split evaluated (each a Monte Carlo run on the
        common draws), e.g. a progress bar's ``update``.

    Returns
    -------
    BudgetPlan
        ``shares`` per level (hierarchies) or in the order of ``queries`` (tables).

    Examples
    --------
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [12, 2, 10])
    >>> plan = plan_mae_budget(h, "project-nonneg", total=1.0, weights=[0, 1], draws=100)
    >>> bool(plan.objective <= plan.equal_objective), round(float(plan.shares.sum()), 9)
    (True, 1.0)
    >>> from postdp.data import synthetic_table
    >>> t = synthetic_table((2, 3), leaf_mean=30, rng=0)
    >>> qs = [(d, Query.detailed(t.categories)) for d in range(3)]
    >>> plan = plan_mae_budget(t, "project-nonneg", total=3.0, queries=qs, draws=20)
    >>> plan.shares.size, bool(plan.objective <= plan.equal_objective)
    (3, True)
    """
    if isinstance(hierarchy, Table):
        return _plan_table(hierarchy, postprocess, total, mechanism, weights, public, queries,
                           categories, bins, draws, compare, rng, progress)  # fmt: skip
    if queries is not None or categories is not None:
        raise ValidationError("`queries` and `categories` are for tables")
    L = hierarchy.n_levels
    w = np.zeros(L) if weights is None else np.asarray(weights, dtype=float)
    if weights is None:
        w[-1] = 1.0
    if w.shape != (L,) or (w < 0).any() or w.sum() <= 0:
        raise ValidationError(f"`weights` needs {L} nonnegative values, not all 0; got {weights}")
    names = None if public is None else [str(p) for p in public]
    level_means = mae_levels(hierarchy, postprocess, mechanism, names, bins, draws, rng)
    return plan_on_simplex(level_means, w, total=total, compare=compare, rng=rng, progress=progress)


def _plan_table(
    table: Table,
    postprocess: str,
    total: float,
    mechanism: str,
    weights: Sequence[float] | None,
    public: Any,
    queries: Sequence[tuple[int, Query]] | None,
    categories: Sequence[str] | None,
    bins: Sequence[int],
    draws: int,
    compare: Sequence[float] | None,
    rng: int,
    progress: Callable[[], object] | None,
) -> BudgetPlan:
    if not queries:
        raise ValidationError("`queries` is required for a table: the (level, query) pairs")
    L = table.geography.n_levels
    w = np.zeros(L) if weights is None else np.asarray(weights, dtype=float)
    if weights is None:
        w[-1] = 1.0
    if w.shape != (L,) or (w < 0).any() or w.sum() <= 0:
        raise ValidationError(f"`weights` needs {L} nonnegative values, not all 0; got {weights}")
    level_means = table_mae_levels(
        table,
        list(queries),
        postprocess,
        mechanism=mechanism,
        public=list(public or []),
        categories=categories,
        bins=bins,
        draws=draws,
        rng=rng,
    )
    return plan_on_simplex(
        level_means, w, total=total, compare=compare, rng=rng, progress=progress,
        shares=len(queries),
    )  # fmt: skip


def mae_levels(
    hierarchy: Hierarchy,
    postprocess: str,
    mechanism: str,
    public: Sequence[str] | None,
    bins: Sequence[int],
    draws: int,
    rng: int,
) -> Callable[[FloatArray], FloatArray]:
    """Each level's size-binned MAE as a function of the split (common random numbers)."""
    releases = crn_releases(hierarchy, postprocess, mechanism, public, draws, rng)
    truth = np.asarray(hierarchy.counts, dtype=np.float64)
    groups = _size_groups(truth, hierarchy.levels, bins)

    def level_means(shares: FloatArray) -> FloatArray:
        per_node = np.abs(releases(shares) - truth).mean(axis=0)
        return _binned_means(per_node, groups)

    return level_means


def crn_releases(
    hierarchy: Hierarchy,
    postprocess: str,
    mechanism: str,
    public: Sequence[str] | None,
    draws: int,
    rng: int,
) -> Callable[[FloatArray], FloatArray]:
    """The released draws (shape (draws, n)) as a function of the per-level split, on
    common random numbers (the same standard noise, the same rounding draws, at every
    split)."""
    if mechanism not in ("laplace", "gaussian"):
        raise ValidationError(f"`mechanism` must be 'laplace' or 'gaussian'; got {mechanism!r}")
    if hierarchy.counts is None:
        raise ValidationError("the hierarchy holds no true counts to measure errors against")
    if draws < 10:
        raise ValidationError(f"`draws` must be at least 10; got {draws}")
    truth = hierarchy.counts.astype(np.float64)
    gen = np.random.default_rng(rng)
    shape = (draws, hierarchy.n)
    standard = gen.laplace(0.0, 1.0, shape) if mechanism == "laplace" else gen.normal(size=shape)

    def releases(shares: FloatArray) -> FloatArray:
        mechs = [_mechanism(mechanism, float(b)) for b in shares]
        scale = np.array([m.noise_scale for m in mechs])[hierarchy.depth]
        chain = ReleaseDesign(hierarchy, mechs, postprocess, public=public).chain()
        released = chain(truth + standard * scale, rng=rng)  # the rounding's draws, fixed
        return np.asarray(released, dtype=np.float64)

    return releases


def table_mae_levels(
    table: Table,
    queries: Sequence[tuple[int, Query]],
    postprocess: str,
    *,
    mechanism: str,
    public: Sequence[tuple[int, Query]],
    categories: Sequence[str] | None,
    bins: Sequence[int],
    draws: int,
    rng: int,
) -> Callable[[FloatArray], FloatArray]:
    """Each geographic level's MAE of the released category counts, averaged over the
    geounits' size bins (each non-empty bin counts equally), as a function of the budget
    of each measured query: one fixed set of standard noise draws per query, scaled by the
    split's noise scales (and the rounding's draws fixed), so splits are compared on the
    same noise.

    Memory: ``draws`` x every measured answer x 8 bytes for the standard noise, plus one
    post-processed release of ``draws`` draws at a time.
    """
    if mechanism not in ("laplace", "gaussian"):
        raise ValidationError(f"`mechanism` must be 'laplace' or 'gaussian'; got {mechanism!r}")
    if draws < 10:
        raise ValidationError(f"`draws` must be at least 10; got {draws}")
    fixed = [Measurement(d, q, None) for d, q in public]
    exact = Workload([*fixed, *(Measurement(d, q, None) for d, q in queries)])
    answers = measure(table, exact, secure=False, rng=0).values  # exact: every query public
    ReleaseDesign(table, _workload(fixed, queries, mechanism, np.ones(len(queries))), postprocess)
    gen = np.random.default_rng(rng)
    standard = [
        gen.laplace(0.0, 1.0, (draws, *a.shape)) if mechanism == "laplace"
        else gen.normal(size=(draws, *a.shape))
        for a in answers[len(fixed):]
    ]  # fmt: skip
    cat, geo = table.categories, table.geography
    chosen = cat.leaves if categories is None else cat.index(list(categories))
    truth = table.counts()[:, chosen].astype(np.float64)
    totals = table.counts()[:, cat.root]
    groups = _size_groups(totals, geo.levels, bins)
    full = category_matrix(cat).T[:, chosen].astype(np.float64)  # detailed -> chosen nodes

    def level_means(shares: FloatArray) -> FloatArray:
        work = _workload(fixed, queries, mechanism, shares)
        values: list[Any] = [np.broadcast_to(a, (draws, *a.shape)) for a in answers[: len(fixed)]]
        for a, z, m in zip(
            answers[len(fixed) :], standard, work.measurements[len(fixed) :], strict=True
        ):
            values.append(a + z * m.mechanism.noise_scale)  # type: ignore[union-attr]
        draw = TableMeasurements(table, work, tuple(values), False)
        design = ReleaseDesign(table, work, postprocess)
        released = design.solve(draw, rng=rng) @ full  # (draws, geounits, chosen)
        per_node = np.abs(released - truth).mean(axis=(0, 2))
        return _binned_means(per_node, groups)

    return level_means


def _workload(
    fixed: list[Measurement], queries: Sequence[tuple[int, Query]], mechanism: str, shares: Any
) -> Workload:
    noisy = [
        Measurement(d, q, _mechanism(mechanism, float(b)))
        for (d, q), b in zip(queries, shares, strict=True)
    ]
    return Workload([*fixed, *noisy])


def _size_groups(
    totals: NumArray, levels: Sequence[IntArray], bins: Sequence[int]
) -> list[list[IntArray]]:
    """Each level's nodes grouped by the size bin of their true total (empty bins left
    out): the groups both the hierarchy's and the table's objectives average over."""
    edges = np.asarray(bins)
    size_bin = np.searchsorted(edges, totals, side="right") - 1
    return [
        [members for b in range(edges.size) if (members := nodes[size_bin[nodes] == b]).size]
        for nodes in levels
    ]


def _binned_means(per_node: FloatArray, groups: list[list[IntArray]]) -> FloatArray:
    """Each level's mean over its size bins of the bins' mean error (each bin counts once)."""
    return np.array([np.mean([per_node[g].mean() for g in level]) for level in groups])


def plan_on_simplex(
    level_terms: Callable[[FloatArray], FloatArray],
    w: FloatArray,
    *,
    total: float,
    compare: Sequence[float] | None,
    rng: int,
    progress: Callable[[], object] | None = None,
    shares: int | None = None,
    term: str = "mean_mae",
) -> BudgetPlan:
    """Minimise ``w @ level_terms(split)`` over splits of ``total`` into ``shares`` parts
    (default one per level; Nelder-Mead on a softmax parametrisation; every share kept at
    >= 1e-4 of the total); ``progress`` is called once per split evaluated."""
    from scipy import optimize

    if not np.isfinite(total) or total <= 0:
        raise ValidationError(f"`total` must be positive and finite; got {total!r}")
    L = w.size if shares is None else int(shares)
    floor = 1e-4 * total
    split = given_split(compare, L, total)  # checked before any work

    def shares_of(z: FloatArray) -> FloatArray:
        x = np.exp(np.r_[0.0, z] - np.max(np.r_[0.0, z]))
        out: FloatArray = floor + (total - L * floor) * x / x.sum()
        return out

    terms = once_per_split(level_terms)

    def objective(z: FloatArray) -> float:
        if progress is not None:
            progress()
        return float(w @ terms(shares_of(z)))

    start = np.zeros(L - 1)
    equal = objective(start)
    best_z, best = start, equal
    gen = np.random.default_rng(rng + 1)
    if L > 1:
        for z0 in [start, *gen.normal(0.0, 1.0, (2, L - 1))]:
            simplex = np.vstack([z0, z0 + np.eye(L - 1)])  # wide first steps: a stepwise
            res = optimize.minimize(  # objective (decisions) is flat at small scales
                objective,
                z0,
                method="Nelder-Mead",
                options={"xatol": 1e-4, "fatol": 1e-9, "initial_simplex": simplex},
            )
            if res.fun < best:
                best_z, best = res.x, float(res.fun)
    given = None if split is None else float(w @ terms(split))
    planned = shares_of(best_z)
    return BudgetPlan(planned, best, equal, given, terms(planned), term)

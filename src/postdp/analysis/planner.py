"""A budget planner: the split of a total privacy budget across the levels of a hierarchy
that minimises a weighted sum of the exact (P) variances.

For a split b_1 .. b_L (epsilon or rho per level, summing to the total), each level gets
the family's mechanism at b_d, (P) is generalised least squares with the inverse noise
variances as weights, and the objective is sum_d w_d x mean (P) variance of level d's
nodes, computed exactly by the two-pass recursion (``postprocess.table_variance``) from
the design alone: planning costs no privacy. The optimum is found by SLSQP on the simplex
from several starts (the equal split among them) and kept only if it is no worse than every
start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace, Mechanism
from postdp.tables import Query, Table, Workload

__all__ = ["BudgetPlan", "budget_frontier", "plan_budget"]

Family = Literal["geometric", "laplace", "gaussian", "discrete-gaussian"]
_PURE = {"geometric": Geometric, "laplace": Laplace}
_ZCDP = {"gaussian": Gaussian, "discrete-gaussian": DiscreteGaussian}


@dataclass(frozen=True)
class BudgetPlan:
    """The planner's split and how it compares.

    Attributes
    ----------
    shares : ndarray, shape (n_levels,)
        Budget per level (epsilon, or rho for the Gaussian families), root first.
    objective : float
        Weighted (P) variance at ``shares``.
    equal_objective : float
        The same at the equal split.
    given_objective : float or None
        The same at the split the user gave (``compare``), if any.
    level_variances : ndarray, shape (n_levels,)
        Each level's term of the objective at ``shares``: the mean (P) variance of its
        nodes (or, for :func:`plan_mae_budget`, their size-binned mean absolute error).
    term : str, default "mean_variance"
        What a level's term is, as :meth:`to_frame` names its column (``mean_mae`` for
        :func:`plan_mae_budget`, ``expected_loss`` for the decision planners).

    Examples
    --------
    >>> plan = BudgetPlan(np.array([1.0, 2.0]), 3.0, 4.0, None, np.array([1.5, 1.5]))
    >>> plan.to_frame()[["budget", "share"]].round(3).to_numpy().tolist()
    [[1.0, 0.333], [2.0, 0.667]]
    """

    shares: FloatArray
    objective: float
    equal_objective: float
    given_objective: float | None
    level_variances: FloatArray
    term: str = "mean_variance"

    def verdict(self, *, corner: float = 0.01) -> str:
        """Whether the split is at a corner of the simplex, in words, and what that implies.

        Parameters
        ----------
        corner : float, default 0.01
            A part that gets less than this fraction of the total is at a corner.

        Returns
        -------
        str
            ``"at a corner: ..."`` or ``"interior split: ..."``.

        Examples
        --------
        >>> BudgetPlan(np.array([1e-4, 1e-4, 0.9998]), 1.0, 2.0, None, np.ones(3)).verdict()[:12]
        'at a corner:'
        """
        fractions = self.shares / self.shares.sum()
        starved = np.flatnonzero(fractions < corner)
        if not starved.size:
            return f"interior split: every part gets at least {corner:.0%} of the budget"
        parts = ", ".join(str(int(k)) for k in starved)
        return (
            f"at a corner: part(s) {parts} get less than {corner:.0%} of the budget, so their "
            "counts come almost only from the others' noisy answers. The variance objective "
            "alone favours such splits; post-processing (nonnegativity, rounding) biases "
            "small counts most where a level is barely measured, so weigh a mean absolute "
            "error objective before using it."
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per level (or measured query): its ``budget`` (epsilon or rho), its
        ``share`` of the total (a fraction; the shares add up to 1) and its term of the
        objective, named by :attr:`term` (``mean_variance``, ``mean_mae``, ...)."""
        total = float(self.shares.sum())
        return pd.DataFrame(
            {
                "level": np.arange(self.shares.size),
                "budget": self.shares,
                "share": self.shares / total if total > 0 else self.shares,
                self.term: self.level_variances,
            }
        )


def plan_budget(
    over: Hierarchy | Table,
    *,
    total: float,
    mechanism: Family = "geometric",
    weights: Sequence[float] | None = None,
    public_root: bool = False,
    queries: Sequence[tuple[int, Query]] | Workload | None = None,
    categories: Sequence[str] | None = None,
    compare: Sequence[float] | None = None,
    starts: int | None = None,
    rng: int = 0,
) -> BudgetPlan:
    """The split of ``total`` that minimises the weighted (P) variance: a hierarchy's
    levels, or a table's measured (level, query) pairs.

    Parameters
    ----------
    over : Hierarchy or Table
        The geography (a hierarchy of counts), or a table (its geography and category
        tree; its counts are not read).
    total : float
        Total epsilon (geometric, laplace) or rho (gaussian, discrete-gaussian).
    mechanism : {"geometric", "laplace", "gaussian", "discrete-gaussian"}
    weights : sequence of float, optional
        Weight of each geographic level's mean (P) variance, root first (default: the
        leaf level only).
    public_root : bool, default False
        Hierarchies: the root's count is published exactly (an invariant).
    queries : sequence of (int, Query), or Workload
        Tables (required): the measured (level, query) pairs, each to receive a share; or
        a workload, whose noisy measurements are the pairs and whose public ones are
        published exactly.
    categories : sequence of str, optional
        Tables: category node ids whose variances count (default: the detailed cells).
    compare : sequence of float, optional
        A split to evaluate too (e.g. the one in use); it must spend exactly ``total``.
    starts : int, optional
        Starting points of the optimiser (default 6 for hierarchies, 4 for tables).
    rng : int, default 0
        Seed of the random starts.

    Returns
    -------
    BudgetPlan
        ``shares`` per level (hierarchies) or in the order of ``queries`` (tables).

    Examples
    --------
    >>> from postdp.data import synthetic_table
    >>> from postdp.tables import Query
    >>> t = synthetic_table((2, 3), leaf_mean=100, rng=0)
    >>> qs = [(d, Query.detailed(t.categories)) for d in range(3)]
    >>> plan_budget(t, queries=qs, total=3.0, mechanism="gaussian", starts=1).shares.size
    3
    """
    if isinstance(over, Table):
        if public_root:
            raise ValidationError("`public_root` is for hierarchies; give a table's public queries")
        if queries is None:
            raise ValidationError("`queries` is required for a table: the (level, query) pairs")
        public: list[tuple[int, Query]] = []
        if isinstance(queries, Workload):
            public = [(m.level, m.query) for m in queries.measurements if m.public]
            queries = [(m.level, m.query) for m in queries.measurements if not m.public]
        return _plan_queries(
            queries,
            over,
            total=total,
            mechanism=mechanism,
            weights=weights,
            categories=categories,
            public=public,
            compare=compare,
            starts=4 if starts is None else starts,
            rng=rng,
        )
    if not isinstance(over, Hierarchy):
        raise TypeError(f"`over` must be a Hierarchy or a Table; got {type(over).__name__}")
    if queries is not None or categories is not None:
        raise ValidationError("`queries` and `categories` are for tables")
    return _plan_levels(
        over,
        total=total,
        mechanism=mechanism,
        weights=weights,
        public_root=public_root,
        compare=compare,
        starts=6 if starts is None else starts,
        rng=rng,
    )


def _plan_levels(
    hierarchy: Hierarchy,
    *,
    total: float,
    mechanism: Family = "geometric",
    weights: Sequence[float] | None = None,
    public_root: bool = False,
    compare: Sequence[float] | None = None,
    starts: int = 6,
    rng: int = 0,
) -> BudgetPlan:
    """The split of ``total`` across levels that minimises the weighted (P) variance.

    Parameters
    ----------
    hierarchy : Hierarchy
    total : float
        Total epsilon (geometric, laplace) or rho (gaussian, discrete-gaussian).
    mechanism : {"geometric", "laplace", "gaussian", "discrete-gaussian"}
    weights : sequence of float, optional
        Weight of each level's mean (P) variance in the objective (default: the leaves'
        level only, e.g. the counties).
    public_root : bool, default False
        The root's count is published exactly (an invariant).
    compare : sequence of float, optional
        A split to evaluate too (e.g. the one in use); it must spend exactly ``total``.
    starts : int, default 6
        Starting points of the optimiser (the equal split and random splits).
    rng : int, default 0
        Seed of the random starts.

    Returns
    -------
    BudgetPlan

    Examples
    --------
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> plan = plan_budget(h, total=2.0, mechanism="gaussian", weights=[1.0, 0.0])
    >>> bool(plan.objective <= plan.equal_objective)
    True
    """
    L = hierarchy.n_levels
    if mechanism not in (*_PURE, *_ZCDP):
        raise ValidationError(f"unknown mechanism {mechanism!r}")
    w = np.zeros(L) if weights is None else np.asarray(weights, dtype=float)
    if weights is None:
        w[-1] = 1.0
    if w.shape != (L,) or (w < 0).any() or w.sum() <= 0:
        raise ValidationError(f"`weights` needs {L} nonnegative values, not all 0; got {weights}")

    def level_means(shares: FloatArray) -> FloatArray:
        from postdp.postprocess.variances import hierarchy_variances

        mechs = [_mechanism(mechanism, float(b)) for b in shares]
        var = hierarchy_variances(hierarchy, mechs, public_root=public_root)
        return np.array([var[nodes].mean() for nodes in hierarchy.levels])

    return _optimise(level_means, w, L, total, compare, starts, rng)


def budget_frontier(
    totals: Sequence[float],
    hierarchy: Hierarchy,
    *,
    mechanism: Family = "geometric",
    weights: Sequence[float] | None = None,
    public_root: bool = False,
    compare: Sequence[float] | None = None,
) -> pd.DataFrame:
    """The planner's objective against the total budget: the frontier of accuracy for privacy.

    Parameters
    ----------
    totals : sequence of float
        Total budgets (epsilon or rho) to plan for.
    hierarchy : Hierarchy
    mechanism, weights, public_root
        As for :func:`plan_budget`.
    compare : sequence of float, optional
        Relative split (shares of the total, any scale) to evaluate at every total too.

    Returns
    -------
    pandas.DataFrame
        One row per total: ``total``, ``optimal`` and ``equal`` objectives, ``given`` (the
        ``compare`` split scaled to the total, NaN without it), and ``budget_<d>`` per level:
        the budget (epsilon or rho, not a fraction) the plan gives level ``d`` at that total.

    Examples
    --------
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> f = budget_frontier([0.5, 1.0], h, mechanism="gaussian", weights=[1.0, 1.0])
    >>> bool((f["optimal"] <= f["equal"]).all()), bool(f["optimal"].is_monotonic_decreasing)
    (True, True)
    """
    values = [float(t) for t in totals]
    if not values:
        raise ValidationError("`totals` must hold at least one budget")
    relative = None
    if compare is not None:
        relative = np.asarray(compare, dtype=float)
        if relative.shape != (hierarchy.n_levels,) or (relative <= 0).any():
            raise ValidationError(
                f"`compare` needs {hierarchy.n_levels} positive values; got {compare}"
            )
        relative = relative / relative.sum()
    rows = []
    for total in sorted(values):
        plan = plan_budget(
            hierarchy,
            total=total,
            mechanism=mechanism,
            weights=weights,
            public_root=public_root,
            compare=None if relative is None else (relative * total).tolist(),
        )
        row = {
            "total": total,
            "optimal": plan.objective,
            "equal": plan.equal_objective,
            "given": np.nan if plan.given_objective is None else plan.given_objective,
        }
        row.update({f"budget_{d}": float(b) for d, b in enumerate(plan.shares)})
        rows.append(row)
    return pd.DataFrame(rows)


def _plan_queries(
    queries: Sequence[tuple[int, Query]],
    table: Table,
    *,
    total: float,
    mechanism: Family,
    weights: Sequence[float] | None,
    categories: Sequence[str] | None,
    public: Sequence[tuple[int, Query]],
    compare: Sequence[float] | None,
    starts: int,
    rng: int,
) -> BudgetPlan:
    """The table case of :func:`plan_budget`: the split of ``total`` across a table's
    measured queries that minimises (P)'s variance.

    Each (geographic level, query) pair gets a share b_k of the total (queries at one level
    compose sequentially, levels too: the shares add up to the table's budget); (P) is
    generalised least squares over every measurement, and the objective is
    Σ_d w_d x the mean exact variance (``TableProjector.variances``) of the chosen category
    nodes of level d's geounits, from the design alone. ``public`` pairs are published
    exactly and cost nothing.
    """
    from postdp.postprocess import TableProjector
    from postdp.tables import Measurement, Workload

    geo, cat = table.geography, table.categories
    K, L = len(queries), geo.n_levels
    if K == 0:
        raise ValidationError("`queries` must name at least one (level, query) to measure")
    w = np.zeros(L) if weights is None else np.asarray(weights, dtype=float)
    if weights is None:
        w[-1] = 1.0
    if w.shape != (L,) or (w < 0).any() or w.sum() <= 0:
        raise ValidationError(f"`weights` needs {L} nonnegative values, not all 0; got {weights}")
    chosen = cat.leaves if categories is None else cat.index(list(categories))
    fixed = [Measurement(d, q, None) for d, q in public]

    def level_means(shares: FloatArray) -> FloatArray:
        work = Workload(
            fixed
            + [
                Measurement(d, q, _mechanism(mechanism, float(b)))
                for (d, q), b in zip(queries, shares, strict=True)
            ]
        )
        var = TableProjector(table, work).variances()[:, chosen]
        return np.array([var[nodes].mean() for nodes in geo.levels])

    return _optimise(level_means, w, K, total, compare, starts, rng)


def _optimise(
    level_means: Callable[[FloatArray], FloatArray],
    w: FloatArray,
    K: int,
    total: float,
    compare: Sequence[float] | None,
    starts: int,
    rng: int,
) -> BudgetPlan:
    """SLSQP on the simplex of K shares from the equal split and random starts; every share
    kept at >= 1e-4 of the total (so every query stays measured)."""
    from scipy import optimize

    if not np.isfinite(total) or total <= 0:
        raise ValidationError(f"`total` must be positive and finite; got {total!r}")
    floor = 1e-4 * total
    split = given_split(compare, K, total)  # checked before any work
    terms = once_per_split(level_means)

    def shares_of(x: FloatArray) -> FloatArray:
        out: FloatArray = floor + (total - K * floor) * np.abs(x) / np.abs(x).sum()
        return out

    def objective(x: FloatArray) -> float:
        return float(w @ terms(shares_of(x)))

    gen = np.random.default_rng(rng)
    points = [np.full(K, 1.0 / K)] + [gen.dirichlet(np.ones(K)) for _ in range(max(0, starts - 1))]
    best_x, best = points[0], objective(points[0])
    equal = best
    for x0 in points if K > 1 else []:
        res = optimize.minimize(  # type: ignore[call-overload]
            objective,
            x0,
            method="SLSQP",
            bounds=[(1e-9, 1.0)] * K,
            constraints=[{"type": "eq", "fun": lambda x: float(np.sum(x) - 1.0)}],
            options={"ftol": 1e-12, "maxiter": 200},
        )
        value = objective(res.x)
        if value < best:
            best_x, best = res.x, value
    given = None if split is None else float(w @ terms(split))
    shares = shares_of(best_x)
    return BudgetPlan(shares, best, equal, given, terms(shares))


def once_per_split(
    evaluate: Callable[[FloatArray], FloatArray],
) -> Callable[[FloatArray], FloatArray]:
    """``evaluate`` computed once per split (the optimiser asks for some splits again: the
    start, its result, the final split); the planners' objectives are deterministic."""
    known: dict[bytes, FloatArray] = {}

    def terms(shares: FloatArray) -> FloatArray:
        key = np.asarray(shares, dtype=float).tobytes()
        if key not in known:
            known[key] = evaluate(shares)
        return known[key]

    return terms


def given_split(compare: Sequence[float] | None, K: int, total: float) -> FloatArray | None:
    """The split to compare with, checked: K positive budgets that spend exactly ``total``
    (a split that spends more would look better than the optimum)."""
    if compare is None:
        return None
    split = np.asarray(compare, dtype=float)
    if split.shape != (K,) or not np.isfinite(split).all() or (split <= 0).any():
        raise ValidationError(f"`compare` needs {K} positive values; got {list(compare)}")
    spent = float(split.sum())
    if abs(spent - total) > 1e-9 * total:
        raise ValidationError(
            f"`compare` spends {spent:.6g}, not the total {total:.6g}: a split to compare "
            "must spend the same budget"
        )
    return split


def _mechanism(family: str, budget: float) -> Mechanism:
    if family in _PURE:
        return _PURE[family](epsilon=budget)
    return _ZCDP[family](rho=budget)

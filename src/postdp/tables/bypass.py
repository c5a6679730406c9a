"""The second stage of the Census Bureau's optimised spine: per-geounit budgets, a parent with
a single child bypassed (``shared/research/pl94-2020-design.md`` section 1.5).

A geounit whose only child holds the same persons gains nothing from two measurements of
one histogram. The 2020 production spine (``optimize_spine.py``, ``bypass_geounit``) gives
such a geounit its own budget plus its child's and the child none, from the level above
the blocks up to the counties, so a chain of only children is measured once, at its top,
with the budget of the whole chain. The production optimised each county's subtree on its
own (``define_spines.call_opt_spine`` groups the blocks by state, AIAN branch and county),
so a state with one county (the District) keeps both budgets.

Every geounit keeps its level's queries and their shares (the production engine multiplies
each query's share of its level by the geounit's own budget,
``engine_utils.getAdjustedInverseScalePerQuery``), so a geounit's budget is its level's
times a factor s: its noisy answers have the variance of its level's
divided by s, and it has none when s is 0. Every leaf's path to the root keeps the sum of
its budgets, which is why the privacy cost is unchanged.

The production code has a second rule (a parent with several children dissolved into one
geounit per child when the grandparent stays under ``bypass_cutoff`` = 150 children and
2 min(child budget) >= (children - 1) x parent budget), but ``bypassing_improves_parent``
applies it only to pure-DP mechanisms: with the 2020 discrete Gaussian
(``table_reader.py``: ``epsilon_delta`` is True for it) only single children were bypassed,
which is all this module does.
"""

from __future__ import annotations

import numpy as np

from postdp._typing import ArrayLike, BoolArray, FloatArray, IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables._table import Table
from postdp.tables.workload import Workload

__all__ = [
    "check_budget_scale",
    "level_rho",
    "only_children",
    "only_children_unmeasured",
    "single_child_bypass",
    "uniform_budget",
]

_SLACK = 1e-12  # relative: a path's budget may exceed its level sum by float rounding only


def level_rho(workload: Workload, n_levels: int) -> FloatArray:
    """Each geographic level's zero-concentrated budget rho: the sum over its noisy
    measurements (refused if one of them costs epsilon, pure DP)."""
    out = np.zeros(n_levels)
    for m in workload.measurements:
        cost = workload.cost(m)
        if cost.epsilon:
            raise ValidationError(
                f"query {m.query.name!r} at level {m.level} costs epsilon (pure DP): "
                "per-geounit budgets need zero-concentrated mechanisms (Gaussian noise)"
            )
        if 0 <= m.level < n_levels:
            out[m.level] += cost.rho
    return out


def single_child_bypass(table: Table, workload: Workload, *, top: int = 2) -> FloatArray:
    """Per-geounit budget factors of the production spine's single-child bypass.

    Parameters
    ----------
    table : Table
        Its geography (the counts are not read).
    workload : Workload
        Zero-concentrated measurements (Gaussian or discrete Gaussian).
    top : int, default 2
        The highest level whose geounits may take their only child's budget: the counties
        of the 2020 spine (US > State > County > ...; 3 on the AIAN spine of
        :func:`~postdp.tables.aian_branches`, 1 for a table rooted at a state). The levels
        above keep their budgets, as in production.

    Returns
    -------
    ndarray, shape (geography.n,)
        In id order, each geounit's multiple of its level's budget, for
        ``measure(..., budget_scale=)``: 1 for most, 0 for a geounit whose budget went to
        its parent, (rho_d + rho_{d+1} s_child) / rho_d for a geounit at level d that took
        its only child's.

    Raises
    ------
    ValidationError
        If a measurement costs epsilon (pure DP), or ``top`` is not a level below the root.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "c1", "c2", "b1", "b2", "b3"],
    ...                              [None, "S", "S", "c1", "c2", "c2"])
    >>> cat = Hierarchy.from_parents(["all"], [None])
    >>> q = Query.detailed(cat)
    >>> w = Workload([Measurement(d, q, Gaussian(rho=r)) for d, r in [(0, 1), (1, 2), (2, 1)]])
    >>> t = Table(geo, cat, [[1], [2], [3]])  # c1 has one block
    >>> single_child_bypass(t, w, top=1).tolist()
    [1.0, 1.5, 1.0, 0.0, 1.0, 1.0]
    """
    geo = table.geography
    if isinstance(top, bool) or int(top) != top or top < 1:
        raise ValidationError(f"`top` must be a level below the root (>= 1); got {top!r}")
    rho = level_rho(workload, geo.n_levels)
    scale = np.ones(geo.n)
    n_kids = np.bincount(geo.parent[geo.parent >= 0], minlength=geo.n)
    for d in range(geo.n_levels - 2, int(top) - 1, -1):  # from above the leaves up to top
        if rho[d] <= 0:
            continue
        units = geo.levels[d]
        units = units[n_kids[units] == 1]
        if not units.size:
            continue
        child = np.full(geo.n, -1, dtype=np.int64)
        kids = np.flatnonzero(np.isin(geo.parent, units))
        child[geo.parent[kids]] = kids
        only = child[units]
        scale[units] = (rho[d] * scale[units] + rho[d + 1] * scale[only]) / rho[d]
        scale[only] = 0.0
    return scale


def check_budget_scale(
    scale: ArrayLike | None, geography: Hierarchy, workload: Workload, *, spend: bool = True
) -> FloatArray | None:
    """``scale`` as a float array (None when absent or all 1), refused unless it has one
    finite factor >= 0 per geounit and, when the factors are to be spent (``spend``: before
    drawing), the workload is zero-concentrated and no leaf's path to the root spends more
    than the levels' budgets summed (the workload's cost)."""
    if scale is None:
        return None
    s = np.asarray(scale, dtype=np.float64)
    if s.shape != (geography.n,):
        raise ValidationError(
            f"`budget_scale` must hold one factor per geounit ({geography.n}); got shape {s.shape}"
        )
    if not np.isfinite(s).all() or (s < 0).any():
        raise ValidationError("`budget_scale` must hold finite factors >= 0")
    if (s == 1.0).all():
        return None
    if not spend:
        return s
    rho = level_rho(workload, geography.n_levels)
    path = np.zeros(geography.n)
    for d, nodes in enumerate(geography.levels):
        above = geography.parent[nodes]
        path[nodes] = np.where(above >= 0, path[np.maximum(above, 0)], 0.0) + rho[d] * s[nodes]
    total = float(rho.sum())
    if (path[geography.leaves] > total * (1 + _SLACK)).any():
        raise ValidationError(
            "`budget_scale` spends more than the workload's budget on some leaf's path to "
            "the root (each path's factors times its levels' rho must sum to at most the "
            "levels' rho summed)"
        )
    return s


def only_children(geography: Hierarchy, nodes: IntArray) -> BoolArray:
    """Whether each geounit of ``nodes`` is its parent's only child (the root is not)."""
    kids = np.bincount(geography.parent[geography.parent >= 0], minlength=geography.n)
    above = geography.parent[nodes]
    out: BoolArray = (above >= 0) & (kids[np.maximum(above, 0)] == 1)
    return out


def only_children_unmeasured(
    geography: Hierarchy, scale: FloatArray | None, who: str, *, root_fixed: bool = False
) -> FloatArray | None:
    """``scale``, refused where a geounit with no budget is the root (unless its histogram
    is fixed from outside, ``root_fixed``) or has siblings (a family split by least squares
    would then have no unique answer)."""
    if scale is None:
        return None
    gone = np.flatnonzero(scale == 0)
    if root_fixed:
        gone = gone[geography.parent[gone] >= 0]
    if not only_children(geography, gone).all():
        raise ValidationError(
            f"{who}: a geounit with no noisy answers (no budget, as one the spine bypassed) "
            "must be an only child, its parent's persons; some is the root or has siblings"
        )
    return scale


def uniform_budget(measurements: object, who: str) -> None:
    """Refuse measurements with per-geounit budgets in an estimator that weighs every
    geounit of a level alike."""
    if getattr(measurements, "budget_scale", None) is not None:
        raise ValidationError(
            f"{who} weighs every geounit of a level alike; these measurements have "
            "per-geounit budgets (budget_scale): use an estimator that weighs each geounit by "
            "its own (per_geounit in postdp.postprocess.estimators())"
        )

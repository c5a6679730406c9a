"""Budget planning for a decision: the split that misallocates the fewest dollars.

Where counts feed a formula, the loss that matters is the money that goes to the wrong
place, not the counts' error. For a proportional allotment (Title I style,
``allot(x, a) = amount * a_i x_i / sum_j a_j x_j``, seed 002) over the leaves of a
hierarchy, the dollars misallocated by one release are half the L1 distance between the
allotment of the released leaves and that of the true leaves (every misplaced dollar is
missing somewhere and extra elsewhere); its expectation combines the post-processing's bias
(seed 002's Hessian-trace term) and the noise's variance. It is estimated on common random
numbers and minimised over the per-level splits by the Monte Carlo planner of
:mod:`postdp.analysis.planner_mc` (continuous noise; a study on the true counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.analysis.planner import BudgetPlan
from postdp.analysis.planner_mc import crn_releases, plan_on_simplex
from postdp.decisions.allotment import allot
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["plan_allotment_budget"]


def plan_allotment_budget(
    hierarchy: Hierarchy,
    postprocess: str,
    *,
    total: float,
    multipliers: ArrayLike | None = None,
    amount: float = 1.0,
    mechanism: Literal["laplace", "gaussian"] = "laplace",
    public: Sequence[str] | None = None,
    draws: int = 200,
    compare: Sequence[float] | None = None,
    rng: int = 0,
) -> BudgetPlan:
    """The per-level split of ``total`` minimising the expected dollars misallocated.

    Parameters
    ----------
    hierarchy : Hierarchy
        Holds the true counts; the allotment is over its leaves.
    postprocess : str
        The release chain, e.g. ``"project-nonneg"``. A draw whose released leaves have
        weighted total 0 (the formula cannot allot) counts as the whole amount lost.
    total : float
        Epsilon (laplace) or rho (gaussian) to split across the levels.
    multipliers : array_like, shape (n_leaves,), optional
        The formula's a_i (default: 1 for every leaf).
    amount : float, default 1
        Money distributed (1 gives shares of the pot).
    mechanism : {"laplace", "gaussian"}
    public : sequence of str, optional
    draws : int, default 200
        Common random draws.
    compare : sequence of float, optional
        A split to evaluate too.
    rng : int, default 0

    Returns
    -------
    BudgetPlan
        ``objective`` in units of ``amount``; ``level_variances`` holds the loss on the
        leaf level and 0 elsewhere.

    Examples
    --------
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> plan = plan_allotment_budget(h, "project-nonneg", total=1.0, amount=1000, draws=100)
    >>> bool(plan.objective <= plan.equal_objective)
    True
    """
    leaves = hierarchy.leaves
    a = np.ones(leaves.size) if multipliers is None else np.asarray(multipliers, dtype=float)
    if a.shape != (leaves.size,) or not np.isfinite(a).all() or (a <= 0).any():
        raise ValidationError(
            f"`multipliers` needs {leaves.size} positive values, one per leaf; got shape {a.shape}"
        )
    releases = crn_releases(hierarchy, postprocess, mechanism, public, draws, rng)
    assert hierarchy.counts is not None  # crn_releases checked it
    truth = allot(hierarchy.counts[leaves], a, amount=amount)
    L = hierarchy.n_levels

    def terms(shares: FloatArray) -> FloatArray:
        released = releases(shares)[:, leaves]
        usable = (released * a).sum(axis=1) > 0
        loss = np.full(released.shape[0], float(amount))  # nothing can be allotted: all lost
        if usable.any():
            money = allot(released[usable], a, amount=amount)
            loss[usable] = 0.5 * np.abs(money - truth).sum(axis=1)
        out = np.zeros(L)
        out[-1] = loss.mean()
        return out

    w = np.zeros(L)
    w[-1] = 1.0
    return plan_on_simplex(terms, w, total=total, compare=compare, rng=rng)

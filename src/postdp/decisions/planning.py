"""Budget planning for decisions: the split that misallocates the fewest dollars, or that
flips the fewest determinations.

Where counts feed a formula, the loss that matters is the money that goes to the wrong
place, not the counts' error. For a proportional allotment (Title I style,
``allot(x, a) = amount * a_i x_i / sum_j a_j x_j``, [fioretto2021]) over the leaves of a
hierarchy, the dollars misallocated by one release are half the L1 distance between the
allotment of the released leaves and that of the true leaves (every misplaced dollar is
missing somewhere and extra elsewhere); its expectation combines the post-processing's bias
([fioretto2021]'s Hessian-trace term) and the noise's variance. It is estimated on common random
numbers and minimised over the per-level splits by the Monte Carlo planner of
:mod:`postdp.analysis.planner_mc` (continuous noise; a study on the true counts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.analysis.planner import BudgetPlan
from postdp.analysis.planner_mc import crn_releases, plan_on_simplex
from postdp.decisions.allotment import allot
from postdp.decisions.rules import Rule
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["plan_allotment_budget", "plan_decision_budget"]


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
    return plan_on_simplex(terms, w, total=total, compare=compare, rng=rng, term="expected_loss")


def plan_decision_budget(
    data: Mapping[str, ArrayLike],
    rule: Rule,
    *,
    total: float,
    mechanism: Literal["laplace", "gaussian"] = "laplace",
    postprocess: str | None = None,
    draws: int = 200,
    compare: Sequence[float] | None = None,
    rng: int = 0,
) -> BudgetPlan:
    """The split of ``total`` across a rule's features minimising expected flipped decisions.

    Each feature (a count per record, e.g. [fioretto2021]'s Section 203 x^s, x^sp, x^spe per
    jurisdiction) is measured once with its share of the budget (the features are queries on
    the same people: sequential composition, the shares add up to the total); the rule is
    evaluated on the noisy, optionally post-processed features, and the objective is the
    expected number of records whose determination differs from the one on the true
    counts. Common random numbers make it a deterministic function of the split (the
    Monte Carlo planner of :mod:`postdp.analysis.planner_mc`; continuous noise).

    Parameters
    ----------
    data : mapping of str to array_like, shape (n,)
        True counts of every feature the rule reads (in the order of the shares).
    rule : Rule
    total : float
        Epsilon (laplace) or rho (gaussian).
    mechanism : {"laplace", "gaussian"}
    postprocess : str, optional
        Element-wise steps applied to each noisy feature (``"clamp"``, ``"modified:T=2"``).
    draws : int, default 200
    compare : sequence of float, optional
        A split (one share per feature) to evaluate too.
    rng : int, default 0

    Returns
    -------
    BudgetPlan
        ``shares`` per feature in the order of ``data``; ``objective`` in expected flipped
        determinations (``level_variances[0]`` holds it, the rest 0).

    Examples
    --------
    >>> from postdp.decisions import Threshold
    >>> data = {"x": [50.0, 95.0, 150.0], "y": [10.0, 10.0, 10.0]}
    >>> plan = plan_decision_budget(data, Threshold("x", 100), total=1.0, draws=100)
    >>> bool(plan.shares[0] > plan.shares[1])  # the rule reads x only
    True
    """
    flips = _flips(data, rule, mechanism, postprocess, draws, rng)
    K = len(data)

    def terms(shares: FloatArray) -> FloatArray:
        out = np.zeros(K)
        out[0] = flips(shares)
        return out

    w = np.zeros(K)
    w[0] = 1.0
    return plan_on_simplex(terms, w, total=total, compare=compare, rng=rng, term="flip_rate")


def _flips(
    data: Mapping[str, ArrayLike],
    rule: Rule,
    mechanism: str,
    postprocess: str | None,
    draws: int,
    rng: int,
) -> Callable[[FloatArray], float]:
    """Expected flipped determinations as a function of the per-feature split, on common
    random numbers."""
    from postdp.mechanisms import Gaussian, Laplace
    from postdp.postprocess import ElementwiseChain

    if mechanism not in ("laplace", "gaussian"):
        raise ValidationError(f"`mechanism` must be 'laplace' or 'gaussian'; got {mechanism!r}")
    if draws < 10:
        raise ValidationError(f"`draws` must be at least 10; got {draws}")
    names = list(data)
    if not names:
        raise ValidationError("`data` must hold at least one feature")
    values = {k: _validation.real_array(k, data[k]).astype(np.float64) for k in names}
    truth = rule(values)
    gen = np.random.default_rng(rng)
    shape = (draws, truth.size)
    standard = {
        k: gen.laplace(0.0, 1.0, shape) if mechanism == "laplace" else gen.normal(size=shape)
        for k in names
    }
    probe = Laplace(1.0) if mechanism == "laplace" else Gaussian(rho=1.0)
    chain = None if postprocess is None else ElementwiseChain(probe, postprocess)

    def flips(shares: FloatArray) -> float:
        noisy = {}
        for k, b in zip(names, shares, strict=True):
            m = Laplace(float(b)) if mechanism == "laplace" else Gaussian(rho=float(b))
            v = values[k] + standard[k] * m.noise_scale
            noisy[k] = v if chain is None else np.asarray(chain(v, rng=rng), dtype=np.float64)
        return float((rule(noisy) != truth).sum(axis=1).mean())

    return flips

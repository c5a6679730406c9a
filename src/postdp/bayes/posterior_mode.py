"""Bayesian post-processing of a total and its components ([wang2021] §3).

Noise is added to a total N and to its components N_1..N_S. The released total is a
posterior mode of N; the released components are a mode of the multinomial distribution
with that many trials and probabilities proportional to the components' posterior modes —
so they are nonnegative integers that add up to the released total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, IntArray
from postdp.bayes._convolution import SumLaw, sum_law
from postdp.bayes._finucan import finucan_mode
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Budget, Geometric, expand_mechanisms

__all__ = [
    "BayesRelease",
    "bayes_release",
    "bayes_release_hierarchy",
    "posterior_mode_independent",
    "posterior_mode_summed",
]

#: Values of the candidate grid of :func:`posterior_mode_summed` scored at a time (its
#: memory, about 6 arrays of this many numbers, does not grow with the number of releases).
_GRID_VALUES = 1 << 18

Flavor = Literal["independent", "summed"]


def posterior_mode_independent(noisy: ArrayLike) -> IntArray:
    """Posterior mode of a count under a uniform prior on {0, 1, ...}: max(n, 0) (eqs. (8)-(9)).

    Parameters
    ----------
    noisy : array_like of int

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> posterior_mode_independent([-3, 0, 7]).tolist()
    [0, 0, 7]
    """
    return np.maximum(_validation.integer_array("noisy", noisy), 0)


def posterior_mode_summed(
    noisy_total: ArrayLike, noisy_sum: ArrayLike, total_mechanism: Geometric, *, law: SumLaw
) -> IntArray:
    """Posterior mode of the total from its noisy value and the summed noisy components.

    p(N | n, n*) ∝ p(n | N) p(n* | N) on N >= 0 ([wang2021] eq. (10)), with n = N + δ,
    δ ~ DG(a), and n* = Σ n_s = N + η, η distributed as ``law``.

    Parameters
    ----------
    noisy_total : array_like of int, shape (B,)
        n.
    noisy_sum : array_like of int, shape (B,)
        n* = Σ_s n_s.
    total_mechanism : Geometric
        The noise of the total.
    law : SumLaw
        The law of η (:func:`postdp.bayes.sum_law` or the seed's Monte Carlo estimate).

    Returns
    -------
    ndarray of int64, shape (B,)
        The maximiser; both factors are log-concave and peak at n and n*, so it lies
        between them (clamped at 0). Ties go to the smallest value.

    Examples
    --------
    >>> from postdp import Geometric
    >>> from postdp.bayes import sum_law
    >>> law = sum_law([Geometric(5.0)] * 50)       # very precise components
    >>> posterior_mode_summed([900], [1000], Geometric(0.1), law=law).tolist()
    [1000]
    """
    n = np.atleast_1d(_validation.integer_array("noisy_total", noisy_total))
    s = np.atleast_1d(_validation.integer_array("noisy_sum", noisy_sum))
    n, s = np.broadcast_arrays(n, s)
    lo = np.maximum(np.minimum(n, s), 0)
    hi = np.maximum(np.maximum(n, s), 0)
    width = int((hi - lo).max(initial=0)) + 1
    log_a = np.log(total_mechanism.a)
    out: IntArray = np.empty(n.shape, dtype=np.int64)
    rows = max(1, _GRID_VALUES // width)  # a few MB of grid at a time, whatever B
    for start in range(0, n.size, rows):
        part = slice(start, start + rows)
        grid = lo[part, None] + np.arange(width)[None, :]
        score = np.abs(n[part, None] - grid) * log_a + law.logpmf(s[part, None] - grid)
        score = np.where(grid <= hi[part, None], score, -np.inf)
        out[part] = grid[np.arange(grid.shape[0]), np.argmax(score, axis=1)]
    return out


@dataclass(frozen=True, slots=True)
class BayesRelease:
    """Released counts of a total and its components, and the privacy they spent.

    Attributes
    ----------
    total : ndarray of int64, shape (B,)
    components : ndarray of int64, shape (B, S)
        Nonnegative, each row adding up to ``total``.
    budget : Budget
        Noise on the total and on the components both spend ([wang2021] §5): ε of the total
        plus the largest ε of the (disjoint) components.

    Examples
    --------
    >>> from postdp import Geometric
    >>> r = bayes_release([10], [[3, 4, 2]], total_mechanism=Geometric(1.0),
    ...                   component_mechanisms=Geometric(1.0))
    >>> r.total.tolist(), r.components.tolist(), r.budget.epsilon
    ([10], [[3, 5, 2]], 2.0)
    """

    total: IntArray
    components: IntArray
    budget: Budget

    def to_frame(self) -> pd.DataFrame:
        """One row per release: the total and the components N1..NS.

        Examples
        --------
        >>> from postdp import Geometric
        >>> rel = bayes_release([30], [[10, 20]], total_mechanism=Geometric(1.0),
        ...                     component_mechanisms=Geometric(1.0))
        >>> list(rel.to_frame().columns)
        ['total', 'N1', 'N2']
        """
        comps = np.atleast_2d(self.components)
        frame = pd.DataFrame({"total": np.ravel(self.total)})
        for s in range(comps.shape[-1]):
            frame[f"N{s + 1}"] = comps[:, s]
        return frame


def _component_mechanisms(
    mechanisms: Geometric | Sequence[Geometric], S: int
) -> tuple[Geometric, ...]:
    return expand_mechanisms(
        mechanisms, count=S, kind=Geometric, name="component_mechanisms", per="component"
    )


def bayes_release(
    noisy_total: ArrayLike,
    noisy_components: ArrayLike,
    *,
    total_mechanism: Geometric,
    component_mechanisms: Geometric | Sequence[Geometric],
    flavor: Flavor = "independent",
    law: SumLaw | None = None,
) -> BayesRelease:
    """The post-processing algorithm of [wang2021] §3.2, on a batch of noisy draws.

    Parameters
    ----------
    noisy_total : array_like of int, shape (B,)
        n, the noisy total of each draw.
    noisy_components : array_like of int, shape (B, S)
        n_1..n_S.
    total_mechanism : Geometric
        Noise of the total (its ε).
    component_mechanisms : Geometric or sequence of Geometric
        Noise of each component.
    flavor : {"independent", "summed"}, default "independent"
        Step 3 (posterior mode of the total from n alone, §3.1.1) or step 3' (from n and the
        summed noisy components n*, §3.1.2).
    law : SumLaw, optional
        Law of the summed component noise for ``"summed"`` (default: exact convolution).

    Returns
    -------
    BayesRelease

    Notes
    -----
    Steps 3-6: N̂ = posterior mode of the total; N̂_s = max(n_s, 0); θ_s = N̂_s / Σ N̂_s;
    released components = Finucan mode of MD(N̂, θ); released total = N̂. When every
    N̂_s is 0 but N̂ > 0, θ is uniform (the seed leaves this case open).

    Examples
    --------
    >>> from postdp import Geometric
    >>> g = Geometric(1.0)
    >>> bayes_release([11], [[1, 9]], total_mechanism=g, component_mechanisms=g).components
    array([[ 1, 10]])
    """
    n = np.atleast_1d(_validation.integer_array("noisy_total", noisy_total))
    ns = np.atleast_2d(_validation.integer_array("noisy_components", noisy_components))
    if ns.shape[0] != n.shape[0]:
        raise ValidationError(
            f"`noisy_components` must have one row per total; got {ns.shape[0]} rows for "
            f"{n.shape[0]} totals"
        )
    if not isinstance(total_mechanism, Geometric):
        raise TypeError("`total_mechanism` must be a Geometric mechanism")
    mechs = _component_mechanisms(component_mechanisms, ns.shape[1])
    if flavor == "independent":
        total = posterior_mode_independent(n)
    elif flavor == "summed":
        total = posterior_mode_summed(
            n, ns.sum(axis=1), total_mechanism, law=sum_law(mechs) if law is None else law
        )
    else:
        raise ValidationError(f"`flavor` must be 'independent' or 'summed'; got {flavor!r}")
    modes = posterior_mode_independent(ns)
    components = finucan_mode(total, modes)
    # the components are disjoint groups (parallel composition: the largest of their costs),
    # the total is a second query on the same people (sequential composition), [wang2021] §5
    budget = Budget.compose(
        [total_mechanism.privacy_cost(), Budget.pure(max(m.epsilon for m in mechs))]
    )
    return BayesRelease(total, components, budget)


def bayes_release_hierarchy(
    noisy: ArrayLike,
    hierarchy: Hierarchy,
    mechanisms: Geometric | Sequence[Geometric],
    *,
    flavor: Flavor = "independent",
) -> IntArray:
    """Apply the seed-003 release top-down to a whole hierarchy (parent by parent).

    Parameters
    ----------
    noisy : array_like of int, shape (..., n)
        Noisy counts of every node (double geometric noise), draws on leading axes.
    hierarchy : Hierarchy
    mechanisms : Geometric or sequence of Geometric
        One per level (root first), or one for all.
    flavor : {"independent", "summed"}, default "independent"
        How the root's total is estimated; below the root every parent's released value is
        already fixed, so the families only use their components' posterior modes.

    Returns
    -------
    ndarray of int64, same shape
        Nonnegative integers; every parent equals the sum of its children.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "a1", "a2"], [None, "T", "T", "a", "a"])
    >>> bayes_release_hierarchy([20, 12, -1, 5, 9], h, Geometric(1.0)).tolist()
    [20, 20, 0, 7, 13]
    """
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(hierarchy).__name__}")
    arr = _validation.integer_array("noisy", noisy)
    if arr.ndim == 0 or arr.shape[-1] != hierarchy.n:
        raise ValidationError(
            f"`noisy` must have shape (..., {hierarchy.n}); got shape {arr.shape}"
        )
    mechs = expand_mechanisms(mechanisms, count=hierarchy.n_levels, kind=Geometric)
    lay = hierarchy.layout
    X = arr.reshape(-1, hierarchy.n)[:, lay.order]
    B = X.shape[0]
    out = np.zeros_like(X)
    if flavor == "summed" and hierarchy.n_levels > 1:
        kids = slice(lay.bounds[1], lay.bounds[2])
        law = sum_law([mechs[1]] * (lay.bounds[2] - lay.bounds[1]))
        out[:, 0] = posterior_mode_summed(X[:, 0], X[:, kids].sum(axis=1), mechs[0], law=law)
    elif flavor in ("independent", "summed"):
        out[:, 0] = posterior_mode_independent(X[:, 0])
    else:
        raise ValidationError(f"`flavor` must be 'independent' or 'summed'; got {flavor!r}")
    for d in range(hierarchy.n_levels - 1):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        starts, sizes = lay.starts[d], lay.sizes[d]
        G, width = sizes.size, int(sizes.max())
        # pad every family to the widest one with zero-probability slots
        slot = np.arange(c1 - c0) - np.repeat(starts, sizes)
        fam = lay.family(d)
        weights = np.zeros((B, G, width))
        weights[:, fam, slot] = posterior_mode_independent(X[:, c0:c1])
        # a family whose modes are all 0 is split evenly over its own children, as
        # bayes_release splits it, never onto the padding slots
        real = np.zeros((G, width), dtype=bool)
        real[fam, slot] = True
        weights[(weights.sum(axis=2) == 0)[:, :, None] & real] = 1.0
        modes = finucan_mode(out[:, lay.parents[d]], weights)
        out[:, c0:c1] = modes[:, fam, slot]
    result: IntArray = out[:, lay.position].reshape(arr.shape)
    return result

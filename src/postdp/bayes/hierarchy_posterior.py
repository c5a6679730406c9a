"""Credible intervals for every count of a hierarchy released with the seed-003 rule.

``bayes_release_hierarchy`` releases the root as the posterior mode of its noisy count and
then, parent by parent, the children as Finucan's mode given the parent's released value.
Each family is treated here as [wang2021]'s problem (§4): the children's released counts
are the components, the parent's released count the total, observed through the parent
level's double geometric noise; :func:`postdp.bayes.sample_posterior` draws the children's
true counts given the release, and equal-tailed credible intervals are read off. The
root's interval is that of its true count given its noisy count (flat prior on N >= 0).

This is a family-by-family approximation of the joint posterior of the whole tree: each
family conditions on its own parent's released count as if it were that parent's noisy
total (exact for the root's family, whose released total is the clipped noisy total;
approximate below, where a parent's released value is itself a Finucan mode). The coverage
audit of :mod:`postdp.analysis.uncertainty` measures what that costs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from postdp import _rng, _validation
from postdp._intervals import ConfidenceInterval
from postdp._typing import ArrayLike, RNGLike
from postdp.bayes.mcmc import sample_posterior
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Geometric

__all__ = ["hierarchy_credible_intervals"]


def hierarchy_credible_intervals(
    released: ArrayLike,
    hierarchy: Hierarchy,
    mechanisms: Geometric | Sequence[Geometric],
    *,
    level: float = 0.9,
    n_draws: int = 400,
    chains: int = 4,
    rng: RNGLike = None,
) -> ConfidenceInterval:
    """Equal-tailed posterior credible intervals of every node's true count.

    Parameters
    ----------
    released : array_like of int, shape (n,)
        Counts released by :func:`postdp.bayes.bayes_release_hierarchy`.
    hierarchy : Hierarchy
    mechanisms : Geometric or sequence of Geometric
        One per level (root first), or one for all.
    level : float, default 0.9
    n_draws, chains : int
        Kept draws per chain and chains of each family's sampler.
    rng : int, numpy.random.Generator, SeedSequence or None
        Seed of the samplers (the intervals describe a published release: no true count is
        involved, so the study generator costs no privacy).

    Returns
    -------
    ConfidenceInterval
        ``low`` and ``high`` per node (integers as floats), in node order.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> ci = hierarchy_credible_intervals([30, 10, 20], h, Geometric(1.0), n_draws=200, rng=0)
    >>> bool((ci.low <= [30, 10, 20]).all() and ([30, 10, 20] <= ci.high).all())
    True
    """
    r = _validation.integer_array("released", released)
    if r.shape != (hierarchy.n,):
        raise ValidationError(f"`released` must have shape ({hierarchy.n},); got {r.shape}")
    if (r < 0).any():
        raise ValidationError("`released` must be nonnegative (a seed-003 release is)")
    if not 0.0 < level < 1.0:
        raise ValidationError(f"`level` must lie strictly between 0 and 1; got {level!r}")
    if isinstance(mechanisms, Geometric):
        mechs = [mechanisms] * hierarchy.n_levels
    else:
        mechs = list(mechanisms)
    if len(mechs) != hierarchy.n_levels or not all(isinstance(m, Geometric) for m in mechs):
        raise ValidationError(
            f"`mechanisms` needs one Geometric mechanism per level ({hierarchy.n_levels})"
        )
    gen = _rng.as_generator(rng)
    low = np.empty(hierarchy.n)
    high = np.empty(hierarchy.n)
    root = hierarchy.root
    half = _noise_quantile(mechs[0], level)
    low[root], high[root] = max(int(r[root]) - half, 0), int(r[root]) + half
    parent = hierarchy.parent
    for d in range(hierarchy.n_levels - 1):
        kids = hierarchy.levels[d + 1]
        order = np.argsort(parent[kids], kind="stable")
        kids = kids[order]
        starts = np.flatnonzero(np.diff(parent[kids], prepend=-1))
        for family in np.split(kids, starts[1:]):
            if family.size == 1:  # an only child equals its parent
                low[family], high[family] = low[parent[family[0]]], high[parent[family[0]]]
                continue
            res = sample_posterior(
                r[family].tolist(),
                int(r[parent[family[0]]]),
                total_mechanism=mechs[d],
                component_mechanisms=mechs[d + 1],
                n_draws=n_draws,
                chains=chains,
                rng=gen,
            )
            ci = res.credible_intervals(level)
            low[family], high[family] = ci.low, ci.high
    return ConfidenceInterval(low, high, level)


def _noise_quantile(mechanism: Geometric, level: float) -> int:
    """The smallest q with P(|noise| <= q) >= level for double geometric noise."""
    a = mechanism.a
    # P(|Z| <= q) = 1 - 2 a^(q+1) / (1 + a)
    q = np.log((1.0 - level) * (1.0 + a) / 2.0) / np.log(a) - 1.0
    return max(int(np.ceil(q - 1e-12)), 0)

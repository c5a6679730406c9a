"""Adding noise to every count of a hierarchy, level by level, with its privacy budget."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp import _rng, _validation
from postdp._typing import NumArray, RNGLike
from postdp.errors import PrivacyLeakWarning, ValidationError
from postdp.hierarchy._tree import Hierarchy
from postdp.mechanisms import Budget, NoiseMechanism, expand_mechanisms

__all__ = ["NoisyCounts", "add_noise"]


@dataclass(frozen=True, slots=True, eq=False)
class NoisyCounts:
    """Noisy counts of every node of a hierarchy and the privacy they spent.

    Attributes
    ----------
    hierarchy : Hierarchy
        The hierarchy released (it holds the true counts: never publish it).
    values : ndarray, shape (n,)
        Noisy counts in the order of ``hierarchy.ids``.
    mechanisms : tuple of NoiseMechanism
        The mechanism of each level, root first.
    budget : Budget
        Sequential composition of the levels' costs.
    secure : bool
        True when the noise came from OpenDP's release path, False for the study path.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy, add_noise
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> release = add_noise(h, Geometric(epsilon=1.0), secure=False, rng=0)
    >>> release.budget
    Budget(epsilon=2.0, rho=0.0)
    """

    hierarchy: Hierarchy
    values: NumArray
    mechanisms: tuple[NoiseMechanism, ...]
    budget: Budget
    secure: bool

    def to_frame(self, *, include_truth: bool = False, study: bool = False) -> pd.DataFrame:
        """The release as a table: id, parent, depth, noisy count and the level's parameter.

        Parameters
        ----------
        include_truth : bool, default False
            Add the true counts in a ``true_count`` column: an audit table, not a release.
            Its ``path`` column then says ``secure+audit`` (or ``study+audit``) on every row,
            so a file of it is never mistaken for a release.
        study : bool, default False
            Acknowledge that study-path draws are being tabulated (no warning then).

        Warns
        -----
        PrivacyLeakWarning
            When the draws came from the study path (numpy) and ``study`` is not set: such
            a table must not be published. Its ``path`` column says ``study`` either way.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> draw = add_noise(h, Geometric(epsilon=1.0), secure=False, rng=0)
        >>> list(draw.to_frame(study=True).columns)
        ['id', 'parent', 'depth', 'noisy_count', 'mechanism', 'epsilon', 'rho', 'path']
        """
        h = self.hierarchy
        frame = h.to_frame().drop(columns="count", errors="ignore")
        frame["noisy_count"] = self.values
        per_node = [self.mechanisms[d] for d in h.depth]
        frame["mechanism"] = [m.name for m in per_node]
        frame["epsilon"] = [m.privacy_cost().epsilon for m in per_node]
        frame["rho"] = [m.privacy_cost().rho for m in per_node]
        frame["path"] = "secure" if self.secure else "study"
        if not self.secure and not study:
            warnings.warn(
                "these counts were drawn on the study path (numpy): a table of them is not a "
                "private release; draw with secure=True to publish",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        if include_truth:
            if h.counts is None:
                raise ValidationError("`include_truth` needs a hierarchy with true counts")
            frame["true_count"] = h.counts
            frame["path"] = frame["path"] + "+audit"
        return frame


def add_noise(
    hierarchy: Hierarchy,
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism],
    *,
    secure: bool = True,
    rng: RNGLike = None,
) -> NoisyCounts:
    """Add noise to every true count of ``hierarchy``, with one mechanism per level.

    Parameters
    ----------
    hierarchy : Hierarchy
        Must hold true counts.
    mechanisms : NoiseMechanism or sequence of NoiseMechanism
        One mechanism for every level, or one per level (root first).
    secure : bool, default True
        True: the release path (OpenDP's exact samplers seeded by the operating system);
        ``rng`` must then be None. False: the study path on numpy's generator, reproducible
        from ``rng`` but not safe for publishing.
    rng : int, numpy.random.Generator, SeedSequence or None
        Seed of the study path (only with ``secure=False``).

    Returns
    -------
    NoisyCounts

    Notes
    -----
    The nodes of one level are disjoint groups of people, so one level costs one
    application of its mechanism (parallel composition); the levels compose sequentially,
    so the budget is the sum of the levels' costs ([zhu2021],
    census experiments; [wang2021] §5).

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> out = add_noise(h, [Geometric(epsilon=0.5), Geometric(epsilon=1.0)], secure=False, rng=0)
    >>> out.values.shape, str(out.budget)
    ((3,), 'epsilon = 1.5 (pure DP)')
    """
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(hierarchy).__name__}")
    if hierarchy.counts is None:
        raise ValidationError("`hierarchy` has no true counts to add noise to")
    per_level = expand_mechanisms(mechanisms, count=hierarchy.n_levels)
    if secure and rng is not None:
        raise ValidationError(
            f"`rng` must be None on the secure release path; got {rng!r} "
            "(pass secure=False for a reproducible study-path draw)"
        )
    counts = hierarchy.counts
    if any(m.discrete for m in per_level):
        counts = _validation.integer_array("counts", counts)
    discrete = all(m.discrete for m in per_level)
    values = np.empty(hierarchy.n, dtype=np.int64 if discrete else np.float64)
    for mechanism, nodes in zip(per_level, hierarchy.levels, strict=True):
        mechanism._values(counts[nodes])  # every level checked before any noise is drawn
    streams = None if secure else _rng.spawn(rng, hierarchy.n_levels)
    for depth, (mechanism, nodes) in enumerate(zip(per_level, hierarchy.levels, strict=True)):
        if streams is None:
            values[nodes] = mechanism.release(counts[nodes])
        else:
            values[nodes] = mechanism.sample(counts[nodes], rng=streams[depth])
    budget = Budget.compose(m.privacy_cost() for m in per_level)
    return NoisyCounts(hierarchy, values, per_level, budget, secure)

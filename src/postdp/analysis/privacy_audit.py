"""An empirical privacy audit of a whole release pipeline: a statistical lower bound on ε.

The pipeline (noise on every level, then every post-processing step) is run many times on
two neighbouring inputs: D, the true counts, and D', the same with one person added to a
leaf (and so to each of its ancestors) or moved from one leaf to another. For any output
event E, a mechanism that is ε-DP has P(E | D') <= e^ε P(E | D) (and the same the other
way round), so an event whose frequencies differ by more than e^ε shows that the claimed ε
is wrong. This is the auditing recipe of the published DP auditing tools (e.g. Jagielski,
Ullman and Oprea 2020; Nasr et al. 2021): events are chosen on one sample, and their
probabilities are bounded on a second, independent sample with exact Clopper–Pearson
intervals, so the reported bound holds with probability at least 1 - alpha whatever the
selection did.

The candidate events are thresholds on the released values of the nodes whose true counts
differ between D and D', on a weighted sum of them (the weights are the levels' claimed
ε, the shape of the Laplace and geometric likelihood ratios), and on Fisher's discriminant
of the released values of those nodes, their siblings and children, fitted on the selection
sample (it finds a combination of released values that noise does not reach, as when one
level's noise is skipped and a consistent post-processing mixes it with the others).

A lower bound can only show that a design is broken, never prove it private: a correct
design gives bounds at or below its claimed ε, a broken one (a level whose noise is
skipped, noise at half its scale, a sampler with a fixed seed) is flagged once enough
trials are run. A sampler that draws fresh, unpredictable randomness from a weak generator
has the right output law, and no statistical test can tell it from a secure one: that is
what the release path's OpenDP samplers are for.

This module runs the pipeline on numpy's generator (study path) unless ``secure=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from postdp import _rng, _validation
from postdp._typing import FloatArray, IntArray, NumArray, RNGLike
from postdp.analysis.design import ReleaseDesign
from postdp.errors import ValidationError
from postdp.hierarchy import resolve_public
from postdp.mechanisms import Budget

__all__ = ["PrivacyAudit", "audit_privacy"]

#: A release pipeline as a black box: true counts and a generator in, one release out.
Pipeline = Callable[[IntArray, np.random.Generator], NumArray]

_QUANTILES = np.linspace(0.005, 0.995, 61)  # candidate thresholds, as pooled quantiles


@dataclass(frozen=True, slots=True, eq=False)
class PrivacyAudit:
    """The result of :func:`audit_privacy`.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on the pipeline's ε (at ``delta``), valid with probability
        ``1 - alpha``; 0 when no event separated the two inputs.
    claimed_epsilon : float
        The accountant's ε at ``delta`` for this pair of inputs: the design's budget when a
        person is added; for a move, each level's ε counted once per changed count.
    delta, alpha : float
    flagged : bool
        ``epsilon_lower > claimed_epsilon``: the pipeline does not deliver its claim.
    neighbour : str
        ``"add"`` or ``"move"``.
    statistic : str
        The event's statistic: ``"node <id>"``, ``"weighted path sum"`` or
        ``"discriminant"``.
    direction : str
        ``">="`` or ``"<="``; the threshold is given relative to the statistic's value on
        the true counts (``offset``), never as a count.
    offset : float
    hits_high, hits_low : int
        Times the event occurred, on the evaluation sample, for the input that makes it more
        likely and for the other one.
    trials : int
        Runs per input on the evaluation sample (the selection sample is as large).

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> res = audit_privacy(ReleaseDesign(h, Geometric(0.5)), trials=2000, rng=3)
    >>> res.flagged, res.claimed_epsilon
    (False, 1.0)
    """

    epsilon_lower: float
    claimed_epsilon: float
    delta: float
    alpha: float
    flagged: bool
    neighbour: str
    statistic: str
    direction: str
    offset: float
    hits_high: int
    hits_low: int
    trials: int

    def to_frame(self) -> pd.DataFrame:
        """One row with every field.

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> from postdp.analysis import ReleaseDesign
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
        >>> res = audit_privacy(ReleaseDesign(h, Geometric(0.5)), trials=2000, rng=0)
        >>> res.to_frame()["flagged"].tolist()
        [False]
        """
        return pd.DataFrame([{name: getattr(self, name) for name in self.__slots__}])


def audit_privacy(
    design: ReleaseDesign,
    *,
    neighbour: Literal["add", "move"] = "add",
    leaf: str | None = None,
    to: str | None = None,
    pipeline: Pipeline | None = None,
    secure: bool = False,
    trials: int = 50_000,
    delta: float = 0.0,
    alpha: float = 0.05,
    batch: int = 10_000,
    rng: RNGLike = None,
    progress: Callable[[int, int], None] | None = None,
) -> PrivacyAudit:
    """Lower-bound the privacy loss of a release pipeline from its outputs on neighbours.

    Parameters
    ----------
    design : ReleaseDesign
        The design: its hierarchy's counts are D; its budget is the claim.
    neighbour : {"add", "move"}, default "add"
        D' = D with one person added to ``leaf``, or moved from ``leaf`` to ``to``. A design
        with public nodes keeps them fixed, so it needs ``"move"`` between leaves under the
        same public nodes (adding a person changes a public total, which is published
        exactly and so is not private).
    leaf, to : str, optional
        Leaf ids; default: the first leaf, and for ``"move"`` the next leaf.
    pipeline : callable(counts, generator) -> release, optional
        Run this black box once per trial instead of the design's own pipeline (to audit an
        implementation: it must release the design's nodes in the hierarchy's order).
    secure : bool, default False
        Draw the design's noise with OpenDP's samplers (the release path), one release per
        trial (slow); otherwise numpy's generator in batches (study path).
    trials : int, default 50000
        Runs per input on each of the two samples (selection and evaluation).
    delta : float, default 0
        For (ε, δ) claims: the claim is the accountant's ε at ``delta`` for the pair of
        inputs (pure ε when 0, which needs a pure-DP design).
    alpha : float, default 0.05
        The bound holds with probability at least ``1 - alpha``.
    batch : int, default 10000
        Trials run at once by the study path. Memory: ``batch`` x nodes x 8 bytes at a
        time, plus 8 bytes per trial for each kept node (the changed nodes, their siblings
        and children), never trials x nodes.
    rng : int, numpy.random.Generator, SeedSequence or None
        Seed of the study path and of nothing else.
    progress : callable(done, total), optional
        Called as releases complete (after each release on the secure path and for
        pipelines, after each batch on the study path); ``total`` is ``4 * trials``.

    Returns
    -------
    PrivacyAudit

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> res = audit_privacy(ReleaseDesign(h, Geometric(0.5), "project"), trials=4000, rng=1)
    >>> res.claimed_epsilon, bool(res.epsilon_lower <= res.claimed_epsilon)
    (1.0, True)
    """
    if not isinstance(design, ReleaseDesign) or not hasattr(design, "hierarchy"):
        raise TypeError(
            f"`design` must be a hierarchy's ReleaseDesign; got {type(design).__name__}"
        )
    h = design.hierarchy
    truth = design._truth(None)
    (n_trials,) = _validation.size_tuple(trials)
    (batch_rows,) = _validation.size_tuple(batch)
    if n_trials < 100 or batch_rows < 1:
        raise ValidationError(
            f"`trials` must be at least 100 and `batch` at least 1; got {trials}, {batch}"
        )
    if not 0.0 < alpha < 1.0:
        raise ValidationError(f"`alpha` must lie strictly between 0 and 1; got {alpha!r}")
    if not 0.0 <= delta < 1.0:
        raise ValidationError(f"`delta` must lie in [0, 1); got {delta!r}")
    if delta == 0.0 and design.budget.rho > 0:
        raise ValidationError(
            "the design's budget has a zCDP part, which gives no pure ε: pass `delta` > 0"
        )
    if secure and rng is not None:
        raise ValidationError("`rng` seeds the study path only; leave it out with `secure`")
    other = _neighbour(design, truth, neighbour, leaf, to)
    changed = np.flatnonzero(other != truth)
    claim = _pair_budget(design, changed, (other - truth)[changed])
    claimed = claim.epsilon if delta == 0.0 else claim.to_approx_dp(delta)
    weights = np.array([design.per_level[d].privacy_cost().epsilon for d in h.depth[changed]])
    weights = weights * np.sign(other[changed] - truth[changed])  # "move": the source path < 0
    base = float(weights @ truth[changed])

    family = _families(h.parent, changed)  # the changed nodes, their siblings and children
    keep = np.union1d(changed, family)  # the only columns an audit keeps (memory)
    at_changed, at_family = np.searchsorted(keep, changed), np.searchsorted(keep, family)
    discriminant = np.zeros(family.size)

    def statistics(kept: FloatArray) -> FloatArray:
        """Per trial: the changed nodes' released values, their weighted sum, and the
        discriminant direction (chosen on the selection sample) of the nearby nodes."""
        picked = kept[:, at_changed]
        return np.column_stack([picked, picked @ weights, kept[:, at_family] @ discriminant])

    names = [f"node {h.ids[i]}" for i in changed] + ["weighted path sum", "discriminant"]
    done = [0]

    def advance(k: int) -> None:
        done[0] += k
        if progress is not None:
            progress(done[0], 4 * n_trials)

    run = _runner(design, pipeline, secure, batch_rows, keep, advance)
    gen = _rng.as_generator(rng)
    selection = [run(x, gen, n_trials) for x in (truth, other)]
    discriminant = _fisher(selection[0][:, at_family], selection[1][:, at_family])
    select = [statistics(s) for s in selection]
    del selection
    stat, direction, tau = _select_event(select[0], select[1])
    centres = np.r_[truth[changed].astype(np.float64), base, truth[family] @ discriminant]
    evaluate = [statistics(run(x, gen, n_trials)) for x in (truth, other)]
    hits = [int(_event(s[:, stat], direction, tau).sum()) for s in evaluate]
    high, low = (1, 0) if hits[1] / n_trials >= hits[0] / n_trials else (0, 1)
    p_high = _clopper_pearson_lower(hits[high], n_trials, alpha / 2)
    p_low = _clopper_pearson_upper(hits[low], n_trials, alpha / 2)
    bound = math.log((p_high - delta) / p_low) if p_high > delta else 0.0
    bound = max(bound, 0.0)
    return PrivacyAudit(
        epsilon_lower=bound,
        claimed_epsilon=float(claimed),
        delta=float(delta),
        alpha=float(alpha),
        flagged=bool(bound > claimed),
        neighbour=neighbour,
        statistic=names[stat],
        direction=direction,
        offset=float(tau - centres[stat]),
        hits_high=hits[high],
        hits_low=hits[low],
        trials=n_trials,
    )


def _pair_budget(design: ReleaseDesign, nodes: IntArray, change: IntArray) -> Budget:
    """The accountant's loss for this pair of inputs: each changed count costs its level's
    ε times |change| / sensitivity (pure DP) or ρ times (change / sensitivity)² (zCDP).
    For one person added this is the design's budget; a move changes two counts per level
    below the paths' meeting point, so it may cost up to twice as much (group privacy)."""
    eps = rho = 0.0
    for node, delta in zip(nodes.tolist(), change.tolist(), strict=True):
        m = design.per_level[int(design.hierarchy.depth[node])]
        cost, units = m.privacy_cost(), abs(delta) / m.sensitivity
        eps += cost.epsilon * units
        rho += cost.rho * units**2
    return Budget(epsilon=eps, rho=rho)


def _neighbour(
    design: ReleaseDesign, truth: NumArray, kind: str, leaf: str | None, to: str | None
) -> IntArray:
    """The neighbouring true counts: one person added to ``leaf``, or moved to ``to``."""
    h = design.hierarchy
    leaves = h.leaves
    if kind not in ("add", "move"):
        raise ValidationError(f"`neighbour` must be 'add' or 'move'; got {kind!r}")
    source = int(leaves[0]) if leaf is None else int(h.index(leaf)[0])
    if not h.is_leaf[source]:
        raise ValidationError(f"`leaf` must be a leaf of the hierarchy; got {leaf!r}")
    other = np.asarray(truth, dtype=np.int64).copy()
    path = _path(h.parent, source)
    if kind == "add":
        other[path] += 1
    else:
        if leaves.size < 2:
            raise ValidationError("`neighbour='move'` needs a hierarchy with two leaves")
        if to is None:
            target = int(leaves[1] if leaves[0] == source else leaves[0])
        else:
            target = int(h.index(to)[0])
        if not h.is_leaf[target] or target == source:
            raise ValidationError(f"`to` must be another leaf; got {to!r}")
        if truth[source] < 1:
            raise ValidationError("`leaf` holds nobody to move: choose a leaf with a count >= 1")
        other[path] -= 1
        other[_path(h.parent, target)] += 1
    if design.public is not None:
        fixed = resolve_public(h, public=design.public).mask
        if (other[fixed] != truth[fixed]).any():
            raise ValidationError(
                "the neighbour changes a public node, which is published exactly: use "
                "neighbour='move' between leaves under the same public nodes"
            )
    return other


def _families(parent: IntArray, changed: IntArray) -> IntArray:
    """The changed nodes with their siblings and their children (the nodes whose released
    values a consistent post-processing moves together with theirs)."""
    near = (
        np.isin(parent, changed)
        | np.isin(parent, parent[changed])
        | np.isin(np.arange(parent.size), changed)
    )
    return np.flatnonzero(near)


def _fisher(a: FloatArray, b: FloatArray) -> FloatArray:
    """Fisher's discriminant direction Σ⁺ (mean_b - mean_a) with the pooled covariance Σ;
    a direction that moves between the inputs but carries (almost) no noise dominates, as
    it should: it separates them (nearly) surely."""
    shift = b.mean(axis=0) - a.mean(axis=0)
    centred = np.concatenate([a - a.mean(axis=0), b - b.mean(axis=0)])
    cov = centred.T @ centred / max(centred.shape[0] - 2, 1)
    vals, vecs = np.linalg.eigh(cov)
    top = float(vals.max())
    if not top > 0:  # no noise at all in these values: the shift itself separates
        direction: FloatArray = shift
    else:
        direction = vecs @ ((vecs.T @ shift) / np.maximum(vals, top * 1e-12))
    scale = float(np.abs(direction).max())
    return direction / scale if scale > 0 else direction


def _path(parent: IntArray, node: int) -> IntArray:
    out = [node]
    while parent[out[-1]] >= 0:
        out.append(int(parent[out[-1]]))
    return np.array(out, dtype=np.int64)


def _runner(
    design: ReleaseDesign,
    pipeline: Pipeline | None,
    secure: bool,
    batch: int,
    keep: IntArray,
    advance: Callable[[int], None],
) -> Callable[[NumArray, np.random.Generator, int], FloatArray]:
    """A function that runs ``size`` releases of given true counts and returns the columns
    ``keep`` of each (float64, shape (size, len(keep))): memory does not grow with n.
    ``advance(k)`` is told of every k releases done."""
    if pipeline is not None:
        call = pipeline

        def black_box(x: NumArray, gen: np.random.Generator, size: int) -> FloatArray:
            out = np.empty((size, keep.size))
            for i in range(size):  # one call per release, as an implementation runs
                out[i] = np.asarray(call(x.copy(), gen), dtype=np.float64)[keep]
                advance(1)
            return out

        return black_box
    if secure:
        h = design.hierarchy
        from postdp.mechanisms.release import opendp_sampler

        samplers = [opendp_sampler(m) for m in design.per_level]  # built once each

        def secure_run(x: NumArray, gen: np.random.Generator, size: int) -> FloatArray:
            chain = design.chain(x) if design.steps else None
            out = np.empty((size, keep.size))
            noisy = np.empty(h.n, dtype=design.noise_dtype())
            for i in range(size):
                for sample, nodes in zip(samplers, h.levels, strict=True):
                    noisy[nodes] = sample(x[nodes])
                release = noisy if chain is None else chain(noisy)
                out[i] = np.asarray(release, dtype=np.float64)[keep]
                advance(1)
            return out

        return secure_run

    def study_run(x: NumArray, gen: np.random.Generator, size: int) -> FloatArray:
        parts = []
        for start in range(0, size, batch):
            rows = min(batch, size - start)
            parts.append(np.asarray(design.run(x, rng=gen, size=rows)[:, keep], float))
            advance(rows)
        return np.concatenate(parts)

    return study_run


def _event(values: FloatArray, direction: str, tau: float) -> np.ndarray:
    return values >= tau if direction == ">=" else values <= tau


def _select_event(a: FloatArray, b: FloatArray) -> tuple[int, str, float]:
    """The (statistic, direction, threshold) whose probability ratio between the two samples
    has the largest Clopper–Pearson lower bound on this (selection) sample."""
    n = a.shape[0]
    best = (-math.inf, 0, ">=", 0.0)
    for j in range(a.shape[1]):
        pooled = np.concatenate([a[:, j], b[:, j]])
        for tau in np.unique(np.quantile(pooled, _QUANTILES)):
            for direction in (">=", "<="):
                ka = int(_event(a[:, j], direction, tau).sum())
                kb = int(_event(b[:, j], direction, tau).sum())
                for k_hi, k_lo in ((ka, kb), (kb, ka)):
                    lower = _clopper_pearson_lower(k_hi, n, 0.05)
                    upper = _clopper_pearson_upper(k_lo, n, 0.05)
                    score = math.log(lower / upper) if lower > 0 else -math.inf
                    if score > best[0]:
                        best = (score, j, direction, float(tau))
    return best[1], best[2], best[3]


def _clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """Exact one-sided lower confidence bound on a binomial proportion."""
    from scipy import stats

    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def _clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """Exact one-sided upper confidence bound on a binomial proportion."""
    from scipy import stats

    return 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))

"""Bias, decision errors and the fairness bound α of decisions made from noisy counts.

Seed 002: the bias of entity i is B^i = E[P_i(x̃)] - P_i(x) (eq. (2)); for decision rules the
absolute bias |B^i| is the decision-error probability. The disparity error of i is
ξ^i = max_j |B^i - B^j| and the fairness bound α = max_i ξ^i = max_j B^j - min_j B^j
(Definition 3). Expectations are Monte Carlo averages over independent noisy releases,
streamed in batches (memory bounded by ``batch``), reproducible from one seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postdp import _rng, _validation
from postdp._moments import Accumulator
from postdp._typing import ArrayLike, FloatArray, NumArray, RNGLike
from postdp.decisions.allotment import allot
from postdp.decisions.rules import Rule
from postdp.errors import ValidationError
from postdp.mechanisms import NoiseMechanism
from postdp.postprocess import ElementwiseChain, Step
from postdp.postprocess.estimators import ROUND

__all__ = ["FairnessReport", "allotment_fairness", "decision_fairness"]

PostProcess = Callable[[NumArray], NumArray]
#: A post-processing: a callable on a batch, or element-wise steps as in ReleaseDesign.
PostProcessSpec = Callable[[NumArray], NumArray] | str | Sequence[Step] | None


def _post(
    postprocess: PostProcessSpec, mechanism: NoiseMechanism, rng: RNGLike
) -> PostProcess | None:
    """A batch function from a callable or from element-wise steps (``"clamp,round"``)."""
    if postprocess is None or callable(postprocess):
        return postprocess
    chain = ElementwiseChain(mechanism, postprocess)
    if not chain.steps:
        return None
    gen = _rng.spawn(rng, 1)[0] if any(step.name == ROUND.name for step in chain.steps) else None
    return lambda values: chain(values, rng=gen)


@dataclass(frozen=True, slots=True, eq=False)
class FairnessReport:
    """Per-entity bias of a decision problem under a release mechanism.

    Attributes
    ----------
    truth : ndarray, shape (n,)
        P_i(x) on the true data (shares or dollars; 0/1 for rules).
    bias, bias_se : ndarray, shape (n,)
        B^i and its Monte Carlo standard error (for rules: the signed bias
        E[P_i(x̃)] - P_i(x); its absolute value is the decision-error probability).
    mae : ndarray, shape (n,)
        Mean absolute error E|P_i(x̃) - P_i(x)|.
    n_draws : int

    Examples
    --------
    >>> from postdp import Laplace
    >>> rep = allotment_fairness([10.0, 90.0], [1.0, 1.0], Laplace(1.0), n_draws=2000, rng=0)
    >>> rep.to_frame().columns.tolist()[:3]
    ['truth', 'bias', 'bias_lo']
    """

    truth: FloatArray
    bias: FloatArray
    bias_se: FloatArray
    mae: FloatArray
    n_draws: int

    @property
    def disparity(self) -> FloatArray:
        """ξ^i = max_j |B^i - B^j| (Definition 3)."""
        out: FloatArray = np.maximum(self.bias.max() - self.bias, self.bias - self.bias.min())
        return out

    @property
    def alpha(self) -> float:
        """The fairness bound α = max_j B^j - min_j B^j (on absolute biases for rules)."""
        return float(self.bias.max() - self.bias.min())

    @property
    def absolute_alpha(self) -> float:
        """α computed on |B^i| (the definition used for decision rules)."""
        a = np.abs(self.bias)
        return float(a.max() - a.min())

    def alpha_verdict(self, *, absolute: bool = False, unit: str = "") -> str:
        """Whether α shows unfairness or could be simulation noise alone, in words.

        If every entity had the same bias, each estimate would be that bias plus a Monte
        Carlo error e_i, and with probability 0.99 every |e_i| / SE_i stays below q, the
        99% point of the largest of n absolute Student t values (n - 1 degrees of freedom,
        :func:`postdp.analysis.largest_abs_quantile`); then α <= q x (the two largest SEs).
        An α above that bound is unfairness the simulation has detected.

        Parameters
        ----------
        absolute : bool, default False
            Judge :attr:`absolute_alpha` (decision rules) instead of :attr:`alpha`.
        unit : str, default ""
            Put before the numbers (e.g. "$").

        Returns
        -------
        str
            ``"unfair: ..."`` or ``"no unfairness detected: ..."``.

        Examples
        --------
        >>> rep = FairnessReport(np.zeros(3), np.array([0.5, 0.0, -0.4]), np.full(3, 0.01),
        ...                      np.zeros(3), 1000)
        >>> rep.alpha_verdict().split(":")[0]
        'unfair'
        """
        value = self.absolute_alpha if absolute else self.alpha
        bound = self.alpha_noise_bound()
        shown, limit = _number(value, unit), _number(bound, unit)
        if value > bound:
            return (
                f"unfair: α {shown} is above {limit}, the most that simulation noise alone "
                "gives (99%)"
            )
        return (
            f"no unfairness detected: α {shown} is within {limit}, what simulation noise "
            "alone can give (99%)"
        )

    def alpha_noise_bound(self) -> float:
        """The most that Monte Carlo noise alone gives α (99%): q x (the two largest SEs),
        q the 99% point of the largest of n absolute Student t values (see
        :meth:`alpha_verdict`, which compares α with it).

        Examples
        --------
        >>> rep = FairnessReport(np.zeros(3), np.zeros(3), np.array([1.0, 2.0, 3.0]),
        ...                      np.zeros(3), 1000)
        >>> round(rep.alpha_noise_bound() / (2.0 + 3.0), 2)  # q, for 3 values and 999 dof
        2.94
        """
        from postdp.analysis import largest_abs_quantile

        q = largest_abs_quantile(0.99, int(self.bias.size), df=self.n_draws - 1)
        top = np.sort(self.bias_se)[-2:]
        return q * float(top.sum() if top.size == 2 else 2 * top.sum())

    def cost_of_privacy(self, amount: float = 1.0) -> float:
        """B+ = Σ_{i: B^i < 0} |B^i| × amount (Definition 4), for shares.

        Examples
        --------
        >>> rep = FairnessReport(np.zeros(3), np.array([0.01, -0.02, -0.005]), np.zeros(3),
        ...                      np.zeros(3), 10)
        >>> rep.cost_of_privacy(1000.0)
        25.0
        """
        return float(np.abs(self.bias[self.bias < 0]).sum() * amount)

    def to_frame(self, *, z: float = 1.96) -> pd.DataFrame:
        """One row per entity: truth, bias with a z·SE interval, |bias|, disparity, MAE.

        Returns
        -------
        pandas.DataFrame
        """
        return pd.DataFrame(
            {
                "truth": self.truth,
                "bias": self.bias,
                "bias_lo": self.bias - z * self.bias_se,
                "bias_hi": self.bias + z * self.bias_se,
                "abs_bias": np.abs(self.bias),
                "disparity": self.disparity,
                "mae": self.mae,
                "n_draws": self.n_draws,
            }
        )


def _report(acc: Accumulator, truth: FloatArray) -> FairnessReport:
    mean, se, mae = acc.mean_and_se()
    return FairnessReport(truth, mean, se, mae, acc.count)


def _draws_check(n_draws: int, batch: int) -> tuple[int, int]:
    (N,) = _validation.size_tuple(n_draws)
    (b,) = _validation.size_tuple(batch)
    if N < 2 or b < 1:
        raise ValidationError(f"`n_draws` must be >= 2 and `batch` >= 1; got {n_draws}, {batch}")
    return N, b


def allotment_fairness(
    x: ArrayLike,
    multipliers: ArrayLike,
    mechanism: NoiseMechanism,
    *,
    amount: float = 1.0,
    postprocess: PostProcessSpec = None,
    problem: Callable[[FloatArray], FloatArray] | None = None,
    n_draws: int = 10_000,
    batch: int = 500,
    rng: RNGLike = None,
    progress: Callable[[int, int], None] | None = None,
) -> FairnessReport:
    """Monte Carlo bias of a proportional allotment computed on noisy counts.

    Parameters
    ----------
    x : array_like, shape (n,)
        True counts (e.g. ``load_title1()["poor_5_17"]``).
    multipliers : array_like, shape (n,)
        Allotment multipliers a_i (the seed's weights).
    mechanism : NoiseMechanism
        Noise added to every count (study path).
    amount : float, default 1
        Amount distributed: the bias is then in the same unit (dollars with 6.5e9).
    postprocess : callable, str or sequence of Step, optional
        Applied to each batch of noisy counts before the allotment: a function (e.g.
        ``clamp``) or element-wise steps named as in :class:`~postdp.ReleaseDesign`
        (``"clamp"``, ``"ramp-optimal"``, ``"modified:T=2"``, ``"clamp,round"``).
    problem : callable, optional
        The allotment as a function of the (post-processed) counts, batch in, batch out
        (default: ``allot(., multipliers, amount=amount)``), e.g. a linear proxy.
    n_draws : int, default 10000
    batch : int, default 500
        Draws processed at once; results do not depend on it.
    rng : int, numpy.random.Generator, SeedSequence or None
    progress : callable(done, total), optional
        Called after each batch.

    Returns
    -------
    FairnessReport

    Examples
    --------
    >>> from postdp import Laplace
    >>> from postdp.postprocess import clamp
    >>> rep = allotment_fairness([1.0, 5.0, 500.0], [1.0, 1.0, 1.0], Laplace(0.5),
    ...                          amount=1000.0, postprocess=clamp, n_draws=5000, rng=1)
    >>> bool(rep.bias[0] > 0 > rep.bias[2])  # small entities over-allotted under clamping
    True
    """
    values = _validation.real_array("x", x).astype(np.float64)
    _validation.nonnegative("x", values)
    N, b = _draws_check(n_draws, batch)
    post = _post(postprocess, mechanism, rng)
    fn = problem if problem is not None else (lambda v: allot(v, multipliers, amount=amount))
    truth = np.asarray(fn(values[None, :])[0], dtype=np.float64)
    counts = values.astype(np.int64) if mechanism.discrete else values
    moments = Accumulator()
    steps = math.ceil(N / b)
    for done, noisy in enumerate(
        mechanism.iter_samples(counts, n_draws=N, batch=b, rng=rng), start=1
    ):
        released = noisy.astype(np.float64) if post is None else post(noisy)
        moments.add(
            np.asarray(fn(np.asarray(released, dtype=np.float64)), dtype=np.float64) - truth
        )
        if progress is not None:
            progress(done, steps)
    return _report(moments, truth)


def decision_fairness(
    data: Mapping[str, ArrayLike],
    rule: Rule,
    mechanisms: NoiseMechanism | Mapping[str, NoiseMechanism],
    *,
    postprocess: PostProcessSpec = None,
    n_draws: int = 10_000,
    batch: int = 1000,
    rng: RNGLike = None,
    progress: Callable[[int, int], None] | None = None,
) -> FairnessReport:
    """Monte Carlo decision errors of a rule evaluated on noisy counts.

    Parameters
    ----------
    data : mapping of str to array_like, shape (n,)
        True counts of every feature the rule reads.
    rule : Rule
    mechanisms : NoiseMechanism or mapping of feature to NoiseMechanism
        Independent noise on each feature.
    postprocess : callable, str or sequence of Step, optional
        Applied to each noisy feature before the rule: a function or element-wise steps
        as in :class:`~postdp.ReleaseDesign` (``"clamp"``, ``"modified:T=2"``, ...).
    n_draws : int, default 10000
    batch : int, default 1000
    rng : int, numpy.random.Generator, SeedSequence or None
    progress : callable(done, total), optional
        Called after each batch.

    Returns
    -------
    FairnessReport
        ``bias`` is E[P_i(x̃)] - P_i(x); its absolute value is the decision-error probability
        Pr[P_i(x̃) != P_i(x)] ([fioretto2021] §5.2), with a binomial standard error.

    Examples
    --------
    >>> from postdp import Laplace
    >>> from postdp.decisions import Threshold
    >>> rep = decision_fairness({"x": [50, 99, 150]}, Threshold("x", 100), Laplace(0.1),
    ...                         n_draws=4000, rng=0)
    >>> bool(abs(rep.bias[1]) > abs(rep.bias[0]))  # errors peak near the threshold
    True
    """
    names = sorted(rule.features)
    truth_data = {k: _validation.real_array(k, data[k]).astype(np.float64) for k in names}
    for k, v in truth_data.items():
        _validation.nonnegative(k, v)
    mechs = {
        k: mechanisms if isinstance(mechanisms, NoiseMechanism) else mechanisms[k] for k in names
    }
    N, b = _draws_check(n_draws, batch)
    truth = rule(truth_data).astype(np.float64)
    streams = dict(zip(names, _rng.spawn(rng, len(names)), strict=True))
    posts = {k: _post(postprocess, mechs[k], streams[k]) for k in names}
    iterators = {
        k: mechs[k].iter_samples(
            truth_data[k].astype(np.int64) if mechs[k].discrete else truth_data[k],
            n_draws=N,
            batch=b,
            rng=streams[k],
        )
        for k in names
    }
    moments = Accumulator()
    steps = math.ceil(N / b)
    for done in range(1, steps + 1):
        noisy = {k: next(it).astype(np.float64) for k, it in iterators.items()}
        for k, post in posts.items():
            if post is not None:
                noisy[k] = np.asarray(post(noisy[k]), dtype=np.float64)
        moments.add(rule(noisy).astype(np.float64) - truth)
        if progress is not None:
            progress(done, steps)
    return _report(moments, truth)


def _number(value: float, unit: str) -> str:
    """A number for a sentence: whole with thousands separators from 1,000 on, else 4
    significant digits."""
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return unit + text

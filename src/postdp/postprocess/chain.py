"""A chain of post-processing steps, as the command line and release designs spell them.

Steps are written ``name`` or ``name:key=value`` and joined by commas, e.g.
``"project-nonneg,round"`` or ``"clamp,modified:T=2,round"``. The steps are the
estimators of :func:`postdp.postprocess.estimators` that run on a hierarchy (their
names, summaries and options come from that registry): the projections (``project``,
``project-nonneg``, ``topdown``), the element-wise steps (``clamp``, ``ramp-optimal``,
``modified:T=t``) and ``round``; ``"none"`` is no step. A release rule of its own
(:attr:`~postdp.postprocess.Estimator.alone`, e.g. ``bayes``) parses only as the one step
and never runs in :class:`PostProcessChain`: the layers above run it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from postdp._typing import ArrayLike, NumArray, RNGLike
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec
from postdp.mechanisms import NoiseMechanism, expand_mechanisms
from postdp.postprocess.elementwise.modified import modified_postprocess
from postdp.postprocess.elementwise.ramps import clamp, optimal_ramp_shift
from postdp.postprocess.estimators import (
    CLAMP,
    MODIFIED,
    RAMP_OPTIMAL,
    Estimator,
    estimator,
    estimators,
)
from postdp.postprocess.projections import Projector
from postdp.postprocess.rounding import round_consistent, stochastic_round

__all__ = ["STEP_NAMES", "PostProcessChain", "Step", "is_consistent", "parse_steps"]

#: The steps of a hierarchy's chain: the registry's estimators that run on a hierarchy,
#: less the release rules that run alone.
STEP_NAMES = tuple(e.name for e in estimators("hierarchy") if not e.alone)
_CLAMP, _RAMP, _MODIFIED = CLAMP, RAMP_OPTIMAL, MODIFIED  # the element-wise kernels here
_NONE = "none"


@dataclass(frozen=True, slots=True)
class Step:
    """One parsed step of a chain: its name and numeric options.

    Examples
    --------
    >>> str(Step("modified", {"T": 2.0}))
    'modified:T=2'
    """

    name: str
    options: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = ",".join(f"{k}={v:g}" for k, v in self.options.items())
        return self.name + (f":{extra}" if extra else "")


def parse_steps(text: str) -> tuple[Step, ...]:
    """Parse ``"project-nonneg,round"``-style text into steps (``"none"`` gives no step).

    A release rule that runs alone (:attr:`~postdp.postprocess.Estimator.alone`) parses
    only as the one step, for a caller that runs it; :class:`PostProcessChain` refuses it.

    Parameters
    ----------
    text : str

    Returns
    -------
    tuple of Step

    Raises
    ------
    ValidationError
        One line, for an unknown step, a bad option, or a release rule among other steps.

    Examples
    --------
    >>> [str(s) for s in parse_steps("clamp,modified:T=2.5,round")]
    ['clamp', 'modified:T=2.5', 'round']
    """
    steps: list[Step] = []
    for part in (p.strip() for p in text.split(",")):
        if not part or part == _NONE:
            continue
        name, _, rest = part.partition(":")
        est = _hierarchy_step(name)
        options: dict[str, float] = {}
        for item in filter(None, rest.split(";")):
            key, sep, value = item.partition("=")
            try:
                options[key.strip()] = float(value)
            except ValueError:
                raise ValidationError(
                    f"step option {item!r} of {name!r} must be key=number"
                ) from None
            if not sep or not math.isfinite(options[key.strip()]):
                raise ValidationError(
                    f"step option {item!r} of {name!r} must be key=<finite number>"
                )
        allowed = set(est.options)
        unknown = set(options) - allowed
        if unknown:
            raise ValidationError(
                f"step {name!r} takes no option {', '.join(sorted(unknown))}"
                + (f" (it takes {', '.join(sorted(allowed))})" if allowed else "")
            )
        for key in est.required:
            if key not in options:
                raise ValidationError(f"step {name!r} needs its option: {name}:{key}=<number>")
        if est is _MODIFIED and options["T"] < 0:
            raise ValidationError(f"step {name!r} needs T >= 0; got {options['T']:g}")
        steps.append(Step(name, options))
    alone = [s.name for s in steps if estimator(s.name).alone]
    if alone and len(steps) > 1:
        raise ValidationError(_runs_alone(alone[0]))
    return tuple(steps)


def _runs_alone(name: str) -> str:
    """Why a release rule is no chain step, and where it runs instead."""
    return (
        f"{name!r} runs alone, as a release rule of its own, not as a step of a chain "
        f"(postdp release --postprocess {name}, or postdp.bayes.bayes_release_hierarchy)"
    )


def _hierarchy_step(name: str) -> Estimator:
    """The registry's record of a hierarchy chain step (one line naming them otherwise)."""
    est = estimator(name)
    if "hierarchy" not in est.models:
        raise ValidationError(
            f"{name!r} runs on a table's measurements, not in a hierarchy's chain; the "
            f"steps of a hierarchy are {', '.join(STEP_NAMES)}"
        )
    return est


def is_consistent(values: ArrayLike, hierarchy: Hierarchy, *, rtol: float = 1e-9) -> bool:
    """Whether every parent equals the sum of its children in every row (to ``rtol``).

    Parameters
    ----------
    values : array_like, shape (..., n)
    hierarchy : Hierarchy
    rtol : float, default 1e-9
        Relative to max(1, max |values|).

    Returns
    -------
    bool

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> is_consistent([3.0, 1.0, 2.0], h), is_consistent([3.0, 1.0, 1.0], h)
    (True, False)
    """
    X = np.asarray(values, dtype=np.float64).reshape(-1, hierarchy.n)
    lay = hierarchy.layout
    Xl = X[:, lay.order]
    scale = max(1.0, float(np.abs(X).max(initial=0.0)))
    return bool(lay.family_gaps(Xl).max(initial=0.0) <= rtol * scale)


def _round(values: NumArray, h: Hierarchy, rng: RNGLike) -> NumArray:
    """Consistent rounding when the input is consistent, element-wise otherwise."""
    if is_consistent(values, h):
        try:
            return round_consistent(values, h, rng=rng)
        except ValidationError:  # consistent to rtol, but not enough to round within 1
            pass
    return stochastic_round(values, rng=rng)


class PostProcessChain:
    """Steps prepared for one hierarchy and release (projectors built once, checks up front).

    Parameters
    ----------
    hierarchy : Hierarchy
    mechanisms : sequence of NoiseMechanism
        One per level (root first): the scale of ``ramp-optimal`` comes from them.
    steps : str or sequence of Step
        E.g. ``"project-nonneg,round"``; see the module docstring.
    public : mapping, sequence of str, "root" or None
        Invariant nodes of the projection steps.
    weights : array_like, shape (n,), optional
        Weights of the projection steps.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Geometric, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> chain = PostProcessChain(h, [Geometric(1.0)] * 2, "project-nonneg,round")
    >>> out = chain(np.array([5.0, -1.0, 6.0]), rng=0)
    >>> out.tolist(), is_consistent(out, h)
    ([5, 0, 5], True)
    """

    __slots__ = ("_projectors", "hierarchy", "mechanisms", "steps")

    def __init__(
        self,
        hierarchy: Hierarchy,
        mechanisms: Sequence[NoiseMechanism],
        steps: str | Sequence[Step],
        *,
        public: PublicSpec = None,
        weights: ArrayLike | None = None,
    ) -> None:
        self.steps = parse_steps(steps) if isinstance(steps, str) else tuple(steps)
        self.hierarchy = hierarchy
        self.mechanisms = expand_mechanisms(mechanisms, count=hierarchy.n_levels)
        self._projectors: dict[str, Projector] = {}
        for step in self.steps:
            est = _hierarchy_step(step.name)
            if est.alone:
                raise ValidationError(_runs_alone(est.name))
            if est.solver and step.name not in self._projectors:
                self._projectors[step.name] = Projector(
                    hierarchy, public=public, method=est.name, weights=weights
                )
            if est is _RAMP and any(m.family != "laplace" for m in self.mechanisms):
                raise ValidationError(
                    f"step {est.name!r} needs Laplace or geometric noise on every level"
                )
        if public is not None and not self._projectors:
            raise ValidationError("public nodes need a projection step that enforces them")

    def __call__(self, values: ArrayLike, *, rng: RNGLike = None) -> NumArray:
        """Apply the steps in order to noisy values of shape (..., n).

        Parameters
        ----------
        values : array_like, shape (..., n)
        rng : int, numpy.random.Generator, SeedSequence or None
            Randomness of the ``round`` step.

        Returns
        -------
        ndarray
            int64 after a final ``round``, float64 otherwise.

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a"], [None, "T"])
        >>> PostProcessChain(h, [Geometric(1.0)] * 2, "clamp")([-2.0, 3.0]).tolist()
        [0.0, 3.0]
        """
        return self._apply(np.asarray(values, dtype=np.float64), rng=rng, owned=False)

    def _apply(self, out: NumArray, *, rng: RNGLike, owned: bool) -> NumArray:
        """The steps on float64 values; ``owned``: a (B, n) batch the caller gives up (the
        first projection then overwrites it, with no copy or checks)."""
        h = self.hierarchy
        for k, step in enumerate(self.steps):
            if step.name in self._projectors and owned and k == 0 and out.ndim == 2:
                out = self._projectors[step.name]._solve(out)
            elif step.name in self._projectors:
                out = self._projectors[step.name](out)
            elif step.name == _CLAMP.name:
                out = clamp(out, lower=step.options.get("lower", 0.0))
            elif step.name == _RAMP.name:
                shifts = np.array([optimal_ramp_shift(m) for m in self.mechanisms])
                out = np.maximum(out - shifts[h.depth], 0.0)
            elif step.name == _MODIFIED.name:
                out = modified_postprocess(out, temperature=step.options["T"])
            elif estimator(step.name).finisher:
                out = _round(out, h, rng)
        return out

    def __repr__(self) -> str:
        return f"PostProcessChain({','.join(map(str, self.steps)) or 'none'!r})"


#: Steps that act on each value alone (no hierarchy needed).
ELEMENTWISE_STEPS = tuple(e.name for e in estimators("hierarchy") if e.elementwise)


class ElementwiseChain:
    """The element-wise steps of a post-processing chain, for values without a hierarchy
    (e.g. the entities of a decision problem): the same step names as :class:`ReleaseDesign`.

    Parameters
    ----------
    mechanism : NoiseMechanism
        The noise on the values (``ramp-optimal`` takes its optimal shift from it).
    steps : str or sequence of Step
        Any of ``clamp``, ``ramp-optimal``, ``modified:T=<t>`` and ``round`` (unbiased
        stochastic rounding); projections need a hierarchy and are refused.

    Examples
    --------
    >>> from postdp import Laplace
    >>> chain = ElementwiseChain(Laplace(1.0), "clamp,round")
    >>> chain([-2.0, 3.0], rng=0).tolist()
    [0, 3]
    """

    __slots__ = ("mechanism", "steps")

    def __init__(self, mechanism: NoiseMechanism, steps: str | Sequence[Step]) -> None:
        if not isinstance(mechanism, NoiseMechanism):
            raise TypeError(
                f"`mechanism` must be a noise mechanism; got {type(mechanism).__name__}"
            )
        self.mechanism = mechanism
        self.steps = parse_steps(steps) if isinstance(steps, str) else tuple(steps)
        needs_tree = [str(s) for s in self.steps if s.name not in ELEMENTWISE_STEPS]
        if needs_tree:
            raise ValidationError(
                f"steps {', '.join(needs_tree)} need a hierarchy; without one use "
                f"{', '.join(ELEMENTWISE_STEPS)}"
            )
        if any(s.name == _RAMP.name for s in self.steps) and mechanism.family != "laplace":
            raise ValidationError(f"step {_RAMP.name!r} needs Laplace or geometric noise")

    def __call__(self, values: ArrayLike, *, rng: RNGLike = None) -> NumArray:
        """Apply the steps in order to values of any shape.

        Parameters
        ----------
        values : array_like
        rng : int, numpy.random.Generator, SeedSequence or None
            Randomness of the ``round`` step.

        Returns
        -------
        ndarray
            int64 after a final ``round``, float64 otherwise.

        Examples
        --------
        >>> from postdp import Laplace
        >>> ElementwiseChain(Laplace(1.0), "modified:T=1")([0.5, 10.0]).round(3).tolist()
        [0.0, 9.909]
        """
        out: NumArray = np.asarray(values, dtype=np.float64)
        for step in self.steps:
            if step.name == _CLAMP.name:
                out = clamp(out, lower=step.options.get("lower", 0.0))
            elif step.name == _RAMP.name:
                out = np.maximum(out - optimal_ramp_shift(self.mechanism), 0.0)
            elif step.name == _MODIFIED.name:
                out = modified_postprocess(out, temperature=step.options["T"])
            else:
                out = stochastic_round(out, rng=rng)
        return out

    def __repr__(self) -> str:
        return f"ElementwiseChain({','.join(map(str, self.steps)) or 'none'!r})"

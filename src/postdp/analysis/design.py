"""A release design: noise per level plus a post-processing chain, on a hierarchy."""

from __future__ import annotations

from abc import ABCMeta
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray, IntArray, NumArray, RNGLike
from postdp.analysis.simulation import ChunkRelease, Simulation
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec, public_values
from postdp.mechanisms import Budget, NoiseMechanism, expand_mechanisms
from postdp.postprocess import PostProcessChain, Step, inverse_variance_weights, parse_steps
from postdp.postprocess.estimators import ROUND
from postdp.tables import Table

__all__ = ["ReleaseDesign", "register_table_design"]

#: The class that builds a table's design (``postdp.analysis.table_design`` registers it).
_TABLE_DESIGN: list[type] = []


@dataclass(frozen=True, slots=True, eq=False)
class ReleaseDesign(metaclass=ABCMeta):
    """What a release does: one noise mechanism per level, then a chain of post-processing.

    One design class for hierarchies and tables: given a :class:`~postdp.tables.Table` and
    its :class:`~postdp.tables.Workload` (``ReleaseDesign(table, workload,
    "project-nonneg,round")``) it builds the table's design, a
    :class:`~postdp.analysis.TableDesign` (which ``isinstance(..., ReleaseDesign)`` accepts),
    and :func:`postdp.simulate`, :func:`postdp.audit`, :func:`~postdp.analysis.memory_plan`
    and :func:`~postdp.analysis.replicate_intervals` take either.

    Parameters
    ----------
    hierarchy : Hierarchy, or Table
        The geography (its true counts are the default truth of a simulation); or a table.
    mechanisms : NoiseMechanism or sequence of NoiseMechanism, or Workload
        One for every level, or one per level, root first; a table's workload.
    postprocess : str or sequence of Step, default "none"
        E.g. ``"project-nonneg,round"`` (see :mod:`postdp.postprocess.chain`).
    public : mapping, sequence of str, "root" or None
        Invariant nodes of the projection steps (held at the simulation's true counts
        when given as ids).
    weights : {"equal", "inverse-variance"}, default "equal"
        Weights of the projection steps.

    Attributes
    ----------
    budget : Budget
        Sequential composition of the levels' costs.

    Examples
    --------
    >>> from postdp import Geometric
    >>> from postdp.data import county_hierarchy
    >>> d = ReleaseDesign(county_hierarchy(), Geometric(0.5), "project-nonneg,round")
    >>> d.budget, [str(s) for s in d.steps]
    (Budget(epsilon=1.5, rho=0.0), ['project-nonneg', 'round'])
    >>> from postdp.data import synthetic_table
    >>> from postdp.tables import Measurement, Query, Workload
    >>> t = synthetic_table((2,), leaf_mean=20, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Geometric(1.0))
    ...               for d in range(2)])
    >>> td = ReleaseDesign(t, w, "project-nonneg,round")
    >>> type(td).__name__, isinstance(td, ReleaseDesign)
    ('TableDesign', True)
    """

    def __new__(cls, hierarchy: Any = None, *args: Any, **kwargs: Any) -> Any:
        if _TABLE_DESIGN and isinstance(hierarchy, Table):  # one class to call
            return _TABLE_DESIGN[0](hierarchy, *args, **kwargs)
        return object.__new__(cls)

    hierarchy: Hierarchy
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism]
    postprocess: str | Sequence[Step] = "none"
    public: PublicSpec = field(default=None, kw_only=True)
    weights: Literal["equal", "inverse-variance"] = field(default="equal", kw_only=True)
    steps: tuple[Step, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.hierarchy, Hierarchy):
            raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(self.hierarchy).__name__}")
        mechs = expand_mechanisms(self.mechanisms, count=self.hierarchy.n_levels)
        if self.weights not in ("equal", "inverse-variance"):
            raise ValidationError(
                f"`weights` must be 'equal' or 'inverse-variance'; got {self.weights!r}"
            )
        object.__setattr__(self, "mechanisms", mechs)
        steps = (
            parse_steps(self.postprocess)
            if isinstance(self.postprocess, str)
            else tuple(self.postprocess)
        )
        object.__setattr__(self, "steps", steps)
        self.chain(self.hierarchy.counts)  # validates the steps and the public nodes now

    @property
    def per_level(self) -> tuple[NoiseMechanism, ...]:
        """The mechanism of each level, root first."""
        mechs: tuple[NoiseMechanism, ...] = self.mechanisms  # type: ignore[assignment]
        return mechs

    @property
    def budget(self) -> Budget:
        """Sequential composition over the levels (each level's nodes are disjoint)."""
        return Budget.compose(m.privacy_cost() for m in self.per_level)

    def chain(self, truth: ArrayLike | None = None) -> PostProcessChain:
        """The prepared post-processing chain for true counts ``truth`` (public values).

        Parameters
        ----------
        truth : array_like, shape (n,), optional
            Counts the public nodes are held at (default: the hierarchy's).

        Returns
        -------
        PostProcessChain

        Examples
        --------
        >>> from postdp import Laplace, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a"], [None, "T"], [3, 3])
        >>> ReleaseDesign(h, Laplace(1.0), "project").chain()
        PostProcessChain('project')
        """
        public = self.public
        if truth is not None:
            public = public_values(self.hierarchy, public=public, values=truth)
        weights = (
            inverse_variance_weights(self.hierarchy, self.per_level)
            if self.weights == "inverse-variance"
            else None
        )
        return PostProcessChain(
            self.hierarchy, self.per_level, self.steps, public=public, weights=weights
        )

    @property
    def n_entities(self) -> int:
        """Values simulated: the hierarchy's nodes."""
        return self.hierarchy.n

    @property
    def entity_ids(self) -> npt.NDArray[np.object_]:
        """The nodes' ids."""
        return self.hierarchy.ids

    def entity_index(self, ids: list[str]) -> IntArray:
        """Positions of node ids."""
        return self.hierarchy.index(ids)

    def error_scale(self) -> FloatArray:
        """Half-width of each node's error histogram: 8 standard deviations of the noise
        summed down to its level."""
        variances = np.array([m.variance() for m in self.per_level])
        out: FloatArray = 8.0 * np.sqrt(np.cumsum(variances))[self.hierarchy.depth]
        return out

    def noise_dtype(self) -> type[np.int64] | type[np.float64]:
        """int64 when every level's mechanism is discrete, float64 otherwise."""
        return np.int64 if all(m.discrete for m in self.per_level) else np.float64

    def noise(
        self,
        truth: NumArray,
        gens: Sequence[np.random.Generator],
        rows: int,
        out: NumArray | None = None,
    ) -> NumArray:
        """``rows`` noisy draws of ``truth`` (study path), level ``d`` drawn from ``gens[d]``.

        Parameters
        ----------
        truth : ndarray, shape (n,)
        gens : sequence of numpy.random.Generator
            One per level.
        rows : int
        out : ndarray, shape (rows, n), optional
            Written in place (of :meth:`noise_dtype`), e.g. a slice of a larger batch.

        Returns
        -------
        ndarray, shape (rows, n)
        """
        h = self.hierarchy
        if out is None:
            out = np.empty((rows, h.n), dtype=self.noise_dtype())
        for d, nodes in enumerate(h.levels):
            m = self.per_level[d]
            lo, hi = int(nodes[0]), int(nodes[-1]) + 1
            base = truth[nodes]
            if m.discrete:
                base = _validation.integer_array("truth", base)
            if hi - lo == nodes.size:  # a level stored contiguously: drawn into its columns
                m._sample_into(base, gens[d], out[:, lo:hi])
            else:
                out[:, nodes] = m.sample(base, rng=gens[d], size=rows)
        return out

    def run(
        self, truth: ArrayLike | None = None, *, rng: RNGLike = None, size: int = 1
    ) -> NumArray:
        """Noise and post-process ``size`` independent draws (study path).

        Parameters
        ----------
        truth : array_like, shape (n,), optional
            True counts (default: the hierarchy's).
        rng : int, numpy.random.Generator, SeedSequence or None
        size : int, default 1

        Returns
        -------
        ndarray, shape (size, n)

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> ReleaseDesign(h, Geometric(1.0), "project-nonneg,round").run(rng=0, size=2).shape
        (2, 3)
        """
        from postdp import _rng

        counts = self._truth(truth)
        gens = _rng.spawn(rng, self.hierarchy.n_levels + 1)
        noisy = self.noise(counts, gens[:-1], size)
        return self.chain(counts)(noisy, rng=gens[-1]) if self.steps else noisy

    def simulation(self, truth: ArrayLike | None = None, *, raw: bool = False) -> Simulation:
        """The prepared Monte Carlo run of this design on ``truth`` (the engine's protocol,
        :mod:`postdp.analysis.simulation`).

        Parameters
        ----------
        truth : array_like, shape (n,), optional
            True counts (default: the hierarchy's).
        raw : bool, default False
            Whether errors before post-processing will be asked for (always possible here).

        Returns
        -------
        Simulation
        """
        counts = self._truth(truth)
        chain = self.chain(counts) if self.steps else None
        return _HierarchySimulation(self, counts, self.error_scale(), chain)

    def _truth(self, truth: ArrayLike | None) -> NumArray:
        if truth is None:
            if self.hierarchy.counts is None:
                raise ValidationError("`truth` is needed: the hierarchy holds no true counts")
            return self.hierarchy.counts
        counts = _validation.real_array("truth", truth)
        if counts.shape != (self.hierarchy.n,):
            raise ValidationError(
                f"`truth` must have shape ({self.hierarchy.n},); got {counts.shape}"
            )
        _validation.nonnegative("truth", counts)
        return counts


@dataclass(frozen=True, slots=True)
class _HierarchySimulation:
    """A hierarchy design's prepared run: noise level by level, then the chain."""

    design: ReleaseDesign
    truth: NumArray
    error_scale: FloatArray
    chain: PostProcessChain | None  # prepared once per run (projectors included)

    def release(
        self, seeds: Sequence[np.random.SeedSequence], sizes: Sequence[int], raw: IntArray
    ) -> ChunkRelease:
        """The released values of the chunks (rows x nodes), drawn into one batch; chunk k's
        levels and rounding draw from children of ``seeds[k]``."""
        design = self.design
        levels = design.hierarchy.n_levels
        streams = [[np.random.default_rng(s) for s in seed.spawn(levels + 1)] for seed in seeds]
        bounds = np.cumsum([0, *sizes])
        noisy = np.empty((int(bounds[-1]), self.truth.size), dtype=design.noise_dtype())
        for i, gens in enumerate(streams):  # each chunk drawn into its rows of the batch
            design.noise(self.truth, gens[:levels], sizes[i], out=noisy[bounds[i] : bounds[i + 1]])
        before = noisy[:, raw].copy() if raw.size else None  # the chain may reuse ``noisy``
        chain = self.chain
        if chain is None:
            released = noisy.astype(np.float64, copy=False)
        elif any(s.name == ROUND.name for s in design.steps):  # rounding: each chunk's stream
            parts = [
                chain(noisy[bounds[i] : bounds[i + 1]], rng=streams[i][levels])
                for i in range(len(sizes))
            ]
            released = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
        else:  # the batch is ours: the chain may overwrite it
            values = noisy.astype(np.float64, copy=False)
            released = np.asarray(chain._apply(values, rng=None, owned=True), dtype=np.float64)
        return ChunkRelease(released, raw=before)


def register_table_design(table_design: type) -> None:
    """Make ``ReleaseDesign(table, workload, ...)`` build a ``table_design`` (and
    ``isinstance(it, ReleaseDesign)`` true); called once by
    :mod:`postdp.analysis.table_design`."""
    ReleaseDesign.register(table_design)
    _TABLE_DESIGN[:] = [table_design]

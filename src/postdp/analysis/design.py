"""Release designs: what a release does, as a design the Monte Carlo engine can run.

One class to call, :class:`ReleaseDesign`: on a :class:`~postdp.hierarchy.Hierarchy` it is
noise per level plus a post-processing chain; on a :class:`~postdp.tables.Table` and its
:class:`~postdp.tables.Workload` it builds a :class:`TableDesign` (a workload measured on
the table, then one post-processing, optionally rounded). A hierarchy of counts is the
one-cell table; its design keeps the fast path of the tree's own kernels (level-by-level
noise into one batch, the chain's prepared projectors), and the raw errors and public
invariants those kernels give.

:func:`postdp.simulate` runs either with the same streaming, seeded and batch-invariant
engine: a table design's entities are the (geounit, category node) counts, and beside the
per-count statistics it adds up, per geounit, the sums behind the Census Bureau's error
metrics (:func:`postdp.analysis.table_metric_sums`), so :meth:`TableDesign.metrics` gives
them for any number of draws with memory that does not grow with the draws.
"""

from __future__ import annotations

from abc import ABCMeta
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import sparse

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray, IntArray, NumArray, RNGLike
from postdp.analysis.cell_metrics import SIZE_BINS, table_metric_sums, table_metrics_from_sums
from postdp.analysis.simulation import ChunkRelease, Simulation
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy, PublicSpec, public_values
from postdp.mechanisms import Budget, NoiseMechanism, expand_mechanisms
from postdp.postprocess import PostProcessChain, Step, inverse_variance_weights, parse_steps
from postdp.postprocess.estimators import PROJECT, ROUND, estimators, parse_table_method
from postdp.tables import Table, TableMeasurements, Workload, category_matrix, measure
from postdp.tables.bypass import check_budget_scale

if TYPE_CHECKING:
    from postdp.analysis.result import MonteCarloResult

__all__ = ["ReleaseDesign", "TableDesign"]


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
        if isinstance(hierarchy, Table):  # one class to call
            return TableDesign(hierarchy, *args, **kwargs)
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


#: Arrays of a table's (geounits x category nodes) size alive while one draw is solved.
_SOLVE_ARRAYS = 12


@dataclass(frozen=True, eq=False)
class TableDesign:
    """A table release design: measure ``workload`` on ``table``, then post-process.

    Parameters
    ----------
    table : Table
        The truth of the simulations.
    workload : Workload
    postprocess : str, default "project"
        A table estimator of :func:`postdp.postprocess.estimators` (or ``"none"``: the
        measured counts only, which cover only the measured queries), optionally followed
        by ``",round"`` (:func:`postdp.postprocess.parse_table_method`). Checked here, with
        the workload (the estimator's own checks, e.g. top-down's requirements), before
        anything is drawn.
    budget_scale : array_like, shape (geography.n,), optional
        Each geounit's multiple of its level's budget (the production spine's bypass,
        :func:`postdp.tables.single_child_bypass`), checked here to spend no more than the
        workload on any path; the estimators that weigh each geounit by its own budget
        (:attr:`~postdp.postprocess.Estimator.per_geounit`) are then the only ones taken.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[3, 4], [5, 6]])
    >>> w = Workload([Measurement(d, Query.detailed(cat), Geometric(epsilon=1.0))
    ...               for d in range(2)])
    >>> TableDesign(t, w, "topdown,round").run(rng=0, size=2).shape  # every count
    (2, 3, 3)
    """

    table: Table
    workload: Workload
    postprocess: str = PROJECT.name
    budget_scale: ArrayLike | None = field(default=None, kw_only=True)
    step: str | None = field(init=False)
    rounded: bool = field(init=False)
    projector: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.table, Table):
            raise TypeError(f"`table` must be a Table; got {type(self.table).__name__}")
        if not isinstance(self.workload, Workload):
            raise TypeError(f"`workload` must be a Workload; got {type(self.workload).__name__}")
        method = parse_table_method(self.postprocess)
        est = method.step
        object.__setattr__(self, "step", None if est is None else est.name)
        object.__setattr__(self, "rounded", method.rounded)
        scale = check_budget_scale(self.budget_scale, self.table.geography, self.workload)
        object.__setattr__(self, "budget_scale", scale)
        if scale is not None and est is not None and not est.per_geounit:
            fit = [e.name for e in estimators("table") if e.per_geounit]
            raise ValidationError(
                f"postprocess {self.postprocess!r} weighs every geounit of a level alike; "
                f"with `budget_scale` use one of {', '.join(fit)}"
            )
        projector: Any = None
        if est is not None:
            est.check_design(self.table, self.workload)
            projector = est.table_solver(self.table, self.workload, budget_scale=scale)
        object.__setattr__(self, "projector", projector)

    @property
    def budget(self) -> Budget:
        """Privacy cost of the workload."""
        return self.workload.budget

    @property
    def solve_bytes(self) -> int:
        """Bytes one draw's post-processing holds (about 12 arrays of geounits x category
        nodes float64), counted once per worker by :func:`postdp.analysis.memory_plan`."""
        return self.table.geography.n * self.table.categories.n * 8 * _SOLVE_ARRAYS

    @property
    def n_entities(self) -> int:
        """Counts simulated: every (geounit, category node)."""
        return self.table.geography.n * self.table.categories.n

    @property
    def entity_ids(self) -> npt.NDArray[np.object_]:
        """``"geo_id:category"`` of every count, geounits major."""
        geo, cat = self.table.geography, self.table.categories
        g = np.repeat(geo.ids.astype(str), cat.n).astype(object)
        return np.asarray(g + ":" + np.tile(cat.ids.astype(str), geo.n).astype(object))

    def entity_index(self, ids: list[str]) -> IntArray:
        """Positions of ``"geo_id:category"`` ids among :attr:`entity_ids`."""
        where = pd.Index(self.entity_ids).get_indexer(pd.Index(ids))
        if (where < 0).any():
            raise ValidationError(
                f"unknown counts {[i for i, w in zip(ids, where, strict=True) if w < 0]}; "
                "name them 'geo_id:category'"
            )
        return np.asarray(where, dtype=np.int64)

    def solve(self, measurements: TableMeasurements, *, rng: RNGLike = None) -> FloatArray:
        """The post-processed detailed histograms of every geounit.

        Parameters
        ----------
        measurements : TableMeasurements
        rng : int, numpy.random.Generator, SeedSequence or None
            For the rounding (when the design rounds).

        Returns
        -------
        ndarray, shape (..., geography.n, n_detailed)
        """
        if self.projector is None:
            raise ValidationError("a design without post-processing has no released table")
        detailed: FloatArray = self.projector(measurements)
        if not self.rounded:
            return detailed
        from postdp.postprocess import round as round_values

        rounded: FloatArray = round_values(detailed, self.table, rng=rng).astype(np.float64)
        return rounded

    def run(
        self, truth: ArrayLike | None = None, *, rng: RNGLike = None, size: int = 1
    ) -> FloatArray:
        """``size`` independent releases (study path): every (geounit, category node).

        Parameters
        ----------
        truth : array_like, shape (leaf geounits, detailed cells), optional
            The detailed cells to release (default: the table's), as ``Table(cells=...)``.
        rng : int, numpy.random.Generator, SeedSequence or None
        size : int, default 1

        Returns
        -------
        ndarray, shape (size, geography.n, categories.n)
        """
        from postdp import _rng

        noise, rounding = _rng.spawn(rng, 2)
        table = self._table_for(truth)
        draws = measure(
            table, self.workload, secure=False, rng=noise, size=size,
            budget_scale=self.budget_scale, budget_checked=True,
        )  # fmt: skip
        full: FloatArray = self.solve(draws, rng=rounding) @ self._category_matrix.T
        return full

    @property
    def _category_matrix(self) -> FloatArray:
        C: FloatArray = category_matrix(self.table.categories).astype(np.float64)
        return C

    @property
    def steps(self) -> tuple[str, ...]:
        """The post-processing steps in order, e.g. ``("project-nonneg", "round")`` (a
        hierarchy design's :attr:`ReleaseDesign.steps` hold parsed steps)."""
        return tuple(s for s in (self.step, ROUND.name if self.rounded else None) if s)

    def _table_for(self, truth: ArrayLike | None) -> Table:
        """The design's table, or the same geography and categories holding ``truth``."""
        if truth is None:
            return self.table
        if sparse.issparse(truth):
            return replace(self.table, cells=truth)  # type: ignore[arg-type]
        return replace(self.table, cells=np.asarray(truth))

    def _truth(self, truth: ArrayLike | None) -> NumArray:
        out: NumArray = self._table_for(truth).counts().reshape(-1)
        return out

    def error_scale(self) -> FloatArray:
        """Half-width of each count's error histogram: 8 noise standard deviations of the
        count measured directly from the detailed cells at every level (a generous bound
        for the post-processed estimate)."""
        geo, cat = self.table.geography, self.table.categories
        var = np.zeros(cat.leaves.size)
        for m in self.workload.measurements:
            if not m.public:
                var = np.maximum(var, m.variance)
        per_node = self._category_matrix @ var * geo.n_levels  # category node x (levels of noise)
        return np.asarray(np.tile(8.0 * np.sqrt(np.maximum(per_node, 1e-12)), geo.n))

    def simulation(self, truth: ArrayLike | None = None, *, raw: bool = False) -> Simulation:
        """The prepared Monte Carlo run of this design (the engine's protocol,
        :mod:`postdp.analysis.simulation`): on the table's counts or ``truth``, with the design's
        post-processing, adding the per-geounit sums behind the Census Bureau's metrics.

        Parameters
        ----------
        truth : array_like, shape (leaf geounits, detailed cells), optional
            The detailed cells simulated (default: the table's).
        raw : bool, default False
            Errors before post-processing are not available for tables.

        Returns
        -------
        Simulation

        Raises
        ------
        ValidationError
            For a ``truth`` of the wrong shape, ``raw``, or a design without
            post-processing.
        """
        if raw or self.step is None:
            raise ValidationError(
                "a TableDesign is simulated with its post-processing and without `raw`"
            )
        table = self._table_for(truth)
        return _TableSimulation(self, table, self._truth(truth), self.error_scale())

    def frame(self, result: MonteCarloResult) -> pd.DataFrame:
        """The result's per-count frame with ``geo_id``, ``level`` and ``category`` columns
        in place of the ``id`` column.

        Parameters
        ----------
        result : MonteCarloResult
            Of :func:`postdp.simulate` on this design.

        Returns
        -------
        pandas.DataFrame
        """
        frame = result.to_frame()
        geo, cat = self.table.geography, self.table.categories
        frame.insert(0, "geo_id", np.repeat(geo.ids, cat.n))
        frame.insert(1, "level", np.repeat(geo.depth, cat.n))
        frame.insert(2, "category", np.tile(cat.ids, geo.n))
        return frame.drop(columns="id")

    def metrics(
        self,
        result: MonteCarloResult,
        *,
        truth: ArrayLike | None = None,
        bins: tuple[int, ...] = SIZE_BINS,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The Census Bureau's metrics by level and size bin, and by diversity quintile,
        over every draw of ``result`` (see :func:`postdp.analysis.table_error_metrics`).

        Parameters
        ----------
        result : MonteCarloResult
        truth : array_like, optional
            The detailed cells the result was simulated on, when not the table's.
        bins : tuple of int, default (0, 10, 100, 1000, 10000)

        Returns
        -------
        by_size, by_diversity : pandas.DataFrame
        """
        if not result.extra:
            raise ValidationError("`result` holds no table metric sums (simulate a TableDesign)")
        return table_metrics_from_sums(result.extra, self._table_for(truth), bins=bins)


@dataclass(frozen=True)
class _TableSimulation:
    """A table design's prepared run: measure, post-process, expand every category node."""

    design: TableDesign
    table: Table
    truth: NumArray
    error_scale: FloatArray

    def release(
        self, seeds: Sequence[np.random.SeedSequence], sizes: Sequence[int], raw: IntArray
    ) -> ChunkRelease:
        """Every count of each chunk's releases, and each chunk's per-geounit metric sums."""
        design = self.design
        parts, extra = [], []
        for seed, rows in zip(seeds, sizes, strict=True):
            noise, rounding = (np.random.default_rng(s) for s in seed.spawn(2))
            draws = measure(
                self.table, design.workload, secure=False, rng=noise, size=rows,
                budget_scale=design.budget_scale, budget_checked=True,
            )  # fmt: skip
            detailed = design.solve(draws, rng=rounding)
            extra.append(table_metric_sums(detailed, self.table))
            parts.append((detailed @ design._category_matrix.T).reshape(rows, -1))
        values = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
        return ChunkRelease(values, extra=tuple(extra))


# One design class: ReleaseDesign(table, workload, ...) builds a TableDesign, and
# isinstance(a TableDesign, ReleaseDesign) holds.
ReleaseDesign.register(TableDesign)

"""Release designs: what a release does, as a design the Monte Carlo engine can run.

One class, :class:`ReleaseDesign`, for both models. On a :class:`~postdp.hierarchy.Hierarchy`
of counts (the one-cell table: one total per geounit, measured at every level) it is one noise
mechanism per level plus a post-processing chain; on a :class:`~postdp.tables.Table` it is a
:class:`~postdp.tables.Workload` measured on the table, then one table estimator, optionally
rounded. :attr:`ReleaseDesign.model` says which (``"hierarchy"`` or ``"table"``, the models
of :func:`postdp.postprocess.estimators`). A hierarchy's design runs the one-cell fast path of
the table model: level-by-level noise into one batch and the chain's prepared counts solvers,
the same solvers a one-cell table's estimators reach (a test holds the two to the same law),
with the raw errors and the public nodes that path gives.

:func:`postdp.simulate` runs either with the same streaming, seeded and batch-invariant
engine: a table design's entities are the (geounit, category node) counts, and beside the
per-count statistics it adds up, per geounit, the sums behind the Census Bureau's error
metrics (:func:`postdp.analysis.table_metric_sums`), so :meth:`ReleaseDesign.metrics` gives
them for any number of draws with memory that does not grow with the draws.
"""

from __future__ import annotations

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
from postdp.tables import (
    CountBounds,
    Table,
    TableMeasurements,
    Workload,
    category_matrix,
    check_bounds,
    measure,
)
from postdp.tables.bypass import check_budget_scale

if TYPE_CHECKING:
    from postdp.analysis.result import MonteCarloResult

__all__ = ["ReleaseDesign"]

#: Arrays of a table's (geounits x category nodes) size alive while one draw is solved.
_SOLVE_ARRAYS = 12


@dataclass(frozen=True, eq=False, init=False)
class ReleaseDesign:
    """What a release does: noise, then post-processing, on a hierarchy or a table.

    Parameters
    ----------
    source : Hierarchy or Table
        A hierarchy of counts (its true counts are the default truth of a simulation), or a
        table (likewise).
    noise : NoiseMechanism, sequence of NoiseMechanism, or Workload
        A hierarchy's mechanisms: one for every level, or one per level, root first. A
        table's workload.
    postprocess : str or sequence of Step, optional
        A hierarchy's chain, e.g. ``"project-nonneg,round"`` (:func:`postdp.postprocess.
        parse_steps`); a table's estimator, optionally followed by ``",round"``
        (:func:`postdp.postprocess.parse_table_method`). Either is checked here (a table's
        with its workload: the estimator's own requirements) before anything is drawn.
        ``"none"`` releases the noisy counts (a table's measured queries only, which a
        simulation refuses). Default: ``"none"`` for a hierarchy, ``"project"`` for a table
        (its noisy answers are not a count of every cell).
    public : mapping, sequence of str, "root" or None
        Hierarchies: invariant nodes of the projection steps (held at the simulation's true
        counts when given as ids). A table's public values are public measurements of its
        workload.
    weights : {"equal", "inverse-variance"}, default "equal"
        Hierarchies: the weights of the projection steps (a table's estimators weigh every
        answer by its own variance).
    budget_scale : array_like, shape (geography.n,), optional
        Tables: each geounit's multiple of its level's budget (the production spine's bypass,
        :func:`postdp.tables.single_child_bypass`), checked here to spend no more than the
        workload on any path; the estimators that weigh each geounit by its own budget
        (:attr:`~postdp.postprocess.Estimator.per_geounit`) are then the only ones taken.
    bounds : sequence of CountBounds, optional
        Tables: structural bounds every draw's measurements carry (e.g. the 2020
        group-quarters bounds, :func:`postdp.data.facility_bounds`), held by the estimators
        that hold bounds (``topdown-2020`` and the restorations) and ignored by the others,
        as they are in a release; checked against the workload's schema here.

    Attributes
    ----------
    model : {"hierarchy", "table"}
        Which of the two the design is on.
    hierarchy : Hierarchy
        The geography (a table's own).
    table : Table or None
        The table of a table design.
    workload : Workload or None
        The workload of a table design.
    mechanisms : tuple of NoiseMechanism
        A hierarchy's mechanism per level, root first (empty for a table).
    steps : tuple of Step
        The post-processing steps in order.
    budget : Budget
        The privacy cost: a hierarchy's levels composed in sequence; a table's workload.

    Examples
    --------
    >>> from postdp import Geometric
    >>> from postdp.data import county_hierarchy
    >>> d = ReleaseDesign(county_hierarchy(), Geometric(0.5), "project-nonneg,round")
    >>> d.model, d.budget, [str(s) for s in d.steps]
    ('hierarchy', Budget(epsilon=1.5, rho=0.0), ['project-nonneg', 'round'])
    >>> from postdp.data import synthetic_table
    >>> from postdp.tables import Measurement, Query, Workload
    >>> t = synthetic_table((2,), leaf_mean=20, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Geometric(1.0))
    ...               for d in range(2)])
    >>> td = ReleaseDesign(t, w, "topdown,round")
    >>> td.model, [str(s) for s in td.steps], td.run(rng=0, size=2).shape  # every count
    ('table', ['topdown', 'round'], (2, 3, 71))
    """

    model: Literal["hierarchy", "table"]
    hierarchy: Hierarchy
    table: Table | None
    workload: Workload | None
    mechanisms: tuple[NoiseMechanism, ...]
    postprocess: str
    steps: tuple[Step, ...]
    public: PublicSpec
    weights: Literal["equal", "inverse-variance"]
    budget_scale: FloatArray | None
    bounds: tuple[CountBounds, ...]
    projector: Any = field(repr=False)

    def __init__(
        self,
        source: Hierarchy | Table,
        noise: NoiseMechanism | Sequence[NoiseMechanism] | Workload,
        postprocess: str | Sequence[Step] | None = None,
        *,
        public: PublicSpec = None,
        weights: Literal["equal", "inverse-variance"] = "equal",
        budget_scale: ArrayLike | None = None,
        bounds: Sequence[CountBounds] = (),
    ) -> None:
        put = object.__setattr__
        put(self, "public", public)
        put(self, "weights", weights)
        put(self, "projector", None)
        put(self, "budget_scale", None)
        put(self, "bounds", tuple(bounds))
        if isinstance(source, Table):
            self._init_table(source, noise, postprocess, budget_scale)
            return
        if not isinstance(source, Hierarchy):
            raise TypeError(f"`source` must be a Hierarchy or a Table; got {type(source).__name__}")
        if isinstance(noise, Workload):
            raise TypeError("a Workload is measured on a Table; a Hierarchy takes mechanisms")
        if budget_scale is not None:
            raise ValidationError("`budget_scale` is for table designs (a workload's geounits)")
        if self.bounds:
            raise ValidationError("`bounds` are for table designs (a schema's counts)")
        if weights not in ("equal", "inverse-variance"):
            raise ValidationError(
                f"`weights` must be 'equal' or 'inverse-variance'; got {weights!r}"
            )
        if postprocess is None:
            postprocess = "none"
        steps = parse_steps(postprocess) if isinstance(postprocess, str) else tuple(postprocess)
        put(self, "model", "hierarchy")
        put(self, "hierarchy", source)
        put(self, "table", None)
        put(self, "workload", None)
        put(self, "mechanisms", expand_mechanisms(noise, count=source.n_levels))
        put(self, "steps", steps)
        put(self, "postprocess", ",".join(map(str, steps)) or "none")
        self.chain(source.counts)  # validates the steps and the public nodes now

    def _init_table(
        self, table: Table, workload: Any, postprocess: Any, budget_scale: ArrayLike | None
    ) -> None:
        put = object.__setattr__
        if not isinstance(workload, Workload):
            raise TypeError(f"a Table is measured by a Workload; got {type(workload).__name__}")
        if self.public is not None or self.weights != "equal":
            raise ValidationError(
                "`public` and `weights` are for hierarchy designs: a table's public values are "
                "public measurements of its workload, and its estimators weigh every answer "
                "by its variance"
            )
        if postprocess is None:
            postprocess = PROJECT.name
        text = postprocess if isinstance(postprocess, str) else ",".join(map(str, postprocess))
        method = parse_table_method(text)
        est = method.step
        put(self, "model", "table")
        put(self, "hierarchy", table.geography)
        put(self, "table", table)
        put(self, "workload", workload)
        put(self, "mechanisms", ())
        put(self, "steps", tuple(Step(s.name) for s in (method.step, method.finish) if s))
        put(self, "postprocess", str(method))
        scale = check_budget_scale(budget_scale, table.geography, workload)
        put(self, "budget_scale", scale)
        check_bounds(self.bounds, workload, geounits=table.geography.n)
        if scale is not None and est is not None and not est.per_geounit:
            fit = [e.name for e in estimators("table") if e.per_geounit]
            raise ValidationError(
                f"postprocess {text!r} weighs every geounit of a level alike; "
                f"with `budget_scale` use one of {', '.join(fit)}"
            )
        if est is not None:
            est.check_design(table, workload)
            put(self, "projector", est.table_solver(table, workload, budget_scale=scale))

    # --- what both models have ------------------------------------------------------------

    @property
    def budget(self) -> Budget:
        """The privacy cost: the levels composed in sequence (each level's geounits are
        disjoint), or the table's workload."""
        if self.workload is not None:
            return self.workload.budget
        return Budget.compose(m.privacy_cost() for m in self.mechanisms)

    @property
    def step(self) -> str | None:
        """The estimator (the first step that is not a finisher), or None."""
        return next((s.name for s in self.steps if s.name != ROUND.name), None)

    @property
    def rounded(self) -> bool:
        """Whether the post-processing rounds."""
        return any(s.name == ROUND.name for s in self.steps)

    @property
    def n_entities(self) -> int:
        """Values one release holds: a hierarchy's nodes, or every (geounit, category node)
        of a table."""
        if self.table is None:
            return self.hierarchy.n
        return self.table.geography.n * self.table.categories.n

    @property
    def entity_ids(self) -> npt.NDArray[np.object_]:
        """A hierarchy's node ids, or ``"geo_id:category"`` of every count of a table,
        geounits major."""
        if self.table is None:
            return self.hierarchy.ids
        geo, cat = self.table.geography, self.table.categories
        g = np.repeat(geo.ids.astype(str), cat.n).astype(object)
        return np.asarray(g + ":" + np.tile(cat.ids.astype(str), geo.n).astype(object))

    def entity_index(self, ids: list[str]) -> IntArray:
        """Positions of entity ids among :attr:`entity_ids`."""
        if self.table is None:
            return self.hierarchy.index(ids)
        where = pd.Index(self.entity_ids).get_indexer(pd.Index(ids))
        if (where < 0).any():
            raise ValidationError(
                f"unknown counts {[i for i, w in zip(ids, where, strict=True) if w < 0]}; "
                "name them 'geo_id:category'"
            )
        return np.asarray(where, dtype=np.int64)

    def error_scale(self) -> FloatArray:
        """Half-width of each entity's error histogram: 8 standard deviations of the noise
        summed down its path (for a table, the count measured directly from the detailed
        cells at every level: a generous bound for the post-processed estimate)."""
        if self.table is None:
            variances = np.array([m.variance() for m in self.mechanisms])
            out: FloatArray = 8.0 * np.sqrt(np.cumsum(variances))[self.hierarchy.depth]
            return out
        geo, cat = self.table.geography, self.table.categories
        assert self.workload is not None
        var = np.zeros(cat.leaves.size)
        for m in self.workload.measurements:
            if not m.public:
                var = np.maximum(var, m.variance)
        per_node = self._category_matrix @ var * geo.n_levels  # category node x noise levels
        return np.asarray(np.tile(8.0 * np.sqrt(np.maximum(per_node, 1e-12)), geo.n))

    def run(
        self, truth: ArrayLike | None = None, *, rng: RNGLike = None, size: int = 1
    ) -> NumArray:
        """Noise and post-process ``size`` independent draws (study path).

        Parameters
        ----------
        truth : array_like, optional
            A hierarchy's true counts, shape (n,); a table's detailed cells, shape (leaf
            geounits, detailed cells), as ``Table(cells=...)``. Default: the design's.
        rng : int, numpy.random.Generator, SeedSequence or None
        size : int, default 1

        Returns
        -------
        ndarray
            Shape (size, n) for a hierarchy; (size, geography.n, categories.n), every
            (geounit, category node), for a table.

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> ReleaseDesign(h, Geometric(1.0), "project-nonneg,round").run(rng=0, size=2).shape
        (2, 3)
        """
        from postdp import _rng

        if self.table is None:
            counts = self._truth(truth)
            gens = _rng.spawn(rng, self.hierarchy.n_levels + 1)
            noisy = self.noise(counts, gens[:-1], size)
            return self.chain(counts)(noisy, rng=gens[-1]) if self.steps else noisy
        noise, rounding = _rng.spawn(rng, 2)
        draws = self._measure(self._table_for(truth), noise, size)
        full: FloatArray = self.solve(draws, rng=rounding) @ self._category_matrix.T
        return full

    def simulation(self, truth: ArrayLike | None = None, *, raw: bool = False) -> Simulation:
        """The prepared Monte Carlo run of this design on ``truth`` (the engine's protocol,
        :mod:`postdp.analysis.simulation`).

        Parameters
        ----------
        truth : array_like, optional
            As for :meth:`run` (default: the design's).
        raw : bool, default False
            Whether errors before post-processing will be asked for (hierarchies only).

        Returns
        -------
        Simulation

        Raises
        ------
        ValidationError
            For a ``truth`` of the wrong shape; for a table, ``raw`` or a design without
            post-processing.
        """
        if self.table is None:
            counts = self._truth(truth)
            chain = self.chain(counts) if self.steps else None
            return _HierarchySimulation(self, counts, self.error_scale(), chain)
        if raw or self.step is None:
            raise ValidationError(
                "a table design is simulated with its post-processing and without `raw`"
            )
        table = self._table_for(truth)
        return _TableSimulation(self, table, self._truth(truth), self.error_scale())

    def _truth(self, truth: ArrayLike | None) -> NumArray:
        if self.table is not None:
            out: NumArray = self._table_for(truth).counts().reshape(-1)
            return out
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

    # --- a hierarchy of counts --------------------------------------------------------------

    @property
    def per_level(self) -> tuple[NoiseMechanism, ...]:
        """The mechanism of each level, root first (hierarchy designs)."""
        self._require("hierarchy", "per_level")
        return self.mechanisms

    def chain(self, truth: ArrayLike | None = None) -> PostProcessChain:
        """The prepared post-processing chain for true counts ``truth`` (public values);
        hierarchy designs.

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
        self._require("hierarchy", "chain")
        public = self.public
        if truth is not None:
            public = public_values(self.hierarchy, public=public, values=truth)
        weights = (
            inverse_variance_weights(self.hierarchy, self.mechanisms)
            if self.weights == "inverse-variance"
            else None
        )
        return PostProcessChain(
            self.hierarchy, self.mechanisms, self.steps, public=public, weights=weights
        )

    def noise_dtype(self) -> type[np.int64] | type[np.float64]:
        """int64 when every level's mechanism is discrete, float64 otherwise."""
        return np.int64 if all(m.discrete for m in self.mechanisms) else np.float64

    def noise(
        self,
        truth: NumArray,
        gens: Sequence[np.random.Generator],
        rows: int,
        out: NumArray | None = None,
    ) -> NumArray:
        """``rows`` noisy draws of a hierarchy's ``truth`` (study path), level ``d`` drawn
        from ``gens[d]``: the one-cell table's measurement of every level, drawn into one
        batch.

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
        self._require("hierarchy", "noise")
        h = self.hierarchy
        if out is None:
            out = np.empty((rows, h.n), dtype=self.noise_dtype())
        for d, nodes in enumerate(h.levels):
            m = self.mechanisms[d]
            lo, hi = int(nodes[0]), int(nodes[-1]) + 1
            base = truth[nodes]
            if m.discrete:
                base = _validation.integer_array("truth", base)
            if hi - lo == nodes.size:  # a level stored contiguously: drawn into its columns
                m._sample_into(base, gens[d], out[:, lo:hi])
            else:
                out[:, nodes] = m.sample(base, rng=gens[d], size=rows)
        return out

    # --- a table ----------------------------------------------------------------------------

    @property
    def solve_bytes(self) -> int:
        """Bytes one draw's post-processing holds: about 12 arrays of geounits x category
        nodes float64 for a table (counted once per worker by
        :func:`postdp.analysis.memory_plan`); 0 for a hierarchy, whose solve is part of the
        batch."""
        if self.table is None:
            return 0
        return self.table.geography.n * self.table.categories.n * 8 * _SOLVE_ARRAYS

    def solve(
        self, measurements: TableMeasurements, *, rng: RNGLike = None, held: ArrayLike | None = None
    ) -> FloatArray:
        """The post-processed detailed histograms of every geounit (table designs).

        Parameters
        ----------
        measurements : TableMeasurements
        rng : int, numpy.random.Generator, SeedSequence or None
            For the rounding (when the design rounds).
        held : array_like of int, shape (geography.n, 2016), optional
            The DHC persons design's PL94 histograms to hold, for an estimator that holds
            them (``Estimator.holds``: its solver prepared anew with them); the others
            ignore them, as they ignore bounds they do not hold.

        Returns
        -------
        ndarray, shape (..., geography.n, n_detailed)
        """
        self._require("table", "solve")
        if self.projector is None:
            raise ValidationError("a design without post-processing has no released table")
        solver = self.projector
        if held is not None:
            est = parse_table_method(self.postprocess).step
            if est is not None and est.holds:
                assert self.table is not None and self.workload is not None
                solver = est.table_solver(
                    self.table, self.workload, budget_scale=self.budget_scale, held=held
                )
        detailed: FloatArray = solver(measurements)
        if not self.rounded:
            return detailed
        from postdp.postprocess import round as round_values

        assert self.table is not None
        rounded: FloatArray = round_values(detailed, self.table, rng=rng).astype(np.float64)
        return rounded

    def frame(self, result: MonteCarloResult) -> pd.DataFrame:
        """The result's per-count frame with ``geo_id``, ``level`` and ``category`` columns
        in place of the ``id`` column (table designs).

        Parameters
        ----------
        result : MonteCarloResult
            Of :func:`postdp.simulate` on this design.

        Returns
        -------
        pandas.DataFrame
        """
        table = self._require("table", "frame")
        frame = result.to_frame()
        geo, cat = table.geography, table.categories
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
        over every draw of ``result`` (see :func:`postdp.analysis.table_error_metrics`);
        table designs.

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
        self._require("table", "metrics")
        if not result.extra:
            raise ValidationError("`result` holds no table metric sums (simulate a table design)")
        return table_metrics_from_sums(result.extra, self._table_for(truth), bins=bins)

    def _measure(self, table: Table, rng: Any, size: int) -> TableMeasurements:
        assert self.workload is not None
        return measure(
            table, self.workload, secure=False, rng=rng, size=size, bounds=self.bounds,
            budget_scale=self.budget_scale, budget_checked=True,
        )  # fmt: skip

    @property
    def _category_matrix(self) -> FloatArray:
        assert self.table is not None
        C: FloatArray = category_matrix(self.table.categories).astype(np.float64)
        return C

    def _table_for(self, truth: ArrayLike | None) -> Table:
        """The design's table, or the same geography and categories holding ``truth``."""
        assert self.table is not None
        if truth is None:
            return self.table
        if sparse.issparse(truth):
            return replace(self.table, cells=truth)  # type: ignore[arg-type]
        return replace(self.table, cells=np.asarray(truth))

    def _require(self, model: str, what: str) -> Any:
        """The table (or hierarchy) of a design of ``model``; one line otherwise."""
        if self.model != model:
            raise ValidationError(
                f"`{what}` is for {model} designs; this design is on a {self.model}"
            )
        return self.table if model == "table" else self.hierarchy


@dataclass(frozen=True, slots=True)
class _HierarchySimulation:
    """A hierarchy design's prepared run: noise level by level into one batch, then the
    chain."""

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
        elif design.rounded:  # rounding: each chunk's own stream
            parts = [
                chain(noisy[bounds[i] : bounds[i + 1]], rng=streams[i][levels])
                for i in range(len(sizes))
            ]
            released = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
        else:  # the batch is ours: the chain may overwrite it
            values = noisy.astype(np.float64, copy=False)
            released = np.asarray(chain._apply(values, rng=None, owned=True), dtype=np.float64)
        return ChunkRelease(released, raw=before)


@dataclass(frozen=True)
class _TableSimulation:
    """A table design's prepared run: measure, post-process, expand every category node."""

    design: ReleaseDesign
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
            detailed = design.solve(design._measure(self.table, noise, rows), rng=rounding)
            extra.append(table_metric_sums(detailed, self.table))
            parts.append((detailed @ design._category_matrix.T).reshape(rows, -1))
        values = np.ascontiguousarray(np.concatenate(parts), dtype=np.float64)
        return ChunkRelease(values, extra=tuple(extra))

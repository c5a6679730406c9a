"""Measuring a nation state by state into a run of noisy measurement files.

A national persons run at block level is about 21 billion noisy counts (8.1 million blocks,
2,603 counts each): it never fits in memory at once, and need not. The measurements of
different geounits are independent, so each state's subtree (its counties, tracts, block
groups and blocks) is measured and written on its own, then the top (the nation and the
states, from each state's histogram). The draws have the same law as measuring the whole
table at once; only one state's table and answers are held at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from postdp import _rng
from postdp._typing import RNGLike
from postdp._validation import fraction
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._io import _atomic_text, _geocodes, _pyarrow, _shares, write_levels
from postdp.nmf._manifest import SYNTHETIC, _total, continuous, run_manifest, synthetic_record
from postdp.tables import CountBounds, Table, measure, single_child_bypass
from postdp.tables.bypass import check_budget_scale

__all__ = ["measure_by_state"]


def measure_by_state(
    tables: Callable[[str], Table],
    states: Sequence[str],
    run_dir: str | os.PathLike[str],
    *,
    strategy: Any,
    secure: bool = True,
    rng: RNGLike = None,
    cut_blocks: int = 100_000,
    bounds: Callable[[Table], Sequence[CountBounds]] | None = None,
    bypass: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    population_seed: int | None = None,
    population_scale: float = 1.0,
    sampler: str | None = None,
    scheduler: Any = None,
) -> Path:
    """Measure each state's table with a preset strategy and write the run, one state at a
    time.

    Parameters
    ----------
    tables : callable
        ``tables(state)`` returns the state's :class:`~postdp.tables.Table`: the nation >
        that state > ... geography of the strategy's levels (as
        ``synthetic_population(states=[state])``). Called once per state.
    states : sequence of str
        The states, in the run's order.
    run_dir : path
        A new or empty folder.
    strategy : Strategy
        A preset (:func:`postdp.tables.load_strategy`).
    secure : bool, default True
        The release path (noise from ``sampler``); False: numpy's study path, reproducible
        from ``rng``.
    rng : int, numpy.random.Generator, SeedSequence or None
        Study path only; each state and the top get their own stream.
    cut_blocks : int, default 100_000
        A state with more blocks is measured county by county (its counties' own
        measurements, then each county's subtree, written to ``part-<county
        geocode>.parquet`` in the state's partition; a county still too large, tract by
        tract): at most one such subtree's answers are held. The same law (every
        geounit's noise is independent), other draws on the study path.
    bounds : callable, optional
        ``bounds(table)``: the structural bounds of a state's table (e.g. ``lambda t:
        facility_bounds(synthetic_facilities(t), t.geography)``), written as ``Constraint``
        rows beside the measurements; the nation's are the sums of its states'.
    bypass : bool, default False
        The production spine's single-child bypass from the counties down
        (:func:`postdp.tables.single_child_bypass`, on each state's table): a chain of only
        children measured once, at its top, with the chain's budget; the geounits below
        have no ``DPQuery`` rows.
    progress : callable, optional
        ``progress("states", done, total)`` after each state.
    population_seed : int, optional
        Where ``tables`` builds the synthetic population
        (``strategy.tabulate(synthetic_population(states=[state], seed=population_seed))``):
        its seed, recorded with the states and the noise's seed (``rng`` when an integer;
        None on the secure path) in the manifest's ``"synthetic"`` entry, from which
        :func:`postdp.nmf.synthetic_truth` rebuilds the population measured.
    population_scale : float, default 1.0
        With ``population_seed``: the population's ``scale``
        (``synthetic_population(..., scale=population_scale)``), recorded beside its seed.
    sampler : {"postdp", "opendp"}, optional
        The release path's sampler (see :func:`postdp.tables.measure`; default postdp's
        exact one for integer noise); the study path ignores it.
    scheduler : dask.distributed.Client, optional
        Measure the states as Dask tasks, and the subtrees a state above ``cut_blocks``
        blocks is cut into (its counties, ...) as tasks of their own (each writes its own
        file; ``tables``, ``bounds`` and the strategy are shipped to the workers, which
        must see ``run_dir``). The run is the same as in one process: on the study path
        each state and subtree draws from its own stream of ``rng`` whichever worker runs
        it. The top (the nation and the states) is measured here once every state is done.

    Returns
    -------
    pathlib.Path
        The run's folder (its manifest written last).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import synthetic_population
    >>> from postdp.tables import load_strategy
    >>> from postdp.nmf import read
    >>> run = measure_by_state(lambda s: synthetic_population([s], seed=0, scale=0.05), ["11"],
    ...                        tempfile.mkdtemp() + "/run",
    ...                        strategy=load_strategy("pl94-2020-persons"), secure=False, rng=1)
    >>> read(run, levels=2).table.geography.ids.tolist()
    ['US', '11']
    """
    _pyarrow()
    if secure and rng is not None:
        raise ValidationError("`rng` is for the study path; pass secure=False")
    from postdp.mechanisms.release import SAMPLERS

    if sampler is not None and sampler not in SAMPLERS:
        raise ValidationError(f"`sampler` must be one of {', '.join(SAMPLERS)}; got {sampler!r}")
    if isinstance(cut_blocks, bool) or not isinstance(cut_blocks, int) or cut_blocks < 1:
        raise ValidationError(f"`cut_blocks` must be a positive integer; got {cut_blocks!r}")
    if population_seed is not None and (
        isinstance(population_seed, bool) or not isinstance(population_seed, (int, np.integer))
    ):
        raise ValidationError(f"`population_seed` must be an integer; got {population_seed!r}")
    population_scale = fraction("population_scale", population_scale)
    states = [str(s) for s in states]
    if not states or len(set(states)) != len(states):
        raise ValidationError(f"`states` must name each state once; got {states}")
    run = Path(run_dir)
    if run.exists() and (not run.is_dir() or any(run.iterdir())):
        raise ValidationError(f"{str(run)!r} exists and is not an empty folder")
    names = tuple(strategy.levels)
    streams = [None] * (len(states) + 1) if secure else _rng.spawn(rng, len(states) + 1)
    run.mkdir(parents=True, exist_ok=True)
    job = _StateJob(
        tables, strategy, run, names, secure, cut_blocks, bounds, bypass, sampler,
        tasks=scheduler is not None,
    )  # fmt: skip
    report = progress or (lambda stage, done, total: None)
    done: list[_StateDone | None] = [None] * len(states)
    if scheduler is None:
        for k, state in enumerate(states):
            done[k] = job(state, streams[k])
            report("states", k + 1, len(states))
    else:  # every state submitted at once; gathered in order
        futures = [scheduler.submit(job, st, streams[k], pure=False) for k, st in enumerate(states)]
        for k, future in enumerate(futures):
            done[k] = future.result()
            report("states", k + 1, len(states))
    results = [d for d in done if d is not None]
    last = results[-1]  # every state's workload has the same levels and shares
    work, upper, root = last.work, last.upper, last.root
    total = _total(work)
    state_ids = [d.state_id for d in results]
    rows = [d.row for d in results]
    top_bounds = [d.bounds for d in results]
    top_scale = [d.scale for d in results if d.scale is not None]
    geounits: dict[str, dict[str, int]] = {}  # per level and subtree: the manifest's counts
    for d in results:
        for name, count in d.geounits.items():
            geounits.setdefault(name, {})[d.code] = count
    cat = strategy.schema.categories()
    parents = np.asarray([None, *([root] * len(state_ids))], dtype=object)
    geo = Hierarchy.from_parents([root, *state_ids], parents)
    top = Table(geo, cat, np.asarray(rows, dtype=np.int64))
    assert upper is not None
    scale = np.array([1.0, *top_scale]) if bypass else None
    m = measure(
        top, upper, secure=secure, rng=streams[-1], bounds=_top_bounds(top_bounds),
        budget_scale=scale, budget_checked=True, sampler=sampler,
    )  # fmt: skip
    codes, subtree = _geocodes(geo)
    write_levels(m, run, names, codes, subtree, _shares(upper, total), floats=continuous(work))
    manifest = run_manifest(m, names, root, total, strategy.name, workload=work)
    manifest["subtrees"] = sorted({"0" + s for s in state_ids})
    manifest["geounits"] = {n: dict(sorted(c.items())) for n, c in geounits.items()}
    if bypass:
        manifest["budget_scale"] = "single-child bypass"
    if population_seed is not None:
        manifest[SYNTHETIC] = synthetic_record(
            states,
            population_seed,
            rng,
            drawn_by="postdp.nmf.measure_by_state",
            population_scale=population_scale,
            strategy=strategy.name,
        )
    _atomic_text(run / layout.MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return run


@dataclass(frozen=True)
class _StateDone:
    """What the top needs of a measured state (its subtree is written)."""

    state_id: str
    code: str
    row: Any  # the state's histogram
    bounds: list[CountBounds]
    scale: float | None
    geounits: dict[str, int]
    work: Any
    upper: Any
    root: str


@dataclass(frozen=True)
class _StateJob:
    """Measure one state's subtree into the run (a task: in this process or on a Dask
    worker, each state with its own stream)."""

    tables: Callable[[str], Table]
    strategy: Any
    run: Path
    names: tuple[str, ...]
    secure: bool
    cut_blocks: int
    bounds: Callable[[Table], Sequence[CountBounds]] | None
    bypass: bool
    sampler: str | None
    tasks: bool = False

    def __call__(self, state: str, stream: Any) -> _StateDone:
        table = self.tables(state)
        work = self.strategy.workload(table)
        upper, below = work.split_at(1)  # the same for every state: levels, not geounits
        top_table, subs = table.split_at(1)
        if len(subs) != 1:
            raise ValidationError(f"tables({state!r}) must hold one state; it has {len(subs)}")
        root = str(table.geography.ids[table.geography.root])
        scale = _bypass(table, work) if self.bypass else None
        own = None if scale is None else float(scale[table.geography.levels[1][0]])
        held = tuple(self.bounds(table)) if self.bounds is not None else ()
        top = [b.take(table.geography.levels[1]) for b in held]
        row = np.asarray(top_table.cells[[0]].sum(axis=0)).ravel()
        state_table = subs[0]
        state_id = str(state_table.geography.ids[state_table.geography.root])
        held = _slice(held, table.geography, state_table.geography)
        if scale is not None:
            scale = scale[_rows(table.geography, state_table.geography)]
        del table, top_table, subs
        code = "0" + state_id
        geounits = {
            self.names[d]: int(level.size)
            for d, level in enumerate(state_table.geography.levels, start=1)
        }
        _by_subtree(
            state_table, below, self.run, self.names, _total(work), self.secure, stream,
            code=code, depth=1, cut_blocks=self.cut_blocks, bounds=held, scale=scale,
            floats=continuous(work), sampler=self.sampler, tasks=self.tasks,
        )  # fmt: skip
        return _StateDone(state_id, code, row, top, own, geounits, work, upper, root)


def _by_subtree(
    sub: Table,
    work: Any,
    run: Path,
    names: tuple[str, ...],
    total: Any,
    secure: bool,
    rng: Any,
    *,
    code: str,
    depth: int,
    cut_blocks: int,
    bounds: tuple[CountBounds, ...] = (),
    scale: Any = None,
    floats: bool = False,
    sampler: str | None = None,
    tasks: bool = False,
) -> None:
    """Measure and write the subtree ``sub`` rooted at run level ``depth`` (its root's own
    measurements are written above it) in partition ``code``: whole when it has at most
    ``cut_blocks`` blocks or no level below its children, else its children's own
    measurements, then each child's subtree the same way. A subtree's levels go to
    ``part-<its root's geocode>.parquet`` (a state's: ``part-0.parquet``); ``scale``: its
    geounits' budget factors (checked with the whole state's); ``floats``: the run's answers
    are float64 (a continuous mechanism's); ``tasks``: running on a Dask worker, the
    children's subtrees go to the cluster as tasks of their own (each with its stream)."""
    codes, _ = _geocodes(sub.geography, rooted=False)
    file = layout.PART if depth == 1 else f"part-{codes[sub.geography.root]}.parquet"
    where = np.full(codes.size, code)
    if sub.geography.leaves.size <= cut_blocks or depth + 2 > len(names) - 1:
        m = measure(
            sub, work, secure=secure, rng=rng, bounds=bounds, budget_scale=scale,
            budget_checked=True, sampler=sampler,
        )  # fmt: skip
        write_levels(
            m, run, names, codes, where, _shares(work, total), offset=depth, file=file,
            floats=floats,
        )  # fmt: skip
        return
    children, subs = sub.split_at(1)
    upper, lower = work.split_at(1)
    streams = [None] * (len(subs) + 1) if secure else _rng.spawn(rng, len(subs) + 1)
    held = _slice(bounds, sub.geography, children.geography)
    part = None if scale is None else scale[_rows(sub.geography, children.geography)]
    m = measure(
        children, upper, secure=secure, rng=streams[-1], bounds=held, budget_scale=part,
        budget_checked=True, sampler=sampler,
    )  # fmt: skip
    codes, _ = _geocodes(children.geography, rooted=False)
    write_levels(
        m, run, names, codes, np.full(codes.size, code), _shares(upper, total), offset=depth,
        file=file, floats=floats,
    )  # fmt: skip
    del m, children
    jobs = []
    for k in range(len(subs)):
        child, subs[k] = subs[k], None  # type: ignore[call-overload]
        job: tuple[Any, ...] = (child, lower, run, names, total, secure, streams[k])
        options: dict[str, Any] = {
            "code": code,
            "depth": depth + 1,
            "cut_blocks": cut_blocks,
            "bounds": _slice(bounds, sub.geography, child.geography),
            "scale": None if scale is None else scale[_rows(sub.geography, child.geography)],
            "floats": floats,
            "sampler": sampler,
            "tasks": tasks,
        }
        if tasks:
            jobs.append((job, options))
        else:
            _by_subtree(*job, **options)
    if jobs:  # on a Dask worker: the children as tasks, this one waiting outside the pool
        import importlib

        distributed: Any = importlib.import_module("dask.distributed")
        batches = _batches(jobs, cut_blocks)
        del jobs
        with distributed.worker_client() as client:
            futures = [client.submit(_subtrees, b, pure=False) for b in batches]
            del batches
            client.gather(futures)


def _batches(jobs: list[Any], cut_blocks: int) -> list[list[Any]]:
    """Consecutive children's jobs as tasks of at most ``cut_blocks`` blocks in all (a child
    above it alone: it is cut again). Each child keeps its own stream and file, so the run
    is the same; only Dask's cost per task, some 20-40 ms on a 2-core machine, is paid
    once per batch (a county of small tracts was dozens of tasks of 100 ms)."""
    out: list[list[Any]] = []
    batch: list[Any] = []
    blocks = 0
    for job in jobs:
        size = int(job[0][0].geography.leaves.size)
        if batch and blocks + size > cut_blocks:
            out.append(batch)
            batch, blocks = [], 0
        batch.append(job)
        blocks += size
    if batch:
        out.append(batch)
    return out


def _subtrees(batch: list[Any]) -> None:
    """A task: each of its children's subtrees measured and written in turn."""
    for job, options in batch:
        _by_subtree(*job, **options)


def _bypass(table: Table, work: Any) -> Any:
    """A state's budget factors (its whole table: the nation > the state > ...), checked
    to spend no more than the workload on any path before anything is drawn."""
    scale = single_child_bypass(table, work)
    check_budget_scale(scale, table.geography, work)
    return scale


def _rows(whole: Hierarchy, part: Hierarchy) -> Any:
    """Rows of ``whole`` holding ``part``'s geounits (by id), in ``part``'s order."""
    return whole.index([str(i) for i in part.ids])


def _slice(
    bounds: tuple[CountBounds, ...], whole: Hierarchy, part: Hierarchy
) -> tuple[CountBounds, ...]:
    """The bounds of ``part``'s geounits (found by id in ``whole``)."""
    if not bounds:
        return ()
    rows = _rows(whole, part)
    return tuple(b.take(rows) for b in bounds)


def _top_bounds(per_state: list[list[CountBounds]]) -> tuple[CountBounds, ...]:
    """The nation's and the states' bounds: each state's own, the nation their sums."""
    if not per_state or not per_state[0]:
        return ()
    out = []
    for items in zip(*per_state, strict=True):
        lower = np.concatenate([b.lower for b in items])
        upper = np.concatenate([b.upper for b in items])
        out.append(
            CountBounds(
                items[0].query,
                np.vstack([lower.sum(axis=0), lower]),
                np.vstack([upper.sum(axis=0), upper]),
                name=items[0].name,
                sides=items[0].sides,
            )
        )
    return tuple(out)

"""Post-processing a run of noisy measurement files, partition by partition, resumably.

Post-processing costs no privacy and may be redone by anyone from the noisy measurement
files. :func:`postprocess` reads a run (:func:`postdp.nmf.read`), estimates every geounit's
detailed histogram and writes it as partitioned Parquet, a folder per spine subtree
named by its code alone (``011``, not the run's ``State=011``: see
:mod:`postdp.nmf._output`):

    OUT/wide/<Geolevel>.parquet/[NNN/]part-0.parquet   geocode, total, one column per cell
    OUT/long/<Geolevel>.parquet/[NNN/]part-0.parquet   (integral methods) geocode, category,
                                   estimate; the cells of estimate 0 left out
    OUT/std_dev/<Geolevel>.parquet/...      (``project``) geocode, query_name, query_shape, std_dev
    OUT/moe/<Geolevel>.parquet/...          (``project``; ``amc``) geocode, <variable>_moe, ...
    OUT/postdp-postprocess.json    what is being computed (written first)
    OUT/postdp-manifest.json       every file and its SHA-256 (written last: complete);
                                   for ``topdown-2020`` on a run with structural bounds,
                                   ``bounds_unmet``: by level, the geounits the release
                                   leaves outside their bounds (each file records its own)

The *top* (the root and the states) is one partition; each spine subtree below a state is
another. Every partition's files are written under temporary names and renamed into place,
so a run killed at any moment leaves only complete partitions; running the same command
again skips them and gives the same bytes (every method is deterministic, a rounding step
seeded by ``seed`` or, given none, by a seed drawn once and recorded in the plan).

How each method is partitioned (by the properties of its record in
:func:`postdp.postprocess.estimators`):

- a method solved in subtree tasks (:attr:`~postdp.postprocess.Estimator.tasks`:
  ``topdown-2020``): the top is solved from the nation's and the states' measurements, then
  every subtree below its state's fixed histogram (:func:`postdp.postprocess.top_down_2020`
  with ``root=``): one state's measurements in memory at a time, and the subtrees are
  independent tasks (a Dask scheduler runs them in parallel, the same bits as in-process).
  A state of more than ``cut_blocks`` geounits (its blocks and the geounits above them)
  is cut at its counties: a task solves it down to its counties (``cut=True``), then its
  counties are tasks of consecutive counties of at most ``cut_blocks`` geounits in all,
  each county with everything below it (``read(..., within=[counties])``),
  their levels in ``part-<first county's geocode>.parquet`` files; a county still too
  large is cut again at its tracts, and so on.
- a method with known variances (:attr:`~postdp.postprocess.Estimator.variances`:
  ``project``, the BLUE): the BLUE of the whole run, streamed state by state
  (:func:`postdp.postprocess.project_by_subtree`: each subtree read twice, once for its
  summary and once below the top's answer), with the exact standard deviation of every
  measured marginal, ``total`` and ``detailed`` at every geounit (the ``std_dev`` form),
  and the exact 90% margin of error of every row of the published tables over the run's
  schema (the ``moe`` form: P1 to P5 for a persons run, H1 for a units run; each row's
  variance from its cells' covariances).
- a method solved by subtree without variances (:attr:`~postdp.postprocess.Estimator.
  streams`: ``topdown``, ``blue-restore``, ``blue-restore-2020``): the top, then each
  state's subtree below it (:func:`postdp.postprocess.project_by_subtree`; the
  restorations' BLUE reads each state twice), one state's measurements in memory at a time.
- any other table post-processing (``project-nonneg``, any with ``,round``): solved on the
  whole run at once (memory grows with it), written partition by partition.

A run of the DHC persons design (:func:`postdp.tables.dhc_schema`, 1,227,744 cells) is
post-processed by ``topdown-2020`` only, in subtree tasks as above, held to a PL94 release
(``held``: :mod:`postdp.nmf._held`), and writes the long form only, by attributes
(:mod:`postdp.nmf._output`).

Margins of error are 90% (1.645 standard errors) wherever they are written, in columns
named ``moe`` or ``<variable>_moe``. An integral method has them with ``amc``: the Census
Bureau's approximate Monte Carlo writes the ``moe`` form (the same columns as ``project``'s,
from the replicates' spread around the release) beside ``OUT/amc/``. A run of a schema
without published tables (neither the 2020 persons nor the units schema) gets no ``moe``
form.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from postdp._files import fingerprint, sha256
from postdp._threads import one_thread
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._held import Held
from postdp.nmf._io import _atomic_text
from postdp.nmf._output import (
    FORM_CELLS,
    MANIFEST_FILE,
    MOE,
    PLAN_FILE,
    TOTAL,
    Writer,
    forms_of,
    moe_tables,
    start,
    unmet_by_level,
)
from postdp.nmf._read import read, subtrees
from postdp.nmf._subtree import below, refuse_missing, schema_of
from postdp.nmf._topdown_tasks import block_geocodes, run_topdown
from postdp.tables import Query, TableMeasurements

__all__ = ["RunError", "postprocess"]

#: A method solved in subtree tasks (``topdown-2020``) cuts a state with more geounits
#: than this (blocks, and the geounits above them) at its counties: tasks of at most this
#: many geounits (synthetic California's workers peaked at 5.6 GB with 50,000 blocks a
#: task, 9.0 GB with 100,000; blocks are most of a real state's geounits).
CUT_BLOCKS = 50_000
#: The same for a run of the DHC persons design, whose geounits' noisy answers are some
#: 1.9 million values (15 MB) each: tasks of at most this many geounits.
DHC_CUT_BLOCKS = 100


def postprocess(
    run_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    method: str,
    seed: int | None = None,
    scheduler: Any = None,
    amc: int = 0,
    cut_blocks: int | None = None,
    held: str | os.PathLike[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Estimate every geounit's detailed histogram from a run's noisy measurements.

    Parameters
    ----------
    run_dir : path
        A run in the NMF layout (:func:`postdp.nmf.write`, ``postdp measure`` or the
        Census's files).
    output_dir : path
        Where the estimates go (see the module notes). A folder holding an unfinished
        post-processing of the same run, method and seed is resumed; any other folder
        with files is refused.
    method : str
        A table estimator of :func:`postdp.postprocess.estimators` (``"topdown-2020"``,
        ``"project"``, ``"blue-restore"``, ...), optionally followed by ``",round"``
        (:func:`postdp.postprocess.parse_table_method`).
    seed : int, optional
        Seeds the rounding of ``",round"`` and ``amc``'s draws (the other steps are
        deterministic). Without one, a random step gets a seed drawn from the operating
        system's entropy, recorded in ``OUT/postdp-postprocess.json`` (``"seed"``, with
        ``"seed_drawn": true``); resuming the same call into the same folder reuses it, so
        the resumed output is the same bits as an uninterrupted one.
    scheduler : dask.distributed.Client, optional
        Runs a method's subtree tasks (``topdown-2020``) as Dask tasks, each shipping the
        run's path, its subtree code and its state's histogram and writing its own files.
    amc : int, default 0
        With K >= 2: approximate Monte Carlo margins of error (:func:`postdp.nmf.amc`,
        study path seeded by ``seed``): the release taken as the truth, measured and
        post-processed again K times, in memory; ``OUT/amc/summary.parquet`` (the error by
        query, level and size bin), ``OUT/amc/totals.parquet`` (each geounit's 90% margin
        of error ``moe`` of its total) and the ``moe`` form (every published table row's
        90% margin of error, each geounit, the same layout as ``wide``). Needs an integral
        method.
    cut_blocks : int, optional
        A method solved in subtree tasks: a state with more geounits below it (its blocks
        and the geounits between them and it) is cut at its counties -- one task solves it
        down to its counties, then consecutive counties of at most ``cut_blocks`` geounits
        in all (each with everything below it) are a task, each below its histogram, their
        levels written to ``part-<first county's geocode>.parquet`` files in the state's
        partition -- so a task holds at most ``cut_blocks`` geounits, not a state of
        500,000 blocks (or one family, a parent and its children, which are solved
        together); a county still too large is cut at its tracts, a tract at its block
        groups. Geounits, not blocks: where blocks are few (a sparse synthetic state) the
        levels above them are most of a task. The
        numbers are the same as without the cut (every family is solved alike). Default
        50,000 (:data:`CUT_BLOCKS`); 100 for a DHC persons run (:data:`DHC_CUT_BLOCKS`:
        its geounits' noisy answers are 15 MB each).
    held : path, optional
        A run of the DHC persons design (:func:`postdp.tables.dhc_schema`, 1,227,744
        cells; ``postdp measure --strategy dhc-2020-persons``), and only there, where it is
        required: the PL94 release it is held to, as the production held the published
        redistricting data. A finished post-processing, by an integral method, of a
        ``pl94-2020-persons`` run of the same persons and blocks (e.g. ``postprocess(pl94_run,
        ..., method="topdown-2020")``); each DHC geounit's PL94 histogram is the sum of its
        blocks' (a DHC block's geocode is its tabulation geocode with the primitive
        geounit's digit after the county: :func:`postdp.data.dhc_spine`). Such a run takes
        ``method="topdown-2020"`` only (its two passes per parent:
        :func:`postdp.postprocess.top_down_2020`) and writes the long form only, a column
        per attribute (``relgq``, ``sex``, ``age``, ``hispanic``, ``cenrace``) in place of
        ``category``; a task holds its measurements (15 MB a geounit) and two copies of
        its histograms (10 MB a geounit), so memory is bounded by ``cut_blocks``.
    progress : callable, optional
        ``progress(stage, done, total)`` after each partition (the total grows when a
        state is cut into its counties).

    Returns
    -------
    pathlib.Path
        The output folder.

    Raises
    ------
    RunError
        A :class:`~postdp.errors.ValidationError` for the run's files: what they hold or
        lack (its manifest, its top levels, a subtree met later). The run's manifest and
        top are read, and the method's own checks run on them, before the output folder is
        made; a subtree refused later leaves no output folder that this call made.
    ValidationError
        For a bad option, a method the run does not fit, an output folder that holds
        other files or another post-processing, or a ``held`` that is not a finished
        integral PL94 release of the run's blocks (or given for a run that is not of the
        DHC design, or missing for one that is).

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import synthetic_run
    >>> tmp = tempfile.mkdtemp()
    >>> run = synthetic_run(tmp + "/run", states=["11"], seed=0, scale=0.05)
    >>> out = postprocess(run, tmp + "/out", method="topdown-2020")
    >>> sorted(p.name for p in (out / "long").iterdir())[:2]
    ['Block.parquet', 'Block_Group.parquet']
    >>> import pandas as pd
    >>> county = pd.read_parquet(out / "wide" / "County.parquet")  # folder 011/: no State
    >>> county["geocode"].tolist(), list(county.columns[:2])
    (['011001'], ['geocode', 'total'])
    """
    from postdp.postprocess import parse_table_method

    parsed = parse_table_method(method)
    if parsed.step is None:
        raise ValidationError(f"`method` {method!r}: post-processing needs a step")
    step, rounded, integral = parsed.step.name, parsed.rounded, parsed.integral
    # how it is solved, by the record's properties (an integral result: int64, long form)
    tasks = parsed.step.tasks and not rounded
    streamed = parsed.step.variances and not rounded  # the std_dev form: the streamed BLUE
    # the top, then each state below it (project_by_subtree): topdown, the restorations
    by_state = parsed.step.streams and not (tasks or streamed or rounded)
    if isinstance(amc, bool) or not isinstance(amc, int) or amc == 1 or amc < 0:
        raise ValidationError(f"`amc` must be 0 or an integer >= 2; got {amc!r}")
    if amc and not integral:
        raise ValidationError(
            f"`amc` takes the release as the truth, so it needs whole numbers: "
            f"{method!r} is not integral (add ',round')"
        )
    if cut_blocks is not None and (
        isinstance(cut_blocks, bool) or not isinstance(cut_blocks, int) or cut_blocks < 1
    ):
        raise ValidationError(f"`cut_blocks` must be a positive integer; got {cut_blocks!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValidationError(f"`seed` must be a nonnegative integer; got {seed!r}")
    run = Path(run_dir)
    out = Path(output_dir)
    with _reading(run_dir):  # the run checked before the output folder is touched
        codes = subtrees(run)
        top = read(run, levels=2)
        names = run_levels(run)
        schema = schema_of(top)
        digest = fingerprint(run)
    check_budgets(run, top, step)
    check_forms(top, method, held)
    source, top_held = held_top(run, top, codes, names, held)
    check_fits(step, top, top_held)
    if source is not None and amc:
        raise ValidationError(
            "`amc`: its replicates are not built for a run of the DHC persons design"
        )
    if cut_blocks is None:
        cut_blocks = DHC_CUT_BLOCKS if source is not None else CUT_BLOCKS
    tables = moe_tables(schema)
    forms = list(forms_of(integral, streamed, schema.size))
    if tables and (streamed or amc):
        forms.append(MOE)
    plan = {
        "run": str(run.resolve()),
        "run_fingerprint": digest,
        "method": method,
        "seed": seed,
        "forms": forms,
        "partition_folders": "subtree code",  # an earlier postdp's State=NNN: not resumed
        "amc": amc,
        # the cut counts geounits (postdp before 2026-12 counted blocks: other tasks)
        **({"cut_blocks": cut_blocks, "cut_counts": "geounits"} if tasks else {}),
    }
    if source is not None:
        plan["held"] = str(source.path.resolve())
        plan["held_fingerprint"] = source.fingerprint()
    if seed is None and (rounded or amc):  # a random step: its seed recorded for a resume
        plan["seed"] = seed = _drawn_seed(out, plan)
        plan[SEED_DRAWN] = True
    made = _made_by_start(out)
    start(out, plan)
    queries = _queries(top) if streamed else None
    writer = Writer(out, names, schema, queries, tables if streamed else (), integral=integral)
    report = progress or (lambda stage, done, total: None)
    total = len(codes) + 1
    try:
        with one_thread(), _reading(run_dir):  # what the run's subtrees hold or lack
            if tasks:
                order = _state_order(top, codes)
                run_topdown(
                    run, top, order, writer, scheduler, report, cut_blocks, source, top_held
                )
            elif streamed:
                _blue(run, top, codes, writer, report, step)
            elif by_state and not _top_only(writer):
                _by_state(run, top, codes, writer, report, step)
            else:
                _whole(run, top, codes, writer, method, seed, report)
        if amc:
            _amc(run_dir, out, names, method, amc, seed, report, tables)
    except RunError:
        made()  # nothing left of this call's output folder behind a bad run
        raise
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet") if p.is_file())
    manifest: dict[str, Any] = {
        **plan,
        "partitions": total,
        "files": {f: sha256(out / f) for f in files},
    }
    unmet = unmet_by_level(out, files, names, forms)
    if unmet is not None:
        manifest[BOUNDS_UNMET] = unmet
    _atomic_text(out / MANIFEST_FILE, json.dumps(manifest, indent=2) + "\n")
    return out


#: The manifest's key, for a run with structural bounds solved in tasks (``topdown-2020``):
#: by level, how many of its geounits the release leaves outside their bounds (the DHC's
#: group-quarters bounds are best effort at Block_Group and Block; 0 elsewhere).
BOUNDS_UNMET = "bounds_unmet"


class RunError(ValidationError):
    """A post-processing refused for its run's files (what they hold or lack), not for its
    options or its output folder: ``run`` is the run's folder as given, ``problem`` what is
    wrong with it."""

    def __init__(self, run: str, problem: str) -> None:
        super().__init__(run, problem)
        self.run, self.problem = run, problem

    def __str__(self) -> str:
        return f"run {self.run!r}: {self.problem}"


@contextmanager
def _reading(run_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Refusals met while reading and solving the run's measurements, as the run's."""
    try:
        yield
    except RunError:
        raise
    except ValidationError as exc:
        raise RunError(str(run_dir), str(exc)) from exc


def _made_by_start(out: Path) -> Callable[[], None]:
    """What undoes :func:`start`'s folder: the highest folder of ``out``'s path it will
    create removed, or an empty folder it will use emptied again (a folder holding a
    post-processing to resume is left as it is)."""
    import shutil

    if out.is_dir():
        if any(out.iterdir()):
            return lambda: None

        def empty() -> None:
            for child in list(out.iterdir()):
                shutil.rmtree(child) if child.is_dir() else child.unlink(missing_ok=True)

        return empty
    highest = out.absolute()
    while not highest.parent.exists() and highest.parent != highest:
        highest = highest.parent
    return lambda: shutil.rmtree(highest, ignore_errors=True)


def check_fits(step: str, top: TableMeasurements, held: Any = None) -> None:
    """Refuse, before the output folder is made, a step whose own checks the run's
    workload fails (e.g. ``topdown-2020`` on a nation that its queries do not pin); a DHC
    run's with the top's ``held`` histograms."""
    from postdp.postprocess import check_step, check_top_down_2020

    if held is not None:
        check_top_down_2020(top.table, top.workload, held=held)
        return
    check_step(step, top.table, top.workload)


def held_top(
    run: Path,
    top: TableMeasurements,
    codes: list[str],
    names: tuple[str, ...],
    held: str | os.PathLike[str] | None,
) -> tuple[Held | None, Any]:
    """A DHC run's PL94 release (``held``; None: not a DHC run) and the top's histograms in
    it, checked against the run: the same blocks in every state, and the public totals."""
    if held is None:
        return None, None
    source = Held(os.fspath(held), names[-1])
    source.check()
    geo = top.table.geography
    leaves = np.zeros((geo.n, len(source.cells)), dtype=np.int64)
    for node, code in zip(geo.levels[1], _state_order(top, codes), strict=True):
        with _reading(run):
            blocks = block_geocodes(run, names, code, code).to_pylist()
        leaves[node], _ = source.state(code, blocks)
    histograms = geo.aggregate(leaves.T).T
    for m, values in zip(top.workload.measurements, top.values, strict=True):
        rows = geo.levels[m.level]
        if (
            m.public
            and m.query.size == 1
            and not np.array_equal(values[:, 0], histograms[rows].sum(axis=1))
        ):
            raise ValidationError(
                f"the PL94 release to hold (`held`): its totals of level {m.level} are not "
                "the run's public totals (hold a release of the same persons)"
            )
    return source, histograms


def check_forms(
    top: TableMeasurements, method: str, held: str | os.PathLike[str] | None = None
) -> None:
    """Refuse, before the output folder is made, what a run's table is too wide for: a
    table of more than :data:`FORM_CELLS` cells (the DHC persons design's 1,227,744) is
    post-processed by ``topdown-2020`` held to a PL94 release (``held``) only, and
    ``held`` belongs to such a run."""
    c = top.table.categories.leaves.size
    if c <= FORM_CELLS:
        if held is not None:
            raise ValidationError(
                f"`held` is for a run of the DHC persons design; this run's table has {c:,} cells"
            )
        return
    from postdp.postprocess import parse_table_method

    parsed = parse_table_method(method)
    if parsed.step is None or not parsed.step.tasks or parsed.rounded:
        raise ValidationError(
            f"a run of {c:,} detailed cells (the DHC persons design) is post-processed by "
            f"{task_method()!r} held to a PL94 release; {method!r} is not built for it here "
            "(its BLUE and restoration: postdp.postprocess.restore_dhc, in Python)"
        )
    if held is None:
        raise ValidationError(
            "a run of the DHC persons design needs `held`: the PL94 release it is held to "
            "(a finished integral post-processing of the PL94 run of the same persons)"
        )


#: The plan's key marking a seed drawn from OS entropy (no ``seed`` given): a resume reuses it.
SEED_DRAWN = "seed_drawn"


def _drawn_seed(out: Path, plan: dict[str, Any]) -> int:
    """The seed of a random step given none: the one an unfinished post-processing of the
    same plan in ``out`` drew (so that a resume gives the same bits), else a new one from
    the operating system's entropy."""
    import secrets

    try:
        old = json.loads((out / PLAN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and old.get(SEED_DRAWN) is True:
        seed = old.get("seed")
        same = {k: v for k, v in old.items() if k not in ("seed", SEED_DRAWN)} == {
            k: v for k, v in plan.items() if k != "seed"
        }
        if same and isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0:
            return seed
    return secrets.randbits(63)


def check_budgets(run: Path, top: TableMeasurements, step: str) -> None:
    """Refuse, before any solve, a step that weighs a level's geounits alike on a run whose
    geounits have their own budgets (its manifest says so, or its top level shows it)."""
    from postdp.postprocess import estimator, estimators

    manifest = layout.read_manifest(run) or {}
    if estimator(step).per_geounit:
        return
    if manifest.get("budget_scale") or top.budget_scale is not None:
        fit = [e.name for e in estimators("table") if e.per_geounit]
        raise ValidationError(
            f"{step!r} weighs every geounit of a level alike; this run measured geounits "
            f"with their own budgets (the spine's bypass): use {', '.join(fit)}"
        )


# -- methods -------------------------------------------------------------------------------
def _blue(
    run: Path, top: TableMeasurements, codes: list[str], writer: Writer, report: Any, step: str
) -> None:
    from postdp.postprocess import project_by_subtree

    order = _state_order(top, codes)
    subtree, last = _reader(run, order, checked=False)
    assert writer.queries is not None
    schema = schema_of(top)
    wanted: list[Any] = [Query.marginal(schema, q) for q in writer.queries]
    if _top_only(writer):  # the nation and its states only: the top is the whole run
        from postdp.postprocess import TableProjector

        refuse_missing(top)
        projector = TableProjector(top.table, top.workload, budget_scale=top.budget_scale)
        variances = {q.name: projector.query_variances(q) for q in wanted}
        variances.update({t.name: projector.table_variances(t) for t in writer.tables})
        writer.top(top.table.geography, projector(top), order, variances)
        report("top", 1, len(codes) + 1)
        report("subtrees", len(codes), len(codes))  # nothing below the states
        return
    parts = project_by_subtree(top, subtree, method=step, variances=[*wanted, *writer.tables])
    upper, variances = next(parts)
    writer.top(top.table.geography, upper, order, variances)
    report("top", 1, len(codes) + 1)
    for k, (estimate, variances) in enumerate(parts):  # subtree k was read just before
        if not writer.done(order[k]):
            writer.subtree(order[k], last[k], estimate, variances)
        report("subtrees", k + 1, len(codes))


def _reader(run: Path, order: list[str], *, checked: bool) -> tuple[Any, dict[int, Hierarchy]]:
    """``subtree(k)``, state ``order[k]``'s measurements below it (``checked``: missing
    answers refused), and the dict that holds the geography of the subtree read last."""
    last: dict[int, Hierarchy] = {}

    def subtree(k: int) -> TableMeasurements:
        m = below(read(run, states=[order[k]]))
        if checked:
            refuse_missing(m)
        last.clear()
        last[k] = m.table.geography
        return m

    return subtree, last


def _by_state(
    run: Path, top: TableMeasurements, codes: list[str], writer: Writer, report: Any, step: str
) -> None:
    """A method that streams without variances (``topdown``, ``blue-restore``,
    ``blue-restore-2020``): the top, then each state's subtree, one state in memory."""
    from postdp.postprocess import project_by_subtree

    order = _state_order(top, codes)
    subtree, last = _reader(run, order, checked=True)
    refuse_missing(top)
    parts = project_by_subtree(top, subtree, method=step)
    writer.top(top.table.geography, next(parts), order)
    report("top", 1, len(codes) + 1)
    for k, estimate in enumerate(parts):  # subtree k was read just before
        if not writer.done(order[k]):
            writer.subtree(order[k], last[k], estimate)
        report("subtrees", k + 1, len(codes))


def _whole(
    run: Path,
    top: TableMeasurements,
    codes: list[str],
    writer: Writer,
    method: str,
    seed: int | None,
    report: Any,
) -> None:
    from postdp.analysis import ReleaseDesign

    m = read(run)
    refuse_missing(m)
    design = ReleaseDesign(m.table, m.workload, method)
    estimate = design.solve(m, rng=seed)
    geo = m.table.geography
    upper = estimate[_rows_of(geo, top.table.geography)]
    writer.top(top.table.geography, upper, _state_order(top, codes))
    report("top", 1, len(codes) + 1)
    if _top_only(writer):  # the nation and its states only: nothing below the states
        report("subtrees", len(codes), len(codes))
        return
    _, subs = m.table.split_at(1)  # each state's subtree, from the run already in memory
    by_state = {str(s.geography.ids[s.geography.root]): s.geography for s in subs}
    for k, code in enumerate(_state_order(top, codes), start=1):
        sub_geo = by_state[code[1:] if code.startswith("0") else code]
        writer.subtree(code, sub_geo, estimate[_rows_of(geo, sub_geo)])
        report("subtrees", k, len(codes))


def _amc(
    run_dir: str | os.PathLike[str],
    out: Path,
    names: tuple[str, ...],
    method: str,
    k: int,
    seed: int | None,
    report: Any,
    tables: list[Any],
) -> None:
    """The AMC tables and the ``moe`` form from the written release (the stand-in truth),
    unless already there (the ``moe`` files are written before the AMC tables, so a run
    killed between them does the AMC again, with the same seed and numbers)."""
    from postdp.nmf._output import moe_columns, sibling, write_moe
    from postdp.nmf.amc import amc, write_amc

    if all((out / "amc" / f"{n}.parquet").is_file() for n in ("summary", "totals")):
        return
    import pandas as pd

    with _reading(run_dir):
        m = read(run_dir)
    geo = m.table.geography
    index = {_geocode_of(geo, g): g for g in range(geo.n)}
    released = np.zeros((geo.n, m.table.categories.leaves.size), dtype=np.int64)
    wide = sorted((out / "wide").rglob("part-*.parquet"))
    parts = []
    for path in wide:
        frame = pd.read_parquet(path)
        codes = [str(g) for g in frame["geocode"]]
        rows = [index[g] for g in codes]
        parts.append((path, codes, rows))
        released[rows] = frame.drop(columns=["geocode", TOTAL]).to_numpy()
    report("amc", 0, k)
    summary, totals, moe = amc(
        m, released, method=method, replicates=k, rng=seed, levels=list(names), tables=tables
    )
    if tables:
        columns = moe_columns(tables)
        for path, codes, rows in parts:  # the moe form in the wide form's partitions
            write_moe(sibling(out, path, MOE), codes, columns, moe[rows])
    write_amc(summary, totals, out / "amc")
    report("amc", k, k)


def _top_only(writer: Writer) -> bool:
    """Whether the run is its top alone: the nation and the states, no level below them."""
    return len(writer.names) <= 2


def _geocode_of(geo: Hierarchy, node: int) -> str:
    return "" if node == geo.root else "0" + str(geo.ids[node])


# -- subtrees ------------------------------------------------------------------------------
def _state_order(top: TableMeasurements, codes: list[str]) -> list[str]:
    """Subtree codes in the order of the top's leaves (the states)."""
    geo = top.table.geography
    ids = [str(geo.ids[g]) for g in geo.leaves]
    by_id = {(c[1:] if c.startswith("0") else c): c for c in codes}
    return [by_id[i] for i in ids]


def _rows_of(whole: Hierarchy, part: Hierarchy) -> Any:
    """Rows of ``whole`` holding ``part``'s geounits, in ``part``'s order."""
    import pandas as pd

    return pd.Index(whole.ids.astype(str)).get_indexer(part.ids.astype(str))


def _queries(top: TableMeasurements) -> dict[str, tuple[int, ...]]:
    """The run's measured marginals, ``total`` and ``detailed`` (the queries whose standard
    deviations ``project`` writes), by name with their shapes."""
    schema = schema_of(top)
    names = {"total", "detailed", *(x.query.name for x in top.workload.measurements)}
    return {n: tuple(schema.marginal(n).shape) for n in sorted(names)}


def task_method() -> str:
    """The name of the method solved in subtree tasks (the only one for a DHC run)."""
    from postdp.postprocess import estimators

    return next(e.name for e in estimators("table") if e.tasks)


def wide_form(cells: int) -> bool:
    """Whether a table of ``cells`` detailed cells has the wide form (a column per cell):
    one of at most :data:`~postdp.nmf._output.FORM_CELLS` does, the DHC's does not."""
    return cells <= FORM_CELLS


def run_levels(run: Path) -> tuple[str, ...]:
    """A run's geolevel names, root first: its manifest's, else the 2020 ones it has."""
    manifest = layout.read_manifest(run)
    return tuple(manifest["levels"]) if manifest else layout.LEVELS_2020[: _depth(run)]


def _depth(run: Path) -> int:
    return sum((run / f"{n}.parquet").is_dir() for n in layout.LEVELS_2020)

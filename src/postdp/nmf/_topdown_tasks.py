"""``topdown-2020`` over a run as independent tasks, large subtrees cut (private).

The top (the nation and the states) is solved in the client. Every state is then a task
below its fixed histogram; a subtree of more than ``cut_blocks`` geounits (its blocks and
the geounits between them and its root) is instead a *cut task*: it reads its own levels
down to its children (``read(..., levels=, within=)``), solves them as the inner families
they are (``top_down_2020(..., cut=True)``), writes its children's level and hands its
children on: a child still too large as a cut task of its own (a county of 240,000 blocks
is cut at its tracts), the others in *batches* of consecutive siblings of at most
``cut_blocks`` geounits in all (each with everything below it), read together
(``read(..., within=[...])``) and each solved below its histogram (a county's 2,500
tracts are a few tasks, not 2,500 reads and writes). A cut subtree's children's level
goes to ``part-<its root's geocode>.parquet`` files of its state's partition, a batch's
levels to ``part-<its first geocode>.parquet`` (a state's own: ``part-0.parquet``), so
every file has one writer, and a task holds at most ``cut_blocks`` geounits (or one
family: a parent and its children, which are solved together). Counting geounits, not
blocks: where blocks are few (a sparse synthetic state, a county of one tract), the levels
above them are most of a task (Texas at scale 0.00005: six geounits a block). Every family
is solved exactly as in the uncut run, so the numbers are the same however the run is cut.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from scipy import sparse

from postdp._threads import one_thread
from postdp.nmf import _layout as layout
from postdp.nmf._held import Held
from postdp.nmf._io import _pyarrow
from postdp.nmf._output import FORM_CELLS, Writer, form_path, geocode, written, written_long
from postdp.nmf._read import _related, read
from postdp.nmf._subtree import below, below_each, schema_of
from postdp.tables import Schema, TableMeasurements

#: (function, arguments) of a task; the arguments are paths, codes and one histogram.
Task = tuple[Any, tuple[Any, ...]]


def run_topdown(
    run: Path,
    top: TableMeasurements,
    order: list[str],
    writer: Writer,
    scheduler: Any,
    report: Any,
    cut_blocks: int,
    held: Held | None = None,
    top_held: Any = None,
) -> None:
    """The top, then every subtree as a task (``order``: the states' codes in the top's
    leaf order); ``report("subtrees", done, known)`` after each task. A DHC run: ``held``
    the PL94 release it is held to, ``top_held`` the top's histograms in it."""
    from postdp.postprocess import top_down_2020

    reach = None
    if held is not None and top.bounds:  # record switching: the states' reach to their blocks
        rows = [held.reach(str(run), code, [code]) for code in order]
        reach = None if any(r is None for r in rows) else sparse.vstack(rows, format="csr")
    upper = top_down_2020(top, held=top_held, reach=reach)
    writer.top(top.table.geography, upper, order, bounds=top.bounds)
    report("top", 1, len(order) + 1)
    source = None if held is None else str(held.path.resolve())
    common = (str(run), str(writer.out), writer.names, cut_blocks, source)
    tasks: list[Task] = []
    for code in order:
        size = sum(_geounits_by_child(run, writer.names, code, code, [code], 1).values())
        big = _cuttable(writer.names, 1) and size > cut_blocks
        if big or not writer.done(code):
            tasks.append((_cut_task if big else _leaf_task, (code, 1, (code,), None, *common)))
    done, known = len(order) - len(tasks), len(order)

    def follow(result: list[Task] | None) -> list[Task]:
        """A cut task's children that are not yet written (a cut child always runs)."""
        return [t for t in result or [] if t[0] is _cut_task or not writer.done(*_part(t[1]))]

    if scheduler is None:
        while tasks:
            function, args = tasks.pop(0)
            more = follow(function(*args))
            tasks[:0] = more
            done, known = done + 1, known + len(more)
            report("subtrees", done, known)
        return
    as_completed: Any = importlib.import_module("dask.distributed").as_completed  # untyped
    submitted = [scheduler.submit(f, *a, pure=False) for f, a in tasks]
    running = as_completed(submitted)
    try:
        for future in running:
            more = follow(future.result())
            for function, args in more:
                submitted.append(scheduler.submit(function, *args, pure=False))
                running.add(submitted[-1])
            done, known = done + 1, known + len(more)
            report("subtrees", done, known)
    except BaseException:
        scheduler.cancel(submitted)  # a refused subtree (or Ctrl-C) ends the run's tasks
        raise


def _part(args: tuple[Any, ...]) -> tuple[str, str | None]:
    """A task's state code and the part its files are named after (a state's own: None;
    a batch of siblings: its first geocode)."""
    code, depth, members = args[:3]
    return code, members[0] if depth > 1 else None


def _roots(
    out: str,
    names: tuple[str, ...],
    code: str,
    depth: int,
    source: str | None,
    members: tuple[str, ...],
    schema: Schema,
) -> Any:
    """The members' histograms as the task above wrote them (``source``: its part; None:
    the partition's own file, e.g. the top's row of a state), so that a task ships
    geocodes, not histograms."""
    if schema.size > FORM_CELLS:  # the long form only, by attributes
        path = form_path(Path(out), "long", names[depth], code, source)
        return written_long(path, members, schema)
    return written(form_path(Path(out), "wide", names[depth], code, source), members)


def _held(held: str | None, names: tuple[str, ...], sub: TableMeasurements, code: str) -> Any:
    """A DHC subtree's held PL94 histograms (None: not a DHC run)."""
    if held is None:
        return None
    return Held(held, names[-1]).rows(sub.table.geography, code)


def _reach(
    held: str | None, names: tuple[str, ...], run: str, sub: TableMeasurements, code: str
) -> Any:
    """A cut task's leaves' reach to their blocks (record switching's: None without a
    held release or bounds)."""
    if held is None or not sub.bounds:
        return None
    geo = sub.table.geography
    leaves = [geocode(str(i), code) for i in geo.ids[geo.leaves]]
    return Held(held, names[-1]).reach(run, code, leaves)


def _leaf_task(
    code: str,
    depth: int,
    members: tuple[str, ...],
    source: str | None,
    run: str,
    out: str,
    names: tuple[str, ...],
    cut_blocks: int,
    held: str | None = None,
) -> None:
    """Sibling subtrees at level ``depth`` (``members``: their geocodes, in geocode order,
    their fixed histograms in the part ``source`` of the level's output), each solved below
    its histogram down to the blocks, read together and written to one part (a state: its
    partition's own files)."""
    from postdp.postprocess import top_down_2020

    m = read(run, states=[code], within=list(members) if depth > 1 else None)
    pieces, bounds = [], []
    roots = _roots(out, names, code, depth, source, members, schema_of(m))
    ids = [None] if depth == 1 else [_id(child, code) for child in members]
    for sub, root in zip(below_each(m, depth=depth, at=ids), roots, strict=True):
        with one_thread():
            estimate = top_down_2020(sub, root=root, held=_held(held, names, sub, code))
        pieces.append((sub.table.geography, estimate, None))
        bounds.append(sub.bounds)
    del m
    _, part = _part((code, depth, members))
    Writer(Path(out), names, schema_of(sub)).subtrees(
        code, pieces, depth=depth, part=part, bounds=bounds
    )


def _cut_task(
    code: str,
    depth: int,
    members: tuple[str, ...],
    source: str | None,
    run: str,
    out: str,
    names: tuple[str, ...],
    cut_blocks: int,
    held: str | None = None,
) -> list[Task]:
    """The subtree of the one member down to its children only (solved as inner
    families); writes the children's level and returns their tasks: a child of more than
    ``cut_blocks`` geounits (itself and every one below it) cut again, the others in
    batches of consecutive siblings of at most ``cut_blocks`` geounits in all."""
    from postdp.postprocess import top_down_2020

    (prefix,) = members
    m = read(run, states=[code], levels=depth + 2, within=prefix if depth > 1 else None)
    (root,) = _roots(out, names, code, depth, source, members, schema_of(m))
    sub = below(m, depth=depth)
    with one_thread():
        estimate = top_down_2020(
            sub,
            root=root,
            cut=True,
            held=_held(held, names, sub, code),
            reach=_reach(held, names, run, sub, code),
        )
    geo = sub.table.geography
    Writer(Path(out), names, schema_of(sub)).subtree(
        code, geo, estimate, depth=depth, part=prefix if depth > 1 else None, bounds=sub.bounds
    )
    children = sorted(geocode(str(geo.ids[g]), code) for g in geo.levels[1])
    sizes = _geounits_by_child(Path(run), names, code, prefix, children, depth + 1)
    source = prefix if depth > 1 else None  # the part the children's level went to
    common = (source, run, out, names, cut_blocks, held)
    tasks: list[Task] = []
    batch: list[str] = []
    geounits = 0  # in the batch

    def flush() -> None:
        if batch:
            tasks.append((_leaf_task, (code, depth + 1, tuple(batch), *common)))
            batch.clear()

    for child in children:
        size = sizes.get(child, 0)
        if _cuttable(names, depth + 1) and size > cut_blocks:
            flush()
            tasks.append((_cut_task, (code, depth + 1, (child,), *common)))
            geounits = 0
            continue
        if batch and geounits + size > cut_blocks:
            flush()
            geounits = 0
        batch.append(child)
        geounits += size
    flush()
    return tasks


def _id(geocode_: str, code: str) -> str:
    """A geounit's id from its geocode (the inverse of :func:`geocode`)."""
    return geocode_ if code.startswith("1") else geocode_[1:]


def _cuttable(names: tuple[str, ...], depth: int) -> bool:
    """Whether a subtree rooted at level ``depth`` has levels below its children."""
    return depth + 2 <= len(names) - 1


def block_geocodes(
    run: Path, names: tuple[str, ...], code: str, prefix: str, level: str | None = None
) -> Any:
    """The distinct geocodes of a subtree's deepest level (or of the level named ``level``:
    its files' ``geocode`` column)."""
    import pyarrow.compute as pc

    pa, pq = _pyarrow()
    where = run / f"{level or names[-1]}.parquet" / layout.DPQUERY / layout.folder(code)
    files = sorted(where.glob("*.parquet")) if where.is_dir() else []
    files = [f for f in files if _related(f.name, [prefix])]  # other subtrees' files unread
    parts = []
    for f in files:
        column = pq.read_table(f, columns=["geocode"]).column("geocode")
        if prefix != code:
            column = column.filter(pc.starts_with(column, prefix))
        parts.append(pc.unique(column.combine_chunks()))
    return pa.concat_arrays(parts) if parts else pa.array([], pa.string())


def _geounits_by_child(
    run: Path, names: tuple[str, ...], code: str, prefix: str, children: list[str], depth: int
) -> dict[str, int]:
    """How many geounits each child geocode of ``prefix`` (at level ``depth``) roots, itself
    included (by geocode prefix, every level from the children's down to the blocks)."""
    import pyarrow.compute as pc

    if not children:
        return {}
    counts: dict[str, int] = {}
    for level in names[depth:]:
        geocodes = block_geocodes(run, names, code, prefix, level)
        heads = pc.utf8_slice_codeunits(geocodes, 0, len(children[0])).value_counts()
        for head, n in zip(heads.field("values").to_pylist(), heads.field("counts").to_pylist(),
                           strict=True):  # fmt: skip
            counts[head] = counts.get(head, 0) + n
    return counts

"""Subtrees of a run for its post-processing (private): re-rooting and the schema."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Schema, Table, TableMeasurements


def below(m: TableMeasurements, *, depth: int = 1, at: str | None = None) -> TableMeasurements:
    """The measurements of one subtree, re-rooted at its geounit at ``depth`` (a state, or
    with ``depth=2`` a county read with ``read(run, states=[...], within=...)``), its own
    and its ancestors' measurements left to the levels above, as
    :func:`postdp.postprocess.project_by_subtree` and ``top_down_2020(..., root=)`` take.

    Parameters
    ----------
    m : TableMeasurements
        A run's measurements read with one subtree (``read(run, states=[code])``).
    depth : int, default 1
        The level of the new root; ``m`` must hold one geounit at every level above it.
    at : str, optional
        The id of the new root, one of several geounits of level ``depth`` (siblings read
        together, ``read(..., within=[...])``); default the level's only geounit.

    Returns
    -------
    TableMeasurements

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import read, synthetic_run
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> sub = below(read(run, states=["011"]))
    >>> str(sub.table.geography.ids[sub.table.geography.root]), sub.workload.at(0)
    ('11', [])
    >>> county = below(read(run, states=["011"], within="011001"), depth=2)
    >>> str(county.table.geography.ids[0]), county.table.geography.n_levels
    ('11001', 4)
    >>> two = read(run, states=["011"], within=["011001000004", "011001000005"])
    >>> tract = below(two, depth=3, at="11001000005")
    >>> str(tract.table.geography.ids[0]), tract.values[-1].shape, two.table.geography.leaves.size
    ('11001000005', (101, 2016), 202)
    """
    return next(below_each(m, depth=depth, at=[at]))


def below_each(
    m: TableMeasurements, *, depth: int, at: Sequence[str | None]
) -> Iterator[TableMeasurements]:
    """:func:`below` for each id of ``at`` in turn (siblings read together), the work over
    the whole read -- its checks, each geounit's position in its level and its ancestor
    at ``depth`` -- done once, not once per sibling.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import read, synthetic_run
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> two = read(run, states=["011"], within=["011001000004", "011001000005"])
    >>> [s.table.geography.leaves.size for s in below_each(two, depth=3,
    ...                                                     at=["11001000004", "11001000005"])]
    [101, 101]
    """
    geo = m.table.geography
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth < geo.n_levels - 1:
        raise ValidationError(f"`depth` must be 1 to {geo.n_levels - 2}; got {depth!r}")
    whole = any(a is None for a in at)
    many = [d for d in range(1, depth + whole) if geo.levels[d].size != 1]
    if many:
        raise ValidationError(
            f"`m` must hold one subtree; level {many[0]} has {geo.levels[many[0]].size} geounits"
        )
    refuse_missing(m)
    rank = _rank_in_level(geo)
    tops = geo.levels[depth]
    where = {str(i): n for n, i in enumerate(geo.ids[tops])}
    label = np.full(geo.n, -1, dtype=np.int64)  # each geounit's ancestor at depth (rank)
    label[tops] = np.arange(tops.size)
    for d in range(depth + 1, geo.n_levels):
        label[geo.levels[d]] = label[geo.parent[geo.levels[d]]]
    order = np.argsort(label, kind="stable")  # geounits grouped by that ancestor, in order
    edges = np.searchsorted(label[order], np.arange(tops.size + 1))
    for a in at:
        if a is None:
            nodes = np.flatnonzero(label >= 0)
        elif str(a) in where:
            i = where[str(a)]
            nodes = order[edges[i] : edges[i + 1]]
        else:
            raise ValidationError(f"`at` {a!r} is not a geounit of level {depth}")
        yield _rooted(m, depth, nodes, None if a is None else rank)


def _rooted(m: TableMeasurements, depth: int, nodes: Any, rank: Any) -> TableMeasurements:
    """The measurements of geounits ``nodes`` (a subtree rooted at level ``depth``, in
    ``m``'s order); ``rank``: each geounit's position in its level (None: ``nodes`` are
    every geounit from ``depth`` down)."""
    geo = m.table.geography
    ids = geo.ids[nodes]
    parents = geo.ids[geo.parent[nodes]].astype(str).astype(object)  # vectorised: the
    # depth is a property computed afresh on each access
    parents[geo.depth[nodes] == depth] = None
    sub_geo = Hierarchy.from_parents(ids, parents)
    source = np.empty(sub_geo.n, dtype=np.int64)  # each new geounit's position in m
    source[sub_geo.index([str(i) for i in ids])] = nodes
    _, lower = m.workload.split_at(depth)
    kept = []
    for x, v in zip(m.workload.measurements, m.values, strict=True):
        if x.level > depth:
            rows = None if rank is None else rank[source[sub_geo.levels[x.level - depth]]]
            kept.append(v if rows is None else v[..., rows, :])
    cat = m.table.categories
    from scipy import sparse

    cells: Any = sparse.csr_array((sub_geo.leaves.size, cat.leaves.size), dtype=np.int64)
    bounds = tuple(b.take(source) for b in m.bounds)
    scale = None if m.budget_scale is None else m.budget_scale[source]
    table = Table(sub_geo, cat, cells)
    return TableMeasurements(table, lower, tuple(kept), m.secure, bounds, scale)


def _rank_in_level(geo: Hierarchy) -> Any:
    """Each geounit's position in its level (``geo.levels[d]``)."""
    rank = np.empty(geo.n, dtype=np.int64)
    for level in geo.levels:
        rank[level] = np.arange(level.size)
    return rank


def refuse_missing(m: TableMeasurements) -> None:
    """Refuse NaN answers but those of geounits measured with no budget (the spine's
    bypassed geounits, in ``Constraint`` only)."""
    geo = m.table.geography
    for x, v in zip(m.workload.measurements, m.values, strict=True):
        if not v.size:
            continue
        missing = np.isnan(v).any(axis=-1).reshape(-1, v.shape[-2]).any(axis=0)
        if m.budget_scale is not None and not x.public:
            missing &= m.budget_scale[geo.levels[x.level]] > 0
        if missing.any():
            raise ValidationError(
                f"query {x.query.name!r} at level {x.level} has no answers for some geounits "
                "that have answers to other queries; postdp's estimators need every query "
                "of a level answered by each geounit measured there"
            )


def schema_of(m: TableMeasurements) -> Schema:
    schema = next(
        x.query.marginal_of.schema for x in m.workload.measurements if x.query.marginal_of
    )
    return schema

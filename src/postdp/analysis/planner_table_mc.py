"""The size-binned mean absolute error of a table design as a function of its budget split,
on common random numbers (the Monte Carlo objective of :func:`plan_mae_budget` for a
:class:`~postdp.tables.Table`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.tables import Measurement, Query, Table, TableMeasurements, Workload, measure

__all__ = ["table_mae_levels"]


def table_mae_levels(
    table: Table,
    queries: Sequence[tuple[int, Query]],
    postprocess: str,
    *,
    mechanism: str,
    public: Sequence[tuple[int, Query]],
    categories: Sequence[str] | None,
    bins: Sequence[int],
    draws: int,
    rng: int,
) -> Callable[[FloatArray], FloatArray]:
    """Each geographic level's MAE of the released category counts, averaged over the
    geounits' size bins (each non-empty bin counts equally), as a function of the budget
    of each measured query: one fixed set of standard noise draws per query, scaled by the
    split's noise scales (and the rounding's draws fixed), so splits are compared on the
    same noise.

    Memory: ``draws`` x every measured answer x 8 bytes for the standard noise, plus one
    post-processed release of ``draws`` draws at a time.
    """
    from postdp.analysis.table_design import TableDesign

    if mechanism not in ("laplace", "gaussian"):
        raise ValidationError(f"`mechanism` must be 'laplace' or 'gaussian'; got {mechanism!r}")
    if draws < 10:
        raise ValidationError(f"`draws` must be at least 10; got {draws}")
    fixed = [Measurement(d, q, None) for d, q in public]
    exact = Workload([*fixed, *(Measurement(d, q, None) for d, q in queries)])
    answers = measure(table, exact, secure=False, rng=0).values  # exact: every query public
    TableDesign(table, _workload(fixed, queries, mechanism, np.ones(len(queries))), postprocess)
    gen = np.random.default_rng(rng)
    standard = [
        gen.laplace(0.0, 1.0, (draws, *a.shape)) if mechanism == "laplace"
        else gen.normal(size=(draws, *a.shape))
        for a in answers[len(fixed):]
    ]  # fmt: skip
    cat, geo = table.categories, table.geography
    chosen = cat.leaves if categories is None else cat.index(list(categories))
    truth = table.counts()[:, chosen].astype(np.float64)
    totals = table.counts()[:, cat.root]
    edges = np.asarray(bins)
    size_bin = np.searchsorted(edges, totals, side="right") - 1
    groups = [
        [members for b in range(edges.size) if (members := nodes[size_bin[nodes] == b]).size]
        for nodes in geo.levels
    ]
    from postdp.tables import category_matrix

    full = category_matrix(cat).T[:, chosen].astype(np.float64)  # detailed -> chosen nodes

    def level_means(shares: FloatArray) -> FloatArray:
        work = _workload(fixed, queries, mechanism, shares)
        values: list[Any] = [np.broadcast_to(a, (draws, *a.shape)) for a in answers[: len(fixed)]]
        for a, z, m in zip(
            answers[len(fixed) :], standard, work.measurements[len(fixed) :], strict=True
        ):
            values.append(a + z * m.mechanism.noise_scale)  # type: ignore[union-attr]
        draw = TableMeasurements(table, work, tuple(values), False)
        design = TableDesign(table, work, postprocess)
        released = design.solve(draw, rng=rng) @ full  # (draws, geounits, chosen)
        per_node = np.abs(released - truth).mean(axis=(0, 2))
        return np.array([np.mean([per_node[g].mean() for g in level]) for level in groups])

    return level_means


def _workload(
    fixed: list[Measurement], queries: Sequence[tuple[int, Query]], mechanism: str, shares: Any
) -> Workload:
    from postdp.analysis.planner import _mechanism

    noisy = [
        Measurement(d, q, _mechanism(mechanism, float(b)))
        for (d, q), b in zip(queries, shares, strict=True)
    ]
    return Workload([*fixed, *noisy])

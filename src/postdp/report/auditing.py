"""The whole audit of a design, as ``postdp audit`` runs it, from Python.

:func:`audit` simulates a :class:`~postdp.analysis.ReleaseDesign` and returns an
:class:`Audit`: the tables the command writes (``tables()``), the figures (``figures()``)
and the HTML page (``report()``), so the command line only parses, checks and writes them.
What is audited follows the design's model. A hierarchy's audit is the main run (with the
errors before post-processing of a few nodes kept), one run per shift of the leaf counts
([zhu2021], Fig. 4) and, for Laplace noise, the Wasserstein distance of each family's errors
to the noise law (Fig. 5). A table's audit is the errors of every (geounit, category) count,
summarised per level and category and by the Census Bureau's metrics (by level and size, by
diversity).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp._typing import RNGLike
from postdp.analysis import MonteCarloResult, ReleaseDesign, simulate
from postdp.errors import ValidationError
from postdp.postprocess.estimators import PROJECT
from postdp.report._cells_page import table_audit_page
from postdp.report._model import Report, ReportFigure, ReportTable
from postdp.report._names import geounit_names
from postdp.report.audit_pages import (
    audit_captions,
    audit_report,
)

__all__ = ["Audit", "audit"]


TABLE_CAPTIONS = {
    "errors": (
        "Error of each geounit's total against its size, by level",
        "Mean absolute error of the released total population of every geounit against its "
        "true size, one colour per geographic level, with the size-bin means.",
        "Each point is a geounit's mean absolute error (persons) over the simulated releases; "
        "the line "
        "is that level's MAE per size bin (table_metrics). Both axes are logarithmic: a flat "
        "cloud means errors that do not grow with size, so relative errors fall as places "
        "grow. With n draws each point is itself known to about 1.96·sd/√n.",
    ),
    "diversity": (
        "Signed error by diversity quintile",
        "Mean signed error of the released counts by quintile of the geounits' diversity.",
        "Nonnegativity moves counts from common categories to rare ones, so diverse and "
        "homogeneous geounits are biased in opposite directions. The bars are means of "
        "Monte Carlo estimates; their error bars are ±1.96 SE where drawn.",
    ),
}


@dataclass(frozen=True)
class Audit:
    """The results of :func:`audit`, of a hierarchy design or a table design.

    Attributes
    ----------
    design : ReleaseDesign
    result : MonteCarloResult
        The main run (on the design's counts).
    shifted : tuple of (int, MonteCarloResult)
        Hierarchies: one run per shift of the leaf counts, with its shift.
    family : pandas.DataFrame or None
        Hierarchies: mean Wasserstein distance of each family's child errors to the Laplace
        noise (columns ``parent``, ``n``, ``mean_w1``, ``scale``); None unless every level's
        noise is Laplace and the hierarchy has families.
    names : ndarray of str or None
        Hierarchies: display names of the nodes (a ``name`` column beside ``id``, and the
        report's headlines), when given to :func:`audit`.
    cells : pandas.DataFrame or None
        Tables: one row per (geounit, category node): ``geo_id``, ``level``, ``category``,
        ``label``, the error statistics, ``bias_se`` and ``rmse``.
    summary : pandas.DataFrame or None
        Tables: per level and category, the geounits, mean |bias|, RMSE and MAE.
    by_size, by_diversity : pandas.DataFrame or None
        Tables: the Census Bureau's metrics (:meth:`ReleaseDesign.metrics`).

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> a = audit(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=500, rng=0)
    >>> sorted(a.tables())
    ['audit', 'wasserstein']
    >>> from postdp.data import synthetic_table
    >>> from postdp.tables import Measurement, Query, Workload
    >>> t = synthetic_table((2, 2), leaf_mean=30, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=1))
    ...               for d in range(3)])
    >>> sorted(audit(ReleaseDesign(t, w, "project-nonneg"), n_draws=20, rng=0).tables())
    ['table_audit', 'table_diversity', 'table_metrics', 'table_summary']
    """

    design: ReleaseDesign
    result: MonteCarloResult
    shifted: tuple[tuple[int, MonteCarloResult], ...] = ()
    family: pd.DataFrame | None = None
    names: npt.NDArray[np.object_] | None = None
    cells: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    by_size: pd.DataFrame | None = None
    by_diversity: pd.DataFrame | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The audit's tables by name, as ``postdp audit`` writes them. A hierarchy's:
        ``audit`` (one row per node, with its depth), ``shifted`` (bias per node and shift)
        and ``wasserstein`` (by family), the last two where the audit has them. A table's:
        ``table_audit`` (every count), ``table_summary``, ``table_metrics`` (by level and
        size) and ``table_diversity``.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        if self.design.model == "table":
            named = {
                "table_audit": self.cells,
                "table_summary": self.summary,
                "table_metrics": self.by_size,
                "table_diversity": self.by_diversity,
            }
            return {k: v for k, v in named.items() if v is not None}
        h = self.design.hierarchy
        frame = self.result.to_frame()
        if self.names is not None:
            frame.insert(1, "name", self.names)
        frame.insert(1 + (self.names is not None), "depth", h.depth)
        out = {"audit": frame}
        if self.shifted:
            rows = []
            for shift, run in self.shifted:
                ci = run.confidence_interval()
                rows.append(
                    pd.DataFrame(
                        {
                            "id": list(run.ids),
                            "leaf_shift": shift,
                            "truth": run.truth,
                            "bias": run.bias,
                            "bias_lo": ci.low,
                            "bias_hi": ci.high,
                        }
                    )
                )
            out["shifted"] = pd.concat(rows, ignore_index=True)
        if self.family is not None:
            out["wasserstein"] = self.family
        return out

    @property
    def captions(self) -> dict[str, tuple[str, str, str]]:
        """(title, alt text, caption) of each figure, by name (or its first word), said of
        the figures :meth:`figures` draws (the nodes and series they show)."""
        if self.design.model == "table":
            return TABLE_CAPTIONS
        names = geounit_names(self.design.hierarchy, self.names)
        return audit_captions(self.result, [k for k, _ in self.shifted], names=names)

    def figures(self) -> dict[str, Any]:
        """The audit's figures by name (matplotlib Axes). A hierarchy's: ``residuals``,
        ``bias_by_count`` (with shifts) and ``wasserstein`` (with Laplace noise). A table's:
        ``errors_by_size`` and, where the geounits have diversity quintiles,
        ``diversity_errors``.

        Returns
        -------
        dict of str to matplotlib.axes.Axes
        """
        from postdp import plots

        if self.design.model == "table":
            assert self.by_size is not None and self.by_diversity is not None
            table = self.design.table
            out = {"errors_by_size": plots.plot_errors_by_size(self.result, self.by_size, table)}
            if len(self.by_diversity):
                out["diversity_errors"] = plots.plot_diversity_errors(self.by_diversity)
            return out
        out = {"residuals": plots.plot_residuals(self.result)}
        if self.shifted:
            runs = [run for _, run in self.shifted]
            labels = [f"leaves + {shift}" for shift, _ in self.shifted]
            out["bias_by_count"] = plots.plot_bias_by_count(runs, labels)
        if self.family is not None:
            from postdp.mechanisms import Laplace

            leaf = Laplace.from_scale(float(self.family["scale"].iloc[-1]))
            out["wasserstein"] = plots.plot_wasserstein(
                self.family["n"],
                self.family["mean_w1"],
                mechanism=leaf,
                reference=not _meets_theorem_12(self.design),
            )
        return out

    def report(
        self,
        *,
        figures: Sequence[ReportFigure] | None = None,
        command: str = "",
        source: str = "",
        table_name: str = "table",
        unit: str = "persons",
    ) -> Report:
        """The audit's HTML page (the same as ``postdp audit ... --report``).

        Parameters
        ----------
        figures : sequence of ReportFigure, optional
            Default: :meth:`figures`, drawn now.
        command : str
            The command line shown on the page.
        source : str
            Where the full table of every node (or count) is.
        table_name : str, default "table"
            Tables: the table's name as shown on the page.
        unit : str, default "persons"
            Tables: what the table counts; every error on the page is in it.

        Returns
        -------
        Report
        """
        if figures is None:
            figures = ReportFigure.drawn(self.figures(), self.captions)
        if self.design.model == "table":
            return table_audit_page(
                self,
                figures=figures,
                source=table_name,
                command=command,
                cells_source=source,
                unit=unit,
            )
        report = audit_report(
            self.result,
            self.design,
            figures=list(figures),
            command=command,
            source=source,
            names=self.names,
        )
        if self.family is None:
            return report
        h = self.design.hierarchy
        named = dict(zip(map(str, h.ids), geounit_names(h, self.names), strict=True))
        by_family = self.family.copy()
        by_family.insert(1, "name", [named[str(p)] for p in by_family["parent"]])
        family = ReportTable(
            "Wasserstein distance by family",
            by_family,
            "Mean W1 distance (persons) of each family's child errors to the Laplace noise, "
            "with the family size n and the noise scale ([zhu2021], Fig. 5).",
        )
        return dataclasses.replace(report, tables=[*report.tables, family])


def _table_audit(design: ReleaseDesign, **options: Any) -> Audit:
    """Simulate ``design`` (``options`` as for :func:`postdp.simulate`) and summarise it
    (the body of :func:`audit` for a table design)."""
    table = design.table
    assert table is not None  # a table design
    geo, cat = table.geography, table.categories
    result = simulate(design, **options)
    cells = design.frame(result)
    # objects: a str array is as wide as its longest label, on every row
    labels = np.array([table.labels.get(str(c), "") for c in cat.ids], dtype=object)
    cells.insert(3, "label", np.tile(labels, geo.n))
    cells["bias_se"] = result.bias_se
    cells["rmse"] = np.sqrt(result.mse)
    summary = cells.groupby(["level", "category", "label"], as_index=False, sort=False).agg(
        geounits=("geo_id", "size"),
        mean_abs_bias=("bias", lambda b: b.abs().mean()),
        rmse=("rmse", lambda r: float(np.sqrt((r**2).mean()))),
        mae=("mae", "mean"),
    )
    by_size, by_diversity = design.metrics(result)
    return Audit(
        design, result, cells=cells, summary=summary, by_size=by_size, by_diversity=by_diversity
    )


def audit(
    design: ReleaseDesign,
    *,
    n_draws: int,
    shifts: Sequence[int] = (),
    entities: Sequence[str] | None = None,
    rng: RNGLike = None,
    bins: int = 400,
    batch: int = 1000,
    workers: int = 1,
    client: Any = None,
    max_memory: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    names: Sequence[str] | None = None,
) -> Audit:
    """Audit a design as ``postdp audit`` does: for a hierarchy, the main run, shifted runs
    and the error law by family; for a table, the errors of every count and the Census
    Bureau's metrics.

    Parameters
    ----------
    design : ReleaseDesign
        Simulated on its hierarchy's (or table's) counts.
    n_draws : int
        Releases per run.
    shifts : sequence of int
        Hierarchies: each adds this to every leaf count (parents are their sums) and runs
        again ([zhu2021], Fig. 4); 0 reuses the main run.
    entities : sequence of str, optional
        Hierarchies: nodes whose errors before post-processing are kept (default: the three smallest
        leaves).
    rng : int or SeedSequence, optional
        The seed of every run (each run uses it whole, as the command does).
    bins, batch, workers, client, max_memory
        As for :func:`postdp.simulate` (its default memory budget when ``max_memory`` is
        None).
    progress : callable(label, done, total), optional
        Called after each block of each run, with the run's label.
    names : sequence of str, optional
        Hierarchies: a display name per node (e.g. the county names of the bundled data).

    Returns
    -------
    Audit

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [3, 1, 2])
    >>> a = audit(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=400,
    ...           shifts=[0, 5], rng=0)
    >>> [shift for shift, _ in a.shifted], a.report(figures=[]).headline[0].label
    ([0, 5], 'verdict')
    """
    options: dict[str, Any] = {
        "n_draws": n_draws,
        "batch": batch,
        "workers": workers,
        "client": client,
        "bins": bins,
        "rng": rng,
    }
    if max_memory is not None:
        options["max_memory"] = max_memory

    def ticker(label: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(label, done, total)

    if not isinstance(design, ReleaseDesign):
        raise TypeError(f"`design` must be a ReleaseDesign; got {type(design).__name__}")
    if design.model == "table":
        if len(shifts) or entities is not None or names is not None:
            raise ValidationError("`shifts`, `entities` and `names` are for hierarchy designs")
        return _table_audit(design, progress=ticker("audit"), **options)
    h = design.hierarchy
    if names is not None and len(names) != h.n:
        raise ValidationError(f"`names` needs one name per node ({h.n}); got {len(names)}")
    if h.counts is None:
        raise ValidationError("the design's hierarchy holds no true counts to audit")
    counts = h.counts
    truths = []
    for shift in shifts:
        if int(shift) != shift:
            raise ValidationError(f"`shifts` must be whole numbers; got {shift!r}")
        truths.append(h.aggregate(np.where(h.is_leaf, counts + int(shift), 0)))
    if entities is None:
        smallest = h.leaves[np.argsort(counts[h.leaves], kind="stable")[:3]]
        entities = [str(h.ids[i]) for i in smallest]
    base = simulate(design, raw=list(entities), progress=ticker("audit"), **options)
    shifted = []
    for shift, truth in zip(shifts, truths, strict=True):
        if shift == 0:
            shifted.append((0, base))
            continue
        label = f"audit, leaves + {int(shift)}"
        shifted.append((int(shift), simulate(design, truth, progress=ticker(label), **options)))
    shown = None if names is None else np.asarray(names, dtype=object)
    family = _wasserstein_by_family(base, design)
    return Audit(design, base, tuple(shifted), family, shown)


def _wasserstein_by_family(base: MonteCarloResult, design: ReleaseDesign) -> pd.DataFrame | None:
    """Mean W1 of each family's children to their level's Laplace noise, or None."""
    h, mechanisms = design.hierarchy, design.per_level
    if not (all(m.family == "laplace" for m in mechanisms) and h.n_levels > 1):
        return None
    scales = np.array([m.noise_scale for m in mechanisms])[h.depth]
    w1 = base.wasserstein_to_laplace(scales)
    parents = h.parent[h.parent >= 0]
    kids = np.flatnonzero(h.parent >= 0)
    per_child = pd.DataFrame({"parent": parents, "w1": w1[kids], "scale": scales[kids]})
    fam = per_child.groupby("parent")
    return pd.DataFrame(
        {
            "parent": [str(h.ids[p]) for p in fam.size().index],
            "n": fam.size().to_numpy(),
            "mean_w1": fam["w1"].mean().to_numpy(),
            "scale": fam["scale"].first().to_numpy(),
        }
    )


def _meets_theorem_12(design: ReleaseDesign) -> bool:
    """Seed 000 Thm 12's law holds for (P) with every family's parent total public (then
    (P) is (P_S) family by family)."""
    from postdp.hierarchy import resolve_public

    if [str(step) for step in design.steps] != [PROJECT.name]:
        return False
    h = design.hierarchy
    public = resolve_public(h, public=design.public)
    return bool(public.mask[~h.is_leaf].all())

"""The whole audit of a table design, as ``postdp audit --table`` runs it, from Python.

:func:`postdp.report.audit` of a :class:`~postdp.analysis.TableDesign` simulates it and
returns a :class:`TableAudit`: the per-(geounit, category) errors, their summary per level
and category, the Census Bureau's metrics by level and size and by diversity
(:meth:`TableAudit.tables`), the figures (:meth:`TableAudit.figures`) and the HTML page
(:meth:`TableAudit.report`): the command line only parses, checks and writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from postdp.analysis import MonteCarloResult, TableDesign
from postdp.data import level_names
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value
from postdp.report._names import geounit_names
from postdp.report.audit_pages import budget_statement, significance

__all__ = ["TableAudit", "table_audit"]

CAPTIONS = {
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
class TableAudit:
    """The results of :func:`postdp.report.audit` on a table design.

    Attributes
    ----------
    design : TableDesign
    result : MonteCarloResult
    cells : pandas.DataFrame
        One row per (geounit, category node): ``geo_id``, ``level``, ``category``,
        ``label``, the error statistics, ``bias_se`` and ``rmse``.
    summary : pandas.DataFrame
        Per level and category: geounits, mean |bias|, RMSE, MAE.
    by_size, by_diversity : pandas.DataFrame
        The Census Bureau's metrics (:meth:`TableDesign.metrics`).

    Examples
    --------
    >>> from postdp import Gaussian
    >>> from postdp.analysis import TableDesign
    >>> from postdp.data import synthetic_table
    >>> from postdp.report import audit
    >>> from postdp.tables import Measurement, Query, Workload
    >>> t = synthetic_table((2, 2), leaf_mean=30, rng=0)
    >>> w = Workload([Measurement(d, Query.detailed(t.categories), Gaussian(rho=1))
    ...               for d in range(3)])
    >>> a = audit(TableDesign(t, w, "project-nonneg"), n_draws=20, rng=0)
    >>> sorted(a.tables())
    ['table_audit', 'table_diversity', 'table_metrics', 'table_summary']
    """

    design: TableDesign
    result: MonteCarloResult
    cells: pd.DataFrame
    summary: pd.DataFrame
    by_size: pd.DataFrame
    by_diversity: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """The audit's tables by name, as ``postdp audit --table`` writes them.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        return {
            "table_audit": self.cells,
            "table_summary": self.summary,
            "table_metrics": self.by_size,
            "table_diversity": self.by_diversity,
        }

    @property
    def captions(self) -> dict[str, tuple[str, str, str]]:
        """(title, alt text, caption) of each figure, by name (or its first word)."""
        return CAPTIONS

    def figures(self) -> dict[str, Any]:
        """The audit's figures by name (matplotlib Axes): ``errors_by_size`` and, where the
        geounits have diversity quintiles, ``diversity_errors``.

        Returns
        -------
        dict of str to matplotlib.axes.Axes
        """
        from postdp.plots import plot_diversity_errors, plot_errors_by_size

        out = {"errors_by_size": plot_errors_by_size(self.result, self.by_size, self.design.table)}
        if len(self.by_diversity):
            out["diversity_errors"] = plot_diversity_errors(self.by_diversity)
        return out

    def report(
        self,
        *,
        figures: Sequence[ReportFigure] | None = None,
        source: str = "table",
        command: str = "",
        cells_source: str = "",
        unit: str = "persons",
    ) -> Report:
        """The audit's HTML page (the same as ``postdp audit --table ... --report``).

        Parameters
        ----------
        figures : sequence of ReportFigure, optional
            Default: :meth:`figures`, drawn now.
        source : str
            The table's name as shown on the page.
        command, cells_source : str
            The command line shown, and where the full cell table is.
        unit : str, default "persons"
            What the table counts: every error on the page is in it.

        Returns
        -------
        Report
        """
        if figures is None:
            figures = ReportFigure.drawn(self.figures(), self.captions)
        cells, summary, by_size = self.cells, self.summary, self.by_size
        by_diversity = self.by_diversity
        design, result, work = self.design, self.result, self.design.workload
        geo, cat = design.table.geography, design.table.categories
        levels = level_names(geo)
        where = geounit_names(geo)
        geo_index = np.repeat(np.arange(geo.n), cat.n)
        level_of = np.asarray(levels, dtype=object)
        place = np.array(
            [w if w == str(i) else f"{w} ({i})" for w, i in zip(where, geo.ids, strict=True)],
            dtype=object,
        )[geo_index]
        names = place + ", " + cells["category"].astype(str).to_numpy(dtype=object)
        (verdict, count), flagged = significance(result, names, unit=unit, what="cells")
        z = np.abs(result.bias) / np.maximum(result.bias_se, 1e-300)
        z = np.where(result.bias_se > 0, z, 0.0)
        order = np.argsort(-z, kind="stable")
        worst = cells.iloc[int(order[0])]
        floor = 1.96 * float(np.median(result.bias_se))
        deepest = by_size[by_size["level"] == by_size["level"].max()].iloc[0]
        public = [f"{m.query.name} at {levels[m.level]}" for m in work.measurements if m.public]
        shown = cells.copy()
        shown.insert(1, "name", where[geo_index])
        shown["level"] = level_of[shown["level"].to_numpy(dtype=int)]
        shown.insert(5, "significant", np.where(flagged, "yes", "no"))
        summary = summary.assign(level=level_of[summary["level"].to_numpy(dtype=int)])
        by_size = by_size.assign(level=level_of[by_size["level"].to_numpy(dtype=int)])
        if "level" in by_diversity.columns:
            by_diversity = by_diversity.assign(
                level=level_of[by_diversity["level"].to_numpy(dtype=int)]
            )
        headline = [
            verdict,
            count,
            Headline(
                "largest |bias| / SE",
                f"{format_value(float(worst['bias']))} {unit} at {names[order[0]]}",
                f"95% interval ± {1.96 * float(worst['bias_se']):.3g} {unit}; "
                f"|bias|/SE = {z[order[0]]:.3g}",
            ),
            Headline(
                "Monte Carlo floor of a bias",
                f"± {format_value(floor)} {unit}",
                f"1.96 × the median SE over {result.n_draws:,} draws",
            ),
            Headline(
                f"smallest geounits, {levels[int(deepest['level'])]} level "
                f"({deepest['size']} {unit})",
                f"MAE {deepest['mae']:.3g} {unit}",
                f"MAPE {deepest['mape']:.3g}%, mean TVD {deepest['tvd']:.3g}",
            ),
        ]
        tables = [
            ReportTable(
                "Errors by level and size (Census Bureau metrics)",
                by_size,
                f"Per geographic level and population-size bin: MAE and RMSE in {unit}, MAPE, "
                "signed percent error, share over 10%, TVD and agreement of the largest group.",
            ),
            ReportTable(
                "Budget by level and query",
                (lambda f: f.assign(level=level_of[f["level"].to_numpy(dtype=int)]))(
                    work.cost_frame()
                ),
                "Each measurement and its cost.",
            ),
            ReportTable(
                "Errors by level and category",
                summary,
                f"Mean |bias|, RMSE and MAE, in {unit}.",
            ),
            ReportTable(
                "Cells",
                shown.iloc[order].reset_index(drop=True),
                f"One row per (geounit, category), the largest |bias|/SE first: bias, MAE and "
                f"RMSE in {unit}, variance and MSE in {unit}²; significant is the test of the "
                "verdict's count (filter significant=yes).",
                source=cells_source,
            ),
        ]
        if len(by_diversity):
            tables.insert(
                2,
                ReportTable(
                    "Errors by diversity", by_diversity, f"Signed errors in {unit}, by quintile."
                ),
            )
        return Report(
            title="Audit of a table release design",
            summary=(
                f"{result.n_draws:,} simulated releases of table {source}: {geo.n:,} geounits "
                f"({', '.join(levels)}) x {cat.n} categories, post-processing "
                f"{design.postprocess}."
            ),
            design={
                "table": (
                    f"{source}: {geo.n:,} geounits in {geo.n_levels} levels, {cat.n} categories"
                ),
                "measurements": f"{len(work.measurements)} (see the budget table)",
                "budget": str(work.budget),
                "post-processing": design.postprocess,
                "draws": f"{result.n_draws:,}",
            },
            privacy=budget_statement(work.budget, published=False, public=public),
            headline=headline,
            tables=tables,
            figures=list(figures),
            notes=(
                "Biases and errors are Monte Carlo estimates with standard errors; a bias within "
                "the floor above is not distinguishable from zero at this number of draws.",
                "The size bins and metrics follow the Census Bureau's published error metrics "
                "for the 2020 redistricting data.",
            ),
            command=command,
        )


def table_audit(design: TableDesign, **options: Any) -> TableAudit:
    """Simulate ``design`` (``options`` as for :func:`postdp.simulate`) and summarise it
    (the body of :func:`postdp.report.audit` for a table design)."""
    from postdp.analysis import simulate

    table = design.table
    geo, cat = table.geography, table.categories
    result = simulate(design, **options)
    cells = design.frame(result)
    cells.insert(3, "label", np.tile([table.labels.get(str(c), "") for c in cat.ids], geo.n))
    cells["bias_se"] = result.bias_se
    cells["rmse"] = np.sqrt(result.mse)
    summary = cells.groupby(["level", "category", "label"], as_index=False, sort=False).agg(
        geounits=("geo_id", "size"),
        mean_abs_bias=("bias", lambda b: b.abs().mean()),
        rmse=("rmse", lambda r: float(np.sqrt((r**2).mean()))),
        mae=("mae", "mean"),
    )
    by_size, by_diversity = design.metrics(result)
    return TableAudit(design, result, cells, summary, by_size, by_diversity)

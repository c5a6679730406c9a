"""The page of a table audit (private; :meth:`postdp.report.Audit.report`): a table
design's errors per (geounit, category), summarised with the Census Bureau's metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from postdp.data import level_names
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value
from postdp.report._names import geounit_names
from postdp.report.audit_pages import budget_statement, significance

__all__ = ["table_audit_page"]


def table_audit_page(
    audit: Any,
    *,
    figures: Sequence[ReportFigure],
    source: str,
    command: str,
    cells_source: str,
    unit: str,
) -> Report:
    """The HTML page of a table design's audit (:meth:`postdp.report.Audit.report`):
    the Census Bureau's metrics by level and size, the budget, the errors by level and
    category and by diversity, and every cell, the largest |bias|/SE first."""
    cells, summary, by_size = audit.cells, audit.summary, audit.by_size
    by_diversity = audit.by_diversity
    design, result, work = audit.design, audit.result, audit.design.workload
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
            f"smallest geounits, {levels[int(deepest['level'])]} level ({deepest['size']} {unit})",
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
            (lambda f: f.assign(level=level_of[f["level"].to_numpy(dtype=int)]))(work.cost_frame()),
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
            "table": (f"{source}: {geo.n:,} geounits in {geo.n_levels} levels, {cat.n} categories"),
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

"""Estimators of one release side by side, in the Census Bureau's yardsticks: the summary
metrics by query, level and size (:func:`postdp.analysis.census_metrics`) and the 5-point /
95% reliability threshold (:func:`postdp.analysis.reliability_threshold`), with a page that
states which estimator is the more accurate where."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from postdp._typing import ArrayLike
from postdp.analysis import (
    SIZE_BINS,
    ReliabilityThreshold,
    census_metrics,
    reliability_threshold,
)
from postdp.data import level_names
from postdp.errors import ValidationError
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value
from postdp.tables import Table
from postdp.tables.schema import Schema

__all__ = ["EstimatorComparison", "compare_estimators"]


@dataclass(frozen=True)
class EstimatorComparison:
    """The yardsticks of several estimators of one table.

    Attributes
    ----------
    metrics : pandas.DataFrame
        :func:`~postdp.analysis.census_metrics` of every estimator, an ``estimator`` column
        first.
    reliability : dict of str to ReliabilityThreshold
        Per estimator (empty when no reliability units were named).
    units : str
        What the reliability units are (e.g. ``"Block group"``).
    """

    metrics: pd.DataFrame
    reliability: dict[str, ReliabilityThreshold]
    units: str

    @property
    def estimators(self) -> list[str]:
        """The estimators, in the order given."""
        return list(dict.fromkeys(self.metrics["estimator"]))

    def total_mae(self) -> pd.DataFrame:
        """MAE of the total population by level (rows) and estimator (columns), every
        size bin pooled."""
        rows = self.metrics[self.metrics["query"] == "total"]
        w = rows["counts"] * rows["mae"]
        pooled = (
            rows.assign(w=w)
            .groupby(["level", "estimator"], sort=False)[["w", "counts"]]
            .sum()
            .assign(mae=lambda f: f["w"] / f["counts"])["mae"]
            .unstack("estimator")
        )
        return pooled[self.estimators]

    def verdict(self) -> Headline:
        """Which estimator has the smallest MAE of total population at every level below the
        root (where they differ), in words."""
        mae = self.total_mae().iloc[1:]
        mae = mae[(mae.max(axis=1) - mae.min(axis=1)) > 1e-9 * (1 + mae.max(axis=1))]
        detail = "; ".join(
            f"{level}: "
            + ", ".join(f"{e} {format_value(float(v))} persons" for e, v in row.items())
            for level, row in mae.iterrows()
        )
        if mae.empty:
            return Headline("verdict", "no difference", "every level's MAE of total is equal")
        best = mae.idxmin(axis=1)
        if best.nunique() == 1:
            return Headline("verdict", f"{best.iloc[0]} most accurate", f"MAE of total: {detail}")
        return Headline("verdict", "mixed: no estimator best at every level", detail)

    def figures(self) -> dict[str, Any]:
        """``mae_by_level``: MAE of total population by level, a line per estimator."""
        from postdp.plots import plot_estimator_comparison

        return {"mae_by_level": plot_estimator_comparison(self.metrics)}

    def report(self, *, title: str = "", privacy: str = "", command: str = "") -> Report:
        """The side-by-side page.

        Parameters
        ----------
        title : str, optional
        privacy : str, optional
            The privacy statement of the measurements the estimators share.
        command : str, optional

        Returns
        -------
        Report
        """
        headline = [self.verdict()]
        if self.reliability:
            shown = {e: str(r).split(" (")[0] for e, r in self.reliability.items()}
            same = len(set(shown.values())) == 1
            headline.append(
                Headline(
                    f"reliability threshold ({self.units})",
                    next(iter(shown.values()))
                    if same
                    else "; ".join(f"{e}: {v}" for e, v in shown.items()),
                    ("every estimator: " if same else "")
                    + "the smallest 50-person bin from which 95% of units have their largest "
                    "group's share within 5 points (Census Bureau, 2021: 450-499 people for "
                    "block groups)",
                )
            )
        tables = [
            ReportTable(
                "Metrics by query, level and size",
                self.metrics,
                caption="MAE and RMSE in persons; percent errors leave out true zeros; TVD "
                "only where the groups partition the persons.",
            )
        ]
        if self.reliability:
            frames = [r.by_bin.assign(estimator=e) for e, r in self.reliability.items()]
            by_bin = pd.concat(frames, ignore_index=True)
            by_bin = by_bin[["estimator", "low", "high", "units", "share_within"]]
            tables.append(ReportTable(f"Reliability by 50-person bin ({self.units})", by_bin))
        figure = ReportFigure.from_axes(
            self.figures()["mae_by_level"],
            title="MAE of total population by level",
            alt="mean absolute error of the total by geographic level, one line per estimator",
            caption="Lower is better; each point pools every size bin of the level. Errors in "
            "persons.",
        )
        return Report(
            title=title or "Estimators side by side: the Census Bureau's yardsticks",
            summary=f"{len(self.estimators)} estimators of one table "
            f"({', '.join(self.estimators)}), each measured against the truth with the "
            "summary metrics of the 2020 redistricting data.",
            design={"estimators": ", ".join(self.estimators)},
            privacy=privacy or "study path: nothing was published",
            headline=headline,
            tables=tables,
            figures=[figure],
            notes=[
                "Synthetic truth: the comparison is of the same design on the same data, "
                "not of the Census Bureau's published numbers."
            ],
            command=command,
        )


def compare_estimators(
    released: Mapping[str, ArrayLike],
    table: Table,
    *,
    schema: Schema,
    levels: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    bins: Sequence[int] = SIZE_BINS,
    reliability_level: int | None = None,
    groups: ArrayLike | None = None,
    units: str = "",
) -> EstimatorComparison:
    """Measure several estimators of one table with the Census Bureau's yardsticks.

    Parameters
    ----------
    released : mapping of str to array_like, shape (..., geography.n, n_detailed)
        Each estimator's released detailed cells of every geounit (give each the same
        noisy measurements, so the comparison is paired).
    table : Table
        The truth.
    schema : Schema
    levels, queries, bins
        As :func:`postdp.analysis.census_metrics`.
    reliability_level : int, optional
        The level whose geounits are the reliability units (e.g. the block groups).
    groups : array_like, optional
        Or any grouping of the leaf geounits (e.g. places), as
        :func:`postdp.analysis.reliability_threshold`.
    units : str, optional
        What the reliability units are called (default the level's name).

    Returns
    -------
    EstimatorComparison

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> from postdp.tables import pl94_schema
    >>> s = pl94_schema()
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cells = np.zeros((2, s.size), dtype=int); cells[:, 0] = [20, 5]
    >>> t = Table(geo, s.categories(), cells)
    >>> good = t.detailed() + 0.0; bad = good.copy(); bad[1:, 0] += 3
    >>> c = compare_estimators({"good": good, "bad": bad}, t, schema=s, queries=["total"])
    >>> c.verdict().value
    'good most accurate'
    """
    if not released:
        raise ValidationError("`released` must name at least one estimator")
    geo = table.geography
    names = list(levels) if levels is not None else level_names(geo)
    frames, reliability = [], {}
    for name, values in released.items():
        frame = census_metrics(
            values, table, schema=schema, queries=queries, levels=names, bins=bins
        )
        frames.append(frame.assign(estimator=name))
        if reliability_level is not None or groups is not None:
            reliability[name] = reliability_threshold(
                values, table, schema=schema, level=reliability_level, groups=groups
            )
    metrics = pd.concat(frames, ignore_index=True)
    metrics = metrics[["estimator", *[c for c in metrics.columns if c != "estimator"]]]
    label = units or (names[reliability_level] if reliability_level is not None else "units")
    return EstimatorComparison(metrics, reliability, label)

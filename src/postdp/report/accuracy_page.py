"""The page of an accuracy study (:func:`postdp.analysis.accuracy_study`): where each
estimator is more or less accurate than the reference, by level, with Monte Carlo
intervals, and every metric by query, level and size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from postdp.analysis import AccuracyStudy
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value

__all__ = ["accuracy_captions", "accuracy_figures", "accuracy_report", "study_verdicts"]

_ROUNDING = 1e-9  # persons


def study_verdicts(study: AccuracyStudy, *, query: str = "total") -> list[Headline]:
    """Two headlines per estimator: the levels where its MAE of ``query`` is lower, or
    higher, than the reference's with 95% confidence (the paired interval excludes 0); and,
    over every metric and cell, where it is worse beyond what chance alone gives
    (:meth:`~postdp.analysis.AccuracyStudy.tally`).

    Parameters
    ----------
    study : AccuracyStudy
    query : str, default "total"

    Returns
    -------
    list of Headline
    """
    diff = study.differences(sizes=False)
    diff = diff[diff["query"] == query]
    out = []
    for name, part in diff.groupby("estimator", sort=False):
        # a difference of rounding (an invariant held by both, to 1e-13) is no difference
        better = part[part["mae_hi"] < -_ROUNDING]["level"].tolist()
        worse = part[part["mae_lo"] > _ROUNDING]["level"].tolist()
        if not better and not worse:
            value = "no level differs (95% intervals)"
        else:
            value = "; ".join(
                text
                for text in (
                    f"lower at {', '.join(better)}" if better else "",
                    f"higher at {', '.join(worse)}" if worse else "",
                )
                if text
            )
        shown = ", ".join(
            f"{level}: {format_value(float(mae))} ({format_value(float(se))})"
            for level, mae, se in zip(
                part["level"],
                part["mae"].to_numpy(float),
                part["mae_se"].to_numpy(float),
                strict=True,
            )
        )
        out.append(
            Headline(
                f"{name} vs {study.reference}: MAE of {query}",
                value,
                f"paired difference in persons by level (SE): {shown}",
            )
        )
    tally = study.tally() if len(study.estimators) > 1 else None
    for name, part in [] if tally is None else tally.groupby("estimator", sort=False):
        beyond = part[part["p_worse"] < 0.05]
        value = (
            "worse beyond chance in: "
            + "; ".join(
                f"{r.metric} ({r.worse} of {r.cells} cells; chance alone about {r.chance:.1f})"
                for r in beyond.itertuples()
            )
            if len(beyond)
            else "worse beyond chance in no metric"
        )
        counts = ", ".join(
            f"{r.metric} {r.better}/{r.worse} of {r.cells}" for r in part.itertuples()
        )
        out.append(
            Headline(
                f"{name} vs {study.reference}: every metric, query, level and size bin",
                value,
                "cells better/worse at 95% (each a paired interval over the draws; for bias, "
                f"the farther from 0), of those compared: {counts}",
            )
        )
    return out


def accuracy_figures(study: AccuracyStudy, *, query: str = "total") -> dict[str, Any]:
    """The study's figures by name (matplotlib Axes): ``mae_by_level`` and, with more than
    one estimator, ``differences`` (to the reference).

    Parameters
    ----------
    study : AccuracyStudy
    query : str, default "total"

    Returns
    -------
    dict of str to matplotlib.axes.Axes
    """
    from postdp.plots import plot_accuracy_differences, plot_accuracy_levels

    out = {"mae_by_level": plot_accuracy_levels(study.summary(sizes=False), query=query)}
    diff = study.differences(sizes=False)
    if not diff.empty:
        out["differences"] = plot_accuracy_differences(diff, query=query)
    return out


def accuracy_captions(
    study: AccuracyStudy, *, query: str = "total"
) -> dict[str, tuple[str, str, str]]:
    """(title, alt text, caption) of each figure of :func:`accuracy_figures`, by name."""
    return {
        "mae_by_level": (
            f"MAE of {query} by level",
            f"mean absolute error of {query} by geographic level, one line per estimator, "
            "with Monte Carlo intervals",
            "Mean over the draws of each draw's MAE (persons), every size bin pooled; bars: "
            "+-1.96 Monte Carlo standard errors.",
        ),
        "differences": (
            f"Paired difference to {study.reference}",
            f"difference in MAE of {query} between each estimator and {study.reference}, by "
            "level, with 95% intervals",
            "Each draw's MAE minus the reference's on the same noisy measurements, averaged "
            "over the draws; below zero the estimator is the more accurate. Bars: 95% "
            "intervals.",
        ),
    }


def accuracy_report(
    study: AccuracyStudy,
    *,
    query: str = "total",
    title: str = "",
    design: dict[str, str] | None = None,
    figures: Sequence[ReportFigure] | None = None,
    command: str = "",
) -> Report:
    """The study's page: a verdict per estimator, the reliability thresholds, the figures
    and the tables (levels pooled, differences, every size bin).

    Parameters
    ----------
    study : AccuracyStudy
    query : str, default "total"
        The query of the headlines and figures (every query is in the tables).
    title : str, optional
    design : dict of str to str, optional
        What was studied (the truth, the workload, the seed), shown beside the estimators.
    figures : sequence of ReportFigure, optional
        Default: :func:`accuracy_figures`, drawn now.
    command : str, optional
        The command line shown.

    Returns
    -------
    Report

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"estimator": ["a", "a", "b", "b"], "draw": [0, 1, 0, 1],
    ...     "query": "total", "level": "1", "size": "0+", "geounits": 2, "counts": 2,
    ...     "mae": [2.0, 3.0, 1.0, 1.5], "mse": [4.0, 9.0, 1.0, 2.25],
    ...     "mean_error": [0.0, 0.0, 0.0, 0.0]})
    >>> page = accuracy_report(AccuracyStudy(frame, {}, "a"))
    >>> page.headline[0].value
    'lower at 1'
    """
    levels = study.summary(sizes=False)
    diff = study.differences(sizes=False)
    headline = study_verdicts(study, query=query)
    for name, found in study.reliability.items():
        headline.append(Headline(f"reliability threshold, {name}", str(found).split(" (")[0],
                                 "the smallest 50-person bin from which 95% of the units "
                                 "have their largest group's share within 5 points"))  # fmt: skip
    if figures is None:
        figures = ReportFigure.drawn(
            accuracy_figures(study, query=query), accuracy_captions(study, query=query)
        )
    tables = [
        ReportTable("By level, every size bin pooled", _shown(levels)),
        ReportTable("By query, level and size bin", _shown(study.summary())),
    ]
    if not diff.empty:
        tables.insert(1, ReportTable(f"Paired differences to {study.reference}", _shown(diff)))
    shown_design = {"estimators": ", ".join(study.estimators), "draws": str(study.draws)}
    shown_design |= design or {}
    return Report(
        title=title or "Accuracy study: estimators on the same draws",
        summary=f"{len(study.estimators)} estimators ({', '.join(study.estimators)}) run on "
        f"the same {study.draws} independent noisy measurement sets and scored against the "
        "truth with the Census Bureau's summary metrics; every number is a mean over the "
        "draws with its Monte Carlo standard error.",
        design=shown_design,
        privacy="study path: a synthetic or otherwise known truth; nothing was published",
        headline=headline,
        tables=tables,
        figures=list(figures),
        notes=[
            "Differences are paired: each estimator is scored on the same measurements as "
            "the reference, so a difference is more precise than the two means it compares.",
            "Percent errors leave out counts whose truth is 0; TVD is for queries whose "
            "groups partition the persons.",
        ],
        command=command,
    )


def _shown(frame: Any) -> Any:
    """Round the frame's floats for the page (the files keep every digit)."""
    return frame.round(4)

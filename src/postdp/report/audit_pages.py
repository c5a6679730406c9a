"""The report of a Monte Carlo audit of a release design over a hierarchy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp._typing import ArrayLike
from postdp.analysis import MonteCarloResult, ReleaseDesign
from postdp.data import level_names
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Budget
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value
from postdp.report._names import geounit_names

__all__ = ["audit_captions", "audit_report", "budget_statement", "significance", "size_bins"]

#: Size bins of the true counts (people), as the Census Bureau bins its error metrics.
SIZE_EDGES = (0, 1_000, 10_000, 100_000, 1_000_000, np.inf)

#: How to read each figure an audit draws (file stem -> (title, alt text, caption)).
CAPTIONS: dict[str, tuple[str, str, str]] = {
    "residuals": (
        "Errors before and after post-processing",
        "Histograms of the simulated errors (released minus true count) of a few nodes.",
        "{panels} A histogram centred off zero is a bias; its spread is the variance. With n "
        "draws the centre is known to about 1.96·sd/√n (the Monte Carlo floor), so a shift "
        "smaller than that is noise of the simulation, not a bias.",
    ),
    "bias_by_count": (
        "Bias against the true count ([zhu2021], Fig. 4)",
        "The mean bias of the nodes in each bin of true count, once per shift of the leaf "
        "counts, with 95% intervals.",
        "{series} "
        "Where a design clamps or rounds, small counts are pushed up and the bias fades as "
        "counts grow; a bin whose interval covers zero shows no detectable bias. Each point "
        "is the mean over its bin's nodes, with ±1.96 times the standard error of that mean.",
    ),
    "wasserstein": (
        "Distance of the errors to the noise law, by family size ([zhu2021], Fig. 5)",
        "Mean Wasserstein distance of the children's error law to the Laplace noise against "
        "the number of children.",
        "The (P) projection mixes a node's noise with its siblings'; with more siblings the "
        "error law moves toward the original noise law. The distances come from "
        "histograms of the draws, so values near the bin width are the resolution floor.",
    ),
}


def audit_captions(
    result: MonteCarloResult,
    shifts: Sequence[int] = (),
    *,
    names: ArrayLike | None = None,
    unit: str = "persons",
) -> dict[str, tuple[str, str, str]]:
    """The captions of an audit's figures, said of the figures drawn: how many nodes the
    residual panel shows (and which), how many series the bias plot has.

    Parameters
    ----------
    result : MonteCarloResult
        The main run (its ``raw_ids`` are the nodes of the residual panel).
    shifts : sequence of int
        The shifts of the leaf counts, one series each.
    names : array_like of str, optional
        Display names of the run's entities (default: the ids).
    unit : str, default "persons"

    Returns
    -------
    dict of str to (title, alt text, caption)

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [3, 1, 2])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0)), n_draws=50, rng=0, raw=["a"])
    >>> audit_captions(res)["residuals"][2].split(";")[0]
    'One panel: the errors (persons) of node a over the simulated releases'
    """
    shown = result.ids if names is None else np.asarray(names, dtype=object)
    where = {str(i): k for k, i in enumerate(result.ids)}
    kept = [str(shown[where[str(i)]]) for i in result.raw_ids]
    nodes = f"node {kept[0]}" if len(kept) == 1 else f"{len(kept)} nodes ({'; '.join(kept)})"
    if not kept:
        nodes = "no node (none was kept)"
    panels = (
        f"One panel: the errors ({unit}) of {nodes} over the simulated releases"
        + (", one colour per node" if len(kept) > 1 else "")
        + "; dashed is the noise alone, solid the released error."
    )
    if len(shifts) == 1:
        series = f"One series: every leaf's count plus {int(shifts[0])}."
    else:
        listed = ", ".join(str(int(k)) for k in shifts)
        series = (
            f"{len(shifts)} series, one per shift of every leaf's count ({listed}), each a "
            "re-run of the audit."
        )
    out = dict(CAPTIONS)
    for key, fill in (("residuals", {"panels": panels}), ("bias_by_count", {"series": series})):
        title, alt, caption = out[key]
        out[key] = (title, alt, caption.format(**fill))
    return out


def budget_statement(budget: Budget, *, published: bool, public: Sequence[str] = ()) -> str:
    """The privacy statement of a design: the budget, how it composes, what invariants reveal.

    Parameters
    ----------
    budget : Budget
    published : bool
        False for a study (numpy draws: nothing was released, no privacy spent).
    public : sequence of str
        Ids of invariants published without noise.

    Returns
    -------
    str

    Examples
    --------
    >>> budget_statement(Budget.pure(1.5), published=False).split(". ")[0]
    'Study run (numpy draws): nothing was published and no privacy was spent'
    """
    if published:
        head = f"Released with the secure sampler; the release spent {budget}."
    else:
        head = (
            "Study run (numpy draws): nothing was published and no privacy was spent. "
            f"Released with the secure sampler, this design would spend {budget}."
        )
    text = (
        f"{head} The cost adds up over levels and queries (sequential composition); the "
        "geounits of one level are disjoint, so one person changes one count per query "
        "(parallel composition)."
    )
    if budget.rho > 0:
        text += f" As (ε, δ)-DP with δ = 1e-10: ε = {budget.to_approx_dp(1e-10):.4g}."
    if public:
        text += (
            f" Published exactly (no protection): {', '.join(public)}, and every count they "
            "determine."
        )
    return text


def significance(
    result: MonteCarloResult, names: ArrayLike, *, unit: str = "persons", what: str = "counts"
) -> tuple[list[Headline], npt.NDArray[np.bool_]]:
    """The verdict of an audit page and its one count of significant biases, from one test.

    Both come from :meth:`MonteCarloResult.bias_verdict`: a count is significant when its
    |bias| / SE passes the two-sided 5% point of Student t with draws - 1 degrees of freedom
    (the test is stated once, on the count's card); the verdict weighs that count against
    what chance alone flags among that many.

    Parameters
    ----------
    result : MonteCarloResult
    names : array_like of str
        What each entity is called on the page (names, not codes).
    unit : str, default "persons"
        What the counts count (a bias is in these units).
    what : str, default "counts"
        What the entities are, in the plural (``"nodes"``, ``"cells"``).

    Returns
    -------
    headlines : list of Headline
        ``verdict`` and ``{what} with a significant bias``: the same number, one reading.
    significant : ndarray of bool
        Which entities that card counts (its sum is the card's number).

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [3, 1, 2])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project-nonneg"), n_draws=400, rng=0)
    >>> (verdict, card), flagged = significance(res, h.ids)
    >>> card.value == f"{int(flagged.sum())} of 3"
    True
    """
    v = result.bias_verdict(names=names)
    tested = result.bias_se > 0
    z = np.where(tested, np.abs(result.bias) / np.where(tested, result.bias_se, 1.0), 0.0)
    flagged = tested & (z > v.critical)
    count = f"{v.flagged:,} of {v.tested:,}"
    fixed = int((~tested).sum())
    expected = v.expected_flagged
    shown = f"{expected:,.0f}" if expected >= 10 else f"{expected:.2g}"
    chance = f"~{shown} expected by chance alone"
    if not v.tested:
        verdict = Headline("verdict", "nothing to test", "every count is fixed by an invariant")
    elif v.detected:
        verdict = Headline(
            "verdict",
            "systematic bias",
            f"{count} {what} have a significant bias, {chance}; worst: {v.worst}, "
            f"{v.worst_bias:+,.4g} {unit} (±{v.worst_half_width:,.2g})",
        )
    else:
        verdict = Headline(
            "verdict",
            "no bias detected",
            f"{count} {what} have a significant bias, {chance}; the largest |bias|/SE "
            f"{v.largest_z:.3g} is within the ~{v.expected_largest_z:.2g} that many {what} "
            "give by chance",
        )
    reading = "more than chance: bias" if v.detected else "no more than chance: no bias shown"
    card = Headline(
        f"{what} with a significant bias",
        count,
        f"significant: |bias|/SE > {v.critical:.3g} (two-sided {v.level:.0%} Student t test, "
        f"{result.n_draws - 1:,} degrees of freedom); {chance} ({reading})"
        + (f"; {fixed:,} fixed by invariants are not tested" if fixed else ""),
    )
    return [verdict, card], flagged


def size_bins(
    result: MonteCarloResult,
    hierarchy: Hierarchy,
    *,
    edges: Sequence[float] = SIZE_EDGES,
    z: float = 1.96,
) -> pd.DataFrame:
    """Errors summarised by level and by size bin of the true count.

    Parameters
    ----------
    result : MonteCarloResult
        An audit of a design on ``hierarchy``.
    hierarchy : Hierarchy
    edges : sequence of float
        Bin edges of the true counts (left-closed).
    z : float, default 1.96
        Width of the interval of the mean bias, in standard errors.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty (level, bin): ``level``, ``size`` (the bin), ``nodes``,
        ``mean_bias`` with ``mean_bias_lo``/``mean_bias_hi`` (the bins' nodes are
        simulated from common draws, so the interval treats their errors as independent:
        a guide, not a test), ``mae``, ``rmse``.

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [2500, 500, 2000])
    >>> res = simulate(ReleaseDesign(h, Laplace(1.0), "project"), n_draws=200, rng=1)
    >>> size_bins(res, h)[["level", "size", "nodes"]].to_dict("list")
    {'level': [0, 1, 1], 'size': ['1,000–9,999', '0–999', '1,000–9,999'], 'nodes': [1, 1, 1]}
    """
    cuts = np.asarray(edges, dtype=float)
    truth = np.asarray(result.truth, dtype=float)
    which = np.searchsorted(cuts, truth, side="right") - 1
    rows = []
    for level in range(hierarchy.n_levels):
        for b in range(cuts.size - 1):
            sel = (hierarchy.depth == level) & (which == b)
            n = int(sel.sum())
            if n == 0:
                continue
            mean = float(result.bias[sel].mean())
            se = float(np.sqrt((result.bias_se[sel] ** 2).sum()) / n)
            rows.append(
                {
                    "level": level,
                    "size": _bin_label(cuts[b], cuts[b + 1]),
                    "nodes": n,
                    "mean_bias": mean,
                    "mean_bias_lo": mean - z * se,
                    "mean_bias_hi": mean + z * se,
                    "mae": float(result.mae[sel].mean()),
                    "rmse": float(np.sqrt(result.mse[sel].mean())),
                }
            )
    return pd.DataFrame(rows)


def _bin_label(lo: float, hi: float) -> str:
    if np.isinf(hi):
        return f"{format_value(lo)}+"
    return f"{format_value(lo)}–{format_value(hi - 1)}"


def audit_report(
    result: MonteCarloResult,
    design: ReleaseDesign,
    *,
    figures: Sequence[ReportFigure] | None = None,
    command: str = "",
    source: str = "",
    names: ArrayLike | None = None,
    unit: str = "persons",
) -> Report:
    """The report of an audit: design, largest bias, size-binned errors, node table, figures.

    Parameters
    ----------
    result : MonteCarloResult
        :func:`postdp.simulate` of ``design`` (study path).
    design : ReleaseDesign
    figures : sequence of ReportFigure, optional
        The figures to embed; by default the residual histograms of the nodes kept raw
        (when any) are drawn, if matplotlib is installed.
    command : str, default ""
        The command line, shown in the report.
    source : str, default ""
        Where the whole node table is (shown when the report keeps only part of it).
    names : array_like of str, optional
        A display name per node (e.g. "Loving County"; a county's state is added from the
        hierarchy): shown beside the ids in the node table and in the headlines. Default:
        the names postdp knows for Census GEOIDs (states, counties), else the ids.
    unit : str, default "persons"
        What the counts count: every error on the page is in it (squared errors in its
        square).

    Returns
    -------
    Report

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> from postdp.analysis import ReleaseDesign, simulate
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    >>> d = ReleaseDesign(h, Laplace(1.0), "project-nonneg")
    >>> rep = audit_report(simulate(d, n_draws=500, rng=0), d, figures=[])
    >>> [h.label for h in rep.headline][:2]
    ['verdict', 'nodes with a significant bias']
    """
    h = design.hierarchy
    if names is not None and np.asarray(names, dtype=object).shape != (h.n,):
        raise ValidationError(f"`names` needs one name per node ({h.n})")
    shown = geounit_names(h, names)
    levels = level_names(h)
    frame = result.to_frame()
    frame.insert(1, "name", shown)
    frame.insert(2, "level", np.asarray(levels, dtype=object)[h.depth])
    (verdict, count), flagged = significance(result, shown, unit=unit, what="nodes")
    frame.insert(3, "significant", np.where(flagged, "yes", "no"))
    z = np.abs(result.bias) / np.maximum(result.bias_se, 1e-300)
    order = np.argsort(-np.where(result.bias_se > 0, z, 0.0), kind="stable")
    worst = int(order[0])
    frame = frame.iloc[order].reset_index(drop=True)
    floor = float(np.median(result.bias_se))
    lo, hi = result.confidence_interval()
    steps = ",".join(map(str, design.steps)) or "none"
    public = _public_ids(design)
    where = shown[worst] if shown[worst] == h.ids[worst] else f"{shown[worst]} ({h.ids[worst]})"
    headline = [
        verdict,
        count,
        Headline(
            "largest |bias| / SE",
            f"{format_value(float(result.bias[worst]))} {unit} at {where}",
            f"95% interval [{format_value(float(lo[worst]))}, {format_value(float(hi[worst]))}] "
            f"{unit}; |bias|/SE = {z[worst]:.3g}",
        ),
        Headline(
            "Monte Carlo floor of a bias",
            f"± {format_value(1.96 * floor)} {unit}",
            f"1.96 × the median SE over {result.n_draws:,} draws: smaller biases cannot be "
            "told from zero",
        ),
        Headline(
            "mean MSE", f"{format_value(float(result.mse.mean()))} {unit}²", "over every node"
        ),
    ]
    bins = size_bins(result, h)
    bins["level"] = [levels[int(d)] for d in bins["level"]]
    if figures is None:
        figures = _default_figures(result, shown)
    mechanisms = "; ".join(f"{levels[d]}: {m}" for d, m in enumerate(design.per_level))
    return Report(
        title="Audit of a release design",
        summary=(
            f"{result.n_draws:,} simulated releases of {h.n:,} nodes in {h.n_levels} levels "
            f"({', '.join(levels)}) "
            f"with post-processing {steps}. Every statistic has a Monte Carlo standard error; "
            "intervals are 95%."
        ),
        design={
            "hierarchy": f"{h.n:,} nodes, {h.n_levels} levels, {len(h.leaves):,} leaves",
            "mechanisms": mechanisms,
            "budget": str(design.budget),
            "post-processing": steps,
            "public invariants": ", ".join(public) or "none",
            "draws": f"{result.n_draws:,}",
        },
        privacy=budget_statement(design.budget, published=False, public=public),
        headline=headline,
        tables=[
            ReportTable(
                "Errors by level and size",
                bins,
                f"Mean bias (with its interval), MAE and RMSE of the nodes in each level and "
                f"size bin of the true count, in {unit}.",
            ),
            ReportTable(
                "Nodes",
                frame,
                f"One row per node, the largest |bias|/SE first: bias, MAE and error quantiles "
                f"in {unit}, variance and MSE in {unit}², with 95% intervals (_lo, _hi); "
                "significant is the test of the verdict's count (filter significant=yes).",
                source=source,
            ),
        ],
        figures=figures,
        notes=_NOTES,
        command=command,
    )


_NOTES = (
    "The bias of a node is the mean of released minus true count over the simulated "
    "releases; its interval is ±1.96 standard errors of that mean and shows its size. "
    "Whether a bias is significant is the one test on the card that counts them; with many "
    "nodes some pass it by chance alone, so the verdict weighs that count against chance.",
    "Theory and simulation are compared through these intervals: a difference smaller than "
    "the Monte Carlo floor is not a disagreement. More draws lower the floor as 1/√draws.",
    "Quantiles come from per-node histograms (the audit's --bins) unless the node's draws "
    "were kept; they are exact to the bin width.",
)


def _public_ids(design: ReleaseDesign) -> list[str]:
    public = design.public
    if public is None:
        return []
    if isinstance(public, str):
        return [str(design.hierarchy.ids[design.hierarchy.root])] if public == "root" else []
    return [str(k) for k in public]


def _default_figures(result: MonteCarloResult, names: ArrayLike) -> list[ReportFigure]:
    import importlib.util

    if not result.raw_ids.size or importlib.util.find_spec("matplotlib") is None:
        return []
    from postdp.plots import plot_residuals

    title, alt, caption = audit_captions(result, names=names)["residuals"]
    return [ReportFigure.from_axes(plot_residuals(result), title=title, alt=alt, caption=caption)]

"""A fairness study of Title I allotments or Section 203 decisions on DP data, as
``postdp fairness`` runs it, from Python.

:func:`fairness_study` simulates the bundled data (2019 SAIPE school districts for Title I,
2016 Section 203 records) once per epsilon with :func:`postdp.decisions.allotment_fairness`
or :func:`postdp.decisions.decision_fairness`, and returns a :class:`FairnessStudy` whose
tables, figures, headline numbers and HTML page are those of the command ([fioretto2021]): the
command line only parses, checks and writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value

__all__ = ["FairnessStudy", "fairness_study"]

CAPTIONS = {
    "title1": (
        "Bias of each district's allotment against its count of poor children "
        "([fioretto2021], Fig. 2)",
        "Bias in dollars of every school district's Title I allotment against its true "
        "count of poor children, one series per epsilon.",
        "A point above zero is a district that receives more on average than without noise. "
        "{direction}"
        "Each bias is a Monte Carlo mean: its 95% interval is bias ± 1.96 SE (bias_lo, "
        "bias_hi in the table), so points within that band of zero show no detectable bias.",
    ),
    "section203": (
        "Decision error against the distance to the thresholds ([fioretto2021], Fig. 3)",
        "Probability that the noisy Section 203 decision differs from the true one, against "
        "each record's margin to the nearest threshold.",
        "Errors concentrate near a margin of zero: records close to a threshold flip often, "
        "records far from it almost never. Each probability is a Monte Carlo frequency with "
        "standard error sqrt(p(1 - p)/draws).",
    ),
}


@dataclass(frozen=True)
class FairnessStudy:
    """The results of :func:`fairness_study`: one run per epsilon.

    Attributes
    ----------
    problem : {"title1", "section203"}
    scope : str
        ``"nation"`` or the state's postal code.
    mechanism : {"laplace", "geometric"}
    epsilons : tuple of float
    postprocess : str
    n_draws : int
    amount, national_amount : float or None
        Title I: the amount allotted to the entities studied (the state's share of the
        national amount), and the national amount.
    runs : tuple of FairnessReport
        One per epsilon.
    entities : pandas.DataFrame
        The entities' identifying columns, in the order of every run's arrays.
    sizes : ndarray
        Title I: the true counts of poor children; Section 203: each record's margin to
        the rule's nearest threshold.
    truth : ndarray
        Title I: the same counts; Section 203: the true decisions.

    Examples
    --------
    >>> s = fairness_study("title1", state="DE", epsilon=[0.1, 1], n_draws=50, rng=0)
    >>> sorted(s.tables()), len(s.headlines())
    (['title1_DE_eps0.1.csv', 'title1_DE_eps1.csv'], 8)
    """

    problem: Literal["title1", "section203"]
    scope: str
    mechanism: str
    epsilons: tuple[float, ...]
    postprocess: str
    n_draws: int
    amount: float | None
    national_amount: float | None
    runs: tuple[Any, ...]
    entities: pd.DataFrame
    sizes: FloatArray
    truth: FloatArray

    def tables(self) -> dict[str, pd.DataFrame]:
        """One table per epsilon by file name (as the command writes them): the entities'
        columns, then the outcome statistics of :meth:`FairnessReport.to_frame`.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        out = {}
        for e, run in zip(self.epsilons, self.runs, strict=True):
            frame = run.to_frame()
            for k, column in enumerate(self.entities.columns):
                frame.insert(k, column, self.entities[column].to_numpy())
            out[self._stem(e) + ".csv"] = frame
        return out

    def _stem(self, e: float) -> str:
        if self.problem == "title1":
            return f"title1_{self.scope}_eps{e:g}"
        return (
            f"section203_eps{e:g}"
            if self.scope == "nation"
            else f"section203_{self.scope}_eps{e:g}"
        )

    @property
    def captions(self) -> dict[str, tuple[str, str, str]]:
        """(title, alt text, caption) of each figure, by name (or its first word); a
        caption that states a direction computes it from this study's runs."""
        out = dict(CAPTIONS)
        title, alt, caption = out["title1"]
        out["title1"] = (title, alt, caption.replace("{direction}", self._direction()))
        return out

    def _direction(self) -> str:
        """Who gains and who loses in each run, from its own biases (Title I)."""
        if self.problem != "title1":
            return ""
        big = int(np.argmax(self.truth))
        small = self.truth < np.median(self.truth)
        parts = []
        for e, run in zip(self.epsilons, self.runs, strict=True):
            b, half = float(run.bias[big]), 1.96 * float(run.bias_se[big])
            if abs(b) <= half:
                largest = f"the largest district shows no detectable bias (±${half:,.0f})"
            else:
                way = "gains" if b > 0 else "loses"
                largest = f"the largest district {way} ${abs(b):,.0f} (±${half:,.0f})"
            moved = float(run.bias[small].sum())
            way = "gain" if moved > 0 else "lose"
            parts.append(
                f"At ε = {e:g}, {largest} and the districts below the median count {way} "
                f"${abs(moved):,.0f} together. "
            )
        return "".join(parts)

    def figures(self) -> dict[str, Any]:
        """The figures by file stem (matplotlib Axes): Title I, the bias of every district's
        allotment against its size, one series per epsilon; Section 203, the decision errors
        against the margin, one figure per epsilon.

        Returns
        -------
        dict of str to matplotlib.axes.Axes
        """
        from postdp import plots

        if self.problem == "title1":
            labels = [f"eps = {e:g}" for e in self.epsilons]
            ax = plots.plot_allotment_bias(list(self.runs), labels, self.sizes)
            ax.set_ylabel("bias of the allotment (USD)")
            return {f"title1_{self.scope}_bias": ax}
        return {
            self._stem(e): plots.plot_decision_errors(self.sizes, run)
            for e, run in zip(self.epsilons, self.runs, strict=True)
        }

    def headlines(self) -> list[Headline]:
        """The report's headline numbers per epsilon: the verdict on unfairness, then three
        numbers.

        Returns
        -------
        list of Headline
        """
        out: list[Headline] = []
        for e, run in zip(self.epsilons, self.runs, strict=True):
            title1 = self.problem == "title1"
            verdict = run.alpha_verdict(absolute=not title1, unit="$" if title1 else "")
            word, detail = verdict.split(": ", 1)
            out.append(Headline(f"verdict (ε = {e:g})", word, detail))
            if title1:
                big = int(np.argmax(self.truth))
                out += _title1_headlines(e, run, str(self.entities["name"].iloc[big]), big)
            else:
                out += _section203_headlines(e, run, self.truth)
        return out

    def summary_lines(self) -> list[str]:
        """One line per epsilon, as the command prints them.

        Returns
        -------
        list of str
        """
        lines = []
        for e, run in zip(self.epsilons, self.runs, strict=True):
            if self.problem == "title1":
                big = int(np.argmax(self.truth))
                lines.append(
                    f"Title I ({self.scope}, ${self.amount:,.0f}), {self.mechanism} eps = {e:g}, "
                    f"post-processing {self.postprocess}, {self.n_draws} draws: alpha "
                    f"${run.alpha:,.0f}, cost of privacy ${run.cost_of_privacy():,.0f}, largest "
                    f"entity {self.entities['name'].iloc[big]!s} bias ${run.bias[big]:,.0f}"
                )
            else:
                lines.append(
                    f"Section 203 ({self.scope}), {self.mechanism} eps = {e:g}: "
                    f"{int(self.truth.sum())} true positives of {self.truth.size}; mean "
                    f"decision error {np.abs(run.bias).mean():.3f}, alpha "
                    f"{run.absolute_alpha:.3f}"
                )
        return lines

    def report(
        self,
        *,
        figures: Sequence[ReportFigure] | None = None,
        command: str = "",
    ) -> Report:
        """The study's HTML page (the same as ``postdp fairness ... --report``).

        Parameters
        ----------
        figures : sequence of ReportFigure, optional
            Default: :meth:`figures`, drawn now.
        command : str
            The command line shown on the page.

        Returns
        -------
        Report
        """
        if figures is None:
            figures = ReportFigure.drawn(self.figures(), self.captions)
        tables = self.tables()
        frames = [
            frame.assign(epsilon=e) for e, frame in zip(self.epsilons, tables.values(), strict=True)
        ]
        rows = pd.concat(frames, ignore_index=True)
        rows = rows.sort_values("abs_bias", ascending=False, kind="stable").reset_index(drop=True)
        title1 = self.problem == "title1"
        what = "Title I basic-grant allotments" if title1 else "Section 203 determinations"
        per = (
            "the Title I count of each district (one query, disjoint districts)"
            if title1
            else "each of the three counts of each jurisdiction (three queries: 3 ε in all)"
        )
        data = "2019 SAIPE school districts" if title1 else "2016 Section 203 records"
        return Report(
            title=f"Fairness of {what} on DP data",
            summary=(
                f"{self.n_draws:,} simulated releases of the bundled {data} ({self.scope}), "
                "per ε; the bias of each entity's outcome with its 95% interval."
            ),
            design={
                "problem": what,
                "entities": self.scope,
                "mechanism": f"{self.mechanism}, ε = {', '.join(f'{e:g}' for e in self.epsilons)}",
                "post-processing": self.postprocess,
                "draws": f"{self.n_draws:,}",
                **({"amount": f"${self.national_amount:,.0f} nationally"} if title1 else {}),
            },
            privacy=(
                "Study run (numpy draws): nothing was published and no privacy was spent. "
                f"Each ε is its own design, with noise of that ε on {per}."
            ),
            headline=self.headlines(),
            tables=[
                ReportTable(
                    "Entities",
                    rows,
                    "One row per entity and ε, the largest |bias| first: the true outcome, its "
                    "bias with the 95% interval, the disparity and the MAE.",
                    source=", ".join(tables),
                )
            ],
            figures=list(figures),
            notes=(
                "An entity's bias is the mean of its noisy outcome minus its true outcome over "
                "the simulated releases ([fioretto2021], Def. 2); α is the largest minus the "
                "smallest bias (Def. 3).",
                "α is a maximum over many Monte Carlo estimates, so simulation noise alone "
                "makes it positive: compare it with the floor in its card.",
            ),
            command=command,
        )


def fairness_study(
    problem: Literal["title1", "section203"],
    *,
    epsilon: float | Sequence[float],
    state: str | None = None,
    mechanism: Literal["laplace", "geometric"] = "geometric",
    postprocess: str = "clamp",
    amount: float = 6.5e9,
    n_draws: int = 2000,
    rng: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> FairnessStudy:
    """Simulate Title I allotments or Section 203 decisions on DP data, once per epsilon,
    as ``postdp fairness`` does ([fioretto2021]).

    Parameters
    ----------
    problem : {"title1", "section203"}
    epsilon : float or sequence of float
        One run per value.
    state : str, optional
        One state's entities, by postal code (the nation when not given).
    mechanism : {"laplace", "geometric"}, default "geometric"
    postprocess : str, default "clamp"
        Element-wise post-processing of the noisy counts before the decision
        (:class:`postdp.postprocess.ElementwiseChain`).
    amount : float, default 6.5e9
        Title I basic grants nationally, USD (a state gets its share).
    n_draws : int, default 2000
    rng : int, optional
        The seed of every run.
    progress : callable(label, done, total), optional

    Returns
    -------
    FairnessStudy

    Examples
    --------
    >>> s = fairness_study("section203", state="AZ", epsilon=1.0, n_draws=50, rng=0)
    >>> s.problem, s.scope, len(s.runs)
    ('section203', 'AZ', 1)
    """
    from postdp import decisions
    from postdp.data import load_section203, load_title1
    from postdp.mechanisms import Geometric, Laplace
    from postdp.postprocess import ElementwiseChain

    if problem not in ("title1", "section203"):
        raise ValidationError(f"`problem` must be 'title1' or 'section203'; got {problem!r}")
    if mechanism not in ("laplace", "geometric"):
        raise ValidationError(f"`mechanism` must be 'laplace' or 'geometric'; got {mechanism!r}")
    if isinstance(epsilon, Sequence):
        epsilons = tuple(float(e) for e in epsilon)
    else:
        epsilons = (float(epsilon),)
    cls = Laplace if mechanism == "laplace" else Geometric
    mechanisms = [cls(epsilon=e) for e in epsilons]
    if not mechanisms:
        raise ValidationError("`epsilon` needs at least one value")
    ElementwiseChain(mechanisms[0], postprocess)  # checked before any simulation
    us = load_title1()
    if state is not None and state not in set(us["state"]):
        raise ValidationError(f"`state` {state!r} is not a state of the data")
    scope = "nation" if state is None else state

    def ticker(label: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda done, total: progress(label, done, total))

    run: Callable[[Any, str], Any]
    allotted: float | None = None
    if problem == "title1":
        table = us if state is None else load_title1(state)
        share = float((table.poor_5_17 * table.weight).sum() / (us.poor_5_17 * us.weight).sum())
        x = table.poor_5_17.to_numpy(dtype=float)
        w = table.weight.to_numpy()
        allotted = amount * share
        entities = pd.DataFrame(
            {"leaid": table.leaid.to_numpy(), "name": table.name.to_numpy(), "poor_5_17": x}
        )
        sizes, truth = x, x

        def run(m: Any, label: str) -> Any:
            return decisions.allotment_fairness(
                x,
                w,
                m,
                amount=allotted,
                postprocess=postprocess,
                n_draws=n_draws,
                rng=rng,
                progress=ticker(label),
            )

    else:
        s203 = load_section203()
        if state is not None:
            fips = us.loc[us["state"] == state, "state_fips"].iloc[0]
            s203 = s203[s203["state_fips"] == fips].reset_index(drop=True)
            if s203.empty:
                raise ValidationError(f"`state` {state!r}: no Section 203 records in that state")
        data = {k: s203[k].to_numpy(dtype=float) for k in ("vacit_total", "vaclep", "illit")}
        rule = decisions.section203_rule()
        margin = np.asarray(decisions.section203_margin(data), dtype=float)
        entities = pd.DataFrame(
            {
                "geoid": s203.geoid.to_numpy(),
                "name": s203.name.to_numpy(),
                "language": s203.language.to_numpy(),
                "margin": margin,
            }
        )
        sizes, truth = margin, np.asarray(rule(data), dtype=float)

        def run(m: Any, label: str) -> Any:
            return decisions.decision_fairness(
                data,
                rule,
                m,
                postprocess=postprocess,
                n_draws=n_draws,
                rng=rng,
                progress=ticker(label),
            )

    runs = tuple(run(m, f"{problem} eps={e:g}") for e, m in zip(epsilons, mechanisms, strict=True))
    return FairnessStudy(
        problem,
        scope,
        mechanism,
        epsilons,
        postprocess,
        n_draws,
        allotted,
        amount if problem == "title1" else None,
        runs,
        entities,
        sizes,
        truth,
    )


def _title1_headlines(e: float, rep: Any, name: str, big: int) -> list[Headline]:
    floor = 1.96 * float(np.median(rep.bias_se))
    return [
        Headline(
            f"fairness bound α (ε = {e:g})",
            _dollars(rep.alpha),
            f"largest minus smallest bias of an allotment; a bias is known to ± ${floor:,.0f} "
            "(1.96 × median SE), so α below a few times that is simulation noise",
        ),
        Headline(
            f"dollars misallocated (ε = {e:g})",
            _dollars(rep.cost_of_privacy()),
            "sum of the expected losses of the districts that lose (cost of privacy, "
            "[fioretto2021] Def. 4)",
        ),
        Headline(
            f"largest district (ε = {e:g})",
            _dollars(float(rep.bias[big])),
            f"{name}: bias ± ${1.96 * float(rep.bias_se[big]):,.0f} (95%)",
        ),
    ]


def _dollars(value: float) -> str:
    return ("−$" if value < 0 else "$") + format_value(abs(value))


def _section203_headlines(e: float, rep: Any, truth: FloatArray) -> list[Headline]:
    err = np.abs(rep.bias)
    return [
        Headline(
            f"mean decision error (ε = {e:g})",
            f"{err.mean():.3f}",
            f"probability a record's decision flips, averaged over {truth.size:,} records "
            f"({int(truth.sum()):,} covered)",
        ),
        Headline(
            f"fairness bound α (ε = {e:g})",
            f"{rep.absolute_alpha:.3f}",
            "largest minus smallest decision-error probability",
        ),
        Headline(
            f"records with errors above 0.1 (ε = {e:g})",
            f"{int((err > 0.1).sum()):,} of {truth.size:,}",
            "the ones close to a threshold",
        ),
    ]

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
from postdp.postprocess.estimators import CLAMP
from postdp.report._fairness_text import CAPTIONS, section203_headlines, title1_headlines
from postdp.report._model import Headline, Report, ReportFigure, ReportTable

__all__ = ["FairnessStudy", "fairness_study"]


@dataclass(frozen=True)
class FairnessStudy:
    """The results of :func:`fairness_study`: one run per setting (epsilon x post-processing).

    Attributes
    ----------
    problem : {"title1", "section203"}
    scope : str
        ``"nation"`` or the state's postal code.
    mechanism : {"laplace", "geometric"}
    epsilons : tuple of float
    postprocesses : tuple of str
    n_draws : int
    amount, national_amount : float or None
        Title I: the amount allotted to the entities studied (the state's share of the
        national amount), and the national amount.
    runs : tuple of FairnessReport
        One per setting, in the order of :attr:`settings`.
    entities : pandas.DataFrame
        The entities' identifying columns, in the order of every run's arrays.
    sizes : ndarray
        Title I: the true counts of poor children; Section 203: each record's margin to
        the rule's nearest threshold.
    truth : ndarray
        Title I: the same counts; Section 203: the true decisions.

    Examples
    --------
    >>> s = fairness_study("title1", state="DE", epsilon=[0.1, 1], n_draws=50, rng=0,
    ...                    postprocess=["clamp", "ramp-optimal"])
    >>> s.settings[:2], len(s.runs), list(s.tables())
    ([(0.1, 'clamp'), (0.1, 'ramp-optimal')], 4, ['title1_DE.csv'])
    """

    problem: Literal["title1", "section203"]
    scope: str
    mechanism: str
    epsilons: tuple[float, ...]
    postprocesses: tuple[str, ...]
    n_draws: int
    amount: float | None
    national_amount: float | None
    runs: tuple[Any, ...]
    entities: pd.DataFrame
    sizes: FloatArray
    truth: FloatArray

    @property
    def settings(self) -> list[tuple[float, str]]:
        """(epsilon, post-processing) of each run, epsilon major."""
        return [(e, p) for e in self.epsilons for p in self.postprocesses]

    @property
    def postprocess(self) -> str:
        """The post-processings, as the page names them."""
        return " | ".join(self.postprocesses)

    def _tag(self, e: float, post: str) -> str:
        """How a setting is named on the page: ``ε = 0.1`` (and the post-processing when
        the study compares several)."""
        return f"ε = {e:g}" if len(self.postprocesses) == 1 else f"ε = {e:g}, {post}"

    def tables(self) -> dict[str, pd.DataFrame]:
        """The study's tidy table by file name (as the command writes it): one row per
        entity and setting -- ``state`` (or ``nation``), ``mechanism``, ``epsilon``,
        ``postprocess``, the entities' columns, then the outcome statistics of
        :meth:`FairnessReport.to_frame`.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        frames = []
        for (e, post), run in zip(self.settings, self.runs, strict=True):
            frame = run.to_frame()
            for k, column in enumerate(self.entities.columns):
                frame.insert(k, column, self.entities[column].to_numpy())
            for k, (name, value) in enumerate(
                (("state", self.scope), ("mechanism", self.mechanism), ("epsilon", e),
                 ("postprocess", post))
            ):  # fmt: skip
                frame.insert(k, name, value)
            frames.append(frame)
        return {self._stem() + ".csv": pd.concat(frames, ignore_index=True)}

    def _stem(self) -> str:
        if self.problem == "title1":
            return f"title1_{self.scope}"
        return "section203" if self.scope == "nation" else f"section203_{self.scope}"

    @property
    def captions(self) -> dict[str, tuple[str, str, str]]:
        """(title, alt text, caption) of each figure, by name (or its first word); a
        caption that states a direction computes it from this study's runs."""
        out = dict(CAPTIONS)
        title, alt, caption = out["title1"]
        if len(self.postprocesses) > 1:
            alt = alt.replace("one series per epsilon", "one panel per post-processing, one "
                              "series per epsilon")  # fmt: skip
        out["title1"] = (title, alt, caption.replace("{direction}", self._direction()))
        return out

    def _direction(self) -> str:
        """Who gains and who loses in each run, from its own biases (Title I)."""
        if self.problem != "title1":
            return ""
        big = int(np.argmax(self.truth))
        small = self.truth < np.median(self.truth)
        parts = []
        for (e, post), run in zip(self.settings, self.runs, strict=True):
            b, half = float(run.bias[big]), 1.96 * float(run.bias_se[big])
            if abs(b) <= half:
                largest = f"the largest district shows no detectable bias (±${half:,.0f})"
            else:
                way = "gains" if b > 0 else "loses"
                largest = f"the largest district {way} ${abs(b):,.0f} (±${half:,.0f})"
            moved = float(run.bias[small].sum())
            way = "gain" if moved > 0 else "lose"
            parts.append(
                f"At {self._tag(e, post)}, {largest} and the districts below the median count "
                f"{way} ${abs(moved):,.0f} together. "
            )
        return "".join(parts)

    def figures(self) -> dict[str, Any]:
        """The figures by file stem (matplotlib Axes): Title I, the bias of every district's
        allotment against its size, one panel per post-processing side by side with one
        series per epsilon; Section 203, the decision errors against the margin, one
        figure per setting.

        Returns
        -------
        dict of str to matplotlib.axes.Axes
        """
        from postdp import plots

        if self.problem == "title1":
            import matplotlib.pyplot as plt

            n = len(self.postprocesses)
            fig, axes = plt.subplots(1, n, figsize=(6.4 * n, 4.8), sharey=True, squeeze=False)
            labels = [f"eps = {e:g}" for e in self.epsilons]
            for k, post in enumerate(self.postprocesses):
                runs = [r for (_, p), r in zip(self.settings, self.runs, strict=True) if p == post]
                ax = plots.plot_allotment_bias(runs, labels, self.sizes, ax=axes[0, k])
                ax.set_title(f"post-processing: {post}" if n > 1 else ax.get_title())
                ax.set_ylabel("bias of the allotment (USD)" if k == 0 else "")
            fig.tight_layout()
            return {f"title1_{self.scope}_bias": axes[0, 0]}
        return {
            f"{self._stem()}_eps{e:g}" + (f"_{post}" if len(self.postprocesses) > 1 else ""):
            plots.plot_decision_errors(self.sizes, run)
            for (e, post), run in zip(self.settings, self.runs, strict=True)
        }  # fmt: skip

    def headlines(self) -> list[Headline]:
        """The report's headline numbers per setting: the verdict on unfairness, then three
        numbers.

        Returns
        -------
        list of Headline
        """
        out: list[Headline] = []
        for (e, post), run in zip(self.settings, self.runs, strict=True):
            tag = self._tag(e, post)
            title1 = self.problem == "title1"
            verdict = run.alpha_verdict(absolute=not title1, unit="$" if title1 else "")
            word, detail = verdict.split(": ", 1)
            out.append(Headline(f"verdict ({tag})", word, detail))
            if title1:
                big = int(np.argmax(self.truth))
                out += title1_headlines(tag, run, str(self.entities["name"].iloc[big]), big)
            else:
                out += section203_headlines(tag, run, self.truth)
        return out

    def summary_lines(self) -> list[str]:
        """One line per setting, as the command prints them.

        Returns
        -------
        list of str
        """
        lines = []
        for (e, post), run in zip(self.settings, self.runs, strict=True):
            if self.problem == "title1":
                big = int(np.argmax(self.truth))
                lines.append(
                    f"Title I ({self.scope}, ${self.amount:,.0f}), {self.mechanism} eps = {e:g}, "
                    f"post-processing {post}, {self.n_draws} draws: alpha "
                    f"${run.alpha:,.0f}, cost of privacy ${run.cost_of_privacy():,.0f}, largest "
                    f"entity {self.entities['name'].iloc[big]!s} bias ${run.bias[big]:,.0f}"
                )
            else:
                lines.append(
                    f"Section 203 ({self.scope}), {self.mechanism} eps = {e:g}, post-processing "
                    f"{post}: {int(self.truth.sum())} true positives of {self.truth.size}; mean "
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
        rows = pd.concat(list(tables.values()), ignore_index=True)
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
                "per setting (ε and post-processing); the bias of each entity's outcome with "
                "its 95% interval."
            ),
            design={
                "problem": what,
                "entities": self.scope,
                "mechanism": f"{self.mechanism}, ε = {', '.join(f'{e:g}' for e in self.epsilons)}",
                "post-processing": ", ".join(self.postprocesses),
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
                    "One row per entity and setting (ε, post-processing), the largest |bias| "
                    "first: the true outcome, its bias with the 95% interval, the disparity "
                    "and the MAE.",
                    source=", ".join(tables),
                )
            ],
            figures=list(figures),
            notes=(
                "An entity's bias is the mean of its noisy outcome minus its true outcome over "
                "the simulated releases ([fioretto2021], Def. 2); α is the largest minus the "
                "smallest bias (Def. 3).",
                "α is a maximum over many Monte Carlo estimates, so simulation noise alone "
                "makes it positive: its card and the verdict compare it with the most that "
                "noise alone gives.",
            ),
            command=command,
        )


def fairness_study(
    problem: Literal["title1", "section203"],
    *,
    epsilon: float | Sequence[float],
    state: str | None = None,
    mechanism: Literal["laplace", "geometric"] = "geometric",
    postprocess: str | Sequence[str] = CLAMP.name,
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
    postprocess : str or sequence of str, default "clamp"
        Element-wise post-processing of the noisy counts before the decision
        (:class:`postdp.postprocess.ElementwiseChain`); several: one run per epsilon and
        post-processing, compared side by side.
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
    posts = (postprocess,) if isinstance(postprocess, str) else tuple(postprocess)
    if not posts or len(set(posts)) != len(posts):
        raise ValidationError(f"`postprocess` must name each post-processing once; got {posts}")
    for post in posts:
        ElementwiseChain(mechanisms[0], post)  # checked before any simulation
    us = load_title1()
    if state is not None and state not in set(us["state"]):
        raise ValidationError(f"`state` {state!r} is not a state of the data")
    scope = "nation" if state is None else state

    def ticker(label: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda done, total: progress(label, done, total))

    run: Callable[[Any, str, str], Any]
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

        def run(m: Any, post: str, label: str) -> Any:
            return decisions.allotment_fairness(
                x,
                w,
                m,
                amount=allotted,
                postprocess=post,
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

        def run(m: Any, post: str, label: str) -> Any:
            return decisions.decision_fairness(
                data,
                rule,
                m,
                postprocess=post,
                n_draws=n_draws,
                rng=rng,
                progress=ticker(label),
            )

    runs = tuple(
        run(m, post, f"{problem} eps={e:g} {post}")
        for e, m in zip(epsilons, mechanisms, strict=True)
        for post in posts
    )
    return FairnessStudy(
        problem,
        scope,
        mechanism,
        epsilons,
        posts,
        n_draws,
        allotted,
        amount if problem == "title1" else None,
        runs,
        entities,
        sizes,
        truth,
    )

"""What a report holds, and its rendering to one self-contained HTML file (Jinja2)."""

from __future__ import annotations

import base64
import datetime as _dt
import io
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Headline", "Report", "ReportFigure", "ReportTable", "format_value"]


@dataclass(frozen=True, slots=True)
class Headline:
    """One headline number of a report: what it is, its value, and how to read it.

    Parameters
    ----------
    label : str
        What the number is (e.g. ``"largest |bias|"``).
    value : str
        The number as shown, with its uncertainty where there is any.
    detail : str, default ""
        How to read it (the interval, the Monte Carlo floor, the entity it belongs to).

    Examples
    --------
    >>> Headline("alpha", "$1,234", "largest |bias| of an allotment").label
    'alpha'
    """

    label: str
    value: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ReportFigure:
    """A figure embedded in a report as PNG data, with its alternative text and caption.

    Parameters
    ----------
    title : str
    png : bytes
        The image, PNG encoded.
    alt : str
        What the figure shows, for readers who cannot see it.
    caption : str
        How to read it (what the error bars are, where the Monte Carlo floor lies).

    Examples
    --------
    >>> from postdp.plots import plot_wasserstein
    >>> fig = ReportFigure.from_axes(
    ...     plot_wasserstein([2, 4, 8], [1.0, 0.6, 0.4]), title="W1", alt="falls", caption=""
    ... )
    >>> fig.png[:4] == b"\\x89PNG"
    True
    """

    title: str
    png: bytes
    alt: str
    caption: str

    @classmethod
    def from_axes(cls, ax: Any, *, title: str, alt: str, caption: str) -> ReportFigure:
        """Draw the figure holding ``ax`` to PNG (and close it)."""
        from postdp.plots import save_figure

        buffer = io.BytesIO()
        save_figure(ax, buffer, format="png")
        return cls(title, buffer.getvalue(), alt, caption)

    @classmethod
    def drawn(
        cls, axes: dict[str, Any], captions: dict[str, tuple[str, str, str]]
    ) -> list[ReportFigure]:
        """Figures from named Axes (e.g. a study's ``figures()``), each with the (title, alt,
        caption) of its name in ``captions``, or of its name's first word (``errors`` for
        ``errors_by_size``)."""
        return [
            cls.from_axes(ax, title=t, alt=a, caption=c)
            for name, ax in axes.items()
            for t, a, c in [captions.get(name, captions.get(name.split("_")[0], ("", "", "")))]
        ]

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, title: str, alt: str, caption: str
    ) -> ReportFigure:
        """Read a PNG written earlier (e.g. into an audit folder)."""
        return cls(title, Path(path).read_bytes(), alt, caption)

    @property
    def data_uri(self) -> str:
        """The image as a ``data:`` address (no file, no network)."""
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True, slots=True)
class ReportTable:
    """A table of a report; sortable by any column and filterable in the browser.

    Parameters
    ----------
    title : str
    frame : pandas.DataFrame
        The rows, in the order they are first shown.
    caption : str, default ""
        What a row is and how to read the columns.
    max_rows : int, default 5000
        At most this many rows are embedded (the first ones); the caption then says how many
        were left out, and where the whole table is when ``source`` is given.
    source : str, default ""
        The file holding the whole table.

    Examples
    --------
    >>> import pandas as pd
    >>> t = ReportTable("Nodes", pd.DataFrame({"id": ["a", "b"], "bias": [0.5, -1.0]}))
    >>> t.rows()[1]
    [('b', 'b', False), ('-1', -1.0, True)]
    """

    title: str
    frame: Any
    caption: str = ""
    max_rows: int = 5000
    source: str = ""

    def columns(self) -> list[tuple[str, bool]]:
        """(name, numeric?) of each column."""
        import pandas as pd

        return [
            (str(c), bool(pd.api.types.is_numeric_dtype(self.frame[c]))) for c in self.frame.columns
        ]

    def rows(self) -> list[list[tuple[str, Any, bool]]]:
        """Each embedded row as (shown text, sort key, numeric?) triples; a missing number has
        the key ``""`` and sorts last."""
        numeric = [is_num for _, is_num in self.columns()]
        out = []
        for values in self.frame.head(self.max_rows).itertuples(index=False):
            row = []
            for value, is_num in zip(values, numeric, strict=True):
                if is_num:
                    number = float(value)
                    key = number if math.isfinite(number) else ""
                    row.append((format_value(number), key, True))
                else:
                    text = "" if value is None or value != value else str(value)
                    row.append((text, text, False))
            out.append(row)
        return out

    @property
    def left_out(self) -> int:
        """Rows not embedded (over ``max_rows``)."""
        return max(0, len(self.frame) - self.max_rows)


@dataclass(frozen=True, slots=True)
class Report:
    """A report of one run: design, privacy statement, headline numbers, tables, figures.

    Parameters
    ----------
    title : str
    summary : str
        One paragraph: what was run and what it found.
    design : mapping of str to str
        The design, item by item (mechanisms, budget per level, post-processing chain).
    privacy : str
        The privacy statement (or why the run published nothing).
    headline : sequence of Headline
    tables : sequence of ReportTable
    figures : sequence of ReportFigure
    notes : sequence of str
        How to read the report: Monte Carlo floors, what is approximate.
    command : str, default ""
        The command line that made it.

    Examples
    --------
    >>> import pandas as pd
    >>> r = Report(
    ...     "Audit",
    ...     "One node.",
    ...     {"mechanism": "laplace"},
    ...     "study path: nothing was published",
    ...     [Headline("bias", "0.1 ± 0.2")],
    ...     [ReportTable("Nodes", pd.DataFrame({"id": ["a"], "bias": [0.1]}))],
    ... )
    >>> html = r.to_html()
    >>> html.startswith("<!DOCTYPE html>") and "http" not in html.split("<body")[0]
    True
    """

    title: str
    summary: str
    design: Mapping[str, str]
    privacy: str
    headline: Sequence[Headline] = ()
    tables: Sequence[ReportTable] = ()
    figures: Sequence[ReportFigure] = ()
    notes: Sequence[str] = ()
    command: str = ""
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    )

    @property
    def verdicts(self) -> list[Headline]:
        """The headlines labelled ``verdict`` (or ``verdict (...)``, one per setting): the page
        shows them first, under its title, before anything else."""
        return [h for h in self.headline if _is_verdict(h)]

    @property
    def cards(self) -> list[Headline]:
        """The other headlines, shown as cards under the verdict."""
        return [h for h in self.headline if not _is_verdict(h)]

    def to_html(self) -> str:
        """The report as one HTML document (CSS, script and images inline)."""
        from importlib.metadata import version

        import jinja2

        env = jinja2.Environment(
            loader=jinja2.PackageLoader("postdp.report", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        template = env.get_template("report.html.j2")
        return template.render(report=self, version=version("postdp"), references=self.cited())

    def cited(self) -> list[Any]:
        """The papers the page cites as ``[key]`` (:data:`postdp.references.REFERENCES`), in
        the order first cited: the page lists them under References."""
        from postdp.references import REFERENCES

        parts = [self.title, self.summary, self.privacy, *self.design.values(), *self.notes]
        parts += [f"{h.label} {h.value} {h.detail}" for h in self.headline]
        parts += [f"{t.title} {t.caption}" for t in self.tables]
        parts += [f"{f.title} {f.caption}" for f in self.figures]
        keys = re.findall(r"\[([a-z]+[0-9]{4})\]", " ".join(parts))
        return [REFERENCES[k] for k in dict.fromkeys(keys) if k in REFERENCES]

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the HTML to ``path`` atomically (a temporary file, then a rename).

        Returns
        -------
        pathlib.Path
        """
        target = Path(path)
        html = self.to_html()
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(html, encoding="utf-8")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target


def _is_verdict(headline: Headline) -> bool:
    return headline.label == "verdict" or headline.label.startswith("verdict (")


def format_value(value: float) -> str:
    """A number as a reader wants it: 4 significant digits, thousands separated.

    Examples
    --------
    >>> format_value(1234567.891), format_value(0.000123456), format_value(2.0)
    ('1,234,568', '0.0001235', '2')
    """
    if not math.isfinite(value):
        return "" if math.isnan(value) else ("∞" if value > 0 else "−∞")
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"

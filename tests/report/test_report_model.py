"""The report model: escaping, self-containment, row limits, number formats, atomic write."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy, Laplace
from postdp.analysis import ReleaseDesign, simulate
from postdp.errors import ValidationError
from postdp.report import (
    Headline,
    Report,
    ReportFigure,
    ReportTable,
    audit_report,
    budget_statement,
    format_value,
    size_bins,
)

pytest.importorskip("jinja2")


def _report(**changes):
    frame = pd.DataFrame({"id": ["<b>x</b>", "y", "z"], "bias": [0.5, np.nan, -2.0]})
    base = {
        "title": "T <script>alert(1)</script>",
        "summary": "s",
        "design": {"mechanism": "laplace & co"},
        "privacy": "p",
        "headline": [Headline("h", "1 ± 2", "d")],
        "tables": [ReportTable("Rows", frame, "c", max_rows=2, source="all.csv")],
    }
    base.update(changes)
    return Report(**base)


def test_text_is_escaped_and_nothing_is_fetched():
    html = _report().to_html()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "laplace &amp; co" in html
    # no address outside the file: no src/href to http(s), no @import, no CDN
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_rows_beyond_the_limit_are_named_not_silently_dropped():
    html = _report().to_html()
    assert "Showing the first 2 of 3 rows" in html and "all.csv" in html
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    assert body.count("<tr>") == 2
    # the missing number is an empty cell with an empty sort key (sorted last by the script)
    assert 'data-v=""></td>' in body


def test_figures_are_embedded_as_png_data():
    pytest.importorskip("matplotlib")
    from postdp.plots import plot_wasserstein

    fig = ReportFigure.from_axes(
        plot_wasserstein([2, 4], [1.0, 0.5]), title="W", alt="what it shows", caption="how"
    )
    html = _report(figures=[fig]).to_html()
    assert 'src="data:image/png;base64,' in html and 'alt="what it shows"' in html


def test_write_is_atomic_and_leaves_no_temporary(tmp_path):
    path = _report().write(tmp_path / "r.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.0, "0"), (-3.0, "-3"), (12345.6, "12,346"), (0.012345, "0.01235"), (np.nan, "")],
)
def test_format_value(value, shown):
    assert format_value(value) == shown


def test_size_bins_average_the_nodes_of_each_bin():
    h = Hierarchy.from_parents(
        ["T", "a", "b", "c"], [None, "T", "T", "T"], [12_600, 100, 500, 12_000]
    )
    design = ReleaseDesign(h, Laplace(1.0), "project")
    res = simulate(design, n_draws=300, rng=3)
    bins = size_bins(res, h)
    small = bins[(bins["level"] == 1) & (bins["size"] == "0–999")].iloc[0]
    assert small["nodes"] == 2
    assert small["mae"] == pytest.approx(res.mae[1:3].mean())
    assert small["mean_bias"] == pytest.approx(res.bias[1:3].mean())
    se = np.sqrt((res.bias_se[1:3] ** 2).sum()) / 2
    assert small["mean_bias_hi"] - small["mean_bias"] == pytest.approx(1.96 * se)


def test_audit_report_puts_the_largest_bias_first():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [2, 0, 2])
    design = ReleaseDesign(h, Laplace(1.0), "project-nonneg")
    res = simulate(design, n_draws=2000, rng=0)
    rep = audit_report(res, design, figures=[])
    nodes = rep.tables[1].frame
    z = np.abs(res.bias) / res.bias_se
    assert nodes["id"].iloc[0] == h.ids[int(np.argmax(z))]
    assert rep.headline[2].label == "largest |bias| / SE"
    assert rep.headline[2].value.endswith(f"at {h.ids[int(np.argmax(z))]}")
    # (P+) with counts at 0 is biased upward: the verdict says so, naming the worst count
    assert rep.headline[0].label == "verdict" and rep.headline[0].value == "systematic bias"
    assert f"worst: {h.ids[int(np.argmax(z))]}" in rep.headline[0].detail
    assert "Study run" in rep.privacy and "epsilon = 2" in rep.privacy


def test_budget_statement_converts_zcdp_and_names_invariants():
    from postdp.mechanisms import Budget

    text = budget_statement(Budget.zcdp(0.5), published=True, public=["US"])
    assert "δ = 1e-10" in text and "US" in text and text.startswith("Released")


def test_audit_report_shows_names_beside_ids():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [2, 0, 2])
    design = ReleaseDesign(h, Laplace(1.0), "project-nonneg")
    res = simulate(design, n_draws=2000, rng=0)
    names = ["Total", "Alpha County", "Beta County"]
    rep = audit_report(res, design, figures=[], names=names)
    nodes = rep.tables[1].frame
    assert nodes.columns[:3].tolist() == ["id", "name", "level"]
    assert dict(zip(nodes["id"], nodes["name"], strict=True))["a"] == "Alpha County"
    z = np.abs(res.bias) / res.bias_se
    worst = int(np.argmax(z))
    assert rep.headline[2].value.endswith(f"at {names[worst]} ({h.ids[worst]})")
    with pytest.raises(ValidationError, match="one name per node"):
        audit_report(res, design, figures=[], names=names[:2])


def test_the_theorem_12_curve_is_a_reference_unless_the_design_meets_it():
    """Seed 000 Thm 12 is (P_S): each family projected on its public parent total. An audit
    of (P+) draws it dashed as a reference; (P) with every parent public draws it as theory."""
    import postdp

    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    labels = {}
    for steps, public in (("project-nonneg", None), ("project", "root")):
        audited = postdp.audit(ReleaseDesign(h, Laplace(1.0), steps, public=public), n_draws=200)
        ax = audited.figures()["wasserstein"]
        labels[steps] = [line.get_label() for line in ax.get_lines()]
    assert labels["project-nonneg"][0].startswith("reference: (P_S) with the parent public")
    assert labels["project"] == ["(P_S) theory, Thm 12"]

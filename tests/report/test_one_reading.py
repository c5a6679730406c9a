"""Issue 42, item 5: a report says one thing. Its verdict comes first; the verdict and the
card that counts significant biases report one number from one test; levels and geounits
are named; every error has its unit; captions describe the figure drawn; the fairness
verdict is computed from the numbers of the card beside it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import postdp
from postdp import Gaussian, Hierarchy, Laplace
from postdp.analysis import ReleaseDesign, simulate
from postdp.report import Headline, Report, audit_report

pytest.importorskip("jinja2")


def _small_county_design() -> ReleaseDesign:
    """The nation, Georgia and three of its counties (Monroe, 13207, among them): Census
    GEOIDs, no names given."""
    ids = ["US", "13", "13207", "13001", "13003"]
    parents = [None, "US", "13", "13", "13"]
    h = Hierarchy.from_parents(ids, parents, [39, 39, 3, 20, 16])
    return ReleaseDesign(h, Laplace(1.0), "project-nonneg")


def _count(text: str) -> tuple[int, int]:
    found = re.search(r"([0-9,]+) of ([0-9,]+)", text)
    assert found, text
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def test_the_verdict_is_the_first_thing_under_the_title():
    """Whatever order the headlines come in, the page shows the verdicts (one per setting
    where a study has several) under its title, before the cards, the design and tables."""
    rep = Report(
        "A study",
        "Summary.",
        {"design": "x"},
        "privacy",
        [Headline("a number", "1"), Headline("verdict (ε = 1)", "fine", "because")],
        [],
    )
    html = rep.to_html()
    verdict = html.index('id="verdict"')
    assert html.index("<h1>") < verdict < html.index('class="meta"')
    assert verdict < html.index('id="headline"') < html.index('id="design"')
    assert [h.label for h in rep.cards] == ["a number"]
    assert html.count(">fine<") == 1  # shown once, in the verdict box, not again as a card


def test_the_verdict_and_the_count_card_state_one_count_of_one_test():
    """Few draws: the Student t point (2.09 at 19 degrees of freedom) and 1.96 flag
    different counts; the verdict, the card and the node table's ``significant`` column all
    count the t test's, and the page states the threshold once."""
    design = _small_county_design()
    res = simulate(design, n_draws=20, rng=3)
    verdict = res.bias_verdict()
    rep = audit_report(res, design, figures=[])
    first, card = rep.headline[0], rep.headline[1]
    assert first.label == "verdict" and card.label == "nodes with a significant bias"
    assert _count(first.detail) == _count(card.value) == (verdict.flagged, verdict.tested)
    nodes = rep.tables[1].frame
    assert int((nodes["significant"] == "yes").sum()) == verdict.flagged
    z = np.abs(res.bias) / np.where(res.bias_se > 0, res.bias_se, np.inf)
    flagged = nodes.set_index("id")["significant"].eq("yes")
    assert (flagged.loc[list(res.ids)].to_numpy() == (z > verdict.critical)).all()
    html = rep.to_html()
    assert html.count("|bias|/SE &gt;") == 1 and "|bias| &gt; 1.96 SE" not in html
    assert f"{verdict.critical:.3g}" in card.detail


def test_a_table_audit_counts_significant_cells_once():
    """The table audit's verdict and its card: one number, one reading, as the cells
    table's ``significant`` column counts."""
    from postdp.data import synthetic_table
    from postdp.tables import Measurement, Query, Workload

    table = synthetic_table((2, 3), leaf_mean=30, rng=0)
    work = Workload(
        [Measurement(d, Query.detailed(table.categories), Gaussian(rho=1)) for d in range(3)]
    )
    audited = postdp.audit(ReleaseDesign(table, work, "project-nonneg"), n_draws=20, rng=0)
    rep = audited.report(figures=[])
    verdict = audited.result.bias_verdict()
    first, card = rep.headline[0], rep.headline[1]
    assert card.label == "cells with a significant bias"
    assert _count(first.detail) == _count(card.value) == (verdict.flagged, verdict.tested)
    reading = "more than chance" if verdict.detected else "no more than chance"
    assert first.value == ("systematic bias" if verdict.detected else "no bias detected")
    assert reading in card.detail
    cells = next(t for t in rep.tables if t.title == "Cells").frame
    assert int((cells["significant"] == "yes").sum()) == verdict.flagged
    assert rep.to_html().count("|bias|/SE &gt;") == 1


def test_levels_and_geounits_are_named_with_the_state_of_a_county():
    design = _small_county_design()
    rep = audit_report(simulate(design, n_draws=50, rng=0), design, figures=[])
    nodes = rep.tables[1].frame.set_index("id")
    assert nodes.loc["13207", "name"] == "Monroe County, Georgia"
    assert nodes.loc["13", "name"] == "Georgia" and nodes.loc["US", "level"] == "US"
    assert nodes.loc["13207", "level"] == "County" and nodes.loc["13", "level"] == "State"
    assert set(rep.tables[0].frame["level"]) <= {"US", "State", "County"}
    # names given without their state (the bundled 2010 file's) get it from the hierarchy
    given = ["United States", "Georgia", "Monroe County", "Appling County", "Atkinson County"]
    rep = audit_report(simulate(design, n_draws=50, rng=0), design, figures=[], names=given)
    names = rep.tables[1].frame.set_index("id")["name"]
    assert names["13207"] == "Monroe County, Georgia" and names["13"] == "Georgia"


def test_every_error_on_an_audit_page_has_its_unit():
    design = _small_county_design()
    rep = audit_report(simulate(design, n_draws=50, rng=0), design, figures=[])
    cards = {h.label: h for h in rep.headline}
    assert "persons at" in cards["largest |bias| / SE"].value
    assert cards["Monte Carlo floor of a bias"].value.endswith(" persons")
    assert cards["mean MSE"].value.endswith(" persons²")
    assert "persons²" in rep.tables[1].caption and "persons" in rep.tables[0].caption


@pytest.mark.parametrize("kept", [1, 3])
def test_the_residual_caption_says_what_its_figure_shows(kept):
    """The residuals figure is one panel holding every kept node: its caption says so and
    names them (issue 42: "Each panel is one node's error" over a one-panel figure)."""
    pytest.importorskip("matplotlib")
    design = _small_county_design()
    h = design.hierarchy
    entities = [str(i) for i in h.ids[h.leaves][:kept]]
    audited = postdp.audit(design, n_draws=50, entities=entities, shifts=[0, 5], rng=0)
    figure = audited.figures()["residuals"]
    assert len(figure.figure.axes) == 1
    caption = audited.captions["residuals"][2]
    assert caption.startswith("One panel:") and "Each panel" not in caption
    what = "node Monroe County, Georgia" if kept == 1 else f"{kept} nodes ("
    assert what in caption
    series = audited.captions["bias_by_count"][2]
    assert "2 series, one per shift of every leaf's count (0, 5)" in series
    assert len(audited.figures()["bias_by_count"].get_legend().get_texts()) == 2


def test_the_fairness_verdict_is_computed_from_its_card():
    """The α card shows the noise bound the verdict compares α with, and reads it the same
    way (issue 42: "within simulation noise" beside a card saying the opposite)."""
    from postdp.report import fairness_study

    study = fairness_study("title1", state="NY", epsilon=[0.1, 1], n_draws=100, rng=0)
    cards = study.headlines()
    for k, run in enumerate(study.runs):
        tag = study._tag(*study.settings[k])
        verdict = next(h for h in cards if h.label == f"verdict ({tag})")
        alpha = next(h for h in cards if h.label == f"fairness bound α ({tag})")
        bound = f"${run.alpha_noise_bound():,.0f}"
        assert bound in verdict.detail and bound in alpha.detail
        assert alpha.value in verdict.detail
        unfair = run.alpha > run.alpha_noise_bound()
        assert verdict.value == ("unfair" if unfair else "no unfairness detected")
        assert ("above it: unfair" if unfair else "within it: no unfairness") in alpha.detail
        assert "median SE" not in alpha.detail


def test_the_census_comparison_page_puts_its_verdict_first():
    from postdp.report import compare_estimators
    from postdp.tables import Table, pl94_schema

    s = pl94_schema()
    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    cells = np.zeros((2, s.size), dtype=int)
    cells[:, 0] = [20, 5]
    t = Table(geo, s.categories(), cells)
    good = t.detailed() + 0.0
    bad = good.copy()
    bad[1:, 0] += 3
    html = compare_estimators({"good": good, "bad": bad}, t, schema=s, queries=["total"])
    html = html.report().to_html()
    assert html.index('id="verdict"') < html.index('id="design"')
    assert "good most accurate" in html.split('id="verdict"')[1].split("</section>")[0]


def test_the_frontier_table_of_a_plan_report_names_levels_and_budgets(tmp_path, monkeypatch):
    from postdp.cli import main

    monkeypatch.chdir(tmp_path)
    args = ["plan", "--total", "1", "--weights", "1,1,2", "--frontier", "0.5,1"]
    assert main([*args, "--frontier-output", "f.csv", "--report", "p.html"]) == 0
    frontier = pd.read_csv(tmp_path / "f.csv")
    assert [c for c in frontier.columns if c[-1].isdigit()] == ["budget_0", "budget_1", "budget_2"]
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "share_" not in html and "persons²" in html
    assert ">County<" in html  # the plan table's level column, by name

"""Estimators side by side in the Census Bureau's yardsticks (issue 25): topdown, the BLUE
and BLUE-then-restore on the same measurements of a small 2020-preset state; the verdict
follows the pooled MAE of total by level, says 'mixed' when no estimator wins every level,
and the page carries the verdict, both tables and the figure."""

from __future__ import annotations

import numpy as np
import pytest

import postdp
from postdp.errors import ValidationError
from postdp.report import compare_estimators
from postdp.tables import measure, pl94_schema
from tests.tables._reference import small_pl94_state

pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

LEVELS = ["US", "State", "County", "Tract", "Block group", "Block"]


def test_three_estimators_of_one_release_side_by_side():
    table, work = small_pl94_state(3, people=60)
    draws = measure(table, work, secure=False, rng=11, size=2)
    released = {
        "topdown": postdp.top_down(draws),
        "blue": postdp.project(draws, method="project"),
        "blue-restore": postdp.round(
            postdp.project(draws, nonneg=True, method="blue-restore"), table, rng=1
        ),
    }
    c = compare_estimators(
        released,
        table,
        schema=pl94_schema(),
        levels=LEVELS,
        reliability_level=4,
        queries=["total", "race alone", "hhgq"],
    )
    assert c.estimators == list(released) and c.units == "Block group"
    mae = c.total_mae()
    assert list(mae.index) == LEVELS and list(mae.columns) == list(released)
    # pooled over sizes = the MAE of the level's totals computed directly
    geo = table.geography
    for name, values in released.items():
        for d, level in enumerate(LEVELS):
            nodes = geo.levels[d]
            err = values[:, nodes].sum(axis=-1) - table.detailed()[nodes].sum(axis=-1)
            assert mae.loc[level, name] == pytest.approx(np.abs(err).mean(), rel=1e-12, abs=1e-9)
    verdict = c.verdict()
    below = mae.iloc[1:]
    below = below[(below.max(axis=1) - below.min(axis=1)) > 1e-9]
    winners = set(below.idxmin(axis=1))
    assert (
        verdict.value.startswith(winners.pop()) if len(winners) == 1 else "mixed" in verdict.value
    )
    page = c.report(command="python bench")
    shown = {str(r).split(" (")[0] for r in c.reliability.values()}
    reliability = page.headline[1]
    assert reliability.value == (shown.pop() if len(shown) == 1 else reliability.value)
    assert "people" in reliability.value or "no population" in reliability.value
    html = page.to_html()
    assert "verdict" in html and "Reliability by 50-person bin (Block group)" in html
    assert "Metrics by query, level and size" in html and html.count("data:image/png") == 1


def test_the_verdict_says_mixed_when_no_estimator_wins_every_level():
    table, _ = small_pl94_state(4)
    truth = table.detailed().astype(float)
    geo = table.geography
    a, b = truth.copy(), truth.copy()
    a[geo.levels[2], 0] += 2  # a worse at counties
    b[geo.levels[5], 0] += 2  # b worse at blocks
    c = compare_estimators({"a": a, "b": b}, table, schema=pl94_schema(), queries=["total"])
    assert c.verdict().value == "mixed: no estimator best at every level"
    assert "2: a 2 persons, b 0 persons" in c.verdict().detail  # with its unit (issue 42)
    same = compare_estimators(
        {"a": truth, "b": truth}, table, schema=pl94_schema(), queries=["total"]
    )
    assert same.verdict().value == "no difference" and not same.reliability
    with pytest.raises(ValidationError, match="at least one"):
        compare_estimators({}, table, schema=pl94_schema())

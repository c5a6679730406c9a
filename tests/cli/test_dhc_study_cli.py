"""``postdp study --strategy dhc-2020-persons``: the accuracy study applied to the DHC
persons design (issue 46, part 3), each draw held to a PL94 release of its own of the same
persons, scored on the DHC's marginals at its eight levels."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postdp.analysis import DHC_QUERIES, HeldRelease, accuracy_study
from postdp.cli import main
from postdp.data import synthetic_dhc_population
from postdp.nmf import synthetic_population
from postdp.tables import load_strategy
from postdp.tables.strategies import DHC_LEVELS

pytest.importorskip("jinja2")

SMALL = ["--synthetic", "11", "--population-scale", "0.0002", "--quiet"]
DHC = ["--strategy", "dhc-2020-persons"]

pytestmark = pytest.mark.slow


def test_a_dhc_study_is_the_library_study_with_a_pl94_release_per_draw(
    tmp_path, monkeypatch, capsys
):
    """The command writes the library's study (``accuracy_study`` held to a
    ``HeldRelease`` of the same persons, the nursing zero held): the same per-draw rows,
    the DHC's queries at its eight levels, the total exact at the top (the invariant), the
    page headed by single years of age by sex, the manifest naming the design."""
    monkeypatch.chdir(tmp_path)
    args = ["study", *SMALL, *DHC, "--draws", "2", "--seed", "4", "--output-dir", "st"]
    assert main([*args, "--report", "st.html"]) == 0
    out = capsys.readouterr().out
    assert "studied topdown-2020 over 2 draws" in out
    written = pd.read_csv(tmp_path / "st" / "per_draw.csv", dtype={"level": str})
    assert set(written["query"]) == set(DHC_QUERIES)
    assert list(dict.fromkeys(written["level"])) == list(DHC_LEVELS)
    top = written[(written["query"] == "total") & written["level"].isin(["US", "State"])]
    assert (top["mae"] == 0).all()
    manifest = json.loads((tmp_path / "st" / "postdp-manifest.json").read_text())
    assert manifest["strategy"] == "dhc-2020-persons"
    assert manifest["estimators"] == ["topdown-2020"]
    page = (tmp_path / "st.html").read_text()
    assert "MAE of sex * age by level" in page and "PL94 histograms held" in page
    truth = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    strategy = load_strategy("dhc-2020-persons")
    pl94 = load_strategy("pl94-2020-persons").tabulate(
        synthetic_population(["11"], seed=0, scale=0.0002)
    )
    study = accuracy_study(
        truth, strategy.workload(truth), ["topdown-2020"], schema=strategy.schema, draws=2,
        rng=4, levels=list(DHC_LEVELS), held=HeldRelease(pl94),
    )  # fmt: skip
    np.testing.assert_array_equal(written["mae"], study.per_draw["mae"])
    np.testing.assert_array_equal(written["counts"], study.per_draw["counts"])

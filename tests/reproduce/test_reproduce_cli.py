"""``postdp reproduce``: list, one name, all (fast), bad names; every printed number of the
seeds agrees within its stated tolerance or is explained, and every claim holds."""

from __future__ import annotations

import pandas as pd
import pytest

from postdp.cli import main
from postdp.reproduce import reproductions

pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")
pytest.importorskip("sklearn")
pytestmark = pytest.mark.statistical


def test_list_prints_one_name_per_line(capsys):
    assert main(["reproduce", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(reproductions())
    assert all(len(line.split(None, 1)) == 2 for line in lines)  # name, then what
    expected = {"seed000-fig1", "seed000-fig4", "seed000-fig5", "seed000-fig6", "seed000-states"}
    expected |= {f"seed002-fig{k}" for k in (2, 3, 4, 5, 6, 7, 10)} | {"seed002-fig8-9"}
    expected |= {"seed003-table2", "seed003-table3", "seed003-fig2"}
    expected |= {"seed004-bias", "seed004-alpha"}
    assert set(reproductions()) == expected


def test_all_fast_agrees_with_the_seeds(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["reproduce", "all", "--fast", "--quiet", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    frame = pd.read_csv(out / "comparison.csv", keep_default_na=False)
    assert set(frame["item"]) == set(reproductions())
    assert not frame["status"].isin(["differs", "fails"]).any(), frame[
        frame["status"].isin(["differs", "fails"])
    ].to_string()
    explained = frame[frame["status"] == "differs (explained)"]
    assert set(explained["item"]) == {"seed000-states", "seed003-table2"}
    # the numbers the SPEC names, within their tolerances
    rows = frame.set_index("quantity")
    for key, value in (
        ("Arizona (15 counties): Var of the (P_S) error, theory", 186.67),
        ("Texas (254 counties): Var of the (P_S) error, theory", 199.21),
        ("α*/b by minimising the worst-case bias", 0.3517),
    ):
        row = rows.loc[key]
        assert row["status"] == "agrees" and abs(float(row["reproduced"]) - value) <= float(
            row["tolerance"]
        )
    # every number is printed next to the seed's value and the difference
    assert "reproduced 186.667, seed 186.67, difference -0.00333" in printed
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 15 and (out / "reproduce.html").stat().st_size > 100_000
    html = (out / "reproduce.html").read_text(encoding="utf-8")
    assert html.count("data:image/png;base64,") == 15 and "Harding" in html
    # the verdict in words: two reproductions differ for reasons the notes give
    assert "reproduced, with explained differences" in html


def test_the_verdict_names_what_is_not_reproduced():
    from postdp.reproduce import Comparison, Reproduction, reproduction_report

    made = {  # one Comparison of each status, built as the reproductions build them
        "agrees": lambda q: Comparison(q, 1.0, 1.0, tolerance=0.1),
        "differs": lambda q: Comparison(q, 2.0, 1.0, tolerance=0.1),
        "explained": lambda q: Comparison(q, 2.0, 1.0, tolerance=0.1, explained=True),
        "holds": lambda q: Comparison(q, 1.0, "a claim", holds=True),
        "fails": lambda q: Comparison(q, 1.0, "a claim", holds=False),
    }

    def page(*statuses):
        rows = [made[status](f"quantity {k}") for k, status in enumerate(statuses)]
        return reproduction_report([Reproduction("seed-x", rows=rows)]).headline[0]

    first = page("agrees", "holds")
    assert (first.label, first.value) == ("verdict", "reproduced")
    assert "all 2 checked rows" in first.detail
    bad = page("agrees", "differs", "fails")
    assert bad.value == "not reproduced" and "2 of 3 rows" in bad.detail
    assert "seed-x: quantity 1" in bad.detail and "seed-x: quantity 2" in bad.detail
    mixed = page("agrees", "explained", "holds")
    assert mixed.value == "reproduced, with explained differences"
    assert "2 rows agree or hold; 1 differ" in mixed.detail


def test_one_name_and_bad_names(tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["reproduce", "seed004-alpha", "--output-dir", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "comparison.csv",
        "postdp-manifest.json",
        "reproduce.html",
        "seed004_alpha.png",
    ]
    capsys.readouterr()
    assert main(["reproduce", "seed009-fig1", "--output-dir", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'seed009-fig1': not a reproduction" in err
    assert not (tmp_path / "x").exists()
    assert main(["reproduce", "seed004-alpha", "--output-dir", str(out)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err

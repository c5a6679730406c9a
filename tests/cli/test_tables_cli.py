"""``postdp release --table``: bundled and user tables, workloads, checks before any draw."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from postdp.cli import main
from postdp.postprocess import estimator

WIDE = (
    "id,parent,T,x,y,y1,y2\n"
    "S,,,,,,\n"
    "a,S,,,,,\n"
    "b,S,31,17,14,9,5\n"
    "a1,a,29,13,16,8,8\n"
    "a2,a,43,21,22,11,11\n"
)
TREE = "code,parent,label\nT,,Total\nx,T,Ex\ny,T,Why\ny1,y,Why one\ny2,y,Why two\n"


def _inputs(folder):
    (folder / "wide.csv").write_text(WIDE)
    (folder / "tree.csv").write_text(TREE)


def test_bundled_county_table_long_form(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["release", "--table", "p1-us-county", "--study", "--seed", "3", "-o", "us.csv"]
    assert main([*args, "--postprocess", "project", "--public", "root"]) == 0
    out = capsys.readouterr().out
    assert "NOT a private release" in out and "epsilon = 3 (pure DP)" in out
    frame = pd.read_csv(tmp_path / "us.csv", dtype={"geo_id": str, "parent": str})
    assert {"geo_id", "parent", "category", "noisy_count", "released_count", "path"} <= set(
        frame.columns
    )
    assert len(frame) == 3274 * 71 and set(frame["path"]) == {"study"}
    us = frame[(frame["geo_id"] == "US") & (frame["category"] == "P1_001N")].iloc[0]
    assert us["released_count"] == pytest.approx(334_735_155, abs=1e-6)  # --public root
    assert us["noisy_count"] == 334_735_155  # an invariant is published as it is
    county = frame[(frame["geo_id"] == "42001") & (frame["category"] == "P1_003N")].iloc[0]
    assert county["parent"] == "42" and not np.isnan(county["noisy_count"])
    # released counts add up across the geography and the categories
    wide = frame.pivot(index="geo_id", columns="category", values="released_count")
    counties = wide.loc[[g for g in wide.index if len(g) == 5 and g.startswith("42")]]
    assert counties["P1_009N"].sum() == pytest.approx(wide.loc["42", "P1_009N"], rel=1e-9)
    row = wide.loc["42001"]
    assert row["P1_002N"] + row["P1_009N"] == pytest.approx(row["P1_001N"], rel=1e-9)
    again = main([*args, "--overwrite", "--postprocess", "project", "--public", "root"])
    assert again == 0
    assert (
        pd.read_csv(tmp_path / "us.csv", dtype=str)["released_count"]
        .astype(float)
        .equals(frame["released_count"])
    )


def test_user_table_with_a_design_and_wide_form(tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    design = {
        "measurements": [
            {"level": 0, "query": "total", "public": True},
            {"level": 1, "query": ["x", "y"], "mechanism": "gaussian", "rho": 0.5},
            {"level": 2, "query": "detailed", "mechanism": "laplace", "epsilon": 1.0},
            {"level": 1, "query": "detailed", "mechanism": "geometric", "epsilon": 0.5},
        ]
    }
    (tmp_path / "design.json").write_text(json.dumps(design))
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--design"]
    args += ["design.json", "--study", "--seed", "1", "--postprocess", "project"]
    assert main([*args, "--format", "wide", "-o", "w.csv"]) == 0
    assert "epsilon = 1.5 (pure DP) + rho = 0.5 (zCDP)" in capsys.readouterr().out
    wide = pd.read_csv(tmp_path / "w.csv").set_index("geo_id")
    assert list(wide.columns[:6]) == ["parent", "T", "x", "y", "y1", "y2"]
    assert wide.loc["S", "T"] == pytest.approx(103, abs=1e-6)
    assert wide.loc["a", "y"] == pytest.approx(wide.loc["a1", "y"] + wide.loc["a2", "y"])
    assert main([*args, "-o", "long.csv"]) == 0
    long = pd.read_csv(tmp_path / "long.csv")
    measured = long[long["noisy_count"].notna()]
    # level 1 measured x, y (a query) and the detailed cells x, y1, y2; level 2 detailed
    assert set(measured.loc[measured["geo_id"] == "a", "category"]) == {"x", "y", "y1", "y2"}
    assert set(measured.loc[measured["geo_id"] == "S", "category"]) == {"T"}


BAD = [
    (["--table", "p1-nowhere"], "--table"),
    (["--table", "p1-us-county", "--input", "wide.csv"], "--table p1-us-county: give either"),
    (["--categories", "tree.csv"], "needs the wide table as --input"),
    (
        ["--table", "p1-us-county", "--postprocess", "clamp"],
        "a table post-processing is one of project, project-nonneg, topdown, blue-restore",
    ),
    (["--table", "p1-us-county", "--public", "42"], "--public '42': for a table"),
    (
        ["--table", "p1-us-county", "--postprocess", "topdown-2020"],
        "--postprocess 'topdown-2020': topdown-2020 needs a schema table measured by marginals",
    ),
    (
        ["--table", "p1-us-county", "--postprocess", "blue-restore,round"],
        "--postprocess 'blue-restore,round': blue-restore needs a schema table",
    ),
    (
        ["--table", "p1-us-county", "--postprocess", "topdown-2020,round"],
        "--postprocess 'topdown-2020,round': 'topdown-2020' is already integral",
    ),
    (["--table", "p1-us-county", "--epsilon", "1,2"], "--epsilon '1,2': needs one value"),
    (["--table", "p1-us-county", "--keep", "name"], "--keep: applies to hierarchy releases"),
    (["--table", "p1-us-county", "-o", "existing.csv"], "-o 'existing.csv': already exists"),
    (["--table", "p1-us-county", "--design", "nojson.json"], "not JSON"),
    (["--table", "p1-us-county", "--design", "level.json"], "'level' must be an integer"),
    (["--table", "p1-us-county", "--design", "key.json"], "unknown keys colour"),
    (["--table", "p1-us-county", "--design", "code.json"], "unknown category 'P1_999N'"),
    (["--table", "p1-us-county", "--design", "overlap.json"], "share detailed cells"),
    (["--table", "p1-us-county", "--design", "noeps.json"], "needs a number 'epsilon'"),
    (["--table", "p1-us-county", "--design", "twice.json"], "measured twice at level 2"),
    (
        ["--table", "p1-us-county", "--design", "weak.json", "--postprocess", "project"],
        "do not identify every detailed cell",
    ),
    (["--input", "wide.csv", "--categories", "badtree.csv"], "--categories"),
    (["--input", "off.csv", "--categories", "tree.csv"], "first at geounit 'b', category 'T'"),
    # a mistyped category code (y3 for y2) would drop its people from every total
    (["--input", "typo.csv", "--categories", "tree.csv"], "column 'y3' is not a category"),
    (
        ["--input", "named.csv", "--categories", "tree.csv", "--ignore-columns", "nam"],
        "--ignore-columns 'nam': no column 'nam'",
    ),
    (["--table", "p1-us-county", "--ignore-columns", "name"], "--ignore-columns 'name': only"),
    # one limit with hierarchies, checked on input (rounding needs fractions below 2**52)
    (["--input", "big.csv", "--categories", "tree.csv"], "category 'T' is 2**52 (about 4.5e15)"),
    (["--input", "bigsum.csv", "--categories", "tree.csv"], "add up to 2**52 (about 4.5e15)"),
]


def _bad_designs(folder):
    designs = {
        "level.json": [{"level": 9, "query": "detailed", "epsilon": 1}],
        "key.json": [{"level": 1, "query": "detailed", "epsilon": 1, "colour": "red"}],
        "code.json": [{"level": 1, "query": ["P1_999N"], "epsilon": 1}],
        "overlap.json": [{"level": 1, "query": ["P1_001N", "P1_003N"], "epsilon": 1}],
        "noeps.json": [{"level": 1, "query": "detailed", "rho": 1}],
        "twice.json": [{"level": 2, "query": "detailed", "epsilon": 1}] * 2,
        "weak.json": [{"level": 2, "query": "total", "epsilon": 1}],
    }
    for name, items in designs.items():
        (folder / name).write_text(json.dumps({"measurements": items}))
    (folder / "nojson.json").write_text("{measurements: [")
    (folder / "existing.csv").write_text("an earlier release\n")
    (folder / "badtree.csv").write_text("code,parent\nT,\nx,T\nx,T\n")
    (folder / "off.csv").write_text(WIDE.replace("b,S,31,", "b,S,32,"))
    (folder / "typo.csv").write_text(WIDE.replace("y1,y2", "y1,y3"))
    big = 2**52
    (folder / "big.csv").write_text(WIDE.replace("b,S,31,17,", f"b,S,{big + 14},{big},"))
    half = 2**51  # every cell below the limit, their sum at it
    rows = [f"b,S,{half},{half},0,0,0", f"a1,a,{half},{half},0,0,0", "a2,a,0,0,0,0,0"]
    (folder / "bigsum.csv").write_text("\n".join([*WIDE.split()[:3], *rows]) + "\n")
    named = [line + ("," + ("name" if i == 0 else f"n{i}")) for i, line in enumerate(WIDE.split())]
    (folder / "named.csv").write_text("\n".join(named) + "\n")


@pytest.mark.parametrize(("extra", "message"), BAD, ids=lambda v: str(v)[:40])
def test_bad_table_inputs_fail_before_any_draw(extra, message, spy, tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    _bad_designs(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(
        ["release", *extra, "--study", "--seed", "1", "-o", "existing.csv"]
        if "-o" not in extra and "existing" in message
        else ["release", *extra, "--study", "--seed", "1", "-o", "new.csv"]
        if "-o" not in extra
        else ["release", *extra, "--study", "--seed", "1"]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.count("\n") == 1
    assert spy == []
    assert not (tmp_path / "new.csv").exists()
    assert "Traceback" not in err and "31" not in err and "103" not in err


def test_secure_table_release_is_recorded_and_capped(tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--epsilon", "0.5"]
    assert main([*args, "-o", "one.csv", "--postprocess", "project"]) == 0
    out = capsys.readouterr().out
    assert "privacy budget spent: epsilon = 1.5 (pure DP)" in out
    frame = pd.read_csv(tmp_path / "one.csv")
    assert set(frame["path"]) == {"secure"} and frame["released_count"].notna().all()
    lines = (tmp_path / "postdp-ledger.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 1 and records[0]["budget"]["epsilon"] == 1.5
    assert [m["level"] for m in records[0]["measurements"]] == [0, 1, 2]
    assert main([*args, "-o", "two.csv", "--budget-cap", "2"]) == 2
    assert "would be epsilon = 3" in capsys.readouterr().err
    assert not (tmp_path / "two.csv").exists()


def test_top_down_table_release_is_nonnegative_and_consistent(tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--study", "--seed"]
    args += ["4", "--epsilon", "0.2", "--postprocess", "topdown", "--public", "root"]
    assert main([*args, "--format", "wide", "-o", "td.csv"]) == 0
    assert f"topdown ({estimator('topdown').summary})" in capsys.readouterr().out
    wide = pd.read_csv(tmp_path / "td.csv").set_index("geo_id")
    cells = wide[["T", "x", "y", "y1", "y2"]]
    assert (cells.to_numpy() >= 0).all()
    assert wide.loc["S", "T"] == pytest.approx(103, abs=1e-9)
    for code in ("T", "x", "y1"):
        assert wide.loc["S", code] == pytest.approx(wide.loc["a", code] + wide.loc["b", code])
    assert (cells["T"] - cells["x"] - cells["y"]).abs().max() < 1e-9
    grouped = tmp_path / "grouped.json"
    grouped.write_text(
        json.dumps(
            {
                "measurements": [{"level": d, "query": "detailed", "epsilon": 1} for d in range(3)]
                + [{"level": 1, "query": "total", "epsilon": 1}]
            }
        )
    )
    coupled = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--study"]
    coupled += ["--seed", "1", "--design", "grouped.json", "--postprocess", "topdown"]
    assert main([*coupled, "--format", "wide", "-o", "grouped.csv"]) == 0  # cells coupled
    wide = pd.read_csv(tmp_path / "grouped.csv").set_index("geo_id")
    assert (wide[["x", "y1", "y2"]].to_numpy() >= 0).all()
    assert wide.loc["S", "y1"] == pytest.approx(wide.loc["a", "y1"] + wide.loc["b", "y1"])
    weak = tmp_path / "weak.json"
    weak.write_text(json.dumps({"measurements": [{"level": 1, "query": "total", "epsilon": 1}]}))
    bad = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--study", "--seed", "1"]
    bad += ["--design", "weak.json", "--postprocess", "topdown", "-o", "no.csv"]
    assert main(bad) == 2
    assert "identify every detailed cell" in capsys.readouterr().err
    assert not (tmp_path / "no.csv").exists()


def test_rounded_table_release_is_integral_and_consistent(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["release", "--table", "p1-us-county", "--study", "--seed", "5", "--epsilon", "0.5"]
    args += ["--public", "root", "--postprocess", "topdown,round", "-o", "us.csv"]
    assert main(args) == 0
    assert "then rounded to integers (unbiased)" in capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "us.csv", dtype={"geo_id": str, "parent": str})
    released = frame["released_count"].to_numpy()
    assert np.issubdtype(released.dtype, np.integer) and released.min() >= 0
    wide = frame.pivot(index="geo_id", columns="category", values="released_count")
    assert wide.loc["US", "P1_001N"] == 334_735_155  # the public total, exactly
    states = wide.loc[[g for g in wide.index if len(g) == 2 and g != "US"]]
    assert (states.sum() == wide.loc["US"]).all()  # exact, every category
    ny = wide.loc[[g for g in wide.index if len(g) == 5 and g.startswith("36")]]
    assert (ny.sum() == wide.loc["36"]).all()
    assert (wide["P1_002N"] + wide["P1_009N"] == wide["P1_001N"]).all()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--postprocess", "round"], "optionally followed by round"),
        (["--postprocess", "round,topdown"], "optionally followed by round"),
        (["--postprocess", "project,round", "--uncertainty", "gls"], "drop ',round'"),
        (["--uncertainty", "replicates"], "needs a --postprocess for a table"),
        (
            [
                "--postprocess",
                "project-nonneg",
                "--uncertainty",
                "replicates",
                "--replicates",
                "100000",
            ],
            "would hold",
        ),
    ],
)
def test_bad_rounding_options_fail_before_any_draw(
    extra, message, spy, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    args = ["release", "--table", "p1-us-county", "--study", "--seed", "1", "-o", "x.csv"]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and spy == []
    assert not (tmp_path / "x.csv").exists()


def test_rounded_table_audit_stays_unbiased(tmp_path, monkeypatch, capsys):
    from scipy import stats

    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["audit", "--input", "wide.csv", "--categories", "tree.csv", "--epsilon", "0.5"]
    args += ["--draws", "200", "--postprocess", "project,round", "--output-dir", "aud"]
    assert main([*args, "--quiet"]) == 0
    cells = pd.read_csv(tmp_path / "aud" / "table_audit.csv")
    z = stats.norm.isf(0.001 / (2 * len(cells)))  # (P) + unbiased rounding: unbiased
    assert (cells["bias"].abs() <= z * cells["bias_se"]).all()


def test_nonneg_table_release(tmp_path, monkeypatch, capsys):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--study", "--seed"]
    args += ["2", "--epsilon", "0.1", "--public", "root", "--postprocess", "project-nonneg"]
    assert main([*args, "--format", "wide", "-o", "pp.csv"]) == 0
    assert f"project-nonneg ({estimator('project-nonneg').summary})" in capsys.readouterr().out
    wide = pd.read_csv(tmp_path / "pp.csv").set_index("geo_id")
    cells = wide[["T", "x", "y", "y1", "y2"]]
    assert (cells.to_numpy() >= 0).all() and wide.loc["S", "T"] == pytest.approx(103)
    for code in ("x", "y1", "y2"):
        assert wide.loc["S", code] == pytest.approx(wide.loc["a", code] + wide.loc["b", code])


def test_table_audit_writes_unbiased_errors(tmp_path, monkeypatch, capsys):
    from scipy import stats

    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["audit", "--input", "wide.csv", "--categories", "tree.csv", "--epsilon", "0.5"]
    args += ["--draws", "200", "--postprocess", "project", "--output-dir", "aud", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "estimated memory" in out.err and "RMSE by level" in out.out
    cells = pd.read_csv(tmp_path / "aud" / "table_audit.csv")
    assert len(cells) == 5 * 5 and {"truth", "bias", "bias_se", "rmse"} <= set(cells.columns)
    z = stats.norm.isf(0.001 / (2 * len(cells)))  # (P) is unbiased: every cell within z SE
    assert (cells["bias"].abs() <= z * cells["bias_se"]).all()
    summary = pd.read_csv(tmp_path / "aud" / "table_summary.csv")
    assert set(summary["level"]) == {0, 1, 2}
    metrics = pd.read_csv(tmp_path / "aud" / "table_metrics.csv")
    assert {"mae", "rmse", "mape", "mspe", "tvd", "share_ape_over_10"} <= set(metrics.columns)
    # the level-2 geounits (a1: 29 and a2: 43 people) share one size bin
    row = metrics[(metrics["level"] == 2) & (metrics["size"] == "10-99")].iloc[0]
    assert row["geounits"] == 2 and row["rmse"] >= row["mae"] > 0
    again = main([*args[:-3], "--output-dir", "aud2", "--quiet", "--seed", "0"])
    assert again == 0
    other = pd.read_csv(tmp_path / "aud2" / "table_audit.csv")
    np.testing.assert_array_equal(other["bias"], cells["bias"])  # the seed decides
    assert main([*args[:-3], "--output-dir", "aud3", "--max-memory", "1K"]) == 2
    assert "--max-memory" in capsys.readouterr().err
    pytest.importorskip("pyarrow")
    parquet = [*args[:-3], "--output-dir", "aud4", "--quiet", "--format", "parquet"]
    assert main([*parquet, "--no-figures"]) == 0
    back = pd.read_parquet(tmp_path / "aud4" / "table_metrics.parquet")
    pd.testing.assert_frame_equal(back, metrics, check_dtype=False)


def test_gls_margins_of_error(tmp_path, monkeypatch, capsys):
    from postdp.postprocess import TableProjector
    from postdp.tables import Measurement, Query, Workload

    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["release", "--input", "wide.csv", "--categories", "tree.csv", "--study", "--seed"]
    args += ["5", "--epsilon", "0.5", "--postprocess", "project", "--uncertainty", "gls"]
    assert main([*args, "--ci-level", "0.95", "-o", "ci.csv"]) == 0
    frame = pd.read_csv(tmp_path / "ci.csv")
    assert {"ci_low", "ci_high", "ci_level"} <= set(frame.columns)
    assert (frame["ci_level"] == 0.95).all()
    half = (frame["ci_high"] - frame["ci_low"]) / 2
    np.testing.assert_allclose(frame["released_count"], frame["ci_low"] + half, atol=1e-5)
    # the half-widths are 1.96 x the exact (P) standard deviations of the design
    from postdp.cli._tables import load_table
    from postdp.mechanisms import Geometric

    class Args:
        table, input, categories, encoding, id, parent = (
            None,
            "wide.csv",
            "tree.csv",
            "utf-8",
            "id",
            "parent",
        )

    table = load_table(Args()).table
    cat = table.categories
    w = Workload([Measurement(d, Query.detailed(cat), Geometric(epsilon=0.5)) for d in range(3)])
    sd = np.sqrt(TableProjector(table, w).variances()).reshape(-1)
    np.testing.assert_allclose(half, 1.959964 * sd, rtol=1e-5, atol=2e-6)
    capsys.readouterr()
    for extra, message in (
        (["--postprocess", "topdown"], "are for --postprocess project"),
        (["--format", "wide"], "need --format long"),
    ):
        assert main([*args, *extra, "-o", "no.csv"]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "no.csv").exists()


def test_gls_margins_of_a_hierarchy_release(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = ["release", "--study", "--seed", "1", "--uncertainty", "gls"]
    ok = [*base, "--postprocess", "project", "--public", "root", "-o", "h.csv"]
    assert main(ok) == 0
    frame = pd.read_csv(tmp_path / "h.csv", dtype={"id": str})
    root = frame[frame["id"] == "US"].iloc[0]
    assert root["ci_low"] == root["ci_high"] == root["released_count"]  # public: exact
    county = frame[frame["level"] == "county"]
    assert (county["ci_high"] > county["released_count"]).all()
    capsys.readouterr()
    for extra, message in (
        (["--postprocess", "project-nonneg"], "for --postprocess project alone"),
        (["--postprocess", "project", "--epsilon", "1,2,3"], "--weights inverse-variance"),
        (["--postprocess", "project", "--public", "01"], "--public root only"),
    ):
        assert main([*base, *extra, "-o", "no.csv", "--allow-derived-public"]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "no.csv").exists()
    good = [*base, "--postprocess", "project", "--epsilon", "1,2,3", "--weights"]
    assert main([*good, "inverse-variance", "-o", "iv.csv"]) == 0


def test_a_column_without_counts_is_kept_out_only_when_named(tmp_path, monkeypatch, capsys):
    """``--ignore-columns`` names a column that holds no counts; the release then goes ahead."""
    monkeypatch.chdir(tmp_path)
    _inputs(tmp_path)
    named = [line + ("," + ("name" if i == 0 else f"n{i}")) for i, line in enumerate(WIDE.split())]
    (tmp_path / "named.csv").write_text("\n".join(named) + "\n")
    args = ["release", "--input", "named.csv", "--categories", "tree.csv", "--study"]
    args += ["--seed", "2", "--epsilon", "1", "-o", "out.csv"]
    assert main(args) == 2
    assert "column 'name' is not a category of --categories" in capsys.readouterr().err
    assert main([*args, "--ignore-columns", "name"]) == 0
    assert (tmp_path / "out.csv").exists()


def test_from_wide_refuses_a_column_it_does_not_know():
    from postdp.errors import ValidationError
    from postdp.hierarchy import Hierarchy
    from postdp.tables import Table

    frame = pd.read_csv(io.StringIO(WIDE), dtype=str, keep_default_na=False)
    tree = pd.read_csv(io.StringIO(TREE), dtype=str, keep_default_na=False)
    geo = Hierarchy.from_frame(frame, id="id", parent="parent", count=None)
    cat = Hierarchy.from_frame(tree, id="code", parent="parent", count=None)
    leaves = frame[frame["T"] != ""]
    with pytest.raises(ValidationError, match="'parent'"):
        Table.from_wide(leaves, geo, cat, id="id")
    table = Table.from_wide(leaves, geo, cat, id="id", ignore=["parent"])
    assert int(table.counts()[0, 0]) == 31 + 29 + 43


def test_from_wide_reads_the_wide_csv_the_command_line_reads():
    """One loader (issue 27): ``Table.from_wide`` accepts the CLI's input as written, blank
    aggregate rows included, and gives the table the CLI releases."""
    from postdp import Hierarchy
    from postdp.tables import Table

    frame = pd.read_csv(io.StringIO(WIDE), dtype=str, keep_default_na=False)
    tree = pd.read_csv(io.StringIO(TREE), dtype=str, keep_default_na=False)
    geo = Hierarchy.from_frame(frame, id="id", parent="parent", count=None)
    cat = Hierarchy.from_frame(tree, id="code", parent="parent", count=None)
    table = Table.from_wide(frame, geo, cat, id="id", ignore=["parent"])
    assert table.counts()[0].tolist() == [103, 51, 52, 28, 24]  # S: the sum of its blocks
    # the same rows read the pandas way (blanks as NaN) are accepted too
    numeric = pd.read_csv(io.StringIO(WIDE), dtype={"id": str, "parent": str})
    again = Table.from_wide(numeric, geo, cat, id="id", ignore=["parent"])
    np.testing.assert_array_equal(again.cells, table.cells)
    # a leaf with blank counts is still refused
    broken = frame.copy()
    broken.loc[broken["id"] == "b", ["T", "x", "y", "y1", "y2"]] = ""
    with pytest.raises(Exception, match="leaf geounits without a row"):
        Table.from_wide(broken, geo, cat, id="id", ignore=["parent"])


def test_plan_takes_a_table(tmp_path, monkeypatch, capsys):
    """``postdp plan`` plans a table (issue 27): the bundled P1 table or a wide --input with
    --categories (and --design), the split over its measured queries equal to the library's
    plan, a corner flagged in words; options for hierarchies only are refused up front."""
    from postdp import Hierarchy
    from postdp.analysis import plan_budget
    from postdp.tables import Query, Table

    monkeypatch.chdir(tmp_path)
    _inputs(tmp_path)
    args = ["plan", "--input", "wide.csv", "--categories", "tree.csv", "--total", "2"]
    assert main([*args, "-o", "p.csv", "--mechanism", "gaussian"]) == 0
    out = capsys.readouterr().out
    assert "over 3 measured queries" in out and ("at a corner" in out or "interior" in out)
    plan = pd.read_csv(tmp_path / "p.csv")
    assert plan["level"].tolist() == [0, 1, 2] and set(plan["query"]) == {"detailed"}
    assert plan["budget"].sum() == pytest.approx(2.0, rel=1e-9)
    assert plan["share"].sum() == pytest.approx(1.0, rel=1e-9)  # a fraction of the total
    frame = pd.read_csv(io.StringIO(WIDE), dtype=str, keep_default_na=False)
    tree = pd.read_csv(io.StringIO(TREE), dtype=str, keep_default_na=False)
    geo = Hierarchy.from_frame(frame, id="id", parent="parent", count=None)
    cat = Hierarchy.from_frame(tree, id="code", parent="parent", count=None)
    table = Table.from_wide(frame, geo, cat, id="id", ignore=["parent"])
    pairs = [(d, Query.detailed(cat)) for d in range(3)]
    ours = plan_budget(table, queries=pairs, total=2.0, mechanism="gaussian")
    np.testing.assert_allclose(plan["budget"], ours.shares, rtol=1e-9)
    design = {
        "measurements": [
            {"level": 0, "query": "total", "public": True},
            {"level": 1, "query": "detailed", "mechanism": "gaussian", "rho": 0.1},
            {"level": 2, "query": ["x", "y"], "mechanism": "gaussian", "rho": 0.1},
            {"level": 2, "query": "detailed", "mechanism": "gaussian", "rho": 0.1},
        ]
    }
    (tmp_path / "d.json").write_text(json.dumps(design))
    assert main([*args, "--design", "d.json", "-o", "d.csv", "--mechanism", "gaussian"]) == 0
    assert len(pd.read_csv(tmp_path / "d.csv")) == 3  # the noisy queries of the design
    capsys.readouterr()
    mae = ["--objective", "mae", "--mechanism", "gaussian", "--draws", "20"]
    assert main([*args, *mae, "--postprocess", "topdown", "-o", "m.csv"]) == 0
    out = capsys.readouterr().out
    assert "size-binned MAE of topdown (20 common random draws)" in out
    planned = pd.read_csv(tmp_path / "m.csv")
    assert planned["budget"].sum() == pytest.approx(2.0, rel=1e-9)
    assert "mean_mae" in planned.columns and "mean_variance" not in planned.columns
    for extra, message in (
        (["--objective", "mae"], "--objective mae needs continuous noise"),
        ([*mae, "--postprocess", "clamp"], "--postprocess 'clamp'"),
        (["--frontier", "1,2"], "--frontier: draws a hierarchy's frontier"),
        (["--weights", "1,2"], "--weights '1,2': needs one value per measured query (3)"),
    ):
        assert main([*args, *extra, "-o", "bad.csv"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "bad.csv").exists()

"""The ``postdp`` command line, called in-process through ``main(argv)``."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from postdp.cli import main
from postdp.cli._options import CliError


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "table.csv"
    pd.DataFrame(
        {
            "geo": ["T", "a", "b", "a1", "a2"],
            "up": ["", "T", "T", "a", "a"],
            "pop": [10, 6, 4, 1, 5],
            "label": ["top", "mid", "mid", "low", "low"],
        }
    ).to_csv(path, index=False)
    return path


def _table_args(table):
    """The flags that read the fixture table."""
    return ["--input", str(table), "--id", "geo", "--parent", "up", "--count", "pop"]


def test_release_bundled_counties_study_path(tmp_path, capsys):
    out = tmp_path / "r.csv"
    assert (
        main(["release", "--epsilon", "0.5,1,2", "--study", "--seed", "4", "--output", str(out)])
        == 0
    )
    captured = capsys.readouterr()
    assert "budget this design would spend: epsilon = 3.5 (pure DP)" in captured.out
    assert "privacy budget spent" not in captured.out
    assert "nation 0.5 + state 1 + county 2" in captured.out
    assert "NOT a private release" in captured.out
    frame = pd.read_csv(out, dtype={"id": str, "parent": str})
    assert list(frame.columns) == [
        "id",
        "parent",
        "name",
        "level",
        "depth",
        "noisy_count",
        "mechanism",
        "epsilon",
        "rho",
        "path",
    ]
    assert (frame["path"] == "study").all()
    assert len(frame) == 3195
    assert frame["noisy_count"].dtype == np.int64
    # same seed, same file
    again = tmp_path / "r2.csv"
    main(["release", "--epsilon", "0.5,1,2", "--study", "--seed", "4", "--output", str(again)])
    assert out.read_text() == again.read_text()


def test_release_secure_path_user_csv(table, tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        *_table_args(table),
        "--keep",
        "label",
        "--epsilon",
        "2",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert "secure OpenDP release path" in capsys.readouterr().out
    frame = pd.read_csv(out)
    assert list(frame["geo" if "geo" in frame else "id"]) == ["T", "a", "b", "a1", "a2"]
    assert "label" in frame.columns
    assert "pop" not in frame.columns and "true_count" not in frame.columns


def test_release_gaussian_reports_zcdp_and_approx_dp(table, tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        *_table_args(table),
        "--mechanism",
        "discrete-gaussian",
        "--rho",
        "0.1",
        "--delta",
        "1e-6",
        "--study",
        "--seed",
        "1",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "rho = 0.3 (zCDP)" in text
    assert "as (epsilon, delta)-DP: epsilon = " in text and "delta = 1e-06" in text


def test_audit_writes_truth(table, tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        *_table_args(table),
        "--study",
        "--seed",
        "0",
        "--audit",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert pd.read_csv(out)["true_count"].tolist() == [10, 6, 4, 1, 5]
    assert "do not publish it" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--count", "nope"], "--count 'nope': no such column in the input"),
        (["--epsilon", "-1"], "argument --epsilon: must be positive; got '-1'"),
        (["--epsilon", "1,2"], "--epsilon '1,2': needs one value or one per level, root first"),
        (["--epsilon", "abc"], "argument --epsilon: must be a number; got 'abc'"),
        (["--rho", "0.5"], "--rho: applies to the Gaussian mechanisms"),
        (["--keep", "count"], "would copy the true counts"),
        (["--keep", "zzz"], "no column 'zzz' in the input"),
        (["--sensitivity", "1.5"], "--sensitivity '1.5': `sensitivity` must be a positive integer"),
        (["--input", "/nonexistent/table.csv"], "--input '/nonexistent/table.csv': no such file"),
    ],
)
def test_errors_are_one_line_and_exit_2(extra, message, tmp_path, capsys):
    argv = ["release", "--study", "--seed", "0", "--output", str(tmp_path / "x.csv"), *extra]
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2
    assert message in err
    assert err.startswith("postdp release: error: ") and err.count("\n") == 1


def test_empty_count_in_user_csv(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("id,parent,count\nT,,3\na,T,\n")
    argv = [
        "release",
        "--input",
        str(path),
        "--study",
        "--seed",
        "0",
        "-o",
        str(tmp_path / "o.csv"),
    ]
    assert main(argv) == 2
    assert "--count 'count': the count at row 2 (id 'a') is empty" in capsys.readouterr().err


def test_debug_shows_traceback(tmp_path):
    with pytest.raises(CliError, match="`epsilon` must be at most 700"):
        main(["--debug", "release", "--epsilon", "1000", "-o", str(tmp_path / "o.csv")])


def test_help_and_module_entry_point():
    for argv in (["--help"], ["release", "--help"]):
        assert main(argv) == 0
    done = subprocess.run(
        [sys.executable, "-m", "postdp", "release", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in ("--input", "--mechanism", "--epsilon", "--rho", "--seed", "--output", "--audit"):
        assert option in done.stdout


@pytest.mark.parametrize("step", ["project", "project-nonneg", "topdown"])
def test_release_postprocess_is_consistent(step, tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        "--study",
        "--seed",
        "3",
        "--epsilon",
        "0.01",
        "--postprocess",
        step,
        "--public",
        "root,06",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert f"post-processing: {step}" in capsys.readouterr().out
    frame = pd.read_csv(out, dtype={"id": str, "parent": str})
    released = frame.set_index("id")["released_count"]
    sums = frame[frame["parent"].notna()].groupby("parent")["released_count"].sum()
    np.testing.assert_allclose(released[sums.index], sums, rtol=1e-12, atol=1e-6)
    assert released["US"] == pytest.approx(308_745_538, abs=1e-6)
    assert released["06"] == pytest.approx(37_253_956, abs=1e-6)
    if step != "project":
        assert released.min() >= 0


def test_release_postprocess_weighted_and_errors(tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        "--study",
        "--seed",
        "3",
        "--epsilon",
        "1,0.5,0.1",
        "--postprocess",
        "project",
        "--weights",
        "inverse-variance",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    again = ["release", "--study", "--seed", "3", "-o", str(tmp_path / "other.csv")]
    assert main([*again, "--public", "root"]) == 2
    assert "public nodes are enforced by a projection" in capsys.readouterr().err
    assert main([*again, "--postprocess", "topdown", "--public", "zz"]) == 2
    assert "--public 'zz': no node with id 'zz'" in capsys.readouterr().err


def test_every_node_public_releases_the_truth(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("id,parent,count\nT,,3\na,T,3\nb,T,0\n")
    out = tmp_path / "o.csv"
    argv = [
        "release",
        "--input",
        str(path),
        "--postprocess",
        "project",
        "--public",
        "root,a,b",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert pd.read_csv(out)["released_count"].tolist() == [3.0, 3.0, 0.0]


def test_release_chain_with_rounding_is_integral_and_consistent(tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        "--study",
        "--seed",
        "5",
        "--epsilon",
        "0.05",
        "--postprocess",
        "project-nonneg,round",
        "--public",
        "root",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert "project-nonneg,round; column released_count is consistent" in capsys.readouterr().out
    frame = pd.read_csv(out, dtype={"id": str, "parent": str})
    assert frame["released_count"].dtype == np.int64
    released = frame.set_index("id")["released_count"]
    sums = frame[frame["parent"].notna()].groupby("parent")["released_count"].sum()
    assert (released[sums.index] == sums).all()
    assert released["US"] == 308_745_538 and released.min() >= 0


def test_release_element_wise_chain_reports_inconsistency(tmp_path, capsys):
    out = tmp_path / "r.csv"
    argv = [
        "release",
        "--study",
        "--seed",
        "5",
        "--epsilon",
        "0.001",
        "--postprocess",
        "clamp,modified:T=2",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    assert "NOT consistent" in capsys.readouterr().out
    assert pd.read_csv(out)["released_count"].min() >= 0
    other = str(tmp_path / "other.csv")
    assert main(["release", "--study", "--postprocess", "modified", "-o", other]) == 2
    assert "--postprocess 'modified':" in capsys.readouterr().err
    assert main(["release", "--study", "--postprocess", "ramp", "-o", other]) == 2
    assert "unknown post-processing method 'ramp'" in capsys.readouterr().err


@pytest.mark.processes
def test_audit_writes_tables_and_figures(table, tmp_path, capsys):
    out = tmp_path / "audit"
    argv = [
        "audit",
        *_table_args(table),
        "--mechanism",
        "laplace",
        "--epsilon",
        "0.5",
        "--postprocess",
        "project-nonneg",
        "--public",
        "root",
        "--draws",
        "400",
        "--batch",
        "64",
        "--seed",
        "3",
        "--entities",
        "a1,a2",
        "--shifts",
        "0,5",
        "--output-dir",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "audited 5 nodes over 400 draws" in text and "epsilon = 1.5 (pure DP)" in text
    audit = pd.read_csv(out / "audit.csv")
    assert audit["id"].tolist() == ["T", "a", "b", "a1", "a2"]
    for column in ("bias", "bias_lo", "bias_hi", "variance", "mse", "mae", "q05", "q50", "q95"):
        assert column in audit.columns
    assert (audit["n_draws"] == 400).all()
    assert audit.loc[0, "bias"] == 0.0  # the public root
    shifted = pd.read_csv(out / "shifted.csv")
    assert len(shifted) == 10 and set(shifted["leaf_shift"]) == {0, 5}
    # leaves shifted by 5, parents by 5 x their number of leaves
    truth5 = shifted[shifted["leaf_shift"] == 5].set_index("id")["truth"]
    assert truth5.to_dict() == {"T": 25, "a": 16, "b": 9, "a1": 6, "a2": 10}
    w = pd.read_csv(out / "wasserstein.csv")
    assert w["parent"].tolist() == ["T", "a"] and w["n"].tolist() == [2, 2]
    for figure in ("residuals.png", "bias_by_count.png", "wasserstein.png"):
        assert (out / figure).stat().st_size > 1000
    # the same seed writes the same table
    again = tmp_path / "again"
    argv[argv.index("--output-dir") + 1] = str(again)
    assert main([*argv, "--no-figures", "--workers", "2"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(again / "audit.csv"), audit)
    assert not (again / "residuals.png").exists()
    # the library does what the command does: postdp.audit gives the same tables and page
    import postdp
    from postdp import Hierarchy, Laplace
    from postdp.analysis import ReleaseDesign

    frame = pd.read_csv(table, dtype={"up": str}, keep_default_na=False)
    h = Hierarchy.from_parents(frame["geo"], [u or None for u in frame["up"]], frame["pop"])
    design = ReleaseDesign(h, Laplace(epsilon=0.5), "project-nonneg", public="root")
    ours = postdp.audit(design, n_draws=400, batch=64, rng=3, entities=["a1", "a2"], shifts=[0, 5])
    tables = ours.tables()
    pd.testing.assert_frame_equal(tables["audit"], audit, check_dtype=False, rtol=1e-12)
    pd.testing.assert_frame_equal(tables["shifted"], shifted, check_dtype=False, rtol=1e-12)
    pd.testing.assert_frame_equal(tables["wasserstein"], w, check_dtype=False, rtol=1e-12)
    page = ours.report(figures=[])
    assert page.headline[0].label == "verdict"
    assert [t.title for t in page.tables][-1] == "Wasserstein distance by family"


def test_audit_parquet_and_gaussian(table, tmp_path, capsys):
    out = tmp_path / "pq"
    argv = [
        "audit",
        *_table_args(table),
        "--mechanism",
        "gaussian",
        "--rho",
        "0.5",
        "--draws",
        "100",
        "--shifts",
        "",
        "--format",
        "parquet",
        "--no-figures",
        "--output-dir",
        str(out),
    ]
    assert main(argv) == 0
    frame = pd.read_parquet(out / "audit.parquet")
    assert len(frame) == 5
    assert not (out / "wasserstein.parquet").exists()  # Laplace-family noise only


def test_audit_help_documents_every_option(capsys):
    assert main(["audit", "--help"]) == 0
    parser_help = capsys.readouterr().out
    for option in (
        "--input",
        "--id",
        "--parent",
        "--count",
        "--mechanism",
        "--epsilon",
        "--rho",
        "--sensitivity",
        "--postprocess",
        "--public",
        "--weights",
        "--draws",
        "--batch",
        "--workers",
        "--seed",
        "--bins",
        "--entities",
        "--shifts",
        "--output-dir",
        "--format",
        "--no-figures",
    ):
        assert option in parser_help


def test_posterior_exact_reproduces_table3(tmp_path, capsys):
    plot = tmp_path / "post.png"
    argv = [
        "posterior",
        "--components",
        "250,357",
        "--total",
        "607",
        "--epsilon",
        "1",
        "--plot",
        str(plot),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "250 357 607       0.2136" in text
    assert "N1: [248, 252]  (released 250)" in text
    assert plot.stat().st_size > 1000


def test_posterior_mcmc_and_errors(tmp_path, capsys):
    argv = [
        "posterior",
        "--components",
        "3,0,12,7",
        "--epsilon",
        "1",
        "--draws",
        "100",
        "--chains",
        "2",
        "--seed",
        "1",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "mcmc" in text and "min ESS" in text and "N4: [" in text
    assert main(["posterior", "--components", "3,4", "--total", "9"]) == 2
    assert "--total 9: the released components add up to 7" in capsys.readouterr().err
    assert main(["posterior", "--components", "3,4", "--epsilon", "1,2,3"]) == 2
    assert "--epsilon '1,2,3': needs one value or one per component (2)" in capsys.readouterr().err


def test_fairness_title1_and_section203(tmp_path, capsys):
    out = tmp_path / "fair"
    argv = [
        "fairness",
        "title1",
        "--state",
        "RI",
        "--epsilon",
        "0.1",
        "--draws",
        "300",
        "--output-dir",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Title I (RI" in text and "alpha $" in text
    frame = pd.read_csv(out / "title1_RI.csv")
    assert {"leaid", "bias", "bias_lo", "bias_hi", "disparity"} <= set(frame.columns)
    assert list(frame.columns[:4]) == ["state", "mechanism", "epsilon", "postprocess"]
    assert set(frame["state"]) == {"RI"} and set(frame["postprocess"]) == {"clamp"}
    assert not frame.isna().any().any()
    assert (out / "title1_RI_bias.png").exists()
    argv = [
        "fairness",
        "section203",
        "--epsilon",
        "0.01",
        "--draws",
        "200",
        "--no-figures",
        "--postprocess",
        "modified:T=2",
        "--output-dir",
        str(tmp_path / "s203"),
    ]
    assert main(argv) == 0
    frame = pd.read_csv(tmp_path / "s203" / "section203.csv", dtype={"geoid": str})
    assert len(frame) == 314 and not frame.isna().any().any()
    # the library does what the command does: the same tables from postdp.report
    from postdp.report import fairness_study

    study = fairness_study(
        "section203", epsilon=[0.01], n_draws=200, postprocess="modified:T=2", rng=0
    )
    (ours,) = study.tables().values()
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), frame, check_dtype=False, rtol=1e-12)
    page = study.report(figures=[])
    assert page.headline[0].label == "verdict (ε = 0.01)"
    assert page.headline[1].label == "mean decision error (ε = 0.01)"
    bad = [
        "fairness",
        "title1",
        "--postprocess",
        "project",
        "--draws",
        "10",
        "--output-dir",
        str(tmp_path / "bad"),
    ]
    assert main(bad) == 2
    assert "--postprocess 'project': steps project need a hierarchy" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["release", "audit", "posterior", "fairness"])
def test_help_shows_each_default_once(command, capsys):
    """Issue 10: a default appears once in --help (never 'Default: x (default: y)')."""
    assert main([command, "--help"]) == 0
    import re

    text = " ".join(capsys.readouterr().out.split())
    assert not re.search(r"Default: \S+ \(default:", text), text

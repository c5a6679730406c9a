"""``--report FILE.html`` on audit, fairness, plan and table audits: written with the run,
checked before any draw, never holding a true count of a hierarchy that is not public."""

from __future__ import annotations

import json

import pytest

from postdp.cli import main
from tests.cli._helpers import TABLE

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")


def _run(args, capsys):
    status = main(args)
    out = capsys.readouterr()
    return status, out


def test_audit_report_holds_design_numbers_table_and_figures(tmp_path, monkeypatch, capsys):
    (tmp_path / "t.csv").write_text(TABLE)
    monkeypatch.chdir(tmp_path)
    args = ["audit", "--input", "t.csv", "--epsilon", "1", "--draws", "200", "--quiet"]
    args += ["--postprocess", "project-nonneg", "--output-dir", "aud", "--report", "r.html"]
    status, out = _run(args, capsys)
    assert status == 0, out.err
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert str(tmp_path / "r.html") in out.out
    for text in ("Privacy statement", "project-nonneg", "largest |bias| / SE", "Errors by level"):
        assert text in html
    assert html.count('<img src="data:image/png;base64,') == 3  # residuals, shifts, W1
    assert html.count("<figcaption>") == 3 and 'alt=""' not in html
    assert not list(tmp_path.glob(".*tmp*"))
    # the verdict comes first, and the page names no path of this machine
    assert "verdict" in html and ("systematic bias" in html or "no bias detected" in html)
    assert str(tmp_path) not in html


def test_table_audit_report(tmp_path, monkeypatch, capsys):
    from tests.cli.test_tables_cli import _inputs

    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["audit", "--input", "wide.csv", "--categories", "tree.csv", "--epsilon", "0.5"]
    args += ["--draws", "50", "--postprocess", "project-nonneg", "--quiet"]
    status, out = _run([*args, "--output-dir", "aud", "--report", "t.html"], capsys)
    assert status == 0, out.err
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    for text in ("Census Bureau metrics", "Budget by level and query", "Cells", "MAPE"):
        assert text in html
    pngs = sorted((tmp_path / "aud").glob("*.png"))
    assert pngs and html.count("data:image/png;base64,") == len(pngs)
    assert ("systematic bias" in html or "no bias detected" in html) and "verdict" in html
    assert str(tmp_path) not in html


def test_fairness_epsilon_is_one_run_and_a_sweep_is_named(tmp_path, monkeypatch, capsys):
    """One meaning per flag (issue 27): --epsilon is the noise's epsilon, one value, as in
    every command; --sweep-epsilon runs one study per value; geometric noise by default,
    as everywhere."""
    monkeypatch.chdir(tmp_path)
    base = ["fairness", "title1", "--state", "DE", "--draws", "20", "--quiet"]
    status, out = _run([*base, "--epsilon", "0.1,1", "--output-dir", "a"], capsys)
    assert status == 2 and out.err.count("\n") == 1
    assert "--epsilon '0.1,1': one value (one run); --sweep-epsilon 0.1,1" in out.err
    assert not (tmp_path / "a").exists()
    status, out = _run([*base, "--epsilon", "0.5", "--sweep-epsilon", "1", "-o", "b"], capsys)
    assert status == 2 and "not allowed with argument" in out.err
    status, out = _run([*base, "--sweep-epsilon", "0.5,2", "--output-dir", "c"], capsys)
    assert status == 0, out.err
    import pandas as pd

    tidy = pd.read_csv(tmp_path / "c" / "title1_DE.csv")
    assert sorted(set(tidy["epsilon"])) == [0.5, 2.0]
    assert tidy.groupby("epsilon").size().nunique() == 1  # every district once per epsilon
    manifest = json.loads((tmp_path / "c" / "postdp-manifest.json").read_text())
    assert "geometric" in json.dumps(manifest)


def test_fairness_and_plan_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["fairness", "title1", "--state", "DE", "--sweep-epsilon", "0.1,1", "--draws", "50"]
    status, out = _run([*args, "--output-dir", "f", "--report", "f.html", "--quiet"], capsys)
    assert status == 0, out.err
    html = (tmp_path / "f.html").read_text(encoding="utf-8")
    assert "fairness bound α (ε = 0.1)" in html and "dollars misallocated (ε = 1)" in html
    assert html.count("data:image/png;base64,") == 1
    args = ["plan", "--total", "1", "--frontier", "0.5,1", "--report", "p.html"]
    status, out = _run(args, capsys)
    assert status == 0, out.err
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "planned split" in html and "data:image/png;base64," in html


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--report", "r.txt"], "--report 'r.txt': must end in .html"),
        (["--report", "old.html"], "--report 'old.html': already exists"),
        (["--report", "aud/r.html"], "--report 'aud/r.html': is inside --output-dir"),
        (["--report", "t.csv"], "--report 't.csv': must end in .html"),
        (["--report", "nofolder/deeper/x.html", "--no-figures"], None),
    ],
)
def test_bad_report_paths_fail_before_any_draw(extra, message, spy, tmp_path, monkeypatch, capsys):
    (tmp_path / "t.csv").write_text(TABLE)
    (tmp_path / "old.html").write_text("earlier\n")
    monkeypatch.chdir(tmp_path)
    args = ["audit", "--input", "t.csv", "--draws", "20", "--output-dir", "aud", "--quiet"]
    status, out = _run([*args, *extra], capsys)
    if message is None:  # a new folder for the report is fine
        assert status == 0 and (tmp_path / "nofolder/deeper/x.html").is_file()
        return
    assert status == 2 and out.err.count("\n") == 1 and message in out.err, out.err
    assert spy == [] and not (tmp_path / "aud").exists()
    assert (tmp_path / "old.html").read_text() == "earlier\n"


def test_report_is_replaced_only_with_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.html").write_text("earlier\n")
    status, out = _run(["plan", "--total", "1", "--report", "p.html"], capsys)
    assert status == 2 and "already exists" in out.err
    assert not (tmp_path / "plan.csv").exists()
    status, out = _run(["plan", "--total", "1", "--report", "p.html", "--overwrite"], capsys)
    assert status == 0 and "planned split" in (tmp_path / "p.html").read_text()


def test_audit_of_the_bundled_counties_names_them(tmp_path, monkeypatch, capsys):
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    args = ["audit", "--epsilon", "1", "--draws", "20", "--quiet", "--no-figures"]
    status, out = _run([*args, "--output-dir", "aud", "--report", "r.html"], capsys)
    assert status == 0, out.err
    frame = pd.read_csv(tmp_path / "aud" / "audit.csv", dtype={"id": str})
    assert frame.columns[:3].tolist() == ["id", "name", "depth"]
    assert frame.set_index("id").loc["01", "name"] == "Alabama"
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Alabama" in html  # names in the node table of the page too


def test_the_title1_caption_follows_each_run(tmp_path):
    """Issue 27: the caption's direction comes from the run it describes. Clamping takes
    money from New York City; the optimal ramp gives it money (seed 004): each caption
    says what its own run shows."""
    from postdp.report import fairness_study

    said = {}
    for post in ("clamp", "ramp-optimal"):
        study = fairness_study(
            "title1",
            state="NY",
            epsilon=0.1,
            mechanism="laplace",  # the papers' noise, whose ramp is optimal
            postprocess=post,
            n_draws=300,
            rng=0,
        )
        caption = study.captions["title1"][2]
        big = int(study.truth.argmax())
        bias = float(study.runs[0].bias[big])
        said[post] = bias
        assert "{direction}" not in caption
        assert f"largest district {'gains' if bias > 0 else 'loses'} ${abs(bias):,.0f}" in caption
    assert said["clamp"] < 0 < said["ramp-optimal"]  # the two runs disagree in direction


def test_fairness_compares_post_processings_in_one_run(tmp_path, monkeypatch, capsys):
    """Issue 27: several post-processings (and epsilons) in one run, a tidy table (one row
    per entity and setting) and one figure with a panel per post-processing."""
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    args = ["fairness", "title1", "--state", "DE", "--sweep-epsilon", "0.1,1", "--draws", "40"]
    args += ["--postprocess", "clamp", "--postprocess", "ramp-optimal", "--quiet"]
    status, out = _run([*args, "--output-dir", "f", "--report", "f.html"], capsys)
    assert status == 0, out.err
    assert len(out.out.strip().splitlines()) >= 4  # a summary line per setting
    tidy = pd.read_csv(tmp_path / "f" / "title1_DE.csv", dtype={"leaid": str})
    settings = tidy.groupby(["epsilon", "postprocess"]).size()
    assert len(settings) == 4 and settings.nunique() == 1
    assert not tidy.duplicated(["leaid", "epsilon", "postprocess"]).any()
    html = (tmp_path / "f.html").read_text(encoding="utf-8")
    for tag in ("ε = 0.1, clamp", "ε = 1, ramp-optimal"):
        assert f"fairness bound α ({tag})" in html
    status, out = _run([*args[:-1], "--postprocess", "clamp", "--output-dir", "g"], capsys)
    assert status == 2 and "--postprocess: each post-processing once" in out.err

    from postdp.report import fairness_study

    study = fairness_study(
        "title1", state="DE", epsilon=0.1, postprocess=["clamp", "ramp-optimal"], n_draws=40, rng=0
    )
    (ax,) = study.figures().values()
    assert len(ax.figure.axes) == 2
    assert [a.get_title() for a in ax.figure.axes] == [
        "post-processing: clamp",
        "post-processing: ramp-optimal",
    ]
    caption = study.captions["title1"][2]
    assert "At ε = 0.1, clamp," in caption and "At ε = 0.1, ramp-optimal," in caption

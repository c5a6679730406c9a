"""What a run's manifest records and what the reader makes of it: every measurement's
mechanism, parameter and cost read back exactly (every family, float and exact budgets,
per-geounit budgets), an overwritten run replaced whole, and manifests this version cannot
read refused."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import postdp
from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace, nmf
from postdp.errors import ValidationError
from postdp.nmf import _io
from postdp.tables import Measurement, Query, Workload, measure, pl94_schema, single_child_bypass

from .conftest import small_table

#: Each query's share of its level's budget (the level's share is 1/6 for each of 6 levels).
SHARES = {
    "total": Fraction(1, 4),
    "votingage * hispanic": Fraction(1, 4),
    "detailed": Fraction(1, 2),
}
FAMILIES = {"laplace": Laplace, "geometric": Geometric, "gaussian": Gaussian,
            "discrete-gaussian": DiscreteGaussian}  # fmt: skip
PARAMETER = {"laplace": "epsilon", "geometric": "epsilon", "gaussian": "rho",
             "discrete-gaussian": "rho"}  # fmt: skip


def _hand_made(family: str, neighbours: str, total: float) -> Workload:
    """A workload built by hand with float budgets (the invariants listed first, an order
    the reader must keep)."""
    s = pl94_schema()
    kind, key = FAMILIES[family], PARAMETER[family]
    items = [Measurement(d, Query.marginal(s, "total"), None) for d in (0, 1)]
    for d in range(6):
        for name, share in SHARES.items():
            value = total * 0.37 * (d + 1) / 7.9 * float(share)  # floats with no short form
            items.append(Measurement(d, Query.marginal(s, name), kind(**{key: value})))
    return Workload(items, neighbours=neighbours)


def _from_shares(family: str, neighbours: str) -> Workload:
    levels = {d: (Fraction(1, 6), SHARES) for d in range(6)}
    return Workload.from_shares(
        levels, total="293764/114921", schema=pl94_schema(), mechanism=family,
        public=[(0, "total"), (1, "total")], neighbours=neighbours,
    )  # fmt: skip


def _cases(family: str):
    """(label, workload, budget_scale top or None) for a family: float budgets under both
    neighbouring relations; for the zCDP families also exact budgets and per-geounit ones."""
    yield "float, add-remove", _hand_made(family, "add-remove", 2.0), None
    yield "float, bounded", _hand_made(family, "bounded", 2.0), None
    if FAMILIES[family].family == "gaussian":
        yield "exact, bounded", _from_shares(family, "bounded"), None
        yield "exact, add-remove", _from_shares(family, "add-remove"), None
        yield "exact, single-child bypass", _from_shares(family, "bounded"), 1
        yield "float, single-child bypass", _hand_made(family, "add-remove", 2.0), 1


def _by_id(m, estimate):
    geo = m.table.geography
    return {str(geo.ids[g]): estimate[g] for g in range(geo.n)}


def _check_round_trip(m, back, label: str) -> None:
    assert back.workload == m.workload, label  # the same mechanism objects, levels, order
    assert back.workload.neighbours == m.workload.neighbours, label
    assert back.workload.exact_rho == m.workload.exact_rho, label
    assert back.budget == m.budget, label
    assert [x.variance for x in back.workload.measurements] == [
        x.variance for x in m.workload.measurements
    ], label
    if m.budget_scale is None:
        assert back.budget_scale is None, label
    else:
        want = _by_id(m, m.budget_scale)
        got = _by_id(back, back.budget_scale)
        assert got.keys() == want.keys()
        for g, f in want.items():
            assert got[g] == pytest.approx(f, rel=1e-12), (label, g)
    ga, gb = m.table.geography, back.table.geography
    for k, (x, y) in enumerate(zip(m.values, back.values, strict=True)):
        d = m.workload.measurements[k].level  # geounits matched by id (the reader's order
        place = {str(i): j for j, i in enumerate(gb.ids[gb.levels[d]])}  # may differ)
        rows = [place[str(i)] for i in ga.ids[ga.levels[d]]]
        assert np.array_equal(np.asarray(x, dtype=np.float64), y[rows], equal_nan=True), label
    want = _by_id(m, postdp.project(m, nonneg=False))
    got = _by_id(back, postdp.project(back, nonneg=False))
    scale = max(1.0, max(float(np.abs(r).max()) for r in want.values()))
    for g, row in want.items():
        np.testing.assert_allclose(got[g], row, atol=1e-9 * scale, rtol=0, err_msg=label)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_and_budget_reads_back_exactly(family, tmp_path):
    """``write`` then ``read``: the same workload (mechanisms, parameters, levels, order,
    neighbours, exact rho), budget, variances and budget factors, the same answers, and
    ``project`` from the files equal to ``project`` in memory to 1e-9."""
    t = small_table(seed=2)
    for k, (label, work, top) in enumerate(_cases(family)):
        scale = None if top is None else single_child_bypass(t, work, top=top)
        m = measure(t, work, secure=False, rng=k, budget_scale=scale)
        if scale is not None:
            assert m.budget_scale is not None and (m.budget_scale == 0).any()
        run = nmf.write(m, tmp_path / f"run{k}")
        _check_round_trip(m, nmf.read(run), label)
        manifest = json.loads((run / "postdp-nmf.json").read_text())
        assert {e["mechanism"] for e in manifest["measurements"]} == {None, family}, label


def _read(folder):
    """Every file of an output form as one frame (no partition columns)."""
    return pd.concat(
        [pd.read_parquet(p) for p in sorted(folder.rglob("part-*.parquet"))], ignore_index=True
    )


@pytest.mark.parametrize("family", ["laplace", "discrete-gaussian"])
def test_blue_of_the_run_equals_blue_in_memory(family, tmp_path):
    """``postprocess(method="project")`` of a run (by partition, from the files) gives the
    whole table's GLS in memory, and its ``std_dev`` the exact GLS standard deviations."""
    from postdp.postprocess import TableProjector

    t = small_table(seed=4)
    m = measure(t, _hand_made(family, "add-remove", 3.0), secure=False, rng=9)
    out = nmf.postprocess(nmf.write(m, tmp_path / "run"), tmp_path / "out", method="project")
    frame = _read(out / "wide")
    got = dict(
        zip(frame["geocode"], frame.drop(columns=["geocode", "total"]).to_numpy(), strict=True)
    )
    geo = m.table.geography
    whole = postdp.project(m, nonneg=False)
    scale = max(1.0, float(np.abs(whole).max()))
    for g in range(geo.n):
        code = "" if g == geo.root else "0" + str(geo.ids[g])
        np.testing.assert_allclose(got[code], whole[g], atol=1e-9 * scale, rtol=0)
    sd = _read(out / "std_dev")
    sd = sd[sd["query_name"] == "total"]
    exact = np.sqrt(np.maximum(TableProjector(m.table, m.workload).query_variances(
        Query.marginal(pl94_schema(), "total")), 0.0))  # fmt: skip
    codes = {("" if g == geo.root else "0" + str(geo.ids[g])): g for g in range(geo.n)}
    for code, value in zip(sd["geocode"], sd["std_dev"], strict=True):
        np.testing.assert_allclose(np.asarray(value), exact[codes[code]], rtol=1e-7, atol=1e-6)


def test_a_run_drawn_with_a_large_rho_is_read(tmp_path):
    """rho 1.5e5 (sigma about 0.0018, add-remove): read back as drawn, not as rho 3e5 from
    the variance (beyond what a mechanism accepts)."""
    s = pl94_schema()
    work = Workload(
        [Measurement(d, Query.marginal(s, "detailed"), DiscreteGaussian(rho=1.5e5))
         for d in range(6)]
    )  # fmt: skip
    m = measure(small_table(), work, secure=False, rng=0)
    back = nmf.read(nmf.write(m, tmp_path / "run"))
    assert back.workload == work and back.budget == m.budget


def test_a_version_1_run_is_read_by_the_old_rule(tmp_path):
    """A manifest without the measurements' records (an earlier postdp's, version 1): each
    query's exact rho from the run's rho and its ``plb``, the noise a discrete Gaussian."""
    work = _from_shares("discrete-gaussian", "bounded")
    m = measure(small_table(), work, secure=False, rng=3)
    run = nmf.write(m, tmp_path / "run")
    path = run / "postdp-nmf.json"
    manifest = json.loads(path.read_text())
    for key in ("measurements", "answers"):
        del manifest[key]
    manifest["version"] = 1
    path.write_text(json.dumps(manifest))
    back = nmf.read(run)
    assert back.workload == work and back.workload.exact_rho == work.exact_rho
    assert back.budget == m.budget


# -- overwrite -----------------------------------------------------------------------------
def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_overwrite_replaces_the_whole_run(tmp_path):
    """An old run (6 levels, a privacy statement, a file of the user's) overwritten by a
    3-level run: only the new run's files remain, the same as the new run written afresh."""
    t = small_table()
    s = pl94_schema()
    big = measure(t, _hand_made("geometric", "add-remove", 1.0), secure=False, rng=0)
    run = nmf.write(big, tmp_path / "run")
    (run / "privacy.json").write_text("{}")
    (run / "notes.txt").write_text("old")
    top, _ = t.split_at(2)
    small = measure(
        top, Workload([Measurement(d, Query.marginal(s, "total"), Geometric(epsilon=1.0))
                       for d in range(3)]), secure=False, rng=1,
    )  # fmt: skip
    fresh = nmf.write(small, tmp_path / "fresh", levels=["US", "State", "County"])
    nmf.write(small, run, levels=["US", "State", "County"], overwrite=True)
    assert _files(run) == _files(fresh)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries
    assert nmf.read(run).table.geography.n_levels == 3


def test_a_failed_overwrite_leaves_the_old_run(tmp_path, monkeypatch):
    """Overwrite replaces the whole run or nothing: a failure while the new run is written
    leaves every file of the old one as it was, and no temporary folder."""
    m = measure(small_table(), _hand_made("geometric", "add-remove", 1.0), secure=False, rng=0)
    run = nmf.write(m, tmp_path / "run")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    other = measure(m.table, m.workload, secure=False, rng=1)
    real, calls = _io._atomic_parquet, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) > 5:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(_io, "_atomic_parquet", failing)
    with pytest.raises(OSError, match="disk full"):
        nmf.write(other, run, overwrite=True)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path)) == ["run"]


# -- manifests this version cannot read ----------------------------------------------------
def _edited(tmp_path, edit):
    m = measure(small_table(), _hand_made("geometric", "add-remove", 1.0), secure=False, rng=0)
    run = nmf.write(m, tmp_path / "run")
    path = run / "postdp-nmf.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return run, path


def test_a_manifest_of_a_future_version_is_refused(tmp_path):
    run, path = _edited(tmp_path, lambda m: m.update(version=99))
    for call in (lambda: nmf.read(run), lambda: nmf.subtrees(run),
                 lambda: nmf.postprocess(run, tmp_path / "out", method="project")):  # fmt: skip
        with pytest.raises(ValidationError) as info:
            call()
        text = str(info.value)
        assert "\n" not in text and str(path) in text
        assert "version 99" in text and "versions 1 to 2" in text


def test_a_manifest_that_omits_a_level_is_refused(tmp_path):
    run, path = _edited(tmp_path, lambda m: m.update(levels=m["levels"][:-1]))
    with pytest.raises(ValidationError, match=r"Block\.parquet") as info:
        nmf.read(run)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_manifest_that_misdescribes_a_query_is_refused(tmp_path):
    """A query in the files that the manifest does not describe cannot be rebuilt."""

    def drop(m):
        m["measurements"] = [e for e in m["measurements"] if e["query"] != "detailed"]

    run, path = _edited(tmp_path, drop)
    with pytest.raises(ValidationError, match="detailed") as info:
        nmf.read(run)
    assert str(path) in str(info.value)


def test_a_manifest_whose_cost_is_not_its_mechanisms_is_refused(tmp_path):
    """The recorded cost is checked against the mechanism rebuilt from the parameter."""

    def doubled(m):
        e = next(e for e in m["measurements"] if e["mechanism"])
        e["cost"]["epsilon"] = repr(2 * float(e["cost"]["epsilon"]))

    run, path = _edited(tmp_path, doubled)
    with pytest.raises(ValidationError, match="recorded cost") as info:
        nmf.read(run)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_read_workloads_marginals_share_one_schema_whatever_was_read_before():
    """Regression: the reader's query cache was keyed by the schema's repr and kept the
    schema object of whichever read came first, so a later read with a fresh (equal)
    schema and one new query name mixed two schema objects in one workload, and the
    marginal-basis solvers (topdown-2020) refused it -- depending on test order."""
    from postdp.nmf._workload import _marginal
    from postdp.postprocess._solvers.marginal_basis import marginal_workload

    first, second = pl94_schema(), pl94_schema()
    _marginal(first, "votingage")
    queries = [_marginal(second, name) for name in ("votingage", "votingage * hispanic")]
    work = Workload([Measurement(0, q, Gaussian(rho=1.0)) for q in queries])
    assert marginal_workload(work) is not None
    assert queries[0].marginal_of.schema is queries[1].marginal_of.schema

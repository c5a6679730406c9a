"""Noisy measurement files: the Census layout written, read back, and the published quirks.

Layout facts: shared/research/pl94-2020-design.md section 2 (the Census's 2023 NMF README;
google-research/census-bluedown constants.py and io.py)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from postdp import nmf
from postdp.errors import ValidationError
from postdp.tables import load_strategy, measure, pl94_schema, single_child_bypass

from .conftest import small_table

#: The Census README's columns of a persons run (DPQuery; Constraint has sign for the tail).
DPQUERY = ["geocode", "query_name", "hhgq", "votingage", "hispanic", "cenrace",
           "query_shape", "value", "variance", "plb"]  # fmt: skip
CONSTRAINT = [*DPQUERY[:7], "value", "sign"]


def _same_measurements(a, b) -> None:
    ga, gb = a.table.geography, b.table.geography
    assert ga.n_levels == gb.n_levels
    for la, lb in zip(ga.levels, gb.levels, strict=True):
        assert ga.ids[la].tolist() == gb.ids[lb].tolist()
        assert (
            ga.ids[ga.parent[la[la != ga.root]]].tolist()
            == gb.ids[gb.parent[lb[lb != gb.root]]].tolist()
        )
    assert a.workload == b.workload
    assert a.workload.exact_rho == b.workload.exact_rho
    for x, y in zip(a.values, b.values, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert a.secure == b.secure
    assert a.table.categories.ids.tolist() == b.table.categories.ids.tolist()


def test_write_then_read_gives_identical_measurements(measured, tmp_path):
    run = nmf.write(measured, tmp_path / "run", strategy="pl94-2020-persons")
    back = nmf.read(run)
    _same_measurements(measured, back)
    assert back.budget.rho == measured.budget.rho
    assert back.secure is False  # drawn on the study path: the manifest says so
    assert int(back.table.dense_cells().sum()) == 0  # an NMF holds no true counts


def test_files_follow_the_census_layout(measured, tmp_path):
    run = nmf.write(measured, tmp_path / "run")
    names = ("US", "State", "County", "Tract", "Block_Group", "Block")
    assert sorted(p.name for p in run.iterdir()) == sorted(
        [*(n + ".parquet" for n in names), "postdp-nmf.json"]
    )
    assert [p.name for p in (run / "US.parquet" / "DPQuery").iterdir()] == ["part-0.parquet"]
    geo = measured.table.geography
    for d, name in enumerate(names):
        for kind, cols in (("DPQuery", DPQUERY), ("Constraint", CONSTRAINT)):
            where = run / f"{name}.parquet" / kind
            folders = [None] if d == 0 else sorted(p.name for p in where.iterdir())
            if d:
                assert folders == ["State=010", "State=011"]  # AIAN flag 0 + state FIPS
            for folder in folders:
                path = where / (folder or "") / "part-0.parquet"
                table = pq.read_table(path)
                assert table.column_names == cols
                assert table.schema.field("value").type == pa.list_(pa.int64())
                assert table.schema.field("query_shape").type == pa.list_(pa.int64())
                rows = table.to_pylist()
                for row in rows:
                    assert row["query_name"][-4:] == ("_dpq" if kind == "DPQuery" else "_con")
                    assert int(np.prod(row["query_shape"])) == len(row["value"])
                    if kind == "DPQuery":
                        assert row["variance"] > 0 and Fraction(row["plb"]) > 0
                    else:
                        assert row["sign"] == "="
                    if d:
                        assert row["geocode"].startswith(folder[-3:])
        ids = geo.ids[geo.levels[d]]
        frame = pq.read_table(run / f"{name}.parquet" / "DPQuery").to_pandas()
        expected = {"" if d == 0 else "0" + str(i) for i in ids}
        if d > 0:  # the state total is an invariant, so the US level has noisy marginals too
            assert set(frame["geocode"]) == expected
    # budget shares add up to the whole run; the manifest keeps rho exactly
    plb = pq.read_table(run / "Block.parquet" / "DPQuery").to_pandas()
    manifest = json.loads((run / "postdp-nmf.json").read_text())
    assert Fraction(manifest["rho"]) == Fraction(293764, 114921)
    assert manifest["path"] == "study"
    detailed = plb[plb["query_name"] == "detailed_dpq"].iloc[0]
    assert Fraction(detailed["plb"]) == Fraction(165, 4099) * Fraction(3945, 4097)
    assert list(detailed["query_shape"]) == [8, 2, 2, 63]
    assert [detailed[a] for a in ("hhgq", "votingage", "hispanic", "cenrace")] == [
        "hhgq", "votingage", "hispanic", "cenrace"]  # fmt: skip
    hisp = plb[plb["query_name"] == "hispanic * cenrace_dpq"].iloc[0]
    assert [hisp[a] for a in ("hhgq", "votingage", "hispanic", "cenrace")] == [
        "*", "*", "hispanic", "cenrace"]  # fmt: skip


def test_the_value_array_is_the_marginal_in_c_order(measured, tmp_path):
    run = nmf.write(measured, tmp_path / "run")
    frame = pq.read_table(run / "Block.parquet" / "DPQuery" / "State=011").to_pandas()
    geo = measured.table.geography
    blocks = [str(i) for i in geo.ids[geo.levels[5]]]
    w = measured.workload
    i = next(k for k, m in enumerate(w.measurements) if m.level == 5 and m.query.name == "detailed")
    row = frame[frame["query_name"] == "detailed_dpq"].iloc[0]
    k = blocks.index(row["geocode"][1:])
    assert np.array_equal(np.asarray(row["value"]), measured.values[i][k])
    # C order of (hhgq, votingage, hispanic, cenrace): cell (3, 1, 0, 5) is 3*252 + 126 + 5
    assert pl94_schema().cells[3 * 252 + 1 * 126 + 0 * 63 + 5].startswith("nursing|18+")


def test_rows_in_any_order_and_files_read_the_same(measured, tmp_path):
    """The reader takes each row's answers by its offsets and geocode, not by position:
    a partition's rows shuffled and split over two files read as the written run."""
    run = nmf.write(measured, tmp_path / "run")
    folder = run / "Block.parquet" / "DPQuery" / "State=011"
    (path,) = folder.glob("*.parquet")
    table = pq.read_table(path)
    order = np.random.default_rng(5).permutation(len(table))
    half = len(order) // 2
    path.unlink()
    pq.write_table(table.take(order[:half]), folder / "part-a.parquet", row_group_size=7)
    pq.write_table(table.take(order[half:]), folder / "part-b.parquet")
    back = nmf.read(run)
    assert back.workload == measured.workload
    ga, gb = measured.table.geography, back.table.geography
    for i, m in enumerate(measured.workload.measurements):
        ids_a = ga.ids[ga.levels[m.level]].tolist()
        ids_b = gb.ids[gb.levels[m.level]].tolist()
        assert sorted(ids_a) == sorted(ids_b)
        at = [ids_b.index(g) for g in ids_a]  # the blocks as the reader met them
        assert np.array_equal(back.values[i][at], measured.values[i])


def test_reading_one_subtree_opens_its_files_only(measured, tmp_path):
    run = nmf.write(measured, tmp_path / "run")
    assert nmf.subtrees(run) == ["010", "011"]
    one = nmf.read(run, states=["11"])
    geo = one.table.geography
    assert geo.ids[geo.levels[1]].tolist() == ["11"]
    assert all(str(i).startswith("11") for i in geo.ids[geo.depth >= 1])
    top = nmf.read(run, levels=2)
    assert top.table.geography.n == 3 and top.workload.at(2) == []
    # the states' rho is the read levels' only: exact shares of the two levels
    exact = sum(r for r in top.workload.exact_rho if r is not None)
    assert exact == Fraction(293764, 114921) * Fraction(104 + 1440, 4099)
    (run / "Tract.parquet" / "DPQuery" / "State=010" / "part-0.parquet").unlink()
    nmf.read(run, states=["011"])  # the other subtree's files are not needed
    with pytest.raises(ValidationError, match="no subtree"):
        nmf.read(run, states=["012"])


def test_writer_refuses_what_the_layout_cannot_hold(measured, tmp_path):
    draws = measure(measured.table, measured.workload, secure=False, rng=0, size=2)
    with pytest.raises(ValidationError, match="one draw"):
        nmf.write(draws, tmp_path / "a")
    run = nmf.write(measured, tmp_path / "b")
    with pytest.raises(ValidationError, match="not an empty folder"):
        nmf.write(measured, run)
    import dataclasses

    from postdp import Geometric
    from postdp.tables import Measurement, Query, Workload

    t = small_table()
    work = Workload([Measurement(d, Query.marginal(pl94_schema(), "total"), Geometric(epsilon=1.0))
                     for d in range(6)])  # fmt: skip
    m = measure(t, work, secure=False, rng=0)
    m = dataclasses.replace(m, values=(m.values[0] + 0.5, *m.values[1:]))
    with pytest.raises(ValidationError, match="whole numbers"):
        nmf.write(m, tmp_path / "c")  # a discrete mechanism's answers (Laplace's may be floats)
    assert not (tmp_path / "c").exists()


def test_published_quirks_are_read(tmp_path):
    """No manifest (the workload from the variances, bounded neighbours), the group-quarters
    constraints read (``hhgq_total_lb_con`` / ``_ub_con``: lower 0, upper 99,999 read as
    none, so no bound at all), the Census's structural zero on its own recodes read as
    postdp's bound, and a single-child bypass (``top=1``): the District's one county only in
    Constraint (budget factor 0), the state measured with the county's budget as well
    (smaller variances; with no manifest its variance is read as its level's)."""
    plain = nmf.read(nmf.synthetic_run(tmp_path / "plain", states=["11"], seed=3, scale=0.05))
    run = nmf.synthetic_run(tmp_path / "quirky", states=["11"], seed=3, scale=0.05, quirks=True)
    assert not (run / "postdp-nmf.json").exists()
    got = nmf.read(run)
    # lower 0 and upper 99,999 bound nothing: no group-quarters bound is kept; the Census's
    # nurse_nva_0_con (= 0 on its recodes gqNursingTotal x nonvoting) is the zero on
    # (nursing, under 18) of hhgq x votingage at every geounit
    (nurse,) = got.bounds
    assert (nurse.name, nurse.query, nurse.sides) == ("nurse_nva_0", "hhgq * votingage", "upper")
    assert (nurse.upper[:, 2 * 3] == 0).all()  # hhgq level 3 (nursing), under 18
    assert np.isinf(np.delete(nurse.upper, 2 * 3, axis=1)).all()
    assert not (nurse.lower > 0).any()
    assert got.secure is False  # the study-path marker file
    assert got.workload.neighbours == "bounded"
    factor = single_child_bypass(plain.table, plain.workload, top=1)
    state = float(factor[plain.table.geography.levels[1][0]])
    assert state > 1
    plain_by_key = {(m.level, m.query.name, m.public): m for m in plain.workload.measurements}
    for b in got.workload.measurements:
        a = plain_by_key[(b.level, b.query.name, b.public)]
        want = a.variance / state if b.level == 1 and not b.public else a.variance
        # a discrete Gaussian's exact variance is a hair under sigma^2 at sigma ~ 1
        assert b.variance == pytest.approx(want, rel=1e-5)
    assert not got.workload.at(2)  # the county answers no query
    assert got.budget.rho == pytest.approx(plain.budget.rho, rel=1e-9)  # the state took it
    geo = got.table.geography
    assert geo.levels[5].size == plain.table.geography.levels[5].size
    assert got.budget_scale is not None
    assert (got.budget_scale[geo.levels[2]] == 0).all()
    assert (np.delete(got.budget_scale, geo.levels[2]) == 1).all()


def test_reader_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(ValidationError, match="not a run"):
        nmf.read(tmp_path / "x")
    with pytest.raises(ValidationError, match="not a folder"):
        nmf.read(tmp_path / "nothere")


def test_the_preset_strategies_name_the_files_budget():
    s = load_strategy("pl94-2020-persons")
    shares = [s.level_shares[d] * q for d, qs in enumerate(s.query_shares) for q in qs.values()]
    assert sum(shares) == 1  # plb of every query of a run adds up to one

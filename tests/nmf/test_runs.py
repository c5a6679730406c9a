"""Post-processing a run partition by partition: the same numbers as the whole table at
once, resumable, the same bits on Dask."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import postdp
from postdp import nmf
from postdp.analysis import ReleaseDesign
from postdp.errors import ValidationError
from postdp.nmf.runs import one_thread
from postdp.postprocess import blue_restore, top_down_2020
from tests._dask import dask_client

from .conftest import check_parts, counties_table, released_cells


def _estimates(out, form="wide"):
    """Every geounit's estimate from an output folder: {geocode: row of cells}."""
    frame = pd.concat(
        [pd.read_parquet(p) for p in sorted((out / form).rglob("part-*.parquet"))],
        ignore_index=True,
    )
    if form == "wide":
        cells = frame.drop(columns=["geocode", "total"]).to_numpy()
        scale = max(1.0, float(np.abs(cells).max(initial=0)))
        np.testing.assert_allclose(frame["total"], cells.sum(axis=1), rtol=0, atol=1e-9 * scale)
        return dict(zip(frame["geocode"], cells, strict=True))
    return frame


def _by_geocode(m, estimate):
    geo = m.table.geography
    return {("" if d == 0 else "0" + str(geo.ids[g])): estimate[g]
            for d, level in enumerate(geo.levels) for g in level}  # fmt: skip


@pytest.fixture(scope="module")
def run(measured_run):
    """:func:`measured` written (conftest.py); its post-processings that tests only read
    are conftest.py's ``release``."""
    return measured_run


def test_topdown_2020_by_state_equals_the_whole_table(measured, release):
    out = release("topdown-2020")  # nmf.postprocess(run, ..., method="topdown-2020")
    got = _estimates(out)
    with one_thread():
        whole = _by_geocode(measured, top_down_2020(measured))
    assert got.keys() == whole.keys()
    for g, row in whole.items():
        assert got[g].dtype.kind == "i" and np.array_equal(got[g], row), g
    manifest = json.loads((out / "postdp-manifest.json").read_text())
    assert len(manifest["files"]) == 2 * (1 + 2 * 5)  # long + wide; US, then 5 levels x 2 states


@pytest.fixture(scope="module")
def county_run(tmp_path_factory):
    from postdp.tables import load_strategy, measure

    t = counties_table()
    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=11)
    return nmf.write(m, tmp_path_factory.mktemp("nmf") / "run")


@pytest.fixture(scope="module")
def county_topdown(county_run, tmp_path_factory):
    """``topdown-2020`` of :func:`county_run` by ``cut_blocks`` (None: uncut), each written
    once for the tests of this file that only read it."""
    done = {}
    folder = tmp_path_factory.mktemp("topdown")

    def written(cut_blocks=None):
        if cut_blocks not in done:
            cut = {} if cut_blocks is None else {"cut_blocks": cut_blocks}
            done[cut_blocks] = nmf.postprocess(
                county_run, folder / f"cut-{cut_blocks}", method="topdown-2020", **cut
            )
        return done[cut_blocks]

    return written


@pytest.fixture(scope="module")
def uncut_cells(county_topdown):
    """:func:`released_cells` of the uncut run, read once for both cut sizes."""
    return released_cells(county_topdown())


@pytest.mark.parametrize("cut_blocks", [1, 14])
def test_cut_subtrees_give_the_same_numbers(
    county_run, county_topdown, uncut_cells, tmp_path, cut_blocks
):
    """A subtree of more than ``cut_blocks`` geounits (itself and all below it) is a task
    down to its children (their families solved as inner ones), its other children batched
    into tasks of at most ``cut_blocks`` geounits, each batch reading only its rows
    (``within``), a child cut again if still too large (1: every state, county and tract;
    each block group a task of its own; 14: counties 10001 and 10003, 10 and 4 geounits, one
    batch, county 10005's 18 cut at its tracts). Every geounit's histogram equals the uncut
    run's; each task's levels are in part-<its first geocode> files; a run killed between
    two tasks resumes to the same files.

    The kill is tried at ``cut_blocks=14`` only: its tasks take every path of the resume
    that 1's do (cut tasks at the state and county, each run again on resume and reading
    its roots from the part above; leaf tasks at levels 2 and 3, from parts, skipped when
    written), and a batch of two siblings besides, in fewer tasks."""
    from postdp.nmf import _topdown_tasks as tasks

    cut = county_topdown(cut_blocks)
    a, b = uncut_cells, released_cells(cut)
    assert a.keys() == b.keys() and len(a) == counties_table().geography.n
    for g, row in a.items():
        assert b[g] == row, g
    lengths = check_parts(cut / "wide" / "Block.parquet", batched=True)
    assert lengths == ({13} if cut_blocks == 1 else {6, 12})  # block groups; counties, tracts
    if cut_blocks == 14:
        batch = cut / "wide" / "Block.parquet" / "010" / "part-010001.parquet"
        heads = {g[:6] for g in pd.read_parquet(batch, columns=["geocode"])["geocode"]}
        assert heads == {"010001", "010003"}
    assert check_parts(cut / "wide" / "County.parquet") == {0}
    plan = json.loads((cut / "postdp-postprocess.json").read_text())
    assert plan["cut_blocks"] == cut_blocks
    county = nmf.read(county_run, states=["24"], within="024003")
    geo = county.table.geography
    assert [str(geo.ids[g]) for g in geo.levels[2]] == ["24003"]
    assert all(str(geo.ids[g]).startswith("24003") for d in (3, 4, 5) for g in geo.levels[d])
    if cut_blocks != 14:
        return  # the kill and resume: at 14 only (see above)
    real, calls = tasks._leaf_task, []

    def dies_on_the_third(*args):
        calls.append(args[1])
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a kill between two tasks
        return real(*args)

    try:
        tasks._leaf_task = dies_on_the_third
        with pytest.raises(KeyboardInterrupt):
            nmf.postprocess(
                county_run, tmp_path / "again", method="topdown-2020", cut_blocks=cut_blocks
            )
    finally:
        tasks._leaf_task = real
    assert not (tmp_path / "again" / "postdp-manifest.json").exists()
    again = nmf.postprocess(
        county_run, tmp_path / "again", method="topdown-2020", cut_blocks=cut_blocks
    )
    first = json.loads((cut / "postdp-manifest.json").read_text())["files"]
    assert json.loads((again / "postdp-manifest.json").read_text())["files"] == first
    with pytest.raises(ValidationError, match="another run, method or seed"):
        nmf.postprocess(county_run, tmp_path / "again", method="topdown-2020")  # uncut


def test_siblings_read_together_equal_each_read_alone(county_run):
    """``read(within=[...])`` of consecutive siblings, then ``below(at=)`` each: the same
    geography, answers and bounds as reading each sibling alone; geocodes outside the
    subtree or not in the run, and an ``at`` the read lacks, are refused."""
    from postdp.nmf._subtree import below, below_each

    both = nmf.read(county_run, states=["10"], within=["010001", "010003"])
    geo = both.table.geography
    assert sorted(str(geo.ids[g]) for g in geo.levels[2]) == ["10001", "10003"]
    codes = ("010003", "010001")  # below_each takes them in any order
    each = list(below_each(both, depth=2, at=[c[1:] for c in codes]))
    for code, together in zip(codes, each, strict=True):
        alone = below(nmf.read(county_run, states=["10"], within=code), depth=2)
        picked = below(both, depth=2, at=code[1:])
        for got in (picked, together):
            assert got.table.geography.ids.tolist() == alone.table.geography.ids.tolist()
            assert np.array_equal(got.table.geography.parent, alone.table.geography.parent)
            assert got.workload.measurements == alone.workload.measurements
            for u, v in zip(got.values, alone.values, strict=True):
                assert np.array_equal(u, v)
            for u, v in zip(got.bounds, alone.bounds, strict=True):
                assert np.array_equal(u.lower, v.lower) and np.array_equal(u.upper, v.upper)
    with pytest.raises(ValidationError, match="not a geounit of level 2"):
        list(below_each(both, depth=2, at=["10001", "10005"]))
    tracts = nmf.read(county_run, states=["24"], within=["024001000100", "024001000200"])
    assert tracts.table.geography.levels[3].size == 2
    with pytest.raises(ValidationError, match="inside the one subtree"):
        nmf.read(county_run, states=["10"], within=["010001", "024001"])
    with pytest.raises(ValidationError, match="no geounit '010009'"):
        nmf.read(county_run, states=["10"], within=["010001", "010009"])  # not in the run
    with pytest.raises(ValidationError, match="not a geounit of level 2"):
        below(both, depth=2, at="10005")
    with pytest.raises(ValidationError, match="one subtree"):
        below(both, depth=2)


def test_blue_by_state_equals_the_whole_table_gls(measured, release):
    out = release("project")  # nmf.postprocess(run, ..., method="project")
    got = _estimates(out)
    whole = _by_geocode(measured, postdp.project(measured, nonneg=False))
    scale = max(1.0, max(float(np.abs(r).max()) for r in whole.values()))
    for g, row in whole.items():
        np.testing.assert_allclose(got[g], row, atol=1e-8 * scale, rtol=0)


def test_blue_restore_by_state_equals_the_whole_table(measured, run, tmp_path):
    """``blue-restore`` from files, the top and then each state (one state in memory): the
    whole table's restoration to 1e-8."""
    out = nmf.postprocess(run, tmp_path / "out", method="blue-restore")
    got = _estimates(out)
    with one_thread():
        whole = _by_geocode(measured, blue_restore(measured))
    assert got.keys() == whole.keys()
    scale = max(1.0, max(float(np.abs(r).max()) for r in whole.values()))
    for g, row in whole.items():
        np.testing.assert_allclose(got[g], row, atol=1e-8 * scale, rtol=0)


def test_blue_writes_the_standard_deviation_of_every_query(measured, release):
    """``project``'s margins of error: the ``std_dev`` form (a row per geounit and query, the
    run's marginals, ``total`` and ``detailed``) holds the square roots of the whole
    table's exact GLS variances (TableProjector, itself checked against a Monte Carlo); the
    invariant state totals have 0. Real-valued, ``project`` writes no long form."""
    from postdp.postprocess import TableProjector
    from postdp.tables import Query

    out = release("project")  # nmf.postprocess(run, ..., method="project")
    projector = TableProjector(measured.table, measured.workload)
    schema = measured.workload.measurements[0].query.marginal_of.schema
    frame = _estimates(out, "std_dev")
    names = sorted({"total", "detailed", *(x.query.name for x in measured.workload.measurements)})
    geo = measured.table.geography
    codes = list(_by_geocode(measured, np.arange(geo.n)))
    assert len(frame) == len(codes) * len(names)
    got = {(g, q): np.asarray(v) for g, q, v in frame[["geocode", "query_name", "std_dev"]].values}
    for q in names:
        marginal = Query.marginal(schema, q)
        exact = _by_geocode(measured, np.sqrt(projector.query_variances(marginal)))
        shapes = frame.loc[frame["query_name"] == q, "query_shape"]
        assert all(list(s) == list(marginal.marginal_of.shape) for s in shapes)
        for g in codes:
            np.testing.assert_allclose(got[g, q], exact[g], rtol=1e-7, atol=1e-6)
    states = [g for g in codes if len(g) == 3]
    assert all(got[g, "total"][0] < 1e-6 for g in [*states, ""])
    assert not (out / "long").exists()
    plan = json.loads((out / "postdp-postprocess.json").read_text())
    assert plan["forms"] == ["wide", "std_dev", "moe"]


def test_whole_run_methods_are_written_by_partition(measured, run, tmp_path):
    out = nmf.postprocess(run, tmp_path / "out", method="blue-restore,round", seed=7)
    got = _estimates(out)
    m = nmf.read(run)  # the same geounit order as the run's, so the same random stream
    design = ReleaseDesign(m.table, m.workload, "blue-restore,round")
    with one_thread():  # as the run: the last bits of the solve, hence the rounding
        whole = _by_geocode(m, design.solve(m, rng=7))
    for g, row in whole.items():
        assert np.array_equal(got[g], row)
    long = _estimates(out, "long")
    assert (long["estimate"] != 0).all()  # zeros left out of the long form
    wide = sum(int(r.sum()) for r in got.values())
    assert int(long["estimate"].sum()) == wide


def test_an_interrupted_post_processing_resumes_to_the_same_bytes(
    run, release, tmp_path, monkeypatch
):
    full = release("topdown-2020")  # nmf.postprocess(run, ..., method="topdown-2020")
    from postdp.nmf import _topdown_tasks as tasks

    real = tasks._leaf_task
    calls = []

    def dies_on_the_second(*args):
        calls.append(args[1])
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a kill between two partitions
        return real(*args)

    monkeypatch.setattr(tasks, "_leaf_task", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        nmf.postprocess(run, tmp_path / "cut", method="topdown-2020")
    assert not (tmp_path / "cut" / "postdp-manifest.json").exists()  # not complete
    monkeypatch.setattr(tasks, "_leaf_task", real)
    nmf.postprocess(run, tmp_path / "cut", method="topdown-2020")
    for path in sorted((full / "long").rglob("part-0.parquet")):
        other = tmp_path / "cut" / path.relative_to(full)
        assert path.read_bytes() == other.read_bytes(), path
    a = json.loads((full / "postdp-manifest.json").read_text())["files"]
    b = json.loads((tmp_path / "cut" / "postdp-manifest.json").read_text())["files"]
    assert a == b


def test_another_method_in_the_same_folder_is_refused(run, release, tmp_path):
    import shutil

    shutil.copytree(release("topdown-2020"), tmp_path / "out")  # a finished topdown-2020
    with pytest.raises(ValidationError, match="another run, method or seed"):
        nmf.postprocess(run, tmp_path / "out", method="project")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    with pytest.raises(ValidationError, match="not a postdp post-processing"):
        nmf.postprocess(run, tmp_path / "junk", method="project")


@pytest.mark.parametrize("method", ["topdown-2020", "project", "blue-restore-2020"])
def test_a_bypassed_run_by_state_equals_the_whole_table(tmp_path, method):
    """A Census-like run with the spine's bypass (the District's county only in Constraint,
    the state measured with its budget too): post-processed partition by partition, the
    same numbers as the estimator on the whole run read at once."""
    run = nmf.synthetic_run(tmp_path / "quirky", states=["11"], seed=1, scale=0.05, quirks=True)
    out = nmf.postprocess(run, tmp_path / "out", method=method)
    whole_m = nmf.read(run)
    assert whole_m.budget_scale is not None
    assert [b.name for b in whole_m.bounds] == ["nurse_nva_0"]  # the Census's form, read
    got = _estimates(out)
    with one_thread():
        if method == "topdown-2020":
            whole = top_down_2020(whole_m)
        elif method == "blue-restore-2020":  # the state's BLUE read twice, then restored
            whole = blue_restore(whole_m, integral=True)
        else:
            whole = postdp.project(whole_m, nonneg=False)
    whole = _by_geocode(whole_m, whole)
    assert got.keys() == whole.keys()
    for g, row in whole.items():
        if method != "project":
            assert np.array_equal(got[g], row), g
        else:
            np.testing.assert_allclose(got[g], row, atol=1e-6 * max(1.0, np.abs(row).max()))
    county = "011001"
    np.testing.assert_allclose(got[county], got["011"], atol=1e-6)  # the state's persons


def test_a_missing_geounit_with_siblings_is_refused_before_its_solve(tmp_path):
    """A block absent from DPQuery that is not an only child (not what a spine bypass
    writes): its family has no unique least-squares split, so it is refused."""
    run = nmf.synthetic_run(tmp_path / "run", states=["11"], seed=1, scale=0.05)
    where = run / "Block.parquet" / "DPQuery" / "State=011" / "part-0.parquet"
    dp = pd.read_parquet(where)
    first = dp["geocode"].iloc[0]
    dp[dp["geocode"] != first].to_parquet(where, index=False)
    con_path = run / "Block.parquet" / "Constraint" / "State=011" / "part-0.parquet"
    con = pd.read_parquet(con_path)
    row = dp[(dp["geocode"] == first) & dp["query_name"].str.startswith("total")]
    row = row.drop(columns=["variance", "plb"])
    row = row.assign(query_name="total_nonneg_con", sign=">=", value=[[0]])  # as if bypassed
    pd.concat([con, row], ignore_index=True).to_parquet(con_path, index=False)  # still found
    with pytest.raises(ValidationError, match="only child"):
        nmf.postprocess(run, tmp_path / "out", method="topdown-2020")


def _shares_run(tmp_path, table, over, *, public=((0, "total"), (1, "total")), rng=1):
    """A run measured with exact shares (read back exactly): every level measures ``total``,
    ``hispanic * cenrace``, ``votingage`` and ``detailed`` but those in ``over`` (level ->
    {query: share})."""
    from postdp.tables import Workload, measure, pl94_schema

    full = {"total": "1/4", "hispanic * cenrace": "1/4", "votingage": "1/4", "detailed": "1/4"}
    n = table.geography.n_levels
    levels = {d: (f"1/{n}", over.get(d, full)) for d in range(n)}
    work = Workload.from_shares(levels, total="10", schema=pl94_schema(), public=list(public))
    m = measure(table, work, secure=False, rng=rng)
    return m, nmf.write(m, tmp_path / "run")


@pytest.mark.parametrize(
    "state_queries",
    [{"total": 1}, {"votingage": "1/2", "hispanic * cenrace": "1/2"}],
    ids=["total", "two-marginals"],
)
def test_blue_from_files_equals_blue_in_memory_when_the_states_do_not_identify_the_cells(
    tmp_path, state_queries
):
    """The states' queries do not identify their cells (their counties' do): the BLUE of
    the whole table exists, and the run's, solved state by state, is the same numbers (the
    top's basis was once taken from a tree of the top alone, which refused its states as
    unidentified leaves)."""
    from postdp.postprocess import TableProjector
    from postdp.tables import Query

    m, run = _shares_run(tmp_path, counties_table(), {1: state_queries})
    out = nmf.postprocess(run, tmp_path / "out", method="project")
    got = _estimates(out)
    with one_thread():
        whole = _by_geocode(m, ReleaseDesign(m.table, m.workload, "project").solve(m))
    assert got.keys() == whole.keys()
    scale = max(1.0, max(float(np.abs(r).max()) for r in whole.values()))
    for g, row in whole.items():
        np.testing.assert_allclose(got[g], row, atol=1e-9 * scale, rtol=0, err_msg=g)
    schema = m.workload.measurements[0].query.marginal_of.schema
    sd = _by_geocode(
        m,
        np.sqrt(TableProjector(m.table, m.workload).query_variances(
            Query.marginal(schema, "detailed")).clip(0)),
    )  # fmt: skip
    frame = _estimates(out, "std_dev")
    frame = frame[frame["query_name"] == "detailed"]
    for g, v in zip(frame["geocode"], frame["std_dev"], strict=True):
        np.testing.assert_allclose(np.asarray(v), sd[g], rtol=1e-7, atol=1e-7, err_msg=g)


def test_topdown_2020_refuses_a_root_whose_queries_do_not_identify_the_cells(tmp_path):
    """The nation measured by ``total`` and ``votingage`` only: its least squares has no
    unique answer (production measured ``detailed`` there); refused in one line, in memory
    and from the files, not a LinAlgError from the solver."""
    from postdp.postprocess import check_top_down_2020

    m, run = _shares_run(tmp_path, counties_table(), {0: {"total": "1/2", "votingage": "1/2"}})
    for attempt in (
        lambda: top_down_2020(m),
        lambda: check_top_down_2020(m.table, m.workload),
        lambda: nmf.postprocess(run, tmp_path / "out", method="topdown-2020"),
    ):
        with pytest.raises(ValidationError, match="root's noisy queries") as err:
            attempt()
        assert "\n" not in str(err.value) and "total, votingage" in str(err.value)
    assert not (tmp_path / "out").exists()  # refused before the output folder is made
    below_root = nmf.below(nmf.read(run, states=["010"]))
    fixed = top_down_2020(_shares_run(tmp_path / "b", counties_table(), {})[0])[1]
    assert top_down_2020(below_root, root=fixed)[0].tolist() == fixed.tolist()  # root given


def test_a_run_refused_while_solving_leaves_no_output_of_this_call(run, tmp_path):
    """A subtree of the run refused after the output folder was made: a RunError naming the
    run, a folder this call made removed (and the parents it made), an empty folder it was
    given emptied; the run repaired, the same call succeeds there."""
    import shutil

    from postdp.nmf.runs import RunError

    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    tract = broken / "Tract.parquet" / "DPQuery" / "State=011" / "part-0.parquet"
    kept = tract.read_bytes()
    tract.unlink()
    with pytest.raises(RunError) as err:
        nmf.postprocess(broken, tmp_path / "made" / "out", method="project")
    assert str(err.value).startswith(f"run {str(broken)!r}: ") and "\n" not in str(err.value)
    assert not (tmp_path / "made").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError):
        nmf.postprocess(broken, tmp_path / "empty", method="topdown-2020")
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
    tract.write_bytes(kept)
    nmf.postprocess(broken, tmp_path / "empty", method="topdown-2020")
    assert (tmp_path / "empty" / "postdp-manifest.json").is_file()


@pytest.mark.parametrize("method", ["project", "topdown-2020"])
def test_pandas_reads_an_output_level_with_string_geocodes_and_totals(release, method):
    """``pd.read_parquet`` of a level's folder: ``geocode`` as written (strings keeping
    the AIAN flag's 0), no integer ``State`` column inferred from the partition folders, a
    ``total`` equal to the row's sum at every geounit; a real-valued method (``project``)
    writes no long form (it would list every cell, negative ones included), an integral
    one a long form without zero cells."""
    out = release(method)  # nmf.postprocess(run, ..., method=method)
    for level in ("County", "Block"):
        frame = pd.read_parquet(out / "wide" / f"{level}.parquet")
        assert list(frame.columns[:2]) == ["geocode", "total"] and "State" not in frame
        assert all(isinstance(g, str) and g.startswith("0") for g in frame["geocode"])
        assert {g[:3] for g in frame["geocode"]} == {"010", "011"}
        cells = frame.drop(columns=["geocode", "total"]).to_numpy()
        scale = max(1.0, float(np.abs(cells).max(initial=0)))
        np.testing.assert_allclose(frame["total"], cells.sum(axis=1), rtol=0, atol=1e-9 * scale)
        assert frame["total"].dtype.kind == ("f" if method == "project" else "i")
    if method == "project":
        assert (cells < 0).any()  # real-valued: its cells hold negative estimates
        assert not (out / "long").exists()
        assert not any(
            "long/" in f for f in json.loads((out / "postdp-manifest.json").read_text())["files"]
        )
    else:
        long = pd.read_parquet(out / "long" / "Block.parquet")
        assert "State" not in long and (long["estimate"] > 0).all()


# -- on Dask (last in this file: the cluster's worker process lives for these tests only) --
@pytest.fixture(scope="module")
def client():
    """One LocalCluster for this file's Dask tests (its worker started once)."""
    with dask_client() as started:
        yield started


@pytest.mark.processes
def test_dask_local_cluster_gives_the_same_bits(client, tmp_path):
    """A whole synthetic state (a twentieth of DC, 841 blocks): Dask's workers run BLAS
    single-threaded, so the in-process run must too, or ties in the rounder can break
    differently (seen on a many-core machine: 718 block cells of the whole District off by
    one before the runs were held to one thread; on 2 cores the bits agree either way)."""
    run = nmf.synthetic_run(tmp_path / "run", states=["11"], seed=0, scale=0.05)
    local = nmf.postprocess(run, tmp_path / "local", method="topdown-2020")
    remote = nmf.postprocess(run, tmp_path / "dask", method="topdown-2020", scheduler=client)
    a = json.loads((local / "postdp-manifest.json").read_text())["files"]
    b = json.loads((remote / "postdp-manifest.json").read_text())["files"]
    assert a == b


@pytest.mark.processes
def test_dask_runs_the_county_tasks_of_cut_states(client, county_run, county_topdown, tmp_path):
    """A cut state's county tasks are submitted as its state task ends: the same files as
    in-process (``cut_blocks=5``: cut tasks at the state, county and tract, whose children
    are submitted as they end, and batches of one and two siblings)."""
    local = county_topdown(5)
    seen = []
    remote = nmf.postprocess(
        county_run,
        tmp_path / "dask",
        method="topdown-2020",
        cut_blocks=5,
        scheduler=client,
        progress=lambda stage, done, total: seen.append((stage, done, total)),
    )
    a = json.loads((local / "postdp-manifest.json").read_text())["files"]
    assert json.loads((remote / "postdp-manifest.json").read_text())["files"] == a
    assert seen[-1][0] == "subtrees" and seen[-1][1] == seen[-1][2] > 2 + 5  # cut again

"""Measuring a nation state by state: the run of the whole table, one state in memory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp import nmf
from postdp.errors import ValidationError
from postdp.nmf import synthetic_population
from postdp.tables import load_strategy

from .conftest import check_parts, counties_table, released_cells, small_table


def _tables(seed=0):
    table = small_table(seed)

    def one(state):
        _, subs = table.split_at(1)
        ids = [str(s.geography.ids[s.geography.root]) for s in subs]
        return _rooted(subs[ids.index(state)])

    return table, one


def _rooted(sub):
    """A state's subtree under a nation of its own (the shape tables(state) returns)."""
    from postdp import Hierarchy
    from postdp.tables import Table

    geo = sub.geography
    ids = ["US", *(str(i) for i in geo.ids)]
    parents = [None, "US", *(str(geo.ids[p]) for p in geo.parent[1:])]
    nation = Hierarchy.from_parents(ids, np.asarray(parents, dtype=object))
    order = [list(map(str, geo.ids[geo.leaves])).index(str(i)) for i in nation.ids[nation.leaves]]
    return Table(nation, sub.categories, sub.dense_cells()[order])


@pytest.mark.statistical
@pytest.mark.parametrize(("state", "cut"), [("11", 100_000), ("10", 1)])
def test_state_by_state_draws_have_the_designs_law(tmp_path, state, cut):
    """The run reads back as the whole table's workload, and the detailed answers of the
    blocks (and the tracts' totals) minus the truth have mean 0 and the mechanism's
    variance (z = 4 over the sample's own standard errors; a twentieth of DC, 841 blocks x
    2,016 cells, in one piece; a twentieth of Delaware measured county by county,
    ``cut_blocks=1``)."""
    s = load_strategy("pl94-2020-persons")
    run = nmf.measure_by_state(
        lambda st: synthetic_population(states=[st], seed=0, scale=0.05), [state],
        tmp_path / "run", strategy=s, secure=False, rng=7, cut_blocks=cut,
    )  # fmt: skip
    got = nmf.read(run)
    truth = synthetic_population(states=[state], seed=0, scale=0.05)
    assert got.workload == s.workload(truth)
    geo, tgeo = got.table.geography, truth.geography
    for level, name in ((5, "detailed"), (3, "total")):
        k = next(
            i
            for i, m in enumerate(got.workload.measurements)
            if m.level == level and m.query.name == name
        )
        mech = got.workload.measurements[k].mechanism
        units = geo.ids[geo.levels[level]]
        where = {str(b): i for i, b in enumerate(tgeo.ids[tgeo.levels[level]])}
        true = truth.level_detailed(level)
        rows = np.array([where[str(b)] for b in units])
        exact = np.asarray(true[rows].todense())
        residual = got.values[k] - (
            exact if name == "detailed" else exact.sum(axis=1, keepdims=True)
        )
        n = residual.size
        mean, var = residual.mean(), residual.var()
        assert abs(mean) <= 4 * np.sqrt(var / n)
        fourth = ((residual - mean) ** 4).mean()
        assert abs(var - mech.variance()) <= 4 * np.sqrt((fourth - var**2) / n)
    lengths = check_parts(run / "Block.parquet" / "DPQuery")
    if cut > 1:
        assert lengths == {0}  # DC in one piece
    else:  # cut down to the block groups (a tract of one block stays whole)
        assert 13 in lengths and lengths <= {12, 13}


def test_state_by_state_equals_the_layout_of_one_write(tmp_path):
    table, one = _tables()
    s = load_strategy("pl94-2020-persons")
    run = nmf.measure_by_state(one, ["10", "11"], tmp_path / "run", strategy=s, secure=False, rng=3)
    got = nmf.read(run)
    assert (
        got.workload == s.workload(table) and got.workload.exact_rho == s.workload(table).exact_rho
    )
    geo = got.table.geography
    for level_a, level_b in zip(geo.levels, table.geography.levels, strict=True):
        assert sorted(map(str, geo.ids[level_a])) == sorted(map(str, table.geography.ids[level_b]))
    # the public state totals are exact
    i = next(i for i, m in enumerate(got.workload.measurements) if m.public and m.level == 1)
    truth = table.counts()[table.geography.levels[1], 0]
    assert sorted(got.values[i][:, 0].tolist()) == sorted(truth.astype(float).tolist())
    assert nmf.subtrees(run) == ["010", "011"]


def test_a_run_measured_by_county_reads_and_post_processes_whole(tmp_path):
    """Every state cut (``cut_blocks=1``): one file per county below the counties' level;
    the run reads back as the whole table's geography and workload (exact shares), and
    topdown-2020, cut or not, keeps the states' invariant totals, and cut gives every
    geounit the uncut histogram. Cut at ``cut_blocks=5``: its 12 tasks read the run's
    per-county and per-block-group files one subtree at a time and as a batch (counties
    10001 and 10003); ``cut_blocks=1`` (27 tasks of one subtree each) reads them no other
    way."""
    table = counties_table()
    _, subs = table.split_at(1)
    by_id = {str(x.geography.ids[x.geography.root]): _rooted(x) for x in subs}
    s = load_strategy("pl94-2020-persons")
    run = nmf.measure_by_state(
        by_id.__getitem__, ["10", "24"], tmp_path / "run", strategy=s, secure=False, rng=4,
        cut_blocks=1,
    )  # fmt: skip
    assert check_parts(run / "Tract.parquet" / "DPQuery") == {6}  # the counties' files
    assert 13 in check_parts(run / "Block.parquet" / "DPQuery")  # block groups' files
    got = nmf.read(run)
    assert got.workload == s.workload(table)
    assert got.workload.exact_rho == s.workload(table).exact_rho
    geo = got.table.geography
    for level_a, level_b in zip(geo.levels, table.geography.levels, strict=True):
        assert sorted(map(str, geo.ids[level_a])) == sorted(map(str, table.geography.ids[level_b]))
    truth = dict(zip(map(str, table.geography.ids), table.counts()[:, 0], strict=True))
    released = []
    for cut in (100_000, 5):
        out = nmf.postprocess(run, tmp_path / f"out{cut}", method="topdown-2020", cut_blocks=cut)
        states = pd.read_parquet(out / "wide" / "State.parquet")
        for code, row, total in zip(
            states["geocode"],
            states.drop(columns=["geocode", "total"]).to_numpy(),
            states["total"],
            strict=True,
        ):
            assert row.sum() == total == truth[code[1:]]
        released.append(released_cells(out))
    whole, cut = released
    assert whole.keys() == cut.keys() and len(whole) == table.geography.n
    for code, row in whole.items():
        assert cut[code] == row, code


def test_state_by_state_refuses_before_drawing(tmp_path):
    _, one = _tables()
    s = load_strategy("pl94-2020-persons")
    with pytest.raises(ValidationError, match="once"):
        nmf.measure_by_state(one, ["10", "10"], tmp_path / "a", strategy=s, secure=False, rng=0)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    with pytest.raises(ValidationError, match="not an empty folder"):
        nmf.measure_by_state(one, ["10"], tmp_path / "b", strategy=s, secure=False, rng=0)
    with pytest.raises(ValidationError, match="study path"):
        nmf.measure_by_state(one, ["10"], tmp_path / "c", strategy=s, secure=True, rng=0)
    for bad in ({"population_seed": 1.5}, {"population_seed": 1, "population_scale": 0}):
        with pytest.raises((TypeError, ValidationError), match="population_s"):
            nmf.measure_by_state(one, ["10"], tmp_path / "d", strategy=s, secure=False, **bad)
        assert not (tmp_path / "d").exists()  # refused before anything was drawn or made


def test_a_workers_subtrees_go_in_batches_of_at_most_the_cut():
    """On a Dask worker the children of a cut subtree are tasks of consecutive siblings of
    at most ``cut_blocks`` blocks in all, each child once and in order; a child above the
    cut goes alone (it is cut again)."""
    from types import SimpleNamespace

    from postdp.nmf.measure import _batches

    sizes = [3, 4, 2, 9, 1, 1, 1, 6, 5, 5]
    jobs = [
        ((SimpleNamespace(geography=SimpleNamespace(leaves=np.arange(s))), k), {})
        for k, s in enumerate(sizes)
    ]
    batches = _batches(jobs, 6)
    assert [job for batch in batches for job in batch] == jobs
    got = [[sizes[job[0][1]] for job in batch] for batch in batches]
    assert got == [[3], [4, 2], [9], [1, 1, 1], [6], [5], [5]]
    assert _batches(jobs, 100) == [jobs]

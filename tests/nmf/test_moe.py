"""Margins of error of the published tables' rows (the ``moe`` form of postdp.nmf.postprocess):
exact for ``project`` (each row's GLS variance, its cells' covariances included), from AMC
replicates for the integral methods; 90%, 0 for an invariant."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from postdp import nmf
from postdp.data import pl94_tables
from postdp.nmf._output import MOE, Z90, form_path, moe_columns, moe_tables, sibling
from postdp.postprocess import TableProjector, top_down_2020
from postdp.tables import measure

P_TABLES = [pl94_tables()[n] for n in ("P1", "P2", "P3", "P4", "P5")]


def _frames(out, form):
    """{relative partition file: frame} of one form."""
    root = out / form
    return {
        p.relative_to(root).as_posix(): pd.read_parquet(p)
        for p in sorted(root.rglob("part-*.parquet"))
    }


def _geocode(geo, g):
    return "" if g == geo.root else "0" + str(geo.ids[g])


def _truth(table):
    """Every geounit's detailed histogram (rows in id order)."""
    geo = table.geography
    cells = np.zeros((geo.n, table.categories.leaves.size))
    cells[geo.leaves] = table.dense_cells()
    return geo.aggregate(cells.T).T


def test_the_persons_schema_gets_p1_to_p5_and_the_units_schema_h1():
    from postdp.tables import Attribute, Schema, pl94_schema, units_schema

    assert [t.name for t in moe_tables(pl94_schema())] == ["P1", "P2", "P3", "P4", "P5"]
    assert [t.name for t in moe_tables(units_schema())] == ["H1"]
    assert moe_tables(Schema([Attribute("a", ["x", "y"])])) == []
    assert moe_columns(P_TABLES)[:2] == ["P1_001N_moe", "P1_002N_moe"]


def test_sibling_is_form_path_of_another_form(tmp_path):
    for level, code, part in [
        ("US", None, None),
        ("County", "011", None),
        ("Block", "011", "11001"),
    ]:
        wide = form_path(tmp_path, "wide", level, code, part)
        assert sibling(tmp_path, wide, MOE) == form_path(tmp_path, MOE, level, code, part)


def test_blue_writes_every_published_rows_exact_moe(measured, release):
    """The moe form of ``project``: one row per geounit in the wide form's partitions, a
    ``<variable>_moe`` column per P1-P5 row, equal to 1.645 x the square root of the whole
    table's exact GLS variance of the row (TableProjector.table_variances, itself checked
    against the dense GLS covariance); the invariant totals' margins are exactly 0."""
    out = release("project")  # nmf.postprocess(run of measured, ..., method="project")
    wide, moe = _frames(out, "wide"), _frames(out, MOE)
    assert wide.keys() == moe.keys()
    projector = TableProjector(measured.table, measured.workload)
    exact = Z90 * np.sqrt(np.concatenate([projector.table_variances(t) for t in P_TABLES], axis=1))
    geo = measured.table.geography
    row = {_geocode(geo, g): g for g in range(geo.n)}
    columns = ["geocode", *moe_columns(P_TABLES)]
    seen = 0
    for key, frame in moe.items():
        assert (
            list(frame.columns) == columns
            and frame["geocode"].tolist() == wide[key]["geocode"].tolist()
        )
        assert all(frame[c].dtype == np.float64 for c in columns[1:])
        want = exact[[row[g] for g in frame["geocode"]]]
        np.testing.assert_allclose(frame[columns[1:]].to_numpy(), want, rtol=1e-7, atol=1e-7)
        seen += len(frame)
    assert seen == geo.n
    both = pd.concat(moe.values(), ignore_index=True).set_index("geocode")
    # the nation, the states and each state's only county: total population invariant
    invariant = ["", "010", "011", "010001", "011001"]
    assert (both.loc[invariant, ["P1_001N_moe", "P2_001N_moe"]] == 0).all().all()
    assert (both.drop(index=invariant)["P1_001N_moe"] > 0).all()
    assert not (out / "long").exists()  # a real-valued method: its wide form holds every cell
    plan = json.loads((out / "postdp-postprocess.json").read_text())
    assert plan["forms"] == ["wide", "std_dev", "moe"]
    files = json.loads((out / "postdp-manifest.json").read_text())["files"]
    assert sum(f.startswith("moe/") for f in files) == len(moe)


@pytest.mark.statistical
def test_blue_moe_covers_the_truth_90_percent(measured):
    """Against the synthetic truth, over 40 draws of the design: the share of P1-P5 rows
    (every geounit, invariants left out) whose |estimate - truth| <= moe is 0.90 within
    z = 3 standard errors of the draws' shares (each draw's share is independent)."""
    table, work = measured.table, measured.workload
    projector = TableProjector(table, work)
    moe = Z90 * np.sqrt(np.concatenate([projector.table_variances(t) for t in P_TABLES], 1))
    noisy = moe > 0
    truth = np.concatenate([t.apply(_truth(table)) for t in P_TABLES], axis=1)
    draws = projector(measure(table, work, secure=False, rng=20260717, size=40))
    shares = []
    for est in draws:
        rows = np.concatenate([t.apply(est) for t in P_TABLES], axis=1)
        shares.append(np.mean(np.abs(rows - truth)[noisy] <= moe[noisy]))
    shares = np.asarray(shares)
    se = shares.std(ddof=1) / np.sqrt(shares.size)
    assert abs(shares.mean() - 0.9) <= 3 * se, (shares.mean(), se)
    assert noisy.sum() > 1000  # rows pooled per draw


@pytest.mark.statistical
def test_amc_of_a_linear_method_estimates_its_exact_variance(measured):
    """For ``project`` (linear, unbiased), the AMC's mean square error of every P1 and P5 row
    is an unbiased estimate of the row's exact GLS variance: 12 independent AMCs of 2
    replicates, each one's mean over the rows of (moe / 1.645)^2 / variance, average to 1
    within z = 3 standard errors of those 12 values."""
    tables = [pl94_tables()["P1"], pl94_tables()["P5"]]
    stand_in = top_down_2020(measured)  # any nonnegative whole table stands in
    projector = TableProjector(measured.table, measured.workload)
    exact = np.concatenate([projector.table_variances(t) for t in tables], axis=1)
    noisy = exact > 0
    ratios = []
    for j in range(12):
        _, _, moe = nmf.amc(
            measured,
            stand_in,
            method="project",
            replicates=2,
            rng=100 + j,
            queries=["total"],
            tables=tables,
        )
        assert (moe[~noisy] < 1e-6).all()  # the invariants stay put in every replicate
        ratios.append(np.mean((moe[noisy] / Z90) ** 2 / exact[noisy]))
    ratios = np.asarray(ratios)
    se = ratios.std(ddof=1) / np.sqrt(ratios.size)
    assert abs(ratios.mean() - 1) <= 3 * se, (ratios.mean(), se)


def test_postprocess_amc_writes_the_moe_form(measured, release):
    """``--amc`` of an integral method: the moe form in the wide form's partitions, the
    P1-P5 columns, every geounit once, the invariant totals 0, the others positive;
    ``totals.parquet`` says ``moe`` (one word for a 90% margin)."""
    out = release("topdown-2020", amc=3, seed=4)  # nmf.postprocess(run of measured, ...)
    wide, moe = _frames(out, "wide"), _frames(out, MOE)
    assert wide.keys() == moe.keys()
    for key, frame in moe.items():
        assert list(frame.columns) == ["geocode", *moe_columns(P_TABLES)]
        assert frame["geocode"].tolist() == wide[key]["geocode"].tolist()
    both = pd.concat(moe.values(), ignore_index=True).set_index("geocode")
    assert len(both) == measured.table.geography.n
    invariant = ["", "010", "011", "010001", "011001"]  # a state's only county: its total
    assert (both.loc[invariant, "P1_001N_moe"] == 0).all()
    assert (both.drop(index=invariant)["P1_001N_moe"] > 0).all()
    totals = pd.read_parquet(out / "amc" / "totals.parquet")
    assert "moe" in totals.columns and "moe90" not in totals.columns
    by_geocode = dict(zip(totals["geo_id"], totals["moe"], strict=True))
    geo = measured.table.geography
    for g in range(geo.n):  # the totals' margins are P1_001N's
        assert by_geocode[str(geo.ids[g])] == pytest.approx(
            both.loc[_geocode(geo, g), "P1_001N_moe"]
        )
    plan = json.loads((out / "postdp-postprocess.json").read_text())
    assert plan["forms"] == ["long", "wide", "moe"]


@pytest.mark.statistical
def test_amc_margins_cover_the_truth_as_a_t_interval(measured):
    """Coverage of AMC margins against the truth. For a linear unbiased method the AMC's
    mean square of K replicates is sigma^2 chi2_K / K, drawn from its own noise and so
    independent of the release's error N(0, sigma^2): a row is covered with probability
    P(|t_K| <= 1.645), 0.7583 for K = 2 (the Student t law; Gaussian approximation of the
    discrete Gaussian noise). Over 16 independent (release, AMC) pairs, the mean share of
    covered P1 and P5 rows equals it within z = 3 standard errors of the 16 shares.

    K = 2 (the fewest replicates, half the solves of K = 4): the 16 shares' standard
    error is 0.0032 (0.0028 with K = 4), so margins 3% too wide or narrow move the mean
    share by 3 standard errors (2.5% with K = 4), and the t law's distance from the
    alternatives grows: a Gaussian coverage (0.90) is 44 standard errors away (27 with
    K = 4), margins from K - 1 degrees of freedom (0.851) 35 (17)."""
    from scipy import stats

    tables = [pl94_tables()["P1"], pl94_tables()["P5"]]
    table, work = measured.table, measured.workload
    projector = TableProjector(table, work)
    noisy = np.concatenate([projector.table_variances(t) for t in tables], axis=1) > 0
    truth = np.concatenate([t.apply(_truth(table)) for t in tables], axis=1)
    stand_in = top_down_2020(measured)  # the AMC of a linear method does not read it
    k = 2
    shares = []
    for j in range(16):
        draw = measure(table, work, secure=False, rng=3000 + j)
        rows = np.concatenate([t.apply(projector(draw)) for t in tables], axis=1)
        _, _, moe = nmf.amc(
            draw, stand_in, method="project", replicates=k, rng=4000 + j, queries=["total"],
            tables=tables,
        )  # fmt: skip
        shares.append(np.mean(np.abs(rows - truth)[noisy] <= moe[noisy]))
    shares = np.asarray(shares)
    theory = 2 * stats.t.cdf(Z90, df=k) - 1
    se = shares.std(ddof=1) / np.sqrt(shares.size)
    assert abs(shares.mean() - theory) <= 3 * se, (shares.mean(), theory, se)

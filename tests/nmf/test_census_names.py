"""The Census's constraint names in the runs postdp writes and reads (issue 41).

What the published readers expect, read in their sources (facts in our own words):

- uscensusbureau/DAS_2020_Redistricting_Production_Code: ``configs/production/pl94/
  person_default.ini`` puts ``hhgq_total_lb``, ``hhgq_total_ub`` and ``nurse_nva_0`` on the
  blocks, ``person_US.ini`` ``hhgq_total_lb``/``_ub`` on the states and ``total`` on the
  nation; ``programs/nodes/nodes.py`` (``addInReduce``, ``makeAdditionalInvariantsConstraints``)
  sums the block constraints up to every level, so every geounit of every level has the
  three, the nation ``total`` as well (the state totals were held as a joint row over a
  state's AIAN and non-AIAN parts, ``programs/optimization/optimizer.py``, not as a row of
  the State files). Signs (``Constraints_PL94.py``): lb ``>=``, ub ``<=`` (99,999 per
  facility, ``querybase_constraints.py``), ``nurse_nva_0`` and ``total`` ``=``. The files
  add the 4-character suffix ``_con`` (shared/research/pl94-2020-design.md section 2).
- google-research/census-bluedown: ``constants.py`` names ``hhgq_total_ub_con`` and
  ``hhgq_total_lb_con``; ``root.py``, ``constrain.py`` and ``nonlinear_postprocessing.py``
  look both up by exact name for every geounit (the nation, each state folder's one row,
  every child), read the 8 values by group-quarters type, take an upper bound of 0 as a
  zero and impose every upper bound as a limit on the sum (``nonlinear_solver.py``); it
  reads no ``nurse_nva_0_con`` (the zero is built in, ``MULTIFEATURE_ZERO_SEQUENCE``).
- uscensusbureau/DAS_2020_GLS_Uncertainty_Evaluation ``GLS/main_two_pass_alg.py``: a
  level's geounits are those of its ``Constraint`` rows, and geounits without one are
  dropped by an inner join; ``convert_constr_to_query`` keeps ``total_con``/``pl94_con``
  (as a near-exact total, where asked), ignores ``>=`` rows and ``<=`` rows with every
  value positive, and turns a ``<=`` row with zeros into a zero constraint on the query
  named by the attribute columns that are not ``*`` (joined by `` * ``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import sparse

from postdp import nmf
from postdp.data import facility_bounds, synthetic_facilities
from postdp.nmf import synthetic_population
from postdp.tables import Marginal, load_strategy, measure, pl94_schema

from .conftest import counties_table

LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")
ATTRIBUTES = ("hhgq", "votingage", "hispanic", "cenrace")

#: The Census's Constraint names of the 2020 persons run (US), per level, and their signs
#: (sources in the module docstring; shared/research/pl94-2020-design.md sections 1.4, 2).
STRUCTURAL = {"hhgq_total_lb_con": ">=", "hhgq_total_ub_con": "<=", "nurse_nva_0_con": "="}
PUBLISHED = {level: dict(STRUCTURAL) for level in LEVELS}
PUBLISHED["US"]["total_con"] = "="
#: What postdp writes beyond the list: the state totals its presets hold invariant, as
#: ``total_con`` rows (read by the GLS code as a total where asked, passed over by BlueDown).
EXTRA = {"State": {"total_con"}}


def _constraints(run, level) -> pd.DataFrame:
    where = run / f"{level}.parquet" / "Constraint"
    return pd.concat(
        [pq.read_table(f).to_pandas() for f in sorted(where.rglob("*.parquet"))],
        ignore_index=True,
    )


def _dpquery_geocodes(run, level) -> set[str]:
    files = sorted((run / f"{level}.parquet" / "DPQuery").rglob("*.parquet"))
    return {g for f in files for g in pq.read_table(f).column("geocode").to_pylist()}


@pytest.fixture(scope="module")
def dc_run(tmp_path_factory):
    """The persons preset with the structural bounds on the District (one county, the
    case written one-sided before; a twentieth of it, 841 blocks), measured county by county
    and tract by tract."""
    table = synthetic_population(states=["11"], seed=0, scale=0.05)
    run = nmf.measure_by_state(
        lambda s: synthetic_population(states=[s], seed=0, scale=0.05),
        ["11"],
        tmp_path_factory.mktemp("names") / "run",
        strategy=load_strategy("pl94-2020-persons"),
        secure=False,
        rng=2,
        cut_blocks=150,
        bounds=lambda t: facility_bounds(synthetic_facilities(t), t.geography),
    )
    return run, table


def test_every_level_carries_the_census_constraint_names(dc_run):
    """(a) Per level, postdp's constraint names are the Census's (and the state totals),
    every geounit has each structural row once, and the signs are the Census's."""
    run, _ = dc_run
    for level in LEVELS:
        con = _constraints(run, level)
        names = set(con["query_name"])
        assert names == set(PUBLISHED[level]) | EXTRA.get(level, set()), (level, names)
        geocodes = set(con["geocode"])
        assert _dpquery_geocodes(run, level) <= geocodes  # GLS: no geounit dropped
        for name in STRUCTURAL:
            rows = con[con["query_name"] == name]
            assert rows["geocode"].is_unique and set(rows["geocode"]) == geocodes, (level, name)
        for name in ("hhgq_total_lb_con", "hhgq_total_ub_con", "total_con"):
            if name in names:
                sign = PUBLISHED["US"][name]  # the Census's sign of each name
                assert set(con.loc[con["query_name"] == name, "sign"]) == {sign}, (level, name)
        # postdp's schema has no gqNursingTotal / nonvoting recodes: the same zero is an
        # upper bound of 0 on the (nursing, under 18) count of hhgq * votingage
        nurse = con[con["query_name"] == "nurse_nva_0_con"]
        assert set(nurse["sign"]) == {"<="}
        assert {tuple(v) for v in nurse["value"]} == {(2**52,) * 6 + (0,) + (2**52,) * 9}


def _node_of(geo) -> dict[str, int]:
    """Each geounit's NMF geocode (the flag 0 and its id; the root's empty)."""
    return {("" if node == geo.root else "0" + str(geo.ids[node])): node for node in range(geo.n)}


def _rewrite(path, con: pd.DataFrame) -> None:
    pq.write_table(pa.Table.from_pandas(con, preserve_index=False), path)


def test_the_reader_gets_the_same_bounds_from_the_census_form(tmp_path):
    """(b) The lb/ub pair at the nation, states and counties (as postdp now writes it, and
    with the Census's own values, 99,999 per facility) reads back as the bounds measured,
    each stated as before; postdp's earlier one-sided ``hhgq_total_con`` reads the same."""
    t = counties_table(seed=3)
    geo = t.geography
    facilities = synthetic_facilities(t, seed=4)
    bounds = facility_bounds(facilities, geo)
    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=6,
                bounds=bounds)  # fmt: skip
    run = nmf.write(m, tmp_path / "run", strategy="pl94-2020-persons")
    for level in ("US", "State", "County"):
        names = set(_constraints(run, level)["query_name"])
        assert {"hhgq_total_lb_con", "hhgq_total_ub_con"} <= names, (level, names)
        assert "hhgq_total_con" not in names

    def check(back) -> None:
        order = pd.Index([str(i) for i in back.table.geography.ids]).get_indexer(
            [str(i) for i in geo.ids]
        )
        assert [(b.name, b.query, b.sides) for b in back.bounds] == [
            ("hhgq_total", "hhgq", "both"),
            ("nurse_nva_0", "hhgq * votingage", "upper"),
        ]
        for got, want in zip(back.bounds, bounds, strict=True):
            assert np.array_equal(got.lower[order], want.lower)
            assert np.array_equal(got.upper[order], want.upper)

    check(nmf.read(run))

    # the Census's values at every level: lb the facilities (households 0), ub 99,999 each
    leaf = np.zeros((geo.n, facilities.shape[1]), dtype=np.int64)
    leaf[geo.leaves] = facilities
    units = geo.aggregate(leaf.T).T
    census = {"hhgq_total_lb_con": units * [0, 1, 1, 1, 1, 1, 1, 1],
              "hhgq_total_ub_con": units * 99999}  # fmt: skip
    node = _node_of(geo)
    for path in sorted(run.glob("*.parquet/Constraint/**/*.parquet")):
        con = pq.read_table(path).to_pandas()
        for name, values in census.items():
            at = con["query_name"] == name
            con.loc[at, "value"] = pd.Series(
                [values[node[g]].tolist() for g in con.loc[at, "geocode"]], index=con.index[at]
            )
        _rewrite(path, con)
    check(nmf.read(run))

    # postdp's earlier form: one >= row named hhgq_total_con at the nation and the states
    for level in ("US", "State"):
        for path in sorted((run / f"{level}.parquet" / "Constraint").rglob("*.parquet")):
            con = pq.read_table(path).to_pandas()
            con = con[con["query_name"] != "hhgq_total_ub_con"].copy()
            con.loc[con["query_name"] == "hhgq_total_lb_con", "query_name"] = "hhgq_total_con"
            _rewrite(path, con)
    check(nmf.read(run))

    # the Census's own nurse_nva_0_con: "=" 0 on its recodes gqNursingTotal x nonvoting, one
    # value per geounit (postdp wrote "<=" on hhgq x votingage): the same zero is read
    for path in sorted(run.glob("*.parquet/Constraint/**/*.parquet")):
        con = pq.read_table(path).to_pandas()
        at = con["query_name"] == "nurse_nva_0_con"
        assert at.any()
        con.loc[at, ["hhgq", "votingage", "sign"]] = ["gqNursingTotal", "nonvoting", "="]
        con.loc[at, "query_shape"] = pd.Series([[1, 1, 1, 1]] * at.sum(), index=con.index[at])
        con.loc[at, "value"] = pd.Series([[0]] * at.sum(), index=con.index[at])
        _rewrite(path, con)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read, not left out with a warning
        check(nmf.read(run))


def _truth(table, query: str) -> dict[str, np.ndarray]:
    """Every geounit's true counts of a marginal, by NMF geocode."""
    geo = table.geography
    matrix = sparse.csr_array(Marginal(pl94_schema(), query).count_matrix())
    node, out = _node_of(geo), {}
    codes = {n: g for g, n in node.items()}
    for d in range(geo.n_levels):
        counts = sparse.csr_array(table.level_detailed(d) @ matrix.T).toarray()
        for k, n in enumerate(geo.levels[d]):
            out[codes[int(n)]] = counts[k]
    return out


def _bluedown_accepts(run, table) -> None:
    """What census-bluedown's reading asks of a run (module docstring): the pair by exact
    name for every geounit of every level, one row each (a state folder's ``.item()``), 8
    values by group-quarters type, and the true counts inside them (it imposes every upper
    bound, and takes a zero upper bound as a zero)."""
    truth = _truth(table, "hhgq")
    for level in LEVELS:
        con = _constraints(run, level)
        geocodes = sorted(_dpquery_geocodes(run, level) | set(con["geocode"]))
        counts = np.array([truth[g] for g in geocodes])
        for name in ("hhgq_total_lb_con", "hhgq_total_ub_con"):
            rows = con[con["query_name"] == name].set_index("geocode")
            assert rows.index.is_unique and sorted(rows.index) == geocodes, (level, name)
            values = np.array([list(rows.loc[g, "value"]) for g in geocodes], dtype=float)
            assert values.shape == (len(geocodes), 8)
            inside = counts >= values if name.endswith("_lb_con") else counts <= values
            assert inside.all(), (level, name)


def _gls_accepts(run, table) -> None:
    """What the Census GLS code's ``convert_constr_to_query`` asks of every row (module
    docstring): a 4-character suffix, whole values (it casts them to int64), and a ``<=``
    row with zeros naming, by its attribute columns, a query of the schema whose zeroed
    counts are 0."""
    schema = pl94_schema()
    truths: dict[str, dict[str, np.ndarray]] = {}
    for level in LEVELS:
        for row in _constraints(run, level).itertuples(index=False):
            assert row.query_name[-4] == "_", row.query_name
            value = np.asarray(row.value)
            assert np.issubdtype(value.dtype, np.integer), (level, row.query_name)
            if row.query_name in ("total_con", "pl94_con") or row.sign == ">=":
                continue
            assert row.sign == "<=", (level, row.query_name, row.sign)
            if (value > 0).all():
                continue
            query = " * ".join(getattr(row, a) for a in ATTRIBUTES if getattr(row, a) != "*")
            assert Marginal(schema, query).size == value.size, (level, row.query_name)
            if query not in truths:
                truths[query] = _truth(table, query)
            assert (truths[query][row.geocode][value == 0] == 0).all(), (level, row.query_name)


def test_the_published_readers_accept_every_name_postdp_writes(dc_run):
    """(c) The rules of census-bluedown's and the Census GLS code's readers, applied to a
    postdp run with the structural bounds, accept every row and name it writes."""
    run, table = dc_run
    _bluedown_accepts(run, table)
    _gls_accepts(run, table)

"""BLUE, then restore, on the DHC persons design (issue 46; ``restore_dhc``): the
restoration in the DHC's two outer passes with the PL94 histogram held. The BLUE itself,
(P) over 1.2 million cells (``tests/tables/test_non_nested.py``), is too heavy for this
suite on a DHC county (4 GB), so a given estimate is restored here.
"""

from __future__ import annotations

import numpy as np
import pytest

from postdp.data import synthetic_dhc_population
from postdp.errors import ValidationError
from postdp.postprocess import restore_dhc
from postdp.tables import (
    Query,
    TableMeasurements,
    dhc_schema,
    dhc_structural_zeros,
    load_strategy,
)
from postdp.tables.strategies import PL94_IN_DHC
from tests.postprocess._dhc import true_pl94


@pytest.fixture(scope="module")
def dc_run():
    """The county's design with its public totals and no noisy answer (NaN: restoring a
    given estimate reads none of them, which this also checks), so no 1.2-million-cell
    draw is held."""
    table = synthetic_dhc_population(["11"], seed=1, scale=0.0002)
    work = load_strategy("dhc-2020-persons").workload(table)
    held = true_pl94(table)
    geo = table.geography
    values = []
    for m in work.measurements:
        rows = geo.levels[m.level]
        if m.public:
            values.append(held[rows].sum(axis=1, keepdims=True).astype(np.float64))
        else:
            values.append(np.broadcast_to(np.nan, (rows.size, m.query.size)))
    return table, TableMeasurements(table, work, tuple(values), secure=False), held, None


@pytest.mark.slow
def test_dhc_restoration_keeps_the_design_and_gives_back_a_feasible_release(dc_run):
    """BLUE-then-restore on the DHC (``restore_dhc``; the BLUE itself, (P) over 1.2 million
    cells, is tested in ``tests/tables/test_non_nested.py``): restoring the truth, a feasible
    release, gives it back exactly (each family's least squares is then minimised by the
    truth, unique as H is positive definite, and rounding whole numbers changes nothing);
    restoring a noisy stand-in keeps every property of the design."""
    table, m, held, _ = dc_run
    geo = table.geography
    truth = np.zeros((geo.n, dhc_schema().size))
    truth[geo.leaves] = table.cells.toarray()
    for d in range(geo.n_levels - 1, 0, -1):  # in place: no copy of 1.2 million columns
        kids = geo.levels[d]
        np.add.at(truth, geo.parent[kids], truth[kids])
    np.testing.assert_array_equal(restore_dhc(m, held=held, integral=True, blue=truth), truth)
    rng = np.random.default_rng(0)
    nonzero = np.nonzero(truth)
    truth[nonzero] += rng.normal(0, 0.7, nonzero[0].size)  # now a noisy stand-in
    out = restore_dhc(m, held=held, integral=True, blue=truth)
    assert (out == np.rint(out)).all() and out.min() >= 0
    pl94 = Query.marginal(dhc_schema(), PL94_IN_DHC).marginal_of
    np.testing.assert_array_equal(pl94.apply(out), held)
    kids = np.flatnonzero(geo.parent >= 0)
    sums = np.zeros_like(out)
    np.add.at(sums, geo.parent[kids], out[kids])
    inner = np.bincount(geo.parent[kids], minlength=geo.n) > 0
    np.testing.assert_array_equal(out[inner], sums[inner])
    assert not out[:, dhc_structural_zeros()].any()
    del out, sums
    with pytest.raises(ValidationError, match="integral=True"):
        restore_dhc(m, held=held, integral=False, blue=truth)
    with pytest.raises(ValidationError, match="shape"):
        restore_dhc(m, held=held, integral=True, blue=truth[:3])

"""Helpers of the DHC persons design's post-processing tests."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from postdp.tables import Query, Table, dhc_schema
from postdp.tables.strategies import PL94_IN_DHC


def true_pl94(table: Table) -> np.ndarray:
    """Every geounit's true PL94 histogram, from the blocks' sparse cells (a study holds
    the truth; production held the published PL94 release)."""
    groups = Query.marginal(dhc_schema(), PL94_IN_DHC).marginal_of.cell_groups()
    to_pl94 = sparse.csr_array((np.ones(groups.size), (np.arange(groups.size), groups)))
    geo = table.geography
    leaves = np.zeros((geo.n, to_pl94.shape[1]), dtype=np.int64)
    leaves[geo.leaves] = np.rint((table.cells @ to_pl94).toarray())
    out: np.ndarray = geo.aggregate(leaves.T).T
    return out

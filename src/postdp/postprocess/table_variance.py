"""Exact variances of the (P) estimates of a table (private; see ``TableProjector.variances``).

The (P) estimate is the generalised least-squares estimate, whose error covariance is the
posterior covariance of the Gaussian tree model that the two-pass solver filters and
smooths. Top-down, with S the children's summed covariance of a parent p, Sigma_c a child's
filtered covariance and P the smoothed covariance (the error covariance of the estimate):

    P_root = Sigma_root,    P_c = Sigma_c + Sigma_c S^+ (P_p - S) S^+ Sigma_c,

the Rauch-Tung-Striebel recursion on the geography. Children of one parent with one subtree
shape share their P, so the work is one c x c product per (parent, child shape); a
category node's variance is a' P a with a the indicator of its detailed cells. Only public
information enters (the design), never the counts: the margins cost no privacy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Mechanism

if TYPE_CHECKING:
    from postdp.postprocess.tables import TableProjector


def table_variances(projector: TableProjector) -> FloatArray:
    """Variance of every (geounit, category node) (P) estimate, shape (geography.n,
    categories.n), rows in the order of ``geography.ids``."""
    table = projector.table
    geo, cat = table.geography, table.categories
    lay = geo.layout
    c = cat.leaves.size
    C = np.zeros((cat.n, c))  # category node x detailed cell indicator
    column = np.full(cat.n, -1, dtype=np.int64)
    column[cat.leaves] = np.arange(c)
    for leaf in cat.leaves:
        node = int(leaf)
        while node >= 0:
            C[node, column[leaf]] = 1.0
            node = int(cat.parent[node])
    shapes, sig = projector._shapes, projector._sig
    out = np.empty((geo.n, cat.n))  # layout order
    smoothed = {0: shapes[sig[0]].cov}  # full P of the previous level's parents
    out[0] = np.einsum("ai,ij,aj->a", C, smoothed[0], C)
    for d in range(len(lay.parents)):
        c0 = int(lay.bounds[d + 1])
        nxt: dict[int, FloatArray] = {}
        for f, p in enumerate(lay.parents[d]):
            parent = shapes[sig[p]]
            assert parent.sum_pinv is not None and parent.summed is not None
            middle = parent.sum_pinv @ (smoothed[int(p)] - parent.summed) @ parent.sum_pinv
            lo = c0 + int(lay.starts[d][f])
            kids = range(lo, lo + int(lay.sizes[d][f]))
            done: dict[int, FloatArray] = {}
            for k in kids:
                s = int(sig[k])
                if s not in done:
                    cov = shapes[s].cov
                    P = cov + cov @ middle @ cov
                    done[s] = (P + P.T) / 2
                nxt[k] = done[s]
        for k, P in nxt.items():
            out[k] = np.einsum("ai,ij,aj->a", C, P, C)
        smoothed = {k: P for k, P in nxt.items() if shapes[sig[k]].sum_pinv is not None}
    variances: FloatArray = out[lay.position]
    variances[variances < 1e-12 * max(1.0, float(variances.max()))] = 0.0  # fixed by invariants
    return variances


def hierarchy_variances(
    hierarchy: Hierarchy, mechanisms: Sequence[Mechanism], *, public_root: bool = False
) -> FloatArray:
    """Exact variance of every node's (P) estimate for a hierarchy released with one
    mechanism per level and inverse-variance weights (generalised least squares), the root
    optionally public: the table recursion with a single category.

    Parameters
    ----------
    hierarchy : Hierarchy
    mechanisms : sequence of Mechanism
        One per level, root first.
    public_root : bool, default False
        Whether the root's count is published exactly.

    Returns
    -------
    ndarray, shape (hierarchy.n,)
    """
    from postdp.mechanisms import Laplace
    from postdp.postprocess.tables import TableProjector
    from postdp.tables import Measurement, Query, Table, Workload

    if len(mechanisms) != hierarchy.n_levels:
        raise ValidationError(
            f"`mechanisms` needs one mechanism per level ({hierarchy.n_levels}); got "
            f"{len(mechanisms)}"
        )
    single = Hierarchy(["count"], [-1])
    cells = np.zeros((hierarchy.leaves.size, 1), dtype=np.int64)
    table = Table(hierarchy, single, cells)
    query = Query("count", [["count"]])
    carrier = Laplace(epsilon=1.0)  # only its weight, 1 / the level's variance, is read
    items = [
        Measurement(d, query, carrier, weight=1.0 / m.variance()) for d, m in enumerate(mechanisms)
    ]
    if public_root:
        items.append(Measurement(0, Query("root", [["count"]]), None))
    variances: FloatArray = TableProjector(table, Workload(items)).variances()[:, 0]
    return variances

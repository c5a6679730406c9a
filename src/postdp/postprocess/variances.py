"""Exact variances of (P) estimates of a hierarchy, by the table recursion of
``TableProjector.variances`` with a single category (private).

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

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Mechanism
from postdp.postprocess.gls import TableProjector


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

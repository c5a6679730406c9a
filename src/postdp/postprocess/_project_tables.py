"""``postdp.project`` on a table's measurements (private): (P), (P+) or top-down, every
(geounit, category node)."""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import TableMeasurements

__all__ = ["project_measurements"]


def project_measurements(
    measurements: TableMeasurements,
    hierarchy: Hierarchy | None,
    nonneg: bool,
    public: Any,
    method: str,
    weights: ArrayLike | None,
) -> FloatArray:
    """``project`` of a table's measurements: every (geounit, category node)."""
    from postdp.postprocess.table_nonneg import TableNonnegProjector
    from postdp.postprocess.table_topdown import top_down_table
    from postdp.postprocess.tables import project_table

    for name, value in (("hierarchy", hierarchy), ("public", public), ("weights", weights)):
        if value is not None:
            raise ValidationError(
                f"`{name}` is for counts; table measurements carry their geography, public "
                "queries and weights in their workload"
            )
    if method not in ("exact", "topdown", "blue", "blue-restore"):
        raise ValidationError(
            f"`method` must be 'exact', 'topdown', 'blue' or 'blue-restore'; got {method!r}"
        )
    if method == "blue" and nonneg:
        raise ValidationError(
            "'blue' is unbiased and can be negative; pass nonneg=False (or use 'blue-restore')"
        )
    if method == "blue-restore" and not nonneg:
        raise ValidationError("'blue-restore' is nonnegative; pass nonneg=True (or use 'blue')")
    if method in ("exact", "blue") and not nonneg:
        return project_table(measurements)
    if method == "blue-restore":
        from postdp.postprocess.table_restore import blue_restore

        cells = blue_restore(measurements)
    elif method == "topdown":
        if not nonneg:
            raise ValidationError("table top-down is nonnegative; pass nonneg=True")
        cells = top_down_table(measurements)
    else:
        table = measurements.table
        cells = TableNonnegProjector(table, measurements.workload)(measurements)
    cat = measurements.table.categories
    full = np.zeros((*cells.shape[:-1], cat.n))
    full[..., cat.leaves] = cells
    out: FloatArray = cat.aggregate(full)
    return out

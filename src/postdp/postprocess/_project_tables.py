"""``postdp.project`` on a table's measurements (private): (P), (P+), top-down,
BLUE-then-restore or the 2020 production TopDown, the detailed cells of every geounit."""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.one_cell import counts_only as _counts_only
from postdp.tables import Table, TableMeasurements, Workload

__all__ = ["check_step", "project_measurements"]


def check_step(step: str, table: Table, workload: Workload) -> None:
    """Run a table post-processing step's own checks of a design, before any draw or solve.

    Parameters
    ----------
    step : str
        One step of a method (``"blue"``, ``"topdown-2020"``, ...); the steps with checks of
        their own are ``topdown``, ``blue-restore``, ``topdown-2020`` and
        ``blue-restore-2020``, the others need none.
    table : Table
        Supplies the geography and categories (its counts are not read).
    workload : Workload

    Returns
    -------
    None
        The design passes the step's checks.

    Raises
    ------
    ValidationError
        Where the step cannot run on this design (e.g. ``topdown-2020`` on a root whose
        noisy queries do not identify its cells).

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
    >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
    >>> t = Table(geo, s.categories(), [[1, 2, 3, 4], [5, 6, 7, 8]])
    >>> w = Workload([Measurement(0, Query.marginal(s, "total"), Gaussian(rho=0.5)),
    ...               Measurement(1, Query.marginal(s, "detailed"), Gaussian(rho=0.5))])
    >>> check_step("blue", t, w)  # no checks of its own
    >>> try:
    ...     check_step("topdown-2020", t, w)  # the root's total does not pin its cells
    ... except ValueError:
    ...     print("refused")
    refused
    """
    from postdp.postprocess.table_restore import check_blue_restore
    from postdp.postprocess.topdown import check_top_down
    from postdp.postprocess.topdown2020 import check_top_down_2020

    checks = {
        "topdown": check_top_down,
        "blue-restore": check_blue_restore,
        "topdown-2020": check_top_down_2020,
        "blue-restore-2020": check_blue_restore,
    }
    if step in checks:
        checks[step](table, workload)


def project_measurements(
    measurements: TableMeasurements,
    hierarchy: Hierarchy | None,
    nonneg: bool,
    public: Any,
    method: str,
    weights: ArrayLike | None,
) -> FloatArray:
    """``project`` of a table's measurements: the detailed cells of every geounit."""
    from postdp.postprocess.gls import gls_cells
    from postdp.postprocess.nonneg import TableNonnegProjector
    from postdp.postprocess.topdown import top_down_cells

    _counts_only(hierarchy, public, weights)
    if method not in ("exact", "topdown", "blue", "blue-restore", "topdown-2020"):
        raise ValidationError(
            "`method` must be 'exact', 'topdown', 'blue', 'blue-restore' or 'topdown-2020'; "
            f"got {method!r}"
        )
    if method == "blue" and nonneg:
        raise ValidationError(
            "'blue' is unbiased and can be negative; pass nonneg=False (or use 'blue-restore')"
        )
    if method in ("blue-restore", "topdown-2020") and not nonneg:
        raise ValidationError(f"{method!r} is nonnegative; pass nonneg=True (or use 'blue')")
    if method == "topdown-2020":
        from postdp.postprocess.topdown2020 import top_down_2020

        integral: FloatArray = top_down_2020(measurements).astype(np.float64)
        return integral
    if method in ("exact", "blue") and not nonneg:
        return gls_cells(measurements)
    if method == "blue-restore":
        from postdp.postprocess.table_restore import blue_restore

        return blue_restore(measurements)
    if method == "topdown":
        if not nonneg:
            raise ValidationError("table top-down is nonnegative; pass nonneg=True")
        return top_down_cells(measurements)
    table = measurements.table
    cells: FloatArray = TableNonnegProjector(table, measurements.workload)(measurements)
    return cells

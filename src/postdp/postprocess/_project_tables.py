"""``postdp.project`` on a table's measurements (private): (P), (P+), top-down,
BLUE-then-restore or the 2020 production TopDown, the detailed cells of every geounit."""

from __future__ import annotations

from typing import Any

from postdp._typing import ArrayLike, FloatArray
from postdp.hierarchy import Hierarchy
from postdp.postprocess._solvers.one_cell import counts_only as _counts_only
from postdp.tables import Table, TableMeasurements, Workload

__all__ = ["check_step", "project_measurements"]


def check_step(step: str, table: Table, workload: Workload) -> None:
    """Run a table post-processing step's own checks of a design, before any draw or solve.

    Parameters
    ----------
    step : str
        A registered estimator's name (:func:`postdp.postprocess.estimators`); most need
        no checks of their own (:attr:`Estimator.check`).
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
        For an unknown name, or where the step cannot run on this design (e.g.
        ``topdown-2020`` on a root whose noisy queries do not identify its cells).

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> from postdp.tables import Attribute, Measurement, Query, Schema, Table, Workload
    >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y"])])
    >>> geo = Hierarchy.from_parents(["S", "p", "q"], [None, "S", "S"])
    >>> t = Table(geo, s.categories(), [[1, 2, 3, 4], [5, 6, 7, 8]])
    >>> w = Workload([Measurement(0, Query.marginal(s, "total"), Gaussian(rho=0.5)),
    ...               Measurement(1, Query.marginal(s, "detailed"), Gaussian(rho=0.5))])
    >>> check_step("project", t, w)  # no checks of its own
    >>> try:
    ...     check_step("topdown-2020", t, w)  # the root's total does not pin its cells
    ... except ValueError:
    ...     print("refused")
    refused
    """
    from postdp.postprocess.estimators import estimator

    estimator(step).check_design(table, workload)


def project_measurements(
    measurements: TableMeasurements,
    hierarchy: Hierarchy | None,
    nonneg: bool | None,
    public: Any,
    method: str | None,
    weights: ArrayLike | None,
    held: ArrayLike | None = None,
) -> FloatArray:
    """``project`` of a table's measurements: the detailed cells of every geounit."""
    from postdp.postprocess.estimators import resolve_projection

    _counts_only(hierarchy, public, weights)
    est, _ = resolve_projection(method, nonneg, "table")
    cells: FloatArray = est.table_solver(
        measurements.table,
        measurements.workload,
        budget_scale=measurements.budget_scale,
        held=held,
    )(measurements)
    return cells

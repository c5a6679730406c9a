"""What the table certificates share (private): the estimate checked for one draw, its
consistency residual and its value scale, read alike by the (P) certificate
(:func:`postdp.postprocess.kkt.gls_report`) and the (P+) one
(:func:`postdp.postprocess.nonneg.nnls_report`)."""

from __future__ import annotations

import numpy as np

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.tables import TableMeasurements

__all__ = ["checked_estimate"]


def checked_estimate(
    estimate: ArrayLike, measurements: TableMeasurements
) -> tuple[FloatArray, float, float]:
    """A table estimate as a certificate reads it, with the residuals both certificates
    report alike.

    Parameters
    ----------
    estimate : array_like, shape (geography.n, n_detailed)
        Detailed histograms of every geounit, rows in the order of ``geography.ids``.
    measurements : TableMeasurements
        One draw (no leading draw axes).

    Returns
    -------
    t : ndarray, shape (geography.n, n_detailed)
        The estimate as floats.
    consistency : float
        Largest |parent cell - sum of its children's cells|.
    value_scale : float
        max(1, largest |t|): the scale of the residuals in the units of the counts.

    Raises
    ------
    ValidationError
        If the estimate's shape is not the table's, or the measurements hold several draws.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload, measure
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[1, 2], [3, 4]])
    >>> m = measure(t, Workload([Measurement(1, Query.detailed(cat), None)]), secure=False)
    >>> checked_estimate([[4, 7], [1, 2], [3, 4]], m)[1:]  # the root's second cell is 1 off
    (1.0, 7.0)
    """
    geo = measurements.table.geography
    c = measurements.table.categories.leaves.size
    t = np.asarray(estimate, dtype=float)
    if t.shape != (geo.n, c):
        raise ValidationError(f"`estimate` must have shape {(geo.n, c)}; got {t.shape}")
    if measurements.values[0].ndim != 2:
        raise ValidationError("kkt_report checks one draw of a table; index the draws first (m[0])")
    kids = np.zeros_like(t)
    np.add.at(kids, geo.parent[geo.parent >= 0], t[geo.parent >= 0])
    internal = ~geo.is_leaf
    consistency = float(np.abs(t[internal] - kids[internal]).max(initial=0.0))
    return t, consistency, max(1.0, float(np.abs(t).max(initial=0.0)))

"""Structural bounds on a table's counts: public facts about every geounit that a release
must respect, without being noisy measurements.

The 2020 persons release held, at every geounit, the number of people in each kind of
group quarters at least the number of such facilities there and at most 0 where there is
none, and no one under 18 in a nursing facility (``shared/research/pl94-2020-design.md``
section 1.4: ``hhgq_total_lb``, ``hhgq_total_ub``, ``nurse_nva_0``). Each is a
:class:`CountBounds`: lower and upper bounds on one marginal's counts, per geounit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from postdp._typing import ArrayLike, BoolArray, FloatArray
from postdp.errors import ValidationError
from postdp.tables.schema import Marginal, Schema

if TYPE_CHECKING:
    from postdp.tables.workload import Workload

__all__ = ["CountBounds", "check_bounds"]


@dataclass(frozen=True, eq=False)
class CountBounds:
    """Bounds ``lower <= counts <= upper`` on one marginal of every geounit's histogram.

    Parameters
    ----------
    query : str
        The marginal bounded (attribute names joined by ``" * "``, as :class:`Marginal`).
    lower, upper : array_like, shape (n_geounits, marginal size)
        Per geounit (in geography order) and count; ``upper`` may be ``inf``. Whole
        numbers where finite, 0 <= lower <= upper.
    name : str, default ""
        What the bounds are (e.g. ``"hhgq_total"``).
    sides : {"both", "upper"}, default "both"
        How a noisy measurement file states them, whatever the values: ``"both"``, a
        lower and an upper bound at every geounit (``<name>_lb_con`` and
        ``<name>_ub_con``, as the Census's ``hhgq_total``); ``"upper"``, an upper bound
        alone (``<name>_con``, as the Census's ``nurse_nva_0``; ``lower`` must be 0).

    Examples
    --------
    >>> from postdp.tables import Attribute, Schema
    >>> s = Schema([Attribute("gq", ["home", "jail"]), Attribute("age", ["kid", "adult"])])
    >>> b = CountBounds("gq", [[0, 1], [0, 0]], [[np.inf, np.inf], [np.inf, 0]])
    >>> b.check(s, 2).size
    2
    >>> b.violation(s, [[3, 0, 0, 0], [2, 2, 0, 0]])  # no one in geounit 0's jail
    1.0
    """

    query: str
    lower: FloatArray
    upper: FloatArray
    name: str = field(default="", kw_only=True)
    sides: str = field(default="both", kw_only=True)

    def __post_init__(self) -> None:
        if self.sides not in ("both", "upper"):
            raise ValidationError(f"`sides` must be 'both' or 'upper'; got {self.sides!r}")
        lower = np.asarray(self.lower, dtype=np.float64)
        upper = np.asarray(self.upper, dtype=np.float64)
        if lower.ndim != 2 or lower.shape != upper.shape:
            raise ValidationError(
                f"`lower` and `upper` must be 2-D of one shape; got {lower.shape} and {upper.shape}"
            )
        finite_lower = np.isfinite(lower).all()
        if not finite_lower or (lower < 0).any() or (lower != np.rint(lower)).any():
            raise ValidationError("`lower` must hold nonnegative whole numbers")
        if np.isnan(upper).any() or (upper < lower).any():
            raise ValidationError("`upper` must be at least `lower` everywhere")
        finite = np.isfinite(upper)
        if (upper[finite] != np.rint(upper[finite])).any():
            raise ValidationError("`upper` must hold whole numbers or inf")
        if self.sides == "upper" and (lower > 0).any():
            raise ValidationError("bounds of sides='upper' have no lower bound: `lower` must be 0")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    def check(self, schema: Schema, n: int) -> Marginal:
        """Refuse bounds that do not fit a table: n geounits, the schema's marginal.

        Parameters
        ----------
        schema : Schema
        n : int
            The number of geounits.

        Returns
        -------
        Marginal
            The bounded marginal.

        Examples
        --------
        >>> from postdp.tables import Attribute, Schema
        >>> s = Schema([Attribute("gq", ["home", "jail"])])
        >>> CountBounds("gq", [[0, 1]], [[9, 9]]).check(s, 1).size
        2
        """
        marginal = Marginal(schema, self.query)
        if self.lower.shape != (n, marginal.size):
            raise ValidationError(
                f"bounds on {self.query!r} must have shape {(n, marginal.size)}; got "
                f"{self.lower.shape}"
            )
        return marginal

    def take(self, geounits: ArrayLike) -> CountBounds:
        """The bounds of some geounits (rows in the given order), e.g. a subtree's.

        Parameters
        ----------
        geounits : array_like of int
            Positions in the geography the bounds are of.

        Returns
        -------
        CountBounds

        Examples
        --------
        >>> CountBounds("gq", [[0, 1], [0, 2]], [[9, 9], [9, 9]]).take([1]).lower.tolist()
        [[0.0, 2.0]]
        """
        rows = np.asarray(geounits, dtype=np.int64)
        return CountBounds(
            self.query, self.lower[rows], self.upper[rows], name=self.name, sides=self.sides
        )

    def violation(self, schema: Schema, histograms: ArrayLike) -> float:
        """The largest amount by which histograms break the bounds (0 when they hold).

        Parameters
        ----------
        schema : Schema
        histograms : array_like, shape (..., n_geounits, schema.size)

        Returns
        -------
        float

        Examples
        --------
        >>> from postdp.tables import Attribute, Schema
        >>> s = Schema([Attribute("gq", ["home", "jail"])])
        >>> CountBounds("gq", [[0, 1]], [[9, 9]]).violation(s, [[0, 0]])
        1.0
        """
        return float(self._excess(schema, histograms).max(initial=0.0))

    def unmet(self, schema: Schema, histograms: ArrayLike) -> BoolArray:
        """Which geounits' histograms break the bounds (a count below its lower bound or
        above its upper one), e.g. to report what a best-effort repair left.

        Parameters
        ----------
        schema : Schema
        histograms : array_like, shape (..., n_geounits, schema.size)

        Returns
        -------
        ndarray of bool, shape (..., n_geounits)

        Examples
        --------
        >>> from postdp.tables import Attribute, Schema
        >>> s = Schema([Attribute("gq", ["home", "jail"])])
        >>> b = CountBounds("gq", [[0, 1], [0, 0]], [[9, 9], [9, 0]])
        >>> b.unmet(s, [[3, 0], [2, 1]]).tolist()  # no one in 0's jail, someone in 1's
        [True, True]
        >>> b.unmet(s, [[3, 1], [2, 0]]).tolist()
        [False, False]
        """
        out: BoolArray = np.asarray((self._excess(schema, histograms) > 0).any(axis=-1))
        return out

    def _excess(self, schema: Schema, histograms: ArrayLike) -> FloatArray:
        """How far each geounit's bounded counts are outside their bounds (0 within)."""
        x = np.asarray(histograms, dtype=np.float64)
        marginal = self.check(schema, x.shape[-2])
        counts = np.asarray(marginal.count_matrix() @ x.reshape(-1, schema.size).T).T
        counts = counts.reshape(*x.shape[:-1], marginal.size)
        with np.errstate(invalid="ignore"):
            worst = np.maximum(self.lower - counts, counts - self.upper)
        out: FloatArray = np.maximum(np.nan_to_num(worst, nan=0.0), 0.0)
        return out


def check_bounds(bounds: Sequence[CountBounds], workload: Workload, *, geounits: int) -> None:
    """Refuse bounds that are not CountBounds of the workload's schema and geography.

    Parameters
    ----------
    bounds : sequence of CountBounds
    workload : Workload
        Of one schema's marginals (the bounds are on that schema's marginals).
    geounits : int
        Geounits of the geography.

    Returns
    -------
    None
        Returns quietly when every item is a CountBounds of the workload's schema, for
        ``geounits`` geounits.

    Raises
    ------
    ValidationError
        For a workload of no single schema, or bounds on another schema or geography.
    TypeError
        For an item that is not a CountBounds.

    Examples
    --------
    >>> from postdp import Gaussian
    >>> from postdp.tables import Measurement, Query, Workload, pl94_schema
    >>> s = pl94_schema()
    >>> w = Workload([Measurement(0, Query.marginal(s, ["hhgq"]), Gaussian(rho=1))])
    >>> none_in_gq = CountBounds("hhgq", np.zeros((1, 8)), np.r_[np.inf, np.zeros(7)][None])
    >>> check_bounds([none_in_gq], w, geounits=1)  # quiet: bounds of this schema
    >>> check_bounds([none_in_gq], w, geounits=3)
    Traceback (most recent call last):
    ...
    postdp.errors.ValidationError: ...
    """
    if not bounds:
        return
    marginals = [m.query.marginal_of for m in workload.measurements]
    distinct = {id(q.schema): q.schema for q in marginals if q is not None}  # hash each once
    schemas = {(s.names, s.cells): s for s in distinct.values()}
    if len(schemas) != 1:
        raise ValidationError("`bounds` need a workload of one schema's marginals")
    schema = next(iter(schemas.values()))
    for item in bounds:
        if not isinstance(item, CountBounds):
            raise TypeError(f"`bounds` must hold CountBounds; got {type(item).__name__}")
        item.check(schema, geounits)

"""Workloads: which category queries are measured at which geographic level, with what noise.

Privacy accounting ([wang2021] §5 for the additive structure, seed
[zhu2021] for the levels): one person is in exactly one detailed cell of
one leaf geounit. A query is a set of disjoint groups of detailed cells, one count per group,
so adding or removing a person changes exactly one of its counts by one: sensitivity 1 in
both the L1 and the L2 sense. The geounits of a level are disjoint (parallel composition),
the queries of a level compose sequentially, and so do the levels: the cost of a workload is
the sum of the costs of its measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, SupportsIndex

import numpy as np
import pandas as pd

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Budget, Mechanism
from postdp.tables._table import category_matrix
from postdp.tables.schema import Marginal, Schema

__all__ = ["Measurement", "Query", "Workload"]

#: The neighbouring relations a workload's accounting knows.
NEIGHBOURS = ("add-remove", "bounded")


@dataclass(frozen=True)
class Query:
    """Disjoint groups of detailed cells, one count per group.

    Parameters
    ----------
    name : str
    groups : sequence of sequence of str
        Each group lists category codes (any node of the category tree: a node stands for
        all the detailed cells under it). Groups must not share a detailed cell.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> Query.detailed(cat).matrix(cat).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    >>> Query("total", [["T"]]).matrix(cat).tolist()
    [[1.0, 1.0]]
    """

    name: str
    groups: tuple[tuple[str, ...], ...]
    #: The schema marginal this query is (from :meth:`marginal`), or None: (P) then works in
    #: the marginal basis instead of with c x c matrices.
    marginal_of: Marginal | None = field(default=None, compare=False, repr=False)

    def __init__(self, name: str, groups: Sequence[Sequence[str]]) -> None:
        object.__setattr__(self, "marginal_of", None)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "groups", tuple(tuple(str(c) for c in g) for g in groups))
        if not self.groups or any(not g for g in self.groups):
            raise ValidationError(f"query {self.name!r} needs at least one non-empty group")

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # a schema's marginal travels as (schema, name) and is made again where it lands
        # (once per process and schema): its groups are up to 1.2 million tuples of codes
        if self.marginal_of is not None:
            return (_marginal_query, (self.marginal_of.schema, self.marginal_of.name))
        return super().__reduce_ex__(protocol)

    @classmethod
    def detailed(cls, categories: Hierarchy, *, name: str = "detailed") -> Query:
        """Every detailed cell on its own (``categories.leaves``, in their order)."""
        return cls(name, [[str(categories.ids[j])] for j in categories.leaves])

    @classmethod
    def nodes(cls, codes: Sequence[str], *, name: str | None = None) -> Query:
        """One count for each of the given category nodes (they must not overlap)."""
        return cls(name or "+".join(codes), [[c] for c in codes])

    @classmethod
    def marginal(cls, schema: Schema, terms: Sequence[str] | str) -> Query:
        """A schema's marginal over attributes or recodes, on the schema's category tree
        (:meth:`Schema.categories`), named as the Census does (``votingage * cenrace``).

        Examples
        --------
        >>> from postdp.tables.schema import Attribute, Schema
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y", "z"])])
        >>> q = Query.marginal(s, ["b"])
        >>> q.name, q.size, q.groups[0]
        ('b', 3, ('0|x', '1|x'))
        """
        m = Marginal(schema, terms)
        made = schema._queries.get(m.name)  # immutable, so made once per schema and name
        if made is not None:
            return made  # type: ignore[no-any-return]
        # the groups are the schema's own non-empty cell codes: no check or conversion (a
        # DHC persons query has up to 1.2 million of them)
        query = cls.__new__(cls)
        object.__setattr__(query, "name", m.name)
        object.__setattr__(query, "groups", tuple(m.groups()))
        object.__setattr__(query, "marginal_of", m)
        schema._queries[m.name] = query
        return query

    @property
    def size(self) -> int:
        """Number of counts the query measures per geounit."""
        return len(self.groups)

    def matrix(self, categories: Hierarchy) -> FloatArray:
        """0/1 matrix, shape (size, detailed cells): which cells each count adds up."""
        codes = {str(c): i for i, c in enumerate(categories.ids)}
        cells = category_matrix(categories)
        out = np.zeros((self.size, categories.leaves.size))
        for row, group in enumerate(self.groups):
            for code in group:
                if code not in codes:
                    raise ValidationError(f"query {self.name!r}: unknown category {code!r}")
                out[row] += cells[codes[code]]
        if out.max(initial=0.0) > 1 or (out.sum(axis=0) > 1).any():
            raise ValidationError(
                f"query {self.name!r}: its groups share detailed cells (sensitivity would "
                "exceed 1); split it into separate queries"
            )
        return out


def _marginal_query(schema: Schema, name: str) -> Query:
    """:meth:`Query.marginal`, as an unpickled marginal query is made."""
    return Query.marginal(schema, name)


@dataclass(frozen=True)
class Measurement:
    """One query measured at every geounit of one geographic level.

    Parameters
    ----------
    level : int
        Geographic depth (0 = the root).
    query : Query
    mechanism : Mechanism or None
        The noise; None for a public (invariant) query, released exactly and at no
        privacy cost in this accounting (invariants are a policy decision, [zhu2021] §2).
    weight : float, optional
        Weight of these counts in least squares; default 1 / the noise variance.

    Examples
    --------
    >>> from postdp import Gaussian, Hierarchy
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> m = Measurement(1, Query.detailed(cat), Gaussian(rho=0.5))
    >>> m.variance, m.public
    (1.0, False)
    """

    level: int
    query: Query
    mechanism: Mechanism | None
    weight: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, Query):
            raise TypeError(f"`query` must be a Query; got {type(self.query).__name__}")
        if self.mechanism is not None and not isinstance(self.mechanism, Mechanism):
            raise TypeError(f"`mechanism` must be a Mechanism; got {type(self.mechanism).__name__}")
        if self.mechanism is not None and self.mechanism.sensitivity != 1:
            raise ValidationError(
                f"query {self.query.name!r}: a table query has sensitivity 1; its mechanism "
                f"is calibrated to {self.mechanism.sensitivity:g}"
            )
        if self.weight is not None and not (np.isfinite(self.weight) and self.weight > 0):
            raise ValidationError(f"`weight` must be positive and finite; got {self.weight!r}")

    @property
    def public(self) -> bool:
        """Whether the counts are released exactly (an invariant)."""
        return self.mechanism is None

    @property
    def variance(self) -> float:
        """Variance of the noise of each count (0 for a public query)."""
        if self.mechanism is None:
            return 0.0
        if self.weight is not None:
            return 1.0 / self.weight
        return float(self.mechanism.variance())


@dataclass(frozen=True)
class Workload:
    """The measurements of a table release, and their privacy cost.

    Parameters
    ----------
    measurements : sequence of Measurement
    neighbours : {"add-remove", "bounded"}, default "add-remove"
        Who the guarantee protects against. "add-remove": a person added or removed (each
        query's sensitivity 1, as every mechanism is calibrated). "bounded": a person's
        record changed (bounded DP, as the 2020 Census TopDown): two counts of a query
        move by one, so each measurement costs twice its mechanism's rho (L2 sensitivity
        sqrt 2) or epsilon (L1 sensitivity 2) for the same noise.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> w = Workload([Measurement(0, Query("total", [["T"]]), Geometric(epsilon=0.5)),
    ...               Measurement(1, Query.detailed(cat), Geometric(epsilon=1.0))])
    >>> str(w.budget)
    'epsilon = 1.5 (pure DP)'
    """

    measurements: tuple[Measurement, ...]
    neighbours: str = "add-remove"
    #: With :meth:`from_shares`: the exact rho of every measurement (None for public ones).
    exact_rho: tuple[Fraction | None, ...] | None = field(default=None, compare=False, repr=False)

    def __init__(
        self, measurements: Sequence[Measurement], *, neighbours: str = "add-remove"
    ) -> None:
        object.__setattr__(self, "exact_rho", None)
        if neighbours not in NEIGHBOURS:
            raise ValidationError(
                f"`neighbours` must be one of {', '.join(NEIGHBOURS)}; got {neighbours!r}"
            )
        items = tuple(measurements)
        if not items or not all(isinstance(m, Measurement) for m in items):
            raise ValidationError("a workload needs at least one Measurement")
        seen = set()
        for m in items:
            key = (m.level, m.query.name, m.public)  # an invariant may also be measured
            if key in seen:
                raise ValidationError(
                    f"query {m.query.name!r} is measured twice at level {m.level}"
                )
            seen.add(key)
        object.__setattr__(self, "measurements", items)
        object.__setattr__(self, "neighbours", neighbours)

    @classmethod
    def from_shares(
        cls,
        levels: Mapping[int, tuple[Share, Mapping[Query | str, Share]]],
        *,
        total: Share,
        schema: Schema | None = None,
        mechanism: str = "discrete-gaussian",
        public: Sequence[tuple[int, Query | str]] = (),
        neighbours: str = "add-remove",
    ) -> Workload:
        """A zCDP workload whose budget is split in exact fractions, as the Census Bureau's
        configurations give it: level d gets the share g_d of the ``total`` rho and each of
        its queries the share q of the level's, so the query's noise has total x g_d x q.

        Parameters
        ----------
        levels : mapping of int to (share, mapping of query to share)
            For each geographic level: its share of the total and its queries' shares of
            it. Shares are exact: fractions (``Fraction(52, 4097)`` or ``"52/4097"``) or
            integers; the levels' shares add up to 1 exactly, and so do each level's
            queries'. A query is a :class:`Query` or a marginal of ``schema`` by name.
        total : fraction, str or int
            The total zCDP budget rho (e.g. ``"293764/114921"``), exact.
        schema : Schema, optional
            Needed when queries are given by name.
        mechanism : {"discrete-gaussian", "gaussian"}
        public : sequence of (level, query)
            Invariants (released exactly, no budget).
        neighbours : {"add-remove", "bounded"}
            As for :class:`Workload`. With "bounded" a query with rho share r gets the
            noise of variance 1 / r (the Census's 1 / (rho x level share x query share)).

        Returns
        -------
        Workload
            Its :meth:`budget` is the exact total (:attr:`exact_rho` holds each
            measurement's exact rho).

        Examples
        --------
        >>> from postdp.tables.schema import Attribute, Schema
        >>> s = Schema([Attribute("a", ["0", "1"]), Attribute("b", ["x", "y", "z"])])
        >>> w = Workload.from_shares({0: ("1/3", {"total": "1/2", "detailed": "1/2"}),
        ...                           1: ("2/3", {"detailed": 1})}, total="1/2", schema=s)
        >>> [str(r) for r in w.exact_rho], w.budget.rho
        (['1/12', '1/12', '1/3'], 0.5)
        """
        from postdp.mechanisms import DiscreteGaussian, Gaussian

        kinds = {"discrete-gaussian": DiscreteGaussian, "gaussian": Gaussian}
        if mechanism not in kinds:
            raise ValidationError(f"`mechanism` must be one of {sorted(kinds)}; got {mechanism!r}")
        budget = _share("total", total)
        if budget <= 0:
            raise ValidationError(f"`total` must be positive; got {total!r}")

        made: dict[str, Query] = {}  # one query per name, shared by the levels

        def query(q: Query | str) -> Query:
            if isinstance(q, Query):
                return q
            if schema is None:
                raise ValidationError(f"query {q!r} given by name needs `schema`")
            if q not in made:
                made[q] = Query.marginal(schema, q)
            return made[q]

        level_sum = sum((_share(f"level {d}", g) for d, (g, _) in levels.items()), Fraction(0))
        if level_sum != 1:
            raise ValidationError(f"the levels' shares add up to {level_sum}, not 1")
        items: list[Measurement] = []
        exact: list[Fraction | None] = []
        for d, (g, queries) in sorted(levels.items()):
            shares = {name: _share(f"level {d}", q) for name, q in queries.items()}
            if sum(shares.values(), Fraction(0)) != 1:
                raise ValidationError(
                    f"the query shares of level {d} add up to "
                    f"{sum(shares.values(), Fraction(0))}, not 1"
                )
            for name, q in shares.items():
                r = budget * _share(f"level {d}", g) * q
                if r <= 0:
                    raise ValidationError(f"query {name!r} at level {d}: its share must be > 0")
                calibrated = r / 2 if neighbours == "bounded" else r  # same noise, 2x cost
                items.append(Measurement(d, query(name), kinds[mechanism](rho=float(calibrated))))
                exact.append(r)
        for d, invariant in public:
            items.append(Measurement(d, query(invariant), None))
            exact.append(None)
        work = cls(items, neighbours=neighbours)
        object.__setattr__(work, "exact_rho", tuple(exact))
        return work

    def split_at(self, level: int) -> tuple[Workload, Workload]:
        """The workload of a table cut at a geographic level (:meth:`Table.split_at
        <postdp.tables.Table.split_at>`): the measurements of levels 0 to ``level``, and
        those below it with levels counted from the cut (each subtree's root is level 0
        and holds no measurement). Mechanisms, weights and exact shares are kept.

        Examples
        --------
        >>> from postdp import Gaussian, Hierarchy
        >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
        >>> w = Workload([Measurement(d, Query.detailed(cat), Gaussian(rho=0.5))
        ...               for d in range(4)])
        >>> top, below = w.split_at(1)
        >>> [m.level for m in top.measurements], [m.level for m in below.measurements]
        ([0, 1], [1, 2])
        """
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or level < 0:
            raise ValidationError(f"`level` must be a nonnegative integer; got {level!r}")
        upper = [i for i, m in enumerate(self.measurements) if m.level <= level]
        lower = [i for i, m in enumerate(self.measurements) if m.level > level]
        if not upper or not lower:
            raise ValidationError(
                f"`level` {level} leaves no measurement {'at or above' if not upper else 'below'}"
                " the cut"
            )
        parts = []
        for picked, shift in ((upper, 0), (lower, int(level))):
            items = [self.measurements[i] for i in picked]
            moved = [
                Measurement(m.level - shift, m.query, m.mechanism, weight=m.weight) for m in items
            ]
            work = Workload(moved, neighbours=self.neighbours)
            if self.exact_rho is not None:
                object.__setattr__(work, "exact_rho", tuple(self.exact_rho[i] for i in picked))
            parts.append(work)
        return parts[0], parts[1]

    def at(self, level: int) -> list[Measurement]:
        """The measurements of one geographic level."""
        return [m for m in self.measurements if m.level == level]

    @property
    def budget(self) -> Budget:
        """Total privacy cost: the sum of every noisy measurement's cost (exact for a
        workload :meth:`from_shares`: the sum of the fractions, rounded once)."""
        if self.exact_rho is not None:
            return Budget.zcdp(
                float(sum((r for r in self.exact_rho if r is not None), Fraction(0)))
            )
        return Budget.compose(self.cost(m) for m in self.measurements if not m.public)

    def cost(self, measurement: Measurement) -> Budget:
        """The privacy cost of one of this workload's measurements under its ``neighbours``
        (the mechanism's own cost, doubled for "bounded"; nothing for a public query)."""
        if measurement.mechanism is None:
            return Budget()
        cost = measurement.mechanism.privacy_cost()
        if self.neighbours == "add-remove":
            return cost
        return Budget.compose(
            [Budget.pure(2 * cost.epsilon) if cost.epsilon else Budget(),
             Budget.zcdp(2 * cost.rho) if cost.rho else Budget()]
        )  # fmt: skip

    def cost_frame(self) -> pd.DataFrame:
        """Privacy cost per measurement, with each level's total (rows ``query == "*"``)."""
        rows = []
        for m in sorted(self.measurements, key=lambda m: m.level):
            cost = self.cost(m)
            rows.append(
                {
                    "level": m.level,
                    "query": m.query.name,
                    "counts_per_geounit": m.query.size,
                    "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                    "epsilon": cost.epsilon,
                    "rho": cost.rho,
                }
            )
        frame = pd.DataFrame(rows)
        totals = frame.groupby("level", as_index=False)[["epsilon", "rho"]].sum()
        totals["query"] = "*"
        return pd.concat([frame, totals], ignore_index=True).sort_values(
            ["level", "query"], kind="stable", ignore_index=True
        )


#: An exact budget share: a Fraction, an int or a string such as "52/4097".
Share = Fraction | int | str


def _share(where: str, value: object) -> Fraction:
    """An exact fraction from a Fraction, an int or a string (floats are refused: their
    binary value is not the fraction a configuration means)."""
    if isinstance(value, bool) or not isinstance(value, Fraction | int | str):
        raise ValidationError(
            f"{where}: shares must be exact (a Fraction, an int or a string like '52/4097'); "
            f"got {value!r}"
        )
    try:
        out = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise ValidationError(f"{where}: {value!r} is not a fraction") from None
    if out < 0:
        raise ValidationError(f"{where}: shares must be nonnegative; got {value!r}")
    return out

"""The 2020 redistricting (P.L. 94-171) production strategies as presets.

Every number is a fact of the Census Bureau's 2020 production run, as gathered (with its
sources) in ``shared/research/pl94-2020-design.md`` sections 1.1-1.4:

- rho: persons (542/339)^2 = 293764/114921, units (3379/12343)^2 = 11417641/152349649
  (``global_scale`` = 1 / sqrt(rho) of ``prod_default.ini``; the certificates print
  epsilon = 17.14 and 2.47 at delta = 1e-10);
- geolevel shares (``person_US.ini`` ``geolevel_budget_prop``; units from the US-Units
  certificate) for US > State > County > Tract > Block_Group > Block;
- query shares per geolevel of strategy ``ProductionCandidate20210527US_mult8_add02_dsepJune3``
  (persons; the units run measures its 2-cell histogram only);
- noise: discrete Gaussian with variance 1 / (rho x level share x query share) per count,
  under bounded neighbours (a person's record changed: each measurement costs rho x level
  share x query share, ``engine_utils.py`` ``getAdjustedInverseScalePerQuery``);
- invariants kept as public queries here: persons, the state totals (and so the US total);
  units, the block housing-unit counts (and so every geounit's total).

The DHC persons preset, ``dhc-2020-persons``, is the Census Bureau's 2020 production run of
the Demographic and Housing Characteristics file (``shared/research/dhc-2020-design.md``
section 2: strategy ``DecompTestStrategyDHCP_20220922_exp_iteration_23_1``, US run): eight
geolevels (with the spine's Prim, Tract_Subset_Group and Tract_Subset), ten queries at each,
each given as its absolute rho (total 24811/5000); its shares here are those rhos over their
level's sum and the level sums over the total. Its schema is :func:`postdp.tables.dhc_schema`,
and it holds the published PL94 persons histogram (``hhgq8lev * votingage * hispanic *
cenrace``) at every level: :attr:`Strategy.held`.

A third preset, ``pl94-2020-p1``, is postdp's, not the Census Bureau's: table P1's 63 race
cells (the persons schema's ``cenrace``) measured with the persons run's rho and geolevel
shares, each level's share split between ``total`` (the persons run's share of it there) and
the 63 cells (the rest). It is the P1-shaped national design of the benchmarks and of a
race-only release; its persons input is tabulated by :meth:`Strategy.tabulate`.

The persons run's block-level group-quarters facility invariants and the constraints built
on them (persons in GQ type k at least the number of type-k facilities and 0 where there is
none; no under-18s in nursing facilities) are data, not design: they come with the
measurements as structural bounds (:func:`postdp.data.facility_bounds`). Not carried: the
spine optimiser's per-geounit re-allocation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.mechanisms import Budget
from postdp.tables._table import Table
from postdp.tables.dhc import dhc_schema
from postdp.tables.pl94 import p1_schema, pl94_schema, units_schema
from postdp.tables.schema import Schema, leaf_codes
from postdp.tables.workload import Query, Share, Workload

__all__ = ["Strategy", "load_strategy"]

LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")

_PERSON_LEVELS = ("104/4099", "1440/4099", "447/4099", "687/4099", "1256/4099", "165/4099")
_PERSON_QUERIES = (  # query -> share per level, in LEVELS order ("0": not measured there)
    ("total", ("0", "3773/4097", "3126/4097", "1567/4102", "1705/4099", "5/4097")),
    ("cenrace", ("52/4097", "6/4097", "10/4097", "4/2051", "3/4099", "9/4097")),
    ("hispanic", ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097")),
    ("votingage", ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097")),
    ("hhinstlevels", ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097")),
    ("hhgq", ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097")),
    ("hispanic * cenrace", ("130/4097", "12/4097", "28/4097", "1933/4102", "1055/4099", "21/4097")),
    ("votingage * cenrace", ("130/4097", "12/4097", "28/4097", "10/2051", "9/4099", "21/4097")),
    ("votingage * hispanic", ("26/4097", "6/4097", "10/4097", "5/4102", "3/4099", "5/4097")),
    ("votingage * hispanic * cenrace",
     ("26/241", "2/241", "101/4097", "67/4102", "24/4099", "71/4097")),
    ("detailed", ("189/241", "230/4097", "754/4097", "241/2051", "1288/4099", "3945/4097")),
)  # fmt: skip
_UNIT_LEVELS = ("1/205", "1/205", "7/82", "364/1025", "1759/4100", "99/820")

DHC_LEVELS = (
    "US", "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group", "Block",
)  # fmt: skip
# The DHC persons queries, in the production order and spelling, and each one's absolute rho
# per level in units of 1/10000 (dhcp_strategies.py 601-624; DHC_LEVELS order)
_DHC_QUERIES = (
    ("age_18_64_116 * relgq_4_groups", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("age_18_64_116 * sex", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("age_38_groups * sex", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("hispanic * sex", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("sex * relgq_4_groups", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("gq_constr_groups * age_10_groups", (292, 3996, 1240, 1912, 1912, 3472, 430, 11)),
    ("popSehsdTargetsRelship", (73, 999, 1240, 478, 478, 3472, 430, 11)),
    ("hispanic * sex * age_40_groups * relship_and_eight_level_GQ * cenrace",
     (73, 999, 310, 478, 478, 868, 430, 11)),
    ("relgq * age_40_groups * hispanic * cenrace * sex", (73, 999, 310, 478, 478, 868, 430, 11)),
    ("detailed", (73, 999, 310, 478, 478, 868, 430, 11)),
)  # fmt: skip
#: The PL94 persons histogram, as a marginal of the DHC persons schema.
PL94_IN_DHC = "hhgq8lev * votingage * hispanic * cenrace"


@dataclass(frozen=True)
class Strategy:
    """A measurement strategy of the 2020 production run, exact to the fraction.

    Attributes
    ----------
    name : str
    schema : Schema
    rho : Fraction
        The total zCDP budget under bounded neighbours.
    levels : tuple of str
        Geolevel names, root first.
    level_shares : tuple of Fraction
    query_shares : tuple of dict
        Per level, each measured marginal's share of the level's rho.
    invariants : tuple of (level index, marginal name)
        Counts published exactly.
    held : tuple of (level index, marginal name)
        Counts held equal to another release's, not measured by this run: the DHC persons
        run holds the published PL94 persons histogram at every geounit. They cost this
        run no privacy (their release paid for them), so :meth:`workload` does not measure
        them from the table; they are constraints on its post-processing.

    Examples
    --------
    >>> s = load_strategy("pl94-2020-persons")
    >>> s.levels[-1], s.level_shares[-1], s.query_shares[-1]["detailed"]
    ('Block', Fraction(165, 4099), Fraction(3945, 4097))
    """

    name: str
    schema: Schema
    rho: Fraction
    levels: tuple[str, ...]
    level_shares: tuple[Fraction, ...]
    query_shares: tuple[Mapping[str, Fraction], ...]
    invariants: tuple[tuple[int, str], ...]
    held: tuple[tuple[int, str], ...] = ()

    @property
    def budget(self) -> Budget:
        """The run's privacy cost: rho-zCDP (bounded neighbours), rho exact to the float.

        Examples
        --------
        >>> round(load_strategy("pl94-2020-persons").budget.to_approx_dp(1e-10), 2)
        17.14
        """
        return Budget.zcdp(float(self.rho))

    def sigma_table(self) -> pd.DataFrame:
        """Per (level, query): counts per geounit, exact rho share, rho and the noise's
        standard deviation 1 / sqrt(rho x level share x query share).

        Examples
        --------
        >>> t = load_strategy("pl94-2020-persons").sigma_table()
        >>> round(float(t.query("level == 'Block' and query == 'detailed'")["sigma"].iloc[0]), 2)
        3.18
        """
        rows = []
        for d, shares in enumerate(self.query_shares):
            for query, q in shares.items():
                r = self.rho * self.level_shares[d] * q
                rows.append(
                    {
                        "level": self.levels[d],
                        "query": query,
                        "counts_per_geounit": self.schema.marginal(query).size,
                        "share": f"{self.level_shares[d] * q}",
                        "rho": float(r),
                        "sigma": float(r) ** -0.5,
                    }
                )
        return pd.DataFrame(rows)

    def tabulate(self, table: Table) -> Table:
        """The table of this strategy's schema: ``table`` itself when it has the schema's
        cells, else a table of the 2020 persons schema summed over the attributes this
        schema lacks (persons to ``pl94-2020-p1``'s 63 race cells).

        Parameters
        ----------
        table : Table
            Of this strategy's schema or of the persons schema.

        Returns
        -------
        Table
            The same geography; cells of :attr:`schema` (sparse when ``table``'s are).

        Raises
        ------
        ValidationError
            For other cells, or a schema that is not part of the persons schema (units).

        Examples
        --------
        >>> from postdp.nmf import synthetic_population
        >>> t = synthetic_population(states=["11"], seed=0, scale=0.05)
        >>> p1 = load_strategy("pl94-2020-p1").tabulate(t)
        >>> len(p1.categories.leaves), int(p1.counts()[0, 0]) == int(t.counts()[0, 0])
        (63, True)
        """
        if not isinstance(table, Table):
            raise TypeError(f"`table` must be a Table; got {type(table).__name__}")
        cells = _cells(table)
        if cells == self.schema.cells:
            return table
        persons = pl94_schema()
        if cells != persons.cells or not set(self.schema.names) <= set(persons.names):
            raise ValidationError(
                f"strategy {self.name!r} tabulates a table of its own schema's "
                f"{self.schema.size} cells or of the persons schema's; this table has "
                f"{len(cells)} cells"
            )
        collapse = persons.marginal(list(self.schema.names)).count_matrix()
        new = table.cells @ collapse.T
        if not table.is_sparse:
            new = np.asarray(new)
        return Table(table.geography, self.schema.categories(), new)

    def workload(self, table: Table, *, aian: bool = False) -> Workload:
        """The strategy's :class:`~postdp.tables.Workload` for a table of this schema whose
        geography has one level per geolevel (root = US).

        Parameters
        ----------
        table : Table
        aian : bool, default False
            The table is over the AIAN spine (:func:`postdp.tables.aian_branches`: one level
            more, the states' branches below the states). The branches are measured with the
            State level's queries and budget, as the production's spine states were; the
            states keep their invariant totals and no noisy query; a branch's query is public
            when every level below the states publishes it (the units run's totals).

        Returns
        -------
        Workload

        Raises
        ------
        ValidationError
            If the table's detailed cells are not the schema's, or its geography has another
            number of levels.

        Examples
        --------
        >>> from postdp.nmf import synthetic_population
        >>> from postdp.tables import aian_branches
        >>> t = synthetic_population(states=["11"], seed=0, scale=0.05)
        >>> flags = np.arange(t.geography.leaves.size) % 50 == 0
        >>> w = load_strategy("pl94-2020-persons").workload(aian_branches(t, aian=flags), aian=True)
        >>> sorted({m.level for m in w.measurements if m.public}), round(w.budget.rho, 4)
        ([0, 1], 2.5562)
        """
        if not isinstance(table, Table):
            raise TypeError(f"`table` must be a Table; got {type(table).__name__}")
        if _cells(table) != self.schema.cells:
            raise ValidationError(
                f"strategy {self.name!r} needs a table of its schema's {self.schema.size} "
                "detailed cells (Table(geography, schema.categories(), cells))"
            )
        names = (*self.levels[:2], "State branch", *self.levels[2:]) if aian else self.levels
        if table.geography.n_levels != len(names):
            raise ValidationError(
                f"strategy {self.name!r} measures {len(names)} geolevels "
                f"({' > '.join(names)}); the table's geography has "
                f"{table.geography.n_levels}"
                + (" (aian=True measures the spine of postdp.tables.aian_branches)" if aian else "")
            )
        at = [d + (aian and d >= 1) for d in range(len(self.levels))]  # a geolevel's level
        levels: dict[int, tuple[Share, Mapping[Query | str, Share]]] = {}
        for d, shares in enumerate(self.query_shares):
            queries: dict[Query | str, Share] = {}
            queries.update(shares)
            levels[at[d]] = (self.level_shares[d], queries)
        public = [(d if d <= 1 else at[d], q) for d, q in self.invariants]
        if aian:
            below = [{q for d, q in self.invariants if d == e} for e in range(2, len(at))]
            public += [(2, q) for q in sorted(set.intersection(*below))]
        return Workload.from_shares(
            levels,
            total=self.rho,
            schema=self.schema,
            public=public,
            neighbours="bounded",
        )


def _persons() -> Strategy:
    shares = []
    for d in range(len(LEVELS)):
        level = {q: Fraction(v[d]) for q, v in _PERSON_QUERIES if Fraction(v[d]) > 0}
        shares.append(level)
    return Strategy(
        name="pl94-2020-persons",
        schema=pl94_schema(),
        rho=Fraction(542, 339) ** 2,
        levels=LEVELS,
        level_shares=tuple(Fraction(g) for g in _PERSON_LEVELS),
        query_shares=tuple(shares),
        invariants=((0, "total"), (1, "total")),
    )


def _p1() -> Strategy:
    """The persons run's budget and invariants; per level, its ``total`` share and the rest
    on the 63 race cells."""
    persons = _persons()
    shares = []
    for level in persons.query_shares:
        total = level.get("total", Fraction(0))
        shares.append({**({"total": total} if total else {}), "detailed": 1 - total})
    return replace(persons, name="pl94-2020-p1", schema=p1_schema(), query_shares=tuple(shares))


def _units() -> Strategy:
    return Strategy(
        name="pl94-2020-units",
        schema=units_schema(),
        rho=Fraction(3379, 12343) ** 2,
        levels=LEVELS,
        level_shares=tuple(Fraction(g) for g in _UNIT_LEVELS),
        query_shares=tuple({"detailed": Fraction(1)} for _ in LEVELS),
        invariants=tuple((d, "total") for d in range(len(LEVELS))),
    )


def _dhc_persons() -> Strategy:
    rho = [{q: Fraction(v[d], 10000) for q, v in _DHC_QUERIES} for d in range(len(DHC_LEVELS))]
    level = [sum(r.values(), Fraction(0)) for r in rho]
    total = sum(level, Fraction(0))
    return Strategy(
        name="dhc-2020-persons",
        schema=dhc_schema(),
        rho=total,
        levels=DHC_LEVELS,
        level_shares=tuple(g / total for g in level),
        query_shares=tuple(
            {q: v / g for q, v in r.items()} for r, g in zip(rho, level, strict=True)
        ),
        invariants=((0, "total"), (1, "total")),
        held=tuple((d, PL94_IN_DHC) for d in range(len(DHC_LEVELS))),
    )


_STRATEGIES = {
    "pl94-2020-persons": _persons,
    "pl94-2020-p1": _p1,
    "pl94-2020-units": _units,
    "dhc-2020-persons": _dhc_persons,
}


def _cells(table: Table) -> tuple[str, ...]:
    return leaf_codes(table.categories)


def load_strategy(name: str) -> Strategy:
    """A preset measurement strategy: ``"pl94-2020-persons"``, ``"pl94-2020-units"``,
    ``"dhc-2020-persons"`` (the Census Bureau's 2020 production runs) or ``"pl94-2020-p1"``
    (postdp's P1-shaped design: the persons budget on table P1's 63 race cells).

    Parameters
    ----------
    name : str

    Returns
    -------
    Strategy
        With :meth:`Strategy.budget` (17.14, 2.47 and 25.42 epsilon at delta 1e-10; the
        P1 design's is the persons run's),
        :meth:`Strategy.workload` for a table and :meth:`Strategy.sigma_table`.

    Examples
    --------
    >>> s = load_strategy("pl94-2020-units")
    >>> s.rho, round(s.budget.to_approx_dp(1e-10), 2)
    (Fraction(11417641, 152349649), 2.47)
    """
    if name not in _STRATEGIES:
        raise ValidationError(f"unknown strategy {name!r}; known: {', '.join(sorted(_STRATEGIES))}")
    return _STRATEGIES[name]()

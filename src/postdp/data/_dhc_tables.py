"""The 2020 DHC's sex-by-age tables as sums of the DHC persons histogram's cells.

Two tables of the Demographic and Housing Characteristics file (the product the DHC persons
design, ``load_strategy("dhc-2020-persons")``, releases), each a few
:class:`~postdp.tables.Block` rows over :func:`postdp.tables.dhc_schema` (relgq, sex, age,
hispanic, cenrace; relationship, Hispanic origin and race summed out):

- **P12**, "Sex by age for selected age categories" (49 rows): the total, then for each sex
  its total and the 23 age groups of the 2010 SF1 and 2020 DHC table (under 5, 5 to 9, 10 to
  14, 15 to 17, 18 and 19, 20, 21, 22 to 24, five-year groups to 55 to 59, 60 and 61, 62 to
  64, 65 and 66, 67 to 69, five-year groups to 80 to 84, 85 and over; the groups of
  ``age_38_groups`` above 14 in ``shared/research/dhc-2020-design.md`` section 2.1);
- **PCT12**, "Sex by single-year age" (209 rows): the total, then for each sex its total,
  each single year under 100, 100 to 104, 105 to 109 and 110 and over (the schema's ages
  run to 115).

Variable names are the Census's (``P12_001N`` ...), in table order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from postdp._typing import FloatArray
from postdp.data._pl94_tables import pick_tables
from postdp.tables import Block, PublishedTable, dhc_schema

__all__ = ["DHC_TABLES", "dhc_tables"]

#: The DHC tables built here, in the Census's order.
DHC_TABLES = ("P12", "PCT12")

#: P12's age groups: (first year, last year) each.
P12_AGES = (
    (0, 4), (5, 9), (10, 14), (15, 17), (18, 19), (20, 20), (21, 21), (22, 24), (25, 29),
    (30, 34), (35, 39), (40, 44), (45, 49), (50, 54), (55, 59), (60, 61), (62, 64), (65, 66),
    (67, 69), (70, 74), (75, 79), (80, 84), (85, 115),
)  # fmt: skip
#: PCT12's: each single year under 100, then 100 to 104, 105 to 109, 110 and over.
PCT12_AGES = (*((a, a) for a in range(100)), (100, 104), (105, 109), (110, 115))

_TITLES = {
    "P12": "Sex by age for selected age categories",
    "PCT12": "Sex by single-year age",
}


def dhc_tables(names: Sequence[str] | None = None) -> dict[str, PublishedTable]:
    """The 2020 DHC tables P12 and PCT12 as sums of the DHC persons histogram's cells.

    Parameters
    ----------
    names : sequence of str, optional
        Some of ``P12, PCT12`` (default both), in any order; returned in the Census's
        order.

    Returns
    -------
    dict of str to PublishedTable
        Over :func:`postdp.tables.dhc_schema` (1,227,744 cells), universe the total
        population.

    Raises
    ------
    ValidationError
        For a name not in :data:`DHC_TABLES`.

    Examples
    --------
    >>> t = dhc_tables()
    >>> [(k, v.size, v.codes[2]) for k, v in t.items()]
    [('P12', 49, 'P12_003N'), ('PCT12', 209, 'PCT12_003N')]
    >>> t["P12"].labels[2], t["P12"].labels[-1], t["PCT12"].labels[105]
    ('Male: Under 5 years', 'Female: 85 years and over', 'Female')
    """
    return pick_tables(names, DHC_TABLES, _tables())


@functools.cache
def _tables() -> dict[str, PublishedTable]:
    return {
        "P12": _sex_by_age("P12", P12_AGES),
        "PCT12": _sex_by_age("PCT12", PCT12_AGES),
    }


def _age_label(first: int, last: int, top: int) -> str:
    if last == top:
        return f"{first} years and over"
    if first == 0:
        return "Under 1 year" if last == 0 else f"Under {last + 1} years"
    if first == last:
        return "1 year" if first == 1 else f"{first} years"
    if last == first + 1 and first in (18, 60, 65):
        return f"{first} and {last} years"
    return f"{first} to {last} years"


def _sex_by_age(name: str, ages: tuple[tuple[int, int], ...]) -> PublishedTable:
    """The total, then each sex's total and its ``ages`` groups."""
    schema = dhc_schema()
    n_age = schema.shape[schema.names.index("age")]
    groups = np.zeros((len(ages), n_age))
    for row, (first, last) in enumerate(ages):
        groups[row, first : last + 1] = 1.0

    def factors(sex: FloatArray, age: FloatArray) -> list[FloatArray]:
        out = [np.ones((1, n)) for n in schema.shape]
        out[schema.names.index("sex")] = sex
        out[schema.names.index("age")] = age
        return out

    every_age = np.ones((1, n_age))
    code = (f"{name}_{k:03d}N" for k in range(1, 1_000))
    blocks = [Block([next(code)], factors(np.ones((1, 2)), every_age))]
    labels = ["Total"]
    for s, sex in enumerate(("Male", "Female")):
        pick = np.zeros((1, 2))
        pick[0, s] = 1.0
        blocks.append(Block([next(code)], factors(pick, every_age)))
        blocks.append(Block([next(code) for _ in ages], factors(pick, groups)))
        labels += [sex] + [f"{sex}: {_age_label(a, b, n_age - 1)}" for a, b in ages]
    return PublishedTable(name, _TITLES[name], "Total population", schema, blocks, labels)

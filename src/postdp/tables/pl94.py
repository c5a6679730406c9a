"""The schemas of the 2020 redistricting (P.L. 94-171) data: persons, table P1's races and
units (H1).

The persons schema:

Facts from ``shared/research/pl94-2020-design.md`` (the Census Bureau's DAS 2020 schema,
``schema/attributes/hhgq_person_simple.py`` and the cenrace attribute): hhgq has 8 levels
(0 household; 1 adult correctional; 2 juvenile; 3 nursing; 4 other institutional; 5 college
housing; 6 military quarters; 7 other non-institutional), recoded to ``hhinstlevels``
{household, institutional (1-4), non-institutional (5-7)}; votingage {under 18, 18+};
hispanic {not Hispanic, Hispanic}; cenrace the 63 non-empty combinations of the 6 OMB race
groups, ordered by the number of races and then as ``itertools.combinations`` of the races
(recoded to ``numraces``, 1 to 6).
"""

from __future__ import annotations

import itertools

from postdp.tables.schema import Attribute, Recode, Schema

__all__ = ["p1_schema", "pl94_schema", "units_schema"]

_HHGQ = (
    "household",
    "adult correctional",
    "juvenile",
    "nursing",
    "other institutional",
    "college housing",
    "military quarters",
    "other noninstitutional",
)
_RACES = ("white", "black", "aian", "asian", "nhpi", "sor")  # the 6 OMB race groups


def pl94_schema() -> Schema:
    """The persons schema of the 2020 redistricting data: hhgq x votingage x hispanic x
    cenrace = 8 x 2 x 2 x 63 = 2,016 detailed cells, with the recodes ``hhinstlevels`` (of
    hhgq) and ``numraces`` (of cenrace).

    Parameters
    ----------
    None

    Returns
    -------
    Schema

    Examples
    --------
    >>> s = pl94_schema()
    >>> s.shape, s.size
    ((8, 2, 2, 63), 2016)
    >>> s.marginal(["votingage", "hispanic", "cenrace"]).size
    252
    """
    combos = [c for k in range(1, 7) for c in itertools.combinations(range(6), k)]
    cenrace = ["+".join(_RACES[i] for i in c) for c in combos]
    numraces = Recode(
        "numraces", {str(k): [i for i, c in enumerate(combos) if len(c) == k] for k in range(1, 7)}
    )
    hhinstlevels = Recode(
        "hhinstlevels",
        {"household": [0], "institutional": [1, 2, 3, 4], "noninstitutional": [5, 6, 7]},
    )
    return Schema(
        [
            Attribute("hhgq", _HHGQ, recodes=[hhinstlevels]),
            Attribute("votingage", ["under 18", "18+"]),
            Attribute("hispanic", ["not hispanic", "hispanic"]),
            Attribute("cenrace", cenrace, recodes=[numraces]),
        ]
    )


def p1_schema() -> Schema:
    """Table P1's race schema: the persons schema's ``cenrace`` (63 cells, with its recode
    ``numraces``) alone.

    Parameters
    ----------
    None

    Returns
    -------
    Schema

    Examples
    --------
    >>> s = p1_schema()
    >>> s.size, s.cells[:2], s.marginal("numraces").size
    (63, ('white', 'black'), 6)
    """
    return Schema([pl94_schema().attributes[-1]])


def units_schema() -> Schema:
    """The 2020 units (H1) schema: occupancy, 2 cells (vacant, occupied).

    Parameters
    ----------
    None

    Returns
    -------
    Schema

    Examples
    --------
    >>> units_schema().cells
    ('vacant', 'occupied')
    """
    return Schema([Attribute("h1", ["vacant", "occupied"])])

"""The persons schema of the 2020 Demographic and Housing Characteristics file (DHC-P) and
its edits.

Facts from ``shared/research/dhc-2020-design.md`` sections 1.1, 1.3 and 3.1 (the Census
Bureau's DHC production code, ``DAS_2020_DHC_Production_Code``: the attributes of
``programs/schema/attributes/`` and the constraints of
``programs/constraints/Constraints_DHCP.py``):

- relgq (42): 18 relationships to the householder, then the 24 group-quarters types;
- sex (2), age (116: single years 0 to 115), hispanic (2), and cenrace (63, PL94's coding);
- the recodes the production queries name, each a partition of its attribute: of age
  ``age_18_64_116``, ``age_10_groups``, ``age_38_groups``, ``age_40_groups`` and
  ``votingage``; of relgq ``relgq_4_groups``, ``gq_constr_groups``,
  ``popSehsdTargetsRelship``, ``relship_and_eight_level_GQ`` and ``hhgq8lev`` (PL94's 8
  group-quarters levels, whose labels are PL94's, so that the marginal ``hhgq8lev *
  votingage * hispanic * cenrace`` has the 2,016 cells of the PL94 persons histogram);
- the 32 edits: ages a relationship or group-quarters type cannot have (householders under
  15, parents under 30, ...), 1,280 of the 4,872 (relgq, age) pairs, so 322,560 of the
  1,227,744 cells are structural zeros.

The age groups of different recodes overlap without nesting (``age_10_groups`` puts 0-2
together, ``age_38_groups`` keeps them single), which is why this schema's marginals are
not a tree.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from postdp._typing import BoolArray
from postdp.tables.pl94 import pl94_schema
from postdp.tables.schema import Attribute, Recode, Schema

__all__ = ["DHC_EDITS", "Edit", "dhc_schema", "dhc_structural_zeros"]

_RELGQ = (
    "householder living alone",
    "householder not living alone",
    "opposite-sex spouse",
    "opposite-sex unmarried partner",
    "same-sex spouse",
    "same-sex unmarried partner",
    "biological child",
    "adopted child",
    "stepchild",
    "sibling",
    "parent",
    "grandchild",
    "parent-in-law",
    "child-in-law",
    "other relative",
    "roommate or housemate",
    "foster child",
    "other nonrelative",
    "GQ101 federal detention",
    "GQ102 federal prison",
    "GQ103 state prison",
    "GQ104 local jail",
    "GQ105 correctional residential",
    "GQ106 military disciplinary barracks",
    "GQ201 juvenile group home",
    "GQ202 juvenile residential treatment",
    "GQ203 juvenile correctional",
    "GQ301 nursing facility",
    "GQ401 mental hospital",
    "GQ402 hospital, no usual home elsewhere",
    "GQ403 in-patient hospice",
    "GQ404 military treatment",
    "GQ405 residential school for people with disabilities",
    "GQ501 college or university housing",
    "GQ601 military quarters",
    "GQ602 military ships",
    "GQ701 emergency and transitional shelters",
    "GQ801 adult group homes",
    "GQ802 adult residential treatment",
    "GQ900 maritime or merchant vessels",
    "GQ901 workers' quarters and job corps",
    "GQ997 other noninstitutional",
)
_AGES = 116
# the relgq codes of PL94's 7 group-quarters levels (hhgq 1-7), after the households (0-17)
_GQ_MAJOR = (range(18, 24), range(24, 27), range(27, 28), range(28, 33), range(33, 34),
             range(34, 36), range(36, 42))  # fmt: skip


def _spans(name: str, bounds: Sequence[tuple[int, int]]) -> Recode:
    """An age recode from inclusive (first, last) spans, labelled ``first-last`` (or the
    single year)."""
    groups = {(f"{a}" if a == b else f"{a}-{b}"): range(a, b + 1) for a, b in bounds}
    return Recode(name, groups)


# 18-19 .. 110-115: the groups above 17 shared by age_38_groups and age_40_groups
_ADULT_SPANS = (
    (18, 19), (20, 24), (25, 29), (30, 34), (35, 39), (40, 44), (45, 49), (50, 54), (55, 59),
    (60, 61), (62, 64), (65, 66), (67, 69), (70, 74), (75, 79), (80, 84), (85, 89), (90, 94),
    (95, 99), (100, 104), (105, 109), (110, 115),
)  # fmt: skip


_TEN_ADULT = ((18, 19), (20, 24), (25, 29), (30, 34), (35, 115))


def _age() -> Attribute:
    singles = tuple((a, a) for a in range(15))
    recodes = [
        _spans("age_18_64_116", [(0, 17), (18, 64), (65, 115)]),
        _spans("age_10_groups", [(0, 2), (3, 14), (15, 15), (16, 16), (17, 17), *_TEN_ADULT]),
        _spans("age_38_groups", [*singles, (15, 17), *_ADULT_SPANS]),
        _spans("age_40_groups", [*singles, (15, 15), (16, 16), (17, 17), *_ADULT_SPANS]),
        Recode("votingage", {"under 18": range(18), "18+": range(18, _AGES)}),
    ]
    return Attribute("age", [str(a) for a in range(_AGES)], recodes=recodes)


def _relgq() -> Attribute:
    households = range(18)
    # PL94's own labels, so that hhgq8lev's counts are the PL94 histogram's
    hhgq = pl94_schema().attributes[0].levels
    major = dict(zip(hhgq[1:], _GQ_MAJOR, strict=True))
    recodes = [
        Recode(
            "relgq_4_groups",
            {
                "householder": [0, 1],
                "other household member": range(2, 18),
                "institutional": range(18, 33),
                "noninstitutional": range(33, 42),
            },
        ),
        Recode(
            "gq_constr_groups",
            {
                "household": households,
                "GQ405": [32],
                "adult correctional but GQ106": range(18, 23),
                "college, adult group homes and other noninstitutional": [33, 37, 38, 39, 40, 41],
                "GQ106, military": [23, 31, 34, 35],
                "no age edit": [*range(24, 31), 36],
            },
        ),
        Recode(
            "popSehsdTargetsRelship",
            {**{_RELGQ[r]: [r] for r in households}, "group quarters": range(18, 42)},
        ),
        Recode(
            "relship_and_eight_level_GQ",
            {**{_RELGQ[r]: [r] for r in households}, **major},
        ),
        Recode("hhgq8lev", {hhgq[0]: households, **major}),
    ]
    return Attribute("relgq", _RELGQ, recodes=recodes)


@functools.cache
def dhc_schema() -> Schema:
    """The persons schema of the 2020 DHC: relgq x sex x age x hispanic x cenrace = 42 x 2 x
    116 x 2 x 63 = 1,227,744 detailed cells, with the production queries' recodes.

    Parameters
    ----------
    None

    Returns
    -------
    Schema
        ``hispanic`` and ``cenrace`` (with its recode ``numraces``) are the PL94 persons
        schema's own attributes, and the recodes ``hhgq8lev`` (of relgq) and ``votingage``
        (of age) have PL94's labels: the marginal ``hhgq8lev * votingage * hispanic *
        cenrace`` is the PL94 persons histogram, count for count. The same object on
        every call: what it makes once (its category tree, its queries) is made once.

    Examples
    --------
    >>> s = dhc_schema()
    >>> s.shape, s.size
    ((42, 2, 116, 2, 63), 1227744)
    >>> s.marginal("relgq * age_40_groups * hispanic * cenrace * sex").size
    423360
    """
    pl94 = pl94_schema()
    return Schema.shared(  # the one a run's manifest reads back to, too
        [
            _relgq(),
            Attribute("sex", ["male", "female"]),
            _age(),
            pl94.attributes[2],  # hispanic
            pl94.attributes[3],  # cenrace
        ]
    )


@dataclass(frozen=True)
class Edit:
    """One of the DHC's relationship/group-quarters x age edits: nobody of relgq ``relgq``
    has an age in ``ages`` (``Constraints_DHCP.py``'s name in ``name``).

    Examples
    --------
    >>> e = DHC_EDITS[0]
    >>> e.name, e.relgq, e.ages[0], e.ages[-1]
    ('relgq0_lt15', 0, 0, 14)
    """

    name: str
    relgq: int
    ages: tuple[int, ...]


def _edits() -> tuple[Edit, ...]:
    def span(*bounds: tuple[int, int]) -> tuple[int, ...]:
        return tuple(a for lo, hi in bounds for a in range(lo, hi + 1))

    rules: list[tuple[Sequence[int], str, tuple[int, ...]]] = [
        (range(6), "lt15", span((0, 14))),
        ((6, 7, 8), "gt89", span((90, 115))),
        ((10, 12), "lt30", span((0, 29))),
        ((11,), "gt74", span((75, 115))),
        ((13,), "lt15_gt89", span((0, 14), (90, 115))),
        ((16,), "gt20", span((21, 115))),
        (range(18, 23), "lt15", span((0, 14))),
        ((23, 31, 34, 35), "lt17_gt65", span((0, 16), (66, 115))),
        ((24, 25, 26), "gt25", span((26, 115))),
        ((27,), "lt20", span((0, 19))),
        ((32,), "lt3_gt30", span((0, 2), (31, 115))),
        ((33,), "lt16_gt65", span((0, 15), (66, 115))),
        ((37, 38), "lt16", span((0, 15))),
        ((39,), "lt16_gt75", span((0, 15), (76, 115))),
    ]
    edits = [Edit(f"relgq{r}_{suffix}", r, ages) for codes, suffix, ages in rules for r in codes]
    return tuple(sorted(edits, key=lambda e: e.relgq))


#: The 32 structural-zero edits of the DHC persons production run (``person_US.ini``'s
#: constraint list; ``relgq40_lt16_gt75`` is coded there but not in the list, so not here).
DHC_EDITS: tuple[Edit, ...] = _edits()


def dhc_structural_zeros(schema: Schema | None = None) -> BoolArray:
    """The detailed cells the edits forbid: True where a cell's (relgq, age) pair is edited
    out, shape (1,227,744,), in the schema's cell order.

    Parameters
    ----------
    schema : Schema, optional
        :func:`dhc_schema` (the default); any schema whose first and third attributes are
        relgq and age in its order.

    Returns
    -------
    ndarray of bool

    Examples
    --------
    >>> int(dhc_structural_zeros().sum()), len(DHC_EDITS)
    (322560, 32)
    """
    s = dhc_schema() if schema is None else schema
    pairs = np.zeros((s.shape[0], s.shape[2]), dtype=bool)  # (relgq, age)
    for e in DHC_EDITS:
        pairs[e.relgq, list(e.ages)] = True
    shape = s.shape
    out = np.broadcast_to(pairs[:, None, :, None, None], shape)
    return np.ascontiguousarray(out).reshape(-1)

"""The state codes of the 2020 redistricting spine (one rule for every input).

The nation's spine has the 50 states and the District of Columbia below the US root; Puerto
Rico (72) was a run of its own and the island areas were not in the P.L. 94-171 design. A
2-digit code outside these is refused wherever postdp takes a state: person records
(``TABBLKST``), block histograms (a GEOID's first two digits) and ``--synthetic``.
"""

from __future__ import annotations

from collections.abc import Iterable

from postdp.errors import ValidationError

#: FIPS codes of the 50 states and DC (ANSI INCITS 38; the 2020 Census's state list).
STATE_FIPS = frozenset(
    {
        "01",
        "02",
        "04",
        "05",
        "06",
        "08",
        "09",
        "10",
        "11",
        "12",
        "13",
        "15",
        "16",
        "17",
        "18",
        "19",
        "20",
        "21",
        "22",
        "23",
        "24",
        "25",
        "26",
        "27",
        "28",
        "29",
        "30",
        "31",
        "32",
        "33",
        "34",
        "35",
        "36",
        "37",
        "38",
        "39",
        "40",
        "41",
        "42",
        "44",
        "45",
        "46",
        "47",
        "48",
        "49",
        "50",
        "51",
        "53",
        "54",
        "55",
        "56",
    }
)


def check_states(codes: Iterable[str], where: str) -> None:
    """Refuse any code of ``codes`` that is not a state of the spine, naming ``where`` (the
    column or flag) and the codes (codes are geography, never counts)."""
    unknown = sorted(set(codes) - STATE_FIPS)
    if unknown:
        raise ValidationError(f"{where}: not a FIPS code of the 50 states and DC: {unknown}")

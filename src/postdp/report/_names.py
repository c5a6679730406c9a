"""What a report calls levels and geounits: names, not codes (private).

A report shows the geographic level by its name (``US``, ``State``, ``County``, ``Tract``,
``Block Group``, ``Block``) when the ids of that level are Census GEOIDs of one length, and a
geounit by its name where postdp knows it: the names given with the data, else the states of
the bundled 2010 county file and the counties of the bundled 2020 P1 file (``"Monroe County,
Georgia"``), tracts and block groups spelled as the Census spells them from their codes. A
county (or anything deeper) named without its state gets the state's name after a comma.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp.hierarchy import Hierarchy

__all__ = ["geounit_names", "level_names"]

#: Level name of a GEOID by its number of digits (the Census's summary levels).
_BY_LENGTH = {2: "State", 5: "County", 11: "Tract", 12: "Block Group", 15: "Block"}


def level_names(geography: Hierarchy) -> list[str]:
    """The name of each level of ``geography``, root first.

    A level whose ids are all GEOIDs of one length is named for that length (2 digits:
    ``State``, 5: ``County``, 11: ``Tract``, 12: ``Block Group``, 15: ``Block``); a root
    with id ``US`` is ``US``. Any other level keeps its number (``"0"``, ``"1"`` ...).

    Examples
    --------
    >>> h = Hierarchy.from_parents(["US", "13", "13207"], [None, "US", "13"])
    >>> level_names(h)
    ['US', 'State', 'County']
    >>> level_names(Hierarchy.from_parents(["T", "a"], [None, "T"]))
    ['0', '1']
    """
    out = []
    ids = geography.ids
    for d, nodes in enumerate(geography.levels):
        codes = [str(i) for i in ids[nodes]]
        lengths = {len(c) for c in codes}
        name = str(d)
        if d == 0 and codes == ["US"]:
            name = "US"
        elif len(lengths) == 1 and all(c.isdigit() for c in codes):
            name = _BY_LENGTH.get(lengths.pop(), name)
        out.append(name)
    if len(set(out)) != len(out):  # two levels with one name: numbers tell them apart
        return [str(d) for d in range(len(out))]
    return out


def geounit_names(
    geography: Hierarchy, names: Sequence[str] | npt.ArrayLike | None = None
) -> npt.NDArray[np.object_]:
    """A display name per node of ``geography`` (its id where postdp knows no name).

    Parameters
    ----------
    geography : Hierarchy
    names : sequence of str, optional
        Names given with the data (one per node); they win over the bundled ones.

    Returns
    -------
    ndarray of str
        A node below the states named without a comma gets ", " and its state's name.

    Examples
    --------
    >>> h = Hierarchy.from_parents(["US", "13", "13207", "99"], [None, "US", "13", "US"])
    >>> geounit_names(h).tolist()
    ['United States', 'Georgia', 'Monroe County, Georgia', '99']
    >>> geounit_names(h, ["Nation", "Georgia", "Monroe County", "X"]).tolist()[2]
    'Monroe County, Georgia'
    """
    ids = [str(i) for i in geography.ids]
    if names is not None:
        shown = [str(n) for n in np.asarray(names, dtype=object)]
    else:
        known = _bundled()
        shown = [known.get(i) or _spelled(i) or i for i in ids]
    out = np.asarray(shown, dtype=object)
    depth, parent = geography.depth, geography.parent
    state = np.arange(geography.n)
    for _ in range(int(depth.max(initial=0))):  # walk each node up to its depth-1 ancestor
        state = np.where(depth[state] > 1, parent[state], state)
    for k in np.flatnonzero(depth > 1):
        above = str(out[state[k]])
        if above != ids[state[k]] and "," not in str(out[k]) and above not in str(out[k]):
            out[k] = f"{out[k]}, {above}"
    return out


@functools.cache
def _bundled() -> dict[str, str]:
    """GEOID -> name: the nation and states (bundled 2010 file) and the counties (2020 P1)."""
    files = resources.files("postdp.data").joinpath("_files")
    with files.joinpath("county_populations_2010.csv").open("rb") as handle:
        pops = pd.read_csv(handle, dtype=str, keep_default_na=False, usecols=["id", "name"])
    out = dict(zip(pops["id"], pops["name"], strict=True))
    out = {k: v for k, v in out.items() if len(k) != 5}  # its counties lack their state
    with files.joinpath("p1_2020_us_county.csv.gz").open("rb") as handle:
        counties = pd.read_csv(
            handle, dtype=str, keep_default_na=False, usecols=["geo_id", "name"],
            compression="gzip",
        )  # fmt: skip
    out.update(zip(counties["geo_id"], counties["name"], strict=True))
    return out


def _spelled(code: str) -> str:
    """A tract (11 digits) or block group (12) as the Census names it, without the county:
    ``Census Tract 301.01`` / ``Block Group 1, Census Tract 301.01``; else ""."""
    if not re.fullmatch(r"[0-9]{11,12}", code):
        return ""
    tract = code[5:11]
    number = str(int(tract[:4])) + ("" if tract[4:] == "00" else "." + tract[4:])
    county = _bundled().get(code[:5], "")
    text = f"Census Tract {number}" + (f", {county}" if county else "")
    return text if len(code) == 11 else f"Block Group {code[11]}, {text}"

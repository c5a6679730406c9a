"""What a report calls levels and geounits: names, not codes (private).

A report shows the geographic level by its name (``US``, ``State``, ``County``, ``Tract``,
``Block Group``, ``Block``) when the ids of that level are Census GEOIDs of one length, and a
geounit by its name where postdp knows it: the names given with the data, else the nation,
states and counties of :func:`postdp.data.geography_names` (``"Monroe County, Georgia"``),
tracts and block groups spelled as the Census spells them from their codes. A county (or
anything deeper) named without its state gets the state's name after a comma.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from postdp.hierarchy import Hierarchy

__all__ = ["geounit_names"]


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


def _bundled() -> dict[str, str]:
    """GEOID -> name of the nation, states and counties (:func:`postdp.data.geography_names`)."""
    from postdp.data import geography_names

    return geography_names()


def _spelled(code: str) -> str:
    """A tract (11 digits) or block group (12) as the Census names it, inside its county
    when postdp knows the county (:func:`postdp.data.geoid_names`); else ""."""
    from postdp.data import geoid_names

    if not re.fullmatch(r"[0-9]{11,12}", code):
        return ""
    return geoid_names([code])[0]

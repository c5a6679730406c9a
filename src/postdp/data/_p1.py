"""The bundled 2020 P.L. 94-171 table P1 (race) as postdp tables (private module)."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.tables import Table

#: Names accepted by :func:`load_p1`, with their file and geography.
P1_TABLES = {
    "pa-blockgroup": "p1_2020_pa_blockgroup.csv.gz",
    "us-county": "p1_2020_us_county.csv.gz",
}


def _file(name: str) -> pd.DataFrame:
    source = resources.files("postdp.data").joinpath(f"_files/{name}")
    dtypes = {"geo_id": str, "code": str, "parent": str}
    with source.open("rb") as handle:
        if name.endswith(".gz"):
            return pd.read_csv(handle, dtype=dtypes, keep_default_na=False, compression="gzip")
        return pd.read_csv(handle, dtype=dtypes, keep_default_na=False)


def p1_categories() -> tuple[Hierarchy, dict[str, str]]:
    """The P1 category tree (71 nodes, 63 detailed cells) and its labels."""
    tree = _file("p1_categories.csv")
    categories = Hierarchy.from_frame(tree, id="code", parent="parent", count=None)
    return categories, dict(zip(tree["code"], tree["label"], strict=True))


def load_p1(name: str) -> Table:
    """The 2020 Census redistricting table P1 (race) as a :class:`~postdp.tables.Table`.

    Parameters
    ----------
    name : {"pa-blockgroup", "us-county"}
        ``"pa-blockgroup"``: every block group of Pennsylvania, geography state (``"42"``) >
        67 counties (``"42001"``) > 3,446 tracts (``"42001030101"``) > 10,173 block groups
        (``"420010301011"``), ids the Census GEOIDs. ``"us-county"``: nation (``"US"``) >
        52 states with DC and Puerto Rico (``"42"``) > 3,221 counties (``"42001"``).

    Returns
    -------
    Table
        Categories: the P1 column codes (``P1_001N`` = Total ... ``P1_071N``), 71 nodes of
        which 63 are detailed cells, with the Bureau's labels. Checked on load: every
        aggregate column equals the sum of its detailed cells and every geographic parent
        the sum of its children.

    Notes
    -----
    These published 2020 counts are themselves the output of the Census Bureau's disclosure
    avoidance system (the TopDown algorithm: noise, then post-processing). postdp uses them
    as the *truth* of simulations; they are not the confidential counts. Source and cleaning:
    ``postdp/data/PROVENANCE.md``.

    Examples
    --------
    >>> t = load_p1("us-county")
    >>> t.shape, int(t.counts()[0, 0])
    ((3274, 71), 334735155)
    """
    if name not in P1_TABLES:
        raise ValidationError(
            f"unknown P1 table {name!r}; choose one of {', '.join(sorted(P1_TABLES))}"
        )
    raw = _file(P1_TABLES[name])
    categories, labels = p1_categories()
    geo_id = raw["geo_id"]
    if name == "us-county":
        codes = pd.DataFrame({"STATE": geo_id.str[:2], "COUNTY": geo_id.str[2:]})
        geography = Hierarchy.from_codes(codes, ["STATE", "COUNTY"], count=None, root="US")
    else:
        parts = [geo_id.str[:2], geo_id.str[:5], geo_id.str[:11], geo_id]
        ids = np.concatenate([["42"], *(p.drop_duplicates().to_numpy() for p in parts[1:])])
        parents = np.concatenate(
            [[""], *(parts[k - 1][~parts[k].duplicated()].to_numpy() for k in range(1, 4))]
        )
        frame = pd.DataFrame({"id": ids, "parent": parents})
        if (geo_id.str[:2] != "42").any():
            raise ValidationError("the Pennsylvania file holds a block group outside state 42")
        geography = Hierarchy.from_frame(frame, count=None)
    return Table.from_wide(raw, geography, categories, labels=labels)

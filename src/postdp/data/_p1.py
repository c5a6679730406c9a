"""The bundled 2020 P.L. 94-171 table P1 (race) as postdp tables (private module)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

import numpy as np
import pandas as pd

from postdp import _rng
from postdp._typing import RNGLike
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
    return Table.from_wide(raw, geography, categories, labels=labels, ignore=["name"])


def synthetic_table(
    fanout: Sequence[float] = (52, 62, 26),
    *,
    leaf_mean: float = 4000.0,
    concentration: float = 20.0,
    rng: RNGLike = None,
) -> Table:
    """A synthetic P1-shaped table for scale tests: a census-shaped geography whose leaves
    carry sparse, skewed histograms over the 63 detailed P1 cells.

    Parameters
    ----------
    fanout : sequence of float, default (52, 62, 26)
        Children per node below the root, as in :func:`synthetic_hierarchy`; the default is
        the nation > 52 states > ~3,200 counties > ~84,000 tracts. ``(52, 62, 26, 3, 34)``
        reaches about 8 million blocks (a cells array of 8M x 63 int64 = 4 GB).
    leaf_mean : float, default 4000
        Mean population of a leaf geounit (geometric, so many small ones).
    concentration : float, default 20
        Each leaf's category shares are Dirichlet(concentration x the national 2020 P1
        shares): small values make leaves less alike (more diverse places and more zeros).
    rng : int, numpy.random.Generator, SeedSequence or None

    Returns
    -------
    Table
        Built with array operations only (no Python object per geounit); ids as in
        :func:`synthetic_hierarchy`, categories the P1 codes.

    Examples
    --------
    >>> t = synthetic_table((3, 4), leaf_mean=50, rng=0)
    >>> t.shape, t.cells.shape
    ((15, 71), (11, 63))
    """
    from postdp.data import synthetic_hierarchy

    if not np.isfinite(concentration) or concentration <= 0:
        raise ValidationError(f"`concentration` must be positive; got {concentration!r}")
    gen = _rng.as_generator(rng)
    geography = synthetic_hierarchy(fanout, leaf_mean=leaf_mean, rng=gen)
    categories, labels = p1_categories()
    nation = load_p1("us-county").cells.sum(axis=0).astype(float)
    shares = gen.dirichlet(concentration * nation / nation.sum(), size=geography.leaves.size)
    shares = np.maximum(shares, 0.0)
    shares /= shares.sum(axis=1, keepdims=True)
    assert geography.counts is not None
    cells = gen.multinomial(geography.counts[geography.leaves], shares)
    return Table(geography, categories, cells, labels)

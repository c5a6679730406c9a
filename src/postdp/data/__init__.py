"""Real public-domain Census data shipped with postdp (see ``PROVENANCE.md`` beside this file)."""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_county_populations"]


def load_county_populations() -> pd.DataFrame:
    """The 2010 Census population of the nation, its 51 states (with DC) and 3,143 counties.

    Parameters
    ----------
    None

    Returns
    -------
    pandas.DataFrame
        One row per node, in the order nation, states, counties, with columns

        - ``id`` (str): ``"US"``, the 2-digit state FIPS code (``"01"``) or the 5-digit
          county FIPS code (``"01001"``);
        - ``parent`` (str): the parent's id; missing for the nation;
        - ``name`` (str): e.g. ``"Autauga County"``;
        - ``level`` (str): ``"nation"``, ``"state"`` or ``"county"``;
        - ``count`` (int64): the 2010 census count.

    Notes
    -----
    Cleaned from the Census Bureau's ``co-est2020-alldata.csv`` (column ``CENSUS2010POP``)
    by ``scripts/clean_county_populations.py``, with two repairs for boundary changes after
    2010 (Alaska's Chugach and Copper River Census Areas; Bedford city merged into Bedford
    County, Virginia). Every state equals the sum of its counties and the nation is
    308,745,538, the official 2010 count. Public domain (US Census Bureau).

    Examples
    --------
    >>> from postdp.data import load_county_populations
    >>> df = load_county_populations()
    >>> df.shape, int(df.loc[df.id == "US", "count"].iloc[0])
    ((3195, 5), 308745538)
    >>> df.groupby("level").size().to_dict()
    {'county': 3143, 'nation': 1, 'state': 51}
    """
    source = resources.files("postdp.data").joinpath("_files/county_populations_2010.csv")
    with source.open("rb") as handle:
        frame = pd.read_csv(
            handle,
            dtype={"id": "str", "parent": "str", "name": "str", "level": "str", "count": "int64"},
            keep_default_na=False,
            na_values={"parent": [""]},
        )
    return frame

"""Build ``src/postdp/data/_files/county_populations_2010.csv`` from the Census raw file.

Usage::

    python scripts/clean_county_populations.py \
        ../shared/data/census2010_county/co-est2020-alldata.csv

The raw file is the Census Bureau's ``co-est2020-alldata.csv`` (county population estimates,
vintage 2020), whose column ``CENSUS2010POP`` holds the 2010 decennial census count of every
state (SUMLEV 40) and county (SUMLEV 50). Two repairs make every state equal the sum of its
counties (see ``src/postdp/data/PROVENANCE.md``):

1. Alaska's Chugach (02063) and Copper River (02066) Census Areas, created in 2019, have "X"
   as their 2010 count; their ``ESTIMATESBASE2010`` values (6,684 and 2,952) are used.
2. Bedford city, Virginia (2010 population 6,222), merged into Bedford County (51019) in 2013
   and has no row; its 6,222 people are added to Bedford County.

The nation row ("US") is the sum of the 51 states: 308,745,538, the official 2010 count.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src/postdp/data/_files/county_populations_2010.csv"
BEDFORD_CITY_2010 = 6222
US_2010 = 308_745_538


def clean(raw_path: Path) -> pd.DataFrame:
    raw = pd.read_csv(raw_path, encoding="latin-1", dtype=str)
    raw = raw[raw["SUMLEV"].isin(["040", "40", "050", "50"])].copy()
    raw["state"] = raw["STATE"].astype(int).map("{:02d}".format)
    raw["county"] = raw["COUNTY"].astype(int).map("{:03d}".format)
    missing = raw["CENSUS2010POP"].str.strip() == "X"
    raw.loc[missing, "CENSUS2010POP"] = raw.loc[missing, "ESTIMATESBASE2010"]
    raw["count"] = raw["CENSUS2010POP"].astype("int64")

    states = raw[raw["SUMLEV"].astype(int) == 40]
    counties = raw[raw["SUMLEV"].astype(int) == 50].copy()
    bedford = (counties["state"] == "51") & (counties["county"] == "019")
    if bedford.sum() != 1:
        raise SystemExit("Bedford County, VA (51019) not found exactly once")
    counties.loc[bedford, "count"] += BEDFORD_CITY_2010

    nation = pd.DataFrame(
        {
            "id": ["US"],
            "parent": [""],
            "name": ["United States"],
            "level": ["nation"],
            "count": [int(states["count"].sum())],
        }
    )
    state_rows = pd.DataFrame(
        {
            "id": states["state"],
            "parent": "US",
            "name": states["STNAME"],
            "level": "state",
            "count": states["count"],
        }
    )
    county_rows = pd.DataFrame(
        {
            "id": counties["state"] + counties["county"],
            "parent": counties["state"],
            "name": counties["CTYNAME"],
            "level": "county",
            "count": counties["count"],
        }
    )
    table = pd.concat([nation, state_rows, county_rows], ignore_index=True)

    # the checks promised in PROVENANCE.md
    if len(state_rows) != 51 or len(county_rows) != 3143:
        raise SystemExit(
            f"expected 51 states and 3143 counties; got {len(state_rows)}, {len(county_rows)}"
        )
    if int(nation["count"].iloc[0]) != US_2010:
        raise SystemExit(f"nation total {int(nation['count'].iloc[0])} != {US_2010}")
    by_state = county_rows.groupby("parent")["count"].sum()
    mismatch = state_rows.set_index("id")["count"] - by_state
    if (mismatch != 0).any():
        raise SystemExit(
            f"states differ from the sum of their counties:\n{mismatch[mismatch != 0]}"
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="path to co-est2020-alldata.csv")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output CSV (default {OUT})")
    args = parser.parse_args()
    table = clean(args.raw)
    table.to_csv(args.out, index=False)
    print(f"wrote {len(table)} rows to {args.out}")


if __name__ == "__main__":
    main()

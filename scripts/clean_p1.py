"""Build the bundled 2020 P.L. 94-171 table P1 files from the Census Bureau's downloads.

Usage::

    python scripts/clean_p1.py ../shared/data

Reads ``pl94171_2020_pa_blockgroup/DECENNIALPL2020.P1-Data.csv`` (every block group of
Pennsylvania), its ``P1-Column-Metadata.csv`` (the column labels, which give the category
tree) and ``pl94171_2020_us_county/DECENNIALPL2020.P1-Data.csv`` (every county of the 50
states, DC and Puerto Rico), and writes into ``src/postdp/data/_files/``:

- ``p1_categories.csv``: ``code`` (``P1_001N`` ...), ``parent`` (empty for the total),
  ``label`` (the last part of the Bureau's label): 71 nodes, 63 detailed cells.
- ``p1_2020_pa_blockgroup.csv.gz``: ``geo_id`` (the 12-digit block-group GEOID: state 2,
  county 3, tract 6, block group 1 digits), ``name`` and the 71 P1 columns.
- ``p1_2020_us_county.csv.gz``: ``geo_id`` (the 5-digit county FIPS), ``name`` and the 71
  columns.

Checks (the script stops on a failure): the category tree has 71 nodes and 63 leaves; in
every row every aggregate column equals the sum of its children; 10,173 block groups and
3,221 counties; the GEO_ID summary levels are 150 (block group) and 050 (county).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src/postdp/data/_files"


def category_tree(metadata: Path) -> pd.DataFrame:
    """Codes, parents and short labels from the Bureau's "!!"-separated label paths."""
    meta = pd.read_csv(metadata, dtype=str, encoding="utf-8-sig")
    meta = meta[meta["Column Name"].str.match(r"^P1_\d{3}N$")]
    paths = {
        row["Column Name"]: tuple(p.strip().rstrip(":") for p in row["Label"].split("!!")[1:])
        for _, row in meta.iterrows()
    }
    by_path = {path: code for code, path in paths.items()}
    rows = []
    for code, path in paths.items():
        parent = by_path.get(path[:-1], "") if len(path) > 1 else ""
        if len(path) > 1 and not parent:
            raise SystemExit(f"{code}: no column for its parent {path[:-1]}")
        rows.append({"code": code, "parent": parent, "label": path[-1]})
    tree = pd.DataFrame(rows)
    leaves = set(tree["code"]) - set(tree["parent"])
    if len(tree) != 71 or len(leaves) != 63:
        raise SystemExit(f"expected 71 categories and 63 leaves; got {len(tree)}, {len(leaves)}")
    return tree


def read_p1(path: Path, summary_level: str, digits: int, rows: int) -> pd.DataFrame:
    raw = pd.read_csv(path, dtype=str, encoding="utf-8-sig", skiprows=[1])
    raw = raw.loc[:, ~raw.columns.str.startswith("Unnamed")]
    if not raw["GEO_ID"].str.startswith(f"{summary_level}0000US").all():
        raise SystemExit(f"{path}: a GEO_ID outside summary level {summary_level}")
    if len(raw) != rows:
        raise SystemExit(f"{path}: expected {rows} rows; got {len(raw)}")
    out = pd.DataFrame({"geo_id": raw["GEO_ID"].str[-digits:], "name": raw["NAME"]})
    codes = [c for c in raw.columns if c.startswith("P1_")]
    out[codes] = raw[codes].astype(np.int64)
    return out


def check_sums(table: pd.DataFrame, tree: pd.DataFrame, label: str) -> None:
    for parent, kids in tree[tree["parent"] != ""].groupby("parent")["code"]:
        gap = table[parent] - table[list(kids)].sum(axis=1)
        if (gap != 0).any():
            raise SystemExit(f"{label}: {parent} != sum of its children in {(gap != 0).sum()} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shared_data", type=Path, help="the folder holding pl94171_2020_*")
    root = parser.parse_args().shared_data
    tree = category_tree(root / "pl94171_2020_pa_blockgroup/DECENNIALPL2020.P1-Column-Metadata.csv")
    pa = read_p1(root / "pl94171_2020_pa_blockgroup/DECENNIALPL2020.P1-Data.csv", "150", 12, 10173)
    us = read_p1(root / "pl94171_2020_us_county/DECENNIALPL2020.P1-Data.csv", "050", 5, 3221)
    for table, label in ((pa, "PA block groups"), (us, "US counties")):
        if sorted(c for c in table.columns if c.startswith("P1_")) != sorted(tree["code"]):
            raise SystemExit(f"{label}: the P1 columns differ from the category tree")
        check_sums(table, tree, label)
    tree.to_csv(OUT / "p1_categories.csv", index=False)
    for table, name in ((pa, "p1_2020_pa_blockgroup"), (us, "p1_2020_us_county")):
        table.to_csv(
            OUT / f"{name}.csv.gz", index=False, compression={"method": "gzip", "mtime": 0}
        )
    print(f"wrote {OUT}: 71 categories, {len(pa):,} block groups, {len(us):,} counties")
    print(f"  PA total {pa['P1_001N'].sum():,}; US total {us['P1_001N'].sum():,}")


if __name__ == "__main__":
    main()

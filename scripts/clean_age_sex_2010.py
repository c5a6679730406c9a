"""Build ``src/postdp/data/_files/age_sex_2010_us.csv`` from the Census raw file.

Usage::

    python scripts/clean_age_sex_2010.py nc-est2019-agesex-res.csv

The raw file is the Census Bureau's ``nc-est2019-agesex-res.csv`` (national population by
single year of age and sex, vintage 2019): rows ``SEX`` (0 both, 1 male, 2 female) x ``AGE``
(0-99, 100 for 100 and over, 999 for all ages); its column ``CENSUS2010POP`` is the April 1,
2010 census count. The output keeps that column alone, one row per age (``age``: 0-99 and
``100+``) with ``male`` and ``female`` columns, after checking that at every age the two
sexes add up to the both-sexes row and that the totals are the official 2010 counts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src/postdp/data/_files/age_sex_2010_us.csv"
US_2010, MEN_2010, WOMEN_2010 = 308_745_538, 151_781_326, 156_964_212


def clean(raw_path: Path) -> pd.DataFrame:
    raw = pd.read_csv(raw_path, usecols=["SEX", "AGE", "CENSUS2010POP"], dtype="int64")
    wide = raw.pivot(index="AGE", columns="SEX", values="CENSUS2010POP")
    total = wide.loc[999]
    ages = wide.drop(index=999).sort_index()
    assert list(ages.index) == list(range(101)), "ages 0-100"
    assert (ages[1] + ages[2] == ages[0]).all(), "men and women add up to both sexes"
    assert (total[0], total[1], total[2]) == (US_2010, MEN_2010, WOMEN_2010)
    assert (ages.sum() == total).all(), "the single years add up to the totals"
    out = pd.DataFrame(
        {
            "age": [str(a) for a in range(100)] + ["100+"],
            "male": ages[1].to_numpy(),
            "female": ages[2].to_numpy(),
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", type=Path, help="nc-est2019-agesex-res.csv")
    args = parser.parse_args()
    clean(args.raw).to_csv(OUT, index=False)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

"""Build the Title I and Section 203 tables shipped in ``src/postdp/data/_files``.

Usage (needs xlrd and openpyxl, which the package itself does not)::

    python scripts/clean_decision_data.py ../shared/data

Writes

- ``title1_districts_2019.csv`` from ``saipe/ussd19.xls`` (SAIPE 2019 school districts) and
  ``title_i/Title_I_SPPE_Data.xlsx`` (sheet "ELSI Export": state net current expenditure per
  pupil in average daily attendance, 2013-14);
- ``section203_2016.csv`` from ``vra_section203/sect203_Determined_Areas_Only.csv``.

See ``src/postdp/data/PROVENANCE.md`` for the columns, the Title I weight and the mapping of
the Section 203 counts to the seed's x^s, x^sp, x^spe.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src/postdp/data/_files"


def title1(raw: Path) -> pd.DataFrame:
    saipe = pd.read_excel(raw / "saipe/ussd19.xls", header=2, engine="xlrd")
    saipe.columns = [
        "state",
        "state_fips",
        "district_id",
        "name",
        "population",
        "population_5_17",
        "poor_5_17",
    ]
    saipe["state_fips"] = saipe["state_fips"].astype(float).astype(int).map("{:02d}".format)
    saipe["district_id"] = saipe["district_id"].astype(str).str.strip().str.zfill(5)
    for col in ("population", "population_5_17", "poor_5_17"):
        saipe[col] = saipe[col].astype("int64")
    elsi = pd.read_excel(raw / "title_i/Title_I_SPPE_Data.xlsx", sheet_name="ELSI Export", header=6)
    elsi = elsi.iloc[:, :3]
    elsi.columns = ["state_name", "ada", "sppe"]
    elsi = elsi[pd.to_numeric(elsi["sppe"], errors="coerce").notna()].copy()
    elsi = elsi[elsi["state_name"].str.upper() != "TOTALS:"]
    elsi["ada"] = elsi["ada"].astype(float)
    elsi["sppe"] = elsi["sppe"].astype(float)
    if len(elsi) != 51:
        raise SystemExit(f"expected 50 states + DC in the ELSI export; got {len(elsi)}")
    postal = _postal_by_name()
    elsi["state"] = elsi["state_name"].str.upper().map(postal)
    if elsi["state"].isna().any():
        raise SystemExit(f"unknown state names: {elsi.loc[elsi['state'].isna(), 'state_name']}")
    national = float((elsi["ada"] * elsi["sppe"]).sum() / elsi["ada"].sum())
    bounded = elsi["sppe"].clip(0.8 * national, 1.2 * national)
    elsi["weight"] = 0.4 * bounded
    table = saipe.merge(elsi[["state", "sppe", "weight"]], on="state", how="left")
    dropped = table[table["weight"].isna()]
    if set(dropped["state"]) != {"PR"}:
        raise SystemExit(f"districts without a weight outside PR: {sorted(set(dropped['state']))}")
    table = table[table["weight"].notna()].copy()
    table.insert(3, "leaid", table["state_fips"] + table["district_id"])
    return table.reset_index(drop=True)


def _postal_by_name() -> dict[str, str]:
    pairs = (
        "AL Alabama,AK Alaska,AZ Arizona,AR Arkansas,CA California,CO Colorado,CT Connecticut,"
        "DE Delaware,DC District of Columbia,FL Florida,GA Georgia,HI Hawaii,ID Idaho,"
        "IL Illinois,IN Indiana,IA Iowa,KS Kansas,KY Kentucky,LA Louisiana,ME Maine,"
        "MD Maryland,MA Massachusetts,MI Michigan,MN Minnesota,MS Mississippi,MO Missouri,"
        "MT Montana,NE Nebraska,NV Nevada,NH New Hampshire,NJ New Jersey,NM New Mexico,"
        "NY New York,NC North Carolina,ND North Dakota,OH Ohio,OK Oklahoma,OR Oregon,"
        "PA Pennsylvania,RI Rhode Island,SC South Carolina,SD South Dakota,TN Tennessee,"
        "TX Texas,UT Utah,VT Vermont,VA Virginia,WA Washington,WV West Virginia,WI Wisconsin,"
        "WY Wyoming"
    )
    return {name.upper(): code for code, name in (p.split(" ", 1) for p in pairs.split(","))}


def section203(raw: Path) -> pd.DataFrame:
    det = pd.read_csv(
        raw / "vra_section203/sect203_Determined_Areas_Only.csv", encoding="latin-1", dtype=str
    )
    det = det[det["LEVEL"].isin(["State", "County", "MCD"])]
    totals = det[det["LANCOUNT"].astype(int) == 1][["LEVEL", "GEOID", "VACIT"]]
    totals = totals.rename(columns={"VACIT": "vacit_total"})
    groups = det[det["LANCOUNT"].astype(int) != 1]
    table = groups.merge(totals, on=["LEVEL", "GEOID"], how="inner")
    out = pd.DataFrame(
        {
            "geoid": table["GEOID"],
            "level": table["LEVEL"].str.lower(),
            "state_fips": table["ST"],
            "name": table["NAMELSAD"],
            "language": table["LANGUAGE"],
            "vacit_total": pd.to_numeric(table["vacit_total"]),
            "vacit_group": pd.to_numeric(table["VACIT"]),
            "vaclep": pd.to_numeric(table["VACLEP"]),
            "illit": pd.to_numeric(table["ILLIT"]),
            "covered": table["FLAG_COV"].str.strip() == "1",
        }
    )
    missing = out[["vacit_total", "vaclep", "illit"]].isna().any(axis=1)
    if missing.any():
        print(f"dropping {int(missing.sum())} records with suppressed counts")
    out = out[~missing].copy()
    for col in ("vacit_total", "vacit_group", "vaclep", "illit"):
        out[col] = out[col].fillna(-1).astype("int64")
    return out.reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the shared data folder")
    args = parser.parse_args()
    t1 = title1(args.raw)
    t1.to_csv(OUT / "title1_districts_2019.csv", index=False)
    print(
        f"title1_districts_2019.csv: {len(t1)} districts, "
        f"{t1['poor_5_17'].sum():,} poor children 5-17"
    )
    s203 = section203(args.raw)
    s203.to_csv(OUT / "section203_2016.csv", index=False)
    print(f"section203_2016.csv: {len(s203)} jurisdiction x language records")


if __name__ == "__main__":
    main()

"""``postdp tabulate``: the P.L. 94-171 tables of a post-processed run, one file per
geolevel, with margins of error where the release has them (no privacy cost)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import CliError, add_output_options, flag, progress

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Tabulate a release (the output folder of `postdp postprocess`, any method) into the 2020
redistricting (P.L. 94-171) tables: P1 (race), P2 (Hispanic or Latino by race), P3 and P4
(the same for the population 18 and over), P5 (group quarters population by type) from a
persons release, H1 (occupancy status) from a units release; of a release of the DHC
persons design (`--held`), the DHC's P12 (sex by age, 49 rows) and PCT12 (sex by single-year
age, 209 rows) at its levels that are tabulation geographies (US, State, County,
Tract_Subset, Block_Group, Block; a geounit with no one in the release has a row of 0). Costs
no privacy: it reads only the release.

Writes TABLES/<Geolevel>.csv and TABLES/<Geolevel>.parquet (one row per geounit: GEOID, the
Census's tabulation GEOID as text (state 2, county 5, tract 11, block group 12, block 15
digits; US for the nation); NAME; AIAN_BRANCH (True for the part of a geounit on the
American Indian and Alaska Native branch of the 2020 spine); GEOLEVEL; then every variable
in the Census's names, P1_001N ..., each followed by <variable>_moe, its 90% margin of error,
where the release has one: exact for --method project, from the AMC replicates of
`postdp postprocess --amc K` for an integral method; 0 for an invariant), TABLES/
variables.csv (each variable's table, label, universe and unit) and
TABLES/postdp-manifest.json. The folder is written under a temporary name and renamed into
place when complete. Progress: a bar per geolevel on a terminal; in a log, one plain line
per partition tabulated; the last line says what was written where. Read GEOID as text:
pd.read_csv(path, dtype={"GEOID": str}); the Parquet files keep it text.
"""


def add_parser(commands: Any) -> None:
    """Register the ``tabulate`` subcommand."""
    parser = commands.add_parser(
        "tabulate",
        help="the P.L. 94-171 tables (P1-P5, H1) of a release, with margins of error; "
        "a DHC release's P12 and PCT12",
        description=DESCRIPTION,
    )
    parser.add_argument("release", metavar="OUT", help="a `postdp postprocess` output folder")
    parser.add_argument("--output-dir", required=True, metavar="TABLES", help="the tables' folder")
    parser.add_argument(
        "--tables",
        metavar="LIST",
        help="comma-separated tables among P1,P2,P3,P4,P5 (a persons release), H1 (a "
        "units release) or P12,PCT12 (a DHC persons release); default every table the "
        "release makes",
    )
    add_output_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, state: RunState) -> int:
    """Check the release, the tables and the folder; then tabulate, level by level."""
    from postdp.nmf.tabulate import tabulate, tabulated_levels, tabulated_tables

    state.phase = "checking the options"
    tables = None
    if args.tables is not None:
        tables = [t.strip() for t in args.tables.split(",") if t.strip()]
        if not tables:
            raise CliError(f"--tables {args.tables!r}: name at least one table")
        from postdp.data import DHC_TABLES, PL94_TABLES

        unknown = [t for t in tables if t not in PL94_TABLES + DHC_TABLES]
        if unknown:
            raise CliError(
                f"--tables {args.tables!r}: unknown table {unknown[0]!r}; choose from "
                f"{', '.join(PL94_TABLES + DHC_TABLES)}"
            )
    release = Path(args.release).expanduser()
    with flag("OUT", args.release):
        levels, margins = tabulated_levels(release)
    with flag("--tables" if tables is not None else "OUT", args.tables or args.release):
        made = tabulated_tables(release, tables)  # what the release's cells make
    inside = Path(args.output_dir).expanduser().resolve()
    if inside == release.resolve() or release.resolve() in inside.parents:
        raise CliError(f"--output-dir {args.output_dir!r}: inside the release; name another folder")
    out = check_output_dir(
        args.output_dir, "--output-dir", inputs=[release.resolve()], overwrite=args.overwrite
    )
    state.phase = "tabulating"
    folder = OutputDir(out, state, overwrite=args.overwrite)
    bars: dict[str, Any] = {}

    def tick(level: str, done: int, total: int) -> None:
        if level not in bars:
            for bar in bars.values():
                bar.close()
            bars[level] = progress(level, total, quiet=args.quiet, unit="partition", lines=True)
        bars[level].n = done
        bars[level].refresh()

    try:
        with flag("OUT", args.release):
            files = tabulate(release, folder.tmp, tables=tables, progress=tick)
        folder.files += [p.name for p in files]
        written = folder.commit(
            {"command": "postdp tabulate", "release": str(release.resolve()), "tables": tables}
        )
    except BaseException:
        folder.discard()
        raise
    finally:
        for bar in bars.values():
            bar.close()
    if not args.quiet:
        from postdp.data import DHC_TABLES

        dhc = set(made) <= set(DHC_TABLES)
        note = (
            "with margins of error (<variable>_moe, 90%)"
            if margins
            else "no margins of error: none is built for a release of the DHC persons design"
            if dhc
            else "no margins of error: the release has none (post-process with --method "
            "blue, or an integral method with --amc K)"
        )
        print(
            f"wrote {out}: {len(levels)} geolevels ({', '.join(levels)}), "
            f"{len(written)} files; {note}",
            file=sys.stderr,
        )
    return 0

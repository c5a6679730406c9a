"""What ``postdp measure`` reads: its records (``--input`` or ``--synthetic``) and its
facilities (``--facilities``), each checked whole before anything is drawn.

:func:`source` gives the states, a function that builds one state's table at a time, a
description of the input and its two digests for the ledger (bytes and content,
:func:`persons_content`, :func:`histograms_content`); :func:`facilities` gives the
structural constraints' bounds of a table, or None.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from postdp.cli._options import CliError, flag
from postdp.privacy import multiset_digest

__all__ = ["facilities", "source"]


def source(args: argparse.Namespace, strategy: Any) -> tuple[list[str], Any, str, str, str]:
    """The states, ``tables(state)``, a description, a SHA-256 of the input's bytes and one
    of its content; every state and record checked here, before anything is drawn."""
    from postdp.errors import ValidationError

    if args.input is not None and args.population_scale is not None:
        raise CliError(
            f"--population-scale {args.population_scale!r}: scales the synthetic population "
            f"(--synthetic); --input {args.input!r} is read as it is"
        )
    if args.input is not None:
        from postdp.data import (
            PERSON_COLUMNS,
            dhc_spine,
            histogram_states,
            person_states,
            read_histograms,
            read_persons,
            tabulate_persons,
        )

        path = Path(args.input).expanduser()
        if not path.exists():
            raise CliError(f"--input {args.input!r}: no such file or folder")
        with flag("--input", args.input):
            columns = _columns(path)
            persons = all(c in columns for c in PERSON_COLUMNS)
            if not persons and "geocode" not in columns:
                raise ValidationError(
                    "neither person records (the PPMF columns TABBLKST ... CENRACE) nor block "
                    "histograms (a 'geocode' column)"
                )
            schema = strategy.schema
            states = person_states(path) if persons else histogram_states(path, schema)
        if persons and strategy.name == "pl94-2020-units":
            raise CliError(
                f"--strategy {args.strategy!r}: person records tabulate the persons schema "
                "(pl94-2020-persons, or its race cells: pl94-2020-p1); give block histograms "
                "for the units preset"
            )
        if persons and strategy.name == "dhc-2020-persons":
            raise CliError(
                f"--strategy {args.strategy!r}: the PPMF person columns have no single year "
                "of age, sex or relationship; give block histograms of the DHC persons schema"
            )
        digest = hashlib.sha256()
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            digest.update(f.relative_to(path).as_posix().encode() if f != path else b"")
            digest.update(f.read_bytes())

        def tables(state: str) -> Any:
            if persons:
                return strategy.tabulate(tabulate_persons(read_persons(path, states=[state])))
            table = read_histograms(path, schema, states=[state])
            # the DHC design measures its own spine (Prim, tract-subset groups), built here
            return dhc_spine(table) if strategy.name == "dhc-2020-persons" else table

        kind = "person records" if persons else "block histograms"
        content = persons_content(path) if persons else histograms_content(path, schema)
        return states, tables, f"{kind} {path.resolve()}", digest.hexdigest(), content
    from postdp.data import synthetic_dhc_population
    from postdp.nmf import synthetic_population, synthetic_states

    states = [s.zfill(2) for s in args.synthetic]
    if strategy.name == "pl94-2020-units":
        raise CliError(
            f"--strategy {args.strategy!r}: the synthetic population is of persons "
            "(pl94-2020-persons or pl94-2020-p1); give block histograms for the units preset"
        )
    with flag("--synthetic", ",".join(args.synthetic)):
        if len(set(states)) != len(states):
            raise ValidationError("a state is named twice")
        unknown = sorted(set(states) - set(synthetic_states()))
        if unknown:  # every state checked before any draw
            raise ValidationError(f"not a FIPS code of the 50 states and DC: {unknown}")

    # the DHC persons design measures the same persons with their ages, sexes and relationships
    dhc = strategy.name == "dhc-2020-persons"
    population = synthetic_dhc_population if dhc else synthetic_population

    def synthetic(state: str) -> Any:
        return strategy.tabulate(population(states=[state], seed=args.population_seed, scale=scale))

    scale = args.population_scale or 1.0
    shrunk = "" if scale == 1 else f" scale={scale!r}"
    kind = "synthetic DHC population" if dhc else "synthetic population"
    source = f"{kind} states={','.join(states)} seed={args.population_seed}{shrunk}"
    # each state's population is drawn on its own: the same states in any order, one content
    same = f"{kind} states={','.join(sorted(states))} seed={args.population_seed}{shrunk}"
    content = hashlib.sha256(same.encode()).hexdigest()
    return states, synthetic, source, hashlib.sha256(source.encode()).hexdigest(), content


def facilities(args: argparse.Namespace, strategy: Any) -> Any:
    """``bounds(table)`` for --facilities (checked here, before anything is drawn), or None."""
    if args.facilities is None:
        return None
    dhc = strategy.name == "dhc-2020-persons"
    if strategy.name != "pl94-2020-persons" and not dhc:
        raise CliError(
            f"--facilities {args.facilities!r}: the facility constraints are the persons "
            f"presets' (pl94-2020-persons, dhc-2020-persons); --strategy is {strategy.name!r}"
        )
    from postdp.data import facility_bounds, read_facilities, synthetic_facilities

    if args.facilities == "synthetic" and dhc:  # by the 24 detailed types: record switching
        if args.synthetic is None:
            raise CliError(
                "--facilities 'synthetic': derived from the synthetic population; give a "
                "facilities file by detailed type (GQ101 ... GQ997) with --input"
            )
        from postdp.data import dhc_facility_bounds, synthetic_dhc_facilities

        return lambda t: (dhc_facility_bounds(synthetic_dhc_facilities(t), t.geography),)

    if args.facilities == "synthetic":
        if args.synthetic is None:
            raise CliError(
                "--facilities 'synthetic': derived from the synthetic population; give a "
                "facilities file with --input"
            )
        seed = args.population_seed
        return lambda t: facility_bounds(synthetic_facilities(t, seed=seed), t.geography)
    path = Path(args.facilities).expanduser()
    if not path.is_file():
        raise CliError(f"--facilities {args.facilities!r}: no such file")
    from postdp.data import check_facilities, dhc_facility_bounds

    with flag("--facilities", args.facilities):
        check_facilities(path, detailed=dhc)  # every row, before the draw

    def bounds(table: Any) -> Any:
        counts, known = read_facilities(path, table.geography, detailed=dhc)
        if dhc:
            return (dhc_facility_bounds(counts, table.geography, known=known),)
        return facility_bounds(counts, table.geography, known=known)

    return bounds


def _columns(path: Path) -> list[str]:
    """The column names of a Parquet file or folder (its partition keys included)."""
    import pyarrow.dataset as ds

    try:
        names: list[str] = ds.dataset(str(path), format="parquet", partitioning="hive").schema.names
    except (OSError, ValueError) as exc:  # pyarrow's errors subclass these
        raise CliError(f"--input {str(path)!r}: not Parquet ({exc})") from None
    return names


def persons_content(path: Path) -> str:
    """The content digest of person records (checked already): each person's block and
    characteristics, as a multiset (any row order, file split or partitioning)."""
    import numpy as np
    import pandas as pd
    import pyarrow.dataset as ds

    from postdp.data import PERSON_COLUMNS

    def batches() -> Any:
        data = ds.dataset(str(path), format="parquet", partitioning="hive")
        for batch in data.to_batches(columns=list(PERSON_COLUMNS), batch_size=1 << 20):
            frame = batch.to_pandas()
            if frame.empty:
                continue
            n = {c: pd.to_numeric(frame[c].astype(str)).to_numpy(np.int64) for c in frame}
            block = n["TABBLKST"] * 10**3 + n["TABBLKCOU"]
            block = (block * 10**6 + n["TABTRACTCE"]) * 10 + n["TABBLKGRPCE"]
            block = block * 10**4 + n["TABBLK"]
            person = ((n["GQTYPE_PL"] * 10 + n["VOTING_AGE"]) * 10 + n["CENHISP"]) * 100
            yield block, person + n["CENRACE"], np.ones(block.size, dtype=np.int64)

    return multiset_digest("person records", batches())


def histograms_content(path: Path, schema: Any) -> str:
    """The content digest of block histograms (checked already): each block's count of
    each cell, whatever the form (wide or long), row order or partitioning."""
    import numpy as np

    from postdp.data import histogram_batches

    def batches() -> Any:
        for block, cell, count in histogram_batches(path, schema):
            keys = np.asarray(block).astype(str).astype(np.int64)
            yield keys, np.asarray(cell, dtype=np.int64), np.asarray(count, dtype=np.int64)

    return multiset_digest("block histograms", batches())

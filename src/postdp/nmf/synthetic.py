"""A small synthetic run of noisy measurement files (STUDY PATH: numpy's generator).

For tests and documentation only: the measurements are drawn with numpy's generator from a
synthetic population, never on the release path, and every run made here carries the marker
file ``STUDY-PATH.txt`` (which :func:`postdp.nmf.read` reports as ``secure=False``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from postdp.nmf import _layout as layout
from postdp.nmf._io import _atomic_text, _pyarrow, write
from postdp.nmf._manifest import SYNTHETIC, synthetic_record
from postdp.nmf._read import STUDY_MARKER

__all__ = ["synthetic_run"]


def synthetic_run(
    run_dir: str | os.PathLike[str],
    *,
    states: Sequence[str] = ("11",),
    seed: int = 0,
    scale: float = 1.0,
    quirks: bool = False,
) -> Path:
    """Measure a synthetic population with the 2020 persons preset and write the run
    (study path).

    Parameters
    ----------
    run_dir : path
        A new folder (or an empty one).
    states : sequence of str, default ("11",)
        State FIPS codes of :func:`postdp.nmf.synthetic_population`.
    seed : int, default 0
        Seeds the population and the noise (numpy's generator: not a private release);
        recorded in the manifest (:func:`postdp.nmf.synthetic_truth` rebuilds the
        population from it).
    scale : float, default 1.0
        The population's ``scale`` (:func:`postdp.nmf.synthetic_population`: a miniature
        of each state, for quick trials); recorded in the manifest.
    quirks : bool, default False
        Make the run look like a published Census run: no postdp manifest (so the reader
        rebuilds the workload from the variances), the group-quarters constraints on every
        block as the Census writes them (``hhgq_total_lb_con`` with sign ``>=`` and 0,
        ``hhgq_total_ub_con`` with ``<=`` and 99,999), a constraint on the Census's own
        recodes at every geounit of every level (``nurse_nva_0_con``, ``=`` 0 on
        ``gqNursingTotal`` x ``nonvoting``, the block's zero summed up as the Census's
        files have it), and a
        single-child bypass (:func:`postdp.tables.single_child_bypass` with ``top=1``, so
        that a one-state run has one: a state with one county measured with the county's
        budget too, its variances smaller, the county present only in ``Constraint``; the
        production stopped at the counties and kept the state's own budget).

    Returns
    -------
    pathlib.Path
        The run's folder.

    Examples
    --------
    >>> import tempfile
    >>> from postdp.nmf import read
    >>> run = synthetic_run(tempfile.mkdtemp() + "/run", states=["11"], seed=0, scale=0.05)
    >>> m = read(run)
    >>> m.secure, m.table.geography.n_levels
    (False, 6)
    """
    from postdp.data import synthetic_population
    from postdp.tables import load_strategy, measure, single_child_bypass

    s = load_strategy("pl94-2020-persons")
    table = synthetic_population(states=list(states), seed=seed, scale=scale)
    work = s.workload(table)
    budget = single_child_bypass(table, work, top=1) if quirks else None
    m = measure(table, work, secure=False, rng=seed, budget_scale=budget)
    run = write(m, run_dir, strategy=s.name)
    manifest = json.loads((run / layout.MANIFEST).read_text(encoding="utf-8"))
    manifest[SYNTHETIC] = synthetic_record(
        list(states), seed, seed, drawn_by="postdp.nmf.synthetic_run", population_scale=scale
    )
    _atomic_text(run / layout.MANIFEST, json.dumps(manifest, indent=2) + "\n")
    (run / STUDY_MARKER).write_text(
        "Drawn on postdp's study path (numpy's generator) from a synthetic population: "
        "not a private release.\n",
        encoding="utf-8",
    )
    if quirks:
        _add_quirks(run)
    return run


def _add_quirks(run: Path) -> None:
    import pandas as pd

    pa, pq = _pyarrow()
    (run / layout.MANIFEST).unlink()
    leaf = run / f"{layout.LEVELS_2020[-1]}.parquet"
    for where in sorted((leaf / layout.DPQUERY).iterdir()):
        dp = pq.read_table(where / layout.PART).to_pandas()
        con_path = leaf / layout.CONSTRAINT / where.name / layout.PART
        con = pq.read_table(con_path).to_pandas()
        blocks = pd.unique(dp["geocode"])
        extra = []
        for name, sign, bound in (
            ("hhgq_total_lb_con", ">=", 0),
            ("hhgq_total_ub_con", "<=", 99999),
        ):
            extra.append(
                pd.DataFrame(
                    {
                        "geocode": blocks,
                        "query_name": name,
                        "hhgq": "hhgq",
                        "votingage": "*",
                        "hispanic": "*",
                        "cenrace": "*",
                        "query_shape": [[8, 1, 1, 1]] * blocks.size,
                        "value": [[bound] * 8] * blocks.size,
                        "sign": sign,
                    }
                )
            )
        con = pd.concat([con, *extra], ignore_index=True)
        pq.write_table(pa.Table.from_pandas(dp, preserve_index=False), where / layout.PART)
        pq.write_table(pa.Table.from_pandas(con, preserve_index=False), con_path)
    for level in layout.LEVELS_2020:  # the nursing zero at every geounit of every level
        for con_path in sorted((run / f"{level}.parquet" / layout.CONSTRAINT).rglob("*.parquet")):
            dp_path = run / con_path.relative_to(run).as_posix().replace(
                layout.CONSTRAINT, layout.DPQUERY, 1
            )
            con = pq.read_table(con_path).to_pandas()
            dp = pq.read_table(dp_path).to_pandas() if dp_path.is_file() else con.iloc[:0]
            codes = pd.unique(pd.concat([dp["geocode"], con["geocode"]]))
            nurse = pd.DataFrame(
                {
                    "geocode": codes,
                    "query_name": "nurse_nva_0_con",  # the Census's recodes
                    "hhgq": "gqNursingTotal",
                    "votingage": "nonvoting",
                    "hispanic": "*",
                    "cenrace": "*",
                    "query_shape": [[1, 1, 1, 1]] * codes.size,
                    "value": [[0]] * codes.size,
                    "sign": "=",
                }
            )
            con = pd.concat([con, nurse], ignore_index=True)
            pq.write_table(pa.Table.from_pandas(con, preserve_index=False), con_path)

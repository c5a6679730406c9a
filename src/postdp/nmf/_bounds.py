"""A run's structural bounds as ``Constraint`` rows (private): written at every geounit in
the Census's names (``<name>_lb_con`` / ``<name>_ub_con``, or one ``<name>_con``), with
postdp's stand-in for no upper bound, and read back into per-geounit lower and upper bounds
(the Census's 99,999 per facility, and more, taken as none)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from postdp._typing import FloatArray, IntArray
from postdp._validation import MAX_COUNT
from postdp.errors import ValidationError
from postdp.nmf import _layout as layout
from postdp.tables import Schema

#: The least upper bound a reader takes as none: the Census writes 99,999 persons per
#: facility (``querybase_constraints.py`` in uscensusbureau/DAS_2020_Redistricting_Production_Code),
#: so a group-quarters type with a facility has a bound of 99,999 or more.
NO_UPPER = 99999
#: What postdp writes for no upper bound: 2**52, more than any count postdp holds (a
#: table's counts add up to less, :data:`postdp._validation.MAX_COUNT`). A reader that
#: imposes every ``<=`` row (google-research/census-bluedown's ``nonlinear_solver.py``
#: does, on the households of a whole state too) is never held by it, as by the Census's
#: 99,999 per facility; postdp's reader takes it as none (it is above :data:`NO_UPPER`).
NONE_WRITTEN = MAX_COUNT


def _with_bounds(
    pa: Any, schema: Schema, frame: Any, bounds: Any, geocodes: Any, nodes: IntArray
) -> Any:
    """``frame`` (a partition's ``Constraint`` rows) with the structural bounds of its
    geounits, in the Census's names at every geounit of every level, whatever the values:
    a bound of ``sides="both"`` as the pair ``<name>_lb_con`` (``>=``) and
    ``<name>_ub_con`` (``<=``, none written as :data:`NONE_WRITTEN`), as the 2020 runs'
    ``hhgq_total_lb_con`` / ``hhgq_total_ub_con``; one of ``sides="upper"`` as
    ``<name>_con`` (``<=``), as their ``nurse_nva_0_con``.

    Both published readers need the pair at every geounit: google-research/census-bluedown
    looks up ``hhgq_total_lb_con`` and ``hhgq_total_ub_con`` by exact name for every
    geounit, the nation and the states included (``constants.py``, ``root.py``,
    ``constrain.py``, ``nonlinear_postprocessing.py``), and the Census's GLS code
    (uscensusbureau/DAS_2020_GLS_Uncertainty_Evaluation ``GLS/main_two_pass_alg.py``) takes
    a level's geounits from its ``Constraint`` rows and keeps only those with one."""
    pieces = [frame]
    for item in bounds:
        marginal = schema.marginal(item.query)
        attrs = layout.attribute_columns(marginal)
        lower, upper = item.lower[nodes], item.upper[nodes]
        upper = np.where(np.isfinite(upper), upper, NONE_WRITTEN)
        sides = (
            (("_con", "<=", upper),)
            if item.sides == "upper"
            else (("_lb_con", ">=", lower), ("_ub_con", "<=", upper))
        )
        for suffix, sign, values in sides:
            n, size = values.shape
            value = pa.ListArray.from_arrays(
                np.arange(n + 1, dtype=np.int32) * size, values.astype(np.int64).reshape(-1)
            )
            table = {
                "geocode": pa.array(geocodes, pa.string()),
                "query_name": pa.array([(item.name or item.query) + suffix] * n, pa.string()),
                **{a: pa.array([attrs[a]] * n, pa.string()) for a in schema.names},
                "query_shape": pa.array([list(marginal.shape)] * n, pa.list_(pa.int64())),
                "value": value.cast(frame.schema.field("value").type),
                "sign": pa.array([sign] * n, pa.string()),
            }
            pieces.append(pa.table(table).select(frame.column_names))
    return pa.concat_tables(pieces)


def _collect_bounds(
    rows: pd.DataFrame,
    flat: np.ndarray,
    schema: Schema,
    nodes: IntArray,
    where: dict[str, int],
    held: dict[tuple[str, str], tuple[FloatArray, FloatArray, set[str]]],
) -> None:
    """Fold a level's ``>=`` / ``<=`` constraints on marginals of the schema (named by their
    attribute columns: ``hhgq_total_lb_con`` on ``hhgq``) into ``held``: per (name without
    ``_lb``/``_ub`` and suffix, marginal) the lower and upper bounds of every geounit (0 and
    inf where none is given; an upper bound of 99,999 or more is none) and the row names
    read. The Census's pair and the one-sided ``hhgq_total_con`` that earlier postdp
    versions wrote where no upper bound was finite fold into one bound by their base name."""
    for (name, sign), group in rows.groupby(["query_name", "sign"], sort=False):
        terms = [str(group[a].iloc[0]) for a in schema.names if str(group[a].iloc[0]) != "*"]
        query = " * ".join(terms) if terms else "total"
        if sign not in (">=", "<=") or not _is_marginal(schema, query):
            continue
        size = schema.marginal(query).size
        if (group["_len"].to_numpy() != size).any():
            continue
        base = layout.strip_suffix(str(name))
        base = base[:-3] if base.endswith(("_lb", "_ub")) else base
        lower, upper, used = _grown(held, (base, query), nodes, size)
        starts = group["_start"].to_numpy(dtype=np.int64)
        values = flat[starts[:, None] + np.arange(size)].astype(np.float64)
        rows_at = nodes[[where[g] for g in group["geocode"]]]
        if sign == ">=":
            lower[rows_at] = np.maximum(lower[rows_at], values)
        else:
            values[values >= NO_UPPER] = np.inf
            upper[rows_at] = np.minimum(upper[rows_at], values)
        used.add(str(name))
        held[(base, query)] = (lower, upper, used)


#: The Census's one-level recodes that its structural zeros name, as the level of postdp's
#: 2020 schema each picks (``nurse_nva_0_con``: ``gqNursingTotal`` x ``nonvoting``, "no
#: one under 18 in a nursing facility"; DAS production code, ``Constraints_PL94.py``).
CENSUS_LEVELS = {("hhgq", "gqNursingTotal"): "nursing", ("votingage", "nonvoting"): "under 18"}


def _collect_zeros(
    rows: pd.DataFrame,
    flat: np.ndarray,
    schema: Schema,
    nodes: IntArray,
    where: dict[str, int],
    held: dict[tuple[str, str], tuple[FloatArray, FloatArray, set[str]]],
) -> None:
    """Fold a level's ``=`` 0 constraints on one cell named by the Census's recodes
    (:data:`CENSUS_LEVELS`; the Census's ``nurse_nva_0_con``) into ``held`` as the upper
    bound 0 on that cell of the marginal of the attributes they name (``hhgq *
    votingage``), the form postdp writes (``sides="upper"``); other rows are left alone."""
    levels = {a.name: a.levels for a in schema.attributes}
    for name, group in rows.groupby("query_name", sort=False):
        first = group.iloc[0]
        named = [(a, str(first[a])) for a in schema.names if str(first[a]) != "*"]
        if not named or any(k not in CENSUS_LEVELS for k in named):
            continue
        picked = [(a, CENSUS_LEVELS[(a, r)]) for a, r in named]
        if any(lvl not in levels.get(a, ()) for a, lvl in picked):
            continue
        starts = group["_start"].to_numpy(dtype=np.int64)
        if (group["_len"].to_numpy() != 1).any() or flat[starts].any():
            continue  # a zero of one cell, or not this rule
        query = " * ".join(a for a, _ in picked)
        marginal = schema.marginal(query)
        chosen = dict(picked)  # the marginal's shape has 1 for an attribute summed out
        index = tuple(levels[a].index(chosen[a]) if a in chosen else 0 for a in schema.names)
        cell = int(np.ravel_multi_index(index, marginal.shape))
        key = (layout.strip_suffix(str(name)), query)
        lower, upper, used = _grown(held, key, nodes, marginal.size)
        upper[nodes[[where[g] for g in group["geocode"]]], cell] = 0.0
        used.add(str(name))
        held[key] = (lower, upper, used)


def _grown(
    held: dict[tuple[str, str], tuple[FloatArray, FloatArray, set[str]]],
    key: tuple[str, str],
    nodes: IntArray,
    size: int,
) -> tuple[FloatArray, FloatArray, set[str]]:
    """The bounds ``held`` has for ``key`` (none: 0 and inf), grown to cover ``nodes``."""
    n = int(nodes.max(initial=-1)) + 1
    lower, upper, used = held.setdefault(key, (np.zeros((0, size)), np.zeros((0, size)), set()))
    if lower.shape[0] < n:
        lower = np.vstack([lower, np.zeros((n - lower.shape[0], size))])
        upper = np.vstack([upper, np.full((n - upper.shape[0], size), np.inf)])
    return lower, upper, used


def _sides(lower: FloatArray, names: set[str]) -> str:
    """How a bound read was stated: ``"both"`` when any of its rows is half of an
    ``_lb_con`` / ``_ub_con`` pair or it has a positive lower bound, else ``"upper"`` (a
    lone ``<name>_con`` upper bound, as the Census's ``nurse_nva_0_con``)."""
    paired = any(layout.strip_suffix(n).endswith(("_lb", "_ub")) for n in names)
    return "both" if paired or (lower > 0).any() else "upper"


def _is_marginal(schema: Schema, name: str) -> bool:
    try:
        schema.marginal(name)
    except ValidationError:
        return False
    return True

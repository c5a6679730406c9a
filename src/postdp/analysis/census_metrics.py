"""The Census Bureau's yardsticks for a 2020 redistricting release: the Detailed Summary
Metrics family over the redistricting queries, and the 5-point / 95% reliability threshold.

Queries (``summary_queries``), on a schema with the attributes ``hhgq``, ``votingage``,
``hispanic`` and ``cenrace`` (:func:`postdp.tables.pl94_schema`), following the query list of
the Bureau's 2020 Detailed Summary Metrics (``shared/research/pl94-2020-design.md``
section 3): ``total``; ``votingage``; ``hispanic``; ``hhgq`` (housing type: households and
the 7 group-quarters types) and ``hhinstlevels`` (grouped: household, institutional,
non-institutional); ``race alone`` (the 6 races alone and two or more races), ``race alone
or in combination`` (6 overlapping groups) and ``number of races`` (1 to 6), each also
crossed with ``hispanic`` and with ``votingage``.

Metrics (``census_metrics``), for every query, geographic level and bin of the geounits' true
total population, over every (draw, geounit, group) count of the query:

- ``mae``, ``rmse``: mean absolute and root-mean-square error of the counts;
- ``mean_error``: mean algebraic (signed) error of the counts, released - true;
- ``malpe``: mean algebraic (signed) percent error, 100 (released - true) / true, over the
  counts whose truth is positive (the percent errors leave out true zeros);
- ``mape`` and ``median_ape``: mean and median absolute percent error;
- ``share_ape_over_10``: share of the counts whose absolute percent error exceeds 10%;
- ``tvd``: mean over geounits of the total variation distance between the released and the
  true distribution of the query's groups, 1/2 sum_g |r_g / R - t_g / T| (queries whose
  groups partition the persons only; geounits with a zero total on either side left out).

Draws are pooled: the mean metrics are the means of the per-draw metrics.

Reliability threshold (``reliability_threshold``; the Bureau's 2021 study of the production
settings, SSS2021-02): in each unit (the geounits of a level, or any grouping of the leaf
geounits such as places), the largest of the 8 groups of the P2 table (Hispanic; and, not
Hispanic, each race alone and two or more races) in the true counts, and whether its released
share is within 5 percentage points of its true share; units binned by true total in bins of
50 people. The threshold is the smallest bin edge from which every nonempty bin has at least
95% of its units within; the Bureau found 450-499 people for block groups at epsilon = 17.14
(compared with swapped 2010 data).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from postdp._typing import ArrayLike, FloatArray, IntArray
from postdp.analysis.cell_metrics import SIZE_BINS
from postdp.errors import ValidationError
from postdp.tables import Table
from postdp.tables.schema import Schema, leaf_codes

__all__ = [
    "DHC_QUERIES",
    "ReliabilityThreshold",
    "census_metrics",
    "count_metrics",
    "marginal_queries",
    "p2_groups",
    "reliability_threshold",
    "summary_queries",
]

_NEEDED = ("hhgq", "votingage", "hispanic", "cenrace")
_RACE_SEPARATOR = "+"


@dataclass(frozen=True)
class SummaryQuery:
    """One query of the summary: group labels and which detailed cells each group adds up
    (0/1 rows; rows of an ``alone or in combination`` query overlap)."""

    name: str
    labels: tuple[str, ...]
    matrix: sparse.csr_array
    partition: bool


def _codes(schema: Schema) -> dict[str, IntArray]:
    """Each attribute's level index at every detailed cell (C order)."""
    names = [a.name for a in schema.attributes]
    missing = [n for n in _NEEDED if n not in names]
    if missing:
        raise ValidationError(
            f"the census metrics need a schema with attributes {', '.join(_NEEDED)} "
            f"(postdp.tables.pl94_schema()); this one lacks {', '.join(missing)}"
        )
    grids = np.unravel_index(np.arange(schema.size), schema.shape)
    return {n: np.asarray(g, dtype=np.int64) for n, g in zip(names, grids, strict=True)}


def _query(name: str, masks: Sequence[tuple[str, FloatArray]]) -> SummaryQuery:
    rows = np.array([m for _, m in masks], dtype=np.float64)
    partition = bool((rows.sum(axis=0) == 1).all())
    return SummaryQuery(name, tuple(label for label, _ in masks), sparse.csr_array(rows), partition)


def _races(schema: Schema) -> tuple[list[str], list[tuple[str, ...]]]:
    cenrace = next(a for a in schema.attributes if a.name == "cenrace")
    parts = [tuple(level.split(_RACE_SEPARATOR)) for level in cenrace.levels]
    singles = [p[0] for p in parts if len(p) == 1]
    return singles, parts


def summary_queries(schema: Schema) -> dict[str, SummaryQuery]:
    """The redistricting queries of the Census Bureau's summary metrics on ``schema``.

    Parameters
    ----------
    schema : Schema
        With attributes ``hhgq``, ``votingage``, ``hispanic`` and ``cenrace`` (race levels
        named by their races joined with ``+``, as :func:`postdp.tables.pl94_schema`).

    Returns
    -------
    dict of str to SummaryQuery
        ``labels``, the 0/1 ``matrix`` (groups x detailed cells) and whether the groups
        ``partition`` the cells.

    Examples
    --------
    >>> from postdp.tables import pl94_schema
    >>> q = summary_queries(pl94_schema())
    >>> q["race alone"].labels[-1], q["race alone"].matrix.shape
    ('two or more races', (7, 2016))
    >>> aoic = q["race alone or in combination"]  # 192 race memberships x 32 other cells
    >>> aoic.partition, int(aoic.matrix.sum())
    (False, 6144)
    """
    code = _codes(schema)
    attrs = {a.name: a for a in schema.attributes}
    singles, parts = _races(schema)
    race = code["cenrace"]

    def levels(attr: str) -> list[tuple[str, FloatArray]]:
        return [
            (str(lv), (code[attr] == k).astype(float)) for k, lv in enumerate(attrs[attr].levels)
        ]

    n_races = np.array([len(p) for p in parts])[race]
    alone = [(r, np.array([p == (r,) for p in parts])[race].astype(float)) for r in singles]
    alone.append(("two or more races", (n_races > 1).astype(float)))
    combo = [(r, np.array([r in p for p in parts])[race].astype(float)) for r in singles]
    numraces = [(str(k), (n_races == k).astype(float)) for k in range(1, len(singles) + 1)]
    hhinst = [
        ("household", (code["hhgq"] == 0).astype(float)),
        ("institutional", np.isin(code["hhgq"], [1, 2, 3, 4]).astype(float)),
        ("noninstitutional", (code["hhgq"] >= 5).astype(float)),
    ]
    out = [
        _query("total", [("total", np.ones(schema.size))]),
        _query("votingage", levels("votingage")),
        _query("hispanic", levels("hispanic")),
        _query("hhgq", levels("hhgq")),
        _query("hhinstlevels", hhinst),
    ]
    for name, groups in (
        ("race alone", alone),
        ("race alone or in combination", combo),
        ("number of races", numraces),
    ):
        out.append(_query(name, groups))
        for attr in ("hispanic", "votingage"):
            crossed = [
                (f"{g} | {a}", m * b) for (g, m), (a, b) in itertools.product(groups, levels(attr))
            ]
            out.append(_query(f"{name} * {attr}", crossed))
    return {q.name: q for q in out}


def p2_groups(schema: Schema) -> SummaryQuery:
    """The 8 groups of the P2 table: Hispanic, and (not Hispanic) each race alone and two
    or more races -- the groups whose largest defines the reliability threshold.

    Parameters
    ----------
    schema : Schema
        See :func:`summary_queries`.

    Returns
    -------
    SummaryQuery

    Examples
    --------
    >>> from postdp.tables import pl94_schema
    >>> g = p2_groups(pl94_schema())
    >>> g.labels[:2], g.partition
    (('hispanic', 'not hispanic, white'), True)
    """
    code = _codes(schema)
    singles, parts = _races(schema)
    race, hisp = code["cenrace"], code["hispanic"] == 1
    n_races = np.array([len(p) for p in parts])[race]
    masks = [("hispanic", hisp.astype(float))]
    for r in singles:
        masks.append((f"not hispanic, {r}", (~hisp & (race == parts.index((r,)))).astype(float)))
    masks.append(("not hispanic, two or more races", (~hisp & (n_races > 1)).astype(float)))
    return _query("P2 groups", masks)


def _released(released: ArrayLike, table: Table) -> FloatArray:
    geo, c = table.geography, table.categories.leaves.size
    est = np.asarray(released, dtype=np.float64)
    if est.ndim < 2 or est.shape[-2:] != (geo.n, c):
        raise ValidationError(
            f"`released` must have shape (..., {geo.n}, {c}) (detailed cells of every "
            f"geounit); got {est.shape}"
        )
    return est.reshape(-1, geo.n, c)


def _dense(x: object) -> FloatArray:
    return np.asarray(x.toarray() if sparse.issparse(x) else x, dtype=np.float64)  # type: ignore[attr-defined]


def _bin_of(totals: FloatArray, bins: Sequence[int]) -> tuple[IntArray, list[str]]:
    edges = list(bins)
    if edges != sorted(set(edges)) or edges[0] != 0:
        raise ValidationError(f"`bins` must be increasing lower edges from 0; got {bins!r}")
    labels = [f"{lo:,}-{hi - 1:,}" for lo, hi in itertools.pairwise(edges)] + [f"{edges[-1]:,}+"]
    return np.searchsorted(np.asarray(edges), totals, side="right") - 1, labels


def census_metrics(
    released: ArrayLike,
    table: Table,
    *,
    schema: Schema,
    queries: Sequence[str] | None = None,
    levels: Sequence[str] | None = None,
    bins: Sequence[int] = SIZE_BINS,
) -> pd.DataFrame:
    """The summary metrics of a released persons table, by query, level and size bin.

    Parameters
    ----------
    released : array_like, shape (..., geography.n, n_detailed)
        Released detailed cells of every geounit (leading axes: draws, pooled).
    table : Table
        The truth, with ``schema``'s detailed cells.
    schema : Schema
        See :func:`summary_queries`; a schema without those attributes (the DHC persons
        schema) is scored on marginals of its own (:func:`marginal_queries`).
    queries : sequence of str, optional
        Names from :func:`summary_queries` (default all); for a schema without the
        redistricting attributes, marginal expressions of it (default :data:`DHC_QUERIES`).
    levels : sequence of str, optional
        Names of the geographic levels, root first (default ``"0"``, ``"1"``, ...).
    bins : sequence of int, default (0, 10, 100, 1000, 10000)
        Lower edges of the bins of the geounits' true total population.

    Returns
    -------
    pandas.DataFrame
        One row per (query, level, size) with ``geounits``, ``counts`` and the metrics of
        the module notes. Memory: the released cells of one level and one query's counts.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> from postdp.tables import pl94_schema
    >>> s = pl94_schema()
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cells = np.zeros((2, s.size), dtype=int); cells[:, 0] = [20, 5]
    >>> t = Table(geo, s.categories(), cells)
    >>> est = t.detailed() + 0.0; est[1, 0] += 2  # block a: 22 people for 20
    >>> m = census_metrics(est, t, schema=s, queries=["total"], bins=[0, 10])
    >>> m[["level", "size", "geounits", "mae", "malpe"]].to_numpy().tolist()
    [['0', '10+', 1, 0.0, 0.0], ['1', '0-9', 1, 0.0, 0.0], ['1', '10+', 1, 2.0, 10.0]]
    """
    est = _released(released, table)
    if leaf_codes(table.categories) != schema.cells:  # the DHC's 1.2 million: no call per cell
        raise ValidationError("`table` must have the detailed cells of `schema`")
    geo = table.geography
    names_of_levels = list(levels) if levels is not None else [str(d) for d in range(geo.n_levels)]
    if len(names_of_levels) != geo.n_levels:
        raise ValidationError(f"`levels` must name the {geo.n_levels} geographic levels")
    if not all(a in schema.names for a in _NEEDED):  # the DHC's: marginals of the schema
        return _marginal_metrics(est, table, schema, marginal_queries(schema, queries=queries),
                                 names_of_levels, bins)  # fmt: skip
    every = summary_queries(schema)
    names = list(every) if queries is None else list(queries)
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ValidationError(f"unknown queries {unknown}; choose from {list(every)}")
    frames = []
    for d in range(geo.n_levels):
        nodes = geo.levels[d]
        truth = _dense(table.level_detailed(d))
        rel = est[:, nodes, :]
        for name in names:
            q = every[name]
            t_q = np.asarray(q.matrix @ truth.T).T  # (units, groups)
            r_q = rel @ q.matrix.T.toarray()  # (draws, units, groups)
            frame = count_metrics(
                r_q, t_q, totals=truth.sum(axis=1), partition=q.partition, bins=bins
            )
            frame.insert(0, "level", names_of_levels[d])
            frame.insert(0, "query", name)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: The queries a schema without the redistricting attributes (the DHC persons schema,
#: :func:`postdp.tables.dhc_schema`) is scored on by default: the total, single years of
#: age by sex (the counts users of the DHC ask about), single years of age, and
#: relationship or group-quarters type (those of them that are marginals of the schema).
DHC_QUERIES = ("total", "sex * age", "age", "relgq")


def marginal_queries(schema: Schema, *, queries: Sequence[str] | None = None) -> list[Any]:
    """The marginals a schema without the redistricting attributes is scored on.

    Parameters
    ----------
    schema : Schema
        E.g. :func:`postdp.tables.dhc_schema`.
    queries : sequence of str, optional
        Marginal expressions of ``schema`` (``"sex * age"``, ``"age_40_groups"``; default
        the :data:`DHC_QUERIES` that are marginals of it).

    Returns
    -------
    list of Marginal

    Raises
    ------
    ValidationError
        For a query that is not a marginal of ``schema``.

    Examples
    --------
    >>> from postdp.tables import dhc_schema
    >>> [m.size for m in marginal_queries(dhc_schema())]
    [1, 232, 116, 42]
    """
    from postdp.tables import Marginal

    if queries is None:
        names = [q for q in DHC_QUERIES if q == "total" or all(
            t.strip() in schema.names for t in q.split("*"))]  # fmt: skip
    else:
        names = list(queries)
    return [Marginal(schema, q) for q in names]  # an unknown name refused here


def _marginal_metrics(
    est: FloatArray,
    table: Table,
    schema: Schema,
    marginals: list[Any],
    levels: list[str],
    bins: Sequence[int],
) -> pd.DataFrame:
    """:func:`census_metrics` by marginals of the schema: each query's counts are the
    released cells summed by a sparse product, the truth's kept sparse (the DHC's 1.2
    million cells a geounit)."""
    geo = table.geography
    counts = [sparse.csr_array(m.count_matrix()) for m in marginals]
    frames = []
    for d in range(geo.n_levels):
        nodes = geo.levels[d]
        truth = sparse.csr_array(table.level_detailed(d))
        totals = np.asarray(truth.sum(axis=1), dtype=np.float64).ravel()
        rel = est[:, nodes, :].reshape(-1, est.shape[-1])
        for m, count in zip(marginals, counts, strict=True):
            t_q = np.asarray((count @ truth.T).toarray()).T  # (units, groups)
            r_q = np.asarray(count @ rel.T).T.reshape(est.shape[0], nodes.size, -1)
            frame = count_metrics(r_q, t_q, totals=totals, partition=True, bins=bins)
            frame.insert(0, "level", levels[d])
            frame.insert(0, "query", m.name)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def count_metrics(
    released: ArrayLike,
    truth: ArrayLike,
    *,
    totals: ArrayLike | None = None,
    partition: bool = True,
    bins: Sequence[int] = SIZE_BINS,
) -> pd.DataFrame:
    """The summary metrics of one query's released counts against the truth, by size bin
    of the geounits' true total population (what :func:`census_metrics` computes per query
    and level, for counts made elsewhere: e.g. from a long form, without the detailed
    cells).

    Parameters
    ----------
    released : array_like, shape (..., units, groups)
        The released counts (leading axes: draws, pooled).
    truth : array_like, shape (units, groups)
    totals : array_like, shape (units,), optional
        Each geounit's true total population, which sets its size bin; default the truth's
        counts summed (right where the groups partition the persons).
    partition : bool, default True
        Whether the groups partition the persons (then ``tvd`` is computed).
    bins : sequence of int, default (0, 10, 100, 1000, 10000)
        Lower edges of the size bins.

    Returns
    -------
    pandas.DataFrame
        One row per bin holding geounits: ``size`` and the metrics of the module notes.

    Examples
    --------
    >>> truth = np.array([[3.0, 1.0], [40.0, 20.0]])
    >>> m = count_metrics(truth + [[1.0, 0.0], [0.0, 0.0]], truth)
    >>> m[["size", "geounits", "mae"]].to_numpy().tolist()
    [['0-9', 1, 0.5], ['10-99', 1, 0.0]]
    """
    rel = np.asarray(released, dtype=np.float64)
    true = np.asarray(truth, dtype=np.float64)
    if true.ndim != 2 or rel.shape[-2:] != true.shape:
        raise ValidationError(
            f"`released` must end in the shape of `truth` {true.shape}; got {rel.shape}"
        )
    rel = rel.reshape(-1, *true.shape)
    total = true.sum(axis=1) if totals is None else np.asarray(totals, dtype=np.float64)
    size, labels = _bin_of(total, bins)
    rows = []
    for b, label in enumerate(labels):
        pick = size == b
        if pick.any():
            rows.append({"size": label} | _metrics(rel[:, pick], true[pick], partition))
    return pd.DataFrame(rows)


def _metrics(rel: FloatArray, truth: FloatArray, partition: bool) -> dict[str, float | int]:
    """The metrics of the counts ``rel`` (draws, units, groups) against ``truth``."""
    err = rel - truth
    positive = np.broadcast_to(truth > 0, err.shape)
    pct = 100.0 * err[positive] / np.broadcast_to(truth, err.shape)[positive]
    ape = np.abs(pct)
    out: dict[str, float | int] = {
        "geounits": int(truth.shape[0]),
        "counts": int(truth.size),
        "mae": float(np.abs(err).mean()),
        "rmse": float(np.sqrt((err**2).mean())),
        "mean_error": float(err.mean()),
        "malpe": float(pct.mean()) if pct.size else np.nan,
        "mape": float(ape.mean()) if ape.size else np.nan,
        "median_ape": float(np.median(ape)) if ape.size else np.nan,
        "share_ape_over_10": float((ape > 10).mean()) if ape.size else np.nan,
        "tvd": np.nan,
    }
    if partition and truth.shape[1] > 1:
        t_tot, r_tot = truth.sum(axis=1), rel.sum(axis=2)
        ok = (t_tot > 0) & (r_tot > 0)
        if ok.any():
            t_share = truth / np.where(t_tot > 0, t_tot, 1.0)[:, None]
            r_share = rel / np.where(r_tot > 0, r_tot, 1.0)[..., None]
            tvd = 0.5 * np.abs(r_share - t_share).sum(axis=2)
            out["tvd"] = float(tvd[ok].mean())
    return out


@dataclass(frozen=True)
class ReliabilityThreshold:
    """The smallest population from which units' largest group is reliably shared.

    Attributes
    ----------
    threshold : int or None
        Lower edge of the first bin from which every nonempty bin has at least
        ``coverage`` of its units within ``within`` (None when the largest bin has not).
    by_bin : pandas.DataFrame
        ``low``, ``high``, ``units`` (units x draws) and ``share_within`` per bin.
    within, coverage : float
    Examples
    --------
    >>> bins = pd.DataFrame({"low": [0, 50], "high": [49, 99], "units": [10, 10],
    ...                      "share_within": [0.8, 1.0]})
    >>> str(ReliabilityThreshold(50, bins, 0.05, 0.95))
    '50-99 people (95% within 5 points)'
    """

    threshold: int | None
    by_bin: pd.DataFrame
    within: float
    coverage: float

    def __str__(self) -> str:
        rule = f"{self.coverage:.0%} within {100 * self.within:g} points"
        if self.threshold is None:
            return f"no population size reaches {rule}"
        width = int(self.by_bin["high"].iloc[0] - self.by_bin["low"].iloc[0] + 1)
        return f"{self.threshold:,}-{self.threshold + width - 1:,} people ({rule})"


def reliability_threshold(
    released: ArrayLike,
    table: Table,
    *,
    schema: Schema,
    level: int | None = None,
    groups: ArrayLike | None = None,
    width: int = 50,
    within: float = 0.05,
    coverage: float = 0.95,
) -> ReliabilityThreshold:
    """The 5-point / 95% reliability threshold of the largest demographic group.

    Parameters
    ----------
    released : array_like, shape (..., geography.n, n_detailed)
        Released detailed cells of every geounit (leading axes: draws, pooled).
    table : Table
        The truth.
    schema : Schema
        See :func:`summary_queries`.
    level : int, optional
        The units are the geounits of this level (e.g. 4, the block groups of the 2020
        spine).
    groups : array_like, shape (n_leaf_geounits,), optional
        Instead of ``level``: the unit (any label; None or "" for none) of each leaf geounit
        in ``geography.leaves`` order, e.g. the place of each block, an off-spine grouping.
    width : int, default 50
        Width of the population bins.
    within : float, default 0.05
        Largest accepted |released share - true share| of the largest group.
    coverage : float, default 0.95
        Share of units of a bin that must be within.

    Returns
    -------
    ReliabilityThreshold

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> from postdp.tables import pl94_schema
    >>> s = pl94_schema()
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cells = np.zeros((2, s.size), dtype=int); cells[0, 0] = 30; cells[1, 0] = 300
    >>> t = Table(geo, s.categories(), cells)
    >>> est = t.detailed() + 0.0; est[1, 1] += 10  # a: white 30 -> share 0.75
    >>> str(reliability_threshold(est, t, schema=s, level=1))
    '300-349 people (95% within 5 points)'
    """
    if not (0 < within < 1 and 0 < coverage <= 1) or int(width) != width or width < 1:
        raise ValidationError("`within` in (0, 1), `coverage` in (0, 1] and `width` >= 1")
    est = _released(released, table)
    geo = table.geography
    P = p2_groups(schema).matrix
    P_dense = P.toarray()
    if (level is None) == (groups is None):
        raise ValidationError("give one of `level` (geounits of a level) or `groups`")
    if level is not None:
        if not 0 <= level < geo.n_levels:
            raise ValidationError(f"`level` must be in 0..{geo.n_levels - 1}; got {level}")
        truth = np.asarray(P @ _dense(table.level_detailed(level)).T).T
        rel = est[:, geo.levels[level], :] @ P_dense.T
    else:
        labels = np.asarray(groups, dtype=object)
        if labels.shape != (geo.leaves.size,):
            raise ValidationError(f"`groups` must give a unit for each of {geo.leaves.size} leaves")
        keep = np.array([g is not None and g == g and g != "" for g in labels])
        codes, _ = pd.factorize(labels[keep])
        member = sparse.csr_array(
            (np.ones(codes.size), (codes, np.flatnonzero(keep))),
            shape=(int(codes.max(initial=-1)) + 1, geo.leaves.size),
        )
        cells = table.cells if sparse.issparse(table.cells) else sparse.csr_array(table.cells)
        truth = np.asarray(P @ _dense(member @ cells).T).T
        rel = np.stack([member @ (e[geo.leaves] @ P_dense.T) for e in est])
    return _threshold(rel, truth, int(width), within, coverage)


def _threshold(
    rel: FloatArray, truth: FloatArray, width: int, within: float, coverage: float
) -> ReliabilityThreshold:
    total = truth.sum(axis=1)
    occupied = total > 0
    truth, rel, total = truth[occupied], rel[:, occupied], total[occupied]
    largest = np.argmax(truth, axis=1)
    units = np.arange(truth.shape[0])
    true_share = truth[units, largest] / total
    r_tot = rel.sum(axis=2)
    r_share = rel[:, units, largest] / np.where(r_tot > 0, r_tot, 1.0)
    ok = (r_tot > 0) & (np.abs(r_share - true_share) <= within + 1e-12)
    b = (total // width).astype(np.int64)
    frame = (
        pd.DataFrame({"bin": np.tile(b, rel.shape[0]), "ok": ok.reshape(-1)})
        .groupby("bin")["ok"]
        .agg(units="size", share_within="mean")
        .reset_index()
    )
    frame.insert(0, "low", frame.pop("bin") * width)
    frame.insert(1, "high", frame["low"] + width - 1)
    return threshold_of_bins(frame, within, coverage)


def threshold_of_bins(frame: pd.DataFrame, within: float, coverage: float) -> ReliabilityThreshold:
    """The threshold rule on bins ``low``, ``high``, ``units``, ``share_within`` (sorted by
    ``low``): the first bin from which every nonempty bin reaches ``coverage``. Bins pooled
    over several releases (units summed, shares weighted by units) take the same rule."""
    passed = (frame["share_within"] >= coverage).to_numpy()
    failed = np.flatnonzero(~passed)
    first = 0 if failed.size == 0 else int(failed[-1]) + 1
    threshold = int(frame["low"].iloc[first]) if first < len(frame) else None
    return ReliabilityThreshold(threshold, frame, within, coverage)

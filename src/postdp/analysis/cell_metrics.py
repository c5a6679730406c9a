"""The error metrics the Census Bureau publishes for its 2020 disclosure-avoidance runs, for
a released table against its truth, by geographic level and population size.

For each geographic level and each bin of true total population (default 0-9, 10-99,
100-999, 1,000-9,999, 10,000+), over the geounits in it:

- ``mae``, ``rmse``: mean absolute and root-mean-square error of the total population;
- ``mape``: mean absolute percent error, 100 |released - true| / true (geounits with a true
  total of 0 are left out of the percent errors);
- ``mspe``: mean signed percent error, 100 (released - true) / true;
- ``share_ape_over_10``: share of geounits whose absolute percent error exceeds 10%;
- ``tvd``: mean total variation distance between the released and the true shares of the
  detailed cells, 1/2 sum_j |r_j / R - t_j / T| (geounits with a zero total on either side
  left out);
- ``share_largest_within_5pp``: among geounits of 500+ people, the share whose largest
  true detailed group has a released share within 5 percentage points of its true share.

And by diversity: the mean signed error of the total population by quintile of the Blau
index 1 - sum_j (t_j / T)^2 of the true detailed histogram, per level.

Rows with several draws (leading axes) average the per-draw metrics over the draws.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp._typing import ArrayLike, FloatArray
from postdp.errors import ValidationError
from postdp.tables import Table

__all__ = [
    "METRIC_SUMS",
    "SIZE_BINS",
    "table_error_metrics",
    "table_metric_sums",
    "table_metrics_from_sums",
]

#: Lower edges of the default population-size bins.
SIZE_BINS = (0, 10, 100, 1_000, 10_000)


def _bin_labels(edges: Sequence[int]) -> list[str]:
    labels = [f"{lo:,}-{hi - 1:,}" for lo, hi in itertools.pairwise(edges)]
    return [*labels, f"{edges[-1]:,}+"]


def table_error_metrics(
    released: ArrayLike, table: Table, *, bins: Sequence[int] = SIZE_BINS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Census-style error metrics of a released table, by level and population size.

    Parameters
    ----------
    released : array_like, shape (..., geography.n, n_detailed)
        Released detailed histograms of every geounit (e.g. from
        :func:`postdp.project` or :func:`postdp.top_down` of table
        measurements); leading axes are draws.
    table : Table
        The truth.
    bins : sequence of int, default (0, 10, 100, 1000, 10000)
        Increasing lower edges of the population-size bins (the true total population).

    Returns
    -------
    by_size : pandas.DataFrame
        One row per (level, size bin) with ``geounits`` and the metrics of the module notes.
    by_diversity : pandas.DataFrame
        One row per (level, Blau-index quintile) with ``geounits``, the quintile's Blau
        range and ``mean_signed_error`` (levels with fewer than 5 populated geounits are
        left out).

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[6, 2], [40, 60]])
    >>> released = t.detailed() + [[1, 0], [1, 0], [0, 0]]
    >>> by_size, _ = table_error_metrics(released, t)
    >>> by_size.loc[by_size["size"] == "0-9", ["level", "mae", "mape"]].to_dict("records")
    [{'level': 1, 'mae': 1.0, 'mape': 12.5}]
    """
    return table_metrics_from_sums(table_metric_sums(released, table), table, bins=bins)


#: Per-geounit sums over draws behind :func:`table_error_metrics` (see
#: :func:`table_metric_sums`).
METRIC_SUMS = (
    "draws",
    "error",
    "abs_error",
    "sq_error",
    "abs_pct",
    "pct",
    "over_10",
    "tvd",
    "tvd_draws",
    "within",
)


def table_metric_sums(released: ArrayLike, table: Table) -> dict[str, FloatArray]:
    """Per-geounit sums over the draws of ``released`` from which the metrics follow.

    Sums add across batches of draws, so a streaming audit keeps only these (a few arrays
    of one value per geounit) and :func:`table_metrics_from_sums` turns them into the
    metrics at the end.

    Parameters
    ----------
    released : array_like, shape (..., geography.n, n_detailed)
    table : Table

    Returns
    -------
    dict of str to ndarray, shape (geography.n,)
        ``draws`` (the number of draws, as an array), and the sums over draws of the total's
        ``error``, ``abs_error``, ``sq_error``, ``abs_pct``, ``pct`` and ``over_10`` (0 for
        geounits of true total 0), of ``tvd`` with ``tvd_draws`` the draws where it is
        defined, and of ``within`` (geounits of 500+ people).

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[6, 2], [40, 60]])
    >>> sums = table_metric_sums(t.detailed() + [[1, 0], [1, 0], [0, 0]], t)
    >>> sums["abs_error"].tolist(), sums["draws"].tolist()
    ([1.0, 1.0, 0.0], [1.0, 1.0, 1.0])
    """
    truth = table.detailed().astype(float)
    est = np.asarray(released, dtype=float)
    if est.shape[-2:] != truth.shape:
        raise ValidationError(
            f"`released` must have shape (..., {truth.shape[0]}, {truth.shape[1]}) (detailed "
            f"cells of every geounit); got {est.shape}"
        )
    est = est.reshape(-1, *truth.shape)
    true_total = truth.sum(axis=1)
    rel_total = est.sum(axis=2)  # (draws, n)
    error = rel_total - true_total
    positive = true_total > 0
    pct = np.where(positive, 100.0 * error / np.where(positive, true_total, 1.0), 0.0)
    true_share = truth / np.where(positive, true_total, 1.0)[:, None]
    rel_ok = rel_total > 0
    rel_share = est / np.where(rel_ok, rel_total, 1.0)[..., None]
    tvd_ok = rel_ok & positive
    tvd = np.where(tvd_ok, 0.5 * np.abs(rel_share - true_share).sum(axis=2), 0.0)
    largest = np.argmax(truth, axis=1)
    rows = np.arange(truth.shape[0])
    gap = np.abs(rel_share[:, rows, largest] - true_share[rows, largest])
    within = (true_total >= 500) & rel_ok & (gap <= 0.05)
    return {
        "draws": np.full(truth.shape[0], float(est.shape[0])),
        "error": error.sum(axis=0),
        "abs_error": np.abs(error).sum(axis=0),
        "sq_error": (error**2).sum(axis=0),
        "abs_pct": np.abs(pct).sum(axis=0),
        "pct": pct.sum(axis=0),
        "over_10": (np.abs(pct) > 10).sum(axis=0).astype(float),
        "tvd": tvd.sum(axis=0),
        "tvd_draws": tvd_ok.sum(axis=0).astype(float),
        "within": within.sum(axis=0).astype(float),
    }


def table_metrics_from_sums(
    sums: dict[str, FloatArray], table: Table, *, bins: Sequence[int] = SIZE_BINS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The metrics of :func:`table_error_metrics` from :func:`table_metric_sums` (added
    over any number of batches of draws).

    Parameters
    ----------
    sums : dict of str to ndarray
    table : Table
    bins : sequence of int, default (0, 10, 100, 1000, 10000)

    Returns
    -------
    by_size, by_diversity : pandas.DataFrame
        As :func:`table_error_metrics`.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[6, 2], [40, 60]])
    >>> one, two = (table_metric_sums(t.detailed() + k, t) for k in (1, -1))
    >>> both = {k: one[k] + two[k] for k in one}  # two batches of one draw each
    >>> by_size, _ = table_metrics_from_sums(both, t)
    >>> by_size["mae"].tolist()  # every total is off by 2 cells x 1, up or down
    [2.0, 2.0, 2.0]
    """
    geo = table.geography
    edges = [int(b) for b in bins]
    if not edges or edges[0] != 0 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ValidationError(f"`bins` must be increasing lower edges starting at 0; got {bins}")
    truth = table.detailed().astype(float)
    true_total = truth.sum(axis=1)
    positive = true_total > 0
    big = true_total >= 500
    size_bin = np.searchsorted(edges, true_total, side="right") - 1
    labels = _bin_labels(edges)
    depth = geo.depth
    draws = sums["draws"]

    def ratio(num: str, den: FloatArray, pick: npt.NDArray[np.bool_]) -> float:
        total = float(den[pick].sum())
        return float(sums[num][pick].sum()) / total if total > 0 else float("nan")

    records = []
    for d in range(geo.n_levels):
        for b, label in enumerate(labels):
            pick = (depth == d) & (size_bin == b)
            if not pick.any():
                continue
            records.append(
                {
                    "level": d,
                    "size": label,
                    "geounits": int(pick.sum()),
                    "mae": ratio("abs_error", draws, pick),
                    "rmse": float(np.sqrt(ratio("sq_error", draws, pick))),
                    "mape": ratio("abs_pct", draws, pick & positive),
                    "mspe": ratio("pct", draws, pick & positive),
                    "share_ape_over_10": ratio("over_10", draws, pick & positive),
                    "tvd": ratio("tvd", sums["tvd_draws"], pick),
                    "share_largest_within_5pp": ratio("within", draws, pick & big),
                }
            )
    by_size = pd.DataFrame(records)
    true_share = truth / np.where(positive, true_total, 1.0)[:, None]
    blau = 1.0 - (true_share**2).sum(axis=1)
    diversity = []
    for d in range(geo.n_levels):
        nodes = np.flatnonzero((depth == d) & positive)
        if nodes.size < 5:
            continue
        order = nodes[np.argsort(blau[nodes], kind="stable")]
        for q, part in enumerate(np.array_split(order, 5), start=1):
            diversity.append(
                {
                    "level": d,
                    "quintile": q,
                    "geounits": int(part.size),
                    "blau_low": float(blau[part].min()),
                    "blau_high": float(blau[part].max()),
                    "mean_signed_error": float(sums["error"][part].sum() / draws[part].sum()),
                }
            )
    columns = ["level", "quintile", "geounits", "blau_low", "blau_high", "mean_signed_error"]
    return by_size, pd.DataFrame(diversity, columns=columns)

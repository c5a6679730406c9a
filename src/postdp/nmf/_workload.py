"""The workload of a run read back (private): each measurement's mechanism and cost from the
manifest's record of it (version 2), else from the run's exact rho or the variance, the
queries themselves, built once per process, and each geounit's budget factor where its
variances are not its level's."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import DiscreteGaussian, Gaussian
from postdp.nmf._io import _sigma_squared
from postdp.nmf._manifest import MECHANISMS
from postdp.tables import Measurement, Query, Schema, Workload
from postdp.tables.bypass import only_children


def rebuild_workload(
    order: list[tuple[int, str, bool]],
    found: dict[Any, Any],
    schema: Schema,
    manifest: Any,
    *,
    where: str | Path = "the run's manifest",
    depth: int | None = None,
) -> Workload:
    """The workload: every measurement as the manifest records it (version 2: mechanism,
    parameter, cost, in the written order); for a run without those records (an earlier
    postdp's), each noisy query's exact rho (the run's rho x its ``plb``); else (the
    Census's runs) its rho from the variance (discrete Gaussian, bounded neighbours, as the
    2020 runs: variance 1 / rho). ``where``: the manifest's path, for messages; ``depth``:
    the number of levels read (a recorded noisy measurement of these levels that no
    geounit read answers, e.g. a level the spine bypassed, is kept: its answers are NaN)."""
    if manifest and "measurements" in manifest:
        return _recorded(order, schema, manifest, str(where), depth)
    neighbours = manifest.get("neighbours", "bounded") if manifest else "bounded"
    kind = Gaussian if manifest and manifest.get("mechanism") == "gaussian" else DiscreteGaussian
    noisy = [k for k in order if not k[2]]
    total = Fraction(manifest["rho"]) if manifest and manifest.get("rho") else None
    exact = [_fraction(found[k][2]) for k in noisy]
    items: list[Measurement] = []
    rhos: list[Fraction | None] = []
    for (d, name, _), share in zip(noisy, exact, strict=True):
        if total is not None and share is not None:
            r: Fraction | float = total * share
        else:
            r = 1.0 / found[(d, name, False)][1]
        calibrated = r / 2 if neighbours == "bounded" else r  # same noise, twice the cost
        items.append(Measurement(d, _marginal(schema, name), kind(rho=float(calibrated))))
        rhos.append(r if isinstance(r, Fraction) else None)
    items += [Measurement(d, _marginal(schema, name), None) for d, name, p in order if p]
    work = Workload(items, neighbours=neighbours)
    if noisy and all(r is not None for r in rhos):
        object.__setattr__(work, "exact_rho", (*rhos, *([None] * (len(items) - len(rhos)))))
    return work


#: Queries already built, by schema (its repr) and name: a run's many reads (one per
#: post-processing task) share its queries (a query is immutable; the 2,016 groups of
#: ``detailed`` cost ms). Every query of one key is built from the first schema object seen
#: with that repr, so a workload's marginals all share one schema object (the marginal-basis
#: solvers require it), whichever reads came before.
_QUERIES: dict[str, tuple[Schema, dict[str, Query]]] = {}


def _marginal(schema: Schema, name: str) -> Query:
    key = repr(schema)
    if key not in _QUERIES:
        if len(_QUERIES) > 16:
            _QUERIES.clear()  # a new key: no workload is half built from the old entries
        _QUERIES[key] = (schema, {})
    canonical, built = _QUERIES[key]
    if name not in built:
        built[name] = Query.marginal(canonical, name)
    return built[name]


def _fraction(text: str) -> Fraction | None:
    try:
        out = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    return out if out > 0 and "." not in text and "e" not in text.lower() else None


def budget_scale(geo: Hierarchy, work: Workload, found: list[Any]) -> FloatArray | None:
    """Each geounit's budget factor: its level's variance (the rebuilt mechanism's sigma^2)
    over its own, the same for every noisy query of its level, and 0 where it answers none
    of them (a geounit the spine bypassed); None when every factor is 1. ``found``: per
    noisy measurement of ``work``, what the reader found (answers, variance, plb, each
    geounit's own variance or None)."""
    scale = np.ones(geo.n)
    levels: dict[int, list[FloatArray]] = {}
    answered: dict[int, Any] = {}
    for m, (values, variance, _, own) in zip(
        (m for m in work.measurements if not m.public), found, strict=True
    ):
        sigma2 = _sigma_squared(m)
        factor = sigma2 / (np.full(values.shape[0], variance) if own is None else own)
        levels.setdefault(m.level, []).append(factor)
        answered[m.level] = answered.get(m.level, False) | ~np.isnan(values).all(axis=-1)
    for d in range(1, geo.n_levels):  # no answers at all, only children: bypassed throughout
        only = only_children(geo, geo.levels[d]).all()
        if only and not any(m.level == d for m in work.measurements):
            scale[geo.levels[d]] = 0.0
    for d, factors in levels.items():
        for f in factors[1:]:
            if not np.allclose(f, factors[0], rtol=1e-9, equal_nan=True):
                raise ValidationError(
                    f"level {d}: a geounit's variances are not one multiple of its level's "
                    "for every query; postdp keeps one budget factor per geounit"
                )
        factor = np.where(np.isnan(factors[0]), 1.0, factors[0])
        factor[np.isclose(factor, 1.0, rtol=1e-12, atol=0)] = 1.0  # sigma^2 from the variance
        scale[geo.levels[d]] = np.where(answered[d], factor, 0.0)
    return None if np.allclose(scale, 1.0, rtol=1e-12, atol=0) else scale


def _recorded(
    order: list[tuple[int, str, bool]],
    schema: Schema,
    manifest: Any,
    where: str,
    depth: int | None = None,
) -> Workload:
    """The measurements read (``order``) as the manifest records them, in its order: the
    same mechanism objects, weights, neighbours and exact rho as written."""
    neighbours = manifest.get("neighbours")
    if neighbours not in ("add-remove", "bounded"):
        raise ValidationError(
            f"{where}: `neighbours` {neighbours!r} is not a neighbouring relation"
        )
    entries = manifest["measurements"]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValidationError(f"{where}: `measurements` must be a list of records")
    read = set(order)
    keyed: dict[tuple[int, str, bool], dict[str, Any]] = {}
    for e in entries:
        key = (e.get("level"), e.get("query"), e.get("mechanism") is None)
        if not isinstance(key[0], int) or not isinstance(key[1], str) or key in keyed:
            raise ValidationError(f"{where}: a measurement record {e} is malformed or repeated")
        keyed[key] = e
    for d, name, public in order:
        if (d, name, public) not in keyed:
            what = "invariant" if public else "noisy query"
            raise ValidationError(
                f"{where}: level {d}, {what} {name!r}: in the run's files but not in the "
                "manifest's measurements (its noise cannot be rebuilt)"
            )
    items: list[Measurement] = []
    rhos: list[Fraction | None] = []
    for key, e in keyed.items():
        d, name, public = key
        if key not in read and (public or depth is None or d >= depth):
            continue  # a level not read (levels=)
        label = f"{where}: level {d}, query {name!r}"
        if public:
            items.append(Measurement(d, _marginal(schema, name), None))
            rhos.append(None)
            continue
        if e["mechanism"] not in MECHANISMS:
            raise ValidationError(f"{label}: unknown mechanism {e['mechanism']!r}")
        kind, param = MECHANISMS[e["mechanism"]]
        try:
            mechanism = kind(**{param: _float(e.get(param))})
            weight = None if e.get("weight") is None else _float(e["weight"])
            m = Measurement(d, _marginal(schema, name), mechanism, weight=weight)
        except (ValidationError, TypeError, ValueError) as err:
            raise ValidationError(f"{label}: not a readable mechanism ({err})") from None
        cost = e.get("cost")
        text = cost.get(param) if isinstance(cost, dict) else None
        exact = _exact(text)
        spent = getattr(Workload([m], neighbours=neighbours).cost(m), param)
        recorded = float(exact) if exact is not None else _float(text, label)
        if not np.isclose(recorded, spent, rtol=1e-12, atol=0):
            raise ValidationError(
                f"{label}: the recorded cost {param} = {text} is not its mechanism's "
                f"({spent!r} under {neighbours} neighbours)"
            )
        items.append(m)
        rhos.append(exact if param == "rho" else None)
    work = Workload(items, neighbours=neighbours)
    noisy = [r for m, r in zip(items, rhos, strict=True) if not m.public]
    if noisy and all(r is not None for r in noisy):
        object.__setattr__(work, "exact_rho", tuple(rhos))
    return work


def _float(text: Any, label: str = "") -> float:
    """A float written as its text (``repr``): the same float back."""
    if not isinstance(text, str):
        raise ValidationError(f"{label}: {text!r} is not a number's text" if label else "not text")
    try:
        return float(text)
    except ValueError:
        raise ValidationError(f"{label}: {text!r} is not a number" if label else text) from None


def _exact(text: Any) -> Fraction | None:
    """An exact fraction written as ``p/q`` or an integer; None for a float's text."""
    if isinstance(text, str) and re.fullmatch(r"[0-9]+(/[0-9]+)?", text):
        out = Fraction(text)
        return out if out > 0 else None
    return None

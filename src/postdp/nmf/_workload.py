"""The workload of a run read back (private): each query's privacy cost from the manifest's
exact rho or from its variance, the queries themselves, built once per process, and each
geounit's budget factor where its variances are not its level's."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from postdp._typing import FloatArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import DiscreteGaussian, Gaussian
from postdp.tables import Measurement, Query, Schema, Workload
from postdp.tables.bypass import only_children


def rebuild_workload(
    order: list[tuple[int, str, bool]], found: dict[Any, Any], schema: Schema, manifest: Any
) -> Workload:
    """The workload: each noisy query's exact rho (the run's rho x its ``plb``) for a run
    postdp wrote, else its rho from the variance (discrete Gaussian, bounded neighbours,
    as the 2020 runs: variance 1 / rho)."""
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


#: Queries already built, by schema and name: a run's many reads (one per post-processing
#: task) share its queries (a query is immutable; the 2,016 groups of ``detailed`` cost ms).
_QUERIES: dict[tuple[str, str], Query] = {}


def _marginal(schema: Schema, name: str) -> Query:
    key = (repr(schema), name)
    if key not in _QUERIES:
        if len(_QUERIES) > 1024:
            _QUERIES.clear()
        _QUERIES[key] = Query.marginal(schema, name)
    return _QUERIES[key]


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
        sigma2 = float(getattr(m.mechanism, "sigma", 0.0)) ** 2 or m.variance
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

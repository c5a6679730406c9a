"""The workload of a run read back (private): each query's privacy cost from the manifest's
exact rho or from its variance, and the queries themselves, built once per process."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from postdp.mechanisms import DiscreteGaussian, Gaussian
from postdp.tables import Measurement, Query, Schema, Workload


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

"""What a run's manifest records of its measurements (private): the schema, the run's
exact rho and mechanism, and every measurement in the workload's order with its mechanism,
parameter, cost and weight, as :func:`~postdp.nmf.write` and
:func:`~postdp.nmf.measure_by_state` write it; :mod:`._workload` rebuilds the workload from
this record."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace, Mechanism
from postdp.nmf import _layout as layout
from postdp.tables import Schema, TableMeasurements, Workload
from postdp.tables.schema import leaf_codes

__all__ = ["run_manifest"]


def run_manifest(
    measurements: TableMeasurements,
    names: Sequence[str],
    root: str,
    total: Fraction | None,
    strategy: str | None,
    *,
    workload: Workload | None = None,
) -> dict[str, Any]:
    """What a run's manifest says of its measurements (the subtrees added by the caller);
    ``workload``: the whole run's (default ``measurements.workload``), when
    ``measurements`` hold only some of its levels."""
    work = measurements.workload if workload is None else workload
    return {
        "format": "postdp noisy measurements",
        "version": layout.VERSION,
        "levels": list(names),
        "root": root,
        "schema": layout.schema_to_json(_schema_of(measurements)),
        "rho": None if total is None else str(total),
        "neighbours": work.neighbours,
        "mechanism": _mechanism_name(work),
        "path": "secure" if measurements.secure else "study",
        "strategy": strategy,
        "answers": "float64" if continuous(work) else "int64",
        "measurements": describe(work),
    }


#: The manifest's entry of a run measured from :func:`postdp.nmf.synthetic_population`.
SYNTHETIC = "synthetic"


def synthetic_record(
    states: Sequence[str],
    population_seed: int,
    rng: Any,
    *,
    drawn_by: str,
    population_scale: float = 1.0,
    strategy: str | None = None,
) -> dict[str, Any]:
    """What a run of a synthetic population records of it: the generator (the DHC persons
    population for ``strategy="dhc-2020-persons"``, else the persons population), the
    states, the population's seed and scale, the noise's seed (``rng`` when an integer, else
    None: the secure path or a generator, not reproducible from the manifest) and the
    function that drew it."""
    seedable = isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)
    dhc = strategy == "dhc-2020-persons"
    return {
        "generator": (
            "postdp.data.synthetic_dhc_population" if dhc else "postdp.nmf.synthetic_population"
        ),
        "states": [str(s) for s in states],
        "population_seed": int(population_seed),
        "population_scale": float(population_scale),
        "noise_seed": int(rng) if seedable else None,
        "drawn_by": drawn_by,
    }


#: The mechanisms a run's manifest names, by their ``name``, and the parameter of each.
MECHANISMS: dict[str, tuple[type[Mechanism], str]] = {
    Laplace.name: (Laplace, "epsilon"),
    Geometric.name: (Geometric, "epsilon"),
    Gaussian.name: (Gaussian, "rho"),
    DiscreteGaussian.name: (DiscreteGaussian, "rho"),
}


def describe(work: Workload) -> list[dict[str, Any]]:
    """Every measurement of ``work`` as the manifest records it (in the workload's order):
    level, query, mechanism (None for a public one), its parameter (the float's shortest
    text, which reads back to the same float), its ``cost`` under the workload's neighbours
    (the exact fraction where ``work.exact_rho`` has one, else the float's text) and its
    least-squares ``weight`` where one is set."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(work.measurements):
        entry: dict[str, Any] = {"level": m.level, "query": m.query.name, "mechanism": None}
        if m.mechanism is not None:
            if MECHANISMS.get(m.mechanism.name, (None,))[0] is not type(m.mechanism):
                raise ValidationError(
                    f"query {m.query.name!r} at level {m.level}: a run holds noise of "
                    f"{', '.join(MECHANISMS)}; got {type(m.mechanism).__name__}"
                )
            key = MECHANISMS[m.mechanism.name][1]
            exact = None if work.exact_rho is None else work.exact_rho[i]
            spent = float(getattr(work.cost(m), key))
            entry["mechanism"] = m.mechanism.name
            entry[key] = repr(float(getattr(m.mechanism, key)))
            entry["cost"] = {key: repr(spent) if exact is None else str(exact)}
            if m.weight is not None:
                entry["weight"] = repr(float(m.weight))
        out.append(entry)
    return out


def continuous(work: Workload) -> bool:
    """Whether a noisy measurement of ``work`` has non-integral answers (Laplace,
    Gaussian): the run's ``DPQuery`` answers are then float64."""
    return any(m.mechanism is not None and not m.mechanism.discrete for m in work.measurements)


def geounit_counts(names: Sequence[str], subtree: Any, geo: Hierarchy) -> dict[str, dict[str, int]]:
    """The manifest's ``geounits``: per level below the root (its name), the number of
    geounits of each subtree (its partition code), measured or bypassed, so that a reader
    finds a geounit whose rows were all deleted."""
    out: dict[str, dict[str, int]] = {}
    for d in range(1, geo.n_levels):
        codes, counts = np.unique(subtree[geo.levels[d]].astype(str), return_counts=True)
        out[names[d]] = {str(c): int(n) for c, n in zip(codes, counts, strict=True)}
    return out


def _schema_of(measurements: TableMeasurements) -> Schema:
    marginals = [m.query.marginal_of for m in measurements.workload.measurements]
    distinct = {id(q.schema): q.schema for q in marginals if q is not None}  # hash each once
    schemas = {(s.names, s.cells): s for s in distinct.values()}
    cat = measurements.table.categories
    cells = leaf_codes(cat)
    if len(schemas) != 1 or any(q is None for q in marginals):
        raise ValidationError("the NMF layout holds marginals of one schema; these queries are not")
    schema = next(iter(schemas.values()))
    if schema.cells != cells:
        raise ValidationError("the table's detailed cells are not the schema's")
    return schema


def _total(work: Workload) -> Fraction | None:
    if work.exact_rho is None:
        return None
    return sum((r for r in work.exact_rho if r is not None), Fraction(0))


def _mechanism_name(work: Workload) -> str:
    kinds = {m.mechanism.name for m in work.measurements if m.mechanism is not None}
    return kinds.pop() if len(kinds) == 1 else "mixed"

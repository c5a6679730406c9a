"""Hierarchies of geographic units, their constraints, and noisy releases of their counts."""

from postdp.hierarchy._constraints import (
    PublicNodes,
    PublicSpec,
    check_feasible,
    components,
    constraint_matrix,
    constraints,
    derived_public,
    public_ids,
    public_values,
    resolve_public,
)
from postdp.hierarchy._layout import Layout
from postdp.hierarchy._noise import NoisyCounts, add_noise
from postdp.hierarchy._tree import Hierarchy

__all__ = [
    "Hierarchy",
    "Layout",
    "NoisyCounts",
    "PublicNodes",
    "PublicSpec",
    "add_noise",
    "check_feasible",
    "components",
    "constraint_matrix",
    "constraints",
    "derived_public",
    "public_ids",
    "public_values",
    "resolve_public",
]

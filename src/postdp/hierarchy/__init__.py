"""Hierarchies of geographic units and their constraints (their noisy releases:
:func:`postdp.tables.add_noise`, a hierarchy being the one-cell table)."""

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
from postdp.hierarchy._tree import Hierarchy

__all__ = [
    "Hierarchy",
    "Layout",
    "PublicNodes",
    "PublicSpec",
    "check_feasible",
    "components",
    "constraint_matrix",
    "constraints",
    "derived_public",
    "public_ids",
    "public_values",
    "resolve_public",
]

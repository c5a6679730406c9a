"""Post-processing of noisy counts and tables: projections, nonnegativity, rounding, chains.

Every method is a record of one registry, :func:`estimators` (look one up with
:func:`estimator`); its name there is its only spelling.

One vocabulary for both models (a hierarchy of counts is a table with one cell per
geounit): :func:`project`, :func:`top_down`, :func:`round` and :func:`kkt_report` take a
hierarchy's noisy counts or a table's :class:`~postdp.tables.TableMeasurements`; for tables
they work on the detailed cells of every geounit, shape (..., geography.n, n_detailed), and
:func:`postdp.tables.expand` gives every category node.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# the registry is light and loaded now: it also binds the function `estimators` over the
# submodule of the same name
from postdp.postprocess.estimators import (
    Estimator,
    TableMethod,
    estimator,
    estimators,
    parse_table_method,
)

# public name -> the module that defines it, imported on first use (PEP 562): the command
# line reads the estimator registry without importing the solvers (numpy, scipy, pandas)
_LAZY = {
    "check_step": "postdp.postprocess._project_tables",
    "ElementwiseChain": "postdp.postprocess.chain",
    "PostProcessChain": "postdp.postprocess.chain",
    "Step": "postdp.postprocess.chain",
    "is_consistent": "postdp.postprocess.chain",
    "parse_steps": "postdp.postprocess.chain",
    "modified_bias": "postdp.postprocess.elementwise.modified",
    "modified_postprocess": "postdp.postprocess.elementwise.modified",
    "clamp": "postdp.postprocess.elementwise.ramps",
    "clamp_bias": "postdp.postprocess.elementwise.ramps",
    "optimal_ramp_shift": "postdp.postprocess.elementwise.ramps",
    "restriction_ramp_ratio": "postdp.postprocess.elementwise.ramps",
    "translated_ramp": "postdp.postprocess.elementwise.ramps",
    "translated_ramp_bias": "postdp.postprocess.elementwise.ramps",
    "TableProjector": "postdp.postprocess.gls",
    "ProjectionReport": "postdp.postprocess.kkt",
    "TableKKTReport": "postdp.postprocess.kkt",
    "kkt_report": "postdp.postprocess.kkt",
    "TableNonnegProjector": "postdp.postprocess.nonneg",
    "TableNonnegReport": "postdp.postprocess.nonneg",
    "Projector": "postdp.postprocess.projections",
    "inverse_variance_weights": "postdp.postprocess.projections",
    "project": "postdp.postprocess.projections",
    "project_sum": "postdp.postprocess.projections",
    "top_down": "postdp.postprocess.projections",
    "round": "postdp.postprocess.rounding",
    "round_consistent": "postdp.postprocess.rounding",
    "stochastic_round": "postdp.postprocess.rounding",
    "round_by_subtree": "postdp.postprocess.rounding_stream",
    "blue_restore": "postdp.postprocess.restore",
    "check_blue_restore": "postdp.postprocess.restore",
    "restore_dhc": "postdp.postprocess.restore",
    "project_by_subtree": "postdp.postprocess.projection_stream",
    "check_top_down": "postdp.postprocess.topdown",
    "ROUNDER_QUERIES": "postdp.postprocess.topdown2020",
    "check_top_down_2020": "postdp.postprocess.topdown2020",
    "top_down_2020": "postdp.postprocess.topdown2020",
}

__all__ = [
    "ROUNDER_QUERIES",
    "ElementwiseChain",
    "Estimator",
    "PostProcessChain",
    "ProjectionReport",
    "Projector",
    "Step",
    "TableKKTReport",
    "TableMethod",
    "TableNonnegProjector",
    "TableNonnegReport",
    "TableProjector",
    "blue_restore",
    "check_blue_restore",
    "check_step",
    "check_top_down",
    "check_top_down_2020",
    "clamp",
    "clamp_bias",
    "estimator",
    "estimators",
    "inverse_variance_weights",
    "is_consistent",
    "kkt_report",
    "modified_bias",
    "modified_postprocess",
    "optimal_ramp_shift",
    "parse_steps",
    "parse_table_method",
    "project",
    "project_by_subtree",
    "project_sum",
    "restore_dhc",
    "restriction_ramp_ratio",
    "round",
    "round_by_subtree",
    "round_consistent",
    "stochastic_round",
    "top_down",
    "top_down_2020",
    "translated_ramp",
    "translated_ramp_bias",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'postdp.postprocess' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what static checkers and IDEs see
    from postdp.postprocess._project_tables import check_step
    from postdp.postprocess.chain import (
        ElementwiseChain,
        PostProcessChain,
        Step,
        is_consistent,
        parse_steps,
    )
    from postdp.postprocess.elementwise.modified import modified_bias, modified_postprocess
    from postdp.postprocess.elementwise.ramps import (
        clamp,
        clamp_bias,
        optimal_ramp_shift,
        restriction_ramp_ratio,
        translated_ramp,
        translated_ramp_bias,
    )
    from postdp.postprocess.gls import TableProjector
    from postdp.postprocess.kkt import ProjectionReport, TableKKTReport, kkt_report
    from postdp.postprocess.nonneg import TableNonnegProjector, TableNonnegReport
    from postdp.postprocess.projection_stream import project_by_subtree
    from postdp.postprocess.projections import (
        Projector,
        inverse_variance_weights,
        project,
        project_sum,
        top_down,
    )
    from postdp.postprocess.restore import blue_restore, check_blue_restore, restore_dhc
    from postdp.postprocess.rounding import round, round_consistent, stochastic_round
    from postdp.postprocess.rounding_stream import round_by_subtree
    from postdp.postprocess.topdown import check_top_down
    from postdp.postprocess.topdown2020 import (
        ROUNDER_QUERIES,
        check_top_down_2020,
        top_down_2020,
    )

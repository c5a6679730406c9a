"""Post-processing of noisy counts and tables: projections, nonnegativity, rounding, chains.

Every method is a record of one registry, :func:`estimators` (look one up with
:func:`estimator`); its name there is its only spelling.

One vocabulary for both models (a hierarchy of counts is a table with one cell per
geounit): :func:`project`, :func:`top_down`, :func:`round` and :func:`kkt_report` take a
hierarchy's noisy counts or a table's :class:`~postdp.tables.TableMeasurements`; for tables
they work on the detailed cells of every geounit, shape (..., geography.n, n_detailed), and
:func:`postdp.tables.expand` gives every category node.
"""

from typing import Any

from postdp._deprecation import renamed
from postdp.postprocess._kkt import ProjectionReport, kkt_report
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
from postdp.postprocess.estimators import (
    Estimator,
    TableMethod,
    estimator,
    estimators,
    parse_table_method,
)
from postdp.postprocess.projections import (
    Projector,
    inverse_variance_weights,
    project,
    project_sum,
    top_down,
)
from postdp.postprocess.rounding import round_consistent, stochastic_round
from postdp.postprocess.rounding_stream import round_by_subtree
from postdp.postprocess.table_kkt import TableKKTReport
from postdp.postprocess.table_nonneg import TableNonnegProjector, TableNonnegReport
from postdp.postprocess.table_projection import TableProjector
from postdp.postprocess.table_restore import blue_restore, check_blue_restore
from postdp.postprocess.table_rounding import round
from postdp.postprocess.table_stream import project_by_subtree
from postdp.postprocess.table_topdown import check_top_down
from postdp.postprocess.topdown_2020 import (
    ROUNDER_QUERIES,
    check_top_down_2020,
    top_down_2020,
)

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

# Moved in 0.2 (they sample and cost privacy, or are a mitigation); the old names work for
# one release with a DeprecationWarning.
_MOVED = {
    "Restriction": "postdp.mechanisms",
    "LogLaplace": "postdp.mechanisms",
    "TemperatureSearch": "postdp.decisions",
    "optimal_temperature": "postdp.decisions",
}


# The table twins of the vocabulary (0.2); they work for one release with a
# DeprecationWarning naming the call that replaces them.
_RENAMED = {
    "project_table": (
        "postdp.postprocess.table_projection",
        "postdp.project(measurements, nonneg=False) (detailed cells; "
        "postdp.tables.expand adds every category node)",
    ),
    "top_down_table": ("postdp.postprocess.table_topdown", "postdp.top_down(measurements)"),
    "round_table": ("postdp.postprocess.table_rounding", "postdp.round(values, table)"),
    "table_kkt_report": (
        "postdp.postprocess.table_kkt",
        "postdp.kkt_report(estimate, measurements, nonneg=False)",
    ),
    "table_nonneg_report": (
        "postdp.postprocess.table_nonneg",
        "postdp.kkt_report(estimate, measurements)",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        return renamed("postdp.postprocess", name, _RENAMED)
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"postdp.postprocess.{name} moved to {_MOVED[name]}.{name}; the old name will be "
            "removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'postdp.postprocess' has no attribute {name!r}")

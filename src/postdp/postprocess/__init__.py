"""Post-processing of noisy counts: projections, nonnegativity, rounding, chains."""

from typing import Any

from postdp.postprocess._kkt import ProjectionReport, kkt_report
from postdp.postprocess.chain import (
    ElementwiseChain,
    PostProcessChain,
    Step,
    is_consistent,
    parse_steps,
)
from postdp.postprocess.modified import modified_bias, modified_postprocess
from postdp.postprocess.projections import (
    Projector,
    inverse_variance_weights,
    project,
    project_sum,
    top_down,
)
from postdp.postprocess.ramps import (
    clamp,
    clamp_bias,
    optimal_ramp_shift,
    restriction_ramp_ratio,
    translated_ramp,
    translated_ramp_bias,
)
from postdp.postprocess.rounding import round_consistent, stochastic_round
from postdp.postprocess.table_kkt import TableKKTReport, table_kkt_report
from postdp.postprocess.table_nonneg import (
    TableNonnegProjector,
    TableNonnegReport,
    table_nonneg_report,
)
from postdp.postprocess.table_restore import blue_restore
from postdp.postprocess.table_rounding import round_table
from postdp.postprocess.table_stream import project_by_subtree
from postdp.postprocess.table_topdown import check_top_down, top_down_table
from postdp.postprocess.tables import TableProjector, project_table

__all__ = [
    "ElementwiseChain",
    "PostProcessChain",
    "ProjectionReport",
    "Projector",
    "Step",
    "TableKKTReport",
    "TableNonnegProjector",
    "TableNonnegReport",
    "TableProjector",
    "blue_restore",
    "check_top_down",
    "clamp",
    "clamp_bias",
    "inverse_variance_weights",
    "is_consistent",
    "kkt_report",
    "modified_bias",
    "modified_postprocess",
    "optimal_ramp_shift",
    "parse_steps",
    "project",
    "project_by_subtree",
    "project_sum",
    "project_table",
    "restriction_ramp_ratio",
    "round_consistent",
    "round_table",
    "stochastic_round",
    "table_kkt_report",
    "table_nonneg_report",
    "top_down",
    "top_down_table",
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


def __getattr__(name: str) -> Any:
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

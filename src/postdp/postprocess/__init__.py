"""Post-processing of noisy counts and tables: projections, nonnegativity, rounding, chains.

Every method is a record of one registry, :func:`estimators` (look one up with
:func:`estimator`); its name there is its only spelling.

One vocabulary for both models (a hierarchy of counts is a table with one cell per
geounit): :func:`project`, :func:`top_down`, :func:`round` and :func:`kkt_report` take a
hierarchy's noisy counts or a table's :class:`~postdp.tables.TableMeasurements`; for tables
they work on the detailed cells of every geounit, shape (..., geography.n, n_detailed), and
:func:`postdp.tables.expand` gives every category node.
"""

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
from postdp.postprocess.gls import TableProjector
from postdp.postprocess.kkt import ProjectionReport, TableKKTReport, kkt_report
from postdp.postprocess.nonneg import TableNonnegProjector, TableNonnegReport
from postdp.postprocess.projections import (
    Projector,
    inverse_variance_weights,
    project,
    project_sum,
    top_down,
)
from postdp.postprocess.rounding import round, round_consistent, stochastic_round
from postdp.postprocess.rounding_stream import round_by_subtree
from postdp.postprocess.table_restore import blue_restore, check_blue_restore
from postdp.postprocess.table_stream import project_by_subtree
from postdp.postprocess.topdown import check_top_down
from postdp.postprocess.topdown2020 import (
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

"""Post-processing of noisy counts: projections onto the hierarchy's constraints."""

from postdp.postprocess._kkt import ProjectionReport, kkt_report
from postdp.postprocess.projections import (
    Projector,
    inverse_variance_weights,
    project,
    project_sum,
)
from postdp.postprocess.rounding import round_consistent, stochastic_round
from postdp.postprocess.topdown import top_down

__all__ = [
    "ProjectionReport",
    "Projector",
    "inverse_variance_weights",
    "kkt_report",
    "project",
    "project_sum",
    "round_consistent",
    "stochastic_round",
    "top_down",
]

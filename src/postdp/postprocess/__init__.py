"""Post-processing of noisy counts: projections onto the hierarchy's constraints."""

from postdp.postprocess._kkt import ProjectionReport, kkt_report
from postdp.postprocess.nonneg import (
    LogLaplace,
    Restriction,
    TemperatureSearch,
    clamp,
    clamp_bias,
    modified_bias,
    modified_postprocess,
    optimal_ramp_shift,
    optimal_temperature,
    restriction_ramp_ratio,
    translated_ramp,
    translated_ramp_bias,
)
from postdp.postprocess.projections import (
    Projector,
    inverse_variance_weights,
    project,
    project_sum,
)
from postdp.postprocess.rounding import round_consistent, stochastic_round
from postdp.postprocess.topdown import top_down

__all__ = [
    "LogLaplace",
    "ProjectionReport",
    "Projector",
    "Restriction",
    "TemperatureSearch",
    "clamp",
    "clamp_bias",
    "inverse_variance_weights",
    "kkt_report",
    "modified_bias",
    "modified_postprocess",
    "optimal_ramp_shift",
    "optimal_temperature",
    "project",
    "project_sum",
    "restriction_ramp_ratio",
    "round_consistent",
    "stochastic_round",
    "top_down",
    "translated_ramp",
    "translated_ramp_bias",
]

"""Post-processing of noisy counts: projections onto the hierarchy's constraints."""

from postdp.postprocess._kkt import ProjectionReport, kkt_report
from postdp.postprocess.chain import PostProcessChain, Step, is_consistent, parse_steps
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
    "PostProcessChain",
    "ProjectionReport",
    "Projector",
    "Restriction",
    "Step",
    "TemperatureSearch",
    "clamp",
    "clamp_bias",
    "inverse_variance_weights",
    "is_consistent",
    "kkt_report",
    "modified_bias",
    "modified_postprocess",
    "optimal_ramp_shift",
    "optimal_temperature",
    "parse_steps",
    "project",
    "project_sum",
    "restriction_ramp_ratio",
    "round_consistent",
    "stochastic_round",
    "top_down",
    "translated_ramp",
    "translated_ramp_bias",
]

"""Decisions made from noisy counts: allotments, decision rules, fairness, mitigations."""

from postdp.decisions.allotment import (
    allot,
    allotment_hessian_trace,
    numerical_hessian_trace,
    predicted_allotment_bias,
)
from postdp.decisions.composition import and_error, composition_bound, or_error, xor_error
from postdp.decisions.fairness import FairnessReport, allotment_fairness, decision_fairness
from postdp.decisions.mitigation import (
    LinearProxy,
    TemperatureSearch,
    linear_proxy_allotment,
    optimal_temperature,
    output_perturbation,
    sum_constrained,
)
from postdp.decisions.planning import plan_allotment_budget, plan_decision_budget
from postdp.decisions.rules import (
    Composite,
    Ratio,
    Rule,
    Threshold,
    section203_margin,
    section203_rule,
)

__all__ = [
    "Composite",
    "FairnessReport",
    "LinearProxy",
    "Ratio",
    "Rule",
    "TemperatureSearch",
    "Threshold",
    "allot",
    "allotment_fairness",
    "allotment_hessian_trace",
    "and_error",
    "composition_bound",
    "decision_fairness",
    "linear_proxy_allotment",
    "numerical_hessian_trace",
    "optimal_temperature",
    "or_error",
    "output_perturbation",
    "plan_allotment_budget",
    "plan_decision_budget",
    "predicted_allotment_bias",
    "section203_margin",
    "section203_rule",
    "sum_constrained",
    "xor_error",
]

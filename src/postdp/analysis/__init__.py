"""Auditing release designs: Monte Carlo simulation, the closed-form theory of the seeds,
budget planning and an empirical privacy audit."""

from postdp._intervals import ConfidenceInterval
from postdp.analysis.accuracy import AccuracyStudy, accuracy_study
from postdp.analysis.cell_metrics import (
    SIZE_BINS,
    table_error_metrics,
    table_metric_sums,
    table_metrics_from_sums,
)
from postdp.analysis.census_metrics import (
    DHC_QUERIES,
    ReliabilityThreshold,
    census_metrics,
    count_metrics,
    marginal_queries,
    p2_groups,
    reliability_threshold,
    summary_queries,
)
from postdp.analysis.design import ReleaseDesign
from postdp.analysis.held import HeldRelease
from postdp.analysis.memory import MemoryPlan, memory_plan
from postdp.analysis.montecarlo import simulate
from postdp.analysis.planner import BudgetPlan, budget_frontier, plan_budget
from postdp.analysis.planner_mc import plan_mae_budget
from postdp.analysis.privacy_audit import PrivacyAudit, audit_privacy
from postdp.analysis.replicates import replicate_intervals
from postdp.analysis.result import BiasVerdict, MonteCarloResult, largest_abs_quantile
from postdp.analysis.simulation import ChunkRelease, Simulation, SimulationDesign
from postdp.analysis.theory import (
    BiasBound,
    geometric_h,
    l1_ball_probability,
    l1_ball_tail,
    p_plus_bias_bound,
    ps_error_cdf,
    ps_error_density,
    ps_error_variance,
    ps_wasserstein_to_laplace,
)
from postdp.analysis.uncertainty import (
    gls_intervals,
    interval_coverage,
    ps_intervals,
)

__all__ = [
    "DHC_QUERIES",
    "SIZE_BINS",
    "AccuracyStudy",
    "BiasBound",
    "BiasVerdict",
    "BudgetPlan",
    "ChunkRelease",
    "ConfidenceInterval",
    "HeldRelease",
    "MemoryPlan",
    "MonteCarloResult",
    "PrivacyAudit",
    "ReleaseDesign",
    "ReliabilityThreshold",
    "Simulation",
    "SimulationDesign",
    "accuracy_study",
    "audit_privacy",
    "budget_frontier",
    "census_metrics",
    "count_metrics",
    "geometric_h",
    "gls_intervals",
    "interval_coverage",
    "l1_ball_probability",
    "l1_ball_tail",
    "largest_abs_quantile",
    "marginal_queries",
    "memory_plan",
    "p2_groups",
    "p_plus_bias_bound",
    "plan_budget",
    "plan_mae_budget",
    "ps_error_cdf",
    "ps_error_density",
    "ps_error_variance",
    "ps_intervals",
    "ps_wasserstein_to_laplace",
    "reliability_threshold",
    "replicate_intervals",
    "simulate",
    "summary_queries",
    "table_error_metrics",
    "table_metric_sums",
    "table_metrics_from_sums",
]

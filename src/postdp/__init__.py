"""postdp: publish differentially private counts and know what the noise and its
post-processing do to them and to the decisions made from them.

Examples
--------
>>> import postdp
>>> df = postdp.data.load_county_populations()
>>> h = postdp.Hierarchy.from_frame(df, id="id", parent="parent", count="count")
>>> noisy = postdp.Geometric(epsilon=1.0).sample(h.counts, rng=0, size=10)
>>> noisy.shape
(10, 3195)
"""

from postdp import bayes, data, errors, hierarchy, mechanisms, postprocess
from postdp.bayes import finucan_mode
from postdp.hierarchy import Hierarchy, NoisyCounts, add_noise
from postdp.mechanisms import (
    Budget,
    DiscreteGaussian,
    DoubleGeometric,
    Gaussian,
    Geometric,
    Laplace,
    Mechanism,
)
from postdp.postprocess import (
    clamp,
    kkt_report,
    optimal_ramp_shift,
    project,
    project_sum,
    round_consistent,
    stochastic_round,
    top_down,
    translated_ramp,
)

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "DiscreteGaussian",
    "DoubleGeometric",
    "Gaussian",
    "Geometric",
    "Hierarchy",
    "Laplace",
    "Mechanism",
    "NoisyCounts",
    "__version__",
    "add_noise",
    "bayes",
    "clamp",
    "data",
    "errors",
    "finucan_mode",
    "hierarchy",
    "kkt_report",
    "mechanisms",
    "optimal_ramp_shift",
    "postprocess",
    "project",
    "project_sum",
    "round_consistent",
    "stochastic_round",
    "top_down",
    "translated_ramp",
]

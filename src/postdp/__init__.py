"""postdp: publish differentially private counts and know what the noise and its
post-processing do to them and to the decisions made from them.

The names below, and every public subpackage (``postdp.tables``, ``postdp.report``, ...),
are loaded on first use (PEP 562), so ``import postdp`` and the command line start without
importing scipy, pandas or OpenDP.

Examples
--------
>>> import postdp
>>> df = postdp.data.load_county_populations()
>>> h = postdp.Hierarchy.from_frame(df, id="id", parent="parent", count="count")
>>> noisy = postdp.Geometric(epsilon=1.0).sample(h.counts, rng=0, size=10)
>>> noisy.shape
(10, 3195)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it (a subpackage name maps to itself)
_LAZY = {
    "Budget": "postdp.mechanisms",
    "DiscreteGaussian": "postdp.mechanisms",
    "DoubleGeometric": "postdp.mechanisms",
    "Gaussian": "postdp.mechanisms",
    "Geometric": "postdp.mechanisms",
    "Laplace": "postdp.mechanisms",
    "Mechanism": "postdp.mechanisms",
    "Ledger": "postdp.privacy",
    "Hierarchy": "postdp.hierarchy",
    "NoisyCounts": "postdp.tables",
    "add_noise": "postdp.tables",
    "finucan_mode": "postdp.bayes",
    "clamp": "postdp.postprocess",
    "kkt_report": "postdp.postprocess",
    "optimal_ramp_shift": "postdp.postprocess",
    "project": "postdp.postprocess",
    "project_sum": "postdp.postprocess",
    "round": "postdp.postprocess",
    "round_consistent": "postdp.postprocess",
    "stochastic_round": "postdp.postprocess",
    "top_down": "postdp.postprocess",
    "translated_ramp": "postdp.postprocess",
    "ReleaseDesign": "postdp.analysis",
    "simulate": "postdp.analysis",
    "plan_budget": "postdp.analysis",
    "audit": "postdp.report",
}
_SUBPACKAGES = (
    "analysis",
    "bayes",
    "cli",
    "data",
    "decisions",
    "errors",
    "hierarchy",
    "mechanisms",
    "nmf",
    "plots",
    "postprocess",
    "privacy",
    "references",
    "report",
    "reproduce",
    "tables",
)

__all__ = [
    "Budget",
    "DiscreteGaussian",
    "Gaussian",
    "Geometric",
    "Hierarchy",
    "Laplace",
    "Ledger",
    "Mechanism",
    "NoisyCounts",
    "ReleaseDesign",
    "__version__",
    "add_noise",
    "analysis",
    "audit",
    "bayes",
    "clamp",
    "cli",
    "data",
    "decisions",
    "errors",
    "finucan_mode",
    "hierarchy",
    "kkt_report",
    "mechanisms",
    "nmf",
    "optimal_ramp_shift",
    "plan_budget",
    "plots",
    "postprocess",
    "privacy",
    "project",
    "project_sum",
    "references",
    "report",
    "reproduce",
    "round",
    "round_consistent",
    "simulate",
    "stochastic_round",
    "tables",
    "top_down",
    "translated_ramp",
]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        module = importlib.import_module(f"postdp.{name}")
        globals()[name] = module
        return module
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'postdp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what static checkers and IDEs see
    from postdp import (
        analysis,
        bayes,
        cli,
        data,
        decisions,
        errors,
        hierarchy,
        mechanisms,
        nmf,
        plots,
        postprocess,
        privacy,
        references,
        report,
        reproduce,
        tables,
    )
    from postdp.analysis import ReleaseDesign, simulate
    from postdp.bayes import finucan_mode
    from postdp.hierarchy import Hierarchy
    from postdp.mechanisms import (
        Budget,
        DiscreteGaussian,
        Gaussian,
        Geometric,
        Laplace,
        Mechanism,
    )
    from postdp.mechanisms import (
        DoubleGeometric as DoubleGeometric,
    )
    from postdp.postprocess import (
        clamp,
        kkt_report,
        optimal_ramp_shift,
        project,
        project_sum,
        round,
        round_consistent,
        stochastic_round,
        top_down,
        translated_ramp,
    )
    from postdp.privacy import Ledger
    from postdp.report import audit
    from postdp.tables import NoisyCounts, add_noise

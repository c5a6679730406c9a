"""Bayesian post-processing and posterior inference for noisy counts ([wang2021])."""

from postdp.bayes._convolution import SumLaw, sum_law, sum_law_monte_carlo
from postdp.bayes._finucan import finucan_mode
from postdp.bayes.diagnostics import effective_sample_size, split_rhat
from postdp.bayes.hierarchy_posterior import hierarchy_credible_intervals
from postdp.bayes.inference import ExactPosterior, exact_posterior
from postdp.bayes.mcmc import PosteriorSamples, sample_posterior
from postdp.bayes.posterior_mode import (
    BayesRelease,
    bayes_release,
    bayes_release_hierarchy,
    posterior_mode_independent,
    posterior_mode_summed,
)

__all__ = [
    "BayesRelease",
    "ExactPosterior",
    "PosteriorSamples",
    "SumLaw",
    "bayes_release",
    "bayes_release_hierarchy",
    "effective_sample_size",
    "exact_posterior",
    "finucan_mode",
    "hierarchy_credible_intervals",
    "posterior_mode_independent",
    "posterior_mode_summed",
    "sample_posterior",
    "split_rhat",
    "sum_law",
    "sum_law_monte_carlo",
]

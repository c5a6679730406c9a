"""The verdict on α (seed 002, Def. 3): unfairness the simulation detects, or what
simulation noise alone gives."""

import numpy as np

from postdp import Laplace
from postdp.decisions import allotment_fairness


def test_equal_entities_far_from_zero_get_no_unfairness_detected():
    """Clamping at 0 leaves counts of 1,000 untouched (e^-1000 of the mass), so every
    allotment is unbiased and α is noise alone."""
    rep = allotment_fairness(
        np.full(40, 1000.0), np.ones(40), Laplace(1.0), postprocess="clamp", n_draws=3000, rng=1
    )
    assert rep.alpha_verdict().startswith("no unfairness detected: α ")


def test_small_and_large_entities_under_clamping_are_unfair():
    """Counts near 0 are pushed up by clamping (seed 000 Thm 9), taking money from large
    ones: α is far above the noise bound."""
    x = np.array([0.0, 1.0, 2.0, 500.0, 1000.0])
    rep = allotment_fairness(x, np.ones(5), Laplace(0.5), postprocess="clamp", n_draws=3000, rng=2)
    text = rep.alpha_verdict(unit="$")
    assert text.startswith("unfair: α $") and "simulation noise alone" in text

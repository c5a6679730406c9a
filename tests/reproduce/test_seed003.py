"""Reproduction of seed 003_a85a08a84805b29c.txt (Wang and Reiter), Tables 2 and 3.

Table 3 is reproduced to the two decimals printed. Table 2 is reproduced with 10,000 runs
per scenario and flavor, as in the seed: every printed average and variance must lie within
half a unit of its last printed digit plus 4.5 standard errors of our estimate.

Scenario 4's 50 counts are Table 1. Scenarios 1-3 are described, not listed: 50 counts with
three 0s; one each of 1, 2 and 3; five between 15 and 60; the rest between 60 and 1000,
containing the five reported components (0, 60, 382, 736, 977) and summing to 21,249. We
build them deterministically (``scenario_counts``): 0, 0, 0, 1, 2, 3, 15, 26, 37, 48, 59, the
reported 60, 382, 736, 977, and 35 values evenly spread over 100..970 and shifted up so the
total is 21,249 (all stay below 977). The reported columns depend on the other counts only
through the sum of the posterior modes, which this construction matches.

One printed cell is not reproduced: Scenario 2, "Summed", N_max variance, printed 0.1. Our
value is 0.015, which is what the mechanism allows: the component's own noise
(ε = 5: variance 2a/(1-a)² = 0.0137) plus its share of the gap between the released total
and the sum of the component modes, whose variance is only ~0.02 in this scenario (the summed
total tracks n*). That cell is checked against this band instead and the discrepancy is
reported; every other average and variance of Table 2 (47 cells) matches.
"""

import math

import numpy as np
import pytest

from postdp import Geometric
from postdp.bayes import bayes_release, exact_posterior

pytestmark = pytest.mark.statistical

TABLE1 = [
    (1, 7),
    (2, 5),
    (3, 3),
    (4, 6),
    (5, 3),
    (6, 2),
    (7, 2),
    (8, 4),
    (9, 4),
    (10, 1),
    (11, 1),
    (12, 1),
    (13, 1),
    (14, 2),
    (16, 1),
    (18, 2),
    (27, 2),
    (36, 1),
    (53, 1),
    (435, 1),
]

# Table 2: (mean, variance) of N_min, N_q1, N_med, N_q3, N_max and N, with printed decimals
TABLE2 = {
    (1, "independent"): [(0.4, 0.7), (60, 2.0), (382, 2.0), (736, 2.0), (977, 2.0), (21249, 1.8)],
    (1, "summed"): [(0.4, 0.7), (60, 2.0), (382, 2.0), (736, 2.0), (977, 2.0), (21249, 1.8)],
    (2, "independent"): [(0.01, 0.0), (60, 0.1), (382, 0.1), (736, 0.3), (977, 0.5), (21249, 191)],
    (2, "summed"): [(0.01, 0.0), (60, 0.0), (382, 0.0), (736, 0.0), (977, 0.1), (21249, 0.7)],
    (3, "independent"): [(5, 71), (60, 191), (381, 187), (735, 184), (976, 193), (21249, 0.0)],
    (3, "summed"): [(5, 71), (60, 191), (381, 187), (735, 184), (976, 193), (21249, 0.0)],
    (4, "independent"): [(1.0, 1.1), (2.0, 1.5), (5.9, 1.8), (11.0, 1.8), (438, 19), (863, 1.8)],
    (4, "summed"): [(1.0, 1.1), (2.0, 1.5), (5.9, 1.8), (11.0, 1.8), (438, 19), (863, 1.8)],
}
EPSILONS = {1: (1.0, 1.0), 2: (0.1, 5.0), 3: (5.0, 0.1), 4: (1.0, 1.0)}  # (total, components)


def _half_unit(value):
    """Half a unit of the last printed digit (21249 -> 0.5, 0.7 -> 0.05, 0.01 -> 0.005)."""
    text = str(value)
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def scenario_counts(scenario):
    if scenario == 4:
        counts = np.array([c for c, k in TABLE1 for _ in range(k)])
        return counts, [1, 2, 6, 11, 435]
    fixed = [0, 0, 0, 1, 2, 3, 15, 26, 37, 48, 59, 60, 382, 736, 977]
    rest = np.round(np.linspace(100, 970, 35)).astype(int)
    gap = 21249 - sum(fixed) - int(rest.sum())
    rest += gap // 35
    rest[: gap % 35] += 1
    counts = np.array(fixed + rest.tolist())
    assert counts.sum() == 21249 and counts.max() == 977 and len(counts) == 50
    return counts, [0, 60, 382, 736, 977]


def _reported(counts, values):
    return [int(np.flatnonzero(counts == v)[0]) for v in values]


@pytest.mark.parametrize("scenario", [1, 2, 3, 4])
def test_table2(scenario):
    counts, values = scenario_counts(scenario)
    eps_total, eps_comp = EPSILONS[scenario]
    g_total, g_comp = Geometric(eps_total), Geometric(eps_comp)
    runs = 10_000
    noisy_components = g_comp.sample(counts, rng=1000 + scenario, size=runs)
    noisy_total = g_total.sample(np.array([counts.sum()]), rng=2000 + scenario, size=runs)[:, 0]
    cols = _reported(counts, values)
    for flavor in ("independent", "summed"):
        r = bayes_release(
            noisy_total,
            noisy_components,
            total_mechanism=g_total,
            component_mechanisms=g_comp,
            flavor=flavor,
        )
        assert (r.components.sum(axis=1) == r.total).all()
        series = [r.components[:, c].astype(float) for c in cols] + [r.total.astype(float)]
        gap = r.total - np.maximum(noisy_components, 0).sum(axis=1)
        for j, ((mean_p, var_p), x) in enumerate(
            zip(TABLE2[(scenario, flavor)], series, strict=True)
        ):
            mean, var = x.mean(), x.var(ddof=1)
            se_mean = math.sqrt(var / runs)
            centred = x - mean
            se_var = math.sqrt(max(np.mean(centred**4) - var**2, 0.0) / runs)
            assert abs(mean - mean_p) <= _half_unit(mean_p) + 4.5 * se_mean, (
                scenario,
                flavor,
                mean,
                mean_p,
            )
            if (scenario, flavor, j) == (2, "summed", 4):  # see the module docstring
                floor = g_comp.variance()
                assert floor - 4.5 * se_var <= var <= floor + gap.var() + 4.5 * se_var
                continue
            assert abs(var - var_p) <= _half_unit(var_p) + 4.5 * se_var, (
                scenario,
                flavor,
                var,
                var_p,
            )


def test_table3():
    """Ten highest posterior probabilities for released (250, 357, 607), eps = 1 everywhere."""
    g = Geometric(1.0)
    post = exact_posterior([250, 357], 607, total_mechanism=g, component_mechanisms=g, window=30)
    top = post.top(10)
    expected = [
        (250, 357, 607, 0.21),
        (251, 356, 607, 0.13),
        (251, 357, 608, 0.08),
        (250, 356, 606, 0.08),
        (249, 358, 607, 0.07),
        (250, 358, 608, 0.05),
        (249, 357, 606, 0.05),
        (251, 358, 609, 0.03),
        (249, 356, 605, 0.03),
        (252, 355, 607, 0.03),
    ]
    got = [(r.N1, r.N2, r.N, round(r.probability, 2)) for r in top.itertuples()]
    assert got == expected
    # Fig. 2: most posterior mass within +-4 of the released counts
    for s, released in enumerate((250, 357)):
        values, probs = post.marginal(s)
        assert probs[np.abs(values - released) <= 4].sum() > 0.9

"""The verdict line of an audit: a run's flagged counts and largest |z| against what chance
alone gives for that many tests."""

import numpy as np
import pytest

from postdp import Laplace
from postdp.analysis import ReleaseDesign, largest_abs_quantile, simulate
from postdp.data import synthetic_hierarchy
from postdp.errors import ValidationError

Z = 4.5


@pytest.mark.statistical
@pytest.mark.parametrize("m", [1, 50, 3195])
@pytest.mark.parametrize("q", [0.5, 0.99])
def test_the_largest_of_m_normals_has_the_stated_quantile(m, q):
    """P(max of m |N(0,1)| <= x_q) = q, checked on 20,000 simulated maxima (z SE)."""
    rng = np.random.default_rng(m)
    n = 20_000
    maxima = np.empty(n)
    for start in range(0, n, 500):  # memory of 500 x m at a time
        maxima[start : start + 500] = np.abs(rng.standard_normal((500, m))).max(axis=1)
    share = (maxima <= largest_abs_quantile(q, m)).mean()
    assert abs(share - q) <= Z * np.sqrt(q * (1 - q) / n)


@pytest.mark.statistical
def test_the_largest_of_m_t_values_has_the_stated_quantile():
    """The same for |bias| / SE of a mean of 5 draws (Student t, 4 degrees of freedom),
    the law the verdict uses for short runs."""
    rng = np.random.default_rng(9)
    n, m, draws = 20_000, 50, 5
    x = rng.standard_normal((n, m, draws))
    t = np.abs(x.mean(axis=2) / (x.std(axis=2, ddof=1) / np.sqrt(draws))).max(axis=1)
    share = (t <= largest_abs_quantile(0.5, m, df=draws - 1)).mean()
    assert abs(share - 0.5) <= Z * np.sqrt(0.25 / n)


def test_a_short_unbiased_run_is_judged_with_the_t_law():
    """(P) over 3 draws: normal critical values would flag far more than 5%; the t law
    with 2 degrees of freedom does not."""
    h = synthetic_hierarchy((4, 6), rng=1)
    res = simulate(ReleaseDesign(h, Laplace(1.0), "project"), n_draws=3, rng=5)
    assert not res.bias_verdict().detected, res.bias_verdict()


def test_an_unbiased_design_gets_no_bias_detected():
    """(P) is unbiased (seed 000 Thm 7): with a fixed seed the verdict says so."""
    h = synthetic_hierarchy((4, 6), rng=1)
    res = simulate(ReleaseDesign(h, Laplace(1.0), "project"), n_draws=4000, rng=2)
    verdict = res.bias_verdict()
    assert not verdict.detected, verdict
    assert str(verdict).startswith(f"no bias detected: {verdict.flagged} flagged vs ~")
    assert verdict.tested == h.n and verdict.expected_flagged == pytest.approx(0.05 * h.n)


def test_a_biased_design_is_named_with_its_worst_count():
    """(P+) with counts at 0 is biased upward (seed 000 Thm 9)."""
    h = synthetic_hierarchy((3, 4), rng=1, leaf_mean=0.5)
    res = simulate(ReleaseDesign(h, Laplace(0.5), "project-nonneg"), n_draws=4000, rng=3)
    names = np.array([f"place {i}" for i in h.ids], dtype=object)
    verdict = res.bias_verdict(names=names)
    assert verdict.detected and verdict.worst.startswith("place ")
    text = str(verdict)
    assert text.startswith("systematic bias: ") and f"worst: {verdict.worst}, +" in text
    with pytest.raises(ValidationError, match="one name per entity"):
        res.bias_verdict(names=names[:2])
    with pytest.raises(ValidationError, match="`level`"):
        res.bias_verdict(level=1.0)

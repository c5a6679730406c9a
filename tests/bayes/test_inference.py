"""Posterior inference (seed 003 §4): exact enumeration, MCMC, and the MCMC diagnostics."""

import math

import numpy as np
import pytest

from postdp import Geometric
from postdp.bayes import (
    bayes_release,
    effective_sample_size,
    exact_posterior,
    sample_posterior,
    split_rhat,
)
from postdp.errors import ValidationError


def _brute(released, total, g, window):
    """The seed's brute force: for each (N1, N2), sum over the noisy (n1, n2) around it of
    P(n | N) x 1[the release algorithm returns the released counts] (batched over n)."""
    reach = 25
    grid = [range(max(0, r - window), r + window + 1) for r in released]
    post = {}
    for N1 in grid[0]:
        for N2 in grid[1]:
            n1, n2 = np.meshgrid(
                np.arange(N1 - reach, N1 + reach + 1),
                np.arange(N2 - reach, N2 + reach + 1),
                indexing="ij",
            )
            noisy = np.stack([n1.ravel(), n2.ravel()], axis=1)
            rel = bayes_release(
                np.full(len(noisy), total), noisy, total_mechanism=g, component_mechanisms=g
            )
            hit = (rel.components == np.array(released)).all(axis=1)
            like = float((g.pmf(noisy[hit, 0] - N1) * g.pmf(noisy[hit, 1] - N2)).sum())
            post[(N1, N2)] = like * float(g.pmf(total - N1 - N2))
    z = sum(post.values())
    return {key: v / z for key, v in post.items()}


def test_exact_posterior_equals_the_literal_brute_force():
    g = Geometric(1.5)
    released, total = (2, 5), 7
    post = exact_posterior(released, total, total_mechanism=g, component_mechanisms=g, window=4)
    brute = _brute(released, total, g, 4)
    for i, N1 in enumerate(post.grids[0]):
        for j, N2 in enumerate(post.grids[1]):
            assert post.probability[i, j] == pytest.approx(brute[(N1, N2)], rel=1e-6, abs=1e-9)


def test_exact_posterior_marginals_total_and_zero_total():
    g = Geometric(1.0)
    post = exact_posterior([0, 3, 1], 4, total_mechanism=g, component_mechanisms=g, window=8)
    assert post.probability.shape == tuple(len(x) for x in post.grids)
    for s in range(3):
        values, probs = post.marginal(s)
        assert probs.sum() == pytest.approx(1.0)
        assert values.min() >= 0
    values, probs = post.total_marginal()
    assert probs.sum() == pytest.approx(1.0) and values[np.argmax(probs)] == 4
    zero = exact_posterior([0, 0], 0, total_mechanism=g, component_mechanisms=g, window=6)
    assert zero.top(1)[["N1", "N2"]].values.tolist() == [[0, 0]]
    with pytest.raises(ValidationError, match="add up to `released_total`"):
        exact_posterior([1, 2], 4, total_mechanism=g, component_mechanisms=g)


def _tv_bound(probs, ess, z=4.5):
    """A bound on the total variation between an empirical law and the truth: each of the
    k frequencies within z SE (SE = sqrt(p(1-p)/ESS)), summed and halved."""
    return 0.5 * float(np.sum(z * np.sqrt(probs * (1 - probs) / ess))) + 1e-12


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("released", "total", "eps"), [((250, 357), 607, 1.0), ((0, 3, 12), 15, 1.0)]
)
def test_mcmc_agrees_with_the_exact_posterior(released, total, eps):
    g = Geometric(eps)
    post = exact_posterior(released, total, total_mechanism=g, component_mechanisms=g)
    res = sample_posterior(
        released, total, total_mechanism=g, component_mechanisms=g, n_draws=3000, chains=4, rng=11
    )
    assert (res.rhat < 1.02).all()
    for s in range(len(released)):
        values, probs = post.marginal(s)
        empirical = dict(zip(*res.marginal(s), strict=True))
        tv = 0.5 * sum(abs(p - empirical.get(v, 0.0)) for v, p in zip(values, probs, strict=True))
        assert tv <= _tv_bound(probs, res.ess[s]), (s, tv, res.ess[s])


def test_mcmc_reproducible_and_constraint_kept():
    g = Geometric(1.0)
    a = sample_posterior(
        [5, 0, 9], 14, total_mechanism=g, component_mechanisms=g, n_draws=50, chains=2, rng=3
    )
    b = sample_posterior(
        [5, 0, 9], 14, total_mechanism=g, component_mechanisms=g, n_draws=50, chains=2, rng=3
    )
    np.testing.assert_array_equal(a.samples, b.samples)
    assert a.samples.min() >= 0 and 0 < a.acceptance <= 1
    lo, hi = a.credible_intervals(0.9)
    assert (lo <= np.array([5, 0, 9]) + 3).all() and (hi >= np.array([5, 0, 9]) - 3).all()
    with pytest.raises(ValidationError, match="`n_draws` must be >= 4"):
        sample_posterior([1], 1, total_mechanism=g, component_mechanisms=g, n_draws=2)


def test_diagnostics_on_known_processes():
    rng = np.random.default_rng(5)
    iid = rng.normal(size=(4, 4000))
    assert effective_sample_size(iid) == pytest.approx(16_000, rel=0.1)
    assert split_rhat(iid) == pytest.approx(1.0, abs=0.01)
    # AR(1) with rho = 0.9: ESS ~ N (1 - rho) / (1 + rho)
    rho, x = 0.9, np.zeros((4, 20_000))
    for t in range(1, x.shape[1]):
        x[:, t] = rho * x[:, t - 1] + rng.normal(size=4)
    expected = x.size * (1 - rho) / (1 + rho)
    assert effective_sample_size(x) == pytest.approx(expected, rel=0.2)
    # chains stuck in different places
    shifted = iid + np.arange(4)[:, None]
    assert split_rhat(shifted) > 1.1
    assert effective_sample_size(np.ones((2, 50))) == 100


@pytest.mark.statistical
def test_mcmc_scales_to_fifty_components():
    g = Geometric(1.0)
    rng = np.random.default_rng(0)
    counts = np.r_[[0, 0, 0, 1, 2, 3], rng.integers(15, 1000, 44)]
    r = bayes_release(
        g.sample([counts.sum()], rng=1),
        [g.sample(counts, rng=2)],
        total_mechanism=g,
        component_mechanisms=g,
    )
    res = sample_posterior(
        r.components[0],
        int(r.total[0]),
        total_mechanism=g,
        component_mechanisms=g,
        n_draws=300,
        chains=2,
        rng=4,
    )
    assert res.samples.shape == (2, 300, 50)
    assert (res.rhat < 1.2).all()
    # the posterior centres near the released counts (the noise sd is sqrt(1.84) ~ 1.36)
    means = res.samples.reshape(-1, 50).mean(axis=0)
    assert np.abs(means - r.components[0]).max() < 4 * math.sqrt(g.variance()) + 2


def test_the_compiled_mode_check_agrees_with_finucan_including_ties():
    """The sampler's acceptance rule (compiled) against the release rule itself, Finucan's
    algorithm on max(n, 0) (seed 003 §2.2): small counts make exact ties common, and the
    tied mode picked must be the one the release picks."""
    from postdp.bayes._finucan import finucan_mode
    from postdp.bayes._sweeps import _holds

    rng = np.random.default_rng(8)
    S = 5
    theta, work_k, work_f = np.empty(S), np.empty(S, dtype=np.int64), np.empty(S)
    ties = agree = 0
    for _ in range(3000):
        noisy = rng.integers(-2, 5, size=S)
        t = int(rng.integers(0, 12))
        w = np.maximum(noisy, 0).astype(float)
        k = finucan_mode(t, w)  # as bayes_release calls it
        if rng.random() < 0.3:  # a neighbouring allocation: not the mode
            i, j = rng.choice(S, 2, replace=False)
            if k[i] > 0:
                k = k.copy()
                k[i] -= 1
                k[j] += 1
        expected = bool((finucan_mode(t, w) == k).all())
        up = (w / (k + 1)).max()
        down = np.where(k > 0, w / np.where(k > 0, k, 1), np.inf).min()
        ties += bool(np.isclose(up, down))
        agree += (
            _holds(k.astype(np.int64), t, noisy.astype(np.int64), theta, work_k, work_f) == expected
        )
    assert agree == 3000
    assert ties > 300  # the tie branch was exercised

"""Element-wise nonnegativity against the closed forms of seeds 004 and 002 (and Monte Carlo)."""

import math

import numpy as np
import pytest
from scipy import stats

from postdp import Gaussian, Geometric, Laplace
from postdp.decisions import optimal_temperature
from postdp.errors import UnboundedMomentError, ValidationError
from postdp.mechanisms import LogLaplace, Restriction
from postdp.postprocess import (
    clamp,
    clamp_bias,
    modified_bias,
    modified_postprocess,
    optimal_ramp_shift,
    restriction_ramp_ratio,
    translated_ramp,
    translated_ramp_bias,
)
from tests.statistical._helpers import ALPHA_SEEDED, Z, pooled_chisquare

B = 3.0
LAP = Laplace.from_scale(B)
GEO = Geometric(epsilon=0.4)
QS = [0.0, 1.0, B, 4 * B, 30 * B]  # q = 0 up to q >> b


def _brute_geometric(q, m, phi):
    """E[phi(q + K)] by direct summation over the double geometric's support."""
    k = np.arange(-4000, 4001)
    return float((phi(q + k) * m.pmf(k)).sum())


def _mc_mean(values):
    return values.mean(axis=0), values.std(axis=0, ddof=1) / math.sqrt(values.shape[0])


# ------------------------------------------------------------------------ ramp
def test_ramp_bias_closed_forms():
    # 004 eq. (5): (b/2) e^{-q/b}; 002 Thm 9: (lambda/2) e^{(l - x)/lambda}
    q = np.array(QS)
    np.testing.assert_allclose(clamp_bias(q, LAP), B / 2 * np.exp(-q / B), rtol=1e-12)
    np.testing.assert_allclose(
        clamp_bias(q + 5, LAP, lower=5.0), B / 2 * np.exp(-q / B), rtol=1e-12
    )
    # the largest absolute bias over q >= 0 is b/2, at q = 0
    grid = np.linspace(0, 50 * B, 2001)
    assert np.abs(clamp_bias(grid, LAP)).max() == pytest.approx(B / 2)


@pytest.mark.parametrize("q", [0, 1, 2, 7, 40, -3])
@pytest.mark.parametrize("lower", [0, 2])
def test_ramp_bias_geometric_equals_brute_summation(q, lower):
    brute = _brute_geometric(q, GEO, lambda y: np.maximum(y, lower)) - q
    assert clamp_bias(q, GEO, lower=lower) == pytest.approx(brute, rel=1e-10, abs=1e-13)
    if q >= lower:
        a = GEO.a
        assert clamp_bias(q, GEO, lower=lower) == pytest.approx(a ** (q - lower + 1) / (1 - a * a))


@pytest.mark.statistical
@pytest.mark.parametrize("m", [LAP, GEO], ids=["laplace", "geometric"])
def test_ramp_bias_matches_monte_carlo(m):
    q = np.array([0, 1, 3, 12, 90])
    draws = clamp(m.sample(q, rng=1, size=200_000))
    mean, se = _mc_mean(draws)
    assert np.all(np.abs(mean - q - clamp_bias(q, m)) <= Z * se)


def test_clamp_keeps_integers_and_validates():
    assert clamp(np.array([-2, 3])).dtype == np.int64
    assert clamp(np.array([-2, 3]), lower=0.5).dtype == np.float64
    with pytest.raises(ValidationError, match=r"`x` must be finite"):
        clamp([np.nan])
    with pytest.raises(
        TypeError, match="closed-form biases are available for Laplace and Geometric"
    ):
        clamp_bias(1.0, Gaussian(rho=0.5))


# ------------------------------------------------------------------------ translated ramp
def test_optimal_shift_is_b_w_half():
    assert optimal_ramp_shift(1.0) == pytest.approx(0.35173371124919584, rel=1e-14)
    assert optimal_ramp_shift(B) == pytest.approx(0.35173371124919584 * B)
    a = optimal_ramp_shift(B)
    assert (B / 2) * math.exp(-a / B) == pytest.approx(a)  # the defining equation
    assert optimal_ramp_shift(LAP) == optimal_ramp_shift(B)  # a mechanism or its bare scale
    with pytest.raises(ValidationError, match=r"`mechanism` must be positive and finite; got -1"):
        optimal_ramp_shift(-1)


def test_translated_ramp_bias_thm41_pieces_and_worst_case():
    a = 2.0
    q = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 40.0])
    expected = np.where(q >= a, -a + B / 2 * np.exp((a - q) / B), B / 2 * np.exp((q - a) / B) - q)
    np.testing.assert_allclose(
        translated_ramp_bias(q, LAP, alpha=a), expected, rtol=1e-12, atol=1e-14
    )
    # at alpha* the worst-case absolute bias is alpha*: reached at q = 0 and as q -> infinity
    star = optimal_ramp_shift(B)
    grid = np.linspace(0, 80 * B, 4001)
    worst = np.abs(translated_ramp_bias(grid, LAP, alpha=star)).max()
    assert worst == pytest.approx(star, rel=1e-9)
    assert translated_ramp_bias(0.0, LAP, alpha=star) == pytest.approx(star)
    assert translated_ramp_bias(80 * B, LAP, alpha=star) == pytest.approx(-star, rel=1e-9)
    assert star < B / 2  # better than the plain ramp's b/2


@pytest.mark.parametrize("q", [0, 1, 5, 30])
@pytest.mark.parametrize("alpha", [0.0, 0.7, 3.0])
def test_translated_ramp_bias_geometric_equals_brute_summation(q, alpha):
    brute = _brute_geometric(q, GEO, lambda y: np.maximum(y - alpha, 0.0)) - q
    assert translated_ramp_bias(q, GEO, alpha=alpha) == pytest.approx(brute, rel=1e-10, abs=1e-13)


@pytest.mark.statistical
def test_translated_ramp_bias_matches_monte_carlo():
    q = np.array([0.0, 2.0, 10.0, 60.0])
    star = optimal_ramp_shift(B)
    mean, se = _mc_mean(translated_ramp(LAP.sample(q, rng=2, size=200_000), star))
    assert np.all(np.abs(mean - q - translated_ramp_bias(q, LAP, alpha=star)) <= Z * se)


# ------------------------------------------------------------------------ restriction
def test_restriction_bias_cor1_and_ratio_eq9():
    q = np.array(QS)
    # 004 Cor. 1 with b = Delta/eps: (q + b)/(2 e^{q/b} - 1)
    np.testing.assert_allclose(Restriction(LAP).bias(q), (q + B) / (2 * np.exp(q / B) - 1))
    # eq. (9): restriction at 2 Delta/eps (eps-DP by Prop. 2) vs the ramp at Delta/eps
    eps, delta = 0.5, 1.0
    b1 = clamp_bias(q, Laplace(epsilon=eps, sensitivity=delta))
    b2 = Restriction(Laplace.from_scale(2 * delta / eps, sensitivity=delta)).bias(q)
    np.testing.assert_allclose(
        b2 / b1, restriction_ramp_ratio(q, Laplace(epsilon=eps, sensitivity=delta)), rtol=1e-10
    )
    grid = np.linspace(0, 100, 1001)
    assert (restriction_ramp_ratio(grid, Laplace(epsilon=eps, sensitivity=delta)) > 2).all()


def test_restriction_costs_double():
    assert Restriction(Laplace(0.3)).privacy_cost().epsilon == pytest.approx(0.6)
    assert Restriction(Geometric(1.0)).privacy_cost().epsilon == 2.0
    with pytest.raises(TypeError):
        Restriction(Gaussian(rho=1.0))


@pytest.mark.parametrize("q", [0, 1, 4, 25, -6])
def test_restriction_geometric_bias_equals_brute_summation(q):
    k = np.arange(-4000, 4001)
    y = q + k
    w = GEO.pmf(k) * (y >= 0)
    brute = float((y * w).sum() / w.sum()) - q
    assert Restriction(GEO).bias(q) == pytest.approx(brute, rel=1e-10)


@pytest.mark.statistical
@pytest.mark.parametrize("q", [0.0, 1.5, 9.0, -40.0])
def test_restricted_laplace_sampler_has_the_conditional_law(q):
    draws = Restriction(LAP).sample([q], rng=3, size=60_000).ravel()
    assert draws.min() >= 0
    lap = stats.laplace(loc=q, scale=B)
    keep = lap.sf(0.0)

    def conditional_cdf(y):
        return (lap.cdf(y) - lap.cdf(0.0)) / keep

    assert stats.kstest(draws, conditional_cdf).pvalue > ALPHA_SEEDED
    # q = -40 keeps a fraction 2e-6 of the draws: a rejection loop would need ~5e5 tries each
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - q - Restriction(LAP).bias(q)) <= Z * se


@pytest.mark.statistical
@pytest.mark.parametrize("q", [0, 3, 20, -30])
def test_restricted_geometric_sampler_has_the_conditional_law(q):
    draws = Restriction(GEO).sample([q], rng=4, size=80_000).ravel()
    assert draws.min() >= 0 and draws.dtype == np.int64
    k = np.arange(0, 4000)
    mass = GEO.pmf(k - q)
    mass = mass / mass.sum()

    def pmf(y):
        y = np.asarray(y)
        return np.where((y >= 0) & (y < 4000), mass[np.clip(y, 0, 3999)], 0.0)

    def cdf(y):
        return np.where(y < 0, 0.0, np.cumsum(mass)[np.clip(np.asarray(y), 0, 3999)])

    assert pooled_chisquare(draws, pmf, cdf) > ALPHA_SEEDED


@pytest.mark.statistical
def test_restriction_bias_exceeds_twice_the_ramp_in_monte_carlo():
    """Equal privacy (eps = 0.5): restriction of Laplace(4) vs ramp of Laplace(2), q = 1."""
    q = 1.0
    ramp = clamp(Laplace(0.5).sample([q], rng=5, size=200_000)).ravel() - q
    restricted = Restriction(Laplace.from_scale(4.0)).sample([q], rng=6, size=200_000).ravel() - q
    diff = restricted.mean() - 2 * ramp.mean()
    se = math.sqrt(restricted.var(ddof=1) / restricted.size + 4 * ramp.var(ddof=1) / ramp.size)
    assert diff > Z * se


# ------------------------------------------------------------------------ log-Laplace
def test_log_laplace_moments_and_errors():
    m = LogLaplace(epsilon=1.0, ratio_bound=0.3)
    b = 0.3
    assert float(m.mean(10.0)) == pytest.approx(10 / (1 - b * b))
    assert float(m.bias(10.0)) == pytest.approx(10 * b * b / (1 - b * b))
    with pytest.raises(UnboundedMomentError, match="infinite mean"):
        LogLaplace(epsilon=1.0, ratio_bound=1.0)
    with pytest.raises(UnboundedMomentError, match="infinite variance"):
        LogLaplace(epsilon=1.0, ratio_bound=0.5).variance(1.0)
    with pytest.raises(ValidationError, match="must be strictly positive"):
        m.sample([0.0, 2.0], rng=0)
    with pytest.raises(ValidationError, match="`ratio_bound` must be positive and finite"):
        LogLaplace(epsilon=1.0, ratio_bound=-0.1)


@pytest.mark.statistical
def test_log_laplace_mean_and_variance_match_monte_carlo():
    m = LogLaplace(epsilon=1.0, ratio_bound=0.2)
    draws = m.sample([50.0], rng=7, size=400_000).ravel()
    se = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - float(m.mean(50.0))) <= Z * se
    centred = draws - draws.mean()
    var = centred.var(ddof=1)
    se_var = math.sqrt((np.mean(centred**4) - var**2) / draws.size)
    assert abs(var - float(m.variance(50.0))) <= Z * se_var


# ------------------------------------------------------------------------ modified (T)
def test_modified_postprocess_steps_and_validation():
    out = modified_postprocess([-1.0, 0.0, 2.0, 100.0], temperature=2.0)
    np.testing.assert_allclose(out, [0.0, 0.0, 2 - 2 / 3, 100 - 2 / 101])
    np.testing.assert_array_equal(modified_postprocess([-1.0, 3.0], temperature=0.0), [0.0, 3.0])
    with pytest.raises(ValidationError, match=r"`temperature` must be nonnegative; got -1"):
        modified_postprocess([1.0], temperature=-1)


@pytest.mark.parametrize("m", [LAP, GEO], ids=["laplace", "geometric"])
def test_modified_bias_at_zero_temperature_is_the_ramp(m):
    q = np.array([0.0, 2.0, 9.0])
    np.testing.assert_allclose(modified_bias(q, m, temperature=0.0), clamp_bias(q, m), atol=1e-9)


@pytest.mark.statistical
@pytest.mark.parametrize("m", [LAP, GEO], ids=["laplace", "geometric"])
@pytest.mark.parametrize("t", [0.5, 3.0])
def test_modified_bias_matches_monte_carlo(m, t):
    q = np.array([0, 1, 4, 15, 60])
    mean, se = _mc_mean(modified_postprocess(m.sample(q, rng=8, size=200_000), temperature=t))
    assert np.all(np.abs(mean - q - modified_bias(q, m, temperature=t)) <= Z * se)


def test_temperature_search_reproducible_and_improves_on_the_ramp():
    q = np.arange(0, 40, 2)
    grid = np.linspace(0, 6, 13)
    a = optimal_temperature(q, LAP, temperatures=grid, n_draws=20_000, rng=11)
    b = optimal_temperature(q, LAP, temperatures=grid, n_draws=20_000, rng=11)
    assert a.temperature == b.temperature
    np.testing.assert_array_equal(a.objective, b.objective)
    assert a.temperature > 0
    assert a.objective.min() < a.objective[0]  # T* narrows the spread of |bias| vs T = 0
    # the Monte Carlo biases agree with the exact ones within their standard errors
    i = int(np.argmin(a.objective))
    exact = modified_bias(q, LAP, temperature=a.temperature)
    assert np.all(np.abs(a.bias[i] - exact) <= Z * a.standard_error[i])
    with pytest.raises(ValidationError, match="`temperatures` must be nonnegative"):
        optimal_temperature(q, LAP, temperatures=[-1.0], rng=0)


def test_restriction_cost_composes_into_a_release_budget():
    from postdp import Budget

    levels = [Restriction(Laplace(0.5)), Restriction(Geometric(0.25)), Laplace(1.0)]
    total = Budget.compose(m.privacy_cost() for m in levels)
    assert total.epsilon == pytest.approx(2 * 0.5 + 2 * 0.25 + 1.0)


@pytest.mark.parametrize("epsilon", [0.1, 0.4, 1.0, 3.0])
def test_optimal_shift_for_geometric_noise_is_exact(epsilon):
    """Issue 11: 'ramp-optimal' used the Laplace alpha* = b W(1/2) on geometric noise. The
    exact shift solves f(-alpha) = alpha with the geometric tail mean f; the worst-case
    |bias| of the translated ramp (exact biases, checked against brute sums above) is alpha*
    and no shift on a fine grid does better."""
    m = Geometric(epsilon=epsilon)
    star = optimal_ramp_shift(m)
    assert translated_ramp_bias(0.0, m, alpha=star) == pytest.approx(star, rel=1e-12)
    q = np.arange(0, int(60 / epsilon) + 1, dtype=float)

    def worst(alpha):
        return float(np.abs(translated_ramp_bias(q, m, alpha=alpha)).max())

    assert worst(star) == pytest.approx(star, rel=1e-9)
    grid = np.linspace(0.5 * star, 1.5 * star, 201)
    assert min(worst(a) for a in grid) >= worst(star) * (1 - 1e-9)
    laplace_value = optimal_ramp_shift(1.0 / epsilon)
    assert abs(star - laplace_value) > 1e-4 * laplace_value  # not the Laplace formula


@pytest.mark.statistical
@pytest.mark.parametrize("mechanism", [Geometric(epsilon=0.7), Laplace.from_scale(1.5)], ids=repr)
def test_restriction_release_path_has_the_restricted_law(mechanism):
    """Issue 11: Restriction gains a release path (rejection over OpenDP's secure draws).
    Its outputs are nonnegative and their mean matches q + the exact restriction bias
    (seed 004 Cor. 1) within Z standard errors; it costs 2 eps (Prop. 2)."""
    r = Restriction(mechanism)
    q = np.zeros(20_000, dtype=np.int64 if mechanism.discrete else np.float64)
    q[10_000:] = 2
    out = r.release(q)
    assert out.dtype == q.dtype and (out >= 0).all()
    for value in (0, 2):
        draws = out[q == value].astype(np.float64)
        expected = value + float(r.bias(float(value)))
        se = draws.std(ddof=1) / math.sqrt(draws.size)
        assert abs(draws.mean() - expected) <= Z * se
    assert r.privacy_cost().epsilon == 2 * mechanism.epsilon


def test_restriction_release_refuses_hopeless_rejection():
    r = Restriction(Laplace.from_scale(1.0))
    assert float(r.acceptance(-20.0)) < 1e-6
    with pytest.raises(ValidationError, match="more than a million draws"):
        r.release([-20.0, 1.0])

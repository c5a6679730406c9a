"""Allotments, rules, fairness measures and mitigations against seed 002's results."""

import math

import numpy as np
import pytest

from postdp import Geometric, Laplace
from postdp.decisions import (
    FairnessReport,
    LinearProxy,
    Ratio,
    Threshold,
    allot,
    allotment_fairness,
    allotment_hessian_trace,
    and_error,
    composition_bound,
    decision_fairness,
    numerical_hessian_trace,
    or_error,
    output_perturbation,
    predicted_allotment_bias,
    section203_rule,
    sum_constrained,
    xor_error,
)
from postdp.errors import ValidationError
from postdp.postprocess import clamp
from tests.statistical._helpers import Z


def test_example1_closed_form_equals_numerical_hessian_trace():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.uniform(5, 500, 12)
        w = rng.uniform(0.5, 2.0, 12)
        numeric = numerical_hessian_trace(lambda v, w=w: allot(v, w), x)
        np.testing.assert_allclose(numeric, allotment_hessian_trace(x, w), rtol=1e-4, atol=1e-16)


@pytest.mark.statistical
def test_hessian_prediction_of_the_allotment_bias_matches_monte_carlo():
    """Thm 3 / eq. (4): B_i ~ 1/2 Var(eta) Tr(H P_i) for small noise (Laplace scale 50 on
    counts 200..5000); 1,000,000 draws; every entity within 4.5 SE."""
    x = np.array([200.0, 500.0, 1000.0, 3000.0, 5000.0])
    w = np.ones(5)
    m = Laplace.from_scale(50.0)
    rep = allotment_fairness(x, w, m, n_draws=1_000_000, batch=50_000, rng=3)
    predicted = predicted_allotment_bias(x, w, m.variance())
    np.testing.assert_allclose(predicted, 0.5 * m.variance() * allotment_hessian_trace(x, w))
    assert np.all(np.abs(rep.bias - predicted) <= Z * rep.bias_se)
    assert abs(rep.bias[0]) > Z * rep.bias_se[0]  # the bias is really there, and predicted


@pytest.mark.statistical
@pytest.mark.parametrize("truth", [(False, False), (False, True), (True, False), (True, True)])
def test_lemmas_1_to_3_match_monte_carlo(truth):
    """Two thresholds on independently noised features; the error of and/or/xor."""
    t1 = 100.0 + (8.0 if truth[0] else -8.0)
    t2 = 50.0 + (3.0 if truth[1] else -3.0)
    data = {"a": [t1], "b": [t2]}
    m = Laplace.from_scale(6.0)
    p1, p2 = Threshold("a", 100.0), Threshold("b", 50.0)
    n = 200_000
    e1 = abs(decision_fairness(data, p1, m, n_draws=n, rng=1).bias[0])
    e2 = abs(decision_fairness(data, p2, m, n_draws=n, rng=2).bias[0])
    for rule, lemma in (
        (p1 & p2, and_error(e1, e2, *truth)),
        (p1 | p2, or_error(e1, e2, *truth)),
        (p1 ^ p2, xor_error(e1, e2)),
    ):
        err = abs(decision_fairness(data, rule, m, n_draws=n, rng=3).bias[0])
        se = math.sqrt(err * (1 - err) / n) + math.sqrt(2 * 0.25 / n)  # plus the plug-in's
        assert abs(err - float(lemma)) <= Z * se, (rule, err, lemma)


def test_theorems_7_and_8_which_group_is_penalised():
    """With equal predicate errors, the error of P1 and P2 is largest when both are True
    (Thm 7) and that of P1 or P2 when both are False (Thm 8)."""
    b = 0.2
    cases = [(False, False), (False, True), (True, False), (True, True)]
    conj = [float(and_error(b, b, *c)) for c in cases]
    disj = [float(or_error(b, b, *c)) for c in cases]
    assert max(conj) == conj[3] and max(disj) == disj[0]


def test_composition_bounds():
    # Corollary 6: composing with and/or makes alpha larger than both alphas
    for a1, a2, m1, m2 in [(0.1, 0.05, 0.01, 0.02), (0.2, 0.3, 0.05, 0.1), (0.01, 0.0, 0.0, 0.3)]:
        assert composition_bound((a1, m1), (a2, m2), op="and") > max(a1, a2)
    # Corollary 3: xor of fair predicates is fair
    assert composition_bound((0.0, 0.2), (0.0, 0.1), op="xor") == 0.0
    with pytest.raises(ValidationError, match="`op` must be"):
        composition_bound((0.1, 0.0), (0.1, 0.0), op="nand")


@pytest.mark.statistical
def test_theorem10_sum_constraint_keeps_alpha():
    """Thm 10 on Monte Carlo output: projecting each draw onto sum = S shifts every entity by
    the same amount, so the biases move together and alpha is unchanged."""
    x = np.array([0.0, 3.0, 20.0, 400.0])
    m = Laplace.from_scale(5.0)
    draws = clamp(m.sample(x, rng=4, size=100_000))
    bias = draws.mean(axis=0) - x
    projected = sum_constrained(draws, total=float(x.sum()))
    bias_pp = projected.mean(axis=0) - x
    alpha, alpha_pp = bias.max() - bias.min(), bias_pp.max() - bias_pp.min()
    assert alpha_pp == pytest.approx(alpha, rel=1e-9)
    np.testing.assert_allclose(bias_pp, bias - bias.mean(), atol=1e-9)  # the proof's identity


@pytest.mark.statistical
def test_output_perturbation_is_unbiased():
    truth = allot([10.0, 30.0, 60.0], np.ones(3))
    draws = output_perturbation(truth, Laplace.from_scale(0.05), rng=5, size=200_000)
    se = draws.std(axis=0, ddof=1) / math.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(axis=0) - truth) <= Z * se)


def test_cost_of_privacy_definition_on_a_hand_case():
    rep = FairnessReport(
        np.zeros(4), np.array([0.02, -0.01, -0.005, 0.0]), np.zeros(4), np.zeros(4), 100
    )
    assert rep.cost_of_privacy(1_000_000.0) == pytest.approx(15_000.0)  # (0.01 + 0.005) x B
    assert rep.alpha == pytest.approx(0.03)
    np.testing.assert_allclose(rep.disparity, [0.03, 0.03, 0.025, 0.02])


def test_rules_zero_denominators_and_section203():
    ratio = Ratio("a", "b", 0.5)
    assert ratio({"a": [1.0, 1.0, 0.0], "b": [0.0, -3.0, 0.0]}).tolist() == [False] * 3
    rule = section203_rule()
    assert rule.features == {"vacit_total", "vaclep", "illit"}
    data = {
        "vacit_total": [200_000, 200_000, 200_000],
        "vaclep": [12_000, 9_000, 11_000],
        "illit": [200, 200, 100],
    }
    # >10^4 LEP, ratio 6% > 5% with 1.67% illiterate; 4.5% and <10^4; 0.9% illiterate
    assert rule(data).tolist() == [True, False, False]
    with pytest.raises(ValidationError, match="rule feature 'illit' is not in the data"):
        rule({"vacit_total": [1], "vaclep": [1]})


def test_bad_input():
    with pytest.raises(
        ValidationError, match=r"`multipliers` must be finite \(no NaN or inf\); got nan at index 1"
    ):
        allot([1.0, 2.0], [1.0, np.nan])
    with pytest.raises(ValidationError, match=r"`multipliers` must have shape \(2,\)"):
        allot([1.0, 2.0], [1.0])
    with pytest.raises(ValidationError, match="`x` must be nonnegative; got -3"):
        allotment_fairness([1.0, -3.0], [1.0, 1.0], Laplace(1.0), n_draws=10, rng=0)
    with pytest.raises(ValidationError, match="weighted total"):
        allot([[1.0, -2.0]], [1.0, 1.0])
    with pytest.raises(ValidationError, match="`vaclep` must be nonnegative"):
        decision_fairness(
            {"vacit_total": [10], "vaclep": [-1], "illit": [0]},
            section203_rule(),
            Laplace(1.0),
            n_draws=10,
            rng=0,
        )


def test_reports_are_reproducible_and_batch_invariant():
    x = np.array([5.0, 50.0, 500.0])
    a = allotment_fairness(
        x, np.ones(3), Geometric(0.5), postprocess=clamp, n_draws=3000, batch=100, rng=8
    )
    b = allotment_fairness(
        x, np.ones(3), Geometric(0.5), postprocess=clamp, n_draws=3000, batch=3000, rng=8
    )
    np.testing.assert_allclose(a.bias, b.bias, rtol=1e-12)
    assert not np.isnan(a.to_frame().to_numpy(dtype=float)).any()


def test_linear_proxy_learned_per_group():
    rng = np.random.default_rng(0)
    data = {"x": rng.uniform(0, 100, 500), "y": rng.uniform(0, 1, 500)}
    truth = Threshold("x", 50.0)(data)
    for model in ("regression", "svm"):
        proxy = LinearProxy(["x", "y"], "x", n_groups=4, model=model).fit(data, truth)
        assert (proxy.predict(data) == truth).mean() > 0.9


def test_section203_margin_is_defined_for_negative_determinations():
    """Issue 10: the margin was 0 for all 44 negative determinations of the bundled data."""
    from postdp.data import load_section203
    from postdp.decisions import section203_margin, section203_rule

    s = load_section203()
    data = {k: s[k].to_numpy(dtype=float) for k in ("vacit_total", "vaclep", "illit")}
    truth = section203_rule()(data)
    margin = section203_margin(data)
    assert (~truth).sum() > 0 and (margin[~truth] > 0).all() and (margin >= 0).all()
    # hand-computed negatives: A, B fail (share 0.04 -> 0.2, count 4000 -> 0.6), C holds
    one = {"vacit_total": [100_000.0], "vaclep": [4_000.0], "illit": [100.0]}
    assert section203_margin(one)[0] == pytest.approx(0.2)
    # A holds, C fails: spe/sp = 0.01 -> |0.01 - 0.0131| / 0.0131
    two = {"vacit_total": [100_000.0], "vaclep": [6_000.0], "illit": [60.0]}
    assert section203_margin(two)[0] == pytest.approx(0.0031 / 0.0131)
    # both fail: the farther of the two conditions must be crossed
    three = {"vacit_total": [100_000.0], "vaclep": [4_000.0], "illit": [40.0]}
    assert section203_margin(three)[0] == pytest.approx(max(0.2, (0.0131 - 0.01) / 0.0131))


def test_fairness_engines_accept_the_release_design_step_names():
    """Issue 11: the fairness functions take the same post-processing chains as
    ReleaseDesign (element-wise steps), with the same result as the functions."""
    from postdp.decisions import allotment_fairness
    from postdp.postprocess import modified_postprocess

    x, w = np.array([1.0, 5.0, 500.0]), np.ones(3)
    kwargs = {"amount": 1000.0, "n_draws": 3000, "rng": 4}
    by_name = allotment_fairness(x, w, Laplace(0.5), postprocess="modified:T=2", **kwargs)
    by_function = allotment_fairness(
        x, w, Laplace(0.5), postprocess=lambda v: modified_postprocess(v, temperature=2.0), **kwargs
    )
    np.testing.assert_array_equal(by_name.bias, by_function.bias)
    rounded = allotment_fairness(x, w, Geometric(0.5), postprocess="clamp,round", **kwargs)
    assert np.isfinite(rounded.bias).all()
    with pytest.raises(ValidationError, match="need a hierarchy"):
        allotment_fairness(x, w, Laplace(0.5), postprocess="project", **kwargs)

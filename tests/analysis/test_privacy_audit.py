"""The empirical privacy audit: valid for correct designs, powerful against broken ones.

Fixed seeds throughout; each broken design must be flagged, each correct one must not be.
"""

import itertools

import numpy as np
import pytest

from postdp import Geometric, Hierarchy, Laplace
from postdp.analysis import ReleaseDesign, audit_privacy
from postdp.errors import ValidationError


@pytest.fixture(scope="module")
def tree():
    return Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2", "b1", "b2"],
        [None, "T", "T", "a", "a", "b", "b"],
        [60, 25, 35, 10, 15, 20, 15],
    )


@pytest.mark.parametrize(
    ("steps", "neighbour"),
    [("none", "add"), ("project", "add"), ("project-nonneg,round", "move")],
)
def test_correct_designs_are_not_flagged(tree, steps, neighbour):
    design = ReleaseDesign(tree, Geometric(0.4), steps)
    res = audit_privacy(design, neighbour=neighbour, trials=20_000, rng=1)
    # by default a move goes to the next leaf, a sibling: two leaf counts change
    assert res.claimed_epsilon == pytest.approx(1.2 if neighbour == "add" else 0.8)
    assert not res.flagged and 0.0 <= res.epsilon_lower <= res.claimed_epsilon
    assert res.epsilon_lower > 0.2  # the audit does see a real difference between neighbours


def test_a_public_total_needs_a_move_neighbour(tree):
    design = ReleaseDesign(tree, Laplace(0.5), "project", public="root")
    with pytest.raises(ValidationError, match="public node"):
        audit_privacy(design, trials=1000, rng=0)
    res = audit_privacy(design, neighbour="move", leaf="a1", to="b2", trials=20_000, rng=2)
    assert not res.flagged and res.claimed_epsilon == pytest.approx(2.0)


def _pipeline(design, *, seed=None, skip_leaves=False):
    """One release per call, as an implementation would run it (chain prepared once)."""
    chain = design.chain()
    levels = design.hierarchy.n_levels
    leaves = design.hierarchy.leaves

    def release(x, gen):
        if seed is not None:  # a study sampler with a fixed seed swapped in
            gen = np.random.default_rng(seed)
        noisy = design.noise(x, [gen] * levels, 1)[0]
        if skip_leaves:  # the leaf level's noise is never added
            noisy[leaves] = x[leaves]
        return chain(noisy, rng=gen)

    return release


def test_the_audit_of_an_implementation_agrees_with_the_design(tree):
    design = ReleaseDesign(tree, Geometric(0.4), "project")
    res = audit_privacy(design, pipeline=_pipeline(design), trials=6_000, rng=3)
    assert not res.flagged


def test_noise_at_half_its_scale_is_flagged(tree):
    claimed = ReleaseDesign(tree, Geometric(0.4), "project")
    actual = ReleaseDesign(tree, Geometric(0.8), "project")  # half the noise scale
    res = audit_privacy(claimed, pipeline=_pipeline(actual), trials=6_000, rng=3)
    assert res.flagged and res.epsilon_lower > claimed.budget.epsilon


def test_a_level_whose_noise_is_skipped_is_flagged(tree):
    design = ReleaseDesign(tree, Geometric(0.4), "project")
    res = audit_privacy(design, pipeline=_pipeline(design, skip_leaves=True), trials=3_000, rng=4)
    # (P) mixes the exact leaves with the noisy levels above, but one combination of the
    # released values carries no noise: the discriminant finds it
    assert res.flagged and res.epsilon_lower > 4 * res.claimed_epsilon
    assert res.statistic == "discriminant"


def test_a_sampler_with_a_fixed_seed_is_flagged(tree):
    """Every release is the same one, so an event holds in every trial on one input and in
    none on the other: 500 trials bound epsilon below by about 4.9, four times the claim."""
    design = ReleaseDesign(tree, Geometric(0.4), "project-nonneg,round")
    res = audit_privacy(design, pipeline=_pipeline(design, seed=12345), trials=500, rng=5)
    assert res.flagged and res.hits_low == 0 and res.hits_high == 500
    assert res.epsilon_lower > 4 * res.claimed_epsilon


@pytest.mark.slow
def test_the_release_path_itself_is_not_flagged(tree):
    design = ReleaseDesign(tree, Geometric(0.4), "project")
    res = audit_privacy(design, secure=True, trials=2_000)
    assert not res.flagged


def test_the_secure_path_refuses_a_measurement_opendp_accounts_more_for(tree, monkeypatch):
    """The secure audit builds each level's OpenDP measurement once, and checks OpenDP's
    privacy map against the cost postdp reports as the release path does: a measurement
    OpenDP accounts more for is refused before any release."""
    import postdp.mechanisms.release as release
    from postdp.errors import BudgetError

    real = release.opendp_measurement

    def understated(mechanism):
        measurement, d_in, nominal = real(mechanism)
        return measurement, d_in, nominal / 2

    def released(done, total):
        raise AssertionError("a release was drawn before the check")

    monkeypatch.setattr(release, "opendp_measurement", understated)
    design = ReleaseDesign(tree, Geometric(0.4), "project")
    with pytest.raises(BudgetError, match="more than the nominal"):
        audit_privacy(design, secure=True, trials=100, progress=released)


def test_bad_inputs(tree):
    design = ReleaseDesign(tree, Geometric(0.4))
    for kwargs, match in (
        ({"trials": 10}, "`trials`"),
        ({"alpha": 1.5}, "`alpha`"),
        ({"delta": -0.1}, "`delta`"),
        ({"neighbour": "swap"}, "`neighbour`"),
        ({"leaf": "a"}, "`leaf` must be a leaf"),
        ({"neighbour": "move", "leaf": "a1", "to": "a1"}, "`to` must be another leaf"),
        ({"secure": True, "rng": 1}, "`rng`"),
    ):
        with pytest.raises(ValidationError, match=match):
            audit_privacy(design, **kwargs)
    from postdp import Gaussian

    with pytest.raises(ValidationError, match="pass `delta`"):
        audit_privacy(ReleaseDesign(tree, Gaussian(rho=0.5)), trials=100)


def test_the_audit_reports_its_progress_to_the_last_release():
    from postdp import Geometric, Hierarchy
    from postdp.analysis import ReleaseDesign, audit_privacy

    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [30, 10, 20])
    seen: list[tuple[int, int]] = []
    design = ReleaseDesign(h, Geometric(0.5), "project")
    audit_privacy(design, trials=300, batch=100, rng=1, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (1200, 1200) and len(seen) == 12
    assert all(b[0] > a[0] for a, b in itertools.pairwise(seen))

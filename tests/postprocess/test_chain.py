"""Post-processing chains: parsing, order of steps, consistency of the output."""

import numpy as np
import pytest

from postdp import Gaussian, Geometric, Laplace, project
from postdp.errors import InfeasibleConstraintsError, ValidationError
from postdp.postprocess import (
    PostProcessChain,
    clamp,
    is_consistent,
    modified_postprocess,
    optimal_ramp_shift,
    parse_steps,
)
from tests.postprocess.catalogue import unequal


@pytest.fixture
def h():
    return unequal()


def test_parse_steps_and_errors():
    assert [s.name for s in parse_steps("none")] == []
    assert [str(s) for s in parse_steps(" project , round ")] == ["project", "round"]
    assert parse_steps("clamp:lower=2")[0].options == {"lower": 2.0}
    for bad, message in [
        ("bogus", "unknown post-processing method 'bogus'"),
        ("modified", r"needs its option: modified:T=<number>"),
        ("modified:T=x", "must be key=number"),
        ("round:T=1", "step 'round' takes no option T"),
    ]:
        with pytest.raises(ValidationError, match=message):
            parse_steps(bad)


def test_chain_steps_in_order(h):
    mechs = [Laplace(0.5)] * h.n_levels
    y = h.counts + np.random.default_rng(0).laplace(0, 10.0, size=(3, h.n))
    np.testing.assert_array_equal(PostProcessChain(h, mechs, "clamp")(y), clamp(y))
    np.testing.assert_allclose(
        PostProcessChain(h, mechs, "clamp,modified:T=2")(y),
        modified_postprocess(clamp(y), temperature=2.0),
    )
    shift = optimal_ramp_shift(2.0)
    np.testing.assert_allclose(
        PostProcessChain(h, mechs, "ramp-optimal")(y), np.maximum(y - shift, 0.0)
    )
    np.testing.assert_allclose(PostProcessChain(h, mechs, "project-nonneg")(y), project(y, h))
    rounded = PostProcessChain(h, mechs, "project-nonneg,round")(y, rng=1)
    assert rounded.dtype == np.int64 and is_consistent(rounded, h)
    assert np.all(np.abs(rounded - project(y, h)) < 1)
    # element-wise rounding when the input is not consistent
    loose = PostProcessChain(h, mechs, "clamp,round")(y, rng=1)
    assert loose.dtype == np.int64 and not is_consistent(loose, h)


def test_chain_validation(h):
    mechs = [Geometric(1.0)] * h.n_levels
    with pytest.raises(ValidationError, match="or one per level"):
        PostProcessChain(h, mechs[:1], "clamp")
    with pytest.raises(ValidationError, match="'ramp-optimal' needs Laplace or geometric"):
        PostProcessChain(h, [Gaussian(rho=1.0)] * h.n_levels, "ramp-optimal")
    with pytest.raises(ValidationError, match="public nodes need a projection step"):
        PostProcessChain(h, mechs, "clamp", public="root")
    with pytest.raises(InfeasibleConstraintsError):
        PostProcessChain(h, mechs, "project-nonneg", public={"n0": 1.0, "n1": 5.0})

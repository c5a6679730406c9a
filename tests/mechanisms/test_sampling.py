"""Shapes, dtypes and reproducibility of the study-path samplers."""

import numpy as np
import pytest

from postdp import DiscreteGaussian, Gaussian, Geometric, Laplace
from postdp._rng import block_rows

MECHANISMS = [Laplace(0.7), Geometric(0.7), Gaussian(rho=0.3), DiscreteGaussian(rho=0.3)]


@pytest.mark.parametrize("m", MECHANISMS, ids=lambda m: m.name)
def test_shapes_and_dtypes(m):
    x = np.arange(12).reshape(3, 4)
    assert m.sample(x, rng=0).shape == (3, 4)
    out = m.sample(x, rng=0, size=5)
    assert out.shape == (5, 3, 4)
    assert out.dtype == (np.int64 if m.discrete else np.float64)
    assert m.sample(x, rng=0, size=(2, 3)).shape == (2, 3, 3, 4)
    np.testing.assert_array_equal(
        m.sample(x, rng=0, size=(2, 3)), m.sample(x, rng=0, size=6).reshape(2, 3, 3, 4)
    )
    assert m.sample(5, rng=0, size=4).shape == (4,)
    assert m.sample(x, rng=0, size=0).shape == (0, 3, 4)


@pytest.mark.parametrize("m", MECHANISMS, ids=lambda m: m.name)
@pytest.mark.parametrize("n_entities", [1, 3, 700])
def test_same_seed_same_draws_whatever_the_batch(m, n_entities):
    x = np.arange(n_entities) * 10
    n_draws = 3 * block_rows(n_entities) + 17  # several blocks and a ragged end
    whole = m.sample(x, rng=42, size=n_draws)
    for batch in (1, 7, block_rows(n_entities), n_draws, 10 * n_draws):
        if batch == 1 and n_draws > 2000:
            continue  # one row at a time is covered by the small cases
        parts = list(m.iter_samples(x, rng=42, n_draws=n_draws, batch=batch))
        assert all(p.shape[0] <= batch for p in parts)
        np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_generator_and_seed_sequence_are_accepted_and_advance():
    m = Laplace(1.0)
    gen = np.random.default_rng(3)
    first = m.sample([0.0, 0.0], rng=gen, size=4)
    second = m.sample([0.0, 0.0], rng=gen, size=4)
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, m.sample([0.0, 0.0], rng=np.random.default_rng(3), size=4))
    seq = np.random.SeedSequence(11)
    np.testing.assert_array_equal(
        m.sample([1.0], rng=seq, size=3), m.sample([1.0], rng=np.random.SeedSequence(11), size=3)
    )


def test_different_seeds_differ_and_noise_is_centred_on_x():
    m = Geometric(2.0)
    assert not np.array_equal(m.sample([0] * 50, rng=1), m.sample([0] * 50, rng=2))
    draws = m.sample([1_000_000, 5], rng=0, size=2000)
    assert np.all(np.abs(draws - [1_000_000, 5]) < 30)


def test_large_counts_stay_exact_integers():
    m = Geometric(1.0)
    draws = m.sample([308_745_538], rng=0, size=1000)
    assert draws.dtype == np.int64
    assert np.abs(draws - 308_745_538).max() < 40

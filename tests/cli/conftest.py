"""Fixtures shared by the command-line tests."""

import pytest

from postdp.mechanisms import _base


@pytest.fixture
def spy(monkeypatch):
    """Record every call of the study and release samplers (they stay functional)."""
    calls = []
    real_release = _base.NoiseMechanism.release
    real_draw = _base.NoiseMechanism._draw

    def release(self, x):
        calls.append("release")
        return real_release(self, x)

    def draw(self, values, rng, n_rows, out=None):
        calls.append("study")
        return real_draw(self, values, rng, n_rows, out)

    monkeypatch.setattr(_base.NoiseMechanism, "release", release)
    monkeypatch.setattr(_base.NoiseMechanism, "_draw", draw)
    return calls

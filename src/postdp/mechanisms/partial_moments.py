"""E[(d + N)^+] for Laplace and double geometric noise N (private; shared by the biases).

Every function acts on arrays of any shape (draws on leading axes). The bias functions take
the noise mechanism (``Laplace`` or ``Geometric``) and the true value q, and return
E[post-processed output] - q exactly: closed forms for Laplace noise from the seeds, and their
double geometric counterparts from exact geometric-series sums.

The common ingredient is f(d) = E[(d + N)^+] for the noise N. For c <= 0,

- Laplace(b):  f(c) = (b/2) e^{c/b};
- double geometric(a): f(c) = p0 a^m [c/(1 - a) + (m(1 - a) + a)/(1 - a)^2], with
  p0 = (1 - a)/(1 + a) and m = ⌊-c⌋ + 1 the least integer k with c + k > 0;

and f(d) = d + f(-d) for d >= 0 because (d + N)^+ - (-d - N)^+ = d + N and N is symmetric.
Writing every bias through f(c), c <= 0, avoids subtracting nearly equal large numbers.
"""

from __future__ import annotations

import math

import numpy as np

from postdp._typing import FloatArray
from postdp.mechanisms._base import NoiseMechanism
from postdp.mechanisms.geometric import Geometric
from postdp.mechanisms.laplace import Laplace


def noise_law(mechanism: NoiseMechanism) -> Laplace | Geometric:
    if not isinstance(mechanism, Laplace | Geometric):
        raise TypeError(
            "closed-form biases are available for Laplace and Geometric noise; got "
            f"{type(mechanism).__name__}"
        )
    return mechanism


def tail_mean(c: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(c) = E[(c + N)^+] for c <= 0."""
    if isinstance(mechanism, Laplace):
        b = mechanism.scale
        out: FloatArray = 0.5 * b * np.exp(c / b)
        return out
    a = mechanism.a
    p0 = (1.0 - a) / (1.0 + a)
    m = np.floor(-c) + 1.0
    am = np.exp(m * math.log(a))
    tail: FloatArray = p0 * am * (c / (1.0 - a) + (m * (1.0 - a) + a) / (1.0 - a) ** 2)
    return tail


def positive_part_mean(d: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(d) = E[(d + N)^+] for any real d."""
    out: FloatArray = np.maximum(d, 0.0) + tail_mean(-np.abs(d), mechanism)
    return out


def positive_part_excess(d: FloatArray, mechanism: Laplace | Geometric) -> FloatArray:
    """f(d) - d, computed without cancellation: f(-|d|) + max(-d, 0)."""
    out: FloatArray = tail_mean(-np.abs(d), mechanism) + np.maximum(-d, 0.0)
    return out

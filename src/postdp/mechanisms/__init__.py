"""Noise mechanisms: their samplers (study and release paths), exact laws and privacy costs.

``Mechanism`` is the one interface (and base class) of the additive mechanisms;
``NoiseMechanism`` is its former name, kept as an alias.
"""

from postdp.mechanisms._base import Mechanism, expand_mechanisms
from postdp.mechanisms._base import NoiseMechanism as NoiseMechanism  # alias
from postdp.mechanisms.budget import Budget
from postdp.mechanisms.discrete_gaussian import DiscreteGaussian
from postdp.mechanisms.gaussian import Gaussian
from postdp.mechanisms.geometric import DoubleGeometric as DoubleGeometric  # alias only
from postdp.mechanisms.geometric import Geometric
from postdp.mechanisms.laplace import Laplace
from postdp.mechanisms.log_laplace import LogLaplace
from postdp.mechanisms.restriction import Restriction

__all__ = [
    "Budget",
    "DiscreteGaussian",
    "Gaussian",
    "Geometric",
    "Laplace",
    "LogLaplace",
    "Mechanism",
    "Restriction",
    "expand_mechanisms",
]

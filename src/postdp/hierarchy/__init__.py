"""Hierarchies of geographic units, and noisy releases of their counts."""

from postdp.hierarchy._noise import NoisyCounts, add_noise
from postdp.hierarchy._tree import Hierarchy

__all__ = ["Hierarchy", "NoisyCounts", "add_noise"]

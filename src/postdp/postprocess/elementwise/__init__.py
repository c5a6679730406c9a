"""Element-wise post-processing steps and their closed-form biases: clamping, the
translated ramp and its optimal shift ([mcglinchey2020]), and the modified post-processing of seed
002 (a mitigation). Their names are re-exported by :mod:`postdp.postprocess`."""

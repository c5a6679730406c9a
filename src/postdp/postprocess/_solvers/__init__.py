"""The shared solvers of the post-processing (private): the two-pass tree solve and its
active-set methods, the marginal (Kronecker) basis, the family-by-family nonnegative least
squares of top-down, the simplex projection, the rounding networks, and the estimate check
the table certificates share. The public verbs of :mod:`postdp.postprocess` call them;
nothing outside the package does."""

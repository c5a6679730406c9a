"""The scalar variance recursion of a one-cell table equals the c x c filter's.

:func:`postdp.postprocess._solvers.one_cell.one_cell_variances` is the Rauch-Tung-Striebel
recursion of :class:`~postdp.postprocess._solvers.kalman_tree.TreeGLS` ([zhu2021] Thm 7)
with 1 x 1 matrices. On random geographies, several answers per level with their own
coefficients and variances, public answers and budget factors (0 included), the two give
the same variance at every geounit; where the scalar recursion declines (a leaf with no
noisy answer of its own), the filter declines too or refuses the design.
"""

from __future__ import annotations

import numpy as np
import pytest

from postdp import Hierarchy
from postdp.errors import ValidationError
from postdp.postprocess._solvers.kalman_tree import TreeGLS
from postdp.postprocess._solvers.one_cell import one_cell_variances


def _case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    geo = Hierarchy([f"g{i}" for i in range(n)], parents)
    levels = []
    for d in range(geo.n_levels):
        k = int(rng.integers(0 if d < geo.n_levels - 1 else 1, 3))
        a = rng.choice([1.0, 2.0, -0.5], size=k)
        r = rng.uniform(0.2, 5.0, size=k)
        if d < geo.n_levels - 1 and k and rng.random() < 0.15:
            r[0] = 0.0  # a public answer
        levels.append((a[:, None], r))
    scale = None
    if rng.random() < 0.5:
        scale = rng.choice([0.0, 0.5, 1.0, 2.0], size=n, p=[0.2, 0.2, 0.4, 0.2])
    return geo, levels, scale


def _filter(geo, levels, scale):
    tree = TreeGLS(geo, levels, 1, scale=scale)
    out = np.empty(geo.n)
    for k, P in tree.covariances():
        out[k] = P[0, 0]
    return out


@pytest.mark.parametrize("seed", range(60))
def test_scalar_recursion_equals_the_matrix_filter(seed):
    geo, levels, scale = _case(seed)
    ours = one_cell_variances(geo, levels, scale)
    if ours is None:  # a leaf without noisy answers: the filter refuses it or, for an
        # only child (open: it is its parent), gives it its parent's variance
        lay = geo.layout
        s = np.ones(geo.n) if scale is None else scale[lay.order]
        silent = [
            int(lay.order[k])
            for d in range(geo.n_levels)
            for k in range(int(lay.bounds[d]), int(lay.bounds[d + 1]))
            if geo.is_leaf[lay.order[k]]
            and not (s[k] * np.sum(levels[d][0][levels[d][1] > 0, 0] ** 2) > 0)
        ]
        assert silent
        try:
            ref = _filter(geo, levels, scale)
        except ValidationError:
            return
        only_child = [(geo.parent == geo.parent[i]).sum() == 1 for i in silent]
        assert all(only_child), silent
        return
    ref = _filter(geo, levels, scale)
    noise = max(float(r.max()) for _, r in levels if r.size)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12 * noise)
    assert (ours >= 0).all()


def test_the_cases_cover_public_answers_budget_factors_and_declines():
    """The random cases reach every branch: public answers, zero budget factors, and
    designs the scalar recursion declines."""
    public = zero = declined = 0
    for seed in range(60):
        geo, levels, scale = _case(seed)
        public += any((r == 0).any() for _, r in levels)
        zero += scale is not None and bool((scale == 0).any())
        declined += one_cell_variances(geo, levels, scale) is None
    assert public >= 3 and zero >= 3 and 3 <= declined <= 50, (public, zero, declined)


def test_a_hand_computed_two_level_case():
    """Root measured with variance 2, two leaves with variance 1 each: the leaves' sum has
    variance 2, so the root's filtered variance is 2·2/(2+2) = 1; each leaf's smoothed
    variance is 1 + 1·(1 - 2)/4 = 3/4."""
    geo = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    levels = [(np.ones((1, 1)), np.array([2.0])), (np.ones((1, 1)), np.array([1.0]))]
    ours = one_cell_variances(geo, levels)
    np.testing.assert_allclose(ours, [1.0, 0.75, 0.75], rtol=1e-15)

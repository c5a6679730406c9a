"""The Census Bureau's 2020 TopDown for schema tables, with open solvers, one idea a module.

- :mod:`~postdp.postprocess.topdown2020.driver`: the algorithm as it ran, level by level
  and family by family (:func:`top_down_2020`, :func:`check_top_down_2020`,
  :data:`ROUNDER_QUERIES`);
- :mod:`~postdp.postprocess.topdown2020.root`: the root's nonnegative least squares with
  its public marginals held, certified;
- :mod:`~postdp.postprocess.topdown2020.family`: one family's exact nonnegative
  least-squares split (its active set and its start), certified by its KKT residuals;
- :mod:`~postdp.postprocess.topdown2020.family_box`: the same split with bounded rows (the
  children's total boxes, the structural bounds), an active set on the bounds;
- :mod:`~postdp.postprocess.topdown2020.level`: every family of a level in one draw (also
  the plain table top-down's and the BLUE restoration's level step);
- :mod:`~postdp.postprocess.topdown2020.passes`: the least-squares passes of a family and
  the children's totals (pass 0, largest remainders);
- :mod:`~postdp.postprocess.topdown2020.rounding`: the rounder, the L1-closest integers
  over nested queries as a minimum-cost flow;
- :mod:`~postdp.postprocess.topdown2020.structural`: structural bounds and zeros (the
  group-quarters facilities) as rows, held cells and rounder limits of a family.
- :mod:`~postdp.postprocess.topdown2020.dhc`: the DHC persons design's two outer passes per
  parent (40 age groups, then single years), the PL94 histogram held;
- :mod:`~postdp.postprocess.topdown2020.family_rows`: a family with each child's counts
  held on a partition of its cells (the DHC's), by HiGHS's QP and an exact solve, certified.

Over a run of noisy measurement files, :func:`postdp.nmf.postprocess` schedules this
algorithm as tasks, state by state and cut below large subtrees (``postdp/nmf/_topdown_tasks.py``):
that scheduling reads and writes the run's partitions, so it lives with the files in
:mod:`postdp.nmf`; every family it hands here is solved as in a whole-table call.

Only the names below are public (and are re-exported by :mod:`postdp.postprocess`); the
modules' other names are the package's own.
"""

from postdp.postprocess.topdown2020.driver import (
    ROUNDER_QUERIES,
    check_top_down_2020,
    top_down_2020,
)

__all__ = ["ROUNDER_QUERIES", "check_top_down_2020", "top_down_2020"]

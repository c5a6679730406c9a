"""Noisy measurement files: postdp's measurements in the Census Bureau's NMF layout.

The one step of a release that costs privacy is drawing the noisy measurements; every
post-processing after it may be redone by anyone. :func:`write` stores one draw of a schema
table's measurements as the Census published its 2020 ones
(``<run>/<Geolevel>.parquet/{DPQuery,Constraint}/State=NNN/``), :func:`read` streams one or
more spine subtrees of such a run (postdp's or the Census's) back into
:class:`~postdp.tables.TableMeasurements`, and :func:`synthetic_run` makes a small run for
tests and documentation (from :func:`synthetic_population`, a synthetic 2020 persons
population of the states of :func:`synthetic_states`); :func:`postprocess` turns a run into
estimates, partition by partition and resumably (:mod:`postdp.nmf.runs`);
:func:`synthetic_truth` rebuilds a synthetic run's true table from its manifest and
:func:`evaluate` measures a post-processing against it (:mod:`postdp.nmf.study`). See
:mod:`postdp.nmf._layout` for the layout's facts and sources.
"""

from postdp.data import synthetic_population, synthetic_states
from postdp.nmf._io import write
from postdp.nmf._layout import LEVELS_2020
from postdp.nmf._output import MANIFEST_FILE, PLAN_FILE
from postdp.nmf._read import read, subtrees
from postdp.nmf._subtree import below
from postdp.nmf.amc import amc
from postdp.nmf.measure import measure_by_state
from postdp.nmf.runs import postprocess
from postdp.nmf.study import evaluate, synthetic_truth
from postdp.nmf.synthetic import synthetic_run

__all__ = [
    "LEVELS_2020",
    "MANIFEST_FILE",
    "PLAN_FILE",
    "amc",
    "below",
    "evaluate",
    "measure_by_state",
    "postprocess",
    "read",
    "subtrees",
    "synthetic_population",
    "synthetic_run",
    "synthetic_states",
    "synthetic_truth",
    "write",
]

"""What a design gives :func:`postdp.simulate`: the engine's protocol.

The Monte Carlo engine knows nothing of hierarchies or tables. A design is anything with

- ``budget`` (a :class:`~postdp.Budget`), ``n_entities`` (how many values one release
  holds), ``entity_ids`` (their names, shape (n_entities,)) and ``entity_index(ids)``
  (positions of named entities);
- ``simulation(truth, *, raw)``, called once per run before anything is drawn: it checks
  the run's options (``raw``: whether errors before post-processing are asked for) and
  returns a :class:`Simulation`, the prepared run (projectors built, public values set),
  which is shipped to every worker;
- optionally ``solve_bytes``: the memory one draw's post-processing holds, which
  :func:`~postdp.analysis.memory_plan` adds per worker.

A :class:`Simulation` holds ``truth`` (the true value of every entity), ``error_scale``
(the half-width of each entity's error histogram) and one method, ``release(seeds, sizes,
raw)``: draw the chunks whose seeds and row counts are given, each chunk from its own seed
only (so results do not depend on how chunks are grouped), and return a
:class:`ChunkRelease`: the released values of every row, the values before
post-processing of the ``raw`` entities, and, per chunk, any sums the design adds up beside
the per-entity statistics (a table's metric sums).

:class:`~postdp.analysis.ReleaseDesign` (on a hierarchy or a table) is the design postdp
ships; a design of one's own that follows the protocol runs on the same engine (seeded, streaming,
batch-invariant, local processes or Dask).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from postdp._typing import FloatArray, IntArray, NumArray
from postdp.mechanisms import Budget

__all__ = ["ChunkRelease", "Simulation", "SimulationDesign"]


@dataclass(frozen=True)
class ChunkRelease:
    """What one call of :meth:`Simulation.release` returns.

    Attributes
    ----------
    values : ndarray of float64, shape (rows, n_entities)
        The released values of every row of the chunks, chunks in the order given (C order:
        the statistics kernels read rows).
    raw : ndarray, shape (rows, len(raw)), or None
        The values before post-processing of the entities asked for, or None when none were.
    extra : tuple of dict of str to ndarray
        One dict per chunk, in the order given: sums over that chunk's rows that the design
        adds beside the per-entity statistics (the engine adds them over the run chunk by
        chunk, so the totals do not depend on how chunks are grouped); empty when there
        are none.

    Examples
    --------
    >>> import numpy as np
    >>> ChunkRelease(np.zeros((2, 3))).values.shape
    (2, 3)
    """

    values: FloatArray
    raw: NumArray | None = field(default=None, kw_only=True)
    extra: tuple[dict[str, NumArray], ...] = field(default=(), kw_only=True)


@runtime_checkable
class Simulation(Protocol):
    """A prepared run of a design: the true values, the histogram ranges, and the draws.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> sim = ReleaseDesign(h, Geometric(1.0), "project").simulation()
    >>> isinstance(sim, Simulation)
    True
    >>> out = sim.release(np.random.SeedSequence(0).spawn(2), [4, 3], raw=np.array([0]))
    >>> out.values.shape, out.raw.shape
    ((7, 3), (7, 1))
    """

    @property
    def truth(self) -> NumArray:
        """The true value of every entity, shape (n_entities,)."""
        ...

    @property
    def error_scale(self) -> FloatArray:
        """Half-width of each entity's error histogram, shape (n_entities,)."""
        ...

    def release(
        self, seeds: Sequence[np.random.SeedSequence], sizes: Sequence[int], raw: IntArray
    ) -> ChunkRelease:
        """Draw and post-process the chunks (chunk ``k``: ``sizes[k]`` rows from
        ``seeds[k]`` alone)."""
        ...


@runtime_checkable
class SimulationDesign(Protocol):
    """What :func:`postdp.simulate` needs of a design (see the module notes).

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.analysis import ReleaseDesign
    >>> h = Hierarchy.from_parents(["T", "a"], [None, "T"], [5, 5])
    >>> isinstance(ReleaseDesign(h, Geometric(1.0)), SimulationDesign)
    True
    """

    @property
    def budget(self) -> Budget: ...

    @property
    def n_entities(self) -> int: ...

    @property
    def entity_ids(self) -> npt.NDArray[np.object_]: ...

    def entity_index(self, ids: list[str]) -> IntArray: ...

    def simulation(self, truth: Any = None, *, raw: bool = False) -> Simulation: ...

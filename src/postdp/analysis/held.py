"""The PL94 release a study of the DHC persons design holds (study path).

The 2020 DHC production held every geounit's PL94 persons histogram (``hhgq8lev *
votingage * hispanic * cenrace``, 2,016 cells) exactly at the published redistricting
release (``dhc-2020-design.md`` section 4.2). A study that held the *true* histograms would
flatter every DHC estimator, so each draw of a DHC study holds a PL94 release of its own:
:class:`HeldRelease` draws the ``pl94-2020-persons`` design on the same persons (the
tabulation geography, numpy's generator) and post-processes it with the 2020 TopDown (with
the facility bounds the production held), then moves it onto the DHC spine
(:func:`postdp.data.dhc_spine`: a DHC block is its tabulation block, every other DHC
geounit the sum of its blocks).

Every number here is a study's; nothing is published (numpy's generator, never the
release path's samplers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from postdp._typing import IntArray, RNGLike
from postdp.tables import CountBounds, Table

__all__ = ["HeldRelease"]

#: The production's structural zero "no one under 18 in a nursing facility", which every
#: PL94 histogram the DHC holds must keep (its edits forbid those cells).
NURSING_ZERO = "nurse_nva_0"


class HeldRelease:
    """Each DHC geounit's PL94 histogram in a fresh PL94 release of the same persons:
    ``held(rng)`` measures and post-processes (study path; see the module notes).

    Parameters
    ----------
    truth : Table
        The persons of the PL94 design on the tabulation geography (US > State > County >
        Tract > Block group > Block, GEOIDs), e.g. ``postdp.nmf.synthetic_population(states,
        seed=s, scale=f)``, whose DHC counterpart ``postdp.data.synthetic_dhc_population(
        states, seed=s, scale=f)`` is the DHC study's truth.
    bounds : sequence of CountBounds, optional
        Structural bounds the PL94 release holds (the production's facility bounds:
        ``postdp.data.facility_bounds``); also drawn with. The production's zero of no one
        under 18 in a nursing facility (``nurse_nva_0``) is held in any case: the DHC's
        edits forbid those cells, so a histogram with them could not be held.

    Attributes
    ----------
    geography : Hierarchy
        The DHC spine's geography, whose geounits the histograms are of.

    Examples
    --------
    >>> from postdp.data import synthetic_dhc_population
    >>> from postdp.nmf import synthetic_population
    >>> held = HeldRelease(synthetic_population(["11"], seed=0, scale=0.0002))
    >>> h = held(np.random.SeedSequence(1))
    >>> dhc = synthetic_dhc_population(["11"], seed=0, scale=0.0002)
    >>> h.shape == (dhc.geography.n, 2016), int(h[0].sum()) == int(dhc.cells.sum())
    (True, True)
    >>> bool((h[0] == h[held.geography.leaves].sum(axis=0)).all())  # the root: its blocks
    True
    """

    def __init__(self, truth: Table, *, bounds: Sequence[CountBounds] = ()) -> None:
        from postdp.data import dhc_spine, facility_bounds
        from postdp.tables import load_strategy

        bounds = tuple(bounds)
        if not any(b.name == NURSING_ZERO for b in bounds):  # the DHC's edits need it
            n = truth.geography.leaves.size
            free = facility_bounds(np.zeros((n, 8)), truth.geography, known=np.zeros(n, bool))
            bounds += tuple(b for b in free if b.name == NURSING_ZERO)
        self.truth, self.bounds = truth, bounds
        self.workload = load_strategy("pl94-2020-persons").workload(truth)
        self.geography = dhc_spine(truth).geography  # refuses another geography

    def __call__(self, rng: RNGLike = None) -> IntArray:
        """One PL94 release's histograms, (DHC geounits, 2016) whole numbers.

        Parameters
        ----------
        rng : int, SeedSequence, numpy.random.Generator or None
            The PL94 draw's seed (numpy's generator).

        Returns
        -------
        ndarray of int64, shape (geography.n, 2016)
        """
        from postdp.data import dhc_spine
        from postdp.postprocess import top_down_2020
        from postdp.tables import measure

        truth = self.truth
        if isinstance(rng, np.random.SeedSequence):  # a copy: the one given is not spawned
            rng = np.random.SeedSequence(rng.entropy, spawn_key=rng.spawn_key)
        generator = np.random.default_rng(rng)
        m = measure(truth, self.workload, secure=False, rng=generator, bounds=self.bounds)
        release = top_down_2020(m, bounds=self.bounds)
        tab = truth.geography
        moved = dhc_spine(Table(tab, truth.categories, release[tab.leaves]))
        full = np.zeros((moved.geography.n, release.shape[-1]), dtype=np.int64)
        full[moved.geography.leaves] = np.asarray(moved.dense_cells(), dtype=np.int64)
        out: IntArray = moved.geography.aggregate(full.T).T.astype(np.int64)
        return out

    def __repr__(self) -> str:
        return f"HeldRelease({self.geography.n} DHC geounits, {len(self.bounds)} bounds)"

"""Adding noise to counts: a table's workload, or every node of a hierarchy.

:func:`measure` answers every query of a workload at every geounit of its level and adds
each measurement's noise. A hierarchy of counts is the one-cell table (one total per
geounit, measured at every level): :func:`add_noise` draws exactly what :func:`measure`
draws for it, from the same streams, without building the table (the nodes' counts are
already at hand, so no level is summed and no query matrix applied).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import sparse

from postdp import _rng, _validation
from postdp._typing import ArrayLike, FloatArray, IntArray, NumArray, RNGLike
from postdp.errors import PrivacyLeakWarning, ValidationError
from postdp.hierarchy import Hierarchy
from postdp.mechanisms import Budget, NoiseMechanism, expand_mechanisms
from postdp.tables._table import Table
from postdp.tables.bounds import CountBounds, check_bounds
from postdp.tables.bypass import check_budget_scale, level_rho
from postdp.tables.schema import leaf_codes
from postdp.tables.workload import Query, Workload

if TYPE_CHECKING:
    from postdp.privacy import Ledger

_CHUNK = 1 << 22  # study-path noise drawn in pieces of about this many values

__all__ = ["NoisyCounts", "TableMeasurements", "add_noise", "measure"]


@dataclass(frozen=True, eq=False, repr=False)
class TableMeasurements:
    """The noisy answers of a workload on a table.

    Attributes
    ----------
    table : Table
        The table measured (it holds the true counts: never publish it).
    workload : Workload
    values : tuple of ndarray
        One array per measurement (in the workload's order), shape (..., n_level, size):
        the answers for the geounits ``table.geography.levels[level]``; leading axes are
        draws (study path with ``size``).
    secure : bool
        True when drawn on OpenDP's release path.
    bounds : tuple of CountBounds, default ()
        Structural bounds on the table's counts that post-processing holds (public facts,
        e.g. the 2020 group-quarters bounds; :func:`postdp.data.facility_bounds`).
    budget_scale : ndarray or None, default None
        Per geounit (id order), the multiple of its level's budget it was measured with
        (:func:`postdp.tables.single_child_bypass`): its noisy answers have its level's
        variance divided by it, and are NaN where it is 0. None: 1 everywhere.
    recorded : str or None, default None
        The id of its record in a :class:`~postdp.privacy.Ledger` (``measure(...,
        ledger=)``), so that writing it with the same ledger counts it once.

    Examples
    --------
    >>> from postdp import Geometric
    >>> from postdp.data import load_p1
    >>> from postdp.tables import Measurement, Query, Workload, measure
    >>> t = load_p1("us-county")
    >>> w = Workload([Measurement(2, Query.detailed(t.categories), Geometric(epsilon=1.0))])
    >>> out = measure(t, w, secure=False, rng=0)
    >>> out.values[0].shape, str(out.budget)
    ((3221, 63), 'epsilon = 1 (pure DP)')
    """

    table: Table
    workload: Workload
    values: tuple[FloatArray, ...]
    secure: bool
    bounds: tuple[CountBounds, ...] = ()
    budget_scale: FloatArray | None = None
    recorded: str | None = None

    @property
    def budget(self) -> Budget:
        """Privacy cost of the measurements."""
        return self.workload.budget

    @property
    def draws(self) -> tuple[int, ...]:
        """The leading (draw) axes of every answer array: ``()`` for one draw."""
        return tuple(self.values[0].shape[:-2])

    def __getitem__(self, key: Any) -> TableMeasurements:
        """The draws ``key`` selects, as numpy indexes the leading axes (``m[0]``: one draw).

        Examples
        --------
        >>> from postdp import Geometric
        >>> from postdp.data import synthetic_table
        >>> from postdp.tables import Measurement, Query, Workload, measure
        >>> t = synthetic_table((2,), leaf_mean=10, rng=0)
        >>> w = Workload([Measurement(1, Query.detailed(t.categories), Geometric(epsilon=1))])
        >>> m = measure(t, w, secure=False, rng=0, size=5)
        >>> m.draws, m[0].draws, m[1:3].draws
        ((5,), (), (2,))
        """
        if not self.draws:
            raise ValidationError("these measurements hold one draw: there are no draws to index")
        values = tuple(np.asarray(v[key]) for v in self.values)
        pairs = zip(values, self.values, strict=True)
        if any(v.ndim < 2 or v.shape[-2:] != w.shape[-2:] for v, w in pairs):
            raise ValidationError(f"index the draw axes only; got {key!r}")
        return TableMeasurements(
            self.table, self.workload, values, self.secure, self.bounds, self.budget_scale
        )

    def __repr__(self) -> str:
        geo = self.table.geography
        draws = "one draw" if not self.draws else f"draws {self.draws}"
        path = "secure" if self.secure else "study"
        return (
            f"<TableMeasurements: {len(self.values)} measurements on {geo.n:,} geounits, "
            f"{draws}, {path} path, {self.budget}>"
        )

    def to_frame(self, *, study: bool = False) -> pd.DataFrame:
        """Long form: geo_id, parent, level, query, group (its category codes), noisy_count.

        Warns :class:`~postdp.errors.PrivacyLeakWarning` for study-path draws unless
        ``study`` is set (such a table is not a private release).
        """
        if not self.secure and not study:
            warnings.warn(
                "these answers were drawn on the study path (numpy): not a private release",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        geo = self.table.geography
        frames = []
        for m, values in zip(self.workload.measurements, self.values, strict=True):
            if values.ndim != 2:
                raise ValidationError("to_frame tabulates one draw; index the draws first (m[0])")
            nodes = geo.levels[m.level]
            parents = np.where(geo.parent[nodes] >= 0, geo.parent[nodes], 0)
            k = m.query.size
            frames.append(
                pd.DataFrame(
                    {
                        "geo_id": np.repeat(geo.ids[nodes], k),
                        "parent": np.repeat(
                            np.where(geo.parent[nodes] >= 0, geo.ids[parents], ""), k
                        ),
                        "level": m.level,
                        "query": m.query.name,
                        "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                        "group": np.tile(
                            np.array(["+".join(g) for g in m.query.groups], dtype=object),
                            nodes.size,
                        ),
                        "noisy_count": values.reshape(-1),
                        "path": "secure" if self.secure else "study",
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)


def measure(
    table: Table,
    workload: Workload,
    *,
    secure: bool = True,
    rng: RNGLike = None,
    size: int | None = None,
    bounds: Sequence[CountBounds] = (),
    budget_scale: ArrayLike | None = None,
    budget_checked: bool = False,
    ledger: Ledger | None = None,
    sampler: str | None = None,
) -> TableMeasurements:
    """Answer every query of ``workload`` on ``table``, adding each measurement's noise.

    Parameters
    ----------
    table : Table
    workload : Workload
    secure : bool, default True
        True: OpenDP's release path (``rng`` and ``size`` must be None). False: the study
        path on numpy's generator, reproducible from ``rng``.
    rng : int, numpy.random.Generator, SeedSequence or None
    size : int, optional
        Study path only: this many independent draws (a leading axis).
    bounds : sequence of CountBounds, optional
        Structural bounds carried with the answers for post-processing to hold (checked
        against the table's schema before anything is drawn).
    budget_scale : array_like, shape (geography.n,), optional
        Per geounit (id order), a multiple of its level's budget (zero-concentrated
        mechanisms only): its noisy answers are drawn with that budget, none where it is 0
        (NaN answers); no leaf's path may spend more than the levels' sum
        (:func:`postdp.tables.single_child_bypass` gives the production spine's).
    budget_checked : bool, default False
        The factors were checked against the whole design by the caller, and ``table`` is
        a piece of it measured apart (a nation's states, one state's subtree): budget moves
        across the cut, so a path of the piece alone may spend more than its own levels';
        only their form is checked here.
    ledger : Ledger, optional
        Secure path only: record the draw in this :class:`~postdp.privacy.Ledger` (the
        table's content digest, every measurement's mechanism and cost, the workload's
        budget, a digest of the answers; no count), refused with
        :class:`~postdp.errors.BudgetCapError` before anything is drawn if it would pass
        the ledger's cap. The record is a draw not yet published; :func:`postdp.nmf.write`
        with the same ledger records its publication, counted once with it.
    sampler : {"postdp", "opendp"}, optional
        Secure path only: postdp's exact integer sampler on the operating system's CSPRNG
        (:mod:`postdp.mechanisms.exact`; integer mechanisms only, with the workload's exact
        shares where it has them) or OpenDP's. Default: postdp's for integer noise,
        OpenDP's for real-valued noise. The ledger record names the samplers used.

    Returns
    -------
    TableMeasurements

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> from postdp.tables import Measurement, Query, Table, Workload
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> w = Workload([Measurement(1, Query.detailed(cat), Geometric(epsilon=1.0))])
    >>> measure(Table(geo, cat, [[1, 2], [3, 4]]), w, secure=False, rng=0, size=5).values[0].shape
    (5, 2, 2)

    Notes
    -----
    Every query and level is checked before any noise is drawn. Public measurements
    (mechanism None) are the exact answers. See :mod:`postdp.tables.workload` for the
    privacy accounting.
    """
    if not isinstance(table, Table):
        raise TypeError(f"`table` must be a Table; got {type(table).__name__}")
    if not isinstance(workload, Workload):
        raise TypeError(f"`workload` must be a Workload; got {type(workload).__name__}")
    if secure and (rng is not None or size is not None):
        raise ValidationError(
            "`rng` and `size` are for the study path; pass secure=False for reproducible draws"
        )
    from postdp.mechanisms.release import exact_parameter, pick_samplers

    mechanisms = [m.mechanism for m in workload.measurements]
    choices, named = pick_samplers(mechanisms if secure else [], sampler)
    exact = _exact_shares(workload) if secure else []
    for mech, pick, r in zip(mechanisms, choices, exact, strict=False):
        if pick == "postdp":
            exact_parameter(mech, r)  # checked before any draw
    geo, cat = table.geography, table.categories
    check_bounds(bounds, workload, geounits=geo.n)
    scale = check_budget_scale(budget_scale, geo, workload, spend=not budget_checked)
    if scale is not None and budget_checked:  # else checked with the paths
        level_rho(workload, geo.n_levels)  # zero-concentrated mechanisms only
    detailed = None if table.is_sparse else table.detailed()
    codes = leaf_codes(cat)
    of_schema: dict[int, bool] = {}  # per schema: are its cells the table's?
    levels: dict[int, Any] = {}  # a sparse table's histograms per level, made once
    answers = []
    for m in workload.measurements:
        if not 0 <= m.level < geo.n_levels:
            raise ValidationError(
                f"query {m.query.name!r}: level {m.level} is not a level of the geography "
                f"(0 to {geo.n_levels - 1})"
            )
        if detailed is not None:
            rows = detailed[geo.levels[m.level]]
        elif m.level in levels:
            rows = levels[m.level]
        else:
            rows = levels[m.level] = table.level_detailed(m.level)
        marginal = m.query.marginal_of
        if marginal is not None and id(marginal.schema) not in of_schema:
            of_schema[id(marginal.schema)] = marginal.schema.cells == codes
        fits = marginal is not None and of_schema[id(marginal.schema)]
        truth = _answer(m.query, table, rows, fits)
        if m.mechanism is not None:
            m.mechanism._values(truth.reshape(-1))  # checked before any draw
        answers.append(truth)
    streams = None if secure else _rng.spawn(rng, len(answers))

    def draw() -> list[Any]:
        values = []
        for i, (m, truth) in enumerate(zip(workload.measurements, answers, strict=True)):
            if m.mechanism is None:
                out = truth.astype(np.float64)
                if size is not None:
                    out = np.broadcast_to(out, (size, *out.shape)).copy()
            else:
                own = None if scale is None else scale[geo.levels[m.level]]
                stream = None if streams is None else streams[i]
                how = (choices[i], exact[i]) if secure else ("", None)
                out = _noisy(m.mechanism, truth, own, stream, size, how)
            values.append(out)
        return values

    if ledger is None:
        values, entry = draw(), None
    else:
        values, entry = _recorded(table, workload, secure, draw, ledger, named)
    return TableMeasurements(table, workload, tuple(values), secure, tuple(bounds), scale, entry)


def _exact_shares(workload: Workload) -> list[Fraction | None]:
    """Each measurement's exact rho (as its mechanism is calibrated: half the share under
    bounded neighbours) where the workload has exact shares, else None."""
    shares = workload.exact_rho or (None,) * len(workload.measurements)
    half = workload.neighbours == "bounded"
    return [None if r is None else (r / 2 if half else r) for r in shares]


def _recorded(
    table: Table, workload: Workload, secure: bool, draw: Any, ledger: Ledger, samplers: str
) -> tuple[list[Any], str]:
    """``draw()`` recorded in ``ledger`` as a drawn, unpublished release of ``workload`` on
    ``table`` (refused before the draw over the ledger's cap); the record's id."""
    import hashlib

    from postdp.privacy import CONTENT_KEY, Ledger, array_content, new_reservation, table_content

    if not isinstance(ledger, Ledger):
        raise TypeError(f"`ledger` must be a Ledger or None; got {type(ledger).__name__}")
    if not secure:
        raise ValidationError(
            "`ledger` records releases: a study-path draw (secure=False) is not one"
        )
    content = table_content(table)
    record = {
        "input": "table",
        "input_sha256": content,
        CONTENT_KEY: content,
        **new_reservation(),
        "measurements": [
            {
                "level": m.level,
                "query": m.query.name,
                "mechanism": "public" if m.mechanism is None else m.mechanism.name,
                "epsilon": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().epsilon,
                "rho": 0.0 if m.mechanism is None else m.mechanism.privacy_cost().rho,
            }
            for m in workload.measurements
        ],
        "path": "secure",
        "sampler": samplers,
    }
    with ledger.recording(workload.budget, record) as entry:
        values = draw()
        digests = "".join(array_content(v) for v in values)
        entry["output_sha256"] = hashlib.sha256(digests.encode()).hexdigest()
    return values, str(entry["reservation"])


@dataclass(frozen=True, slots=True, eq=False)
class NoisyCounts:
    """Noisy counts of every node of a hierarchy and the privacy they spent.

    Attributes
    ----------
    hierarchy : Hierarchy
        The hierarchy released (it holds the true counts: never publish it).
    values : ndarray, shape (n,)
        Noisy counts in the order of ``hierarchy.ids``.
    mechanisms : tuple of NoiseMechanism
        The mechanism of each level, root first.
    budget : Budget
        Sequential composition of the levels' costs.
    secure : bool
        True when the noise came from OpenDP's release path, False for the study path.

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy, add_noise
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> release = add_noise(h, Geometric(epsilon=1.0), secure=False, rng=0)
    >>> release.budget
    Budget(epsilon=2.0, rho=0.0)
    """

    hierarchy: Hierarchy
    values: NumArray
    mechanisms: tuple[NoiseMechanism, ...]
    budget: Budget
    secure: bool

    def to_frame(self, *, include_truth: bool = False, study: bool = False) -> pd.DataFrame:
        """The release as a table: id, parent, depth, noisy count and the level's parameter.

        Parameters
        ----------
        include_truth : bool, default False
            Add the true counts in a ``true_count`` column: an audit table, not a release.
            Its ``path`` column then says ``secure+audit`` (or ``study+audit``) on every row,
            so a file of it is never mistaken for a release.
        study : bool, default False
            Acknowledge that study-path draws are being tabulated (no warning then).

        Warns
        -----
        PrivacyLeakWarning
            When the draws came from the study path (numpy) and ``study`` is not set: such
            a table must not be published. Its ``path`` column says ``study`` either way.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> from postdp import Geometric, Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> draw = add_noise(h, Geometric(epsilon=1.0), secure=False, rng=0)
        >>> list(draw.to_frame(study=True).columns)
        ['id', 'parent', 'depth', 'noisy_count', 'mechanism', 'epsilon', 'rho', 'path']
        """
        h = self.hierarchy
        frame = h.to_frame().drop(columns="count", errors="ignore")
        frame["noisy_count"] = self.values
        per_node = [self.mechanisms[d] for d in h.depth]
        frame["mechanism"] = [m.name for m in per_node]
        frame["epsilon"] = [m.privacy_cost().epsilon for m in per_node]
        frame["rho"] = [m.privacy_cost().rho for m in per_node]
        frame["path"] = "secure" if self.secure else "study"
        if not self.secure and not study:
            warnings.warn(
                "these counts were drawn on the study path (numpy): a table of them is not a "
                "private release; draw with secure=True to publish",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        if include_truth:
            if h.counts is None:
                raise ValidationError("`include_truth` needs a hierarchy with true counts")
            frame["true_count"] = h.counts
            frame["path"] = frame["path"] + "+audit"
        return frame


def add_noise(
    hierarchy: Hierarchy,
    mechanisms: NoiseMechanism | Sequence[NoiseMechanism],
    *,
    secure: bool = True,
    rng: RNGLike = None,
) -> NoisyCounts:
    """Add noise to every true count of ``hierarchy``, with one mechanism per level.

    Parameters
    ----------
    hierarchy : Hierarchy
        Must hold true counts.
    mechanisms : NoiseMechanism or sequence of NoiseMechanism
        One mechanism for every level, or one per level (root first).
    secure : bool, default True
        True: the release path (OpenDP's exact samplers seeded by the operating system);
        ``rng`` must then be None. False: the study path on numpy's generator, reproducible
        from ``rng`` but not safe for publishing.
    rng : int, numpy.random.Generator, SeedSequence or None
        Seed of the study path (only with ``secure=False``).

    Returns
    -------
    NoisyCounts

    Notes
    -----
    The nodes of one level are disjoint groups of people, so one level costs one
    application of its mechanism (parallel composition); the levels compose sequentially,
    so the budget is the sum of the levels' costs ([zhu2021],
    census experiments; [wang2021] §5).

    Examples
    --------
    >>> from postdp import Geometric, Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> out = add_noise(h, [Geometric(epsilon=0.5), Geometric(epsilon=1.0)], secure=False, rng=0)
    >>> out.values.shape, str(out.budget)
    ((3,), 'epsilon = 1.5 (pure DP)')
    """
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(hierarchy).__name__}")
    if hierarchy.counts is None:
        raise ValidationError("`hierarchy` has no true counts to add noise to")
    per_level = expand_mechanisms(mechanisms, count=hierarchy.n_levels)
    if secure and rng is not None:
        raise ValidationError(
            f"`rng` must be None on the secure release path; got {rng!r} "
            "(pass secure=False for a reproducible study-path draw)"
        )
    counts = hierarchy.counts
    if any(m.discrete for m in per_level):
        counts = _validation.integer_array("counts", counts)
    discrete = all(m.discrete for m in per_level)
    values = np.empty(hierarchy.n, dtype=np.int64 if discrete else np.float64)
    for mechanism, nodes in zip(per_level, hierarchy.levels, strict=True):
        mechanism._values(counts[nodes])  # every level checked before any noise is drawn
    streams = None if secure else _rng.spawn(rng, hierarchy.n_levels)
    for depth, (mechanism, nodes) in enumerate(zip(per_level, hierarchy.levels, strict=True)):
        if streams is None:
            values[nodes] = mechanism.release(counts[nodes])
        else:
            values[nodes] = mechanism.sample(counts[nodes], rng=streams[depth])
    budget = Budget.compose(m.privacy_cost() for m in per_level)
    return NoisyCounts(hierarchy, values, per_level, budget, secure)


def _noisy(
    mechanism: Any,
    truth: IntArray,
    own: FloatArray | None,
    stream: Any,
    size: Any,
    how: tuple[str | None, Fraction | None] = ("opendp", None),
) -> Any:
    """Noisy answers (secure when ``stream`` is None, with the sampler and exact rho in
    ``how``), each geounit's with its budget factor in ``own`` (NaN where it is 0), one
    factor's geounits at a time."""
    if own is None or (own == 1.0).all():
        return _draw(mechanism, truth, stream, size, how)
    lead = () if size is None else tuple(np.atleast_1d(size).tolist())
    out = np.full((*lead, *truth.shape), np.nan)
    sampler, exact = how
    for factor in np.unique(own[own > 0]):
        rows = np.flatnonzero(own == factor)
        mech = mechanism if factor == 1.0 else replace(mechanism, rho=mechanism.rho * factor)
        scaled = None if exact is None else exact * Fraction(float(factor))
        out[..., rows, :] = _draw(mech, truth[rows], stream, size, (sampler, scaled))
    return out


def _draw(
    mechanism: Any,
    truth: IntArray,
    stream: Any,
    size: Any,
    how: tuple[str | None, Fraction | None],
) -> FloatArray:
    if stream is None:
        sampler, exact = how
        if sampler == "postdp":
            from postdp.mechanisms.release import exact_release

            noisy = exact_release(mechanism, truth.reshape(-1), exact=exact)
        else:
            noisy = mechanism.release(truth.reshape(-1))
        return np.asarray(noisy, dtype=np.float64).reshape(truth.shape)
    return _sample(mechanism, truth, stream, size)


def _sample(mechanism: Any, truth: IntArray, stream: Any, size: Any) -> FloatArray:
    """Study-path noisy answers; a large measurement is drawn in row chunks (one stream, in
    order) so the sampler's temporaries stay near _CHUNK values, not the measurement's."""
    lead = () if size is None else tuple(np.atleast_1d(size).tolist())
    draws = math.prod(lead)
    out = np.empty((draws, *truth.shape))
    step = max(1, _CHUNK // max(1, truth.shape[-1] * draws))
    if truth.size * draws <= _CHUNK:
        step = max(1, truth.shape[0])  # one call: the draws of mechanism.sample(truth)
    for r0 in range(0, truth.shape[0], step):  # the noise added straight into ``out``
        mechanism._sample_into(truth[r0 : r0 + step], stream, out[:, r0 : r0 + step])
    return out.reshape(*lead, *truth.shape)


def _answer(query: Query, table: Table, detailed: Any, of_schema: bool) -> IntArray:
    """A query's exact answers for rows of detailed histograms: a marginal of the table's
    schema (``of_schema``) attribute by attribute or from each cell's count index (never its
    c-column matrix), any other query through its 0/1 matrix."""
    marginal = query.marginal_of
    cat = table.categories
    if sparse.issparse(detailed):  # nonzero cells only: a sparse 0/1 query matrix
        S: Any
        if of_schema:  # from the count each cell falls in, never a c x c matrix
            assert marginal is not None
            S = marginal.count_matrix()
        else:
            S = sparse.csr_array(query.matrix(cat).astype(np.int64))
        out: IntArray = np.asarray((detailed @ S.T).toarray(), dtype=np.int64)
        return out
    if of_schema:
        assert marginal is not None
        return np.rint(marginal.apply(detailed.astype(np.float64))).astype(np.int64)
    A = query.matrix(cat).astype(np.int64)
    out = detailed @ A.T
    return out

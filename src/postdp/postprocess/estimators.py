"""The registry of post-processing estimators: one record per method, the only place its
name is spelled.

Every caller that takes a method by name -- :func:`postdp.project` (``method=``), a
hierarchy's chain (:func:`~postdp.postprocess.parse_steps`, :class:`ReleaseDesign`), a
table design (a table :class:`~postdp.analysis.ReleaseDesign`), :func:`project_by_subtree`,
:func:`postdp.nmf.postprocess`, ``postdp release --postprocess`` and ``postdp postprocess
--method`` -- looks the name up here and decides by the record's properties (integral,
nonnegative, carries variances, ...), never by the name. Help texts, choice lists and
error messages are generated from :func:`estimators`.

One record is not a chain step but a release rule of its own (:attr:`Estimator.alone`):
``bayes``, [wang2021]'s Bayesian release over the whole hierarchy. This layer lists it and
refuses it inside a chain; the layers above run it
(:func:`postdp.bayes.bayes_release_hierarchy`, ``postdp release --postprocess bayes``).

The names, and what two names that once overlapped are:

- ``project`` is (P), least squares onto the constraints over every measured count. On a
  table's measurements it is the best linear unbiased estimate (the BLUE); ``blue`` was a
  second name for the same estimate and is gone.
- ``project-nonneg`` is (P+), the same with every count >= 0. ``exact`` (the former
  ``method=`` of :func:`postdp.project`) was not an estimator but the choice of solving
  (P) or (P+) over the whole tree at once: ``project(..., nonneg=False)`` is ``project``,
  ``project(...)`` is ``project-nonneg``.

Adding an estimator
-------------------
Append one :class:`Estimator` to ``_REGISTRY`` below with its properties and, for a table
estimator, its ``prepare`` (and ``check``) hooks as ``"module:function"`` paths (imported
when first used, so this module imports nothing heavy); then add its tests (the registry
tests in ``tests/postprocess/test_estimators.py`` run every record on a small table or
hierarchy and check its declared properties, so a new record is covered there at once).
No caller needs editing: choice lists, help texts and errors come from the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from postdp.errors import ValidationError

if TYPE_CHECKING:
    from postdp._typing import ArrayLike, FloatArray
    from postdp.tables import Table, TableMeasurements, Workload

__all__ = [
    "MODELS",
    "Estimator",
    "TableMethod",
    "estimator",
    "estimators",
    "method_help",
    "parse_table_method",
    "resolve_projection",
]

#: The models an estimator may run on: a hierarchy of counts, or a table's measurements.
MODELS = ("hierarchy", "table")


@dataclass(frozen=True, slots=True)
class Estimator:
    """One post-processing method: its name, what it needs and what it gives.

    Parameters
    ----------
    name : str
        The method's one spelling (in ``method=``, chains, ``--method``, ``--postprocess``).
    summary : str
        One line for help texts.
    models : tuple of str
        Where it runs: ``"hierarchy"`` (a hierarchy's counts, in a chain) and/or
        ``"table"`` (a table's measurements).
    integral : bool
        Its output is whole numbers.
    nonnegative : bool
        Its output is >= 0 (with its default options).
    random : bool
        It draws randomness (takes ``rng``).
    consistent : bool
        Its output is consistent (every parent the sum of its children) whatever its input.
    streams : bool
        :func:`~postdp.postprocess.project_by_subtree` solves it one subtree at a time.
    variances : bool
        The variances of its estimates are known (standard deviations and margins of
        error are written beside it).
    per_geounit : bool
        Weighs each geounit by its own budget (runs with ``budget_scale``).
    level_by_level : bool
        Fixes each level before the next (top-down), not the whole tree at once.
    tasks : bool
        :func:`postdp.nmf.postprocess` solves it as independent subtree tasks (a Dask
        scheduler, states cut at ``cut_blocks``).
    elementwise : bool
        Acts on each value alone (no hierarchy needed).
    finisher : bool
        A step that follows another in a chain and ends it (e.g. ``project-nonneg,round``
        on a table).
    alone : bool
        A release rule of its own over the whole hierarchy, not a step: it runs alone,
        never in a chain with other steps, and needs geometric noise (integer noisy counts
        in). The chain of :mod:`postdp.postprocess` refuses it; the layers above map the
        record to their implementation (``bayes``:
        :func:`postdp.bayes.bayes_release_hierarchy`, ``postdp release --postprocess``).
        Never a :attr:`solver`.
    options : tuple of str
        The options a chain step takes (``name:key=value``).
    required : tuple of str
        The options it cannot do without.
    wide : bool
        Runs on tables of more detailed cells than the dense solvers take (more than
        20,000: the DHC persons design's 1,227,744), never forming a cells x cells matrix
        (``project``, in the marginal basis; ``topdown-2020``, its DHC passes, given the
        PL94 histograms to hold). :meth:`check_design` refuses the others on
        such a table before anything is drawn or solved.
    holds : bool
        Takes the PL94 persons histograms the DHC persons design holds exactly at every
        geounit (``held``: each geounit's 2,016 counts, e.g. a PL94 release of the same
        persons), which :meth:`table_solver` passes on (``topdown-2020``,
        ``blue-restore-2020``: :func:`~postdp.postprocess.top_down_2020` and
        :func:`~postdp.postprocess.restore_dhc`).
    check : str or None
        ``"module:function"`` of its design checks, ``check(table, workload)``, run before
        any draw or solve.
    prepare : str or None
        ``"module:function"`` building its table solver,
        ``prepare(table, workload, budget_scale)`` returning a callable of measurements
        that gives the detailed cells of every geounit (with ``held=`` too where it
        :attr:`holds`).

    Examples
    --------
    >>> e = estimator("topdown-2020")
    >>> e.integral, e.nonnegative, e.models
    (True, True, ('table',))
    """

    name: str
    summary: str
    models: tuple[str, ...]
    _: KW_ONLY
    integral: bool = False
    nonnegative: bool = False
    random: bool = False
    consistent: bool = False
    streams: bool = False
    variances: bool = False
    per_geounit: bool = False
    level_by_level: bool = False
    tasks: bool = False
    elementwise: bool = False
    finisher: bool = False
    alone: bool = False
    options: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    wide: bool = False
    holds: bool = False
    check: str | None = None
    prepare: str | None = None

    @property
    def solver(self) -> bool:
        """Whether it turns noisy measurements into a consistent estimate (a projection)."""
        return self.consistent and not self.elementwise and not self.alone

    def check_design(self, table: Table, workload: Workload) -> None:
        """Run the estimator's own checks of a table design (none for most).

        Parameters
        ----------
        table : Table
        workload : Workload

        Returns
        -------
        None

        Raises
        ------
        ValidationError
            Where it cannot run on this design (e.g. a table of more detailed cells than
            it takes, see :attr:`wide`).
        """
        from postdp.postprocess.gls import _DENSE_CELLS

        c = table.categories.leaves.size
        if c > _DENSE_CELLS and not self.wide:
            takes = [e.name for e in _REGISTRY if e.wide and e.solver]
            raise ValidationError(
                f"{self.name} is not built for tables of more than {_DENSE_CELLS:,} detailed "
                f"cells (this one has {c:,}); {', '.join(takes)} are (on the DHC persons "
                "design the last two given the PL94 histograms to hold: "
                "postdp.project(..., held=), `postdp postprocess --held`)"
            )
        if self.check is not None:
            _resolve(self.check)(table, workload)

    def table_solver(
        self,
        table: Table,
        workload: Workload,
        *,
        budget_scale: ArrayLike | None = None,
        held: ArrayLike | None = None,
    ) -> Callable[[TableMeasurements], FloatArray]:
        """Its solver prepared for a table design.

        Parameters
        ----------
        table : Table
        workload : Workload
        budget_scale : array_like, optional
            Each geounit's multiple of its level's budget (only for ``per_geounit``).
        held : array_like of int, shape (geography.n, 2016), optional
            The DHC persons design's PL94 histograms to hold (only where it :attr:`holds`).

        Returns
        -------
        callable
            Measurements -> detailed cells of every geounit, shape
            (..., geography.n, n_detailed).

        Raises
        ------
        ValidationError
            When it does not run on tables.
        """
        if self.prepare is None:
            raise ValidationError(f"{self.name!r} does not run on a table's measurements")
        prepare = _resolve(self.prepare)
        if held is None:
            solver: Callable[[TableMeasurements], FloatArray] = prepare(
                table, workload, budget_scale
            )
            return solver
        if not self.holds:
            takes = ", ".join(e.name for e in _REGISTRY if e.holds)
            raise ValidationError(
                f"`held`: {self.name} does not hold the DHC's PL94 histograms; {takes} do"
            )
        solver = prepare(table, workload, budget_scale, held=held)
        return solver


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


# -- table solvers (imported when first used) ----------------------------------------------
def _project(table: Table, workload: Workload, scale: FloatArray | None) -> Any:
    from postdp.postprocess.gls import TableProjector

    return TableProjector(table, workload, budget_scale=scale)


def _project_nonneg(table: Table, workload: Workload, scale: ArrayLike | None) -> Any:
    from postdp.postprocess.nonneg import TableNonnegProjector

    return TableNonnegProjector(table, workload)


def _topdown(table: Table, workload: Workload, scale: ArrayLike | None) -> Any:
    from postdp.postprocess.topdown import top_down_cells

    return top_down_cells


def _blue_restore(table: Table, workload: Workload, scale: ArrayLike | None) -> Any:
    from postdp.postprocess.restore import blue_restore

    return blue_restore


def _blue_restore_2020(
    table: Table, workload: Workload, scale: ArrayLike | None, held: ArrayLike | None = None
) -> Any:
    import numpy as np

    from postdp.postprocess.restore import blue_restore

    return lambda m: np.asarray(blue_restore(m, integral=True, held=held), dtype=np.float64)


def _topdown_2020(
    table: Table, workload: Workload, scale: ArrayLike | None, held: ArrayLike | None = None
) -> Any:
    import numpy as np

    from postdp.postprocess.topdown2020 import top_down_2020

    return lambda m: top_down_2020(m, held=held).astype(np.float64)


_HERE = __name__
_BOTH = MODELS
# -- the registry: one record per method, each name spelled here once --------------------

PROJECT = Estimator(
    "project",
    "(P): least squares over every measured count, parent = sum of children (on a "
    "table, the best linear unbiased estimate: the BLUE)",
    _BOTH,
    consistent=True,
    streams=True,
    variances=True,
    per_geounit=True,
    wide=True,
    prepare=f"{_HERE}:_project",
)

PROJECT_NONNEG = Estimator(
    "project-nonneg",
    "(P+): the same least squares with every count >= 0",
    _BOTH,
    nonnegative=True,
    consistent=True,
    prepare=f"{_HERE}:_project_nonneg",
)

TOPDOWN = Estimator(
    "topdown",
    "top-down (census TopDown): fix the root, then project each family onto its "
    "parent level by level, nonnegative",
    _BOTH,
    nonnegative=True,
    consistent=True,
    streams=True,
    level_by_level=True,
    check="postdp.postprocess.topdown:check_top_down",
    prepare=f"{_HERE}:_topdown",
)

BLUE_RESTORE = Estimator(
    "blue-restore",
    "the BLUE made nonnegative family by family, going down (totals first, as the 2020 "
    "TopDown ordered its passes)",
    ("table",),
    nonnegative=True,
    consistent=True,
    streams=True,
    per_geounit=True,
    level_by_level=True,
    check="postdp.postprocess.restore:check_blue_restore",
    prepare=f"{_HERE}:_blue_restore",
)

TOPDOWN_2020 = Estimator(
    "topdown-2020",
    "the Census Bureau's 2020 production TopDown, integral",
    ("table",),
    integral=True,
    nonnegative=True,
    consistent=True,
    per_geounit=True,
    level_by_level=True,
    tasks=True,
    wide=True,  # the DHC's, given the PL94 histograms to hold (postdp postprocess --held)
    holds=True,
    check="postdp.postprocess.topdown2020:check_top_down_2020",
    prepare=f"{_HERE}:_topdown_2020",
)

BLUE_RESTORE_2020 = Estimator(
    "blue-restore-2020",
    "blue-restore with each family rounded by the 2020 rounder as it goes down, "
    "integral, the structural bounds held",
    ("table",),
    integral=True,
    nonnegative=True,
    consistent=True,
    streams=True,
    per_geounit=True,
    level_by_level=True,
    wide=True,  # the DHC's in its two outer passes, given the PL94 histograms (restore_dhc)
    holds=True,
    check="postdp.postprocess.restore:check_blue_restore",
    prepare=f"{_HERE}:_blue_restore_2020",
)

CLAMP = Estimator(
    "clamp",
    "max(lower, x) value by value (clamp:lower=<L>, 0 by default)",
    ("hierarchy",),
    nonnegative=True,
    elementwise=True,
    options=("lower",),
)

RAMP_OPTIMAL = Estimator(
    "ramp-optimal",
    "max(x - a*, 0) with the exact optimal shift a* of each level's noise "
    "(b W(1/2) for Laplace(b), with Laplace or geometric noise)",
    ("hierarchy",),
    nonnegative=True,
    elementwise=True,
)

MODIFIED = Estimator(
    "modified",
    "[fioretto2021]'s modified post-processing with temperature T (modified:T=<t>)",
    ("hierarchy",),
    nonnegative=True,
    elementwise=True,
    options=("T",),
    required=("T",),
)

ROUND = Estimator(
    "round",
    "unbiased integers: consistent rounding when its input is consistent, value by value otherwise",
    _BOTH,
    integral=True,
    random=True,
    elementwise=True,
    finisher=True,
    wide=True,
)

BAYES = Estimator(
    "bayes",
    "[wang2021]'s Bayesian release rule over the whole hierarchy (posterior modes, top "
    "down), geometric noise, run alone and not as a step of a chain",
    ("hierarchy",),
    integral=True,
    nonnegative=True,
    consistent=True,
    alone=True,
)

_REGISTRY: tuple[Estimator, ...] = (
    PROJECT,
    PROJECT_NONNEG,
    TOPDOWN,
    BLUE_RESTORE,
    TOPDOWN_2020,
    BLUE_RESTORE_2020,
    CLAMP,
    RAMP_OPTIMAL,
    MODIFIED,
    ROUND,
    BAYES,
)
_BY_NAME = {e.name: e for e in _REGISTRY}
assert len(_BY_NAME) == len(_REGISTRY), "two estimators share a name"


def estimators(model: str | None = None) -> tuple[Estimator, ...]:
    """Every registered post-processing estimator, in registry order.

    Parameters
    ----------
    model : {"hierarchy", "table"}, optional
        Only those that run on this model.

    Returns
    -------
    tuple of Estimator

    Examples
    --------
    >>> [e.name for e in estimators("table") if e.integral]
    ['topdown-2020', 'blue-restore-2020', 'round']
    """
    if model is not None and model not in MODELS:
        raise ValidationError(f"`model` must be one of {', '.join(MODELS)}; got {model!r}")
    return tuple(e for e in _REGISTRY if model is None or model in e.models)


def estimator(name: str) -> Estimator:
    """The registered estimator called ``name``.

    Parameters
    ----------
    name : str

    Returns
    -------
    Estimator

    Raises
    ------
    ValidationError
        For an unknown name, one line listing every known one.

    Examples
    --------
    >>> estimator("project-nonneg").nonnegative
    True
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        known = ", ".join(_BY_NAME)
        raise ValidationError(f"unknown post-processing method {name!r}; known: {known}") from None


def resolve_projection(
    method: str | None, nonneg: bool | None, model: str
) -> tuple[Estimator, bool]:
    """The projection ``postdp.project(method=, nonneg=)`` runs, and whether it holds v >= 0.

    Parameters
    ----------
    method : str or None
        A registered solver (:attr:`Estimator.solver`) of ``model``; None: the whole-tree
        least squares, (P+) or, with ``nonneg=False``, (P).
    nonneg : bool or None
        None: as the estimator is. Otherwise it must agree with the estimator, except that
        a hierarchy's level-by-level projection also runs without its bound
        (``nonneg=False``: each family's closed-form (P_S)).
    model : {"hierarchy", "table"}

    Returns
    -------
    estimator : Estimator
    nonneg : bool

    Raises
    ------
    ValidationError
        For an unknown method, one that does not project ``model``, or a ``nonneg`` that
        contradicts it.

    Examples
    --------
    >>> e, bound = resolve_projection(None, False, "hierarchy")
    >>> e.name, bound
    ('project', False)
    """
    solvers = [e for e in estimators(model) if e.solver]
    if method is None:
        want = nonneg is not False
        est = next(e for e in solvers if not e.level_by_level and e.nonnegative == want)
        return est, want
    est = estimator(method)
    if est not in solvers:
        raise ValidationError(
            f"`method` {method!r} does not project a {model}; choose from "
            f"{', '.join(e.name for e in solvers)}"
        )
    if nonneg is None or nonneg == est.nonnegative:
        return est, est.nonnegative
    if model == "hierarchy" and est.level_by_level and not nonneg:
        return est, False
    raise ValidationError(
        f"`method` {method!r} is {'nonnegative' if est.nonnegative else 'unbounded'}; "
        f"got nonneg={nonneg} (leave `nonneg` out)"
    )


def method_help(model: str | None = None, *, alone: bool | None = None) -> str:
    """One line per estimator, ``name: summary``, joined by ``"; "`` (for help texts).

    Parameters
    ----------
    model : {"hierarchy", "table"}, optional
    alone : bool, optional
        Only the release rules that run alone (True) or only the others, the chain steps
        (False); None: every one.

    Returns
    -------
    str

    Examples
    --------
    >>> method_help("table").split("; ")[0].split(":")[0]
    'project'
    >>> method_help("hierarchy", alone=True).split(":")[0]
    'bayes'
    """
    return "; ".join(
        f"{e.name}: {e.summary}" for e in estimators(model) if alone is None or e.alone == alone
    )


@dataclass(frozen=True, slots=True)
class TableMethod:
    """A table post-processing as written: one solver step, optionally followed by a
    finisher (``round``).

    Parameters
    ----------
    step : Estimator or None
        None for ``"none"`` (the measured counts only).
    finish : Estimator or None

    Examples
    --------
    >>> m = parse_table_method("topdown,round")
    >>> m.step.name, m.rounded, m.integral
    ('topdown', True, True)
    """

    step: Estimator | None
    _: KW_ONLY
    finish: Estimator | None = None

    @property
    def rounded(self) -> bool:
        """Whether a finisher (rounding) follows the step."""
        return self.finish is not None

    @property
    def integral(self) -> bool:
        """Whether the output is whole numbers."""
        return any(e is not None and e.integral for e in (self.step, self.finish))

    @property
    def random(self) -> bool:
        """Whether it draws randomness."""
        return any(e is not None and e.random for e in (self.step, self.finish))

    def __str__(self) -> str:
        names = [e.name for e in (self.step, self.finish) if e is not None]
        return ",".join(names) or "none"


def parse_table_method(text: str) -> TableMethod:
    """Parse a table post-processing: ``"none"``, or a table solver, optionally followed by
    ``",round"`` (not after an integral one).

    Parameters
    ----------
    text : str

    Returns
    -------
    TableMethod

    Raises
    ------
    ValidationError
        One line naming the table estimators, for anything else.

    Examples
    --------
    >>> str(parse_table_method("project-nonneg, round"))
    'project-nonneg,round'
    """
    parts = [s.strip() for s in str(text).split(",") if s.strip() and s.strip() != "none"]
    table = estimators("table")
    solvers = [e.name for e in table if not e.finisher]
    finishers = [e.name for e in table if e.finisher]
    found = [_BY_NAME.get(p) for p in parts]
    ok = all(e is not None and "table" in e.models for e in found) and len(found) <= 2
    step = found[0] if found and ok and not found[0].finisher else None  # type: ignore[union-attr]
    finish = found[-1] if len(found) == 2 and ok and found[-1].finisher else None  # type: ignore[union-attr]
    if not ok or (found and step is None) or (len(found) == 2 and finish is None):
        raise ValidationError(
            f"a table post-processing is one of {', '.join(solvers)}, optionally followed "
            f"by {' or '.join(finishers)} (not after an integral one), or none; got {text!r}"
        )
    if step is not None and step.integral and finish is not None:
        raise ValidationError(
            f"{step.name!r} is already integral; it takes no {finish.name!r} (got {text!r})"
        )
    return TableMethod(step, finish=finish)

"""Exact projections of noisy counts onto a hierarchy's constraints: (P), (P+) and (P_S).

Seed [zhu2021] ("Projection Operators") defines

- (P):   argmin ||v - x̃||₂ subject to A v = b,
- (P+):  the same with v >= 0,
- (P_S): argmin ||v - x̃||₂ subject to Σ v = b (one parent and its children),

and census TopDown applies the nonnegative (P_S) family by family, level by level
(:func:`postdp.postprocess.top_down`). All accept weights w (generalised least squares,
Σ w_i (v_i - x̃_i)², w_i = 1/Var(noise_i) when levels get different budgets) and a leading
batch axis of independent draws.
"""

from __future__ import annotations

import hashlib
import math
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from postdp import _validation
from postdp._typing import ArrayLike, FloatArray
from postdp.errors import DegenerateInputWarning, ValidationError
from postdp.hierarchy import (
    Hierarchy,
    PublicSpec,
    check_feasible,
    derived_public,
    resolve_public,
)
from postdp.mechanisms import NoiseMechanism, expand_mechanisms
from postdp.postprocess._solvers.one_cell import CountsSolver, counts_only
from postdp.postprocess._solvers.simplex import project_families
from postdp.postprocess.estimators import estimators, resolve_projection
from postdp.tables import TableMeasurements

__all__ = [
    "Projector",
    "inverse_variance_weights",
    "project",
    "project_sum",
    "top_down",
]


def _noisy(noisy: ArrayLike, n: int) -> tuple[FloatArray, tuple[int, ...]]:
    Y = _validation.real_array("noisy", noisy).astype(np.float64)
    if Y.ndim == 0 or Y.shape[-1] != n:
        raise ValidationError(
            f"`noisy` must have shape (..., {n}) (one value per node, nodes last); "
            f"got shape {Y.shape}"
        )
    return Y.reshape(-1, n), Y.shape


def _weights(weights: ArrayLike | None, n: int) -> FloatArray:
    if weights is None:
        return np.ones(n)
    w = _validation.real_array("weights", weights).astype(np.float64)
    if w.shape != (n,):
        raise ValidationError(f"`weights` must have shape ({n},), one per node; got {w.shape}")
    bad = w <= 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"`weights` must be positive; got {w[i].item()!r} at index {i}")
    return w


def inverse_variance_weights(
    hierarchy: Hierarchy, mechanisms: NoiseMechanism | Sequence[NoiseMechanism]
) -> FloatArray:
    """Per-node weights 1/Var(noise) for a release with one mechanism per level.

    Parameters
    ----------
    hierarchy : Hierarchy
    mechanisms : NoiseMechanism or sequence of NoiseMechanism
        One for every level, or one per level (root first).

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> from postdp import Hierarchy, Laplace
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> inverse_variance_weights(h, [Laplace(1.0), Laplace(0.5)]).tolist()
    [0.5, 0.125, 0.125]
    """
    per_level = expand_mechanisms(mechanisms, count=hierarchy.n_levels)
    variances = np.array([m.variance() for m in per_level])
    return 1.0 / variances[hierarchy.depth]


def project(
    noisy: ArrayLike | TableMeasurements,
    hierarchy: Hierarchy | None = None,
    *,
    nonneg: bool | None = None,
    public: PublicSpec = None,
    method: str | None = None,
    weights: ArrayLike | None = None,
    held: ArrayLike | None = None,
) -> FloatArray:
    """Project noisy counts onto the hierarchy's constraints, every draw at once.

    Parameters
    ----------
    noisy : array_like, shape (..., n), or TableMeasurements
        Noisy values of every node (in ``hierarchy.ids`` order); leading axes are draws.
        Or a table's measurements (:func:`postdp.tables.measure`, category trees and
        schemas alike; a hierarchy of counts is the one-cell case): the result is then the
        detailed cells of every geounit, shape (..., geography.n, n_detailed), rows in the
        order of ``geography.ids`` (:func:`postdp.tables.expand` adds every category node);
        the measurements carry their geography, invariants and weights.
    hierarchy : Hierarchy
        Required for counts; left out for table measurements.
    nonneg : bool, optional
        Without ``method``: True or left out, (P+), also v >= 0; False, (P). With a
        ``method``, leave it out (or give the estimator's own; a hierarchy's ``topdown``
        also runs with ``nonneg=False``, each family's (P_S) without the bound).
    public : mapping, sequence of str, "root" or None
        Invariant nodes: ``{id: value}``, or ids (or ``"root"``) held at their true counts.
    method : str, optional
        A registered estimator that projects (:func:`postdp.postprocess.estimators`, those
        with :attr:`~postdp.postprocess.Estimator.solver`): ``"project"`` (P) and
        ``"project-nonneg"`` (P+) over the whole tree (the default, as ``nonneg`` says);
        ``"topdown"`` fixes the root, then projects each family onto its parent's value
        level by level (census TopDown; see :func:`postdp.postprocess.top_down`). For
        schema table measurements also ``"blue-restore"`` (the BLUE restored to
        nonnegative family by family, :func:`postdp.postprocess.blue_restore`),
        ``"topdown-2020"`` (the Census Bureau's 2020 production TopDown, integral,
        :func:`postdp.postprocess.top_down_2020`) and ``"blue-restore-2020"``.
    weights : array_like, shape (n,), optional
        Positive weights w of the objective Σ w_i (v_i - y_i)², e.g.
        :func:`inverse_variance_weights`; equal weights when omitted.
    held : array_like of int, shape (geography.n, 2016), optional
        Table measurements of the DHC persons design only: each geounit's PL94 persons
        histogram, held exactly by the methods that hold it (``"topdown-2020"``, and
        ``"blue-restore-2020"`` by :func:`postdp.postprocess.restore_dhc`), which need it
        there; refused for the others.

    Returns
    -------
    ndarray of float
        Of the shape of ``noisy`` (table measurements: (..., geography.n, n_detailed)).
        Consistent values (every parent equals the sum of its children, public nodes keep
        their values; nonnegative when ``nonneg``).

    Raises
    ------
    ValidationError
        For a shape mismatch, NaN or infinite values, bad weights, or an unknown
        ``method`` (one line naming the registered ones).
    InfeasibleConstraintsError
        When the public values admit no solution.

    Warns
    -----
    ConvergenceWarning
        When (P+) hands a draw from the fast block-pivoting method to the slower primal
        active-set method, which converges in finitely many steps; the answer is exact either
        way.

    Notes
    -----
    (P) is solved by a two-pass tree algorithm in O(n) per draw: bottom-up inverse-variance
    combination of each node with its children, then top-down redistribution (exact GLS; for
    equal weights Hay et al. 2010). It is unbiased for symmetric noise (seed
    [zhu2021], Thm 7).

    (P+) is solved over the leaf values z (internal nodes are sums of leaves, so z >= 0 is
    v >= 0) by block principal pivoting, a primal-dual active-set method: hold the active
    leaves at 0, solve the rest exactly with the two-pass algorithm, compute the bound
    multipliers of the active leaves from path sums, and swap every leaf that violates
    primal or dual feasibility (Judice and Pires 1994). Such block methods converge in a few
    rounds here but have no convergence proof for this problem, so a draw whose number of
    violations stops falling, or that would leave a public node without a free leaf, is
    finished by a primal active-set method (feasible iterates, one bound added or dropped per
    step; finite termination for strictly convex QPs, Nocedal and Wright 2006 §16.5).
    The result is exact up to rounding: internal nodes are recomputed as the sums of
    their children and leaves that are zero to within 1e-12 of the data's scale are set to 0.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy, project
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [10, 4, 6])
    >>> project(np.array([12.0, 3.0, 6.0]), h, nonneg=False).round(6).tolist()
    [11.0, 4.0, 7.0]
    >>> project(np.array([3.0, -5.0, 6.0]), h, public={"T": 3.0}).round(6).tolist()
    [3.0, 0.0, 3.0]
    """
    if isinstance(noisy, TableMeasurements):
        from postdp.postprocess._project_tables import project_measurements

        return project_measurements(noisy, hierarchy, nonneg, public, method, weights, held)
    if held is not None:
        raise ValidationError("`held` is for table measurements of the DHC persons design")
    if hierarchy is None:
        raise ValidationError("`hierarchy` is required to project counts")
    return _prepared(hierarchy, nonneg, public, method, weights)(noisy)


#: Projectors prepared for the hierarchies ``project`` has seen (a few per hierarchy), so a
#: repeated one-shot call costs what a prepared :class:`Projector` does.
_CACHE: weakref.WeakKeyDictionary[Hierarchy, OrderedDict[tuple[Any, ...], Projector]] = (
    weakref.WeakKeyDictionary()
)
_CACHE_SIZE = 8


def _prepared(
    hierarchy: Hierarchy,
    nonneg: bool | None,
    public: PublicSpec,
    method: str | None,
    weights: ArrayLike | None,
) -> Projector:
    key = (nonneg, method, _public_key(public), _weights_key(weights))
    if not isinstance(hierarchy, Hierarchy) or key[2] is None:
        return Projector(hierarchy, nonneg=nonneg, public=public, method=method, weights=weights)
    seen = _CACHE.setdefault(hierarchy, OrderedDict())
    if key in seen:
        seen.move_to_end(key)
        return seen[key]
    projector = Projector(hierarchy, nonneg=nonneg, public=public, method=method, weights=weights)
    seen[key] = projector
    if len(seen) > _CACHE_SIZE:
        seen.popitem(last=False)
    return projector


def _public_key(public: PublicSpec) -> Any:
    """A hashable form of a public-node specification (None when it has none)."""
    try:
        if public is None or isinstance(public, str):
            return ("spec", public)
        if isinstance(public, Mapping):
            return ("map", tuple(sorted((str(k), float(v)) for k, v in public.items())))
        return ("ids", tuple(str(p) for p in public))
    except (TypeError, ValueError):
        return None  # let the Projector report the bad value


def _weights_key(weights: ArrayLike | None) -> Any:
    if weights is None:
        return None
    arr = np.ascontiguousarray(np.asarray(weights, dtype=np.float64))
    return (arr.shape, hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest())


class Projector:
    """A projection prepared once for a hierarchy, its constraints and weights.

    Everything that does not depend on the noisy values (the breadth-first layout, the
    public nodes and their feasibility, the two-pass coefficients) is computed here, so
    calling the projector costs only the work proportional to the data. :func:`project` is
    ``Projector(...)(noisy)``; build one yourself to project many batches.

    Parameters
    ----------
    hierarchy : Hierarchy
    nonneg : bool, optional
    public : mapping, sequence of str, "root" or None
    method : str, optional
        A projection of a hierarchy (:func:`postdp.postprocess.estimators`).
    weights : array_like, shape (n,), optional
        See :func:`project`.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> proj = Projector(h, nonneg=True, public={"T": 3.0})
    >>> proj(np.array([[3.0, -5.0, 6.0], [3.0, 1.0, 1.0]])).tolist()
    [[3.0, 0.0, 3.0], [3.0, 1.5, 1.5]]
    """

    __slots__ = ("_solver", "hierarchy", "method", "nonneg", "public", "weights")

    def __init__(
        self,
        hierarchy: Hierarchy,
        *,
        nonneg: bool | None = None,
        public: PublicSpec = None,
        method: str | None = None,
        weights: ArrayLike | None = None,
    ) -> None:
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"`hierarchy` must be a Hierarchy; got {type(hierarchy).__name__}")
        est, bound = resolve_projection(method, nonneg, "hierarchy")
        self.hierarchy = hierarchy
        self.nonneg = bound
        self.method = est.name
        self.weights = _weights(weights, hierarchy.n)
        self.public = resolve_public(hierarchy, public=public)
        check_feasible(hierarchy, public=self.public, nonneg=self.nonneg)
        fixed = int(self.public.mask.sum())
        if fixed and fixed + len(derived_public(hierarchy, public=public)) == hierarchy.n:
            warnings.warn(
                "every node is fixed by the public nodes: the projection returns their values "
                "whatever the noise",
                DegenerateInputWarning,
                stacklevel=2,
            )
        self._solver = CountsSolver.build(
            hierarchy, self.weights, self.public, nonneg=self.nonneg, levels=est.level_by_level
        )

    def __call__(self, noisy: ArrayLike) -> FloatArray:
        """Project ``noisy`` (shape (..., n)); returns the same shape.

        Parameters
        ----------
        noisy : array_like, shape (..., n)

        Returns
        -------
        ndarray of float

        Examples
        --------
        >>> from postdp import Hierarchy
        >>> h = Hierarchy.from_parents(["T", "a"], [None, "T"])
        >>> Projector(h, nonneg=False)([4.0, 2.0]).tolist()
        [3.0, 3.0]
        """
        Y, shape = _noisy(noisy, self.hierarchy.n)  # a private copy: overwritten below
        return self._solve(Y).reshape(shape)

    def _solve(self, Y: FloatArray) -> FloatArray:
        """Project the rows of ``Y`` (float64, shape (B, n), finite), overwriting ``Y``: for
        callers that own their batch (the Monte Carlo engine), no copy and no checks."""
        return self._solver.solve(Y)


# --------------------------------------------------------------------------------------------
# (P+): block principal pivoting with a primal active-set fallback
# --------------------------------------------------------------------------------------------
def project_sum(
    noisy: ArrayLike,
    total: ArrayLike,
    *,
    nonneg: bool = False,
    weights: ArrayLike | None = None,
) -> FloatArray:
    """(P_S): project each row onto {Σ v = total} (and v >= 0 when ``nonneg``).

    Parameters
    ----------
    noisy : array_like, shape (..., n)
        Leading axes are draws.
    total : array_like, broadcastable to ``noisy.shape[:-1]``
        The required sum (public, e.g. a state's published population).
    nonneg : bool, default False
        Also require v >= 0 (projection onto a scaled simplex).
    weights : array_like, shape (n,), optional
        Positive weights of Σ w_i (v_i - y_i)².

    Returns
    -------
    ndarray of float, same shape as ``noisy``

    Notes
    -----
    Without the bound the solution is closed form, v = y - (Σ y - b)·(1/w)/Σ(1/w); for equal
    weights v_i = y_i - (Σ y - b)/n, whose error for i.i.d. Laplace(λ) noise has variance
    2λ²(1 - 1/n) ([zhu2021], Thm 12). With the bound it is
    v = max(y - τ/w, 0) with τ found by Michelot's algorithm.

    Examples
    --------
    >>> import numpy as np
    >>> project_sum(np.array([4.0, 5.0, 3.0]), 9.0).tolist()
    [3.0, 4.0, 2.0]
    >>> project_sum(np.array([-2.0, 5.0, 3.0]), 6.0, nonneg=True).tolist()
    [0.0, 4.0, 2.0]
    """
    Y = _validation.real_array("noisy", noisy).astype(np.float64)
    if Y.ndim == 0:
        raise ValidationError("`noisy` must have at least one axis (the entities)")
    n = Y.shape[-1]
    w = _weights(weights, n)
    t = _validation.real_array("total", total).astype(np.float64)
    try:
        t = np.broadcast_to(t, Y.shape[:-1])
    except ValueError:
        raise ValidationError(
            f"`total` must broadcast to the draws' shape {Y.shape[:-1]}; got shape {t.shape}"
        ) from None
    inv = 1.0 / w
    if not nonneg:
        gap = Y.sum(axis=-1) - t
        closed: FloatArray = Y - gap[..., None] * inv / inv.sum()
        return closed
    if (t < 0).any():
        raise ValidationError(f"`total` must be nonnegative with `nonneg`; got {t.min().item()!r}")
    rows = math.prod(Y.shape[:-1])
    v = project_families(
        Y.reshape(rows, n),
        np.zeros(1, dtype=np.int64),
        np.array([n], dtype=np.int64),
        t.reshape(rows, 1),
        inv,
        np.ones(n, dtype=bool),
    )
    return v.reshape(Y.shape)


def top_down(
    noisy: ArrayLike | TableMeasurements,
    hierarchy: Hierarchy | None = None,
    *,
    nonneg: bool = True,
    public: PublicSpec = None,
    weights: ArrayLike | None = None,
    client: Any = None,
) -> FloatArray:
    """Post-process level by level: each family is projected onto its parent's final value.

    Parameters
    ----------
    noisy : array_like, shape (..., n), or TableMeasurements
        Noisy values of every node; leading axes are draws. Or a table's measurements:
        then each geographic family's detailed cells are solved jointly under their
        parent's (nonnegative weighted least squares on every measured query), and the
        result is the detailed cells of every geounit, shape (..., geography.n,
        n_detailed).
    hierarchy : Hierarchy
        Required for counts; left out for table measurements.
    nonneg : bool, default True
        Project each family onto {v >= 0, Σ v = parent} (TopDown); False drops v >= 0
        (closed-form (P_S) per family; counts only).
    public : mapping, sequence of str, "root" or None
        Invariant nodes (see :func:`postdp.project`); a public node keeps its value and its
        siblings share the rest of the parent's value.
    weights : array_like, shape (n,), optional
        Positive weights of Σ w (v - y)² within each family.
    client : dask.distributed.Client, optional
        Tables only: solve the state subtrees as Dask tasks (the same numbers).

    Returns
    -------
    ndarray of float
        Of the shape of ``noisy`` (table measurements: (..., geography.n, n_detailed)).

    Notes
    -----
    When public nodes lie below a node, that node cannot go below the sum of those public
    values (its floor), so the projection of a family is onto {v >= floor, Σ v = parent},
    i.e. a simplex projection of v - floor. Same as ``project(..., method="topdown")``.

    Examples
    --------
    >>> import numpy as np
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b", "c"], [None, "T", "T", "T"])
    >>> top_down(np.array([10.0, -3.0, 6.0, 8.0]), h).tolist()
    [10.0, 0.0, 4.0, 6.0]
    """
    if client is not None:
        if not isinstance(noisy, TableMeasurements):
            raise ValidationError("`client` is for table measurements")
        from postdp.postprocess.topdown import top_down_cells

        counts_only(hierarchy, public, weights)
        if not nonneg:
            raise ValidationError("table top-down is nonnegative; pass nonneg=True")
        return top_down_cells(noisy, client=client)
    return project(noisy, hierarchy, nonneg=nonneg, public=public, method=_LEVELS, weights=weights)


#: The hierarchy's level-by-level projection (census TopDown), as the registry names it.
_LEVELS = next(e.name for e in estimators("hierarchy") if e.solver and e.level_by_level)

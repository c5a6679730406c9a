"""The linear constraints of a hierarchy: A v = b, with optional public (invariant) nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from postdp._typing import ArrayLike, FloatArray, IntArray
from postdp.errors import InfeasibleConstraintsError, ValidationError
from postdp.hierarchy._tree import Hierarchy

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "PublicNodes",
    "PublicSpec",
    "check_feasible",
    "components",
    "constraint_matrix",
    "constraints",
    "resolve_public",
]

#: How public nodes may be given: {id: value}, a sequence of ids (held at their true counts),
#: the string "root", or None.
PublicSpec = Mapping[str, float] | Sequence[str] | str | None


@dataclass(frozen=True, slots=True, eq=False)
class PublicNodes:
    """Nodes whose values are fixed (public or invariant), resolved against a hierarchy.

    Attributes
    ----------
    mask : ndarray of bool, shape (n,)
        True at the public nodes.
    values : ndarray of float, shape (n,)
        Their values (0 elsewhere).
    determined : ndarray of bool, shape (n,)
        True where the value is fixed by the constraints alone: a public node, or a node all
        of whose children are determined.
    floor : ndarray of float, shape (n,)
        The least value each node can take when every count is nonnegative: the sum of its
        nearest public descendants (its own value if it is public).
    below : ndarray of float, shape (n,)
        The sum of the floors of each node's children (0 for leaves).

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> pub = resolve_public(h, public={"a": 2.0})
    >>> pub.mask.tolist(), pub.floor.tolist()
    ([False, True, False], [2.0, 2.0, 0.0])
    """

    mask: npt.NDArray[np.bool_]
    values: FloatArray
    determined: npt.NDArray[np.bool_]
    floor: FloatArray
    below: FloatArray


def public_ids(hierarchy: Hierarchy, *, public: PublicSpec) -> list[str]:
    """The ids a public-node specification names (not a mapping: for those, its keys).

    ``"root"`` (alone or in a list) names the root, unless a node is called "root".

    Parameters
    ----------
    hierarchy : Hierarchy
    public : sequence of str, str, "root" or None

    Returns
    -------
    list of str

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["US", "01", "02"], [None, "US", "US"])
    >>> public_ids(h, public="root"), public_ids(h, public=["root", "02"])
    (['US'], ['US', '02'])
    """
    if public is None:
        return []
    if isinstance(public, Mapping):
        return [str(k) for k in public]
    names = [public] if isinstance(public, str) else [str(p) for p in public]
    known = {str(i) for i in hierarchy.ids}
    root = str(hierarchy.ids[hierarchy.root])
    return [root if n == "root" and "root" not in known else n for n in names]


def public_values(
    hierarchy: Hierarchy, *, public: PublicSpec, values: ArrayLike
) -> dict[str, float] | None:
    """A public-node specification as {id: value}, the values of ids read from ``values``.

    Parameters
    ----------
    hierarchy : Hierarchy
    public : mapping, sequence of str, str, "root" or None
    values : array_like, shape (n,)
        The values the named ids take (e.g. the true counts).

    Returns
    -------
    dict of str to float, or None when ``public`` is None

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["US", "01"], [None, "US"])
    >>> public_values(h, public="root", values=[7, 7])
    {'US': 7.0}
    """
    if public is None:
        return None
    if isinstance(public, Mapping):
        return {str(k): float(v) for k, v in public.items()}
    ids = public_ids(hierarchy, public=public)
    x = np.asarray(values, dtype=np.float64)
    return {i: float(x[j]) for i, j in zip(ids, hierarchy.index(ids), strict=True)}


def derived_public(hierarchy: Hierarchy, *, public: PublicSpec) -> list[str]:
    """Ids that public nodes determine exactly through parent = sum of children.

    A node is determined when its parent is known and all its siblings are (so a public
    parent's only child is), or when all its children are known; repeated to a fixed point.
    Publishing the public nodes publishes these too.

    Parameters
    ----------
    hierarchy : Hierarchy
    public : mapping, sequence of str, str, "root" or None

    Returns
    -------
    list of str
        The determined ids that are not themselves public, in node order.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["US", "11", "12", "11001"], [None, "US", "US", "11"])
    >>> derived_public(h, public=["11"]), derived_public(h, public=["US", "11"])
    (['11001'], ['12', '11001'])
    """
    given = hierarchy.index(public_ids(hierarchy, public=public))
    known = np.zeros(hierarchy.n, dtype=bool)
    known[given] = True
    parent = hierarchy.parent
    child = np.flatnonzero(parent >= 0)
    n_kids = np.bincount(parent[child], minlength=hierarchy.n)
    while True:
        known_kids = np.bincount(parent[child], weights=known[child], minlength=hierarchy.n)
        lonely = known & (n_kids - known_kids == 1)  # a known parent with one unknown child
        new = child[lonely[parent[child]] & ~known[child]]
        full = np.flatnonzero((n_kids > 0) & (known_kids == n_kids) & ~known)
        if new.size == 0 and full.size == 0:
            break
        known[new] = True
        known[full] = True
    known[given] = False
    return [str(i) for i in hierarchy.ids[known]]


def resolve_public(hierarchy: Hierarchy, *, public: PublicSpec) -> PublicNodes:
    """Resolve a public-node specification against ``hierarchy``.

    Parameters
    ----------
    hierarchy : Hierarchy
    public : mapping, sequence of str, "root" or None
        ``{id: value}`` fixes those nodes at the given values; a sequence of ids (or
        ``"root"``) fixes them at their true counts, which the hierarchy must hold (the
        census treats the national and state totals this way).

    Returns
    -------
    PublicNodes

    Raises
    ------
    ValidationError
        For unknown ids, non-finite or negative values, or ids without true counts.

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> resolve_public(h, public="root").values.tolist()
    [5.0, 0.0, 0.0]
    """
    n = hierarchy.n
    mask = np.zeros(n, dtype=bool)
    values = np.zeros(n, dtype=np.float64)
    if public is None:
        pass
    elif isinstance(public, Mapping):
        index = hierarchy.index(list(public))
        given = np.array([float(v) for v in public.values()], dtype=np.float64)
        bad = ~np.isfinite(given) | (given < 0)
        if bad.any():
            key = list(public)[int(np.flatnonzero(bad)[0])]
            raise ValidationError(
                f"`public` values must be finite and nonnegative; got {public[key]!r} for {key!r}"
            )
        mask[index] = True
        values[index] = given
    else:
        index = hierarchy.index(public_ids(hierarchy, public=public))
        if hierarchy.counts is None:
            raise ValidationError(
                "`public` given as ids needs true counts in the hierarchy; pass {id: value}"
            )
        mask[index] = True
        values[index] = hierarchy.counts[index]
    determined, floor, below = _determined_and_floor(hierarchy, mask, values)
    return PublicNodes(mask, values, determined, floor, below)


def _determined_and_floor(
    h: Hierarchy, mask: npt.NDArray[np.bool_], values: FloatArray
) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
    """Bottom-up: which nodes the constraints fix, each node's floor, and the floor below it."""
    determined = mask.copy()
    floor = np.where(mask, values, 0.0)
    below = np.zeros(h.n, dtype=np.float64)
    has_child = ~h.is_leaf
    for d in range(h.n_levels - 2, -1, -1):
        children = h.levels[d + 1]
        parents = h.parent[children]
        free_children = np.bincount(parents, weights=~determined[children], minlength=h.n)
        child_floor = np.bincount(parents, weights=floor[children], minlength=h.n)
        nodes = h.levels[d]
        internal = nodes[has_child[nodes]]
        below[internal] = child_floor[internal]
        determined[internal[free_children[internal] == 0]] = True
        free = internal[~mask[internal]]
        floor[free] = child_floor[free]
    return determined, floor, below


def check_feasible(hierarchy: Hierarchy, *, public: PublicNodes, nonneg: bool) -> None:
    """Raise :class:`InfeasibleConstraintsError` if no counts satisfy the constraints.

    A public node all of whose children are fixed must equal their sum; with ``nonneg`` a
    public node must also be at least the sum of the public nodes under it.

    Parameters
    ----------
    hierarchy : Hierarchy
    public : PublicNodes
    nonneg : bool

    Returns
    -------
    None

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> pub = resolve_public(h, public={"T": 5.0, "a": 7.0})
    >>> check_feasible(h, public=pub, nonneg=False)
    >>> check_feasible(h, public=pub, nonneg=True)
    Traceback (most recent call last):
    ...
    postdp.errors.InfeasibleConstraintsError: public node 'T' is below the sum ...; ...
    """
    internal = ~hierarchy.is_leaf
    tol = 1e-9 * np.maximum(1.0, public.values)
    children_fixed = np.zeros(hierarchy.n, dtype=bool)
    has_free = np.bincount(
        hierarchy.parent[hierarchy.parent >= 0],
        weights=~public.determined[hierarchy.parent >= 0],
        minlength=hierarchy.n,
    )
    children_fixed[internal] = has_free[internal] == 0
    off = public.mask & children_fixed & (np.abs(public.values - public.below) > tol)
    if off.any():
        j = int(np.flatnonzero(off)[0])
        raise InfeasibleConstraintsError(
            f"public node {hierarchy.ids[j]!r} does not equal the sum of the fixed nodes under "
            "it, and every node under it is fixed"
        )
    if nonneg:
        short = public.mask & internal & (public.values < public.below - tol)
        if short.any():
            j = int(np.flatnonzero(short)[0])
            raise InfeasibleConstraintsError(
                f"public node {hierarchy.ids[j]!r} is below the sum of the public nodes under it; "
                "no nonnegative counts satisfy both"
            )


def constraint_matrix(hierarchy: Hierarchy) -> sp.csr_array:
    """The consistency constraints as a sparse matrix A with A v = 0.

    Parameters
    ----------
    hierarchy : Hierarchy

    Returns
    -------
    scipy.sparse.csr_array, shape (n_internal, n)
        One row per node with children: +1 at the node, -1 at each child
        (v_parent - Σ v_children = 0, [zhu2021] Fig. 2).

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"])
    >>> constraint_matrix(h).toarray().tolist()
    [[1.0, -1.0, -1.0]]
    """
    internal = np.flatnonzero(~hierarchy.is_leaf)
    row_of = np.full(hierarchy.n, -1, dtype=np.int64)
    row_of[internal] = np.arange(internal.size)
    children = np.flatnonzero(hierarchy.parent >= 0)
    rows = np.concatenate([row_of[internal], row_of[hierarchy.parent[children]]])
    cols = np.concatenate([internal, children])
    data = np.concatenate([np.ones(internal.size), -np.ones(children.size)])
    import scipy.sparse as sp

    return sp.csr_array((data, (rows, cols)), shape=(internal.size, hierarchy.n))


def constraints(
    hierarchy: Hierarchy, *, public: PublicSpec = None
) -> tuple[sp.csr_array, FloatArray]:
    """All equality constraints A v = b: consistency rows, then one row per public node.

    Parameters
    ----------
    hierarchy : Hierarchy
    public : mapping, sequence of str, "root" or None
        See :func:`resolve_public`.

    Returns
    -------
    A : scipy.sparse.csr_array, shape (m, n)
    b : ndarray, shape (m,)

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
    >>> A, b = constraints(h, public="root")
    >>> A.toarray().tolist(), b.tolist()
    ([[1.0, -1.0, -1.0], [1.0, 0.0, 0.0]], [0.0, 5.0])
    """
    import scipy.sparse as sp

    consistency = constraint_matrix(hierarchy)
    pub = resolve_public(hierarchy, public=public)
    fixed = np.flatnonzero(pub.mask)
    rows = sp.csr_array(
        (np.ones(fixed.size), (np.arange(fixed.size), fixed)), shape=(fixed.size, hierarchy.n)
    )
    A = sp.vstack([consistency, rows], format="csr")
    b = np.concatenate([np.zeros(consistency.shape[0]), pub.values[fixed]])
    return sp.csr_array(A), b


def components(hierarchy: Hierarchy, *, mask: npt.NDArray[np.bool_]) -> IntArray:
    """For every node, its nearest public ancestor-or-self (the root when there is none).

    Parameters
    ----------
    hierarchy : Hierarchy
    mask : ndarray of bool, shape (n,)
        Public nodes.

    Returns
    -------
    ndarray of int, shape (n,)

    Examples
    --------
    >>> from postdp import Hierarchy
    >>> h = Hierarchy.from_parents(["T", "a", "a1"], [None, "T", "a"])
    >>> components(h, mask=np.array([False, True, False])).tolist()
    [0, 1, 1]
    """
    comp = np.arange(hierarchy.n, dtype=np.int64)
    for d in range(1, hierarchy.n_levels):
        nodes = hierarchy.levels[d]
        inherit = nodes[~mask[nodes]]
        comp[inherit] = comp[hierarchy.parent[inherit]]
    return comp

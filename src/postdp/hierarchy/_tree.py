"""The :class:`Hierarchy`: nodes, their parents and (optionally) their true counts."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, IntArray, NumArray
from postdp._validation import listing
from postdp.errors import HierarchyError, ValidationError
from postdp.hierarchy._builders import tree_from_codes, tree_from_frame
from postdp.hierarchy._checks import _check_counts, _check_unique
from postdp.hierarchy._layout import Layout, breadth_first_levels

__all__ = ["Hierarchy"]


_ID_INDEX: weakref.WeakKeyDictionary[Hierarchy, pd.Index] = weakref.WeakKeyDictionary()


class Hierarchy:
    """A rooted tree of geographic units (nation > states > counties > ...).

    Build it with :meth:`from_frame`, :meth:`from_codes` or :meth:`from_parents`; each
    validates the tree (one root, no cycles, no orphans, no duplicate ids) and, when true
    counts are given, that they are finite, nonnegative and that every parent equals the sum
    of its children.

    Inside, nodes are integer positions: ``parent`` holds integer indices and every tree
    algorithm works on integer arrays in a breadth-first layout; the ids are kept for
    display and lookup only (and, for :func:`postdp.data.synthetic_hierarchy`, made only
    when first asked for). Resident memory beyond the ids: 8 bytes per node for ``parent``,
    8 for ``counts`` and 8 for the layout when the nodes are in breadth-first order (every
    builder of postdp makes them so), 24 more otherwise; ``depth`` is computed when asked.

    Parameters
    ----------
    ids : array_like of str, shape (n,)
        Node ids, unique.
    parent : array_like of int, shape (n,)
        Index (into ``ids``) of each node's parent; -1 for the root.
    counts : array_like, shape (n,), optional
        True counts, in the order of ``ids``.

    Attributes
    ----------
    n : int
        Number of nodes.
    depth : ndarray of int, shape (n,)
        Distance from the root (0 for the root); computed on each access.
    levels : tuple of ndarray
        ``levels[d]`` holds the indices of the nodes at depth ``d``.

    Examples
    --------
    >>> import pandas as pd
    >>> from postdp import Hierarchy
    >>> df = pd.DataFrame({"id": ["T", "a", "b"], "parent": [None, "T", "T"],
    ...                    "count": [5, 2, 3]})
    >>> h = Hierarchy.from_frame(df, id="id", parent="parent", count="count")
    >>> h.n, h.n_levels, h.counts.tolist()
    (3, 2, [5, 2, 3])
    """

    __slots__ = ("__weakref__", "_ids", "_labels", "counts", "layout", "levels", "parent")
    _ids: npt.NDArray[np.object_] | None
    _labels: Callable[[], npt.NDArray[np.object_]] | None
    parent: IntArray
    counts: NumArray | None
    levels: tuple[IntArray, ...]
    layout: Layout

    def __init__(self, ids: ArrayLike, parent: ArrayLike, counts: ArrayLike | None = None):
        ids = np.asarray(ids, dtype=object)
        parent = np.asarray(parent)
        if ids.ndim != 1 or parent.shape != ids.shape:
            raise ValidationError(
                f"`ids` and `parent` must be 1-d of one length; got shapes {ids.shape} and "
                f"{parent.shape}"
            )
        if ids.size == 0:
            raise HierarchyError("a hierarchy needs at least one node; got an empty table")
        _check_unique(ids)
        self._setup(parent, counts, ids=ids, labels=None)

    @classmethod
    def _trusted(
        cls,
        parent: IntArray,
        counts: ArrayLike | None,
        *,
        ids: npt.NDArray[np.object_] | None = None,
        labels: Callable[[], npt.NDArray[np.object_]] | None = None,
    ) -> Hierarchy:
        """A hierarchy whose ids a builder made unique (or makes on demand with ``labels``);
        the tree and the counts are still checked."""
        self = cls.__new__(cls)
        self._setup(np.asarray(parent), counts, ids=ids, labels=labels)
        return self

    def _setup(
        self,
        parent: npt.NDArray[Any],
        counts: ArrayLike | None,
        *,
        ids: npt.NDArray[np.object_] | None,
        labels: Callable[[], npt.NDArray[np.object_]] | None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "_ids", ids)
        set_(self, "_labels", labels)
        if not np.issubdtype(parent.dtype, np.integer):
            raise TypeError(f"`parent` must hold integer indices; got dtype {parent.dtype}")
        if parent.ndim != 1 or parent.size == 0:
            raise ValidationError(f"`parent` must be 1-d and not empty; got {parent.shape}")
        parent = parent.astype(np.int64, copy=False)
        n = parent.size
        if parent.min() < -1 or parent.max() >= n:
            raise HierarchyError(f"`parent` holds indices outside [-1, {n})")
        roots = np.flatnonzero(parent == -1)
        if roots.size != 1:
            if roots.size == 0:
                raise HierarchyError("the hierarchy has no root (every node has a parent)")
            raise HierarchyError(
                f"the hierarchy must have one root; got {roots.size}: {listing(self.ids[roots])}"
            )
        frontiers = breadth_first_levels(parent, int(roots[0]))
        if sum(level.size for level in frontiers) < n:
            reached = np.zeros(n, dtype=bool)
            reached[np.concatenate(frontiers)] = True
            unreached = np.flatnonzero(~reached)
            raise HierarchyError(
                f"nodes in a cycle (not reachable from root {self.ids[roots[0]]!r}): "
                f"{listing(self.ids[unreached])}"
            )
        layout = Layout.build(parent, tuple(frontiers))
        if layout.identity:  # the levels are slices of one shared arange
            b = layout.bounds
            frontiers = [layout.order[b[d] : b[d + 1]] for d in range(len(frontiers))]
        set_(self, "parent", parent)
        set_(self, "levels", tuple(frontiers))
        set_(self, "layout", layout)
        set_(self, "counts", None if counts is None else _check_counts(counts, self))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Hierarchy is immutable; cannot set {name!r}")

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "__weakref__"}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        sizes = [int(level.size) for level in self.levels]
        counts = "with counts" if self.counts is not None else "no counts"
        return f"Hierarchy(n={self.n:,}, levels={sizes}, {counts})"

    @property
    def ids(self) -> npt.NDArray[np.object_]:
        """Node ids (str), shape (n,); made on first access when a builder deferred them."""
        if self._ids is None:
            assert self._labels is not None
            object.__setattr__(self, "_ids", self._labels())
            object.__setattr__(self, "_labels", None)
        assert self._ids is not None
        return self._ids

    @property
    def depth(self) -> IntArray:
        """Distance of every node from the root (0 for the root), shape (n,)."""
        sizes = np.diff(self.layout.bounds)
        by_position = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        if self.layout.identity:
            return by_position
        out = np.empty(self.n, dtype=np.int64)
        out[self.layout.order] = by_position
        return out

    # -- builders -------------------------------------------------------------------------
    @classmethod
    def from_parents(
        cls, ids: ArrayLike, parents: ArrayLike, counts: ArrayLike | None = None
    ) -> Hierarchy:
        """Build a hierarchy from node ids and their parents' ids.

        Parameters
        ----------
        ids : array_like of str, shape (n,)
        parents : array_like, shape (n,)
            Each node's parent id; None, NaN or "" for the root.
        counts : array_like, shape (n,), optional
            True counts.

        Returns
        -------
        Hierarchy

        Raises
        ------
        HierarchyError
            For duplicate ids, a parent id that is not a node (orphan), no root or several,
            a cycle, or counts that are negative or do not add up.

        Examples
        --------
        >>> h = Hierarchy.from_parents(["US", "01", "02"], [None, "US", "US"], [3, 1, 2])
        >>> h.parent.tolist()
        [-1, 0, 0]
        """
        frame = pd.DataFrame(
            {
                "id": list(np.asarray(ids, dtype=object)),
                "parent": list(np.asarray(parents, dtype=object)),
            }
        )
        if counts is not None:
            values = _validation.real_array("counts", counts)
            if values.shape != (len(frame),):
                raise ValidationError(
                    f"`counts` must have shape ({len(frame)},) like `ids`; got {values.shape}"
                )
            frame["count"] = values
        return cls.from_frame(
            frame, id="id", parent="parent", count=None if counts is None else "count"
        )

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        id: str = "id",
        parent: str = "parent",
        count: str | None = "count",
    ) -> Hierarchy:
        """Build a hierarchy from a table with one row per node.

        Parameters
        ----------
        df : pandas.DataFrame
        id : str, default "id"
            Column of node ids, converted to strings. Ids that were read as numbers have
            already lost their leading zeros (FIPS "01" became 1): read the file with
            ``pd.read_csv(path, dtype=str, keep_default_na=False)`` so "01" and "NA" stay
            what they are. A numeric id column draws an :class:`AmbiguousIdWarning`.
        parent : str, default "parent"
            Column of parent ids; missing or empty for the root.
        count : str or None, default "count"
            Column of true counts; None for a hierarchy without counts.

        Returns
        -------
        Hierarchy

        Raises
        ------
        ValidationError
            If a named column is missing.
        HierarchyError
            If the table is not a valid hierarchy (see the class docstring).

        Warns
        -----
        AmbiguousIdWarning
            If the id or parent column is numeric (leading zeros may be lost).

        Examples
        --------
        >>> from postdp.data import load_county_populations
        >>> h = Hierarchy.from_frame(load_county_populations(), count="count")
        >>> h.n, [lvl.size for lvl in h.levels]
        (3195, [1, 51, 3143])
        """
        ids, parent_index, counts = tree_from_frame(df, id, parent, count)
        return cls._trusted(parent_index, counts, ids=ids)

    @classmethod
    def from_codes(
        cls,
        df: pd.DataFrame,
        columns: Sequence[str],
        *,
        count: str | None = "count",
        root: str = "US",
        widths: Sequence[int] | None = None,
    ) -> Hierarchy:
        """Build a hierarchy from geographic code columns, one row per leaf.

        Parameters
        ----------
        df : pandas.DataFrame
            One row per leaf (e.g. per county).
        columns : sequence of str
            Code columns from the top level down, e.g. ``["STATE", "COUNTY"]``. A node's id
            is the concatenation of its codes (state "01" + county "001" = "01001"), the
            FIPS convention.
        count : str or None, default "count"
            Column of the leaves' true counts; internal nodes get the sums.
        root : str, default "US"
            Id of the root above the first level.
        widths : sequence of int, optional
            Zero-pad each level's code to this width (for codes stored as numbers, e.g.
            ``[2, 3]`` for state and county FIPS).

        Returns
        -------
        Hierarchy

        Examples
        --------
        >>> import pandas as pd
        >>> df = pd.DataFrame({"STATE": [1, 1, 2], "COUNTY": [1, 3, 13], "pop": [5, 6, 7]})
        >>> h = Hierarchy.from_codes(df, ["STATE", "COUNTY"], count="pop", widths=[2, 3])
        >>> list(h.ids), h.counts.tolist()
        (['US', '01', '02', '01001', '01003', '02013'], [18, 11, 7, 5, 6, 7])
        """
        parent_index, counts, labels = tree_from_codes(df, columns, count, root, widths)
        return cls._trusted(parent_index, counts, labels=labels)

    # -- derived --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.parent.size)

    @property
    def n_levels(self) -> int:
        """Number of levels (depth of the deepest node + 1)."""
        return len(self.levels)

    @property
    def root(self) -> int:
        """Index of the root."""
        return int(self.levels[0][0])

    @property
    def leaves(self) -> IntArray:
        """Indices of the nodes without children."""
        return np.flatnonzero(self.is_leaf)

    @property
    def is_leaf(self) -> npt.NDArray[np.bool_]:
        """Boolean mask of the nodes without children."""
        has_child = np.zeros(self.n, dtype=bool)
        has_child[self.parent[self.parent >= 0]] = True
        return ~has_child

    def aggregate(self, values: ArrayLike) -> NumArray:
        """Consistent values from the leaves: every internal node becomes the sum of its leaves.

        Parameters
        ----------
        values : array_like, shape (..., n)
            Only the leaves' entries are read.

        Returns
        -------
        ndarray, same shape (int64 stays int64)

        Examples
        --------
        >>> h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [5, 2, 3])
        >>> h.aggregate(h.counts + 10).tolist()
        [25, 12, 13]
        """
        arr = _validation.real_array("values", values)
        if arr.ndim == 0 or arr.shape[-1] != self.n:
            raise ValidationError(
                f"`values` must have shape (..., {self.n}); got shape {arr.shape}"
            )
        out = np.where(self.is_leaf, arr, 0).astype(arr.dtype)
        flat = out.reshape(-1, self.n)
        for d in range(self.n_levels - 1, 0, -1):
            nodes = self.levels[d]
            np.add.at(flat.T, self.parent[nodes], flat[:, nodes].T)
        return flat.reshape(arr.shape)

    def index(self, ids: str | Sequence[str]) -> IntArray:
        """Positions of the given ids.

        Parameters
        ----------
        ids : str or sequence of str

        Returns
        -------
        ndarray of int

        Examples
        --------
        >>> Hierarchy.from_parents(["T", "a"], [None, "T"]).index(["a"]).tolist()
        [1]
        """
        wanted = [ids] if isinstance(ids, str) else list(ids)
        lookup = _ID_INDEX.get(self)
        if lookup is None:  # built once per hierarchy (its ids never change)
            # object dtype, as the wanted ids: pandas' string dtype would convert the whole
            # index on every lookup (O(n) per call: 88 ms at 1.2M ids against 10 ms)
            lookup = _ID_INDEX[self] = pd.Index(self.ids, dtype=object)
        found = lookup.get_indexer(pd.Index(wanted, dtype=object))
        unknown = [w for w, f in zip(wanted, found, strict=True) if f < 0]
        if unknown:
            raise ValidationError(f"unknown node ids: {listing(unknown)}")
        return found.astype(np.int64)

    def to_frame(self) -> pd.DataFrame:
        """The hierarchy as a table: id, parent, depth and (if known) count.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> Hierarchy.from_parents(["T", "a"], [None, "T"], [1, 1]).to_frame()
          id parent  depth  count
        0  T   None      0      1
        1  a      T      1      1
        """
        parents = self.ids[np.maximum(self.parent, 0)]
        parents[self.parent < 0] = None
        frame = pd.DataFrame(
            {
                "id": pd.Series(self.ids, dtype=object),
                "parent": pd.Series(parents, dtype=object),
                "depth": self.depth,
            }
        )
        if self.counts is not None:
            frame["count"] = self.counts
        return frame

"""The :class:`Hierarchy`: nodes, their parents and (optionally) their true counts."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, IntArray, NumArray
from postdp.errors import AmbiguousIdWarning, HierarchyError, ValidationError
from postdp.hierarchy._checks import _check_counts, _check_unique, _listing
from postdp.hierarchy._layout import Layout, depths

__all__ = ["Hierarchy"]

_SHOW = 5  # how many offending ids an error message lists


def _keys(values: pd.Series[Any], column: str) -> npt.NDArray[np.object_]:
    """Ids as strings; whole floats (ints read next to missing values) lose their '.0'."""
    if pd.api.types.is_float_dtype(values.dtype):
        present = values.dropna()
        if (present != np.round(present)).any():
            raise ValidationError(f"column `{column}` holds non-integer numeric ids")
        return np.array([None if pd.isna(v) else str(int(v)) for v in values], dtype=object)
    as_object = values.astype(object)
    missing = as_object.isna().to_numpy()
    text = as_object.where(~missing, "").astype(str).str.strip()  # vectorised string ops
    out = text.to_numpy(dtype=object)
    out[missing | (out == "")] = None
    return out


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Hierarchy:
    """A rooted tree of geographic units (nation > states > counties > ...).

    Build it with :meth:`from_frame` or :meth:`from_parents`; both validate the tree (one
    root, no cycles, no orphans, no duplicate ids) and, when true counts are given, that they
    are finite, nonnegative and that every parent equals the sum of its children.

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
        Distance from the root (0 for the root).
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

    ids: npt.NDArray[np.object_]
    parent: IntArray
    counts: NumArray | None = None
    depth: IntArray = field(init=False, repr=False)
    levels: tuple[IntArray, ...] = field(init=False, repr=False)
    layout: Layout = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, dtype=object)
        parent = np.asarray(self.parent)
        if ids.ndim != 1 or parent.shape != ids.shape:
            raise ValidationError(
                f"`ids` and `parent` must be 1-d of one length; got shapes {ids.shape} and "
                f"{parent.shape}"
            )
        if not np.issubdtype(parent.dtype, np.integer):
            raise TypeError(f"`parent` must hold integer indices; got dtype {parent.dtype}")
        parent = parent.astype(np.int64)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "parent", parent)
        n = ids.size
        if n == 0:
            raise HierarchyError("a hierarchy needs at least one node; got an empty table")
        _check_unique(ids)
        if ((parent < -1) | (parent >= n)).any():
            raise HierarchyError(f"`parent` holds indices outside [-1, {n}); got {parent!r}")
        roots = np.flatnonzero(parent == -1)
        if roots.size != 1:
            if roots.size == 0:
                raise HierarchyError("the hierarchy has no root (every node has a parent)")
            raise HierarchyError(
                f"the hierarchy must have one root; got {roots.size}: {_listing(ids[roots])}"
            )
        depth = depths(parent, int(roots[0]))
        unreached = np.flatnonzero(depth < 0)
        if unreached.size:
            raise HierarchyError(
                f"nodes in a cycle (not reachable from root {ids[roots[0]]!r}): "
                f"{_listing(ids[unreached])}"
            )
        object.__setattr__(self, "depth", depth)
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
        object.__setattr__(
            self,
            "levels",
            tuple(order[bounds[d] : bounds[d + 1]] for d in range(int(depth.max()) + 1)),
        )
        object.__setattr__(self, "layout", Layout.build(parent, self.levels))
        if self.counts is not None:
            object.__setattr__(self, "counts", _check_counts(self.counts, ids, parent))

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
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
        for role, column in (("id", id), ("parent", parent), ("count", count)):
            if column is not None and column not in df.columns:
                raise ValidationError(
                    f"column {column!r} (given as `{role}`) is not in the table; "
                    f"its columns are: {', '.join(map(str, df.columns))}"
                )
        for role, column in (("id", id), ("parent", parent)):
            values = df[column]
            if pd.api.types.is_numeric_dtype(values.dtype) and values.notna().any():
                warnings.warn(
                    f"column {column!r} (`{role}`) is numeric, so ids such as FIPS '01' may "
                    "have lost their leading zeros; read it as text (dtype=str)",
                    AmbiguousIdWarning,
                    stacklevel=2,
                )
        ids = _keys(df[id], id)
        absent = pd.isna(ids)
        if absent.any():
            rows = [int(r) for r in np.flatnonzero(absent)]
            raise HierarchyError(f"column {id!r} has missing ids at rows {rows[:_SHOW]}")
        parents = _keys(df[parent], parent)
        _check_unique(ids)
        has_parent = ~pd.isna(parents)
        found = pd.Index(ids).get_indexer(pd.Index(parents[has_parent]))  # hash lookups
        if (found < 0).any():
            orphans = list(parents[has_parent][found < 0])
            raise HierarchyError(f"parent ids that are not nodes (orphans): {_listing(orphans)}")
        parent_index = np.full(ids.size, -1, dtype=np.int64)
        parent_index[has_parent] = found
        counts = None if count is None else df[count].to_numpy()
        if counts is not None and counts.dtype == object:
            counts = pd.to_numeric(df[count], errors="coerce").to_numpy()
            if np.isnan(counts).any():
                row = int(np.flatnonzero(np.isnan(counts))[0])
                raise ValidationError(
                    f"column {count!r} holds a non-numeric count at row {row} (id {ids[row]!r})"
                )
        return cls(ids=ids, parent=parent_index, counts=counts)

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
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
        columns = list(columns)
        if not columns:
            raise ValidationError("`columns` must name at least one code column")
        for column in [*columns, *([] if count is None else [count])]:
            if column not in df.columns:
                raise ValidationError(
                    f"column {column!r} is not in the table; its columns are: "
                    f"{', '.join(map(str, df.columns))}"
                )
        if widths is not None and len(widths) != len(columns):
            raise ValidationError(
                f"`widths` needs one width per code column ({len(columns)}); got {len(widths)}"
            )
        codes = []
        for k, column in enumerate(columns):
            keys = _keys(df[column], column)
            if any(key is None for key in keys):
                raise ValidationError(f"column {column!r} has missing codes")
            if widths is not None:
                keys = np.array([str(key).zfill(widths[k]) for key in keys], dtype=object)
            codes.append(keys)
        paths = ["".join(parts) for parts in zip(*codes, strict=True)]
        if len(set(paths)) != len(paths):
            dup = sorted({p for p in paths if paths.count(p) > 1})
            raise HierarchyError(f"duplicate leaf codes: {_listing(dup)}")
        leaf_counts = None
        if count is not None:
            leaf_counts = _validation.real_array("counts", pd.to_numeric(df[count]).to_numpy())
            _validation.nonnegative("counts", leaf_counts)
        ids: list[str] = [root]
        parents: list[str | None] = [None]
        totals: dict[str, float] = {root: 0}
        for k in range(len(columns)):
            level_ids = ["".join(parts[: k + 1]) for parts in zip(*codes, strict=True)]
            for i, node in enumerate(level_ids):
                if node not in totals:
                    ids.append(node)
                    parents.append(root if k == 0 else "".join(c[i] for c in codes[:k]))
                    totals[node] = 0
        if leaf_counts is not None:
            for i, _ in enumerate(paths):
                for k in range(len(columns)):
                    totals["".join(c[i] for c in codes[: k + 1])] += leaf_counts[i]
                totals[root] += leaf_counts[i]
        order = sorted(range(1, len(ids)), key=lambda j: (len(ids[j]), ids[j]))
        ids = [ids[0]] + [ids[j] for j in order]
        parents = [parents[0]] + [parents[j] for j in order]
        values = None if leaf_counts is None else np.array([totals[i] for i in ids])
        if values is not None and leaf_counts is not None and leaf_counts.dtype == np.int64:
            values = values.astype(np.int64)
        return cls.from_parents(ids, np.array(parents, dtype=object), values)

    # -- derived --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.ids.size)

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
        lookup = {key: i for i, key in enumerate(self.ids)}
        unknown = [w for w in wanted if w not in lookup]
        if unknown:
            raise ValidationError(f"unknown node ids: {_listing(unknown)}")
        return np.array([lookup[w] for w in wanted], dtype=np.int64)

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
        parents = [None if p < 0 else self.ids[p] for p in self.parent]
        frame = pd.DataFrame(
            {"id": list(self.ids), "parent": pd.Series(parents, dtype=object), "depth": self.depth}
        )
        if self.counts is not None:
            frame["count"] = self.counts
        return frame

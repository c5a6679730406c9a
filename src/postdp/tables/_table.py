"""The :class:`Table`: a histogram over a category tree for every unit of a geography."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from postdp import _validation
from postdp._typing import ArrayLike, IntArray, NumArray
from postdp._validation import listing
from postdp.errors import HierarchyError, ValidationError
from postdp.hierarchy import Hierarchy

__all__ = ["Table", "category_matrix"]


@dataclass(frozen=True, eq=False, repr=False)
class Table:
    """Counts of a geography x category table: one histogram per geounit.

    The geography is a :class:`~postdp.Hierarchy` of geounits (nation > states > ...); the
    categories form a second tree (e.g. P1's Total > one race > White alone ...) whose
    leaves are the detailed cells. The table holds the detailed histogram of every leaf
    geounit; every other count, (geounit, category node), is a sum of these, so a table
    is consistent both ways by construction.

    Parameters
    ----------
    geography : Hierarchy
        The geounits; its own counts, if any, are ignored.
    categories : Hierarchy
        The category tree; its ids are the category codes.
    cells : array_like of int, shape (n_geo_leaves, n_detailed)
        Detailed counts of every leaf geounit: rows in the order of ``geography.leaves``,
        columns in the order of ``categories.leaves``.
    labels : mapping of str to str, optional
        A readable label for category codes.

    Attributes
    ----------
    shape : tuple of int
        ``(geography.n, categories.n)``: every (geounit, category node) pair.

    Examples
    --------
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> t = Table(geo, cat, [[1, 2], [3, 4]])
    >>> t.counts().tolist()  # rows S, a, b; columns T, x, y
    [[10, 4, 6], [3, 1, 2], [7, 3, 4]]
    """

    geography: Hierarchy
    categories: Hierarchy
    cells: IntArray
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in (("geography", self.geography), ("categories", self.categories)):
            if not isinstance(value, Hierarchy):
                raise TypeError(f"`{name}` must be a Hierarchy; got {type(value).__name__}")
        shape = (self.geography.leaves.size, self.categories.leaves.size)
        if sparse.issparse(self.cells):  # nonzero cells only: memory grows with them
            object.__setattr__(self, "cells", _sparse_cells(self.cells, shape))
            object.__setattr__(self, "labels", dict(self.labels))
            return
        cells = _validation.integer_array("cells", self.cells)
        if cells.shape != shape:
            raise ValidationError(
                f"`cells` must have shape {shape} (leaf geounits x detailed categories); "
                f"got {cells.shape}"
            )
        if cells.size and cells.min() < 0:
            row, col = (int(i[0]) for i in np.nonzero(cells < 0))
            raise HierarchyError(
                "counts must be nonnegative; negative at geounit "
                f"{self.geography.ids[self.geography.leaves[row]]!r}, category "
                f"{self.categories.ids[self.categories.leaves[col]]!r}"
            )
        if cells.size and float(cells.sum(dtype=np.float64)) >= _validation.MAX_COUNT:
            raise ValidationError(
                "the table's counts add up to 2**52 (about 4.5e15) or more, more than postdp "
                "releases exactly"
            )
        object.__setattr__(self, "cells", cells)
        object.__setattr__(self, "labels", dict(self.labels))

    def __repr__(self) -> str:
        geo, cat = self.geography, self.categories
        levels = ", ".join(f"{level.size:,}" for level in geo.levels)
        storage = "sparse" if self.is_sparse else "dense"
        return (
            f"<Table: {geo.n:,} geounits (levels {levels}) x {cat.leaves.size:,} detailed "
            f"cells ({cat.n:,} category nodes), {storage}>"
        )

    @property
    def shape(self) -> tuple[int, int]:
        """(geounits, category nodes)."""
        return (self.geography.n, self.categories.n)

    def counts(self) -> IntArray:
        """Every (geounit, category node) count, shape ``(geography.n, categories.n)``.

        Returns
        -------
        ndarray of int64
        """
        return expand(self.dense_cells(), self.geography, self.categories)

    def detailed(self) -> IntArray:
        """Detailed histogram of every geounit, shape ``(geography.n, n_detailed)``."""
        return geography_sums(self.dense_cells(), self.geography)

    @property
    def is_sparse(self) -> bool:
        """Whether the leaf histograms are kept as nonzero cells only (scipy sparse)."""
        return bool(sparse.issparse(self.cells))

    def dense_cells(self) -> IntArray:
        """The leaf geounits' detailed histograms as a dense array (a copy for a sparse
        table: (leaf geounits x cells) integers)."""
        cells: Any = self.cells
        if isinstance(cells, np.ndarray):
            return cells
        out: IntArray = np.asarray(cells.toarray(), dtype=np.int64)
        return out

    def level_detailed(self, level: int) -> Any:
        """Detailed histograms of the geounits of one level, in ``geography.levels[level]``
        order: dense, or sparse (nonzero cells only) for a sparse table.

        Examples
        --------
        >>> from scipy import sparse
        >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
        >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
        >>> t = Table(geo, cat, sparse.csr_array([[0, 2], [3, 0]]))
        >>> t.level_detailed(0).toarray().tolist(), t.level_detailed(1).nnz
        ([[3, 2]], 2)
        """
        geo = self.geography
        nodes = geo.levels[level]
        if not sparse.issparse(self.cells):
            return self.detailed()[nodes]
        leaves = geo.leaves
        anc = leaves.copy()
        while True:  # each leaf's ancestor at this depth (or itself when shallower)
            deep = geo.depth[anc] > level
            if not deep.any():
                break
            anc[deep] = geo.parent[anc[deep]]
        row = np.full(geo.n, -1, dtype=np.int64)
        row[nodes] = np.arange(nodes.size)
        keep = geo.depth[anc] == level
        member = sparse.csr_array(
            (np.ones(int(keep.sum()), dtype=np.int64), (row[anc[keep]], np.flatnonzero(keep))),
            shape=(nodes.size, leaves.size),
        )
        return sparse.csr_array(member @ self.cells)

    def split_at(self, level: int) -> tuple[Table, list[Table]]:
        """The table cut at a geographic level, to be released one subtree at a time
        (:func:`~postdp.postprocess.project_by_subtree`).

        Parameters
        ----------
        level : int
            The cut, 1 to ``geography.n_levels - 2`` (e.g. 2, the counties of a
            nation > state > county > ... geography). Every leaf geounit must lie at or
            below it.

        Returns
        -------
        top : Table
            The geounits of levels 0 to ``level``; each geounit of ``level`` is a leaf
            holding its histogram (the sum of its leaves').
        subtrees : list of Table
            One per geounit of ``level``, in the order of ``top.geography.leaves``: that
            geounit (the root) and its descendants, with their leaves' cells (sparse
            when this table is).

        Examples
        --------
        >>> geo = Hierarchy.from_parents(["S", "a", "b", "a1", "a2", "b1"],
        ...                              [None, "S", "S", "a", "a", "b"])
        >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
        >>> top, subs = Table(geo, cat, [[1, 2], [3, 4], [5, 6]]).split_at(1)
        >>> top.cells.tolist(), [list(s.geography.ids) for s in subs]
        ([[4, 6], [5, 6]], [['a', 'a1', 'a2'], ['b', 'b1']])
        """
        geo = self.geography
        if (
            isinstance(level, bool)
            or not isinstance(level, (int, np.integer))
            or not 1 <= level <= geo.n_levels - 2
        ):
            raise ValidationError(
                f"`level` must be an integer from 1 to {geo.n_levels - 2} (the geography "
                f"has {geo.n_levels} levels); got {level!r}"
            )
        shallow = geo.leaves[geo.depth[geo.leaves] < level]
        if shallow.size:
            raise ValidationError(
                f"geounit {geo.ids[shallow[0]]!r} is a leaf above level {level}; every leaf "
                "must lie at or below the cut"
            )
        owner = np.full(geo.n, -1, dtype=np.int64)  # each node's ancestor at the cut
        owner[geo.levels[level]] = geo.levels[level]
        for d in range(level + 1, geo.n_levels):
            owner[geo.levels[d]] = owner[geo.parent[geo.levels[d]]]
        leaf_pos = np.full(geo.n, -1, dtype=np.int64)
        leaf_pos[geo.leaves] = np.arange(geo.leaves.size)
        cells: Any = self.cells
        upper = np.flatnonzero(geo.depth <= level)
        top_geo = _induced(geo, upper)
        cut = upper[top_geo.leaves]  # the cut geounits, in the top's leaf order
        rank = np.full(geo.n, -1, dtype=np.int64)
        rank[cut] = np.arange(cut.size)
        member = sparse.csr_array(
            (
                np.ones(geo.leaves.size, dtype=np.int64),
                (rank[owner[geo.leaves]], leaf_pos[geo.leaves]),
            ),
            shape=(cut.size, geo.leaves.size),
        )
        sums = member @ cells
        top_cells = sparse.csr_array(sums) if self.is_sparse else np.asarray(sums)
        top = Table(top_geo, self.categories, top_cells, self.labels)  # type: ignore[arg-type]
        order = np.argsort(owner, kind="stable")  # nodes grouped by their cut geounit
        grouped = owner[order]
        subtrees = []
        for g in cut:
            lo, hi = np.searchsorted(grouped, [g, g + 1])
            nodes = np.sort(order[lo:hi])
            sub_geo = _induced(geo, nodes)
            rows = leaf_pos[nodes[sub_geo.leaves]]
            subtrees.append(Table(sub_geo, self.categories, cells[rows], self.labels))
        return top, subtrees

    def to_frame(self, values: ArrayLike | None = None, *, name: str = "count") -> pd.DataFrame:
        """Long form: one row per (geounit, category node).

        Parameters
        ----------
        values : array_like, shape (geography.n, categories.n), optional
            Values to tabulate instead of the true counts (e.g. a release).
        name : str, default "count"
            Name of the value column.

        Returns
        -------
        pandas.DataFrame
            Columns ``geo_id``, ``parent`` (the geographic parent), ``level`` (geographic
            depth), ``category``, ``label`` and ``name``.
        """
        data = self.counts() if values is None else np.asarray(values)
        if data.shape != self.shape:
            raise ValidationError(f"`values` must have shape {self.shape}; got {data.shape}")
        geo, cat = self.geography, self.categories
        parents = geo.ids[np.maximum(geo.parent, 0)].astype(object)
        parents[geo.parent < 0] = ""
        rows, cols = geo.n, cat.n
        # objects: a str array is as wide as its longest label (540 bytes a row for P1's)
        labels = np.array([self.labels.get(str(c), "") for c in cat.ids], dtype=object)
        frame = pd.DataFrame(
            {
                "geo_id": np.repeat(geo.ids, cols),
                "parent": np.repeat(parents, cols),
                "level": np.repeat(geo.depth, cols),
                "category": np.tile(cat.ids.astype(object), rows),
                "label": np.tile(labels, rows),
                name: data.reshape(-1),
            }
        )
        return frame

    def to_wide(self, values: ArrayLike | None = None) -> pd.DataFrame:
        """Wide form: one row per geounit, one column per category node."""
        data = self.counts() if values is None else np.asarray(values)
        frame = pd.DataFrame(data, columns=list(self.categories.ids))
        frame.insert(0, "geo_id", self.geography.ids)
        parents = self.geography.ids[np.maximum(self.geography.parent, 0)].astype(object)
        parents[self.geography.parent < 0] = ""
        frame.insert(1, "parent", parents)
        return frame

    @classmethod
    def from_wide(
        cls,
        df: pd.DataFrame,
        geography: Hierarchy,
        categories: Hierarchy,
        *,
        id: str = "geo_id",
        labels: Mapping[str, str] | None = None,
        ignore: Sequence[str] = (),
    ) -> Table:
        """A table from one row per geounit and one column per category code.

        Every leaf geounit needs a row with every detailed category column. Rows of other
        geounits and columns of aggregate categories are optional; where present they are
        checked against the sums of the detailed cells (an error names the geounit and the
        category, never a count). Rows with every category blank (a geounit listed only for
        the geography, as ``postdp release --input`` accepts) are skipped.

        Parameters
        ----------
        df : pandas.DataFrame
        geography : Hierarchy
        categories : Hierarchy
            Category tree; its ids are the column names.
        id : str, default "geo_id"
            Column of geounit ids.
        labels : mapping, optional
            Readable category labels.
        ignore : sequence of str, default ()
            Columns that are neither the id nor a category code (a name, a parent column).
            Any other column is refused: a mistyped category code would otherwise drop its
            people from every total without a word.

        Returns
        -------
        Table
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
        if id not in df.columns:
            raise ValidationError(f"column {id!r} (given as `id`) is not in the table")
        codes = [str(c) for c in categories.ids]
        known = {*codes, id, *(str(c) for c in ignore)}
        strange = [str(c) for c in df.columns if str(c) not in known]
        if strange:
            raise ValidationError(
                f"{len(strange)} column(s) neither the id nor a category code: "
                f"{listing(strange)} (pass columns without counts in `ignore`)"
            )
        detailed = [codes[j] for j in categories.leaves]
        missing = [c for c in detailed if c not in df.columns]
        if missing:
            raise ValidationError(f"detailed category columns missing: {listing(missing)}")
        present = [c for c in codes if c in df.columns]
        blank = df[present].apply(lambda col: col.isna() | (col.astype(str).str.strip() == ""))
        df = df[~blank.all(axis=1).to_numpy()]  # geography-only rows: no counts to check
        keys = df[id].astype(str).str.strip().to_numpy(dtype=object)
        where = pd.Index(geography.ids).get_indexer(pd.Index(keys))
        if (where < 0).any():
            unknown = keys[where < 0]
            raise HierarchyError(f"rows for geounits not in the geography: {listing(unknown)}")
        if pd.Index(where).has_duplicates:
            dup = keys[pd.Index(where).duplicated()]
            raise HierarchyError(f"geounits with more than one row: {listing(dup)}")
        leaves = geography.leaves
        row_of = np.full(geography.n, -1, dtype=np.int64)
        row_of[where] = np.arange(where.size)
        absent = leaves[row_of[leaves] < 0]
        if absent.size:
            raise HierarchyError(f"leaf geounits without a row: {listing(geography.ids[absent])}")
        values = df[present].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        if np.isnan(values).any():
            r, c = (int(i[0]) for i in np.nonzero(np.isnan(values)))
            where_ = f"geounit {keys[r]!r}, category {present[c]!r}"
            raise ValidationError(f"a missing or non-numeric count at {where_}")
        if (values != np.round(values)).any():
            raise ValidationError("counts must be whole numbers")
        if (values >= _validation.MAX_COUNT).any():
            r, c = (int(i[0]) for i in np.nonzero(values >= _validation.MAX_COUNT))
            raise ValidationError(
                f"the count at geounit {keys[r]!r}, category {present[c]!r} is 2**52 (about "
                "4.5e15) or more, more than postdp releases exactly"
            )
        detailed_cols = pd.Index(present).get_indexer(pd.Index(detailed))
        cells = values[np.ix_(row_of[leaves], detailed_cols)].astype(np.int64)
        table = cls(geography, categories, cells, labels or {})
        full = table.counts()
        given = values.astype(np.int64)
        present_cols = np.array([codes.index(c) for c in present], dtype=np.int64)
        expected = full[np.ix_(where, present_cols)]
        bad = np.nonzero(given != expected)
        if bad[0].size:
            r, c = int(bad[0][0]), int(bad[1][0])
            raise HierarchyError(
                f"{bad[0].size} counts differ from the sums of their detailed cells, first at "
                f"geounit {keys[r]!r}, category {present[c]!r}"
            )
        return table


def _sparse_cells(cells: object, shape: tuple[int, int]) -> Any:
    """A sparse histogram checked as a dense one is: shape, whole nonnegative counts and a
    total below the limit (messages name no count)."""
    out: Any = sparse.csr_array(cells)  # type: ignore[call-overload]
    if out.shape != shape:
        raise ValidationError(
            f"`cells` must have shape {shape} (leaf geounits x detailed categories); "
            f"got {out.shape}"
        )
    data = np.asarray(out.data)
    if data.size and (not np.isfinite(data).all() or (data != np.round(data)).any()):
        raise ValidationError("`cells` must hold whole numbers")
    if data.size and data.min() < 0:
        raise HierarchyError("counts must be nonnegative")
    if data.size and float(data.sum(dtype=np.float64)) >= _validation.MAX_COUNT:
        raise ValidationError(
            "the table's counts add up to 2**52 (about 4.5e15) or more, more than postdp "
            "releases exactly"
        )
    out = sparse.csr_array(out, dtype=np.int64)
    out.eliminate_zeros()
    return out


def _induced(geo: Hierarchy, nodes: IntArray) -> Hierarchy:
    """The tree on ``nodes`` (sorted; closed under parents except for one root)."""
    local = np.full(geo.n, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    parent = np.where(geo.parent[nodes] >= 0, local[np.maximum(geo.parent[nodes], 0)], -1)
    return Hierarchy([str(i) for i in geo.ids[nodes]], parent)


def expand(cells: NumArray, geography: Hierarchy, categories: Hierarchy) -> NumArray:
    """Every (geounit, category node) value from detailed cells.

    Parameters
    ----------
    cells : array_like, shape (..., n_geo_leaves, n_detailed) or (..., geography.n, n_detailed)
        The leaf geounits' detailed cells (the parents are their sums), or every geounit's
        (rows in the order of ``geography.ids``, as :func:`postdp.project` returns them).
    geography, categories : Hierarchy

    Returns
    -------
    ndarray, shape (..., geography.n, categories.n)
        Integer input stays integer (exact sums).

    Examples
    --------
    >>> geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> expand([[1, 2], [3, 4]], geo, cat).tolist()
    [[10, 4, 6], [3, 1, 2], [7, 3, 4]]
    >>> expand([[4, 6], [1, 2], [3, 4]], geo, cat).tolist()  # every geounit given
    [[10, 4, 6], [3, 1, 2], [7, 3, 4]]
    """
    arr = np.asarray(cells)
    if arr.ndim < 2 or arr.shape[-1] != categories.leaves.size:
        raise ValidationError(
            f"`cells` must have shape (..., geounits, {categories.leaves.size}); got {arr.shape}"
        )
    lead = arr.shape[:-2]
    if arr.shape[-2] == geography.n:  # every geounit already
        geo_full = arr
    elif arr.shape[-2] == geography.leaves.size:
        geo_full = geography_sums(arr, geography)
    else:
        raise ValidationError(
            f"`cells` must have {geography.leaves.size} (leaf geounits) or {geography.n} "
            f"(every geounit) rows; got {arr.shape[-2]}"
        )
    out = np.zeros((*lead, geography.n, categories.n), dtype=arr.dtype)
    out[..., categories.leaves] = geo_full
    return categories.aggregate(out)


def geography_sums(cells: NumArray, geography: Hierarchy) -> NumArray:
    """Detailed histograms of every geounit, (..., geography.n, n_detailed), from the leaf
    geounits' (..., n_geo_leaves, n_detailed)."""
    arr = np.asarray(cells)
    full = np.zeros((*arr.shape[:-2], geography.n, arr.shape[-1]), dtype=arr.dtype)
    full[..., geography.leaves, :] = arr
    return np.swapaxes(geography.aggregate(np.swapaxes(full, -1, -2)), -1, -2)


def category_matrix(categories: Hierarchy) -> IntArray:
    """Which detailed cells each category node adds up.

    Parameters
    ----------
    categories : Hierarchy
        The category tree.

    Returns
    -------
    ndarray of int64, shape (categories.n, n_detailed)
        1 where the node (row) contains the detailed cell (column, in the order of
        ``categories.leaves``), else 0.

    Examples
    --------
    >>> cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    >>> category_matrix(cat).tolist()
    [[1, 1], [1, 0], [0, 1]]
    """
    leaves = categories.leaves
    out = np.zeros((categories.n, leaves.size), dtype=np.int64)
    out[leaves, np.arange(leaves.size)] = 1
    return categories.aggregate(out.T).T

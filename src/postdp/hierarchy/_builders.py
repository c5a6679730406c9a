"""Vectorised construction of a tree from tables (private): one hash lookup per column, no
Python object per node beyond the ids themselves."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _validation
from postdp._typing import IntArray, NumArray
from postdp._validation import listing
from postdp.errors import AmbiguousIdWarning, HierarchyError, ValidationError
from postdp.hierarchy._checks import _check_unique

_SHOW = 5  # how many offending rows an error message lists
Tree = tuple[npt.NDArray[np.object_], IntArray, NumArray | None]


def text_ids(values: pd.Series[Any], column: str) -> npt.NDArray[np.object_]:
    """Ids as strings; whole floats (ints read next to missing values) lose their '.0'."""
    if pd.api.types.is_float_dtype(values.dtype):
        present = values.dropna()
        if (present != np.round(present)).any():
            raise ValidationError(f"column `{column}` holds non-integer numeric ids")
        whole = values.astype("Int64").astype(str).to_numpy(dtype=object)
        whole[values.isna().to_numpy()] = None
        return whole
    as_object = values.astype(object)
    missing = as_object.isna().to_numpy()
    text = as_object.where(~missing, "").astype(str).str.strip()  # vectorised string ops
    out = text.to_numpy(dtype=object)
    out[missing | (out == "")] = None
    return out


def _require_columns(df: pd.DataFrame, named: Sequence[tuple[str | None, str | None]]) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
    for role, column in named:
        if column is not None and column not in df.columns:
            given = "" if role is None else f" (given as `{role}`)"
            raise ValidationError(
                f"column {column!r}{given} is not in the table; "
                f"its columns are: {', '.join(map(str, df.columns))}"
            )


def _numeric_counts(df: pd.DataFrame, count: str | None, ids: Any) -> NumArray | None:
    if count is None:
        return None
    counts = df[count].to_numpy()
    if counts.dtype == object:
        counts = pd.to_numeric(df[count], errors="coerce").to_numpy()
        if np.isnan(counts).any():
            row = int(np.flatnonzero(np.isnan(counts))[0])
            raise ValidationError(
                f"column {count!r} holds a non-numeric count at row {row} (id {ids[row]!r})"
            )
    return np.asarray(counts)


def tree_from_frame(df: pd.DataFrame, id: str, parent: str, count: str | None) -> Tree:
    """Ids, parent indices and counts of a table with one row per node."""
    _require_columns(df, (("id", id), ("parent", parent), ("count", count)))
    for role, column in (("id", id), ("parent", parent)):
        values = df[column]
        if pd.api.types.is_numeric_dtype(values.dtype) and values.notna().any():
            warnings.warn(
                f"column {column!r} (`{role}`) is numeric, so ids such as FIPS '01' may "
                "have lost their leading zeros; read it as text (dtype=str)",
                AmbiguousIdWarning,
                stacklevel=3,
            )
    ids = text_ids(df[id], id)
    absent = pd.isna(ids)
    if absent.any():
        rows = [int(r) for r in np.flatnonzero(absent)]
        raise HierarchyError(f"column {id!r} has missing ids at rows {rows[:_SHOW]}")
    parents = text_ids(df[parent], parent)
    index = pd.Index(ids)
    if index.has_duplicates:  # hashing, not sorting
        _check_unique(ids)
    has_parent = ~pd.isna(parents)
    found = index.get_indexer(pd.Index(parents[has_parent]))  # hash lookups
    if (found < 0).any():
        orphans = list(parents[has_parent][found < 0])
        raise HierarchyError(f"parent ids that are not nodes (orphans): {listing(orphans)}")
    parent_index = np.full(ids.size, -1, dtype=np.int64)
    parent_index[has_parent] = found
    return ids, parent_index, _numeric_counts(df, count, ids)


def _factorize(values: pd.Series[Any]) -> tuple[IntArray, Any]:
    """Integer codes of a column and its distinct values; integers in a short range are
    numbered by counting (no hashing)."""
    if pd.api.types.is_integer_dtype(values.dtype) and values.size:
        v = values.to_numpy(dtype=np.int64)
        low, high = int(v.min()), int(v.max())
        if high - low <= 2 * v.size + 1024:
            shifted = v - low if low else v
            present = np.bincount(shifted, minlength=high - low + 1) > 0
            number = np.cumsum(present) - 1
            return number[shifted], np.flatnonzero(present) + low
    code, distinct = pd.factorize(values, sort=False)  # hashing, not sorting
    return np.asarray(code, dtype=np.int64), distinct


def _number(keys: IntArray) -> tuple[IntArray, IntArray]:
    """Number distinct keys 0, 1, ... by first appearance (one pass when already sorted);
    also the first position of every number."""
    if keys.size < 2:
        return np.zeros(keys.size, dtype=np.int64), np.zeros(min(keys.size, 1), dtype=np.int64)
    step = np.diff(keys)
    if (step >= 0).all():
        new = step > 0
        out = np.empty(keys.size, dtype=np.int64)
        out[0] = 0
        np.cumsum(new, out=out[1:])
        return out, np.r_[0, np.flatnonzero(new) + 1]
    out = np.asarray(pd.factorize(keys, sort=False)[0], dtype=np.int64)
    first = np.empty(int(out.max()) + 1, dtype=np.int64)
    first[out[::-1]] = np.arange(keys.size - 1, -1, -1)  # first row of every number
    return out, first


def tree_from_codes(
    df: pd.DataFrame,
    columns: Sequence[str],
    count: str | None,
    root: str,
    widths: Sequence[int] | None,
) -> tuple[IntArray, NumArray | None, CodeLabels]:
    """Parent indices, counts and (deferred) ids of the tree whose leaves are ``df``'s rows.

    All the work is on integers: each code column is factorised once (its distinct codes
    are padded and compared as text, a few thousand at most), a node is an integer key of
    its codes, and ids are only assembled by the returned :class:`CodeLabels` when asked
    for. Nodes come level by level; inside a level, families follow their parents' order
    and siblings are sorted by their own code (shorter codes first), so the result is in
    the breadth-first layout every tree algorithm of postdp uses without a permutation.
    """
    columns = list(columns)
    if not columns:
        raise ValidationError("`columns` must name at least one code column")
    _require_columns(df, [(None, c) for c in [*columns, count]])
    if widths is not None and len(widths) != len(columns):
        raise ValidationError(
            f"`widths` needs one width per code column ({len(columns)}); got {len(widths)}"
        )
    leaf_counts = None
    if count is not None:
        leaf_counts = _validation.real_array("counts", pd.to_numeric(df[count]).to_numpy())
        _validation.nonnegative("counts", leaf_counts)
    rows = len(df)
    parents = [np.array([-1], dtype=np.int64)]
    owns: list[IntArray] = []
    texts: list[npt.NDArray[np.object_]] = []
    row_node = np.zeros(rows, dtype=np.int64)  # each row's node at the level above
    node = np.zeros(rows, dtype=np.int64)
    width = offset = 1
    for k, column in enumerate(columns):
        if not pd.api.types.is_integer_dtype(df[column].dtype) and df[column].isna().any():
            raise ValidationError(f"column {column!r} has missing codes")
        code, distinct = _factorize(df[column])
        text = text_ids(pd.Series(distinct), column)
        if any(t is None for t in text):
            raise ValidationError(f"column {column!r} has missing codes")
        if widths is not None:
            text = np.array([t.zfill(widths[k]) for t in text], dtype=object)
        # the same code written two ways (1 and "1", or " 1") is one code
        canonical, text = pd.factorize(text, sort=False)
        by_text = sorted(range(text.size), key=lambda j: (len(text[j]), text[j]))
        rank = np.empty(text.size, dtype=np.int64)
        rank[by_text] = np.arange(text.size)
        code = rank[canonical][code]  # the two small maps composed: one pass over the rows
        text = np.asarray(text, dtype=object)[by_text]  # code j is now the j-th in order
        node, first = _number(row_node * text.size + code if k else code)
        width = first.size
        above, own = row_node[first], code[first]
        level_key = above * text.size + own
        order = np.argsort(level_key) if (np.diff(level_key) < 0).any() else None
        if order is not None:
            above, own = above[order], own[order]
            renumber = np.empty(width, dtype=np.int64)
            renumber[order] = np.arange(width)
            node = renumber[node]
        parents.append(above)
        owns.append(own)
        texts.append(text)
        row_node = offset + node
        offset += width
    labels = CodeLabels(root, tuple(parents[1:]), tuple(owns), tuple(texts))
    if width < rows:
        counts_per_leaf = np.bincount(node, minlength=width)
        repeated = labels.select(len(columns), np.flatnonzero(counts_per_leaf > 1))
        raise HierarchyError(f"duplicate leaf codes: {listing(sorted(repeated))}")
    labels.check_apart()
    parent = np.concatenate(parents)
    if leaf_counts is None:
        return parent, None, labels
    counts = np.zeros(parent.size, dtype=leaf_counts.dtype)
    counts[row_node] = leaf_counts
    bounds = np.cumsum([1] + [p.size for p in parents[1:]])
    for k in range(len(columns), 0, -1):
        lo, hi = bounds[k - 1], bounds[k]
        above = parent[lo:hi]  # sorted: families are contiguous
        start = np.flatnonzero(np.diff(above, prepend=-1))
        counts[above[start]] += np.add.reduceat(counts[lo:hi], start)
    return parent, counts, labels


@dataclass(frozen=True)
class CodeLabels:
    """The ids of a tree built from code columns, assembled on demand (private).

    A node's id is its parent's id (the root's excepted) followed by its own code.
    """

    root: str
    parents: tuple[IntArray, ...]  # per level: global index of each node's parent
    owns: tuple[IntArray, ...]  # per level: each node's code, an index into ``texts``
    texts: tuple[npt.NDArray[np.object_], ...]  # per level: the distinct codes as text

    def lengths(self) -> list[IntArray]:
        """Length of every id, level by level (root first), without making the ids."""
        out = [np.array([len(self.root)], dtype=np.int64)]
        below = np.zeros(1, dtype=np.int64)  # id length of every node so far, minus root's
        for parent, own, text in zip(self.parents, self.owns, self.texts, strict=True):
            sizes = np.array([len(t) for t in text], dtype=np.int64)[own]
            length = (below[parent] if len(out) > 1 else 0) + sizes
            out.append(length)
            below = np.concatenate([below, length])
        return out

    def check_apart(self) -> None:
        """Ids are unique inside a level by construction; across levels when lengths differ."""
        spans = [(int(x.min()), int(x.max())) for x in self.lengths()[1:]]
        apart = all(spans[k][1] < spans[k + 1][0] for k in range(len(spans) - 1))
        root_clear = self.root not in set(self.texts[0]) and not any(
            low <= len(self.root) <= high for low, high in spans[1:]
        )
        if not (apart and root_clear):
            _check_unique(self())

    def select(self, level: int, nodes: IntArray) -> list[str]:
        """Ids of some nodes of one level (1 = first level below the root)."""
        ids = self()
        start = 1 + sum(p.size for p in self.parents[: level - 1])
        return [str(i) for i in ids[start + nodes]]

    def __call__(self) -> npt.NDArray[np.object_]:
        ids = np.array([self.root], dtype=object)
        for k, (parent, own, text) in enumerate(
            zip(self.parents, self.owns, self.texts, strict=True)
        ):
            level = text[own] if k == 0 else ids[parent] + text[own]
            ids = np.concatenate([ids, level])
        return ids

"""Validation of a hierarchy's ids and true counts (private): messages name ids and
relative gaps, never a count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, IntArray, NumArray
from postdp.errors import HierarchyError, ValidationError

_SHOW = 5  # how many offending ids an error message lists


def _listing(ids: Sequence[Any] | npt.NDArray[Any]) -> str:
    shown = ", ".join(repr(str(i)) for i in ids[:_SHOW])
    return shown + (f" (and {len(ids) - _SHOW} more)" if len(ids) > _SHOW else "")


def _check_unique(ids: npt.NDArray[np.object_]) -> None:
    index = pd.Index(ids.astype(str))
    if index.has_duplicates:  # hashing, not sorting
        dup = sorted(set(index[index.duplicated()]))
        raise HierarchyError(f"duplicate ids: {_listing(dup)}")


def _check_counts(counts: ArrayLike, ids: npt.NDArray[np.object_], parent: IntArray) -> NumArray:
    """Validate true counts; messages name ids and relative gaps, never a count."""
    values = _validation.real_array("counts", counts)
    if values.shape != ids.shape:
        raise ValidationError(f"`counts` must have shape {ids.shape}; got {values.shape}")
    negative = np.flatnonzero(values < 0)
    if negative.size:
        raise HierarchyError(f"counts must be nonnegative; negative at {_listing(ids[negative])}")
    child = np.flatnonzero(parent >= 0)
    internal = np.bincount(parent[child], minlength=ids.size) > 0
    if values.dtype == np.int64:
        if np.abs(values).max(initial=0) > 2**62:
            raise HierarchyError("counts must be below 2**62 to be added up exactly in int64")
        sums = np.zeros(ids.size, dtype=np.int64)
        np.add.at(sums, parent[child], values[child])  # exact integer arithmetic
        bad = np.flatnonzero(internal & (sums != values))
    else:
        if np.abs(values).max(initial=0.0) > 2.0**53:
            raise HierarchyError(
                "counts above 2**53 cannot be checked exactly as floats; pass them as integers"
            )
        sums = np.bincount(parent[child], weights=values[child], minlength=ids.size)
        tol = 1e-9 * np.maximum(1.0, np.abs(values))
        bad = np.flatnonzero(internal & (np.abs(sums - values) > tol))
    if bad.size:
        first = bad[0]
        gap = abs(float(sums[first]) - float(values[first])) / max(1.0, float(values[first]))
        raise HierarchyError(
            "every parent must equal the sum of its children; they differ at "
            f"{_listing(ids[bad])} (at {ids[first]!r} by {gap:.2g} of the parent's count)"
        )
    return values

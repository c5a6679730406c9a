"""Validation of a hierarchy's ids and true counts (private): messages name ids and
relative gaps, never a count."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from postdp import _validation
from postdp._typing import ArrayLike, NumArray
from postdp._validation import listing
from postdp.errors import HierarchyError, ValidationError

if TYPE_CHECKING:
    from postdp.hierarchy._tree import Hierarchy


def _check_unique(ids: npt.NDArray[np.object_]) -> None:
    """Raise on a repeated id ("1" and 1 count as the same id)."""
    if pd.api.types.infer_dtype(ids, skipna=False) != "string":
        ids = np.array([str(i) for i in ids], dtype=object)
    index = pd.Index(ids)
    if index.has_duplicates:  # hashing, not sorting
        dup = sorted(set(index[index.duplicated()]))
        raise HierarchyError(f"duplicate ids: {listing(dup)}")


def _check_counts(counts: ArrayLike, h: Hierarchy) -> NumArray:
    """Validate true counts; messages name ids and relative gaps, never a count.

    Family sums are taken over the contiguous families of the layout (``np.add.reduceat``),
    exactly in int64 for integer counts.
    """
    values = _validation.real_array("counts", counts)
    n = h.parent.size
    if values.shape != (n,):
        raise ValidationError(f"`counts` must have shape ({n},); got {values.shape}")
    if values.min() < 0:
        negative = np.flatnonzero(values < 0)
        raise HierarchyError(f"counts must be nonnegative; negative at {listing(h.ids[negative])}")
    exact = values.dtype == np.int64
    if exact and values.max() > 2**62:
        raise HierarchyError("counts must be below 2**62 to be added up exactly in int64")
    if not exact and values.max() > 2.0**53:
        raise HierarchyError(
            "counts above 2**53 cannot be checked exactly as floats; pass them as integers"
        )
    lay = h.layout
    laid = values if lay.identity else values[lay.order]
    for d in range(len(lay.starts)):
        c0, c1 = lay.bounds[d + 1], lay.bounds[d + 2]
        sums = np.add.reduceat(laid[c0:c1], lay.starts[d])
        given = laid[lay.parents[d]]
        if exact:
            bad = np.flatnonzero(sums != given)
        else:
            bad = np.flatnonzero(np.abs(sums - given) > 1e-9 * np.maximum(1.0, np.abs(given)))
        if bad.size:
            nodes = lay.order[lay.parents[d][bad]]
            first = int(bad[0])
            gap = abs(float(sums[first]) - float(given[first])) / max(1.0, float(given[first]))
            raise HierarchyError(
                "every parent must equal the sum of its children; they differ at "
                f"{listing(h.ids[nodes])} (at {h.ids[nodes[0]]!r} by {gap:.2g} of the "
                "parent's count)"
            )
    return values

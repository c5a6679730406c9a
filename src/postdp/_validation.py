"""Check-and-normalise helpers shared by the public functions (private).

Each helper validates one kind of input, raises an error that names the parameter, states the
rule and shows the value received, and returns the normalised value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from postdp._typing import ArrayLike, FloatArray, IntArray, SizeLike
from postdp.errors import ValidationError

#: Largest integer magnitude accepted: leaves headroom for noise below 2**63.
_INT64_SAFE = 2**62


#: Largest total a table release accepts, and the one limit the command line states for
#: every count: below 2**52 (about 4.5e15) float64 still holds fractions, so noisy values
#: can be rounded and their sums checked exactly.
MAX_COUNT = 2**52


def positive_real(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a real number, finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}")
    out = float(value)
    if not math.isfinite(out) or out <= 0:
        raise ValidationError(f"`{name}` must be positive and finite; got {value!r}")
    return out


def fraction(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a real number in (0, 1]."""
    out = positive_real(name, value)
    if out > 1:
        raise ValidationError(f"`{name}` must be in (0, 1]; got {value!r}")
    return out


def _first_bad(mask: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> str:
    index = tuple(int(i) for i in np.argwhere(mask)[0])
    where = index[0] if len(index) == 1 else index
    return f"{values[index].item()!r} at index {where}"


def real_array(name: str, values: ArrayLike) -> FloatArray | IntArray:
    """Return ``values`` as a finite int64 or float64 array (integers stay integers)."""
    arr = np.asarray(values)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.floating)
        or arr.dtype == np.bool_
    ):
        raise TypeError(f"`{name}` must be an array of real numbers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.max(initial=0) > _INT64_SAFE:
        raise ValidationError(
            f"`{name}` has integers too large for int64; got max {arr.max().item()!r}"
        )
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        return arr.astype(np.int64, copy=False)
    arr = arr.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):  # NaN and inf carry into the sum: one fast pass
        total = float(arr.sum())
    if math.isfinite(total):
        return arr
    bad = ~np.isfinite(arr)  # a non-finite sum may also be an overflow of finite values
    if bad.any():
        raise ValidationError(
            f"`{name}` must be finite (no NaN or inf); got {_first_bad(bad, arr)}"
        )
    return arr


def integer_array(name: str, values: ArrayLike) -> IntArray:
    """Return ``values`` as int64, accepting floats only when they hold whole numbers."""
    arr = real_array(name, values)
    if arr.dtype == np.int64:
        if arr.size and (arr.max() > _INT64_SAFE or arr.min() < -_INT64_SAFE):
            raise ValidationError(
                f"`{name}` has integers too large for int64 arithmetic with noise (at most "
                "2**62 in magnitude)"
            )
        return arr.astype(np.int64, copy=False)
    frac = arr != np.round(arr)
    if frac.any():
        raise ValidationError(f"`{name}` must hold integers; got {_first_bad(frac, arr)}")
    if np.abs(arr).max(initial=0.0) >= 2.0**62:
        raise ValidationError(
            f"`{name}` has integers too large for int64; got max {np.abs(arr).max()!r}"
        )
    return arr.astype(np.int64)


def nonnegative(name: str, arr: FloatArray | IntArray) -> None:
    """Raise unless every entry of ``arr`` is >= 0."""
    neg = arr < 0
    if neg.any():
        raise ValidationError(f"`{name}` must be nonnegative; got {_first_bad(neg, arr)}")


def size_tuple(size: SizeLike) -> tuple[int, ...]:
    """Normalise a numpy-style ``size`` (None, int or tuple of ints) to a tuple."""
    if size is None:
        return ()
    if isinstance(size, int | np.integer):
        dims: tuple[Any, ...] = (size,)
    elif isinstance(size, tuple | list):
        dims = tuple(size)
    else:
        raise TypeError(f"`size` must be an int or a tuple of ints; got {size!r}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer):
            raise TypeError(f"`size` must be an int or a tuple of ints; got {size!r}")
        if d < 0:
            raise ValidationError(f"`size` must be nonnegative; got {size!r}")
        out.append(int(d))
    return tuple(out)


def float_array(name: str, values: ArrayLike) -> FloatArray:
    """``values`` as a finite float64 array."""
    return real_array(name, values).astype(np.float64)


def finite_real(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}")
    out = float(value)
    if not math.isfinite(out):
        raise ValidationError(f"`{name}` must be finite; got {value!r}")
    return out


def nonnegative_real(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is finite and >= 0."""
    out = finite_real(name, value)
    if out < 0:
        raise ValidationError(f"`{name}` must be nonnegative; got {value!r}")
    return out


def listing(ids: Sequence[Any] | npt.NDArray[Any], show: int = 5) -> str:
    """The first ``show`` ids, quoted, for an error message ("and N more" after them)."""
    shown = ", ".join(repr(str(i)) for i in ids[:show])
    return shown + (f" (and {len(ids) - show} more)" if len(ids) > show else "")

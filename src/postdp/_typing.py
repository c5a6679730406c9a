"""Type aliases shared across postdp (private)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

ArrayLike: TypeAlias = npt.ArrayLike
BoolArray: TypeAlias = npt.NDArray[np.bool_]
FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
#: int64 or float64 array (integer mechanisms keep integers integer).
NumArray: TypeAlias = npt.NDArray[Any]
RNGLike: TypeAlias = int | np.random.Generator | np.random.SeedSequence | None
SizeLike: TypeAlias = int | tuple[int, ...] | None
PrivacyMeasure: TypeAlias = Literal["pure", "zcdp"]

"""Published tables: the rows an agency prints, each a sum of a schema's detailed cells.

A printed table (the 2020 redistricting table P1, "Race": a total, "Population of one
race", "White alone", ...) is a linear map of a geounit's histogram. Its rows overlap (the
total holds every other row), so it is no :class:`~postdp.tables.Marginal`, whose counts
partition the cells. But it is a few *blocks* of rows, each a Kronecker product of one
small factor per attribute (a 0/1 matrix whose rows may overlap): P1 is one block (every
attribute but race summed out, race by a 71 x 63 factor), P2 three (the total, the
Hispanic count, the non-Hispanic rows by race). A block is applied to a batch of
histograms attribute by attribute, never as a full matrix, and the same factors give the
exact variance of its rows under generalised least squares in the marginal basis
(:meth:`postdp.postprocess.TableProjector.table_variances`), where a row's variance is not
the sum of its cells' variances.

:func:`postdp.data.pl94_tables` builds the 2020 P.L. 94-171 tables P1 to P5 and H1 with
these classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from postdp._typing import FloatArray, NumArray
from postdp.errors import ValidationError
from postdp.tables.schema import Schema, apply_factors

__all__ = ["Block", "PublishedTable"]


@dataclass(frozen=True, eq=False)
class Block:
    """Rows of a published table that are one Kronecker product of per-attribute factors.

    Parameters
    ----------
    codes : sequence of str
        The rows' variable names, in the C order of :attr:`shape` (the last attribute's
        rows varying fastest).
    factors : sequence of ndarray
        One per schema attribute: a matrix (rows, the attribute's levels); an identity
        keeps the attribute, a row of ones sums it out.

    Examples
    --------
    >>> import numpy as np
    >>> b = Block(["all", "odd"], [np.ones((1, 2)), np.array([[1.0, 1, 1], [0, 1, 0]])])
    >>> b.shape, b.apply(np.arange(6.0)).tolist()
    ((1, 2), [15.0, 5.0])
    """

    codes: tuple[str, ...]
    factors: tuple[FloatArray, ...] = field(repr=False)

    def __init__(self, codes: Sequence[str], factors: Sequence[FloatArray]) -> None:
        fs = tuple(np.atleast_2d(np.asarray(f, np.float64)) for f in factors)
        if any(f.ndim != 2 for f in fs):
            raise ValidationError("a block's factors must be matrices (rows, levels)")
        object.__setattr__(self, "codes", tuple(str(c) for c in codes))
        object.__setattr__(self, "factors", fs)
        if len(self.codes) != self.size:
            raise ValidationError(
                f"a block of shape {self.shape} has {self.size} rows; got {len(self.codes)} codes"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """Rows along each attribute."""
        return tuple(f.shape[0] for f in self.factors)

    @property
    def size(self) -> int:
        """Rows of the block."""
        return math.prod(self.shape)

    @property
    def levels(self) -> tuple[int, ...]:
        """Levels of each attribute (the factors' columns)."""
        return tuple(f.shape[1] for f in self.factors)

    def apply(self, x: FloatArray) -> FloatArray:
        """The block's rows of histograms ``x`` of shape (..., cells): shape (..., size)."""
        x = np.asarray(x)
        if x.shape[-1:] != (math.prod(self.levels),):
            raise ValidationError(
                f"histograms must have {math.prod(self.levels)} cells on the last axis; "
                f"got {x.shape}"
            )
        return apply_factors(x, self.levels, self.factors)


@dataclass(frozen=True, eq=False)
class PublishedTable:
    """A printed table of a schema: named rows, each a sum of the schema's detailed cells.

    Parameters
    ----------
    name : str
        The table's id (``"P1"``).
    title : str
        Its title (``"Race"``).
    universe : str
        Who or what it counts (``"Total population"``), the unit of every row and error.
    schema : Schema
        The histogram it is tabulated from.
    blocks : sequence of Block
        Its rows; the table's row order is the blocks' rows in turn.
    labels : sequence of str
        A label for every row, in table order.
    unit : str, default "persons"
        The unit of a count (``"housing units"`` for H1).

    Examples
    --------
    >>> import numpy as np
    >>> from postdp.tables import Attribute, Schema
    >>> s = Schema([Attribute("age", ["child", "adult"])])
    >>> t = PublishedTable("T1", "Age", "Total population", s,
    ...     [Block(["T1_001", "T1_002"], [np.array([[1.0, 1], [0, 1]])])],
    ...     ["Total", "Adults"])
    >>> t.codes, t.apply(np.array([3.0, 4.0])).tolist()
    (('T1_001', 'T1_002'), [7.0, 4.0])
    """

    name: str
    title: str
    universe: str
    schema: Schema = field(repr=False)
    blocks: tuple[Block, ...] = field(repr=False)
    labels: tuple[str, ...] = field(repr=False)
    unit: str = "persons"

    def __init__(
        self,
        name: str,
        title: str,
        universe: str,
        schema: Schema,
        blocks: Sequence[Block],
        labels: Sequence[str],
        *,
        unit: str = "persons",
    ) -> None:
        for k, v in {"name": name, "title": title, "universe": universe, "unit": unit}.items():
            object.__setattr__(self, k, str(v))
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "blocks", tuple(blocks))
        object.__setattr__(self, "labels", tuple(str(x) for x in labels))
        for b in self.blocks:
            if b.levels != schema.shape:
                raise ValidationError(
                    f"table {name}: a block has factors over {b.levels} levels; the schema "
                    f"has {schema.shape}"
                )
        if len(set(self.codes)) != len(self.codes) or len(self.labels) != len(self.codes):
            raise ValidationError(f"table {name}: codes must be unique, one label each")

    @property
    def codes(self) -> tuple[str, ...]:
        """The variable names, in table order."""
        return tuple(c for b in self.blocks for c in b.codes)

    @property
    def size(self) -> int:
        """Rows of the table."""
        return sum(b.size for b in self.blocks)

    def apply(self, x: NumArray) -> NumArray:
        """The table of histograms ``x`` of shape (..., cells): shape (..., size), columns in
        :attr:`codes` order (whole numbers stay whole)."""
        x = np.asarray(x)
        if x.shape[-1:] != (self.schema.size,):
            raise ValidationError(
                f"table {self.name}: histograms must have {self.schema.size} cells on the "
                f"last axis; got {x.shape}"
            )
        parts = [b.apply(x) for b in self.blocks]
        out = np.concatenate(parts, axis=-1)
        if np.issubdtype(x.dtype, np.integer):
            return np.rint(out).astype(np.int64)
        return out

    def matrix(self) -> FloatArray:
        """The dense (rows, cells) matrix (for checks; a large schema's is large)."""
        return np.asarray(self.apply(np.eye(self.schema.size)).T, dtype=np.float64)

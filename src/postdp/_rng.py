"""Random-number plumbing for the study path (private).

Only the study path (Monte Carlo, reproducible analyses) uses numpy generators; the release
path draws from OpenDP's cryptographically seeded samplers and never touches these helpers.

Reproducibility across batch sizes and workers comes from *blocks*: a run of ``n_rows`` draws
is cut into fixed blocks whose size depends only on the number of entities per row (never on
the batch a caller asks for), and each block gets its own child stream spawned from one
``SeedSequence``.  Any grouping of the blocks into batches or workers then gives the same
numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from postdp._typing import RNGLike
from postdp.errors import ValidationError

#: Each block holds at least this many random values (rows x entities).
BLOCK_VALUES = 1 << 16


def _seed_sequence(rng: RNGLike) -> np.random.SeedSequence | np.random.Generator:
    if isinstance(rng, np.random.Generator | np.random.SeedSequence):
        return rng
    if rng is None:
        return np.random.SeedSequence()
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer):
        raise TypeError(
            "`rng` must be an int seed, a numpy.random.Generator, a SeedSequence or None; "
            f"got {type(rng).__name__}"
        )
    if rng < 0:
        raise ValidationError(f"`rng` must be a nonnegative seed; got {rng}")
    return np.random.SeedSequence(int(rng))


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Normalise ``rng`` (seed, ``SeedSequence``, ``Generator`` or None) to a ``Generator``."""
    return np.random.default_rng(_seed_sequence(rng))


def spawn(rng: RNGLike, n: int) -> list[np.random.Generator]:
    """Return ``n`` independent child generators derived from ``rng``.

    Seeds and ``SeedSequence`` objects spawn children of their seed sequence; a ``Generator``
    spawns from its own (advancing its spawn counter, so two calls give different children).
    """
    source = _seed_sequence(rng)
    if isinstance(source, np.random.Generator):
        return source.spawn(n)
    return [np.random.default_rng(child) for child in source.spawn(n)]


def block_rows(n_entities: int) -> int:
    """Rows per block for arrays with ``n_entities`` values per row (depends on nothing else)."""
    return max(1, math.ceil(BLOCK_VALUES / max(1, n_entities)))


def iter_blocks(
    rng: RNGLike, n_rows: int, n_entities: int
) -> Iterator[tuple[int, np.random.Generator]]:
    """Yield ``(rows, generator)`` for consecutive blocks that cover ``n_rows`` rows."""
    per_block = block_rows(n_entities)
    n_blocks = math.ceil(n_rows / per_block)
    for index, gen in enumerate(spawn(rng, n_blocks)):
        yield min(per_block, n_rows - index * per_block), gen

"""The content digest of an input: what makes two inputs the same input to the ledger.

A ledger record holds two digests of its input: ``input_sha256``, of the file's bytes, and
``input_content_sha256`` (:data:`~postdp.privacy.CONTENT_KEY`), of its content: the
counts or the records read, in a canonical order or as a multiset, so the same counts saved
with CRLF line endings, another column order, rows in another order or (``postdp
measure``'s Parquet) another partitioning are the same input. A record counts against an
input when either digest matches (:func:`~postdp.privacy.same_input`). Records written
before the content digest existed have only ``input_sha256``: they still count for an input
of the same bytes, but not for a re-saved copy of it (their content was never recorded).

``postdp release`` digests a hierarchy (:func:`hierarchy_content`) or a table
(:func:`table_content`, also :func:`postdp.tables.measure`'s input); ``postdp measure``
digests person records or block histograms as multisets (:func:`multiset_digest`), read once
more before the draw; :meth:`Mechanism.release <postdp.mechanisms.Mechanism.release>`
digests its array (:func:`array_content`).
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["array_content", "hierarchy_content", "multiset_digest", "table_content"]

_CONTENT_VERSION = b"postdp input content v1\n"


def hierarchy_content(h: Any) -> str:
    """SHA-256 of a hierarchy's content: each leaf's id and count, ordered by id.

    The inner nodes' counts are the sums of the leaves' (checked when the hierarchy was
    built), so the leaves say who is counted; the tree above them, the order of the rows
    and how the file spells them (line endings, quoting, ``5`` or ``5.0``) do not enter.
    """
    import numpy as np

    leaves = np.asarray(h.leaves)
    ids = np.asarray(h.ids)[leaves].astype(str)
    counts = np.asarray(h.counts, dtype=np.float64)[leaves]
    order = np.argsort(ids, kind="stable")
    digest = hashlib.sha256(_CONTENT_VERSION + b"hierarchy\n")
    for i in order:
        digest.update(f"{ids[i]}\t{float(counts[i])!r}\n".encode())
    return digest.hexdigest()


def table_content(table: Any) -> str:
    """SHA-256 of a table's content: the detailed counts of every leaf geounit, rows
    ordered by geounit id and columns by category code (as :func:`hierarchy_content`)."""
    import numpy as np

    geo, cat = table.geography, table.categories
    rows = np.asarray(geo.ids)[np.asarray(geo.leaves)].astype(str)
    columns = np.asarray(cat.ids)[np.asarray(cat.leaves)].astype(str)
    by_row, by_column = np.argsort(rows, kind="stable"), np.argsort(columns, kind="stable")
    cells = np.asarray(table.dense_cells(), dtype=np.int64)[by_row][:, by_column]
    digest = hashlib.sha256(_CONTENT_VERSION + b"table\n")
    digest.update("\t".join(columns[by_column]).encode() + b"\n")
    digest.update("\t".join(rows[by_row]).encode() + b"\n")
    digest.update(np.ascontiguousarray(cells).astype("<i8").tobytes())
    return digest.hexdigest()


def _mix(x: Any) -> Any:
    """A 64-bit mixing function (splitmix64's finaliser) on an array of uint64."""
    import numpy as np

    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_KEYS = (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03)


def multiset_digest(kind: str, batches: Any) -> str:
    """SHA-256 of a multiset of (key, attribute) pairs with multiplicities, whatever their
    order, batching or files: each pair hashed to 128 bits (two 64-bit mixes), the hashes
    summed (modulo 2**64) with their multiplicities. ``batches`` yields (keys, attributes,
    multiplicities) as int64 arrays; ``kind`` names what they are.

    Examples
    --------
    >>> import numpy as np
    >>> a = multiset_digest("pairs", [(np.array([1, 2]), np.array([5, 6]), np.array([1, 1]))])
    >>> b = multiset_digest("pairs", [(np.array([2]), np.array([6]), np.array([1])),
    ...                               (np.array([1]), np.array([5]), np.array([1]))])
    >>> a == b
    True
    """
    import numpy as np

    sums = [np.uint64(0), np.uint64(0)]
    total = 0
    with np.errstate(over="ignore"):
        for keys, attributes, weights in batches:
            k = np.asarray(keys, dtype=np.int64).astype(np.uint64)
            a = np.asarray(attributes, dtype=np.int64).astype(np.uint64)
            w = np.asarray(weights, dtype=np.int64).astype(np.uint64)
            total += int(np.asarray(weights, dtype=np.int64).sum())
            for j, seed in enumerate(_KEYS):
                h = _mix(k ^ _mix(a + np.uint64(seed)))
                sums[j] = np.uint64(sums[j] + np.sum(h * w, dtype=np.uint64))
    text = f"postdp input content v1\n{kind}\n{total}\n{int(sums[0])}\n{int(sums[1])}\n"
    return hashlib.sha256(text.encode()).hexdigest()


def array_content(values: Any) -> str:
    """SHA-256 of an array's content: its shape and its values as little-endian int64 (an
    integer array) or float64, in C order, so the same counts give the same digest whatever
    their dtype's width or memory layout.

    Examples
    --------
    >>> array_content([1, 2, 3]) == array_content(__import__("numpy").array([1, 2, 3], "i4"))
    True
    """
    import numpy as np

    a = np.asarray(values)
    kind = "<i8" if a.dtype.kind in "iub" else "<f8"
    digest = hashlib.sha256(_CONTENT_VERSION + b"array\n")
    digest.update(f"{kind}\t{a.shape}\n".encode())
    digest.update(np.ascontiguousarray(a.astype(kind)).tobytes())
    return digest.hexdigest()

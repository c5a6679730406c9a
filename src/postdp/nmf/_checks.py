"""What a damaged run is refused for (private): a file that is not readable Parquet, an
answer that cannot be a noisy count, a partition folder missing, and rows that do not
account for each geounit once or for as many geounits as the run's manifest records. The
reader (:mod:`._read`) calls these as it reads; each refusal is one line naming the file
(or folder), the geocode and the query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from postdp.errors import ValidationError
from postdp.mechanisms import DiscreteGaussian, DoubleGeometric, Gaussian, Laplace
from postdp.nmf import _layout as layout
from postdp.nmf._io import BYPASS_QUERY

#: One folder's rows without their arrays, and the arrays: every row's ``value`` is
#: ``flat[_start : _start + _len]``; its ``query_shape`` the columns ``_s0``, ``_s1``, ...;
#: ``_file`` (categorical) the file it was read from.
Rows = tuple[pd.DataFrame, np.ndarray]

#: An answer this large or larger (in absolute value) is refused: no count comes near it
#: (the world's population is under 2**33), so it is damage, not noise, and a float of
#: that size no longer holds a whole number exactly.
IMPLAUSIBLE = 2**62

#: The mechanisms whose noisy answers are whole numbers (by their manifest names).
_DISCRETE = frozenset(
    c.name for c in (Laplace, DoubleGeometric, Gaussian, DiscreteGaussian) if c.discrete
)


def discrete_query(manifest: dict[str, Any] | None, level: int, query: str) -> bool:
    """Whether the noisy answers of ``query`` at ``level`` must be whole numbers.

    Parameters
    ----------
    manifest : dict or None
        The run's manifest; None for a run postdp did not write (the Census's runs, whose
        noise is the discrete Gaussian).
    level : int
        The geographic level (the root is 0).
    query : str
        The query's name without its suffix.

    Returns
    -------
    bool
        True for a run without a manifest; for a version-2 manifest, whether the
        measurement it records for ``query`` at ``level`` has a discrete mechanism
        (``geometric``, ``discrete-gaussian``; a query it does not record is refused later,
        by the workload's rebuild, so True here); for a version-1 manifest, whether the
        run's one ``mechanism`` is discrete (``laplace``, ``gaussian``, ``mixed``: only
        finiteness and size are checked).
    """
    if manifest is None:
        return True
    records = manifest.get("measurements")
    if isinstance(records, list):
        for e in records:
            mine = isinstance(e, dict) and (e.get("level"), e.get("query")) == (level, query)
            if mine and e.get("mechanism") is not None:
                return e.get("mechanism") in _DISCRETE
        return True
    return manifest.get("mechanism") in _DISCRETE


def bad_answer(values: np.ndarray, discrete: bool | np.ndarray) -> tuple[int, str] | None:
    """The first answer that cannot be a noisy count, and what is wrong with it.

    Parameters
    ----------
    values : ndarray
        Answers, flat (integers or floats).
    discrete : bool or ndarray of bool
        Whether each answer's query is answered by a discrete mechanism (one flag for all,
        or one per answer): its answers must then be whole numbers.

    Returns
    -------
    (int, str) or None
        The position of the first bad answer and why, or None when every answer is finite,
        of size under :data:`IMPLAUSIBLE`, and a whole number where ``discrete``.

    Examples
    --------
    >>> bad_answer(np.array([3.0, -2.0, np.nan]), True)
    (2, 'is not a number (NaN)')
    >>> bad_answer(np.array([3.0, 2.5]), np.array([True, False])) is None
    True
    """
    v = np.asarray(values)
    if not v.size:
        return None
    sound = v.min() > -IMPLAUSIBLE and v.max() < IMPLAUSIBLE  # NaN compares False: not sound
    if sound and (v.dtype.kind != "f" or not np.any(discrete) or np.array_equal(v, np.rint(v))):
        return None  # the common case, without a mask per test
    huge = (v >= IMPLAUSIBLE) | (v <= -IMPLAUSIBLE)
    if v.dtype.kind != "f":
        tests = [(huge, "is 2**62 or more in size (no count is)")]
    else:
        finite = np.isfinite(v)
        tests = [
            (np.isnan(v), "is not a number (NaN)"),
            (np.isinf(v), "is infinite"),
            (huge & finite, "is 2**62 or more in size (no count is)"),
            (np.asarray(discrete) & finite & (v != np.rint(v)),
             "is not a whole number (the run's mechanism is discrete)"),
        ]  # fmt: skip
    found = [(int(np.argmax(bad)), why) for bad, why in tests if bad.any()]
    return min(found) if found else None


def _discrete_rows(manifest: dict[str, Any] | None, level: int) -> Any:
    """``query name -> whether its answers at ``level`` must be whole numbers``."""
    return lambda query: discrete_query(manifest, level, query)


def _whole_rows(query: str) -> bool:
    """``Constraint`` rows: invariants and bounds are counts, whole numbers."""
    return True


def _refuse_missing_folder(level: Path, part: str | None, manifest: Any) -> None:
    """Refuse a level's partition folder that a run must have: for a run postdp wrote,
    both ``DPQuery`` and ``Constraint`` (it writes a file in each, even with no rows); for
    another, at least one (a folder with no rows may be left out, as Spark does: a level
    whose geounits in a subtree were all bypassed has no ``DPQuery`` folder there)."""
    held = []
    for kind in (layout.DPQUERY, layout.CONSTRAINT):
        where = level / kind if part is None else level / kind / layout.folder(part)
        held.append((where, where.is_dir() and any(where.glob("*.parquet"))))
    lacking = [w for w, ok in held if not ok]
    if manifest is None and len(lacking) < 2:
        return
    if lacking:
        what = "" if part is None else f" of subtree {part!r}"
        raise ValidationError(
            f"{lacking[0]}: missing (no Parquet file there): the rows of level "
            f"{level.name.removesuffix('.parquet')}{what} are gone"
        )


def _table(pq: Any, path: Path, rows: Any) -> Any:
    """A Parquet file's rows (those ``rows`` picks), its pages' checksums verified where
    written; a file that cannot be read (truncated, bytes changed) refused, naming it."""
    import pyarrow as pa

    try:
        return pq.read_table(path, filters=rows, page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError, EOFError) as err:
        text = " ".join(str(err).split()).replace(
            f"Could not open Parquet input source '{path}': ", ""
        )
        raise ValidationError(f"{path}: not a readable Parquet file ({text})") from None


def _numbers(table: Any, value: Any, offsets: np.ndarray, path: Path, discrete: Any) -> np.ndarray:
    """The ``value`` column's answers, flat: int64 when stored as integers, else float64
    (never cast to integers); refused, naming the file, the geocode and the query, where a
    value is null or :func:`bad_answer` refuses one."""
    import pyarrow as pa

    raw = value.flatten()
    if not (pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type)):
        raise ValidationError(f"{path}: `value` holds lists of {raw.type}, not of numbers")
    lengths = np.diff(offsets)
    if value.null_count or raw.null_count:
        row = int(np.argmax(np.asarray(value.is_null())))
        if not value.null_count:
            at = int(np.argmax(np.asarray(raw.is_null())))
            row = int(np.searchsorted(offsets - offsets[0], at, side="right")) - 1
        raise ValidationError(f"{_named(table, path, row)}: an answer is missing (null)")
    flat: np.ndarray
    if pa.types.is_integer(raw.type):
        numbers = np.asarray(raw.to_numpy())
        found = bad_answer(numbers, False)
        flat = numbers.astype(np.int64, copy=False) if found is None else numbers
    else:
        flat = np.asarray(raw.to_numpy(), dtype=np.float64)
        names = table.column("query_name").combine_chunks().dictionary_encode()
        labels = np.array(
            [bool(discrete(layout.strip_suffix(str(n)))) for n in names.dictionary.to_pylist()],
            dtype=bool,
        )
        per_row = (
            labels[np.asarray(names.indices, dtype=np.int64)] if len(labels) else np.zeros(0, bool)
        )
        found = bad_answer(flat, np.repeat(per_row, lengths))
    if found is not None:
        at, why = found
        row = int(np.searchsorted(offsets - offsets[0], at, side="right")) - 1
        raise ValidationError(f"{_named(table, path, row)}: an answer {why}")
    return flat


def _named(table: Any, path: Path, row: int) -> str:
    """``<file>: geocode '...', query '...'`` of a row of a file (names as stored)."""
    geocode = table.column("geocode")[row].as_py()
    query = table.column("query_name")[row].as_py()
    return f"{path}: geocode {geocode!r}, query {query!r}"


def _account(frames: list[tuple[Rows, Rows]], names: Sequence[str], manifest: Any) -> None:
    """Refuse rows that do not account for each geounit once: a geocode in another
    subtree's folder (or at the root level, not the root's), a (geocode, query) given
    twice (``Constraint``: with the same sign), a geounit that answers some of its level's
    noisy queries but not others, and, in a run postdp wrote, a geounit only in
    ``Constraint`` without its bypass row."""
    for d, ((dp, dp_flat), (con, con_flat)) in enumerate(frames):
        level = names[d]
        for frame, flat, keys in (
            (dp, dp_flat, ("geocode", "query_name")),
            (con, con_flat, ("geocode", "query_name", "sign")),
        ):
            _in_partition(frame, d)
            _once(frame, flat, keys)
        if not len(dp):
            continue
        geocodes, unique = pd.factorize(dp["geocode"])
        queries, asked = pd.factorize(dp["query_name"])
        answered = np.bincount(geocodes, minlength=unique.size)
        if (answered < asked.size).any():  # once each (checked above), so fewer: a gap
            g = int(np.argmax(answered < asked.size))
            have = set(queries[geocodes == g].tolist())
            query = next(str(asked[q]) for q in range(asked.size) if q not in have)
            file = dp["_file"].to_numpy()[np.argmax(geocodes == g)]
            raise ValidationError(
                f"{file}: geocode {unique[g]!r}, query {query!r}: no answer, though the "
                f"geounit answers {len(have)} of level {level}'s {asked.size} noisy queries"
            )
        if manifest is None or not len(con):
            continue
        mark = layout.strip_suffix(BYPASS_QUERY)
        marked = con["geocode"][(con["query_name"] == mark) & (con["sign"].astype(str) == ">=")]
        alone = ~con["geocode"].isin(unique) & ~con["geocode"].isin(marked)
        if alone.any():
            row = int(np.argmax(alone.to_numpy()))
            raise ValidationError(
                f"{con['_file'].iloc[row]}: geocode {con['geocode'].iloc[row]!r}, query "
                f"{str(asked[0])!r}: no answer, and the geounit (in Constraint only) is not "
                f"marked as bypassed (no {BYPASS_QUERY} row >= 0)"
            )


def _in_partition(frame: pd.DataFrame, d: int) -> None:
    """Refuse a geocode outside its file's partition (``State=NNN``: geocodes starting
    with NNN; the root level's files: the root's, ``""``)."""
    if not len(frame):
        return
    codes = frame["_file"].cat.codes.to_numpy()
    for k, name in enumerate(frame["_file"].cat.categories):
        geocodes = pd.unique(frame["geocode"][codes == k])
        code = "" if d == 0 else layout.subtree_of(Path(name).parent.name) or ""
        wrong = [g for g in geocodes if (g != "" if d == 0 else not g.startswith(code))]
        if wrong:
            rows = frame[(codes == k) & (frame["geocode"] == wrong[0]).to_numpy()]
            where = "the root level's (geocode '')" if d == 0 else f"subtree {code!r}'s"
            raise ValidationError(
                f"{name}: geocode {wrong[0]!r}, query {rows['query_name'].iloc[0]!r}: not "
                f"one of {where} geounits, which this file holds"
            )


def _once(frame: pd.DataFrame, flat: np.ndarray, keys: tuple[str, ...]) -> None:
    """Refuse a key (geocode, query[, sign]) found in two rows (identical or not)."""
    if not len(frame):
        return
    codes = [pd.factorize(frame[k].astype(str))[0].astype(np.int64) for k in keys]
    key = codes[0]
    for c in codes[1:]:
        key = key * (int(c.max()) + 1) + c
    twice = pd.Series(key).duplicated(keep=False).to_numpy()
    if not twice.any():
        return
    rows = frame[key == key[np.argmax(twice)]]
    answers = [flat[s : s + n].tolist() for s, n in zip(rows["_start"], rows["_len"], strict=True)]
    same = all(a == answers[0] for a in answers)
    files = ", ".join(sorted({str(f) for f in rows["_file"]}))
    raise ValidationError(
        f"{files}: geocode {rows['geocode'].iloc[0]!r}, query {rows['query_name'].iloc[0]!r}: "
        f"{len(rows)} rows ({'identical' if same else 'with different answers'}); a run "
        "holds each geounit's answer to a query once"
    )


def _count(
    run: Path,
    frames: list[tuple[Rows, Rows]],
    names: Sequence[str],
    chosen: Sequence[str],
    manifest: Any,
    deepest: int,
) -> None:
    """Refuse a level of a subtree (to level ``deepest``: those read whole) whose geounits
    in ``DPQuery`` and ``Constraint`` together are not as many as the manifest records
    (a run postdp wrote; a geounit whose rows were all deleted is missing only there)."""
    counts = manifest.get("geounits") if manifest else None
    if not isinstance(counts, dict):
        return
    for d in range(1, min(len(frames), deepest + 1)):
        recorded = counts.get(names[d])
        if not isinstance(recorded, dict):
            continue
        (dp, _), (con, _) = frames[d]
        geocodes, parts = [], []
        for frame in (dp, con):  # each row's geocode and its file's partition code
            of_file = [layout.subtree_of(Path(str(c)).parent.name) or "" for c in
                       frame["_file"].cat.categories]  # fmt: skip
            geocodes.append(frame["geocode"].to_numpy(dtype=object))
            parts.append(np.asarray([*of_file, ""], dtype=object)[frame["_file"].cat.codes])
        each, _ = pd.factorize(np.concatenate(geocodes))
        _, first = np.unique(each, return_index=True)  # a geounit's partition: its first row's
        seen = pd.Series(np.concatenate(parts)[first]).value_counts().to_dict()
        for code in chosen:
            want, have = recorded.get(code), int(seen.get(code, 0))
            if want is None or have == want:
                continue
            where = run / f"{names[d]}.parquet" / layout.DPQUERY / layout.folder(code)
            gone = "missing" if have < want else "extra"
            raise ValidationError(
                f"{where}: level {names[d]} of subtree {code!r} has {have} geounits in "
                f"DPQuery and Constraint together; the run's manifest records {want} (the "
                f"rows of {abs(want - have)} geounit(s) are {gone})"
            )

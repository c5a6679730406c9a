"""The PL94 release a DHC persons run is held to (private): ``postprocess(..., held=)``.

The 2020 DHC production held every geounit's PL94 persons histogram (``hhgq8lev *
votingage * hispanic * cenrace``, 2,016 cells) exactly at the published redistricting
release (``dhc-2020-design.md`` section 4.2). Here that release is a finished post-processing
of a PL94 persons run by an integral method (``postdp postprocess PL94_RUN --method
topdown-2020``): its deepest level's long form gives each tabulation block's histogram, and
every DHC geounit's is the sum of its blocks'.

Blocks are matched by geocode. A DHC geocode is the tabulation one with the primitive
geounit's digit after the county (:func:`postdp.data.dhc_spine`: ``0`` + ``SSCCC`` + ``P`` +
tract + block), so the PL94 geocode of a DHC geounit at or below the primitive level is its
own without character 6, and a state's or county's is its own. Before anything is solved,
:meth:`Held.check` checks that the release is complete and of the PL94 schema and
:meth:`Held.state` that every state's blocks are the run's (the same geocodes, a block of
no persons included: the wide form lists every block); each subtree task then reads its own
blocks only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from postdp._typing import IntArray
from postdp.errors import ValidationError
from postdp.hierarchy import Hierarchy
from postdp.nmf import _layout as layout
from postdp.nmf._io import _pyarrow
from postdp.nmf._output import MANIFEST_FILE, PLAN_FILE, TOTAL, geocode

#: The character of a DHC geocode (flag, state, county, then this) that the tabulation
#: geography lacks: the primitive geounit's digit.
PRIM_AT = 6


def tabulation(code: str) -> str:
    """The PL94 (tabulation) geocode, or geocode prefix, of a DHC geocode."""
    return code if len(code) <= PRIM_AT else code[:PRIM_AT] + code[PRIM_AT + 1 :]


class Held:
    """A finished PL94 post-processing as the DHC's held histograms (see the module notes).

    ``source`` is the folder as the user gave it; ``level`` the deepest
    level's name, the same in both runs (``Block``). Cheap to build and to pickle: a Dask
    task gets the path and reads its own blocks."""

    def __init__(self, source: str, level: str) -> None:
        from postdp.tables import Marginal, dhc_schema
        from postdp.tables.strategies import PL94_IN_DHC

        self.source, self.level = str(source), level
        self.path = Path(source).expanduser()
        self.cells = tuple(Marginal(dhc_schema(), PL94_IN_DHC).labels)
        self._switcher: Any = None  # record switching's layout, for :meth:`reach`

    def _refuse(self, problem: str) -> ValidationError:
        return ValidationError(f"the PL94 release to hold (`held`): {problem}")

    def fingerprint(self) -> str:
        """The SHA-256 of the release's manifest (which lists every file's SHA-256)."""
        from postdp._files import sha256

        return sha256(self.path / MANIFEST_FILE)

    def _files(self, form: str, code: str) -> list[Path]:
        where = self.path / form / f"{self.level}.parquet" / code
        return sorted(where.glob("part-*.parquet")) if where.is_dir() else []

    def check(self) -> None:
        """The folder is a finished post-processing of a PL94 persons run, integral."""
        if not self.path.is_dir():
            raise self._refuse("no such folder")
        try:
            plan = json.loads((self.path / PLAN_FILE).read_text(encoding="utf-8"))
            json.loads((self.path / MANIFEST_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise self._refuse(
                "not a finished postdp post-processing (its postdp-manifest.json is written "
                "last); run `postdp postprocess` on the PL94 run to the end"
            ) from None
        if "long" not in plan.get("forms", ()):
            raise self._refuse(
                f"its method {plan.get('method')!r} is not integral; the DHC holds a release "
                "of whole numbers (e.g. --method topdown-2020)"
            )
        _, pq = _pyarrow()
        files = sorted((self.path / "wide" / f"{self.level}.parquet").rglob("part-*.parquet"))
        if not files:
            raise self._refuse(f"no {self.level!r} level in its wide form")
        names = [c for c in pq.read_schema(files[0]).names if c not in ("geocode", TOTAL)]
        if tuple(names) != self.cells:
            raise self._refuse(
                f"its cells are not the PL94 persons histogram's {len(self.cells):,} "
                f"({PL94_CELLS_NAMED}); it has {len(names):,}"
            )

    def state(self, code: str, blocks: list[str]) -> tuple[IntArray, IntArray]:
        """A state's held histogram and each of its DHC ``blocks``' total persons (in that
        order), from one read of its blocks in the release, after checking that they are
        the run's blocks (the wide form lists every block, the empty ones too)."""
        pa, pq = _pyarrow()
        wide = self._files("wide", code)
        if not wide:
            raise self._refuse(f"no blocks of state {code} (the run has them)")
        mine = pa.concat_arrays(
            [pq.read_table(f, columns=["geocode"]).column("geocode").combine_chunks()
             for f in wide]
        )  # fmt: skip
        tabulated = [tabulation(str(g)) for g in blocks]
        theirs, known = set(tabulated), set(mine.to_pylist())
        if known != theirs:
            raise self._refuse(
                f"its blocks of state {code} are not the run's: {len(theirs - known):,} "
                f"of the run's have no row and {len(known - theirs):,} are not the run's "
                "(hold a release of the same persons and blocks)"
            )
        geocodes, cell, estimate = self._long(code, None)
        histogram = np.bincount(cell, estimate, len(self.cells)).astype(np.int64)
        sums = pa.table({"g": geocodes, "n": estimate}).group_by("g").aggregate([("n", "sum")])
        by_block = dict(zip(sums.column("g").to_pylist(), sums.column("n_sum").to_pylist(),
                            strict=True))  # fmt: skip
        totals = np.array([by_block.get(g, 0) for g in tabulated], dtype=np.int64)
        return histogram, totals

    def _long(self, code: str, prefix: str | None) -> tuple[Any, IntArray, Any]:
        """A state's long rows (geocodes, cell index, estimate), those under ``prefix`` only."""
        import pyarrow.compute as pc

        pa, pq = _pyarrow()
        where = None
        if prefix:  # the geocodes from prefix up to the next: row groups outside skipped
            upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            where = (pc.field("geocode") >= prefix) & (pc.field("geocode") < upper)
        columns = ["geocode", "category", "estimate"]
        tables = [pq.read_table(f, columns=columns, filters=where)
                  for f in self._files("long", code)]  # fmt: skip
        if not tables:
            return pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros(0, np.int64)
        table = pa.concat_tables(tables, promote_options="permissive")
        if prefix:
            table = table.filter(pc.starts_with(table.column("geocode"), prefix))
        category = table.column("category").combine_chunks()
        if isinstance(category.type, pa.DictionaryType):
            category = category.dictionary_decode()
        found = pc.index_in(category, pa.array(self.cells))
        if found.null_count:
            raise self._refuse("its long form names a cell outside the PL94 histogram")
        cell = found.to_numpy(zero_copy_only=False).astype(np.int64)
        estimate = table.column("estimate").to_numpy().astype(np.int64)
        return table.column("geocode").combine_chunks(), cell, estimate

    def rows(self, geo: Hierarchy, code: str) -> IntArray:
        """Every geounit's held histogram in a subtree of state ``code`` (its ids DHC ids):
        each leaf's the sum of its blocks' (a leaf above the blocks: a cut task's), each
        parent its leaves' sum."""
        leaves = geo.leaves
        prefixes = [tabulation(geocode(str(i), code)) for i in geo.ids[leaves]]
        widths = {len(p) for p in prefixes}
        if len(widths) != 1 or len(set(prefixes)) != len(prefixes):
            raise ValidationError(
                "the DHC geography's leaves do not map to distinct tabulation geocodes of one "
                "width (postdp's spine: one primitive geounit per county); its blocks cannot "
                "be matched to the PL94 release's"
            )
        width = widths.pop()
        geocodes, cell, estimate = self._long(code, _common(prefixes))
        leaf_of = {p: k for k, p in enumerate(prefixes)}
        row = np.fromiter(
            (leaf_of.get(g[:width], -1) for g in geocodes.to_pylist()),
            dtype=np.int64,
            count=len(geocodes),
        )  # each row's leaf; -1: a block of the state outside this subtree
        mine = row >= 0
        row, cell, estimate = row[mine], cell[mine], estimate[mine]
        c = len(self.cells)
        out = np.zeros((geo.n, c), dtype=np.int64)
        out[leaves] = np.bincount(row * c + cell, estimate, leaves.size * c).reshape(-1, c)
        return geo.aggregate(out.T).T

    def reach(self, run: str, code: str, leaves: list[str]) -> Any:
        """The deliverability to the blocks (record switching's ``reach``:
        :meth:`~postdp.postprocess.topdown2020.switching.Switcher.block_reach`) of a task's
        leaves above the blocks, geocodes ``leaves`` in state ``code`` (the state itself for
        the top): each the sum over its blocks, from the DHC run's block bounds (its
        ``hhgq_total`` rows on ``relgq``) and this release's block histograms. None when the
        run's blocks have no such bounds."""
        from postdp.nmf._bounds import _collect_bounds
        from postdp.nmf._read import _part
        from postdp.postprocess.topdown2020.switching import FIRST_GQ, Switcher
        from postdp.tables import dhc_schema

        _, pq = _pyarrow()
        schema = dhc_schema()
        prefix = _common(leaves)
        where = Path(run) / f"{self.level}.parquet" / layout.CONSTRAINT
        frame, flat = _part(pq, where, code, schema, layout.CONSTRAINT, [prefix])
        frame = frame[frame["sign"].isin([">=", "<="])]
        blocks = sorted(set(frame["geocode"]))
        found: dict[Any, Any] = {}
        at = {g: k for k, g in enumerate(blocks)}
        _collect_bounds(frame, flat, schema, np.arange(len(blocks)), at, found)
        bounds = found.get(("hhgq_total", "relgq"))
        if bounds is None or not blocks:
            return None
        lower, upper = bounds[0][:, FIRST_GQ:], bounds[1][:, FIRST_GQ:]
        geocodes, cell, estimate = self._long(code, tabulation(prefix))
        block_of = {tabulation(g): k for k, g in enumerate(blocks)}
        row = np.fromiter(
            (block_of.get(g, -1) for g in geocodes.to_pylist()), dtype=np.int64, count=len(cell)
        )
        mine = row >= 0
        c = len(self.cells)
        held = sparse.csr_array(
            (estimate[mine].astype(np.float64), (row[mine], cell[mine])), shape=(len(blocks), c)
        )
        if self._switcher is None:  # the schema's layout, made once (the top asks per state)
            self._switcher = Switcher.of_schema(schema, upper[:0], upper[:0])
        per_block = self._switcher.block_reach(held, upper, lower)
        width = len(leaves[0])
        leaf_of = {g: k for k, g in enumerate(leaves)}
        owner = np.array([leaf_of.get(g[:width], -1) for g in blocks], dtype=np.int64)
        take = np.flatnonzero(owner >= 0)
        member = sparse.csr_array(
            (np.ones(take.size), (owner[take], take)), shape=(len(leaves), len(blocks))
        )
        return sparse.csr_array(member @ per_block)


def _common(texts: list[str]) -> str:
    """The longest prefix every text starts with."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


PL94_CELLS_NAMED = "hhgq8lev * votingage * hispanic * cenrace, in pl94_schema()'s order"

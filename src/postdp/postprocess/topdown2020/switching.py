"""The DHC's record switching (private): persons moved between cells of one PL94 answer
until every geounit's persons per detailed group-quarters type meet its facility bounds.

The 2020 DHC persons run bounded, at every geounit, the persons of each of the 24 detailed
group-quarters types by its facilities (``hhgq_total_lb/ub``: at least one person per
facility, none where there is none), but kept those bounds out of its least squares and
rounders: after the last rounding of each family a heuristic moved persons between
histogram cells *within the same PL94 answer* (``hhgq8lev * votingage * hispanic *
cenrace``) until they held, required for the children at US to Tract_Subset and best effort
at Block_Group and Block (``dhc-2020-design.md`` sections 3 and 4.3). The production's move
rules are not published in the design notes; these are postdp's own.

A move is a *swap* between two siblings, so that the parent, fixed above, stays their sum:
child ``j`` moves one person from cell ``c`` to cell ``c'`` and sibling ``i`` one from ``c'``
to ``c``, where ``c`` and ``c'`` are of two detailed types of one major group and share the
PL94 answer. Both children keep their PL94 histograms (held), every cell stays one the
parent has (so the edits hold), and only the two types' counts change in each. A swap is
made only if it takes the violation down and breaks no bound of the others' counts, so the
total violation (the sum over children and types of the distance to the bounds) falls by at
least one per swap and the repair ends. At the root, which has no parent, the move is one
person's, into an admissible cell. Preferred: the same sex and age (the type alone changes);
else any sex and age of the same voting-age class (the nearest age first).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from postdp._typing import BoolArray, FloatArray, IntArray

#: The first relgq code of a group-quarters type (0-17 are household relationships).
FIRST_GQ = 18
#: The detailed group-quarters types (relgq 18 to 41).
N_GQ = 24


class Switcher:
    """The record switching of one DHC run: its cells' PL94 answers, the admissible cells,
    the types' major groups and every geounit's bounds per detailed type.

    ``pl94_of``: each detailed cell's PL94 answer; ``major``: each of the 24 types' major
    group (hhgq8lev level); ``lower``/``upper``: (n geounits, 24) bounds (``upper`` may be
    inf); ``stride``: the cells per relgq level (relgq is the first attribute, so a type's
    cells are one run of ``stride``), ``age_at``: each offset's age and ``sex_at`` its sex."""

    def __init__(
        self,
        pl94_of: IntArray,
        admissible: BoolArray,
        major: IntArray,
        lower: FloatArray,
        upper: FloatArray,
        shape: tuple[int, ...],
    ) -> None:
        self.pl94_of, self.admissible = pl94_of, admissible
        self.lower, self.upper = lower, upper
        self.stride = int(np.prod(shape[1:]))
        offsets = np.unravel_index(np.arange(self.stride), shape[1:])
        self.sex_at, self.age_at = offsets[0], offsets[1]
        self.peers = [
            [u for u in range(N_GQ) if u != t and major[u] == major[t]] for t in range(N_GQ)
        ]

    def _block(self, t: int) -> slice:
        start = (FIRST_GQ + t) * self.stride
        return slice(start, start + self.stride)

    def counts(self, x: IntArray) -> IntArray:
        """Persons per detailed type, (k, 24), of histograms ``x`` (k, cells)."""
        gq = x[:, FIRST_GQ * self.stride : (FIRST_GQ + N_GQ) * self.stride]
        counts: IntArray = gq.reshape(x.shape[0], N_GQ, self.stride).sum(axis=2)
        return counts

    def violation(self, x: IntArray, geounits: IntArray) -> FloatArray:
        """Each geounit's total distance to its bounds."""
        n = self.counts(x).astype(np.float64)
        lo, hi = self.lower[geounits], self.upper[geounits]
        gap: FloatArray = (np.maximum(n - hi, 0.0) + np.maximum(lo - n, 0.0)).sum(axis=1)
        return gap

    def repair(self, x: IntArray, geounits: IntArray, *, root: bool = False) -> IntArray:
        """``x`` (k, cells): siblings' histograms (or the root's, ``root=True``) repaired
        in place as far as the moves allow; returns each one's remaining violation."""
        lo, hi = self.lower[geounits], self.upper[geounits]
        n = self.counts(x)
        if not root and x.shape[0] < 2:
            return np.zeros(x.shape[0], dtype=np.int64)
        while True:
            bad = np.argwhere((n > hi) | (n < lo))
            if not bad.size:
                break
            moved = False
            for j, t in bad:
                if n[j, t] > hi[j, t]:
                    moved = self._out_of(x, n, lo, hi, int(j), int(t), root) or moved
                elif n[j, t] < lo[j, t]:
                    moved = self._into(x, n, lo, hi, int(j), int(t), root) or moved
            if not moved:
                break
        gap = np.maximum(n - hi, 0) + np.maximum(lo - n, 0)
        remaining: IntArray = gap.sum(axis=1).astype(np.int64)
        return remaining

    # -- moves ------------------------------------------------------------------------------

    def _out_of(self, x: Any, n: Any, lo: Any, hi: Any, j: int, t: int, root: bool) -> bool:
        """One person of child ``j`` out of type ``t`` (above its upper bound)."""
        sources = np.flatnonzero(x[j, self._block(t)])
        for u in self.peers[t]:
            if n[j, u] + 1 > hi[j, u]:
                continue  # no room in type u
            # a sibling that can give a type-u person and take a type-t one
            able = self._able(n, lo, hi, j, give=u, take=t, root=root)
            if able is False:
                continue
            for o in sources.tolist():
                pair = self._partner(x, able, t, o, u, root)
                if pair is not None:
                    self._swap(x, n, j, t, o, u, *pair, root)
                    return True
        return False

    def _into(self, x: Any, n: Any, lo: Any, hi: Any, j: int, t: int, root: bool) -> bool:
        """One person into child ``j``'s type ``t`` (below its lower bound)."""
        for u in self.peers[t]:
            if n[j, u] - 1 < lo[j, u]:
                continue  # no one to spare in type u
            able = self._able(n, lo, hi, j, give=t, take=u, root=root)
            if able is False:
                continue
            for o in np.flatnonzero(x[j, self._block(u)]).tolist():
                pair = self._partner(x, able, u, o, t, root)
                if pair is not None:
                    self._swap(x, n, j, u, o, t, *pair, root)
                    return True
        return False

    @staticmethod
    def _able(n: Any, lo: Any, hi: Any, j: int, *, give: int, take: int, root: bool) -> Any:
        """The siblings of ``j`` that can give a person of type ``give`` and take one of
        type ``take`` within their bounds (None at the root: no sibling; False: none)."""
        if root:
            return None
        able = (n[:, give] - 1 >= lo[:, give]) & (n[:, take] + 1 <= hi[:, take])
        able[j] = False
        return able if able.any() else False

    def _partner(
        self, x: Any, able: Any, t: int, o: int, u: int, root: bool
    ) -> tuple[int, int] | None:
        """The cell of type ``u`` a person at offset ``o`` of type ``t`` moves to, and the
        sibling giving a person from it: ``(sibling, offset)``, or None. The same offset
        first, then any of the same PL94 answer (nearest age, same sex first); at the root
        (``root``) any admissible cell, no sibling."""
        cell = (FIRST_GQ + t) * self.stride + o
        base = (FIRST_GQ + u) * self.stride
        if root:
            block = self.admissible[base : base + self.stride]
        else:
            have = x[able, base : base + self.stride] > 0
            block = have.any(axis=0)
        block = block & (self.pl94_of[base : base + self.stride] == self.pl94_of[cell])
        found = np.flatnonzero(block)
        if not found.size:
            return None
        near = np.abs(self.age_at[found] - self.age_at[o]) * 2
        target = int(found[np.argmin(near + (self.sex_at[found] != self.sex_at[o]))])
        if root:
            return -1, target
        (rows,) = np.nonzero(able)
        giver = rows[np.argmax(x[rows, base + target])]
        return int(giver), target

    def _swap(
        self, x: Any, n: Any, j: int, t: int, o: int, u: int, i: int, o2: int, root: bool
    ) -> None:
        """Child ``j``: one person from (t, o) to (u, o2); sibling ``i`` the reverse."""
        cell = (FIRST_GQ + t) * self.stride + o
        other = (FIRST_GQ + u) * self.stride + o2
        x[j, cell] -= 1
        x[j, other] += 1
        n[j, t] -= 1
        n[j, u] += 1
        if not root:
            x[i, other] -= 1
            x[i, cell] += 1
            n[i, u] -= 1
            n[i, t] += 1

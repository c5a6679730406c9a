"""Structural bounds in top-down's families (private): the rows, bounds, held cells and
rounder limits one family's solves need from :class:`~postdp.tables.bounds.CountBounds`
(the 2020 persons release's group-quarters bounds and nursing zero), and the smallest
tolerance at which a family's first-pass totals can be held with them.

A bound on a marginal's count of one child is a row of the family (the count's cells among
the parent's positive cells) with that child's bounds; a row no child bounds (lower 0,
upper inf) is left out. A count held at 0 holds its cells at 0 in the rounder too; a lower
bound on a count of the rounder's chain is a lower limit on that count's arc.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, sparse

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError, ValidationError
from postdp.postprocess.topdown2020.family import BoolArray
from postdp.tables.bounds import CountBounds
from postdp.tables.schema import Schema

__all__ = ["FamilyRows", "StructuralPlan", "min_tolerance", "rounder_limits"]


@dataclass(frozen=True)
class FamilyRows:
    """One family's bounded rows: C (R, m), lo and hi (k, R); the rounder's limits per chain
    query ((lo, hi) of shape (k, size) by count, or None) and held cells (k, m)."""

    C: FloatArray
    lo: FloatArray
    hi: FloatArray
    limits: list[tuple[FloatArray, FloatArray] | None]
    fixed: BoolArray


class StructuralPlan:
    """The bounds of a table, resolved against its schema and the rounder's chain.

    Parameters
    ----------
    schema : Schema
    bounds : sequence of CountBounds
    n : int
        The number of geounits.
    chain : sequence of (groups, weight)
        The rounder's chain queries (each cell's count index); empty when nothing is
        rounded.
    """

    def __init__(
        self,
        schema: Schema,
        bounds: Sequence[CountBounds],
        n: int,
        chain: Sequence[tuple[IntArray, float]],
    ) -> None:
        self.items: list[tuple[CountBounds, IntArray, int | None]] = []
        for item in bounds:
            groups = item.check(schema, n).cell_groups()
            place = next((i for i, (g, _) in enumerate(chain) if np.array_equal(g, groups)), None)
            if chain and place is None and (item.lower > 0).any():
                raise ValidationError(
                    f"a lower bound on {item.query!r} needs that query in the rounder's "
                    "chain (e.g. 'hhgq' for the group-quarters bounds)"
                )
            self.items.append((item, groups, place))
        self.n_chain = len(chain)

    def __bool__(self) -> bool:
        return bool(self.items)

    def family(self, cells: IntArray, geounits: IntArray) -> FamilyRows | None:
        """The rows of the children ``geounits`` on the parent's positive ``cells``; None
        when no child is bounded there."""
        k, m = geounits.size, cells.size
        rows, lows, highs = [], [], []
        fixed = np.zeros((k, m), dtype=bool)
        limits: list[tuple[FloatArray, FloatArray] | None] = [None] * self.n_chain
        for item, groups, place in self.items:
            lower, upper = item.lower[geounits], item.upper[geounits]
            here = groups[cells]
            if place is not None:
                limits[place] = (lower, upper)
            for q in np.unique(here[here >= 0]):
                lo, hi = lower[:, q], upper[:, q]
                if not ((lo > 0).any() or np.isfinite(hi).any()):
                    continue
                member = here == q
                rows.append(member.astype(np.float64))
                lows.append(lo)
                highs.append(hi)
                fixed |= (hi == 0)[:, None] & member[None, :]
        if not rows:
            return None
        return FamilyRows(
            np.stack(rows), np.stack(lows, axis=1), np.stack(highs, axis=1), limits, fixed
        )


def rounder_limits(rows: FamilyRows | None) -> dict[str, Any]:
    """The rounder's keyword arguments (``bounds``, ``fixed``) for a family's rows."""
    return {} if rows is None else {"bounds": rows.limits, "fixed": rows.fixed}


def min_tolerance(first: FloatArray, p: FloatArray, rows: FamilyRows) -> float:
    """The smallest t such that the children can hold totals within t of ``first`` with
    every bounded row met and the parent's cells ``p`` split among them (a linear program
    in the children's sums over the cells' membership patterns: cells with the same rows
    are interchangeable, so a split of those sums is a split of the cells).

    Raises
    ------
    ConvergenceError
        If the bounds cannot be met at any tolerance.
    """
    C, lo, hi = rows.C, rows.lo, rows.hi
    k = lo.shape[0]
    patterns, atom = np.unique(C.T, axis=0, return_inverse=True)
    n_a = patterns.shape[0]
    mass = np.bincount(atom.ravel(), weights=p, minlength=n_a)
    n = k * n_a  # y[j, a], then t
    split = sparse.csr_array(
        sparse.hstack(
            [
                sparse.csr_array(sparse.kron(np.ones((1, k)), sparse.eye(n_a))),
                sparse.csr_array((n_a, 1)),
            ]
        )
    )
    block = sparse.csr_array(sparse.kron(sparse.eye(k), sparse.csr_array(patterns.T)))
    totals = sparse.csr_array(sparse.kron(sparse.eye(k), np.ones((1, n_a))))
    t_col = sparse.csr_array(-np.ones((k, 1)))
    top, bottom = hi.ravel(), lo.ravel()
    up, down = np.isfinite(top), np.isfinite(bottom)
    rows_part = sparse.csr_array(sparse.vstack([block[up], -block[down]]))
    zeros = sparse.csr_array((rows_part.shape[0], 1))
    A_ub = sparse.csr_array(
        sparse.vstack(
            [
                sparse.hstack([rows_part, zeros]),
                sparse.hstack([totals, t_col]),
                sparse.hstack([-totals, t_col]),
            ]
        )
    )
    b_ub = np.concatenate([top[up], -bottom[down], first, -first])
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    res = optimize.linprog(  # type: ignore[call-overload]  # sparse A is supported
        cost,
        A_ub=A_ub,
        b_ub=b_ub,
        A_eq=split,
        b_eq=mass,
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise ConvergenceError(
            "a family's structural bounds cannot be met with its parent's cells; please "
            "report the input"
        )
    return max(float(res.x[-1]), 0.0)

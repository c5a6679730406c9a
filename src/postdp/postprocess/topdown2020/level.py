"""Top-down below the root for schema tables: every family of a level, one draw
(private; the solver is :mod:`postdp.postprocess.topdown2020.family`)."""

from __future__ import annotations

import numpy as np

from postdp._typing import FloatArray, IntArray
from postdp.errors import ConvergenceError, ValidationError
from postdp.postprocess.topdown2020.family import FamilyResult, LevelQuadratic, solve_family
from postdp.postprocess.topdown2020.family_box import BoxResult, solve_family_box
from postdp.postprocess.topdown2020.rounding import round_nested
from postdp.postprocess.topdown2020.structural import StructuralPlan, rounder_limits

__all__ = ["split_level"]


def split_level(
    parents_out: FloatArray,
    parent_of: IntArray,
    answers: list[FloatArray],
    quadratic: LevelQuadratic,
    publics: list[tuple[IntArray, FloatArray]] = (),  # type: ignore[assignment]
    *,
    structural: StructuralPlan | None = None,
    geounits: IntArray | None = None,
    rounder: tuple[list[tuple[IntArray, float]], float] | None = None,
    totals: FloatArray | None = None,
    weight: FloatArray | None = None,
) -> FloatArray:
    """Every family of one level for one draw: the children's detailed histograms.

    Parameters
    ----------
    parents_out : ndarray, shape (n_parents, c)
        The parents' (nonnegative) histograms.
    parent_of : ndarray of int, shape (n_children,)
        Each child's row in ``parents_out``.
    answers : list of ndarray, shape (n_children, size_q)
        The children's answers to each noisy measurement of ``quadratic``.
    quadratic : LevelQuadratic
    publics : list of (cell groups, values)
        The level's invariants: each public marginal's count of every cell (-1: none) and
        the children's exact counts (n_children, size).
    structural : StructuralPlan, optional
        Bounds on the children's counts (with ``geounits``, the children's geounit ids).
    geounits : ndarray of int, shape (n_children,), optional
    rounder : (chain, cell_weight), optional
        Round each family (its parent integral) by the nested flow rounder over these
        queries, the bounds kept (:func:`round_nested`).
    totals : ndarray, shape (n_children,), optional
        The children's public totals, which the rounder keeps.
    weight : ndarray, shape (n_children,), optional
        Each child's multiple of ``quadratic`` (its own budget factor; default 1).

    Returns
    -------
    ndarray, shape (n_children, c)

    Raises
    ------
    ValidationError
        If a child's invariant cannot be met within its parent's histogram.
    ConvergenceError
        If a family's KKT residuals are not below 1e-9 of their scale (please report).
    """
    n_kids = parent_of.size
    out = np.zeros((n_kids, parents_out.shape[1]))
    order = np.argsort(parent_of, kind="stable")
    bounds = np.searchsorted(parent_of[order], np.arange(parents_out.shape[0] + 1))
    for f in range(parents_out.shape[0]):
        kids = order[bounds[f] : bounds[f + 1]]
        if not kids.size:
            continue
        p = parents_out[f]
        cells = np.flatnonzero(p > 0)
        H = quadratic.block(cells)
        b = quadratic.linear([y[kids] for y in answers], cells)
        a = None if weight is None or kids.size == 1 else weight[kids]
        if a is not None:
            b *= a[:, None]
        G, g = _public_rows(publics, cells, kids)
        scale = max(
            1.0,
            float(np.abs(b).max(initial=0.0)),
            float(p.max(initial=0.0))
            * float(H.diagonal().max(initial=0.0))
            * (1.0 if a is None else float(a.max())),
        )
        rows = None
        if structural is not None and geounits is not None:
            rows = structural.family(cells, geounits[kids])
        if rows is None:
            result: FamilyResult | BoxResult = solve_family(
                H, b, p[cells], tol=1e-11 * scale, G=G, g=g, weight=a
            )
        else:
            result = solve_family_box(
                H, b, p[cells], tol=1e-11 * scale, G=G, g=g, c=rows.C, lo=rows.lo, hi=rows.hi,
                weight=a,
            )  # fmt: skip
        worst = result.worst
        if worst > 1e-9 * scale:
            raise ConvergenceError(
                f"a top-down family split is not certified (KKT residual {worst:.3g} of "
                f"scale {scale:.3g}); please report the input"
            )
        x = np.maximum(result.x, 0.0)
        if rounder is not None:
            x = round_nested(
                x,
                [(groups[cells], w) for groups, w in rounder[0]],
                cell_weight=rounder[1],
                parent=np.rint(p[cells]).astype(np.int64),
                totals=None if totals is None else np.rint(totals[kids]).astype(np.int64),
                total_weight=1.0,
                **rounder_limits(rows),
            ).x
        out[np.ix_(kids, cells)] = x
    return out


def _public_rows(
    publics: list[tuple[IntArray, FloatArray]], cells: IntArray, kids: IntArray
) -> tuple[FloatArray, FloatArray]:
    """The family's public rows on the parent's positive cells, and the children's values;
    a count with none of those cells must be 0 in every child."""
    rows, values = [], []
    for groups, answers in publics:
        inside = groups[cells]
        for r in range(answers.shape[1]):
            where = inside == r
            if not where.any():
                if np.any(answers[kids, r] != 0):
                    raise ValidationError(
                        "an invariant below the root cannot be met: a child's public count "
                        "is positive where its parent's histogram is 0 (are the invariants "
                        "consistent across levels?)"
                    )
                continue
            rows.append(where.astype(float))
            values.append(answers[kids, r])
    if not rows:
        return np.zeros((0, cells.size)), np.zeros((kids.size, 0))
    return np.vstack(rows), np.stack(values, axis=1)

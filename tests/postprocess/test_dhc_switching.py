"""The DHC's record switching (issue 46): the group-quarters bounds on the 24 detailed types
(``hhgq_total_lb/ub``, ``dhc-2020-design.md`` section 3), kept out of both passes and met
afterwards by moving persons between cells of one PL94 answer (section 4.3): hand-computed
swaps, and the 2020 TopDown of a small county whose correctional population the passes
spread over the wrong types."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from postdp.data import dhc_facility_bounds, synthetic_dhc_facilities, synthetic_dhc_population
from postdp.errors import ValidationError
from postdp.postprocess import restore_dhc, top_down_2020
from postdp.postprocess.topdown2020.switching import FIRST_GQ, N_GQ, Switcher
from postdp.tables import (
    Marginal,
    Table,
    dhc_schema,
    dhc_structural_zeros,
    load_strategy,
    measure,
)
from postdp.tables.bounds import CountBounds
from postdp.tables.strategies import PL94_IN_DHC
from tests.postprocess._dhc import true_pl94

SCHEMA = dhc_schema()
STRIDE = SCHEMA.size // SCHEMA.shape[0]  # cells per relgq level: 2 x 116 x 2 x 63


def _cell(relgq: int, sex: int, age: int, hispanic: int = 0, race: int = 0) -> int:
    return int(np.ravel_multi_index((relgq, sex, age, hispanic, race), SCHEMA.shape))


def _switcher(lower, upper) -> Switcher:
    major = Marginal(SCHEMA, "hhgq8lev").cell_groups()[(FIRST_GQ + np.arange(N_GQ)) * STRIDE]
    return Switcher(
        Marginal(SCHEMA, PL94_IN_DHC).cell_groups(),
        ~dhc_structural_zeros(),
        major,
        np.asarray(lower, dtype=float),
        np.asarray(upper, dtype=float),
        SCHEMA.shape,
    )


def _facilities(*types_by_child):
    """Bounds of children with one facility of each listed detailed type (0-23)."""
    lower = np.zeros((len(types_by_child), N_GQ))
    for j, types in enumerate(types_by_child):
        lower[j, list(types)] = 1
    return lower, np.where(lower > 0, np.inf, 0.0)


# relgq 18 (GQ101) and 19 (GQ102): two detailed types of PL94's adult correctional group
A, B = 0, 1


def test_one_swap_moves_each_sibling_into_its_own_facility():
    """Child 0 holds a person of type A where only B has a facility, child 1 one of type B
    where only A has: one swap of the same sex, age, origin and race mends both, the
    children's sum unchanged."""
    x = np.zeros((2, SCHEMA.size), dtype=np.int64)
    x[0, _cell(18 + A, 0, 40)] = 1
    x[1, _cell(18 + B, 0, 40)] = 1
    before = x.sum(axis=0)
    left = _switcher(*_facilities([B], [A])).repair(x, np.arange(2))
    assert left.tolist() == [0, 0]
    assert x[0, _cell(18 + B, 0, 40)] == 1 and x[1, _cell(18 + A, 0, 40)] == 1
    assert x.sum() == 2 and np.array_equal(x.sum(axis=0), before)


def test_without_a_match_the_nearest_age_of_the_same_pl94_answer_is_swapped():
    """The sibling's type-B person is a 50-year-old woman: the children exchange the two
    cells (same PL94 answer: an adult, not Hispanic, white), so child 0 ends with her
    cell and child 1 with the 40-year-old man's, each in its own facility's type; a
    15-year-old of type B (another voting-age class) is never taken."""
    x = np.zeros((2, SCHEMA.size), dtype=np.int64)
    x[0, _cell(18 + A, 0, 40)] = 1
    x[1, _cell(18 + B, 1, 50)] = 1
    x[1, _cell(18 + B, 0, 17)] = 0  # an under-18 is not of the same answer
    left = _switcher(*_facilities([B], [A])).repair(x, np.arange(2))
    assert left.tolist() == [0, 0]
    assert x[0, _cell(18 + B, 1, 50)] == 1 and x[1, _cell(18 + A, 0, 40)] == 1
    assert x.sum() == 2


def test_a_facility_without_residents_is_filled_by_a_swap_within_bounds():
    """Child 0 has facilities of A and B but both its persons in B; child 1 the same with
    both in A: one swap leaves each with one person of each type (every lower bound met,
    no bound broken on the way)."""
    x = np.zeros((2, SCHEMA.size), dtype=np.int64)
    x[0, _cell(18 + B, 1, 30)] = 2
    x[1, _cell(18 + A, 1, 30)] = 2
    left = _switcher(*_facilities([A, B], [A, B])).repair(x, np.arange(2))
    assert left.tolist() == [0, 0]
    assert x[0, _cell(18 + A, 1, 30)] == x[0, _cell(18 + B, 1, 30)] == 1
    assert x[1, _cell(18 + A, 1, 30)] == x[1, _cell(18 + B, 1, 30)] == 1


def test_the_root_moves_alone_and_an_impossible_family_is_left_with_its_violation():
    """At the root (no parent to keep) one person is moved to an admissible cell of the
    type with the facility; siblings with no person to exchange keep their violation, which
    repair reports."""
    root = np.zeros((1, SCHEMA.size), dtype=np.int64)
    root[0, _cell(18 + A, 0, 70)] = 3
    left = _switcher(*_facilities([B])).repair(root, np.arange(1), root=True)
    assert left.tolist() == [0] and root[0, _cell(18 + B, 0, 70)] == 3
    x = np.zeros((2, SCHEMA.size), dtype=np.int64)
    x[0, _cell(18 + A, 0, 40)] = 1
    x[1, _cell(0, 0, 40)] = 1  # a householder: not of the same PL94 answer
    left = _switcher(*_facilities([B], [A])).repair(x, np.arange(2))
    assert left.tolist() == [2, 1] and x[0, _cell(18 + A, 0, 40)] == 1  # A over, B under


def _incarcerated(seed: int = 1) -> Table:
    """The District at scale 0.0002 (138 persons, 3 blocks) with some household adults
    moved into correctional facilities of four detailed types, a block's types its own
    (the synthetic population puts no one in group quarters at this scale)."""
    table = synthetic_dhc_population(["11"], seed=seed, scale=0.0002)
    cells = table.cells.toarray().astype(np.int64)
    plan = {0: [(18, 4)], 1: [(20, 4)], 2: [(18, 3), (21, 3)]}
    for row, moves in plan.items():
        for relgq, n in moves:
            for _ in range(n):
                adults = [c for c in np.flatnonzero(cells[row]) if c < 18 * STRIDE
                          and np.unravel_index(c, SCHEMA.shape)[2] >= 18]  # fmt: skip
                c = adults[0]
                cells[row, c] -= 1
                cells[row, c % STRIDE + relgq * STRIDE] += 1
    return Table(table.geography, table.categories, sparse.csr_array(cells))


@pytest.mark.slow
def test_topdown_with_record_switching_meets_the_bounds_where_required():
    """Held to the true PL94 histogram, the passes alone put correctional persons in types
    without a facility; with the bounds, record switching meets them at every geounit down
    to Tract_Subset (required), breaks none at the lower levels that the passes alone did
    not, and keeps everything else: whole counts, consistency, the edits, the PL94
    histogram held."""
    table = _incarcerated()
    geo = table.geography
    work = load_strategy("dhc-2020-persons").workload(table)
    m = measure(table, work, secure=False, rng=4)
    held = true_pl94(table)
    bounds = dhc_facility_bounds(synthetic_dhc_facilities(table), geo)
    relgq = Marginal(SCHEMA, "relgq")

    def gaps(out):
        n = relgq.apply(out.astype(float))
        return (np.maximum(n - bounds.upper, 0) + np.maximum(bounds.lower - n, 0)).sum(axis=1)

    plain = gaps(top_down_2020(m, held=held))
    switched = top_down_2020(m, held=held, bounds=[bounds])
    required = geo.depth < geo.n_levels - 2
    assert plain.sum() > 0  # the passes alone break the bounds
    assert not gaps(switched)[required].any()
    assert gaps(switched)[~required].sum() <= plain[~required].sum()
    assert switched.dtype == np.int64 and (switched >= 0).all()
    assert np.array_equal(geo.aggregate(switched.T).T, switched)
    assert not switched[:, dhc_structural_zeros()].any()
    assert np.array_equal(Marginal(SCHEMA, PL94_IN_DHC).apply(switched.astype(float)), held)
    del switched
    with pytest.raises(ValidationError, match="one set of bounds, on 'relgq'"):
        top_down_2020(m, held=held, bounds=[bounds, bounds])
    # a juvenile facility where the PL94 histogram held has no juvenile: no move can meet
    # it, and at the root (required) the release is refused, naming the geounit
    lower = bounds.lower.copy()
    lower[:, 24] = 1  # relgq 24: GQ201, of PL94's juvenile level
    impossible = CountBounds("relgq", lower, np.maximum(bounds.upper, lower), name="hhgq_total")
    with pytest.raises(ValidationError, match=r"bounds of geounit 'US', where they are required"):
        top_down_2020(m, held=held, bounds=[impossible])
    # the restoration's passes switch records alike (a stand-in for the BLUE: the truth,
    # its cells jittered, which the passes project and round)
    blue = np.zeros((geo.n, SCHEMA.size))
    blue[geo.leaves] = table.cells.toarray()
    blue = geo.aggregate(blue.T).T
    blue += np.random.default_rng(0).normal(0.0, 0.5, blue.shape) * (blue > 0)
    restored = restore_dhc(m, held=held, integral=True, blue=blue, bounds=[bounds])
    del blue
    assert not gaps(restored)[required].any()
    assert np.array_equal(Marginal(SCHEMA, PL94_IN_DHC).apply(restored), held)
    assert np.array_equal(geo.aggregate(restored.T).T, restored)


def test_where_the_bounds_are_best_effort_is_decided_by_the_spine_geocode_width():
    """As the production decided by geocode width, so a subtree's table, whose levels count
    from its own root (the top of a run, a cut task's state and counties), requires what
    the whole run requires: Block_Group (13 digits) and Block (16) best effort only."""
    from postdp import Hierarchy
    from postdp.postprocess.topdown2020.dhc import best_effort

    top = Hierarchy.from_parents(["US", "10", "11"], [None, "US", "US"])
    cut = Hierarchy.from_parents(["10", "10001", "10003"], [None, "10", "10"])
    assert not best_effort(top).any() and not best_effort(cut).any()
    bg = "1000104330001"
    blocks = Hierarchy.from_parents([bg, bg + "001", bg + "002"], [None, bg, bg])
    assert best_effort(blocks).tolist() == [False, True, True]
    other = Hierarchy.from_parents(["r", "a", "b", "a1"], [None, "r", "r", "a"])
    assert best_effort(other).tolist() == [False, True, True, True]

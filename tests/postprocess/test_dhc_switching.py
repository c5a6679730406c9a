"""The DHC's record switching (issue 46): the group-quarters bounds on the 24 detailed types
(``hhgq_total_lb/ub``, ``dhc-2020-design.md`` section 3), kept out of both passes and met
afterwards by moving persons between cells of one PL94 answer (section 4.3): hand-computed
swaps, and the 2020 TopDown of a small county whose correctional population the passes
spread over the wrong types."""

from __future__ import annotations

import itertools

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


def _splits(x, types=(A, B)):
    """(k, types, 2) persons by type and PL94 answer (not Hispanic, Hispanic adults)."""
    out = np.zeros((x.shape[0], len(types), 2), dtype=np.int64)
    for i, t in enumerate(types):
        block = x[:, (18 + t) * STRIDE : (19 + t) * STRIDE].reshape(x.shape[0], 2, 116, 2, 63)
        out[:, i] = block.sum(axis=(1, 2, 4))
    return out


def _reachable(y0):
    """Every split of (k, 2, 2) with the parent's sums and each child's answers held."""
    k = y0.shape[0]
    held, parent = y0.sum(axis=1), y0.sum(axis=0)
    per_answer = []
    for a in range(2):
        options = [
            firsts
            for firsts in itertools.product(*(range(held[j, a] + 1) for j in range(k)))
            if sum(firsts) == parent[0, a]
        ]
        per_answer.append(options)
    for first_0, first_1 in itertools.product(*per_answer):
        y = np.zeros_like(y0)
        for j in range(k):
            y[j, 0] = first_0[j], first_1[j]
        y[:, 1] = held - y[:, 0]
        yield y


@pytest.mark.parametrize("seed", range(12))
def test_repair_is_the_least_violation_and_fewest_moves_of_every_reachable_split(seed):
    """Brute force over every split of three children's correctional adults between two
    detailed types and two PL94 answers that keeps the parent and each child's PL94 answers
    (the switching's reach, ``switching.py`` notes): the repair's violation is the least of
    them all, and it moves the fewest persons among those; the parent's cells, the children's
    PL94 answers and their sum stay, cell by cell."""
    rng = np.random.default_rng(seed)
    k = 3
    x = np.zeros((k, SCHEMA.size), dtype=np.int64)
    for j in range(k):
        for t in (A, B):
            for hisp in (0, 1):
                for age in (40, 50):
                    x[j, _cell(18 + t, 0, age, hisp)] = rng.integers(0, 2)
    lower = np.zeros((k, N_GQ))
    upper = np.full((k, N_GQ), np.inf)
    lower[:, [A, B]] = rng.integers(0, 3, size=(k, 2))
    upper[:, [A, B]] = np.where(rng.random((k, 2)) < 0.3, 0.0, np.inf)
    upper = np.maximum(upper, lower * (rng.random((k, N_GQ)) < 0.5))
    pl94 = Marginal(SCHEMA, PL94_IN_DHC)
    before, answers = x.sum(axis=0), pl94.apply(x.astype(float))
    y0 = _splits(x)

    def gap(y):
        n = y.sum(axis=2)
        lo, hi = lower[:, [A, B]], upper[:, [A, B]]
        return (np.maximum(n - hi, 0) + np.maximum(lo - n, 0)).sum(axis=1)

    scored = [(gap(y).sum(), np.maximum(y0 - y, 0).sum()) for y in _reachable(y0)]
    best = min(scored)
    left = _switcher(lower, upper).repair(x, np.arange(k))
    y = _splits(x)
    assert left.tolist() == gap(y).tolist()
    assert (left.sum(), np.maximum(y0 - y, 0).sum()) == best
    assert np.array_equal(x.sum(axis=0), before) and (x >= 0).all()
    assert np.array_equal(pl94.apply(x.astype(float)), answers)


def test_the_root_keeps_what_it_holds_deliverable_to_the_blocks():
    """The failure seen on the District at scale 0.02, in small: the root meets its own
    bounds with 2 persons of type A and 2 of B, but B's one facility is in block b2, whose
    held PL94 histogram has one correctional adult, so the family below cannot meet c1's
    bound (c2 allows A only). Given the blocks' held histograms the root keeps its split
    deliverable (B at most 1) and every geounit's bounds are then met all the way down;
    without them the root is left as it is and c1 is left short of A."""
    from postdp import Hierarchy

    geo = Hierarchy.from_parents(
        ["R", "c1", "c2", "b1", "b2", "b3"], [None, "R", "R", "c1", "c1", "c2"]
    )
    facility = np.zeros((6, N_GQ))
    facility[3, A] = facility[4, B] = facility[5, A] = 1  # b1: A, b2: B, b3: A
    lower = geo.aggregate(facility.T).T
    upper = np.where(lower > 0, np.inf, 0.0)
    blocks = np.zeros((6, SCHEMA.size), dtype=np.int64)
    blocks[3, _cell(18 + A, 0, 40)] = 1
    blocks[4, _cell(18 + A, 0, 40)] = 1
    blocks[5, _cell(18 + A, 0, 40)] = 2
    held = Marginal(SCHEMA, PL94_IN_DHC).apply(geo.aggregate(blocks.T).T.astype(float))
    major = Marginal(SCHEMA, "hhgq8lev").cell_groups()[(FIRST_GQ + np.arange(N_GQ)) * STRIDE]
    ahead = Switcher(
        Marginal(SCHEMA, PL94_IN_DHC).cell_groups(),
        ~dhc_structural_zeros(),
        major,
        lower,
        upper,
        SCHEMA.shape,
        geography=geo,
    )
    ahead.reach = ahead.block_reach(held[geo.leaves], upper[geo.leaves])
    root = np.zeros((1, SCHEMA.size), dtype=np.int64)
    root[0, _cell(18 + A, 0, 40)] = 2
    root[0, _cell(18 + B, 0, 40)] = 2
    blind = root.copy()
    assert ahead.repair(root, np.array([0]), root=True).tolist() == [0]
    assert root[0, _cell(18 + A, 0, 40)] == 3 and root[0, _cell(18 + B, 0, 40)] == 1
    children = np.zeros((2, SCHEMA.size), dtype=np.int64)  # what the passes might give
    children[0, _cell(18 + B, 0, 40)] = 1
    children[0, _cell(18 + A, 0, 40)] = 1
    children[1, _cell(18 + A, 0, 40)] = 2
    assert ahead.repair(children, np.array([1, 2])).tolist() == [0, 0]
    kids = np.zeros((2, SCHEMA.size), dtype=np.int64)  # c1's blocks, each in the other's type
    kids[0, _cell(18 + B, 0, 40)] = 1
    kids[1, _cell(18 + A, 0, 40)] = 1
    assert ahead.repair(kids, np.array([3, 4])).tolist() == [0, 0]
    assert kids[0, _cell(18 + A, 0, 40)] == kids[1, _cell(18 + B, 0, 40)] == 1
    # a task whose leaves are c1 and c2 (above the blocks), given their blocks' reach
    # summed, splits the root alike
    top = Hierarchy.from_parents(["R", "c1", "c2"], [None, "R", "R"])
    cut = Switcher.of_schema(SCHEMA, lower[:3], upper[:3], geography=top)
    cut.reach = sparse.csr_array(
        sparse.csr_array(([1.0, 1.0, 1.0], ([0, 0, 1], [0, 1, 2])), shape=(2, 3)) @ ahead.reach
    )
    again = blind.copy()
    assert cut.repair(again, np.array([0]), root=True).tolist() == [0]
    assert np.array_equal(again, root)
    without = _switcher(lower, upper)
    assert without.repair(blind, np.array([0]), root=True).tolist() == [0]
    assert blind[0, _cell(18 + B, 0, 40)] == 2  # nothing to mend at the root itself
    below = np.zeros((2, SCHEMA.size), dtype=np.int64)
    below[0, _cell(18 + B, 0, 40)] = 2
    below[1, _cell(18 + A, 0, 40)] = 2
    assert without.repair(below, np.array([1, 2])).tolist() == [1, 0]  # c1 short of A


def _ahead(geo, facility, blocks):
    """A switcher looking ahead to ``geo``'s blocks: bounds of the ``facility`` counts
    (per geounit and type, blocks given), held PL94 histograms of the ``blocks``."""
    lower = geo.aggregate(facility.T).T
    upper = np.where(lower > 0, np.inf, 0.0)
    held = Marginal(SCHEMA, PL94_IN_DHC).apply(geo.aggregate(blocks.T).T.astype(float))
    switcher = Switcher.of_schema(SCHEMA, lower, upper, geography=geo)
    switcher.reach = switcher.block_reach(held[geo.leaves], upper[geo.leaves], lower[geo.leaves])
    return switcher


def test_a_required_bound_is_never_given_up_for_a_cap_nothing_can_meet():
    """Block b1 has a facility of A but the PL94 release held gave it no correctional adult
    (the blocks' bounds are best effort), so j1's reach in A can never be met; the family
    still meets every bound of j1 and j2 (one A and one B each) rather than keep that cap
    (a second program finds the bounds' least violation, a third keeps it)."""
    from postdp import Hierarchy

    geo = Hierarchy.from_parents(
        ["R", "j1", "j2", "b1", "b2", "b3"], [None, "R", "R", "j1", "j1", "j2"]
    )
    facility = np.zeros((6, N_GQ))
    facility[3, A] = facility[4, B] = 1
    facility[5, [A, B]] = 1
    blocks = np.zeros((6, SCHEMA.size), dtype=np.int64)
    blocks[4, _cell(18 + B, 0, 40)] = 2
    blocks[5, _cell(18 + A, 0, 40)] = 3
    switcher = _ahead(geo, facility, blocks)
    x = np.zeros((2, SCHEMA.size), dtype=np.int64)
    x[0, _cell(18 + B, 0, 40)] = 2
    x[1, _cell(18 + A, 0, 40)] = 2
    x[1, _cell(18 + B, 0, 40)] = 1
    assert switcher.repair(x, np.array([1, 2])).tolist() == [0, 0]
    assert switcher.counts(x)[:, [A, B]].tolist() == [[1, 1], [1, 2]]


def test_the_root_spares_each_block_its_other_facilities_persons():
    """b1 has a facility of A and one of B and 2 correctional adults; b2 a facility of A
    and 3. The root's 2 of A and 3 of B meet its bounds and fit the blocks by type allowed
    (b1 allows B, 2 places), but b1 must keep one of its 2 for A: the root keeps at most 1
    of B (b1's spare persons for B), and its blocks then meet every bound."""
    from postdp import Hierarchy

    geo = Hierarchy.from_parents(["R", "b1", "b2"], [None, "R", "R"])
    facility = np.zeros((3, N_GQ))
    facility[1, [A, B]] = 1
    facility[2, A] = 1
    blocks = np.zeros((3, SCHEMA.size), dtype=np.int64)
    blocks[1, _cell(18 + A, 0, 40)] = 2
    blocks[2, _cell(18 + A, 0, 40)] = 3
    switcher = _ahead(geo, facility, blocks)
    root = np.zeros((1, SCHEMA.size), dtype=np.int64)
    root[0, _cell(18 + A, 0, 40)] = 2
    root[0, _cell(18 + B, 0, 40)] = 3
    assert switcher.repair(root, np.array([0]), root=True).tolist() == [0]
    assert switcher.counts(root)[0, [A, B]].tolist() == [4, 1]
    kids = np.zeros((2, SCHEMA.size), dtype=np.int64)  # the passes' split of the root
    kids[0, _cell(18 + A, 0, 40)] = 2
    kids[1, _cell(18 + A, 0, 40)] = 2
    kids[1, _cell(18 + B, 0, 40)] = 1  # b2 has no facility of B
    assert np.array_equal(kids.sum(axis=0), root[0])
    assert switcher.repair(kids, np.array([1, 2])).tolist() == [0, 0]
    assert switcher.counts(kids)[:, [A, B]].tolist() == [[1, 1], [3, 0]]


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
    odd = sparse.csr_array((geo.leaves.size, 5))
    with pytest.raises(ValidationError, match=r"`reach` must have shape \(3, "):
        top_down_2020(m, held=held, bounds=[bounds], reach=odd)
    with pytest.raises(ValidationError, match="give the DHC's `bounds` too"):
        top_down_2020(m, held=held, bounds=[], reach=odd)
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

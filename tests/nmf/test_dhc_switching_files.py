"""Record switching through a DHC run's files (issue 46): the subtree tasks whose leaves lie
above the blocks (the top, and every cut task) read their leaves' reach to the blocks from
the run's block bounds and the PL94 release held, the same reach a task solved down to the
blocks makes of them in memory (``postprocess/topdown2020/switching.py``, "Looking ahead to
the blocks"). Run cut into tasks of one block, the release is the one-task release: shown
on the synthetic District at scale 0.02 (``docs/scale.md``), too large for this suite."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from postdp import nmf
from postdp.cli import main
from postdp.data import dhc_facility_bounds, synthetic_dhc_facilities
from postdp.nmf._held import Held
from postdp.postprocess.topdown2020.switching import FIRST_GQ, Switcher
from postdp.tables import Marginal, dhc_schema
from postdp.tables.strategies import PL94_IN_DHC

SCALE = "0.0006"  # the District of Columbia: 414 persons (10 in group quarters), 17 geounits
LEVELS = ("US", "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset")
LEVELS += ("Block_Group", "Block")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A DHC run with the synthetic facilities by detailed type and the PL94 release of the
    same persons."""
    root = tmp_path_factory.mktemp("dhc-switch")
    dhc, pl94, release = (root / n for n in ("dhc", "pl94", "release"))
    common = ["measure", "--synthetic", "11", "--population-scale", SCALE, "--population-seed", "3"]
    common += ["--study", "--quiet"]
    assert main([*common, "--strategy", "dhc-2020-persons", "--facilities", "synthetic",
                 "--seed", "3", "--output-dir", str(dhc)]) == 0  # fmt: skip
    assert main([*common, "--strategy", "pl94-2020-persons", "--facilities", "synthetic",
                 "--seed", "4", "--output-dir", str(pl94)]) == 0  # fmt: skip
    args = ["postprocess", str(pl94), "--method", "topdown-2020", "--quiet"]
    assert main([*args, "--output-dir", str(release)]) == 0
    return {"dhc": dhc, "release": release}


def _held_blocks(release, geo) -> np.ndarray:
    """Every DHC block's PL94 histogram in the release (matched without the prim digit)."""
    pl94 = Marginal(dhc_schema(), PL94_IN_DHC)
    index = {name: k for k, name in enumerate(pl94.labels)}
    frame = pd.read_parquet(release / "long" / "Block.parquet")
    out = np.zeros((geo.leaves.size, pl94.size))
    row = {"0" + str(geo.ids[b]): k for k, b in enumerate(geo.leaves)}
    tab = {code[:6] + code[7:]: k for code, k in row.items()}
    for g, cat, est in zip(frame["geocode"].astype(str), frame["category"].astype(str),
                           frame["estimate"], strict=True):  # fmt: skip
        out[tab[g], index[cat]] += est
    return out


def test_a_cut_task_reads_its_leaves_reach_to_the_blocks(runs):
    """``Held.reach`` of the tract subsets (a cut task's leaves) and of the state (the
    top's leaf) equals the blocks' reach made in memory from the truth's facility bounds
    and the release's block histograms, summed by tract subset and in all; and there are
    group-quarters persons to deliver, so the comparison has something in it."""
    truth = nmf.synthetic_truth(runs["dhc"])
    geo = truth.geography
    bounds = dhc_facility_bounds(synthetic_dhc_facilities(truth), geo)
    switcher = Switcher.of_schema(
        dhc_schema(), bounds.lower[:0, FIRST_GQ:], bounds.upper[:0, FIRST_GQ:]
    )
    held = _held_blocks(runs["release"], geo)
    per_block = switcher.block_reach(held, bounds.upper[geo.leaves, FIRST_GQ:]).toarray()
    assert per_block.sum() > 0
    subsets = geo.levels[LEVELS.index("Tract_Subset")]
    owner = np.array([next(s for s in subsets if _below(geo, b, s)) for b in geo.leaves])
    source = Held(str(runs["release"]), "Block")
    leaves = ["0" + str(geo.ids[s]) for s in subsets]
    read = source.reach(str(runs["dhc"]), "011", leaves).toarray()
    expected = np.stack([per_block[owner == s].sum(axis=0) for s in subsets])
    np.testing.assert_array_equal(read, expected)
    state = source.reach(str(runs["dhc"]), "011", ["011"]).toarray()
    np.testing.assert_array_equal(state, per_block.sum(axis=0, keepdims=True))


def _below(geo, node, ancestor) -> bool:
    while node >= 0:
        if node == ancestor:
            return True
        node = geo.parent[node]
    return False

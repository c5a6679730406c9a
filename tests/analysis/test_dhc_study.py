"""The accuracy study applied to the DHC persons design (issue 46, part 3): each draw holds a
PL94 release of its own of the same persons (``postdp.analysis.HeldRelease``, as the 2020
production held the published redistricting release, ``dhc-2020-design.md`` section 4.2),
and the releases are scored on the DHC's marginals (single years of age by sex first)."""

from __future__ import annotations

import numpy as np
import pytest

from postdp.analysis import DHC_QUERIES, HeldRelease, accuracy_study, census_metrics
from postdp.data import synthetic_dhc_population
from postdp.errors import ValidationError
from postdp.nmf import synthetic_population
from postdp.postprocess import top_down_2020
from postdp.tables import Marginal, dhc_schema, load_strategy, measure
from postdp.tables.strategies import PL94_IN_DHC
from tests.postprocess._dhc import true_pl94

SCALE = 0.0002  # the District of Columbia: 138 persons, 10 geounits on the DHC spine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def truth():
    return synthetic_dhc_population(["11"], seed=0, scale=SCALE)


def test_each_draw_holds_a_pl94_release_of_the_same_persons_on_the_dhc_spine(truth):
    """The held histograms are of the DHC truth's geounits (the same spine), consistent,
    whole, with the true total at the root (the invariant), and differ from the true PL94
    histograms (a release, not the truth) and from one seed to another."""
    held = HeldRelease(synthetic_population(["11"], seed=0, scale=SCALE))
    assert held.geography.ids.tolist() == truth.geography.ids.tolist()
    one, two = held(np.random.SeedSequence(1)), held(np.random.SeedSequence(2))
    geo = truth.geography
    true = true_pl94(truth)
    for h in (one, two):
        assert h.shape == (geo.n, 2016) and h.dtype == np.int64 and (h >= 0).all()
        assert np.array_equal(geo.aggregate(h.T).T, h)
        assert h[geo.root].sum() == true[geo.root].sum()
    assert not np.array_equal(one, true) and not np.array_equal(one, two)
    assert np.array_equal(one, held(np.random.SeedSequence(1)))  # a seed's release


def test_a_dhc_study_is_each_draw_topdown_held_to_its_own_release(truth):
    """The study's rows for a draw are what one gets by hand from the draw's streams: the
    DHC draw from child 0, the PL94 release from child 1 + E, ``top_down_2020`` held to it,
    and the metrics of the DHC's marginals (the blocks' single years of age by sex: the mean
    absolute error over every count); refusals come before any draw."""
    work = load_strategy("dhc-2020-persons").workload(truth)
    pl94 = synthetic_population(["11"], seed=0, scale=SCALE)
    study = accuracy_study(truth, work, ["topdown-2020"], schema=dhc_schema(), draws=2,
                           rng=9, held=HeldRelease(pl94), bins=[0])  # fmt: skip
    rows = study.per_draw
    assert set(rows["query"]) == set(DHC_QUERIES) and set(rows["draw"]) == {0, 1}
    geo = truth.geography
    noise, _, stream = np.random.SeedSequence(9).spawn(2)[1].spawn(3)
    m = measure(truth, work, secure=False, rng=np.random.default_rng(noise))
    held = HeldRelease(pl94)(stream)
    released = top_down_2020(m, held=held)
    blocks = geo.levels[-1]
    age_sex = Marginal(dhc_schema(), "sex * age")
    true = age_sex.apply(truth.level_detailed(geo.n_levels - 1).toarray().astype(float))
    mae = np.abs(age_sex.apply(released[blocks].astype(float)) - true).mean()
    got = rows[
        (rows["draw"] == 1)
        & (rows["query"] == "sex * age")
        & (rows["level"] == str(geo.n_levels - 1))
    ]
    assert got["counts"].tolist() == [blocks.size * 232]
    assert got["mae"].iloc[0] == pytest.approx(mae, rel=1e-12)
    # the PL94 answers the release holds are its held histograms', not the truth's
    pl94_of = Marginal(dhc_schema(), PL94_IN_DHC)
    assert np.array_equal(pl94_of.apply(released.astype(float)), held)
    assert np.array_equal(held, HeldRelease(pl94)(stream))  # the seed's, however often
    scored = census_metrics(released, truth, schema=dhc_schema(), queries=["sex * age"], bins=[0])
    assert scored["mae"].iloc[-1] == pytest.approx(mae, rel=1e-12)
    with pytest.raises(ValidationError, match=r"`held` must have shape \(10, 2016\)"):
        accuracy_study(
            truth, work, ["topdown-2020"], schema=dhc_schema(), draws=2, held=np.zeros(3)
        )
    with pytest.raises(ValidationError, match="not an attribute or recode"):
        census_metrics(released, truth, schema=dhc_schema(), queries=["shoe size"])

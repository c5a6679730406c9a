"""Constraint matrices, public nodes, and the code-column and synthetic builders."""

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.data import county_hierarchy, load_county_populations, synthetic_hierarchy
from postdp.errors import HierarchyError, ValidationError
from postdp.hierarchy import constraint_matrix, constraints, resolve_public


def test_constraint_matrix_holds_for_true_counts():
    h = county_hierarchy()
    A = constraint_matrix(h)
    assert A.shape == (52, 3195)  # the nation and 51 states have children
    assert np.abs(A @ h.counts).max() == 0
    A2, b = constraints(h, public=["US", "06"])
    assert A2.shape == (54, 3195)
    np.testing.assert_array_equal(A2 @ h.counts, b)


def test_resolve_public_forms():
    h = Hierarchy.from_parents(
        ["T", "a", "b", "b1", "b2"], [None, "T", "T", "b", "b"], [10, 4, 6, 1, 5]
    )
    assert resolve_public(h, public=None).mask.sum() == 0
    assert resolve_public(h, public="root").values[0] == 10
    pub = resolve_public(h, public=["b1", "b2"])
    assert pub.determined.tolist() == [False, False, True, True, True]
    assert pub.floor.tolist() == [6.0, 0.0, 6.0, 1.0, 5.0]
    pub = resolve_public(h, public={"b": 7.5})
    assert pub.values[2] == 7.5
    with pytest.raises(ValidationError, match="needs true counts"):
        resolve_public(Hierarchy.from_parents(["T"], [None]), public="root")


def test_from_codes_rebuilds_the_county_hierarchy():
    df = load_county_populations()
    counties = df[df["level"] == "county"]
    codes = pd.DataFrame(
        {"st": counties["id"].str[:2], "co": counties["id"].str[2:], "pop": counties["count"]}
    )
    h = Hierarchy.from_codes(codes, ["st", "co"], count="pop")
    ref = county_hierarchy()
    assert sorted(h.ids) == sorted(ref.ids)
    ours = dict(zip(h.ids, h.counts, strict=True))
    theirs = dict(zip(ref.ids, ref.counts, strict=True))
    assert ours == theirs


def test_from_codes_numeric_codes_and_errors():
    df = pd.DataFrame({"STATE": [1, 1, 2], "COUNTY": [1, 3, 13], "pop": [5, 6, 7]})
    h = Hierarchy.from_codes(df, ["STATE", "COUNTY"], count="pop", widths=[2, 3], root="N")
    assert list(h.ids) == ["N", "01", "02", "01001", "01003", "02013"]
    with pytest.raises(ValidationError, match=r"column 'CTY' is not in the table"):
        Hierarchy.from_codes(df, ["STATE", "CTY"], count="pop")
    dup = pd.DataFrame({"s": ["01", "01"], "c": ["001", "001"], "pop": [1, 2]})
    with pytest.raises(HierarchyError, match=r"duplicate leaf codes: '01001'"):
        Hierarchy.from_codes(dup, ["s", "c"], count="pop")
    neg = pd.DataFrame({"s": ["01"], "c": ["001"], "pop": [-1]})
    with pytest.raises(ValidationError, match=r"`counts` must be nonnegative; got -1 at index 0"):
        Hierarchy.from_codes(neg, ["s", "c"], count="pop")
    with pytest.raises(ValidationError, match=r"`widths` needs one width per code column"):
        Hierarchy.from_codes(df, ["STATE", "COUNTY"], count="pop", widths=[2])


def test_synthetic_hierarchy_shape_and_consistency():
    h = synthetic_hierarchy((4, 3, 5), jitter=False, rng=1)
    assert [lvl.size for lvl in h.levels] == [1, 4, 12, 60]
    big = synthetic_hierarchy((10, 8, 6), rng=2, leaf_mean=3.0)
    assert big.counts.min() >= 0
    assert np.abs(constraint_matrix(big) @ big.counts).max() == 0
    same = synthetic_hierarchy((10, 8, 6), rng=2, leaf_mean=3.0)
    np.testing.assert_array_equal(same.counts, big.counts)
    with pytest.raises(ValidationError, match=r"`fanout` values must be finite and at least 1"):
        synthetic_hierarchy((0.5,))

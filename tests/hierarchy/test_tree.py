"""Building and validating hierarchies."""

import warnings

import numpy as np
import pandas as pd
import pytest

from postdp import Hierarchy
from postdp.errors import AmbiguousIdWarning, HierarchyError, ValidationError


def _frame(ids, parents, counts=None):
    df = pd.DataFrame({"id": ids, "parent": parents})
    if counts is not None:
        df["count"] = counts
    return df


def test_three_levels_depths_levels_leaves():
    h = Hierarchy.from_parents(
        ["US", "01", "02", "01001", "01003", "02013"],
        [None, "US", "US", "01", "01", "02"],
        [10, 7, 3, 4, 3, 3],
    )
    assert h.n == 6 and h.n_levels == 3 and h.root == 0
    assert h.depth.tolist() == [0, 1, 1, 2, 2, 2]
    assert [lvl.tolist() for lvl in h.levels] == [[0], [1, 2], [3, 4, 5]]
    assert h.is_leaf.tolist() == [False, False, False, True, True, True]
    assert h.parent.tolist() == [-1, 0, 0, 1, 1, 2]
    assert h.index(["02013", "US"]).tolist() == [5, 0]
    assert h.counts.dtype == np.int64


def test_rows_in_any_order_and_root_marked_by_empty_string():
    h = Hierarchy.from_frame(_frame(["b", "a", "T"], ["T", "T", ""], [2, 1, 3]))
    assert h.root == 2
    assert h.depth.tolist() == [1, 1, 0]


def test_numeric_ids_read_with_missing_parent_keep_integer_form():
    df = pd.DataFrame({"id": [1, 2, 3], "parent": [np.nan, 1.0, 1.0], "count": [2, 1, 1]})
    with pytest.warns(AmbiguousIdWarning, match="leading zeros"):
        h = Hierarchy.from_frame(df)
    assert list(h.ids) == ["1", "2", "3"]
    assert h.parent.tolist() == [-1, 0, 0]


def test_single_node_and_deep_chain():
    assert Hierarchy.from_parents(["only"], [None], [5]).n_levels == 1
    ids = [f"n{i}" for i in range(50)]
    h = Hierarchy.from_parents(ids, [None, *ids[:-1]], [7] * 50)
    assert h.n_levels == 50
    assert h.depth.tolist() == list(range(50))


def test_without_counts():
    h = Hierarchy.from_frame(_frame(["T", "a"], [None, "T"]), count=None)
    assert h.counts is None
    assert "count" not in h.to_frame().columns


@pytest.mark.parametrize(
    ("ids", "parents", "counts", "message"),
    [
        (["T", "a", "a"], [None, "T", "T"], None, r"duplicate ids: 'a'"),
        (["T", "a"], [None, "X"], None, r"parent ids that are not nodes \(orphans\): 'X'"),
        (["T", "U", "a"], [None, None, "T"], None, r"must have one root; got 2: 'T', 'U'"),
        (["a", "b"], ["b", "a"], None, r"no root"),
        (["T", "a", "b", "c"], [None, "T", "c", "b"], None, r"nodes in a cycle .*'b', 'c'"),
        (
            ["T", "a", "b"],
            [None, "T", "T"],
            [5, 2, -3],
            r"counts must be nonnegative; negative at 'b'",
        ),
        (
            ["T", "a", "b"],
            [None, "T", "T"],
            [6, 2, 3],
            r"every parent must equal the sum of its children; they differ at 'T' "
            r"\(at 'T' by 0.17 of the parent's count\)",
        ),
    ],
)
def test_invalid_hierarchies(ids, parents, counts, message):
    with pytest.raises(HierarchyError, match=message):
        Hierarchy.from_parents(ids, parents, counts)


def test_nan_count_rejected():
    with pytest.raises(
        ValidationError, match=r"`counts` must be finite \(no NaN or inf\); got nan at index 1"
    ):
        Hierarchy.from_parents(["T", "a"], [None, "T"], [1.0, np.nan])


def test_missing_column_named():
    with pytest.raises(
        ValidationError,
        match=r"column 'pop' \(given as `count`\) is not in the table; its columns are: id, parent",
    ):
        Hierarchy.from_frame(_frame(["T"], [None]), count="pop")


def test_non_numeric_count_column():
    df = _frame(["T", "a"], [None, "T"], ["3", "three"])
    with pytest.raises(
        ValidationError, match=r"column 'count' holds a non-numeric count at row 1 \(id 'a'\)"
    ):
        Hierarchy.from_frame(df)


def test_float_counts_compared_with_relative_tolerance():
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [0.3, 0.1, 0.2])
    assert h.counts.dtype == np.float64


def test_unknown_id_lookup():
    h = Hierarchy.from_parents(["T", "a"], [None, "T"])
    with pytest.raises(ValidationError, match=r"unknown node ids: 'zz'"):
        h.index("zz")


def test_many_offenders_are_summarised():
    ids = ["T"] + [f"c{i}" for i in range(8)]
    with pytest.raises(HierarchyError, match=r"\(and 3 more\)"):
        Hierarchy.from_parents(ids, [None] + ["nope"] * 8)


def test_aggregate_makes_parents_sums_of_leaves():
    h = Hierarchy.from_parents(
        ["T", "a", "b", "a1", "a2"], [None, "T", "T", "a", "a"], [10, 6, 4, 1, 5]
    )
    np.testing.assert_array_equal(h.aggregate(h.counts + 2), [16, 10, 6, 3, 7])
    batch = np.stack([h.counts, h.counts * 2]).astype(float)
    np.testing.assert_array_equal(h.aggregate(batch)[1], h.counts * 2)
    with pytest.raises(ValidationError, match=r"`values` must have shape \(\.\.\., 5\)"):
        h.aggregate(np.zeros(3))


def test_fips_read_as_text_keep_leading_zeros_and_warn_nothing(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,parent,count\nUS,,3\n01,US,1\nNA,US,2\n")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = Hierarchy.from_frame(df)
    assert list(h.ids) == ["US", "01", "NA"]


def test_parent_sum_check_is_exact_above_2_53():
    big = 2**60
    with pytest.raises(HierarchyError, match=r"differ at 'T'"):
        Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], np.array([big + 1, big, 0]))
    h = Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], np.array([big + 1, big, 1]))
    assert int(h.counts[0]) == big + 1


def test_count_errors_never_show_a_count():
    with pytest.raises(HierarchyError) as info:
        Hierarchy.from_parents(["T", "a", "b"], [None, "T", "T"], [11, 4, 6])
    assert "11" not in str(info.value) and "10" not in str(info.value)
    with pytest.raises(HierarchyError) as info:
        Hierarchy.from_parents(["T", "a"], [None, "T"], [-37, -37])
    assert "37" not in str(info.value)

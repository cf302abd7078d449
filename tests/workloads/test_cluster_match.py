"""Matching two finders' clusters by (frame, x, y), on hand-made records."""

from __future__ import annotations

import numpy as np
import pytest

from clusterbench.model.layout import cluster_dtype
from clusterbench.workloads.clusters import match_clusters


def recs(*items: tuple[int, int, float]) -> np.ndarray:
    """3x3 float32 clusters (x, y, every value v)."""
    out = np.zeros(len(items), cluster_dtype(3, "float32"))
    for i, (x, y, v) in enumerate(items):
        out[i]["x"], out[i]["y"], out[i]["data"] = x, y, v
    return out


def test_matched_only_one_side_and_value_differences() -> None:
    ours = [recs((1, 2, 10.0), (5, 5, 20.0)), recs((0, 0, 7.0))]
    # theirs: (1,2) a little off, (5,5) missing, (3,4) extra; frame 1 the same, listed in another order
    theirs = [recs((3, 4, 9.0), (1, 2, 10.25)), recs((0, 0, 7.0))]
    m = match_clusters(ours, theirs, tolerance=0.1)
    assert (m.frames, m.a_clusters, m.b_clusters, m.matched) == (2, 3, 3, 2)
    assert m.only_a == ((0, 5, 5),) and m.only_b == ((0, 3, 4),)
    assert m.max_abs_diff == pytest.approx(0.25)  # 10.25 - 10.0, every value of the (1, 2) cluster
    assert m.values_over_tolerance == 1
    assert m.a_found_in_b == pytest.approx(2 / 3)
    js = m.to_json()
    assert js["only_a_examples"] == [[0, 5, 5]] and js["tolerance_adu"] == 0.1


def test_frame_counts_must_agree_and_centres_be_unique() -> None:
    with pytest.raises(ValueError, match="saw 1 and 2 frames"):
        match_clusters([recs()], [recs(), recs()], 0.1)
    with pytest.raises(ValueError, match="one centre twice"):
        match_clusters([recs((1, 1, 0.0), (1, 1, 0.0))], [recs()], 0.1)
    empty = match_clusters([recs()], [recs()], 0.1)
    assert empty.matched == 0 and empty.max_abs_diff is None and empty.a_found_in_b == 1.0

"""analysis.stats: Mann–Whitney U, checked against U counted by hand and the exact split counts.

For 3 vs 3 there are C(6, 3) = 20 ways to split six values; U runs 0..9 with counts
1, 1, 2, 3, 3, 3, 3, 2, 1, 1 (the number of 3-subsets of ranks 1..6 with rank sum U + 6).
"""

from __future__ import annotations

import math

import pytest

from clusterbench.model.stats import EXACT_MAX_SPLITS, half_range, mann_whitney_u, median


def _u_by_pairs(a, b) -> float:
    """U of a counted pair by pair: a_i > b_j counts 1, a tie 1/2 (an independent reference)."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def test_complete_separation_3_vs_3_is_the_smallest_exact_p() -> None:
    # U = 0 (no a beats any b); only U = 0 and U = 9 lie 4.5 from the mean 4.5: 2 of 20 splits
    r = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert (r.u, r.n_a, r.n_b, r.method) == (0.0, 3, 3, "exact")
    assert r.p_value == pytest.approx(2 / 20)
    assert mann_whitney_u([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]).u == 9.0


def test_interleaved_samples_are_not_significant() -> None:
    # a beats b in 3 pairs (3>2, 5>2, 5>4); |3 - 4.5| = 1.5; U in {0,1,2,3,6,7,8,9}: 1+1+2+3+3+2+1+1 = 14 of 20
    a, b = [1.0, 3.0, 5.0], [2.0, 4.0, 6.0]
    r = mann_whitney_u(a, b)
    assert r.u == _u_by_pairs(a, b) == 3.0
    assert r.p_value == pytest.approx(14 / 20)


def test_ties_use_mid_ranks_exactly() -> None:
    # pooled 1,2,2,2,3,4 -> mid-ranks 1,3,3,3,5,6. a = {1,2,2}: U = 0.5 + 0.5 = 1 (two ties with b's 2).
    # |U - 4.5| >= 3.5 needs rank sum 7 ({1,3,3}: 3 subsets) or 14 ({3,5,6}: 3 subsets): 6 of 20
    a, b = [1.0, 2.0, 2.0], [2.0, 3.0, 4.0]
    r = mann_whitney_u(a, b)
    assert r.u == _u_by_pairs(a, b) == 1.0
    assert r.p_value == pytest.approx(6 / 20)


def test_unequal_sizes() -> None:
    # one value against three: 4 splits, U in 0..3, mean 1.5; U = 3 is as far out as U = 0: p = 2/4
    r = mann_whitney_u([10.0], [1.0, 2.0, 3.0])
    assert r.u == 3.0 and r.p_value == pytest.approx(0.5)


def test_identical_samples_give_p_one() -> None:
    assert mann_whitney_u([5.0, 5.0, 5.0], [5.0, 5.0, 5.0]).p_value == pytest.approx(1.0)


def test_normal_approximation_without_ties() -> None:
    # 10 vs 10: C(20, 10) = 184,756 splits, beyond the exact limit
    assert math.comb(20, 10) > EXACT_MAX_SPLITS
    a, b = [float(x) for x in range(10)], [float(x) for x in range(5, 15)]
    u = _u_by_pairs(a, b)  # 6>5: 1, 7: 2, 8: 3, 9: 4 -> 10 pairs; the five ties 5..9 give 0.5 each
    assert u == 10 + 5 * 0.5
    r = mann_whitney_u(a, b)
    assert r.method == "normal" and r.u == u
    # tie correction: values 5..9 appear twice (t = 2: t^3 - t = 6 each, 30 in all), N = 20
    var = 10 * 10 / 12 * (21 - 30 / (20 * 19))
    z = (abs(u - 50) - 0.5) / math.sqrt(var)
    assert r.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)
    assert r.p_value < 0.01


def test_median_and_half_range() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert half_range([146_000.0, 150_000.0, 154_700.0]) == 4_350.0
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])

"""model.stats: the bootstrap interval of the ratio of medians, against the exact bootstrap distribution.

The oracle here does not resample: for an odd number n of values x_(1) < ... < x_(n), the median of n
draws with replacement is x_(k) or less exactly when at least (n + 1) / 2 draws are among the k smallest,
so P(median* <= x_(k)) = P(Binomial(n, k / n) >= (n + 1) / 2). The two sides are resampled independently,
so the ratio's distribution is the product of the two; its percentile interval is read off its CDF.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from clusterbench.model.stats import (BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED,
                                      bootstrap_ratio_of_medians, half_range, median)


def _median_distribution(values: list[float]) -> dict[float, Fraction]:
    """The exact distribution of the median of len(values) draws with replacement (odd counts, distinct values)."""
    xs = sorted(values)
    n = len(xs)
    assert n % 2 == 1 and len(set(xs)) == n
    need = (n + 1) // 2

    def cdf(k: int) -> Fraction:
        p = Fraction(k, n)
        return sum((math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(need, n + 1)), Fraction(0))

    return {xs[k - 1]: cdf(k) - cdf(k - 1) for k in range(1, n + 1)}


def _exact_interval(before: list[float], after: list[float], level: float
                    ) -> tuple[float, float, tuple[Fraction, Fraction], tuple[Fraction, Fraction]]:
    """The percentile interval of the exact ratio distribution, and for each end the CDF just below and at it
    (so a test can check that the tail lies well inside that step, where resampling cannot miss it)."""
    dist: dict[float, Fraction] = {}
    for a, pa in _median_distribution(after).items():
        for b, pb in _median_distribution(before).items():
            dist[a / b] = dist.get(a / b, Fraction(0)) + pa * pb
    tail = Fraction(1 - level).limit_denominator(1000) / 2
    cum = Fraction(0)
    ends: list[tuple[float, tuple[Fraction, Fraction]]] = []
    for r in sorted(dist):
        if len(ends) == 0 and cum + dist[r] > tail:
            ends.append((r, (cum, cum + dist[r])))
        if len(ends) == 1 and cum + dist[r] >= 1 - tail:
            ends.append((r, (cum, cum + dist[r])))
        cum += dist[r]
    (low, step_low), (high, step_high) = ends
    return low, high, step_low, step_high


def test_three_against_three_spans_the_extreme_ratios() -> None:
    # 3 a side: each corner of the ratio distribution holds (7/27)^2 = 6.7 % > 2.5 %, so the 95 % interval is
    # [min(after) / max(before), max(after) / min(before)]
    assert _median_distribution([1.0, 2.0, 3.0])[3.0] == Fraction(7, 27)
    ci = bootstrap_ratio_of_medians([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert (ci.low, ci.high) == (4.0 / 3.0, 6.0 / 1.0)
    assert ci.ratio == 5.0 / 2.0 and ci.excludes_one
    assert (ci.level, ci.resamples, ci.seed, ci.n_before, ci.n_after) == (0.95, 10_000, BOOTSTRAP_SEED, 3, 3)
    # the H200 A/A of the issue: 3x3 s1 aa1 [111,556.0, 111,583.4, 111,610.8] against aa3 [111,518.4, 111,523.2,
    # 111,528.1]: every aa3 repeat below every aa1 repeat, so the interval excludes 1 (the floor must then judge)
    ci = bootstrap_ratio_of_medians([111_556.0, 111_583.4, 111_610.8], [111_518.4, 111_523.2, 111_528.1])
    assert ci.high == pytest.approx(111_528.1 / 111_556.0) and ci.high < 1.0 and ci.excludes_one


def test_overlapping_samples_hold_one() -> None:
    # after [90, 140, 170] against before [100, 130, 160]: the interval runs from 90 / 160 to 170 / 100
    ci = bootstrap_ratio_of_medians([100.0, 130.0, 160.0], [90.0, 140.0, 170.0])
    assert (ci.low, ci.high) == (90.0 / 160.0, 170.0 / 100.0) and not ci.excludes_one
    assert ci.ratio == pytest.approx(140.0 / 130.0)


@pytest.mark.parametrize(("before", "after"), [
    ([100.0, 101.0, 102.5, 99.0, 100.4], [103.0, 101.8, 104.2, 102.6, 100.9]),  # 5 vs 5, overlapping
    ([100.0, 101.0, 102.5, 99.0, 100.4], [96.0, 97.5, 98.1, 95.2, 99.4]),  # 5 vs 5, below
    ([10.0, 10.2, 10.1], [10.4, 10.3, 10.9, 10.6, 10.5]),  # 3 vs 5
    ([50.1, 51.6, 49.9, 51.2, 51.8, 51.9, 49.2], [51.4, 48.0, 49.0, 47.9, 51.6, 48.8, 50.3]),  # 7 vs 7, overlapping
])  # fmt: skip
def test_the_interval_is_the_exact_bootstrap_percentile_interval(before: list[float], after: list[float]) -> None:
    low, high, step_low, step_high = _exact_interval(before, after, BOOTSTRAP_LEVEL)
    # each tail lies well inside the CDF's step at its end (4 standard errors of an empirical CDF of 10,000
    # resamples, 4 x 0.0016), so the resampled ends land on the exact values, whatever the seed
    margin, tail = Fraction(64, 10_000), Fraction(1, 40)
    assert step_low[0] + margin < tail < step_low[1] - margin
    assert step_high[0] + margin < 1 - tail < step_high[1] - margin
    ci = bootstrap_ratio_of_medians(before, after)
    assert ci.low == pytest.approx(low, rel=1e-12) and ci.high == pytest.approx(high, rel=1e-12)
    assert ci.ratio == pytest.approx(median(after) / median(before))
    for seed in (1, 2, 3):
        other = bootstrap_ratio_of_medians(before, after, seed=seed)
        assert (other.low, other.high) == (ci.low, ci.high)


def test_the_interval_is_reproducible_and_seeded() -> None:
    a, b = [100.0, 101.0, 102.5, 99.0, 100.4], [103.0, 101.8, 104.2, 102.6, 100.9]
    assert bootstrap_ratio_of_medians(a, b) == bootstrap_ratio_of_medians(a, b)
    assert BOOTSTRAP_RESAMPLES == 10_000 and BOOTSTRAP_LEVEL == 0.95
    # another seed resamples differently: on data where the ends are not pinned by an atom, the ends move
    wide_a = [float(x) for x in range(100, 131)]
    wide_b = [float(x) for x in range(102, 133)]
    assert bootstrap_ratio_of_medians(wide_a, wide_b, seed=1) != bootstrap_ratio_of_medians(wide_a, wide_b, seed=2)


def test_identical_sides_hold_one() -> None:
    ci = bootstrap_ratio_of_medians([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert (ci.low, ci.high, ci.ratio) == (1.0, 1.0, 1.0) and not ci.excludes_one
    # constant but different sides: every resample gives 1.1
    assert bootstrap_ratio_of_medians([5.0, 5.0], [5.5, 5.5]).low == pytest.approx(1.1)


def test_bad_input_is_refused() -> None:
    for before, after in (([], [1.0]), ([1.0], []), ([0.0, 1.0], [1.0]), ([1.0, math.nan], [1.0])):
        with pytest.raises(ValueError):
            bootstrap_ratio_of_medians(before, after)
    with pytest.raises(ValueError):
        bootstrap_ratio_of_medians([1.0], [1.0], level=1.0)


def test_median_and_half_range() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert half_range([146_000.0, 150_000.0, 154_700.0]) == 4_350.0
    with pytest.raises(ValueError):
        median([])

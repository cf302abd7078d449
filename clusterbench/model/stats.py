"""Small-sample statistics for compare (pure; NumPy only, no SciPy).

The one significance rule: a **bootstrap confidence interval of the ratio of medians** (after / before).
Each side's samples are resampled with replacement ``BOOTSTRAP_RESAMPLES`` times; each resample gives
the ratio of the two resampled medians; the interval is the central ``BOOTSTRAP_LEVEL`` of those ratios
(the percentile method: the order statistics at (1 - level) / 2 and (1 + level) / 2). A change is
significant when the interval excludes 1. The generator is seeded (``BOOTSTRAP_SEED``), so the same
samples always give the same interval and the same verdict.

What it can and cannot say with few repeats: with 3 a side a resampled median is one of the three
values, and the extreme one comes up with probability 7/27 (two or three of three draws), so each
corner of the ratio distribution, min(after) / max(before) and max(after) / min(before), holds
(7/27)² = 6.7 % > 2.5 %: the 95 % interval is exactly [min(after) / max(before), max(after) /
min(before)]. It excludes 1 only when every repeat of one side beats every repeat of the other, as a
Mann–Whitney test at p = 0.1 did; unlike that test it also says how large the change may be. From 5
repeats a side the corners hold (0.058)² = 0.3 % and the interval closes in on the medians. The floor
(compare/noise.py) is what guards A/A pairs of different sessions; the interval guards against a
change the repeats themselves do not support.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# 95 %: the level pyperf's compare_to judges significance at (its two-sample t-test), and the usual one.
# With 3 repeats a side every level above 86.6 % (1 - 2 x (7/27)^2) gives the same interval (the module
# docstring), so a lower one would buy nothing there and would let 5-repeat sides call more noise a change.
BOOTSTRAP_LEVEL = 0.95
# 10,000 resamples: the Monte-Carlo error of the 2.5 % tail is sqrt(0.025 x 0.975 / 10,000) = 0.16 % of the
# resamples, so an interval end sits within about one distinct median ratio of where infinitely many
# resamples would put it; it costs about a millisecond per metric.
BOOTSTRAP_RESAMPLES = 10_000
# Fixed, so that a verdict is reproducible: the same samples always give the same interval.
BOOTSTRAP_SEED = 20_261_201


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """The bootstrap interval of ``median(after) / median(before)``: ``ratio`` the observed one, ``low`` and
    ``high`` the interval at ``level``, from ``resamples`` resamples of each side (``seed``)."""

    ratio: float
    low: float
    high: float
    level: float
    resamples: int
    seed: int
    n_before: int
    n_after: int

    @property
    def excludes_one(self) -> bool:
        """The interval lies wholly above or wholly below 1: a change the repeats support."""
        return self.low > 1.0 or self.high < 1.0


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(np.median(np.asarray(values, dtype=float)))


def half_range(values: Sequence[float]) -> float:
    """Half the min–max range: the spread probe writes as ``<metric>_spread``."""
    if not values:
        raise ValueError("spread of no values")
    return (max(values) - min(values)) / 2.0


def _resampled_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[idx], axis=1)


def bootstrap_ratio_of_medians(before: Sequence[float], after: Sequence[float], *, level: float = BOOTSTRAP_LEVEL,
                               resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> RatioInterval:
    """The percentile bootstrap interval of median(after) / median(before) (see the module docstring).
    ValueError for an empty side, a value that is not a finite number > 0, a level outside (0, 1) or fewer
    than one resample."""
    b = np.asarray(before, dtype=float)
    a = np.asarray(after, dtype=float)
    if b.size < 1 or a.size < 1:
        raise ValueError("the bootstrap needs at least one value on each side")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(a)) and b.min() > 0 and a.min() > 0):
        raise ValueError("the bootstrap of a ratio needs finite values > 0")
    if not 0.0 < level < 1.0 or resamples < 1:
        raise ValueError(f"level must lie in (0, 1) and resamples be >= 1, got {level!r}, {resamples!r}")
    rng = np.random.default_rng(seed)
    ratios = np.sort(_resampled_medians(a, resamples, rng) / _resampled_medians(b, resamples, rng))
    tail = (1.0 - level) / 2.0
    lo = ratios[min(resamples - 1, int(math.floor(tail * resamples)))]
    hi = ratios[max(0, int(math.ceil((1.0 - tail) * resamples)) - 1)]
    return RatioInterval(float(np.median(a) / np.median(b)), float(lo), float(hi), level, resamples, seed,
                         int(b.size), int(a.size))

"""Small-sample statistics for compare (pure; NumPy only, no SciPy).

Mann–Whitney U, two-sided:

* **exact** when the number of ways to split the pooled sample, C(n1 + n2, n1), is at most
  ``EXACT_MAX_SPLITS``: every split is enumerated and the p-value is the share of splits whose
  U lies at least as far from its mean n1·n2/2 as the observed one. Ties are handled exactly,
  because the enumeration uses the observed mid-ranks (a permutation test on the rank sum).
* otherwise the **normal approximation with tie correction** and a continuity correction of 1/2:
  sigma² = n1·n2/12 · ((N + 1) − Σ(t³ − t) / (N·(N − 1))), z = (|U − n1·n2/2| − 1/2) / sigma.

With 3 repeats a side there are C(6, 3) = 20 splits, so the smallest two-sided exact p is
2/20 = 0.1: it is reached only when every value of one side beats every value of the other.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# Enumerate splits up to this many (C(16, 8) = 12,870 fits; 3 vs 3 is 20); beyond, use the normal
# approximation, which is good for n1, n2 >= 8 or so.
EXACT_MAX_SPLITS = 20_000


@dataclass(frozen=True, slots=True)
class MannWhitney:
    """The outcome of a two-sided Mann–Whitney U test of ``a`` against ``b``."""

    u: float  # U of sample a: the number of (a_i, b_j) pairs with a_i > b_j, ties counted 1/2
    n_a: int
    n_b: int
    p_value: float  # two-sided
    method: str  # "exact" or "normal"


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(np.median(np.asarray(values, dtype=float)))


def half_range(values: Sequence[float]) -> float:
    """Half the min–max range: the spread probe writes as ``<metric>_spread``."""
    if not values:
        raise ValueError("spread of no values")
    return (max(values) - min(values)) / 2.0


def _midranks(pooled: np.ndarray) -> np.ndarray:
    """Ranks 1..N, ties sharing the mean of the ranks they span."""
    order = np.argsort(pooled, kind="mergesort")
    ranks = np.empty(len(pooled), dtype=float)
    sorted_vals = pooled[order]
    i = 0
    n = len(pooled)
    while i < n:
        j = i
        while j + 1 < n and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann–Whitney U test (see the module docstring for exact vs normal)."""
    n_a, n_b = len(a), len(b)
    if n_a < 1 or n_b < 1:
        raise ValueError("Mann–Whitney U needs at least one value on each side")
    pooled = np.concatenate([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
    ranks = _midranks(pooled)
    n = n_a + n_b
    u_a = float(ranks[:n_a].sum() - n_a * (n_a + 1) / 2.0)
    mean_u = n_a * n_b / 2.0
    observed = abs(u_a - mean_u)
    if math.comb(n, n_a) <= EXACT_MAX_SPLITS:
        offset = n_a * (n_a + 1) / 2.0
        hits = total = 0
        for idx in itertools.combinations(range(n), n_a):
            u = float(ranks[list(idx)].sum()) - offset
            total += 1
            # a relative 1e-9 keeps equal U values equal despite float sums of mid-ranks
            if abs(u - mean_u) >= observed - 1e-9:
                hits += 1
        return MannWhitney(u_a, n_a, n_b, hits / total, "exact")
    _, counts = np.unique(pooled, return_counts=True)
    tie_term = float(((counts**3) - counts).sum()) / (n * (n - 1))
    var = n_a * n_b / 12.0 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal
        return MannWhitney(u_a, n_a, n_b, 1.0, "normal")
    z = max(observed - 0.5, 0.0) / math.sqrt(var)
    p = math.erfc(z / math.sqrt(2.0))  # two-sided: 2 * (1 - Phi(z))
    return MannWhitney(u_a, n_a, n_b, min(1.0, p), "normal")

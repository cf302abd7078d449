"""intervals.search (searchsorted by counting for sorted keys), intervals.touching, and the one-pass
longest piece of gaps.classify (gaps._longest) against the plain computations they replace."""

from __future__ import annotations

import numpy as np
import pytest

from clusterbench.analyzers import gaps
from clusterbench.analyzers import intervals as iv


@pytest.mark.parametrize("n_edges", [0, 1, 7, 3000])
@pytest.mark.parametrize("side", ["left", "right"])
def test_search_equals_searchsorted(n_edges: int, side: str) -> None:
    rng = np.random.default_rng(n_edges)
    edges = np.sort(rng.integers(0, 5000, n_edges))  # repeated values included
    for keys in (np.sort(rng.integers(-10, 5010, 20_000)),  # sorted: counted
                 rng.integers(-10, 5010, 20_000),  # unsorted: binary searches
                 np.sort(rng.integers(0, 5000, 500)),  # few keys: binary searches
                 np.concatenate([edges, edges])[np.argsort(np.concatenate([edges, edges]), kind="stable")]):  # fmt: skip
        assert np.array_equal(iv.search(edges, keys, side=side), np.searchsorted(edges, keys, side=side))


def test_touching_equals_the_plain_test() -> None:
    rng = np.random.default_rng(3)
    window = iv.union(np.array([100, 300, 600]), np.array([200, 450, 601]))
    s = rng.integers(0, 700, 5000)
    e = s + rng.choice([0, 0, 1, 30], s.size)
    clipped = iv.clipped_lengths(s, e, window)
    plain = (clipped > 0) | ((e == s) & iv.points_inside(s, window))
    assert np.array_equal(iv.touching(s, e, clipped, window), plain)


def _longest_two_passes(chunks, cause, n):
    """gaps.classify's former second pass: per gap, the longest piece in its cause's state."""
    best_len = np.zeros(n, dtype=np.int64)
    best_label = np.full(n, -1, dtype=np.int64)
    for plen, j, st, lab in chunks:
        want = np.flatnonzero((st == cause[j]) & (plen > 0))
        if want.size == 0:
            continue
        srt = want[np.lexsort((plen[want], j[want]))]
        top = srt[np.flatnonzero(np.append(j[srt][1:] != j[srt][:-1], True))]
        better = plen[top] > best_len[j[top]]
        best_len[j[top[better]]] = plen[top[better]]
        best_label[j[top[better]]] = lab[top[better]]
    return best_label


def test_longest_in_one_pass_equals_two_passes() -> None:
    rng = np.random.default_rng(5)
    n, ns = 40, 6
    chunks = []
    for _ in range(6):  # equal lengths, within and across chunks, pick the same piece
        m = 300
        chunks.append((rng.choice([0, 3, 5, 5, 9], m), rng.integers(0, n, m), rng.integers(0, ns, m), rng.integers(0, 50, m)))
    cause = rng.integers(0, ns, n)
    best_len = np.zeros(n * ns, dtype=np.int64)
    best_label = np.full(n * ns, -1, dtype=np.int64)
    for plen, j, st, lab in chunks:
        gaps._longest(plen, j * ns + st, lab, best_len, best_label)
    assert np.array_equal(best_label[np.arange(n) * ns + cause], _longest_two_passes(chunks, cause, n))

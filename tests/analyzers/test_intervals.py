"""Interval arithmetic against hand-worked cases and a brute-force timeline reference."""

from __future__ import annotations

import numpy as np

from clusterbench.analyzers import intervals as iv


def a(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_union_merges_overlap_touch_and_nesting() -> None:
    # [0,10) and [5,15) overlap -> [0,15); [15,20) touches -> [0,20); [30,40) holds [32,35)
    s, e = iv.union(a(30, 5, 0, 15, 32), a(40, 15, 10, 20, 35))
    assert s.tolist() == [0, 30] and e.tolist() == [20, 40]
    assert iv.length((s, e)) == 30


def test_union_drops_empty_intervals() -> None:
    s, e = iv.union(a(5, 7), a(5, 6))  # zero-length and negative
    assert s.size == 0 and iv.length((s, e)) == 0


def test_intersect_with_window_set() -> None:
    busy = (a(0, 50), a(40, 100))
    window = (a(10, 30, 60), a(20, 55, 200))
    s, e = iv.intersect(busy, window)
    # [0,40) ∩ -> [10,20) [30,40); [50,100) ∩ -> [50,55) [60,100)
    assert list(zip(s.tolist(), e.tolist())) == [(10, 20), (30, 40), (50, 55), (60, 100)]


def test_coverage_lengths_counts_one_and_two_fold() -> None:
    sets = [(a(0), a(100)), (a(50), a(150)), (a(90), a(95))]
    # any: [0,150) = 150; >=2: [50,100) = 50
    assert iv.coverage_lengths(sets, 2) == (150, 50)
    s, e = iv.coverage_at_least(sets, 3)
    assert s.tolist() == [90] and e.tolist() == [95]


def test_clip_splits_an_interval_spanning_windows() -> None:
    window = (a(0, 100), a(10, 110))
    ps, pe, owner = iv.clip(a(5, 50, 105), a(105, 60, 107), window)
    got = sorted(zip(ps.tolist(), pe.tolist(), owner.tolist()))
    assert got == [(5, 10, 0), (100, 105, 0), (105, 107, 2)]
    assert iv.clipped_lengths(a(5, 50, 105), a(105, 60, 107), window).tolist() == [10, 0, 2]


def _timeline(intervals: list[tuple[int, int]], size: int) -> np.ndarray:
    t = np.zeros(size, dtype=np.int64)
    for s, e in intervals:
        t[s:e] += 1
    return t


def test_random_cases_match_a_brute_force_timeline() -> None:
    rng = np.random.default_rng(7)
    size = 400
    for _ in range(60):
        n = int(rng.integers(1, 25))
        s = rng.integers(0, size - 1, n)
        e = s + rng.integers(0, 60, n)
        e = np.minimum(e, size)
        wn = int(rng.integers(1, 5))
        ws = np.sort(rng.choice(np.arange(0, size, 10), wn, replace=False))
        we = ws + rng.integers(1, 10, wn)
        window = (ws.astype(np.int64), we.astype(np.int64))
        busy = _timeline(list(zip(s.tolist(), e.tolist())), size) > 0
        win = _timeline(list(zip(ws.tolist(), we.tolist())), size) > 0
        u = iv.union(s, e)
        assert iv.length(u) == int(busy.sum())
        assert iv.length(iv.intersect(u, window)) == int((busy & win).sum())
        ps, pe, _ = iv.clip(s, e, window)
        assert iv.length(iv.union(ps, pe)) == int((busy & win).sum())
        per = iv.clipped_lengths(s, e, window)
        for k in range(n):
            one = _timeline([(int(s[k]), int(e[k]))], size) > 0
            assert per[k] == int((one & win).sum())
        # a second random set: two-fold coverage
        s2 = rng.integers(0, size - 1, n)
        e2 = np.minimum(s2 + rng.integers(0, 60, n), size)
        busy2 = _timeline(list(zip(s2.tolist(), e2.tolist())), size) > 0
        assert iv.coverage_lengths([u, iv.union(s2, e2)], 2) == (int((busy | busy2).sum()), int((busy & busy2).sum()))


def _gaps(sets, window) -> list[int]:  # noqa: ANN001
    from clusterbench.analyzers.gaps import idle

    busy = iv.union(np.concatenate([x[0] for x in sets] or [a()]), np.concatenate([x[1] for x in sets] or [a()]))
    s, e = idle(busy, window, threshold=1)
    return (e - s).tolist()


def test_coverage_and_idle_gaps_by_hand() -> None:
    # window [0,100) ∪ [200,300); set A [10,40) [250,260); set B [30,60)
    window = (a(0, 200), a(100, 300))
    sets = [(a(10, 250), a(40, 260)), (a(30), a(60))]
    assert iv.coverage_lengths(sets, 2) == (50 + 10, 10)  # [10,60) and [250,260); both at [30,40)
    # idle: [0,10) [60,100) [200,250) [260,300); the hole [100,200) is not in the window
    assert _gaps(sets, window) == [10, 40, 50, 40]
    assert _gaps([], window) == [100, 100]


def test_coverage_and_idle_gaps_against_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        window = iv.union(np.sort(rng.integers(0, 400, 3)), np.sort(rng.integers(0, 400, 3)) + 60)
        sets = []
        for _k in range(3):
            s = rng.integers(0, 460, 6)
            sets.append(iv.intersect(iv.union(s, s + rng.integers(1, 50, 6)), window))
        one, two = iv.coverage_lengths(sets, 2)
        gaps = _gaps(sets, window)
        t = np.zeros(600, dtype=int)
        for ss, ee in sets:
            for x, y in zip(ss.tolist(), ee.tolist()):
                t[x:y] += 1
        inside = np.zeros(600, dtype=bool)
        for x, y in zip(window[0].tolist(), window[1].tolist()):
            inside[x:y] = True
        assert one == int((t >= 1).sum()) and two == int((t >= 2).sum())
        idle = inside & (t == 0)
        runs, n = [], 0  # lengths of the maximal idle runs, in time order
        for x in range(600):
            if idle[x]:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        if n:
            runs.append(n)
        assert gaps == runs


def test_subtract_by_hand() -> None:
    # [0,100) ∪ [200,300) minus [10,40) ∪ [90,210) ∪ [250,260) = [0,10) [40,90) [210,250) [260,300)
    got = iv.subtract((a(0, 200), a(100, 300)), (a(10, 90, 250), a(40, 210, 260)))
    assert list(zip(got[0].tolist(), got[1].tolist())) == [(0, 10), (40, 90), (210, 250), (260, 300)]
    assert iv.subtract((a(0), a(10)), iv.empty())[0].tolist() == [0]
    assert iv.subtract(iv.empty(), (a(0), a(10)))[0].size == 0
    assert iv.subtract((a(5), a(10)), (a(0), a(20)))[0].size == 0  # wholly covered

"""Interval arithmetic against hand-worked cases and a brute-force timeline reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert iv.coverage_lengths(sets, 3)[2] == 5  # all three: [90,95)


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


def _gaps(sets, window) -> list[int]:
    busy = iv.union_of(sets)
    s, e = iv.subtract(window, busy)
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


def test_union_stats_against_brute_force() -> None:
    # several lists each sorted by start (overlapping, touching, nested), merged in blocks of 3
    import clusterbench.analyzers.intervals as ivm

    rng = np.random.default_rng(11)
    old = ivm.BLOCK
    ivm.BLOCK = 3
    try:
        for _ in range(60):
            sets = []
            for _k in range(int(rng.integers(1, 4))):
                s = np.sort(rng.integers(0, 500, int(rng.integers(0, 12))))
                sets.append((s, s + rng.integers(0, 40, s.size)))
            t = np.zeros(600, dtype=bool)
            for s, e in sets:
                for x, y in zip(s.tolist(), e.tolist()):
                    t[x:y] = True
            first, last, total, holes = iv.union_stats(sets, hole_ns=5)
            busy = np.flatnonzero(t)
            assert total == int(t.sum())
            if busy.size:
                assert (first, last) == (int(busy[0]), int(busy[-1]) + 1)
                runs, n = [], 0  # the holes between busy stretches, at least 5 long
                for x in range(int(busy[0]), int(busy[-1]) + 1):
                    if not t[x]:
                        n += 1
                    elif n:
                        runs.append((x - n, x))
                        n = 0
                assert list(zip(holes[0].tolist(), holes[1].tolist())) == [r for r in runs if r[1] - r[0] >= 5]
            u = iv.union_of(sets)
            assert int((u[1] - u[0]).sum()) == int(t.sum())
    finally:
        ivm.BLOCK = old


def test_coverage_in_window_against_brute_force() -> None:
    # lists sorted by start (overlapping records, long ones spanning several blocks), a window of
    # several intervals, blocks of 2 intervals: each list's union inside the window, and the time
    # one or more / two or more of them are busy there
    import clusterbench.analyzers.intervals as ivm

    rng = np.random.default_rng(5)
    old = ivm.BLOCK
    ivm.BLOCK = 2
    try:
        for _ in range(80):
            lists = []
            for _k in range(int(rng.integers(1, 4))):
                s = np.sort(rng.integers(0, 500, int(rng.integers(0, 10))))
                lists.append((s, s + rng.integers(0, 120, s.size)))
            window = iv.union(np.sort(rng.integers(0, 600, 3)), np.sort(rng.integers(0, 600, 3)) + 50)
            inside = np.zeros(800, dtype=bool)
            for x, y in zip(window[0].tolist(), window[1].tolist()):
                inside[x:y] = True
            busy = []
            for s, e in lists:
                t = np.zeros(800, dtype=bool)
                for x, y in zip(s.tolist(), e.tolist()):
                    t[x:y] = True
                busy.append(t & inside)
            per, (one, two) = iv.coverage_in_window(lists, window, 2)
            depth = np.sum(busy, axis=0)
            assert per == [int(b.sum()) for b in busy]
            assert (one, two) == (int((depth >= 1).sum()), int((depth >= 2).sum()))
    finally:
        ivm.BLOCK = old


def test_idle_around_against_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    # lists sorted by start (overlapping, nested, touching), points anywhere, blocks of 3: the idle
    # stretch that holds each point or ends at it, walked out on a timeline of unit cells
    monkeypatch.setattr(iv, "BLOCK", 3)
    rng = np.random.default_rng(5)
    for _ in range(80):
        sets = [(s, s + rng.integers(1, 40, s.size)) for s in
                (np.sort(rng.integers(0, 300, int(rng.integers(0, 10)))) for _k in range(int(rng.integers(1, 4))))]  # fmt: skip
        busy = np.zeros(400, dtype=bool)
        for s, e in sets:
            for x, y in zip(s.tolist(), e.tolist()):
                busy[x:y] = True
        starts = [x for s, _ in sets for x in s.tolist()]
        t = np.sort(rng.integers(0, 360, 6))
        lo, hi = iv.idle_around(sets, t)
        for p, got in zip(t.tolist(), zip(lo.tolist(), hi.tolist())):
            if p > 0 and busy[p - 1] and busy[p]:  # busy on both sides of the point
                assert got == (p, p)
                continue
            a0, b0 = p, p  # walk left over idle cells, and right up to the first busy cell
            while a0 > 0 and not busy[a0 - 1]:
                a0 -= 1
            while b0 < busy.size and not busy[b0]:
                b0 += 1
            want_lo = a0 if busy[:a0].any() else np.iinfo(np.int64).min
            want_hi = b0 if any(x >= p for x in starts) else np.iinfo(np.int64).max
            assert got == (want_lo, want_hi), (p, sets)


@st.composite
def _many_windows(draw):  # noqa: ANN001, ANN202
    """A disjoint window set of more intervals than NEAR_ABOVE (some touching), and intervals to ask about:
    clustered in one part of the span (as one slab of a trace is), or anywhere, some of zero length."""
    n = draw(st.integers(iv.NEAR_ABOVE + 1, iv.NEAR_ABOVE * 3))
    gaps = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    widths = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    ws, we, t = [], [], 0
    for g, w in zip(gaps, widths):
        t += g
        ws.append(t)
        t += w
        we.append(t)
    span = t + 10
    lo = draw(st.integers(0, span - 1))
    hi = draw(st.integers(lo, min(span, lo + draw(st.sampled_from([5, 40, span])))))
    k = draw(st.integers(1, 30))
    s = draw(st.lists(st.integers(lo, hi), min_size=k, max_size=k))
    d = draw(st.lists(st.integers(0, 12), min_size=k, max_size=k))
    if draw(st.booleans()):  # an end before its start, as a malformed row has: the answer as without the cut
        d[0] = -draw(st.integers(1, 12))
    return (a(*ws), a(*we)), a(*s), a(*s) + a(*d), span


@settings(max_examples=300, deadline=None)
@given(_many_windows())
def test_a_window_of_many_intervals_cut_to_the_part_asked_about_gives_the_whole_answer(case) -> None:  # noqa: ANN001
    """intersect and clipped_lengths look only at the windows that reach the question's span (_near) once
    the window holds more than NEAR_ABOVE intervals: checked against a brute-force timeline, and the
    points of zero-length intervals (touching) against the closed windows by hand."""
    window, s, e, span = case
    size = span + 20
    if (e < s).any():  # no timeline for an end before its start: the answer must be the uncut set's
        uncut = iv.NEAR_ABOVE
        try:
            iv.NEAR_ABOVE = 1 << 40
            whole = iv.clipped_lengths(s, e, window)
        finally:
            iv.NEAR_ABOVE = uncut
        got = iv.clipped_lengths(s, e, window)
        assert got.tolist() == whole.tolist()
        assert (got[e < s] == 0).all()  # no length, not a negative one
        return
    win = _timeline(list(zip(window[0].tolist(), window[1].tolist())), size) > 0
    per = iv.clipped_lengths(s, e, window)
    for k in range(s.size):
        one = _timeline([(int(s[k]), int(e[k]))], size) > 0
        assert per[k] == int((one & win).sum())
    u = iv.union(s, e)
    got = iv.intersect(window, u)
    busy = _timeline(list(zip(u[0].tolist(), u[1].tolist())), size) > 0
    assert iv.length(got) == int((busy & win).sum())
    assert (got[1] > got[0]).all() and (got[0][1:] >= got[1][:-1]).all()  # a disjoint set in order
    assert _timeline(list(zip(got[0].tolist(), got[1].tolist())), size).max(initial=0) <= 1
    touch = iv.touching(s, e, per, window)
    closed = [any(ws_ <= x <= we_ for ws_, we_ in zip(window[0].tolist(), window[1].tolist())) for x in s.tolist()]
    for k in range(s.size):
        assert touch[k] == (per[k] > 0 or (e[k] == s[k] and closed[k]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 70_000), max_size=60), st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint16]))
def test_distinct_is_numpys_unique(values, dtype) -> None:
    """distinct() counts small non-negative values and hands the rest to np.unique: either way the same
    ascending Python ints as np.unique(x).tolist() (values that do not fit the dtype are dropped first)."""
    info = np.iinfo(dtype)
    x = np.array([v for v in values if info.min <= v <= info.max], dtype=dtype)
    got = iv.distinct(x)
    assert got == np.unique(x).tolist() and all(type(v) is int for v in got)


def test_distinct_by_hand() -> None:
    assert iv.distinct(np.array([7, 3, 7, 0, 3], dtype=np.int16)) == [0, 3, 7]  # counted
    assert iv.distinct(np.array([-1, 5, -1])) == [-1, 5]  # a negative value: np.unique
    assert iv.distinct(np.array([1 << 20, 2])) == [2, 1 << 20]  # past the count's range: np.unique
    assert iv.distinct(np.array([], dtype=np.int64)) == []

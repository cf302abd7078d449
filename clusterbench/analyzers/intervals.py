"""Interval arithmetic on NumPy arrays: union, intersection, clipping, k-fold coverage.

An interval set is a pair ``(starts, ends)`` of int64 arrays (ns), half-open [start, end).
A *disjoint* set is sorted by start with every interval ending before the next one starts;
``union`` produces one. Everything is vectorized: no Python loop per interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

_EMPTY = np.empty(0, dtype=np.int64)


def empty() -> Intervals:
    return _EMPTY, _EMPTY


def _is_sorted(x: np.ndarray) -> bool:
    return bool(x.size < 2 or (x[1:] >= x[:-1]).all())


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The union of arbitrary intervals as a disjoint sorted set (touching intervals merge)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    if not keep.all():
        starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return empty()
    if _is_sorted(starts):  # exports are written in time order: skip the sort
        s, e = starts, ends
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # a merged interval begins where the start lies beyond every end seen so far
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def length(iv: Intervals) -> int:
    """Total length of a disjoint set."""
    return int((iv[1] - iv[0]).sum())


def _intersect_general(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> Intervals:
    # for each interval of a, the intervals of b that overlap it are b[i0:i1]
    i0 = np.searchsorted(b_e, a_s, side="right")
    i1 = np.searchsorted(b_s, a_e, side="left")
    n = np.maximum(i1 - i0, 0)
    rep = np.repeat(np.arange(a_s.size), n)
    offsets = np.cumsum(n) - n
    j = i0[rep] + (np.arange(rep.size) - offsets[rep])
    s = np.maximum(a_s[rep], b_s[j])
    e = np.minimum(a_e[rep], b_e[j])
    keep = e > s
    return s[keep], e[keep]


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two disjoint sets, as a disjoint set."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0 or b_s.size == 0:
        return empty()
    if b_s.size == 1:
        s = np.maximum(a_s, b_s[0])
        e = np.minimum(a_e, b_e[0])
        keep = e > s
        return s[keep], e[keep]
    # fast path: intervals of a that lie inside one interval of b stay as they are
    i = np.searchsorted(b_s, a_s, side="right") - 1
    k = np.maximum(i, 0)
    inside = (i >= 0) & (a_e <= b_e[k])
    if inside.all():
        return a_s, a_e
    rest_s, rest_e = _intersect_general(a_s[~inside], a_e[~inside], b_s, b_e)
    s = np.concatenate([a_s[inside], rest_s])
    e = np.concatenate([a_e[inside], rest_e])
    order = np.argsort(s, kind="stable")
    return s[order], e[order]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of the disjoint set ``a`` outside the disjoint set ``b``, as a disjoint set."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0 or b_s.size == 0:
        return a_s, a_e
    # the complement of b, bounded by a's hull, intersected with a
    lo, hi = min(int(a_s[0]), int(b_s[0])), max(int(a_e[-1]), int(b_e[-1]))
    c_s = np.concatenate([[lo], b_e])
    c_e = np.concatenate([b_s, [hi]])
    keep = c_e > c_s
    return intersect(a, (c_s[keep], c_e[keep]))


def _sweep(sets: Sequence[Intervals]) -> tuple[np.ndarray, np.ndarray]:
    """Event times in order, and how many sets are active right after each event."""
    sets = [s for s in sets if s[0].size]
    if not sets:
        return _EMPTY, _EMPTY
    parts_t, parts_d = [], []
    for s, e in sets:  # a disjoint set interleaved s0 e0 s1 e1 ... is already sorted
        t = np.empty(2 * s.size, dtype=np.int64)
        t[0::2], t[1::2] = s, e
        d = np.empty(2 * s.size, dtype=np.int8)  # depth never exceeds the number of sets
        d[0::2], d[1::2] = 1, -1
        parts_t.append(t)
        parts_d.append(d)
    t = np.concatenate(parts_t)
    d = np.concatenate(parts_d)
    if len(sets) > 1:
        order = np.argsort(t, kind="stable")  # timsort: merges the sorted runs
        t, d = t[order], d[order]
    return t, np.cumsum(d, dtype=np.int16)


def coverage_lengths(sets: Sequence[Intervals], max_k: int = 2) -> tuple[int, ...]:
    """For k = 1..max_k, the time during which at least k of the disjoint sets are active."""
    t, depth = _sweep(sets)
    if t.size == 0:
        return (0,) * max_k
    seg = np.diff(t)
    dep = depth[:-1]
    return tuple(int(seg[dep >= k].sum()) for k in range(1, max_k + 1))


def coverage_at_least(sets: Sequence[Intervals], k: int) -> Intervals:
    """Where at least ``k`` of the disjoint sets are active, as a disjoint set."""
    t, depth = _sweep(sets)
    if t.size == 0 or k < 1:
        return empty()
    on = depth[:-1] >= k
    return union(t[:-1][on], t[1:][on])  # union merges pieces split at tied events


def clip(
    starts: np.ndarray, ends: np.ndarray, window: Intervals
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Cut arbitrary intervals to the disjoint ``window`` set.

    Returns the non-empty pieces ``(piece_starts, piece_ends, owner)`` where ``owner`` is
    the index of the interval each piece came from; an interval spanning several windows
    gives several pieces. ``owner`` is None when every interval lies wholly inside one
    window and is non-empty: the pieces are then the intervals themselves.
    ``union(pieces)`` equals ``intersect(union(intervals), window)``.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    ws, we = window
    if ws.size == 0 or starts.size == 0:
        return _EMPTY, _EMPTY, _EMPTY
    if ws.size == 1:
        lo, hi = ws[0], we[0]
        if starts.min() >= lo and ends.max() <= hi and (ends > starts).all():
            return starts, ends, None
        ps = np.maximum(starts, lo)
        pe = np.minimum(ends, hi)
        keep = pe > ps
        return ps[keep], pe[keep], np.flatnonzero(keep)
    i = np.searchsorted(ws, starts, side="right") - 1
    inside = (i >= 0) & (ends <= we[np.maximum(i, 0)]) & (ends > starts)
    if inside.all():
        return starts, ends, None
    idx_in = np.flatnonzero(inside)
    rest = np.flatnonzero(~inside)
    r_s, r_e = starts[rest], ends[rest]
    i0 = np.searchsorted(we, r_s, side="right")
    i1 = np.searchsorted(ws, r_e, side="left")
    n = np.maximum(i1 - i0, 0)
    rep = np.repeat(np.arange(rest.size), n)
    j = i0[rep] + (np.arange(rep.size) - (np.cumsum(n) - n)[rep])
    ps = np.maximum(r_s[rep], ws[j])
    pe = np.minimum(r_e[rep], we[j])
    keep = pe > ps
    return (
        np.concatenate([starts[idx_in], ps[keep]]),
        np.concatenate([ends[idx_in], pe[keep]]),
        np.concatenate([idx_in, rest[rep[keep]]]),
    )


def clipped_lengths(starts: np.ndarray, ends: np.ndarray, window: Intervals) -> np.ndarray:
    """Per interval, the length that lies inside the disjoint ``window`` set."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    ws, we = window
    if ws.size == 0:
        return np.zeros(starts.shape, dtype=np.int64)
    if ws.size == 1:
        lo, hi = ws[0], we[0]
        return np.maximum(np.clip(ends, lo, hi) - np.clip(starts, lo, hi), 0)
    widths = we - ws
    cum = np.concatenate([[0], np.cumsum(widths)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # window length in (-inf, t]
        i = np.searchsorted(ws, t, side="right") - 1  # last window starting at or before t
        k = np.maximum(i, 0)
        inside = np.clip(t - ws[k], 0, widths[k])
        return np.where(i >= 0, cum[k] + inside, 0)

    # fast path: an interval inside one window keeps its whole length
    i = np.searchsorted(ws, starts, side="right") - 1
    contained = (i >= 0) & (ends <= we[np.maximum(i, 0)])
    out = np.where(contained, ends - starts, 0)
    if not contained.all():
        rest = ~contained
        out[rest] = np.maximum(covered_before(ends[rest]) - covered_before(starts[rest]), 0)
    return out


def points_inside(t: np.ndarray, window: Intervals) -> np.ndarray:
    """Whether each time point lies in the window (closed intervals)."""
    ws, we = window
    t = np.asarray(t, dtype=np.int64)
    if ws.size == 0:
        return np.zeros(t.shape, dtype=bool)
    i = np.searchsorted(ws, t, side="right") - 1
    return (i >= 0) & (t <= we[np.maximum(i, 0)])

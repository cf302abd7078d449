"""Interval arithmetic on NumPy arrays: union, intersection, clipping, k-fold coverage.

An interval set is a pair ``(starts, ends)`` of int64 arrays (ns), half-open [start, end).
A *disjoint* set is sorted by start with every interval ending before the next one starts;
``union`` produces one. Everything is vectorized: no Python loop per interval. Large inputs go
through in blocks of BLOCK intervals, so that the temporaries stay a few MB: ``union_stats`` and
``coverage_in_window`` measure unions of millions of records without building them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clusterbench.io.nsys.reader import chunk_rows_setting

Intervals = tuple[np.ndarray, np.ndarray]

_EMPTY = np.empty(0, dtype=np.int64)


def empty() -> Intervals:
    return _EMPTY, _EMPTY


# intervals per step: the temporaries stay a few MB whatever the input size (CLUSTERBENCH_CHUNK_ROWS sets
# it, with the reader's chunks: the tests run every bundled trace in blocks of 64)
BLOCK = chunk_rows_setting() or (1 << 18)
# a set of more intervals than this is cut to the part a question reaches before it is walked (_near)
NEAR_ABOVE = 64


def is_sorted(x: np.ndarray) -> bool:
    """Whether ``x`` never decreases (checked in blocks)."""
    if x.size < 2:
        return True
    for b0 in range(0, x.size - 1, BLOCK):  # in blocks: no full-size temporary
        blk = x[b0 : b0 + BLOCK + 1]
        if not bool((blk[1:] >= blk[:-1]).all()):
            return False
    return True


def distinct(x: np.ndarray) -> list[int]:
    """The distinct values of an integer array, ascending, as Python ints: ``np.unique(x).tolist()``, by a
    count over the values where they are small and non-negative (streams, names, threads: what the slab
    path asks this of, once a slab per accumulator), which costs a fraction of np.unique's hashing."""
    x = np.asarray(x)
    if x.size == 0:
        return []
    if x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if lo >= 0 and hi < DISTINCT_COUNT_MAX:
            return np.flatnonzero(np.bincount(x.astype(np.intp, copy=False), minlength=hi + 1)).tolist()
    return np.unique(x).tolist()


DISTINCT_COUNT_MAX = 1 << 16  # values up to this are counted by distinct(); larger ones go to np.unique


def search(a: np.ndarray, v: np.ndarray, side: str = "right") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` for a sorted ``a``. When ``v`` is sorted too (records in start
    order) and not shorter than ``a``, by counting: one binary search per element of ``a`` and one pass
    over ``v``, instead of a binary search per element of ``v`` (3 to 6 times faster against the
    thousands of intervals of a window of many ranges)."""
    if v.size < 1024 or v.size < a.size or not is_sorted(v):
        return np.searchsorted(a, v, side=side)
    # a[k] <= v[j] (side right) exactly when j >= searchsorted(v, a[k], "left"); likewise for side left.
    # The answer steps up by one at each such j: the runs between them are written out by np.repeat, in
    # one pass (2.6 times faster than counting with bincount then summing with cumsum)
    edges = np.empty(a.size + 2, dtype=np.int64)
    edges[0], edges[-1] = 0, v.size
    edges[1:-1] = np.searchsorted(v, a, side="left" if side == "right" else "right")
    return np.repeat(np.arange(a.size + 1, dtype=np.int64), np.diff(edges))


def _runs(blocks):  # noqa: ANN001, ANN202
    """The union of intervals that come sorted by start, block by block (an iterable of (s, e) arrays):
    yields, per block, the merged intervals that are complete, as (starts, ends) arrays, and last the
    one still open. Zero-length intervals are left out."""
    carry_s = carry_e = None  # the merged interval still open at the end of the last block
    for sb, eb in blocks:
        keep = eb > sb
        if not keep.all():
            sb, eb = sb[keep], eb[keep]
        if sb.size == 0:
            continue
        reach = np.maximum.accumulate(eb)
        if carry_e is not None:
            np.maximum(reach, carry_e, out=reach)
        # a merged interval begins where the start lies beyond every end seen so far
        new = np.empty(sb.size, dtype=bool)
        new[0] = carry_e is None or bool(sb[0] > carry_e)
        np.greater(sb[1:], reach[:-1], out=new[1:])
        idx = np.flatnonzero(new)
        starts, ends = sb[idx], reach[idx[1:] - 1]  # each new interval but the last closes in the block
        if carry_e is not None and new[0]:  # the open one closed before the block
            starts, ends = np.concatenate([[carry_s], starts]), np.concatenate([[carry_e], ends])
        elif carry_e is not None and idx.size:  # the block continues the open one, then new ones start
            starts, ends = np.concatenate([[carry_s], starts]), np.concatenate([[reach[idx[0] - 1]], ends])
        elif carry_e is not None:  # the whole block continues the open one
            starts, ends = np.array([carry_s], dtype=np.int64), _EMPTY
        if ends.size:
            yield starts[: ends.size], ends
        carry_s, carry_e = int(starts[-1]), int(reach[-1])
    if carry_e is not None:
        yield np.array([carry_s], dtype=np.int64), np.array([carry_e], dtype=np.int64)


def _union_pass(blocks, capacity: int) -> Intervals:  # noqa: ANN001
    """The union of intervals that come sorted by start, block by block, written into buffers of
    ``capacity`` (pages never written take no memory)."""
    out_s = np.empty(capacity, dtype=np.int64)
    out_e = np.empty(capacity, dtype=np.int64)
    m = 0
    for s, e in _runs(blocks):
        out_s[m : m + s.size] = s
        out_e[m : m + s.size] = e
        m += s.size
    if m == 0:
        return empty()
    if m < capacity // 2:  # let the large buffers go
        return out_s[:m].copy(), out_e[:m].copy()
    return out_s[:m], out_e[:m]


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The union of arbitrary intervals as a disjoint sorted set (touching intervals merge)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    if not keep.all():
        starts, ends = starts[keep], ends[keep]
    del keep
    if starts.size == 0:
        return empty()
    if is_sorted(starts):  # exports are written in time order: skip the sort
        s, e = starts, ends
        if _apart(s, e):  # already disjoint (records that never touch): the set is the records themselves
            return s, e
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        del order
    n = s.size
    return _union_pass(((s[b0 : b0 + BLOCK], e[b0 : b0 + BLOCK]) for b0 in range(0, n, BLOCK)), n)


def _apart(s: np.ndarray, e: np.ndarray) -> bool:
    """Sorted intervals that each end before the next one starts."""
    for b0 in range(0, s.size - 1, BLOCK):
        if not bool((s[b0 + 1 : b0 + 1 + BLOCK] > e[b0 : b0 + BLOCK][: s[b0 + 1 : b0 + 1 + BLOCK].size]).all()):
            return False
    return True


def _merged_blocks(sets: list[Intervals]):
    """Blocks of the intervals of several lists (each sorted by start), merged in start order."""
    total = sum(int(x[0].size) for x in sets)
    big = max(sets, key=lambda x: x[0].size)[0]
    step = max(1, int(BLOCK * big.size / total))  # a block holds about BLOCK intervals of all the sets
    cuts = big[step::step]
    bounds = [np.concatenate([[0], np.searchsorted(x[0], cuts, side="left"), [x[0].size]]) for x in sets]
    for j in range(cuts.size + 1):
        parts = [(x[0][b[j] : b[j + 1]], x[1][b[j] : b[j + 1]]) for x, b in zip(sets, bounds)]
        s = np.concatenate([p[0] for p in parts])
        e = np.concatenate([p[1] for p in parts])
        order = np.argsort(s, kind="stable")
        yield s[order], e[order]


def union_stats(sets: Sequence[Intervals], hole_ns: int | None = None) -> tuple[int, int, int, Intervals]:
    """Over the union of interval lists (each sorted by start), without building it: (first start,
    last end, total length, the holes between its intervals at least ``hole_ns`` long). (0, 0, 0,
    empty) for no interval."""
    sets = [x for x in sets if x[0].size]
    if not sets:
        return 0, 0, 0, empty()
    blocks = _merged_blocks(sets) if len(sets) > 1 else ((x[0][b0 : b0 + BLOCK], x[1][b0 : b0 + BLOCK]) for x in sets for b0 in range(0, x[0].size, BLOCK))
    first = last = None
    total = 0
    hs, he = [], []
    for s, e in _runs(blocks):
        if first is None:
            first = int(s[0])
        total += int((e - s).sum())
        if hole_ns is not None:
            before = np.concatenate([[last], e[:-1]]) if last is not None else e[:-1]
            after = s if last is not None else s[1:]
            k = np.flatnonzero((after - before) >= hole_ns)
            hs.append(before[k])
            he.append(after[k])
        last = int(e[-1])
    if first is None:
        return 0, 0, 0, empty()
    holes = (np.concatenate(hs), np.concatenate(he)) if hs else empty()
    return first, last, total, holes


def union_of(sets: Sequence[Intervals]) -> Intervals:
    """The union of interval lists each sorted by start (disjoint or not), merged block by block in
    time (no full-size sort)."""
    sets = [x for x in sets if x[0].size]
    if not sets:
        return empty()
    if len(sets) == 1:
        return union(*sets[0])
    total = sum(int(x[0].size) for x in sets)
    return _union_pass(_merged_blocks(sets), total)


def length(iv: Intervals) -> int:
    """Total length of a disjoint set."""
    return int((iv[1] - iv[0]).sum())


def _intersect_general(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> Intervals:
    # for each interval of a, the intervals of b that overlap it are b[i0:i1]
    i0 = search(b_e, a_s, side="right")
    i1 = search(b_s, a_e, side="left")
    n = np.maximum(i1 - i0, 0)
    rep = np.repeat(np.arange(a_s.size), n)
    offsets = np.cumsum(n) - n
    j = i0[rep] + (np.arange(rep.size) - offsets[rep])
    s = np.maximum(a_s[rep], b_s[j])
    e = np.minimum(a_e[rep], b_e[j])
    keep = e > s
    return s[keep], e[keep]


def _near(ws: np.ndarray, we: np.ndarray, lo: int, hi: int) -> slice:
    """The intervals of the disjoint set (ws, we) that reach [lo, hi], ends included: two binary searches.
    Those outside it neither overlap nor touch anything in [lo, hi], so a question about intervals or points
    within [lo, hi] gets the same answer from the slice as from the whole set, at the slice's cost (a window
    of 150,000 ranges asked about one slab of a trace, 50,000 rows)."""
    return slice(int(np.searchsorted(we, lo, side="left")), int(np.searchsorted(ws, hi, side="right")))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two disjoint sets, as a disjoint set (``a`` in blocks: the temporaries stay small;
    when every interval of ``a`` lies inside ``b``, ``a`` itself comes back). Only the intervals of ``a``
    that reach ``b``'s span are looked at."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0 or b_s.size == 0:
        return empty()
    if a_s.size > NEAR_ABOVE and (a_s[0] < b_s[0] or a_e[-1] > b_e[-1]):
        near = _near(a_s, a_e, int(b_s[0]), int(b_e[-1]))
        a_s, a_e = a_s[near], a_e[near]
        if a_s.size == 0:
            return empty()
    out_s, out_e = [], []
    whole = True
    for b0 in range(0, a_s.size, BLOCK):
        s, e = a_s[b0 : b0 + BLOCK], a_e[b0 : b0 + BLOCK]
        if b_s.size == 1:
            ps, pe = np.maximum(s, b_s[0]), np.minimum(e, b_e[0])
            keep = pe > ps
            if keep.all() and bool((ps == s).all()) and bool((pe == e).all()):
                out_s.append(s)
                out_e.append(e)
                continue
            whole = False
            out_s.append(ps[keep])
            out_e.append(pe[keep])
            continue
        # fast path: intervals of a that lie inside one interval of b stay as they are
        inside = _contained(s, e, b_s, b_e)
        if inside.all():
            out_s.append(s)
            out_e.append(e)
            continue
        whole = False
        rest_s, rest_e = _intersect_general(s[~inside], e[~inside], b_s, b_e)
        ps = np.concatenate([s[inside], rest_s])
        pe = np.concatenate([e[inside], rest_e])
        order = np.argsort(ps, kind="stable")
        out_s.append(ps[order])
        out_e.append(pe[order])
    if whole:
        return a_s, a_e
    return np.concatenate(out_s), np.concatenate(out_e)


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


def coverage_in_window(lists: Sequence[Intervals], window: Intervals, max_k: int = 2) -> tuple[list[int], tuple[int, ...]]:
    """For interval lists each sorted by start (one engine's records each): the length of each list's
    union inside ``window``, and for k = 1..max_k the time at least k of the unions are active inside
    it. Computed block by block in time (no union is built whole)."""
    lists = [(np.asarray(s_, dtype=np.int64), np.asarray(e_, dtype=np.int64)) for s_, e_ in lists]
    per = [0] * len(lists)
    cov = [0] * max_k
    ws, we = window
    sizes = [x[0].size for x in lists]
    if not any(sizes) or ws.size == 0:
        return per, tuple(cov)
    total = sum(sizes)
    big = lists[int(np.argmax(sizes))][0]
    step = max(1, int(BLOCK * big.size / total))
    cuts = big[step::step]
    edges = [None] + cuts.tolist() + [None]
    pos = [0] * len(lists)
    carry: list[int | None] = [None] * len(lists)  # the furthest end of a list's records started before the block
    lo_all = min(int(x[0][0]) for x in lists if x[0].size)
    hi_all = max(int(x[1].max()) for x in lists if x[1].size)
    for j in range(len(edges) - 1):
        t0 = lo_all if edges[j] is None else int(edges[j])
        t1 = hi_all + 1 if edges[j + 1] is None else int(edges[j + 1])
        if t1 <= t0:
            continue
        # the window within [t0, t1)
        a = int(np.searchsorted(we, t0, side="right"))
        b = int(np.searchsorted(ws, t1, side="left"))
        w_s, w_e = np.maximum(ws[a:b], t0), np.minimum(we[a:b], t1)
        sets = []
        for i, (s_, e_) in enumerate(lists):
            k = int(np.searchsorted(s_, t1, side="left"))
            bs, be = s_[pos[i] : k], e_[pos[i] : k]
            pos[i] = k
            if carry[i] is not None and carry[i] > t0:
                bs = np.concatenate([[t0], bs])
                be = np.concatenate([[carry[i]], be])
            if be.size:
                top = int(be.max())
                carry[i] = top if carry[i] is None else max(carry[i], top)
            u = intersect(union(bs, be), (w_s, w_e)) if w_s.size else empty()
            per[i] += length(u)
            sets.append(u)
        if max_k:
            for k_, v in enumerate(coverage_lengths(sets, max_k)):
                cov[k_] += v
    return per, tuple(cov)


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
    inside = _contained(starts, ends, ws, we)
    inside &= ends > starts
    if inside.all():
        return starts, ends, None
    idx_in = np.flatnonzero(inside)
    rest = np.flatnonzero(~inside)
    r_s, r_e = starts[rest], ends[rest]
    i0 = search(we, r_s, side="right")
    i1 = search(ws, r_e, side="left")
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


def _contained(starts: np.ndarray, ends: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Per interval, whether it lies inside one interval of the disjoint set (ws, we) (in blocks)."""
    out = np.empty(starts.shape, dtype=bool)
    for b0 in range(0, starts.size, BLOCK):
        s, e = starts[b0 : b0 + BLOCK], ends[b0 : b0 + BLOCK]
        i = search(ws, s, side="right") - 1
        np.logical_and(i >= 0, e <= we[np.maximum(i, 0)], out=out[b0 : b0 + BLOCK])
    return out


def clipped_lengths(starts: np.ndarray, ends: np.ndarray, window: Intervals) -> np.ndarray:
    """Per interval, the length that lies inside the disjoint ``window`` set (in blocks); 0 for one that ends
    before it starts."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    ws, we = window
    out = np.zeros(starts.shape, dtype=np.int64)
    if ws.size == 0 or starts.size == 0:
        return out
    if ws.size > NEAR_ABOVE:  # only the windows that reach the intervals' span (every start and end in it)
        near = _near(ws, we, min(int(starts.min()), int(ends.min())), max(int(starts.max()), int(ends.max())))
        ws, we = ws[near], we[near]
        if ws.size == 0:
            return out
    widths = we - ws
    cum = np.concatenate([[0], np.cumsum(widths)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # window length in (-inf, t]
        i = search(ws, t, side="right") - 1  # last window starting at or before t
        k = np.maximum(i, 0)
        inside = np.clip(t - ws[k], 0, widths[k])
        return np.where(i >= 0, cum[k] + inside, 0)

    for b0 in range(0, starts.size, BLOCK):
        s, e, o = starts[b0 : b0 + BLOCK], ends[b0 : b0 + BLOCK], out[b0 : b0 + BLOCK]
        if ws.size == 1:
            np.maximum(np.clip(e, ws[0], we[0]) - np.clip(s, ws[0], we[0]), 0, out=o)
            continue
        # fast path: an interval inside one window keeps its whole length
        contained = _contained(s, e, ws, we)
        np.subtract(e, s, out=o, where=contained)
        if not contained.all():
            rest = ~contained
            o[rest] = np.maximum(covered_before(e[rest]) - covered_before(s[rest]), 0)
    np.maximum(out, 0, out=out)  # an interval that ends before it starts has no length inside (not a negative one)
    return out


def touching(starts: np.ndarray, ends: np.ndarray, clipped: np.ndarray, window: Intervals) -> np.ndarray:
    """Per interval, whether it touches the window: some length inside it (``clipped``, from
    ``clipped_lengths``), or, for a zero-length one, its point inside it (looked up for those alone)."""
    out = clipped > 0
    zero = np.flatnonzero(ends == starts)
    if zero.size:
        out[zero] |= points_inside(starts[zero], window)
    return out


def points_inside(t: np.ndarray, window: Intervals) -> np.ndarray:
    """Whether each time point lies in the window (closed intervals), in blocks."""
    ws, we = window
    t = np.asarray(t, dtype=np.int64)
    out = np.zeros(t.shape, dtype=bool)
    if ws.size == 0:
        return out
    for b0 in range(0, t.size, BLOCK):
        x = t[b0 : b0 + BLOCK]
        i = search(ws, x, side="right") - 1
        np.logical_and(i >= 0, x <= we[np.maximum(i, 0)], out=out[b0 : b0 + BLOCK])
    return out


def idle_around(lists: Sequence[Intervals], t: np.ndarray) -> Intervals:
    """For interval lists each sorted by start (one engine's records each) and sorted time points
    ``t``: the idle stretch (no interval active) that holds each point or ends at it, from the last end
    of the intervals starting before the point to the next start at or after it; (p, p) where an
    interval started before the point and ends after it, and (last end, INT64 max) past the last start.
    Distinct points in one stretch get the same one. One pass over each list in blocks: the running
    maximum of the ends is never built whole."""
    t = np.asarray(t, dtype=np.int64)
    prev = np.full(t.shape, np.iinfo(np.int64).min, dtype=np.int64)
    nxt = np.full(t.shape, np.iinfo(np.int64).max, dtype=np.int64)
    ordered = is_sorted(t)
    for s, e in lists:
        if s.size == 0:
            continue
        j = search(s, t, side="left")  # the first interval starting at or after the point
        k = j - 1  # the last starting before it
        has = j < s.size
        nxt[has] = np.minimum(nxt[has], s[j[has]])
        run = np.iinfo(np.int64).min
        # points in time order: each block's points (k inside it) are one run of them
        cut = np.searchsorted(k, np.arange(0, s.size + BLOCK, BLOCK), side="left") if ordered else None
        for n_b, b0 in enumerate(range(0, s.size, BLOCK)):  # the running maximum of the ends, at each point's k
            cm = np.maximum.accumulate(np.maximum(e[b0 : b0 + BLOCK], run))
            q = slice(int(cut[n_b]), int(cut[n_b + 1])) if cut is not None else np.flatnonzero((k >= b0) & (k < b0 + cm.size))
            prev[q] = np.maximum(prev[q], cm[k[q] - b0])
            run = int(cm[-1])
    busy = prev > t
    return np.where(busy, t, prev), np.where(busy, t, nxt)

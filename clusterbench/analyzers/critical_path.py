"""The critical path through the window: a backward last-arrival walk over the rows and the launching
threads' calls (pure). docs/analyze.md ("Blocked time and the critical path") gives the definitions;
in short:

- a **row** R (entered at its end, or earlier when the row after it on the stream started while R
  still ran) is R's resource from its start; before it comes the dependency with the latest release
  at or before R.start: the latest-ending earlier row on its stream (released at its end, or at
  R.start when it overlaps R), the event it waits for (cudaStreamWaitEvent), the latest-ending
  earlier row of its engine, the legacy default stream's order, or its launch call (released at the
  call's start; the gap is then ``launch``, else ``idle``). A device-launched row with none of these
  follows the GPU's latest row that ended before it started;
- **thread T at time t** (a launch call's start): host code and CUDA calls are ``host:T`` back to the
  release of the last call the GPU held before t (a held wait, or a blocked launch, copy or free),
  and the walk goes on at the row that released it; with no such call, ``host:T`` to the window start.

The segments tile each window interval exactly, so the shares sum to 1. Every node's predecessor is
computed with NumPy (stream order, correlation joins, per-thread orders); then one plain Python loop
follows the chain from the end of each interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.held import STREAM_WAIT_EVENT_CALLS, Held, _call_events, _event_sources, _names_mask
from clusterbench.analyzers.links import NONE, Links
from clusterbench.analyzers.records import PATH_RESOURCES, CriticalPath, PathPart, ThreadRef
from clusterbench.io.nsys import schema as S

IDLE, LAUNCH = 0, 1
ENGINE0 = 2  # resource code of engine e: ENGINE0 + its code in schema.ENGINES
HOST0 = 2 + len(S.ENGINES)  # resource code of launching thread t: HOST0 + its index in ApiCalls.threads
_NEG = np.iinfo(np.int64).min // 4



@dataclass(frozen=True, slots=True, eq=False)
class Walk:
    """The path's segments, as parts: each part is arrays (start, end, resource code, kernel name or
    None) of segments in no particular order (a segment may be empty). Resource codes: IDLE, LAUNCH,
    ENGINE0 + engine, HOST0 + thread; the kernel name (index into the kernel names, -1 for other rows).
    ``segments()`` gives them sorted, non-empty; the totals need no sort."""

    parts: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], ...]
    steps: int  # rows the walk visited
    complete: bool  # False when a walk stopped on a cycle (correlation ids out of issue order)

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, resource, kernel name) of every non-empty segment, in time order."""
        ss = np.concatenate([p[0] for p in self.parts]) if self.parts else np.empty(0, np.int64)
        ee = np.concatenate([p[1] for p in self.parts]) if self.parts else np.empty(0, np.int64)
        rr = np.concatenate([p[2] for p in self.parts]) if self.parts else np.empty(0, np.int32)
        kk = np.concatenate([p[3] if p[3] is not None else np.full(p[0].size, -1, np.int32) for p in self.parts]) if self.parts \
            else np.empty(0, np.int32)  # fmt: skip
        keep = ee > ss
        ss, ee, rr, kk = ss[keep], ee[keep], rr[keep], kk[keep]
        o = np.argsort(ss, kind="stable")
        return ss[o], ee[o], rr[o], kk[o]

    def totals(self, n_threads: int, n_kernels: int) -> tuple[np.ndarray, np.ndarray]:
        """(ns per resource code, ns per kernel name)."""
        per = np.zeros(HOST0 + n_threads, dtype=np.int64)
        kern = np.zeros(max(n_kernels, 1), dtype=np.int64)
        for s, e, r, k in self.parts:
            length = np.maximum(e - s, 0)
            per += np.bincount(r, weights=length, minlength=per.size).astype(np.int64)
            if k is not None:
                m = k >= 0
                kern += np.bincount(k[m], weights=length[m], minlength=kern.size).astype(np.int64)
        return per, kern[:n_kernels]

    def inside(self, zone: iv.Intervals, size: int) -> np.ndarray:
        """Per resource code, the path's time inside the disjoint ``zone`` (each segment against the zone
        intervals it meets, found by binary search)."""
        out = np.zeros(size, dtype=np.int64)
        zs, ze = zone
        if zs.size == 0:
            return out
        for s, e, r, _ in self.parts:
            k0 = np.searchsorted(ze, s, side="right")  # the first zone interval ending after the segment starts
            k1 = np.searchsorted(zs, e, side="left")  # past the last one starting before it ends
            n = np.maximum(k1 - k0, 0)
            if not n.any():
                continue
            rep = np.repeat(np.arange(s.size), n)
            k = k0[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(n) - n, n))
            length = np.minimum(e[rep], ze[k]) - np.maximum(s[rep], zs[k])
            out += np.bincount(r[rep], weights=np.maximum(length, 0), minlength=size).astype(np.int64)
        return out


def _exit_calls(links: Links, held: Held) -> tuple[np.ndarray, np.ndarray]:
    """The calls at which the walk leaves their thread, in call order, and the row it goes on to at each:
    the calls the GPU held whose releasing row ended after the call started, and that row."""
    ok = held.release > links.cstart[held.call]
    return held.call[ok], held.row[ok]


class _Threads:
    """Per thread, its exit calls (the calls the GPU held and released after they started) in start order:
    the only calls at which the walk leaves a thread. Few, whatever the number of calls."""

    def __init__(self, links: Links, calls: np.ndarray, rows: np.ndarray) -> None:
        self.links = links
        th = links.cthread[calls].astype(np.int64)
        self.base = int(links.cstart[0]) if links.n_calls else 0
        key = self._keys(th, links.cstart[calls])
        o = np.argsort(key, kind="stable")
        self.calls, self.th, self.key = calls[o], th[o], key[o]
        self.rows = rows[o]
        self.release = np.minimum(links.end[self.rows], links.cend[self.calls]) if self.calls.size else self.calls

    def _keys(self, th: np.ndarray, t: np.ndarray) -> np.ndarray:
        return (th.astype(np.int64) << 44) + np.clip(t - self.base, 0, (1 << 44) - 1)

    def before(self, thread: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each (thread, t): the thread's last exit call that starts before t and is released by t,
        and its releasing row (-1, -1 when none)."""
        call = np.full(t.size, NONE, dtype=np.int64)
        row = np.full(t.size, NONE, dtype=np.int64)
        if self.calls.size == 0 or t.size == 0:
            return call, row
        thread = thread.astype(np.int64)
        p = np.searchsorted(self.key, self._keys(thread, t), side="left") - 1
        todo = np.arange(t.size, dtype=np.int64)
        while todo.size:
            pp = p[todo]
            ok = pp >= 0
            ok[ok] &= self.th[pp[ok]] == thread[todo[ok]]
            todo, pp = todo[ok], pp[ok]
            fits = self.release[pp] <= t[todo]  # released by then (calls that overlap on a thread may not be)
            call[todo[fits]], row[todo[fits]] = self.calls[pp[fits]], self.rows[pp[fits]]
            todo = todo[~fits]
            p[todo] = pp[~fits] - 1
        return call, row

    def before_call(self, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``before`` at each call's own start."""
        return self.before(self.links.cthread[calls], self.links.cstart[calls])


def _event_edges(links: Links, syncs, records) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Per row: the row it waits for through cudaStreamWaitEvent (the first row on the waiting stream
    issued after the wait follows the last row on the recording stream issued before the latest
    record of the event preceding the wait), or -1."""
    src = np.full(links.n_rows, NONE, dtype=links.by_corr.dtype)
    waits = np.flatnonzero(_names_mask(links, STREAM_WAIT_EVENT_CALLS))
    if waits.size == 0:
        return src, waits
    ev = _call_events(links, waits, syncs)
    _, x = _event_sources(links, ev, links.ccorr[waits], records)
    target = links.first_on_stream_after(links.rank_of(links.cstream[waits]), links.ccorr[waits])
    ok = (x >= 0) & (target >= 0)
    x, target = x[ok], target[ok]
    if x.size:
        o = np.argsort(links.end[x], kind="stable")  # the latest-ending source wins per target
        src[target[o]] = x[o]
    return src, waits


ENGINE_CODES = tuple(range(len(S.ENGINES)))  # every engine: one direction's copies share a copy engine, kernels the SMs


def _engine_predecessors(links: Links) -> np.ndarray:
    """Per row: the latest-ending other row of its engine that ended at or before its start (-1 for
    none). An engine's rows are one range of the rows."""
    out = np.full(links.n_rows, NONE, dtype=links.by_corr.dtype)
    big = [code for code in ENGINE_CODES if links.engine_hi[code] - links.engine_lo[code] >= 2]
    if not big:
        return out
    by_end = links.by_end
    eng = links.engine[by_end] if len(big) > 1 or links.engine_hi[big[0]] - links.engine_lo[big[0]] < links.n_rows else None
    for code in big:
        lo, hi = int(links.engine_lo[code]), int(links.engine_hi[code])
        rows = by_end if eng is None else by_end[eng == code]  # the engine's rows in end order (ties by row)
        ends = links.end[rows]
        for b0 in range(lo, hi, iv.BLOCK):
            b1 = min(hi, b0 + iv.BLOCK)
            k = np.searchsorted(ends, links.start[b0:b1], side="right") - 1
            own = np.arange(b0, b1)
            k = np.where((k >= 0) & (rows[np.maximum(k, 0)] == own), k - 1, k)  # not itself (zero length)
            ok = k >= 0
            out[own[ok]] = rows[k[ok]]
        del rows, ends
    return out


def _legacy_predecessors(links: Links) -> np.ndarray:
    """Per row on the legacy default stream: the latest-ending row issued before it on a blocking stream;
    per row on a blocking stream: the latest-ending row issued before it on the legacy default stream
    (-1 for none, and where the trace does not say which stream is which)."""
    out = np.full(links.n_rows, NONE, dtype=links.by_corr.dtype)
    flag = links.stream_flag[links.srank] if links.n_rows else np.empty(0, np.int8)
    null = flag == S.STREAM_NULL
    if not null.any():
        return out
    blocking = (flag == S.STREAM_BLOCKING) | null
    host = ~links.device_launched
    bc = links.by_corr[host[links.by_corr]]  # rows in issue order
    corr = links.corr[bc]
    for source, target in ((blocking, null), (null, flag == S.STREAM_BLOCKING)):
        m = source[bc]
        if not m.any():
            continue
        at = latest_so_far(links.end, bc, m)
        del m
        rows = np.flatnonzero(target & host)
        for b0 in range(0, rows.size, iv.BLOCK):
            rb = rows[b0 : b0 + iv.BLOCK]
            k = np.searchsorted(corr, links.corr[rb], side="left") - 1  # issued before the row
            got = np.where(k >= 0, at[np.maximum(k, 0)], -1)
            ok = got >= 0
            out[rb[ok]] = bc[got[ok]]
        del at, rows
    return out


def latest_so_far(end: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """At each position of ``rows``: the position of the latest-ending row so far among those ``mask`` keeps
    (ties: the later), -1 before the first; int32 while it fits, in blocks (no int64 temporary over every row)."""
    out = np.empty(rows.size, dtype=np.int32 if rows.size < (1 << 31) else np.int64)
    low = np.iinfo(np.int64).min
    run, at = low, -1
    for b0 in range(0, rows.size, iv.BLOCK):
        m = mask[b0 : b0 + iv.BLOCK]
        e = np.where(m, end[rows[b0 : b0 + iv.BLOCK]], low)
        r = np.maximum.accumulate(np.maximum(e, run))
        pos = np.where((e == r) & m, np.arange(b0, b0 + e.size), at)
        np.maximum.accumulate(pos, out=pos)
        out[b0 : b0 + e.size] = pos
        run, at = int(r[-1]), int(pos[-1])
    return out


@dataclass(frozen=True, slots=True, eq=False)
class Graph:
    """The walk's nodes, one per row: its predecessor row (-1 for none), the time at which the walk
    enters it (its release), and ``via``: the launch call the row waited for (-1 for none). A row whose
    dependency is its launch call goes on, through the call's thread, to the row that released the
    thread's last held call before it: the call's start splits the stretch before the row into host
    time (before the start) and the launch delay (after)."""

    pred: np.ndarray
    rel: np.ndarray
    via: np.ndarray
    threads: _Threads


def _better(best: np.ndarray, pr: np.ndarray, src: np.ndarray, s: np.ndarray, e: np.ndarray, cap: bool) -> None:
    """Take ``src`` (a row per row, -1 for none) where its release beats ``best``: its end, capped at the
    row's start (``cap``: a stream's overlapping row), or only when it ended by the row's start. Block by
    block: the temporaries stay small."""
    for b0 in range(0, src.size, iv.BLOCK):
        has = np.flatnonzero(src[b0 : b0 + iv.BLOCK] >= 0) + b0
        if has.size == 0:
            continue
        r = src[has]
        rel = e[r]
        if cap:
            rel = np.minimum(rel, s[has])
        else:
            keep = rel <= s[has]  # a dependency the row did not wait for is none
            has, r, rel = has[keep], r[keep], rel[keep]
        win = rel > best[has]
        best[has[win]], pr[has[win]] = rel[win], r[win]


def predecessors(links: Links, held: Held, syncs=None, records=None, event_src: np.ndarray | None = None,  # noqa: ANN001
                 rows: tuple[np.ndarray, np.ndarray] | None = None) -> Graph:  # fmt: skip
    """Every row's predecessor (module docstring), with NumPy over the columns; row indices as int32
    while they fit, and each source let go as soon as it is weighed. ``event_src``: per row, the row it
    waits for through cudaStreamWaitEvent, when the caller has it (else from the calls, _event_edges).
    ``rows``: :func:`row_predecessors` of the same links (taken over: its arrays are changed), when the
    caller worked them out already (they need no held calls)."""
    n = links.n_rows
    th = _Threads(links, *_exit_calls(links, held))
    if n == 0:
        e0 = np.empty(0, dtype=np.int64)
        return Graph(e0, e0, e0, th)
    best, pr = row_predecessors(links, syncs, records, event_src) if rows is None else rows
    return _with_launches(links, th, best, pr)


def row_predecessors(links: Links, syncs=None, records=None, event_src: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """:func:`predecessors`' part over the rows alone (stream, event, engine and legacy default stream
    orders; the launch calls come after): per row the latest release so far and its row (-1 for none).
    It needs no held calls, so a caller can have it made while they are found."""
    n = links.n_rows
    idx = np.int32 if n < (1 << 31) else np.int64
    s, e = links.start, links.end
    best = np.full(n, _NEG, dtype=np.int64)  # the latest release so far
    pr = np.full(n, NONE, dtype=idx)
    # stream: the latest-ending earlier row of the stream (entered at R.start when it overlaps R)
    bs = links.by_stream
    pos = np.empty(n, dtype=idx)
    pos[bs] = np.arange(n, dtype=idx)
    pos -= 1  # the position before each row's own in stream order
    has = pos >= links.seg_lo[links.srank]
    sp = np.full(n, NONE, dtype=idx)
    sp[has] = bs[links.latest[pos[has]]]
    del pos, has
    ok = sp >= 0
    ok[ok] &= s[sp[ok]] <= s[ok]
    sp[~ok] = NONE
    del ok
    _better(best, pr, sp, s, e, cap=True)
    del sp
    # events; the engine's order (one direction's copies take turns on its copy engine, kernels on the SMs,
    # whatever their streams); the legacy default stream's order
    _better(best, pr, _event_edges(links, syncs, records)[0] if event_src is None else event_src, s, e, cap=False)
    _better(best, pr, _engine_predecessors(links), s, e, cap=False)
    _better(best, pr, _legacy_predecessors(links), s, e, cap=False)
    return best, pr


def _with_launches(links: Links, th: _Threads, best: np.ndarray, pr: np.ndarray) -> Graph:
    """The Graph from the rows' own predecessors (``best``, ``pr``: :func:`row_predecessors`) and the launch
    calls, through the threads' exit calls ``th``."""
    n = links.n_rows
    idx = pr.dtype
    s, e = links.start, links.end
    # launch call; the latest release wins (ties: stream, event, engine, default stream, then launch)
    lc = links.launch
    by_call_l, orphan_l = [], []
    for b0 in range(0, n, iv.BLOCK):
        sl = slice(b0, b0 + iv.BLOCK)
        lb = lc[sl]
        lc_rel = np.full(lb.size, _NEG, dtype=np.int64)
        has = lb >= 0
        lc_rel[has] = links.cstart[lb[has]]
        lc_rel[lc_rel > s[sl]] = _NEG  # a launch that started after its row: no dependency
        by_call_l.append(np.flatnonzero(lc_rel > best[sl]) + b0)
        # a device-launched row with none of these: the GPU's latest row that ended by its start
        orphan_l.append(np.flatnonzero((pr[sl] < 0) & (lc_rel <= best[sl]) & links.device_launched[sl]) + b0)
    by_call, orphan = np.concatenate(by_call_l), np.concatenate(orphan_l)
    del by_call_l, orphan_l
    if orphan.size:
        k = links.end_rank(s[orphan]) - 1
        r = np.where(k >= 0, links.by_end[np.maximum(k, 0)], NONE)
        k = np.where(r == orphan, k - 1, k)  # not itself (a zero-length row)
        r = np.where(k >= 0, links.by_end[np.maximum(k, 0)], NONE)
        ok = r >= 0
        pr[orphan[ok]] = r[ok]
        best[orphan[ok]] = e[r[ok]]
    best[pr < 0] = _NEG
    via = np.full(n, NONE, dtype=idx)
    if by_call.size:
        # thread T at the launch call's start: back to the row that released T's last held call
        call, row = th.before_call(lc[by_call])
        via[by_call] = lc[by_call]
        pr[by_call] = row
        best[by_call] = np.where(row >= 0, np.minimum(e[np.maximum(row, 0)], links.cend[np.maximum(call, 0)]), _NEG)
    return Graph(pr, best, via, th)


def _start_nodes(links: Links, th: _Threads, window: iv.Intervals, launching: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per interval: its first node (the row ending last by its end, or -1), the time the walk enters it,
    the end of the latest-ending row or launching-thread call by the interval's end, and the host stretch
    before that call when it is a call: [head_lo, first_end] on its thread (head_lo -inf: to the start)."""
    ws, we = window
    n = links.n_rows
    kr = links.end_rank(we) - 1
    r0 = np.where(kr >= 0, links.by_end[np.maximum(kr, 0)] if n else NONE, NONE)
    r0_end = np.where(r0 >= 0, links.end[np.maximum(r0, 0)] if n else _NEG, _NEG)
    c0 = _last_call_ending_by(links, launching, we)
    c0_end = np.where(c0 >= 0, links.cend[np.maximum(c0, 0)] if links.n_calls else _NEG, _NEG)
    use_call = c0_end > r0_end  # ties: the row
    first_end = np.where(use_call, c0_end, r0_end)
    start = np.where(use_call, NONE, r0)
    head_lo = np.full(ws.size, _NEG, dtype=np.int64)
    if use_call.any():  # thread T at the call's end, back to the row that released its last held call
        idx = np.flatnonzero(use_call)
        call, row = th.before(links.cthread[c0[idx]].astype(np.int64), first_end[idx])
        start[idx] = row
        head_lo[idx] = np.where(row >= 0, np.minimum(links.end[np.maximum(row, 0)], links.cend[np.maximum(call, 0)]) if n else _NEG,
                                _NEG)  # fmt: skip
    head_res = np.where(use_call, HOST0 + (links.cthread[np.maximum(c0, 0)].astype(np.int64) if links.n_calls else 0), IDLE)
    top0 = np.where(use_call, head_lo, first_end)  # where the walk enters its first node
    return start, top0, first_end, use_call, head_lo, head_res


def _last_call_ending_by(links: Links, launching: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time of ``t``: the launching threads' call with the latest end at or before it (ties: the later
    call), -1 for none; block by block over the calls."""
    out = np.full(t.size, NONE, dtype=np.int64)
    best = np.full(t.size, _NEG, dtype=np.int64)
    if not links.n_calls or not launching.size:
        return out
    for b0 in range(0, links.n_calls, iv.BLOCK):
        sl = slice(b0, b0 + iv.BLOCK)
        mine = np.flatnonzero(launching[links.cthread[sl]])
        if mine.size == 0:
            continue
        ce = links.cend[sl][mine]
        o = np.argsort(ce, kind="stable")
        k = np.searchsorted(ce[o], t, side="right") - 1
        ok = k >= 0
        got_end = ce[o[np.maximum(k, 0)]]
        win = ok & (got_end >= best)  # a later block's call wins a tie
        out[win] = b0 + mine[o[k[win]]]
        best[win] = got_end[win]
    return out


FRONTIER_MIN = 32  # with this many walks or more still going, they step together in NumPy


def follow(pred: np.ndarray, rel: np.ndarray, ws: np.ndarray, start: np.ndarray, top0: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """The rows of each interval's walk, in walk order (time running backwards): from its first row,
    from each row to its predecessor while the release lies after the interval's start. Returns the rows
    of every walk one after the other, the bounds of each walk's run, and False when a walk went round
    (correlation ids out of issue order: it stops after as many steps as there are rows).

    One interval: the chain is cut at the window's start first (a predecessor released at or before it
    is no predecessor), then followed in one plain Python loop over a memoryview. Many intervals: the
    walks step together, one NumPy step for all of them, while FRONTIER_MIN or more are still going;
    the last ones finish in the plain loop."""
    k = int(ws.size)
    limit = pred.size + 1
    go = (start >= 0) & (top0 > ws)
    if k == 1:
        steps: list[int] = []
        add = steps.append
        nxt = memoryview(np.where(rel > int(ws[0]), pred, NONE))
        i = int(start[0]) if bool(go[0]) else NONE
        complete = True
        for _ in range(limit):
            if i < 0:
                break
            add(i)
            i = nxt[i]
        else:
            complete = False
        return np.asarray(steps, dtype=np.int64), np.array([0, len(steps)], dtype=np.int64), complete
    walks = np.flatnonzero(go)
    cur = start[walks].copy()
    w0 = ws[walks]
    alive = np.arange(walks.size)
    got_node, got_owner, got_step = [], [], []
    step = 0
    complete = True
    while alive.size >= FRONTIER_MIN:
        i = cur[alive]
        got_node.append(i)
        got_owner.append(walks[alive])
        got_step.append(np.full(alive.size, step, dtype=np.int64))
        on = rel[i] > w0[alive]
        alive = alive[on]
        cur[alive] = pred[i[on]]
        step += 1
        if step > limit:
            complete = False
            alive = alive[:0]
    pred_l, rel_l = memoryview(pred), memoryview(rel)  # no copy; indexing gives Python ints
    rows: list[int] = []
    owners: list[int] = []
    firsts: list[int] = []
    for a in alive.tolist():
        w, i, lo = int(walks[a]), int(cur[a]), int(w0[a])
        n0 = len(rows)
        add = rows.append
        for _ in range(limit):
            add(i)
            if rel_l[i] <= lo:  # no predecessor (rel is far below), or the walk reached its start
                break
            i = pred_l[i]
        else:
            complete = False
        owners.extend([w] * (len(rows) - n0))
        firsts.append(n0)
    if rows:
        got_node.append(np.asarray(rows, dtype=np.int64))
        got_owner.append(np.asarray(owners, dtype=np.int64))
        run = np.asarray(firsts + [len(rows)], dtype=np.int64)
        got_step.append(step + np.arange(len(rows), dtype=np.int64) - np.repeat(run[:-1], np.diff(run)))
    if not got_node:
        return np.empty(0, dtype=np.int64), np.zeros(k + 1, dtype=np.int64), complete
    node, owner, at = np.concatenate(got_node), np.concatenate(got_owner), np.concatenate(got_step)
    counts = np.bincount(owner, minlength=k)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = np.empty(node.size, dtype=np.int64)
    out[bounds[owner] + at] = node
    return out, bounds, complete


def walk(links: Links, held: Held, window: iv.Intervals, launching: np.ndarray, syncs=None, records=None,  # noqa: ANN001
         graph: Graph | None = None) -> Walk:  # fmt: skip
    """The critical path of each window interval. ``launching``: per thread of ApiCalls.threads,
    whether it is a launching thread (its calls can end the walk's first step). ``graph``: the rows'
    predecessors (:func:`predecessors` of the same links, held calls, syncs and records), when the caller
    worked them out already (they need no launching threads: the caller can have them made meanwhile)."""
    ws, we = window
    k = int(ws.size)
    gr = predecessors(links, held, syncs, records) if graph is None else graph
    pred, rel, via = gr.pred, gr.rel, gr.via
    start, top0, first_end, use_call, head_lo, head_res = _start_nodes(links, gr.threads, window, launching)

    nodes, bounds_a, complete = follow(pred, rel, ws, start, top0)
    del pred, start
    per_interval = np.diff(bounds_a)
    w0s = np.repeat(ws, per_interval)
    rel_n = rel[nodes]
    v = via[nodes]
    del gr, rel, via  # the graph's arrays over every row go; the walk keeps arrays over its nodes

    # each row's stretch: [mid, top] the row itself; below it, down to lo, its predecessor's gap, split
    # at its launch call's start (if the row waited for it) into the thread's host time and the delay
    top = np.empty(nodes.size, dtype=np.int64)
    if nodes.size:
        top[1:] = rel_n[:-1]
        top[bounds_a[:-1][per_interval > 0]] = top0[per_interval > 0]
    np.maximum(top, w0s, out=top)
    lo = np.maximum(rel_n, w0s, out=rel_n)
    del w0s
    mid = np.clip(links.start[nodes], lo, top)
    has_via = v >= 0
    vv = np.maximum(v, 0)
    del v
    cut = np.clip(np.where(has_via, links.cstart[vv] if links.n_calls else 0, lo), lo, mid)
    host_res = np.where(has_via, HOST0 + (links.cthread[vv].astype(np.int32) if links.n_calls else 0), IDLE).astype(np.int32)
    del vv
    own_res = (ENGINE0 + links.engine[nodes]).astype(np.int32)
    parts = [(mid, top, own_res, links.kname[nodes].astype(np.int32)),
             (cut, mid, np.where(has_via, LAUNCH, IDLE).astype(np.int32), None),
             (lo, cut, host_res, None)]  # fmt: skip
    del has_via
    # after the first node: idle; before it, when the walk began at a call: the thread's host time
    he = np.where(use_call, np.clip(first_end, ws, we), ws)
    parts.append((np.minimum(np.maximum(first_end, ws), we), we.astype(np.int64), np.full(k, IDLE, np.int32), None))
    parts.append((np.minimum(np.maximum(head_lo, ws), he), he, head_res.astype(np.int32), None))
    # a walk cut short (a cycle: correlation ids out of issue order): the rest of the interval is idle
    if nodes.size and not complete:
        last = bounds_a[1:][per_interval > 0] - 1
        parts.append((ws[per_interval > 0].astype(np.int64), lo[last], np.full(last.size, IDLE, np.int32), None))
    return Walk(tuple(parts), int(nodes.size), complete)


def measure(links: Links, held: Held, window: iv.Intervals, setup: iv.Intervals, launching: np.ndarray, frames: int | None,
            threads: tuple, syncs=None, records=None, graph: Graph | None = None) -> CriticalPath:  # noqa: ANN001  # fmt: skip
    """The critical path of ``window`` (every interval walked on its own, the parts summed), split by
    resource: ``host:<tid>`` per launching thread, each engine (kernels also by name), ``launch``, ``idle``;
    each part also without the set-up gaps ``setup``. ``threads``: ApiCalls.threads (for the names);
    ``graph``: the rows' predecessors when the caller has them (:func:`walk`)."""
    w = walk(links, held, window, launching, syncs, records, graph)
    return summarize(w, links, window, setup, frames, threads)


def summarize(w: Walk, links: Links, window: iv.Intervals, setup: iv.Intervals, frames: int | None, threads: tuple) -> CriticalPath:
    """The parts of a walk, largest first."""
    total = int((window[1] - window[0]).sum())
    per, kern = w.totals(len(threads), len(links.kernel_names))
    in_setup = w.inside(setup, per.size)
    steady_total = total - int(in_setup.sum())
    parts = []
    for code in np.flatnonzero(per).tolist():
        ns, steady = int(per[code]), int(per[code] - in_setup[code])
        if code == IDLE:
            parts.append(PathPart("idle", ns, ns / total, steady_ns=steady))
        elif code == LAUNCH:
            parts.append(PathPart("launch", ns, ns / total, steady_ns=steady))
        elif code < HOST0:
            parts.append(PathPart(S.ENGINES[code - ENGINE0], ns, ns / total, steady_ns=steady))
        else:
            t = threads[code - HOST0]
            parts.append(PathPart(f"host:{t.tid}", ns, ns / total, ThreadRef(t.pid, t.tid, t.name), steady))
    order = {r: i for i, r in enumerate(PATH_RESOURCES)}
    parts.sort(key=lambda p: (-p.ns, order.get(p.kind, 99), p.resource))
    kernels = sorted(((links.kernel_names[i], int(kern[i])) for i in np.flatnonzero(kern).tolist()), key=lambda x: (-x[1], x[0]))
    return CriticalPath(total, tuple(parts), tuple(kernels), frames, w.steps, w.complete, steady_total)

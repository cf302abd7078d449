"""Which CUDA calls the GPU held, for how long, and why (pure).

Over one group's links (analyzers.links), per the definitions of docs/analyze.md ("Blocked time and
the critical path"):

- an **explicit wait** (the ``wait`` category: stream, device, context and event synchronizes,
  synchronous copies) awaits rows: a stream sync on S the last row on S issued before it; a device
  or context sync the device's row issued before it with the latest end; an event sync on E the last
  row on the recording stream issued before the latest cudaEventRecord(E) preceding it; a
  synchronous copy its own rows and the last row on its stream issued before it (an unknown stream
  or event: a device sync). Device-launched rows that end during the wait are awaited too. The wait
  is **held** by R, the awaited row with the latest end, when R ends inside the call. An implicit
  synchronize (cudaFree, cudaProfilerStop, ...) that left a SYNCHRONIZATION row awaits the same way;
- a **non-synchronizing call** (a kernel or graph launch, an asynchronous copy or memset, or an
  implicit synchronize such as cudaFree) is **held** by R, the one of these that releases it last: its
  own rows that end before it returns (a graph launch that returns with its graph); when it lasted
  HELD_MIN_NS or more, its own rows that started before it returned (a pageable copy returns once its
  last chunk is staged, while that chunk is still on the link) and the rows issued before it that end
  inside it at most RETURN_NS before it returns. R *releases* the call at min(R.end, c.end);
- **blocked time** of a held non-synchronizing call: the time inside [c.start, release] during which
  the group's GPU was busy (inside the window); its **cause**, the first that applies: module_load,
  implicit_sync, pageable, graph, queue_full, gpu_behind (CAUSES).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.beside import beside
from clusterbench.analyzers.links import NONE, Links
from clusterbench.analyzers.records import BLOCK_CAUSES
from clusterbench.io.nsys import schema as S

# How long a call takes to return after the GPU work it waited for ends: a synchronize wakes up and
# returns within a few µs on the H200 under nsys; 20 µs keeps a launch that merely ran while
# unrelated work ended from counting as held (it returns in a few µs when nothing holds it).
RETURN_NS = 20_000
# A launch, copy or memset that nothing holds returns in a few µs, even under nsys (cudaLaunchKernel
# 2 to 6 µs, cudaMemcpyAsync into pinned memory 3 to 8 µs on the bundled H200 traces): only a call
# of at least 20 µs can have waited for other work.
HELD_MIN_NS = 20_000
# Rows issued and not ended on the device at which a launch counts as blocked by a full queue: CUDA's
# launch queue holds about a thousand launches per context; half of that is well past any pipeline's
# own depth (a few batches in flight) and below the point where launches start to block.
QUEUE_FULL_DEPTH = 512

CAUSES = BLOCK_CAUSES  # module_load, implicit_sync, pageable, graph, queue_full, gpu_behind: the first that applies
IMPLICIT_SYNC_CALLS = frozenset({
    "cudaFree", "cudaFreeHost", "cudaFreeArray", "cudaProfilerStop", "cudaHostUnregister",
    "cuMemFree", "cuMemFreeHost", "cuMemHostUnregister", "cuProfilerStop",
})  # fmt: skip
STREAM_SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize"})
EVENT_SYNC_CALLS = frozenset({"cudaEventSynchronize", "cuEventSynchronize"})
EVENT_RECORD_CALLS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags"})
STREAM_WAIT_EVENT_CALLS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})

_CODE = {c: i for i, c in enumerate(CAUSES)}
_LAUNCH, _GRAPH, _COPY, _WAIT = (S.API_CODE[c] for c in ("launch", "graph_launch", "copy", "wait"))


@dataclass(frozen=True, slots=True, eq=False)
class Held:
    """The calls the GPU held, in start order: each call (an index into the links' calls), its
    releasing row, whether it is an explicit wait, and for the others their blocked time inside the
    window, cause and (launches) the device's queue depth when they started."""

    call: np.ndarray
    row: np.ndarray
    release: np.ndarray  # when the row let the call go: min(its end, the call's end)
    wait: np.ndarray  # bool
    cause: np.ndarray  # int8 into CAUSES; -1 for waits
    blocked_ns: np.ndarray  # 0 for waits
    depth: np.ndarray  # the device's queue depth at c.start (launches; -1 for the others)

    def __len__(self) -> int:
        return int(self.call.size)

    def exit_row(self, n_calls: int) -> np.ndarray:  # noqa: D102
        """Per call of the links: its releasing row when it is held (-1 when not)."""
        out = np.full(n_calls, NONE, dtype=np.int64)
        out[self.call] = self.row
        return out


def _names_mask(links: Links, names: frozenset[str], calls: np.ndarray | None = None) -> np.ndarray:
    """Per call (of ``calls``, or every call), whether its base name is one of ``names``."""
    m = np.array([n in names for n in links.names] + [False], dtype=bool)
    if not links.n_calls:
        return np.zeros(0, dtype=bool)
    return m[links.cname] if calls is None else m[links.cname[calls]]


def _latest(links: Links, *candidates: np.ndarray) -> np.ndarray:
    """Per query, the candidate row with the latest end (-1 when none)."""
    out = candidates[0].copy()
    best = np.where(out >= 0, links.end[np.maximum(out, 0)], np.iinfo(np.int64).min)
    for c in candidates[1:]:
        e = np.where(c >= 0, links.end[np.maximum(c, 0)], np.iinfo(np.int64).min)
        better = e > best
        out[better], best[better] = c[better], e[better]
    return out


def _latest_release(links: Links, calls: np.ndarray, *candidates: np.ndarray) -> np.ndarray:
    """Per call, the candidate row that releases it last: the latest min(row end, call end); ties go to
    the earlier candidate list."""
    out = np.full(calls.size, NONE, dtype=np.int64)
    best = np.full(calls.size, np.iinfo(np.int64).min, dtype=np.int64)
    ce = links.cend[calls]
    for c in candidates:
        r = np.where(c >= 0, np.minimum(links.end[np.maximum(c, 0)], ce), np.iinfo(np.int64).min)
        better = r > best
        out[better], best[better] = c[better], r[better]
    return out


def _issued_latest(links: Links) -> tuple[np.ndarray, np.ndarray]:
    """Rows in issue order (with a launch call), and at each position the latest-ending row so far."""
    host = ~links.device_launched
    rows = links.by_corr[host[links.by_corr]]
    e = links.end[rows]
    run = np.maximum.accumulate(e) if e.size else e
    pos = np.arange(rows.size, dtype=np.int64)
    at = np.maximum.accumulate(np.where(e == run, pos, 0)) if e.size else pos
    return rows, rows[at] if rows.size else rows


def _device_ending_in(links: Links, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per query, the device-launched row with the latest end inside [lo, hi] (-1 when none)."""
    dev = np.flatnonzero(links.device_launched)
    out = np.full(lo.shape, NONE, dtype=np.int64)
    if dev.size == 0 or lo.size == 0:
        return out
    order = dev[np.argsort(links.end[dev], kind="stable")]
    ends = links.end[order]
    k = np.searchsorted(ends, hi, side="right") - 1
    ok = (k >= 0) & (ends[np.maximum(k, 0)] >= lo)
    out[ok] = order[k[ok]]
    return out


def _event_sources(links: Links, event_ids: np.ndarray, corr: np.ndarray, records) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Per query (event id, correlation id of the call): whether a cudaEventRecord of that event was
    issued before the call, and the last row on its stream issued before the latest such record (-1
    when none)."""
    out = np.full(event_ids.size, NONE, dtype=np.int64)
    found = np.zeros(event_ids.size, dtype=bool)
    if records is None or len(records) == 0 or event_ids.size == 0:
        return found, out
    rev, rcorr, rstream, key = records.by_event(links.pid, links.device)
    if rev.size == 0:
        return found, out
    ok = event_ids >= 0
    q = (event_ids[ok] << 32) | np.clip(corr[ok], 0, (1 << 32) - 1)
    k = np.searchsorted(key, q, side="left") - 1
    hit = (k >= 0) & (rev[np.maximum(k, 0)] == event_ids[ok])
    src = np.full(q.size, NONE, dtype=np.int64)
    if hit.any():
        kk = k[hit]
        src[hit] = links.last_on_stream_before(links.rank_of(rstream[kk]), rcorr[kk])
    out[ok] = src
    found[ok] = hit
    return found, out


def _has_sync_row(links: Links, calls: np.ndarray, syncs) -> np.ndarray:  # noqa: ANN001
    """Per call, whether a SYNCHRONIZATION row of its process carries its correlation id."""
    if syncs is None or len(syncs) == 0 or calls.size == 0:
        return np.zeros(calls.size, dtype=bool)
    sc = np.sort(syncs.correlation[syncs.pid == links.pid].astype(np.int64))
    if sc.size == 0:
        return np.zeros(calls.size, dtype=bool)
    x = links.ccorr[calls]
    k = np.minimum(np.searchsorted(sc, x), sc.size - 1)
    return (sc[k] == x) & (x > 0)


def _call_events(links: Links, calls: np.ndarray, syncs) -> np.ndarray:  # noqa: ANN001
    """Per call, the event id its SYNCHRONIZATION row names (-1 when none)."""
    out = np.full(calls.size, NONE, dtype=np.int64)
    if syncs is None or len(syncs) == 0 or calls.size == 0:
        return out
    m = syncs.pid == links.pid
    sc, se = syncs.correlation[m].astype(np.int64), syncs.event[m].astype(np.int64)
    o = np.argsort(sc, kind="stable")
    sc, se = sc[o], se[o]
    x = links.ccorr[calls]
    k = np.minimum(np.searchsorted(sc, x), max(sc.size - 1, 0))
    hit = (sc.size > 0) & (sc[k] == x) if sc.size else np.zeros(x.size, bool)
    out[hit] = se[k[hit]]
    return out


def busy_prefix(links: Links, window: iv.Intervals, near: iv.Intervals | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The group's GPU busy time inside the window as a disjoint set with its running length:
    (starts, ends, length before each). With ``near`` (a disjoint set), only the busy time inside it:
    the rows are cut to it block by block, so the memory stays small whatever the rows."""
    if links.n_rows == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    zone = window if near is None else iv.intersect(near, window)
    pieces_s, pieces_e = [], []
    for lo, hi in zip(links.engine_lo.tolist(), links.engine_hi.tolist()):  # each engine's rows in start order
        for b0 in range(lo, hi, iv.BLOCK):
            b1 = min(hi, b0 + iv.BLOCK)
            ps, pe, _ = iv.clip(links.start[b0:b1], links.end[b0:b1], zone)
            if ps.size:
                u = iv.union(ps, pe)  # pieces of one block: merged at once, so that few are kept
                pieces_s.append(u[0])
                pieces_e.append(u[1])
    if not pieces_s:
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    s, e = iv.union(np.concatenate(pieces_s), np.concatenate(pieces_e))
    cum = np.concatenate([[0], np.cumsum(e - s)[:-1]]) if s.size else s
    return s, e, cum


def busy_until(prefix: tuple[np.ndarray, np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """The busy time of ``prefix`` before each time ``t``."""
    s, e, cum = prefix
    if s.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    k = np.searchsorted(s, t, side="right") - 1
    kk = np.maximum(k, 0)
    inside = np.minimum(t, e[kk]) - s[kk]
    return np.where(k >= 0, cum[kk] + inside, 0)


def find(links: Links, window: iv.Intervals, syncs=None, records=None) -> Held:  # noqa: ANN001
    """The calls of ``links`` that the GPU held (whole trace), with their blocked time inside ``window``."""
    n = links.n_calls
    if n == 0 or links.n_rows == 0:
        e = np.empty(0, dtype=np.int64)
        return Held(e, e, e, np.empty(0, bool), np.empty(0, np.int8), e, e)
    cs, ce, cc = links.cstart, links.cend, links.ccorr

    # explicit waits, and implicit synchronizes that left a SYNCHRONIZATION row (cudaProfilerStop, cudaFree):
    # the row says they waited, so they await what a wait of theirs would, however long they take after
    implicit_name = np.array([n in IMPLICIT_SYNC_CALLS for n in links.names] + [False], dtype=bool)
    synced = np.flatnonzero(implicit_name[links.cname])
    synced = synced[_has_sync_row(links, synced, syncs)] if synced.size else synced
    waits = np.sort(np.concatenate([np.flatnonzero(links.ccat == _WAIT), synced]))
    # the waits' rows on a thread beside the non-synchronizing calls' (NumPy gives up the GIL in its loops)
    w_job = beside(_all_wait_rows, links, waits, syncs, records)

    # non-synchronizing calls: launches, asynchronous copies and memsets, implicit synchronizes
    cat = links.ccat
    issuing = np.zeros(len(S.API_CATEGORIES), dtype=bool)
    issuing[[_LAUNCH, _GRAPH, _COPY]] = True
    # only a call whose own row ended before it returned, or one that lasted HELD_MIN_NS, can be held
    done = np.zeros(n, dtype=bool)
    done[links.done_calls()] = True
    cand = _candidates(links, done, issuing, implicit_name)
    del done
    cand = cand[~np.isin(cand, synced)]  # held as waits are, above
    c_row = np.concatenate([_call_rows(links, cand[b0 : b0 + iv.BLOCK]) for b0 in range(0, cand.size, iv.BLOCK)]) \
        if cand.size else np.full(0, NONE, dtype=np.int64)  # fmt: skip
    ok_c = c_row >= 0
    cand, c_row = cand[ok_c], c_row[ok_c]
    w_row = w_job.result()

    calls = np.concatenate([waits[w_row >= 0], cand])
    rows = np.concatenate([w_row[w_row >= 0], c_row])
    release = np.minimum(links.end[rows], links.cend[calls])
    is_wait = np.concatenate([links.ccat[waits[w_row >= 0]] == _WAIT, np.zeros(cand.size, bool)])
    order = np.argsort(calls, kind="stable")
    calls, rows, is_wait, release = calls[order], rows[order], is_wait[order], release[order]

    # blocked time and cause of the non-synchronizing ones
    blocked = np.zeros(calls.size, dtype=np.int64)
    cause = np.full(calls.size, -1, dtype=np.int8)
    depth = np.full(calls.size, -1, dtype=np.int64)
    nb = np.flatnonzero(~is_wait)
    if nb.size:
        a, b = cs[calls[nb]], release[nb]
        prefix = busy_prefix(links, window, iv.union(a, np.maximum(a, b)))
        blocked[nb] = np.maximum(busy_until(prefix, np.maximum(a, b)) - busy_until(prefix, a), 0)
        c = calls[nb]
        r = rows[nb]
        code = np.full(nb.size, _CODE["gpu_behind"], dtype=np.int8)
        launches = cat[c] == _LAUNCH
        if launches.any():
            d, _ = links.queue_depth(c[launches])
            depth[nb[launches]] = d
            full = np.zeros(nb.size, bool)
            full[launches] = d >= QUEUE_FULL_DEPTH
            code[full] = _CODE["queue_full"]
        code[cat[c] == _GRAPH] = _CODE["graph"]
        code[(links.launch[r] == c) & links.pageable[r]] = _CODE["pageable"]
        code[implicit_name[links.cname[c]]] = _CODE["implicit_sync"]
        code[launches & _first_launches(links, c)] = _CODE["module_load"]
        cause[nb] = code
    return Held(calls, rows, release, is_wait, cause, blocked, depth)


def _all_wait_rows(links: Links, waits: np.ndarray, syncs, records) -> np.ndarray:  # noqa: ANN001
    """:func:`_wait_rows` block by block: the temporaries per call stay a few MB whatever the calls."""
    if not waits.size:
        return np.full(0, NONE, dtype=np.int64)
    return np.concatenate([_wait_rows(links, waits[b0 : b0 + iv.BLOCK], syncs, records) for b0 in range(0, waits.size, iv.BLOCK)])


def _wait_rows(links: Links, waits: np.ndarray, syncs, records) -> np.ndarray:  # noqa: ANN001
    """Per wait of ``waits`` (explicit waits and implicit synchronizes with a SYNCHRONIZATION row): the row
    that held it (the awaited row with the latest end, when it ended inside the call), or -1."""
    cs, ce, cc = links.cstart, links.cend, links.ccorr
    stream_sync = _names_mask(links, STREAM_SYNC_CALLS, waits)
    event_sync = _names_mask(links, EVENT_SYNC_CALLS, waits)
    sync_copy = _names_mask(links, S.SYNC_COPY_CALLS, waits)
    rank = links.rank_of(links.cstream[waits])
    known_stream = links.cstream[waits] >= 0
    ev = np.full(waits.size, NONE, dtype=np.int64)
    if event_sync.any():
        ev[event_sync] = _call_events(links, waits[event_sync], syncs)
    recorded, by_event = _event_sources(links, ev, cc[waits], records)
    del ev
    on_stream = links.last_on_stream_before(np.where((stream_sync | sync_copy) & known_stream, rank, NONE), cc[waits])
    del rank
    own = np.full(waits.size, NONE, dtype=np.int64)
    if sync_copy.any():
        own[sync_copy] = links.own(waits[sync_copy])
    # what each waits for: its stream, its event, or (unknown) the whole device
    by_stream = (stream_sync | sync_copy) & known_stream
    by_ev = event_sync & recorded
    device_sync = ~(by_stream | by_ev)
    dev_row = np.full(waits.size, NONE, dtype=np.int64)
    if device_sync.any():  # the device's latest-ending row issued before: the latest of each stream's
        x = cc[waits[device_sync]]
        per_stream = [links.last_on_stream_before(np.full(x.size, r), x) for r in range(links.streams.size)]
        got = _latest(links, *per_stream) if per_stream else np.full(x.size, NONE)
        got[links.device_launched[np.maximum(got, 0)] & (got >= 0)] = NONE  # device-launched rows: by time, below
        dev_row[device_sync] = got
    launched = _device_ending_in(links, cs[waits], ce[waits])
    w_row = _latest(links, on_stream, own, by_event, dev_row, launched)
    we = links.end[np.maximum(w_row, 0)]
    w_row[(w_row < 0) | (we < cs[waits]) | (we > ce[waits])] = NONE
    return w_row


def _call_rows(links: Links, cand: np.ndarray) -> np.ndarray:
    """Per candidate non-synchronizing call: the row that releases it last, or -1."""
    own = links.own(cand, "done")
    long = (links.cend[cand] - links.cstart[cand]) >= HELD_MIN_NS
    other = np.full(cand.size, NONE, dtype=np.int64)
    began = np.full(cand.size, NONE, dtype=np.int64)
    if long.any():
        began[long] = links.own(cand[long], "started")
        other[long] = _issued_ending_in(links, cand[long])
    return _latest_release(links, cand, own, other, began)


def _candidates(links: Links, done: np.ndarray, issuing: np.ndarray, implicit_name: np.ndarray) -> np.ndarray:
    """The calls that can be held without a SYNCHRONIZATION row: launches, copies, memsets and implicit
    synchronizes (not waits) that lasted HELD_MIN_NS or whose own row ended before they returned
    (``done``), block by block (no temporary over every call)."""
    out = []
    cs, ce, cat, name = links.cstart, links.cend, links.ccat, links.cname
    for b0 in range(0, links.n_calls, iv.BLOCK):
        sl = slice(b0, b0 + iv.BLOCK)
        c = cat[sl]
        m = (issuing[c] | implicit_name[name[sl]]) & (c != _WAIT)
        m &= done[sl] | ((ce[sl] - cs[sl]) >= HELD_MIN_NS)
        out.append(np.flatnonzero(m) + b0)
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def _issued_ending_in(links: Links, calls: np.ndarray) -> np.ndarray:
    """Per call c, the latest-ending row issued before it (a row with a launch call and a smaller
    correlation id, or a device-launched row) with c.start < R.end <= c.end and c.end - R.end <=
    RETURN_NS; -1 when none. Rows in end order, stepping back past rows issued after c."""
    out = np.full(calls.size, NONE, dtype=np.int64)
    order = links.by_end
    cs, ce, cc = links.cstart[calls], links.cend[calls], links.ccorr[calls]
    lo = np.maximum(cs, ce - RETURN_NS)  # R.end > cs, and R.end >= ce - RETURN_NS
    k = links.end_rank(ce) - 1
    todo = np.arange(calls.size)
    dev = links.device_launched
    while todo.size:
        kk = k[todo]
        alive = kk >= 0
        e = links.end[order[kk[alive]]]
        alive[alive] = (e >= lo[todo[alive]]) & (e != cs[todo[alive]])  # R.end must be after c.start
        todo, kk = todo[alive], kk[alive]
        if not todo.size:
            break
        r = order[kk]
        issued = dev[r] | (links.corr[r] < cc[todo])
        out[todo[issued]] = r[issued]
        todo = todo[~issued]
        k[todo] -= 1
    return out


def _first_launches(links: Links, calls: np.ndarray) -> np.ndarray:
    """Per launch call, whether it is the first launch of its kernel's name in the group (a lazy
    module load happens there)."""
    kr = np.flatnonzero((links.kname >= 0) & ~links.device_launched)
    if kr.size == 0:
        return np.zeros(calls.size, dtype=bool)
    first = np.full(len(links.kernel_names) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, links.kname[kr], links.corr[kr])
    own = links.own(calls)
    has = own >= 0
    out = np.zeros(calls.size, dtype=bool)
    kn = links.kname[own[has]]
    out[has] = (kn >= 0) & (first[np.maximum(kn, 0)] == links.ccorr[calls[has]])
    return out

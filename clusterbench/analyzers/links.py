"""CUDA calls linked to their GPU work (pure): one (process, device) group's rows and its process's
calls, joined by correlation id, with the orders the blocked-time and critical-path analyzers walk.

- **rows**: every GPU record of the group (kernels, graph executions, copies, memsets; records with
  an impossible rate are left out, as everywhere), one set of arrays over all engines;
- **calls**: every CUDA API call of the group's process, in start order;
- **launch**: per row, its launch call, the call with the same correlation id (-1 for none: work
  the device launched, whose correlation id matches no host call, or a call outside the part of the
  trace read); per call, its own rows;
- **issue order**: CUPTI numbers the calls in the order they are made, so "issued before c" is
  "correlation id smaller than c's" for rows that have a launch call; rows without one are ordered
  by time instead (docs/analyze.md, "Blocked time and the critical path");
- **stream order**: the rows of each stream in issue order (ties, such as the kernel nodes of one
  graph launch or the device's own launches, by start), with, at each position, the latest-ending
  row so far;
- **queue depth** at a call (:meth:`Links.queue_depth`): the rows issued before it and not yet
  ended when it starts, on its stream and on the whole device (the context's queue).

Every array is built with NumPy over the columns (sorts of nearly sorted keys, joins by binary
search); nothing here loops over rows in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import GroupTrace
from clusterbench.io.nsys import schema as S

NONE = -1
MANY = -2  # Links.own_row: a call with several own rows
_PACK = 40  # corr ids (CUPTI's are 32-bit) below 2**40; stream ranks above
_TIME_BITS = 43  # times relative to the group's first row, below 2**43 ns (about 2.4 hours)
_ENGINE = {name: code for code, name in enumerate(S.ENGINES)}

WAIT = S.API_CODE["wait"]
ISSUE_CODES = np.array([S.API_CODE[c] for c in ("launch", "graph_launch", "copy")], dtype=np.int8)


@dataclass(frozen=True, slots=True, eq=False)
class Links:
    """One group's rows and its process's calls, joined (see the module docstring). Row arrays are
    indexed by row, call arrays by call (the process's calls, 0..n_calls-1, in start order)."""

    pid: int
    device: int
    api_known: bool  # the trace has CUDA API rows
    # rows
    start: np.ndarray
    end: np.ndarray
    stream: np.ndarray  # int64 stream id
    srank: np.ndarray  # int32 rank of the stream among the group's streams
    streams: np.ndarray  # the group's stream ids, sorted (srank indexes it)
    stream_flag: np.ndarray  # per stream rank: its CUPTI flag (1 blocking, 2 non-blocking, 3 legacy default; 0 unknown)
    corr: np.ndarray
    engine: np.ndarray  # int8 code into schema.ENGINES
    kname: np.ndarray  # int32 kernel name (index into kernel_names), -1 for other rows
    pageable: np.ndarray  # bool: a copy with pageable host memory
    nbytes: np.ndarray  # int64 (0 for kernels and graphs)
    kernel_names: tuple[str, ...]
    launch: np.ndarray  # per row: its launch call, or -1
    by_device: np.ndarray  # per row: launched by the device (see device_launched)
    # calls
    api_index: np.ndarray | None  # per call: its index in the trace's ApiCalls (None: every call is the process's)
    cstart: np.ndarray
    cend: np.ndarray
    cthread: np.ndarray  # index into ApiCalls.threads
    cname: np.ndarray  # index into ApiCalls.names
    ccorr: np.ndarray
    cstream: np.ndarray  # the stream the call names, -1 when none
    ccat: np.ndarray  # int8 category code (schema.API_CATEGORIES)
    names: tuple[str, ...]  # ApiCalls.names
    # orders
    by_corr: np.ndarray  # rows in issue order (correlation id, then start)
    by_stream: np.ndarray  # rows in stream order (stream rank, correlation id, start)
    seg_lo: np.ndarray  # per stream rank: its rows are by_stream[seg_lo:seg_hi]
    seg_hi: np.ndarray
    latest: np.ndarray  # per stream-order position: the position of the latest-ending row so far on its stream
    by_end: np.ndarray  # rows in end order
    skeys: np.ndarray  # per stream-order position: its (stream rank, correlation id) key, sorted
    engine_lo: np.ndarray  # per engine code: its rows are lo..hi-1 (the rows come engine by engine)
    engine_hi: np.ndarray
    # the rows with a launch call, in issue order: each call's own rows are one run of them (one row per call,
    # but for the nodes of a node-level graph launch); :meth:`own` looks a call's up by binary search
    hosted: np.ndarray
    hosted_corr: np.ndarray  # their correlation ids (sorted)
    # per call: its own row when it has exactly one, -1 when it has none, MANY when it has several (the
    # nodes of a node-level graph launch): :meth:`own` reads most calls' row from it without a search
    own_row: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.start.size)

    @property
    def n_calls(self) -> int:
        return int(self.cstart.size)

    @property
    def device_launched(self) -> np.ndarray:
        """Rows that the device launched: no call of the process has their correlation id, and it is
        0 or lies among the ids of the calls read (a host launch then would have been read). They are
        ordered by time, not by correlation id. A row whose id lies outside that range was launched by a
        call outside the part of the trace read, and keeps its place in issue order."""
        return self.by_device

    def pack(self, srank: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """The stream-order key of (stream rank, correlation id)."""
        return (np.asarray(srank).astype(np.int64) << _PACK) | np.clip(np.asarray(corr).astype(np.int64), 0, (1 << _PACK) - 1)

    def stream_keys(self) -> np.ndarray:
        """The stream-order key of each stream-order position (sorted)."""
        return self.skeys

    def rank_of(self, stream_ids: np.ndarray) -> np.ndarray:
        """The stream rank of each stream id, -1 for a stream with no row in the group."""
        r = np.searchsorted(self.streams, stream_ids)
        r = np.minimum(r, max(self.streams.size - 1, 0))
        ok = (self.streams.size > 0) & (self.streams[r] == stream_ids) if self.streams.size else np.zeros(r.shape, bool)
        return np.where(ok, r, NONE).astype(np.int64)

    def last_on_stream_before(self, srank: np.ndarray, corr: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
        """Per query, the latest-ending row on stream ``srank`` issued before correlation id ``corr``
        (the rows of the stream with a smaller correlation id), or -1."""
        out = np.full(srank.shape, NONE, dtype=np.int64)
        ok = srank >= 0
        if not ok.any() or self.n_rows == 0:
            return out
        keys = self.stream_keys() if keys is None else keys
        q = self.pack(srank[ok], corr[ok])
        pos = np.searchsorted(keys, q, side="left") - 1
        lo = self.seg_lo[srank[ok]]
        has = pos >= lo
        res = np.full(q.shape, NONE, dtype=np.int64)
        res[has] = self.by_stream[self.latest[pos[has]]]
        out[ok] = res
        return out

    def first_on_stream_after(self, srank: np.ndarray, corr: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
        """Per query, the first row on stream ``srank`` issued after correlation id ``corr``, or -1."""
        out = np.full(srank.shape, NONE, dtype=np.int64)
        ok = srank >= 0
        if not ok.any() or self.n_rows == 0:
            return out
        keys = self.stream_keys() if keys is None else keys
        q = self.pack(srank[ok], corr[ok])
        pos = np.searchsorted(keys, q, side="right")
        hi = self.seg_hi[srank[ok]]
        has = pos < hi
        res = np.full(q.shape, NONE, dtype=np.int64)
        res[has] = self.by_stream[pos[has]]
        out[ok] = res
        return out

    def rows_of(self, call: int) -> np.ndarray:
        """The rows a call launched (its own rows, by correlation id), in issue order."""
        x = int(self.ccorr[call])
        if x <= 0:
            return np.empty(0, dtype=np.int64)
        rc = self.corr[self.by_corr]
        rows = self.by_corr[np.searchsorted(rc, x, side="left") : np.searchsorted(rc, x, side="right")]
        return rows[self.launch[rows] == call]

    def end_rank(self, t: np.ndarray) -> np.ndarray:
        """Per time of ``t``: how many rows end at or before it (the position after them in end order). The
        rows in end order are cut in blocks; each time is searched in the one block where it falls (found
        from the blocks' first ends), so that no copy of every row's end is made and each time is searched
        once."""
        t = np.asarray(t, dtype=np.int64)
        out = np.zeros(t.shape, dtype=np.int64)
        order = self.by_end
        if order.size == 0 or t.size == 0:
            return out
        firsts = self.end[order[:: iv.BLOCK]]  # the first end of each block
        blk = np.searchsorted(firsts, t, side="right") - 1  # the last block starting at or before the time
        if firsts.size == 1:
            q = np.flatnonzero(blk >= 0)
            out[q] = np.searchsorted(self.end[order], t[q], side="right")
            return out
        o = np.argsort(blk, kind="stable")
        edges = np.searchsorted(blk[o], np.arange(firsts.size + 1), side="left")
        for b in range(firsts.size):
            q = o[edges[b] : edges[b + 1]]
            if q.size:
                b0 = b * iv.BLOCK
                out[q] = b0 + np.searchsorted(self.end[order[b0 : b0 + iv.BLOCK]], t[q], side="right")
        return out

    def own(self, calls: np.ndarray, kind: str = "last") -> np.ndarray:
        """Per call of ``calls``: among its own rows, the one with the latest end (``kind`` "last"), with the
        latest end at or before the call's end ("done"), or with the latest end among those that started
        before the call ended ("started"); -1 when none (ties: the last in issue order)."""
        calls = np.asarray(calls, dtype=np.int64)
        out = np.full(calls.size, NONE, dtype=np.int64)
        hc = self.hosted_corr
        if calls.size == 0 or hc.size == 0:
            return out
        row = self.own_row[calls].astype(np.int64)
        single = np.flatnonzero(row >= 0)
        rows = row[single]
        if kind == "last":
            out[single] = rows
        else:
            ce = self.cend[calls[single]]
            keep = self.end[rows] <= ce if kind == "done" else self.start[rows] < ce
            out[single[keep]] = rows[keep]
        q = np.flatnonzero(row == MANY)  # more than one row (a node-level graph launch)
        if q.size == 0:
            return out
        x = self.ccorr[calls[q]]
        lo = np.searchsorted(hc, x, side="left")
        hi = np.searchsorted(hc, x, side="right")
        n = hi - lo
        rep = np.repeat(np.arange(q.size), n)
        first = np.cumsum(n) - n
        pos = lo[rep] + (np.arange(rep.size) - first[rep])
        rows = self.hosted[pos].astype(np.int64)
        low = np.iinfo(np.int64).min
        # the rows of the id that this call launched (another call may have been given the same id)
        e = np.where(self.launch[rows] == calls[q][rep], self.end[rows], low)
        if kind == "done":
            e = np.where(e <= self.cend[calls[q]][rep], e, low)
        elif kind == "started":
            e = np.where(self.start[rows] < self.cend[calls[q]][rep], e, low)
        best = np.maximum.reduceat(e, first)
        at = np.maximum.reduceat(np.where(e == best[rep], np.arange(rep.size), -1), first)
        good = best > low
        out[q[good]] = rows[at[good]]
        return out

    def done_calls(self) -> np.ndarray:
        """The calls (sorted) with an own row that ended at or before the call's end."""
        rows = self.hosted
        if rows.size == 0:
            return np.empty(0, dtype=np.int64)
        call = self.launch[rows]
        fits = self.end[rows] <= self.cend[call]
        return np.unique(call[fits]).astype(np.int64)

    def queue_depth(self, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each call of ``calls``: (rows of the device, rows on the call's own stream) issued
        before it and not yet ended when it starts. A row with a launch call is issued before c when
        its correlation id is smaller; a row without one (device-launched) counts while it runs.
        Each stream runs its rows in issue order, so on a stream the rows issued before c that have
        ended by c.start are the first ones: counted by binary search, one pass per stream."""
        calls = np.asarray(calls, dtype=np.int64)
        ctx = np.zeros(calls.size, dtype=np.int64)
        own = np.zeros(calls.size, dtype=np.int64)
        if calls.size == 0 or self.n_rows == 0:
            return ctx, own
        t, x = self.cstart[calls], self.ccorr[calls]
        my_rank = self.rank_of(self.cstream[calls])
        host = ~self.device_launched
        bs = self.by_stream
        keys = self.stream_keys()
        for r in range(self.streams.size):
            lo, hi = int(self.seg_lo[r]), int(self.seg_hi[r])
            seg = bs[lo:hi]
            hs = host[seg]
            if not hs.any():
                continue
            seg_h = seg[hs]
            # issued before: a prefix in stream order; ended by t: a prefix of it, as ends follow issue order
            p = np.searchsorted(keys[lo:hi][hs], self.pack(np.full(x.size, r), x), side="left")
            ends = np.maximum.accumulate(self.end[seg_h])
            q = np.searchsorted(ends, t, side="right")
            n = p - np.minimum(p, q)
            ctx += n
            own += np.where(my_rank == r, n, 0)
        dev = self.device_launched
        if dev.any():  # device-launched rows: running at c.start
            ds, de = np.sort(self.start[dev]), np.sort(self.end[dev])
            running = np.searchsorted(ds, t, side="right") - np.searchsorted(de, t, side="right")
            ctx += running
            run_s = np.zeros(calls.size, dtype=np.int64)
            for r in np.unique(self.srank[dev]).tolist():
                m = dev & (self.srank == r)
                rs, re_ = np.sort(self.start[m]), np.sort(self.end[m])
                run_s += np.where(my_rank == r, np.searchsorted(rs, t, side="right") - np.searchsorted(re_, t, side="right"), 0)
            own += run_s
        return ctx, own


def _rows(g: GroupTrace) -> tuple[np.ndarray, ...]:
    parts = [(code, r) for code, r in ((_ENGINE[n], r) for n, r in g.engines.items()) if len(r)]
    if not parts:
        e64 = np.empty(0, dtype=np.int64)
        return e64, e64, e64, e64, np.empty(0, np.int8), np.empty(0, np.int32), np.empty(0, bool), e64
    # the reader's own column types where they fit (int32 correlation ids, int16 streams and names), and
    # views of the reader's arrays where the engines' records lie one after the other in them (one group)
    start = _joined([r.start_ns for _, r in parts]).astype(np.int64, copy=False)
    end = _joined([r.end_ns for _, r in parts]).astype(np.int64, copy=False)
    stream = _joined([r.stream for _, r in parts])
    corr = _joined([_corr(r) for _, r in parts])
    engine = np.concatenate([np.full(len(r), c, dtype=np.int8) for c, r in parts])
    kname = np.concatenate([r.name if r.name is not None else np.full(len(r), NONE, np.int16) for _, r in parts])
    pageable = np.concatenate([r.pageable if r.pageable is not None else np.zeros(len(r), bool) for _, r in parts])
    nbytes = np.concatenate([r.bytes if r.bytes is not None else np.zeros(len(r), np.int32) for _, r in parts])
    return start, end, stream, corr, engine, kname, pageable, nbytes


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays end to end: a view of their common base when they lie one after the other in it (no
    copy), else a concatenation."""
    first = arrays[0]
    base = first.base
    ok = base is not None and all(a.base is base and a.dtype == first.dtype and a.flags.c_contiguous for a in arrays)
    if ok and isinstance(base, np.ndarray) and base.ndim == 1 and base.flags.c_contiguous and base.dtype == first.dtype:
        item = first.itemsize
        addr0 = base.__array_interface__["data"][0]
        offs = [(a.__array_interface__["data"][0] - addr0) // item for a in arrays]
        if all(offs[k] + arrays[k].size == offs[k + 1] for k in range(len(arrays) - 1)) and offs[0] >= 0:
            return base[offs[0] : offs[-1] + arrays[-1].size]
    return np.concatenate(arrays)


def _corr(r) -> np.ndarray:  # noqa: ANN001
    c = getattr(r, "correlation", None)
    return c if c is not None else np.zeros(len(r), dtype=np.int64)


def build(g: GroupTrace, corr_range: tuple[int, int] | None = None) -> Links:
    """The links of group ``g`` (its rows, its process's calls). ``corr_range``: the least and greatest
    correlation id of the process's calls read, when ``g`` holds only some of them (a part of the trace):
    a row without a launch call is device-launched when its id lies in that range (or is 0)."""
    start, end, stream, corr, engine, kname, pageable, nbytes = _rows(g)
    n = start.size
    api = g.api
    api_known = bool(api.tables) and len(api) > 0 and bool((api.correlation > 0).any())
    if api_known:
        tpid = api.thread_pid()
        mine = tpid[api.thread] == g.pid
        if bool(mine.all()):  # one process: views, no copies
            api_index = None
            pick = slice(None)
        else:
            api_index = np.flatnonzero(mine)
            pick = api_index
        cstart = api.start_ns[pick].astype(np.int64, copy=False)
        cend = api.end_ns[pick].astype(np.int64, copy=False)
        cthread = api.thread[pick]
        cname = api.name[pick]
        ccorr = api.correlation[pick]
        cstream = api.stream[pick]
        ccat = api.name_category[cname] if len(api.names) else np.empty(0, np.int8)
        names = api.names
    else:
        api_index = np.empty(0, dtype=np.int64)
        cstart = cend = ccorr = cstream = api_index
        cthread = cname = np.empty(0, dtype=np.int32)
        ccat = np.empty(0, dtype=np.int8)
        names = api.names if api.tables else ()

    # issue order: correlation id, ties by start (rows come sorted by start within each engine); row and
    # call indices as int32 while they fit (half the memory of the default int64)
    idx = np.int32 if max(n, cstart.size) < (1 << 31) else np.int64
    o = np.argsort(start, kind="stable").astype(idx)
    by_corr = o[np.argsort(corr[o], kind="stable")]
    del o

    # each row's launch call (a join of two sorted columns)
    launch = np.full(n, NONE, dtype=idx)
    if cstart.size and n:
        co = np.argsort(ccorr, kind="stable").astype(idx)
        cc = ccorr[co]
        rc = corr[by_corr]
        at = np.minimum(np.searchsorted(cc, rc, side="left"), cc.size - 1)
        hit = (cc[at] == rc) & (rc > 0)
        launch[by_corr[hit]] = co[at[hit]]
        del co, cc, rc, at, hit

    device = launch < 0
    if corr_range is not None:
        lo_c, hi_c = corr_range
        device &= (corr <= 0) | ((corr >= lo_c) & (corr <= hi_c))
    elif cstart.size:
        known = ccorr[ccorr > 0]
        lo_c, hi_c = (int(known.min()), int(known.max())) if known.size else (1, 0)
        device &= (corr <= 0) | ((corr >= lo_c) & (corr <= hi_c))

    # stream order
    streams, srank = _ranks(stream)
    by_stream = by_corr[np.argsort(srank[by_corr], kind="stable")]
    ranks = srank[by_stream]
    bounds = np.searchsorted(ranks, np.arange(streams.size + 1))
    seg_lo, seg_hi = bounds[:-1].astype(np.int64), bounds[1:].astype(np.int64)
    latest = np.zeros(n, dtype=idx)
    if n:
        base = int(start.min())
        key = end[by_stream] - base
        np.clip(key, 0, (1 << _TIME_BITS) - 1, out=key)
        key += ranks.astype(np.int64) << _TIME_BITS
        run = np.maximum.accumulate(key)
        latest = np.maximum.accumulate(np.where(key == run, np.arange(n, dtype=idx), 0)).astype(idx, copy=False)
        del key, run
    by_end = np.argsort(end, kind="stable").astype(idx)
    hosted = by_corr[launch[by_corr] >= 0]
    hosted_corr = corr[hosted]
    own_row = _own_rows(launch[hosted], hosted, cstart.size, idx)
    skeys = (ranks.astype(np.int64) << _PACK) | np.clip(corr[by_stream], 0, (1 << _PACK) - 1).astype(np.int64)
    counts = np.bincount(engine, minlength=len(S.ENGINES)) if n else np.zeros(len(S.ENGINES), np.int64)
    engine_hi = np.cumsum(counts)
    engine_lo = engine_hi - counts
    return Links(
        pid=g.pid, device=g.device, api_known=api_known,
        start=start, end=end, stream=stream, srank=srank, streams=streams,
        stream_flag=np.array([int(g.stream_flags.get(int(x), 0)) for x in streams.tolist()], dtype=np.int8), corr=corr, engine=engine, kname=kname,
        pageable=pageable, nbytes=nbytes, kernel_names=g.kernel_names, launch=launch, by_device=device,
        api_index=api_index, cstart=cstart, cend=cend, cthread=cthread, cname=cname, ccorr=ccorr, cstream=cstream,
        ccat=ccat, names=tuple(names),
        by_corr=by_corr, by_stream=by_stream, seg_lo=seg_lo, seg_hi=seg_hi,
        latest=latest, by_end=by_end, hosted=hosted, hosted_corr=hosted_corr, own_row=own_row, skeys=skeys, engine_lo=engine_lo,
        engine_hi=engine_hi,
    )  # fmt: skip


def _own_rows(call: np.ndarray, rows: np.ndarray, n_calls: int, idx: type) -> np.ndarray:
    """Per call, its own row (``rows`` launched by ``call``) when it has exactly one, -1 for none, MANY for
    several."""
    out = np.full(n_calls, NONE, dtype=idx)
    if rows.size == 0:
        return out
    out[call] = rows
    # counted, not found next to each other: rows of calls that share a correlation id may interleave
    out[np.bincount(call, minlength=n_calls) > 1] = MANY
    return out


def _ranks(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct stream ids, sorted, and each row's rank among them (int16 while they fit): by a
    table over the ids when they are small (nsys numbers streams from 7 up), else by sorting."""
    if stream.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int16)
    lo, hi = int(stream.min()), int(stream.max())
    if lo >= 0 and hi < (1 << 20):
        seen = np.bincount(stream, minlength=hi + 1) > 0
        streams = np.flatnonzero(seen).astype(np.int64)
        table = np.cumsum(seen) - 1
        srank = table[stream]
    else:
        streams, srank = np.unique(stream, return_inverse=True)
        srank = srank.reshape(-1)
    return streams, srank.astype(np.int16 if streams.size < (1 << 15) else np.int32)

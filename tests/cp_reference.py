"""A slow, independent reference of blocked time and the critical path, for the tests.

It implements the definitions of docs/analyze.md's critical path section (which calls the GPU held, the
blocked time of each and its cause, each launching thread's work / blocked / wait, and the backward
last-arrival walk) directly over an nsys SQLite export read with plain sqlite3. It imports nothing from
clusterbench: it builds the dependency graph explicitly (a node per row and per call, each edge as the
definitions list them) and walks it one step at a time, so that each figure can be checked by reading the
code next to the definition. Times are ns; intervals are (start, end) pairs.

The definitions, as written here:

Calls and rows. Rows are the group's GPU records (kernels, graph executions, copies, memsets) of one
(process, device); calls are the process's CUDA API calls (runtime and driver tables), each with its
thread, start, end, base name (no _vNNNN / _ptsz / _ptds suffix) and correlation id. "Issued before c":
correlation id smaller than c's. A row's launch call is the call with its correlation id. A row whose id
matches no call of the process and is 0 or lies among the calls' ids was launched by the device (a graph
that relaunches itself): it is ordered by time, not by id, and is never "issued before" a call.

1. Held calls.
   - Explicit waits (WAIT_CALLS): stream synchronize on S (S from its SYNCHRONIZATION row) waits for
     the rows on S issued before it; device/context synchronize for every row of the group issued
     before it; event synchronize on E for the rows on the recording stream issued before the latest
     cudaEventRecord(E) (CUDA_EVENT rows, by correlation id) issued before the sync; a synchronous copy
     for its own rows and the rows on their stream issued before it. A stream, or an event with no
     record before the sync, that cannot be found makes the call a device sync. Every wait also awaits
     the device-launched rows that end during it. R = the awaited row with the latest end; the wait is
     held by R when w.start <= R.end <= w.end.
   - An implicit synchronize (IMPLICIT_CALLS) that left a SYNCHRONIZATION row awaits as a device sync
     does and is held by R the same way; its time before R.end is blocked (cause implicit_sync), not wait.
   - Non-synchronizing calls (launch, graph_launch, copy, implicit without a SYNCHRONIZATION row): R
     releases the call at min(R.end, c.end); R = the row that releases it last (ties: the earlier list)
     among (a) the call's own rows with R.end <= c.end, (b) when the call lasted HELD_MIN_NS or more,
     rows issued before it (or device-launched) with c.start < R.end <= c.end and c.end - R.end <=
     RETURN_NS, and (c) when the call lasted HELD_MIN_NS or more, its own rows that started before c.end.
   - Blocked time of a held non-synchronizing call: [c.start, release] intersected with the union of all
     the group's rows. Cause, first that applies: module_load (a launch that is the first launch of its
     kernel name in the process), implicit_sync (IMPLICIT_CALLS), pageable (R is the call's own copy row
     and its host memory is pageable), graph (a graph launch), queue_full (a launch with at least
     queue_full_depth rows issued before it not yet ended at c.start), else gpu_behind.
2. Each launching thread (a thread with a call that issues GPU work touching the window), over the
   window less its set-up gaps: active = [first call start, last call end] of its calls touching the
   window; wait = the union of its explicit waits; blocked = the union of its held calls' blocked time,
   less the waits; work = active - wait - blocked.
3. The critical path, walked backwards from each window interval's end (section "walk" below).

The walk (docs/analyze.md): at a row R entered at time t, R's resource over [R.start, t]; before it
the dependency with the latest release at or before R.start, among: the stream predecessor (the
latest-ending row before R in stream order (correlation id, then start), if it started by R.start;
released at min(its end, R.start), and entered there); the event sources (released at their end);
the engine predecessor (the latest-ending other row of R's engine that ended by R.start); on the legacy
default stream the latest-ending row issued before R on a blocking or legacy stream, on a blocking
stream the latest-ending row issued before R on the legacy stream (TARGET_INFO_CUDA_STREAM flags 1 and
3), released at its end; its launch call, released at the call's start (the gap is ``launch``, and the
walk goes on at the call's thread). A device-launched row with none of these follows the latest-ending
row that ended by its start. On a thread at t, the last call starting before t that the GPU held and
released in (c.start, t] sends the walk to the releasing row, entered at the release.

Ties (equal times) are broken as follows, and documented because the definitions leave them open:
the first node is a row before a call when both end at the same time; at a row, the dependencies with
equal release are taken in the order stream predecessor, event source, engine predecessor, legacy
stream, launch call.
"""

from __future__ import annotations

import re
import sqlite3
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from oracle import clip_set, minus, total, union

Interval = tuple[int, int]

RETURN_NS = 20_000  # how long a call takes to return after the GPU work it waited for ends
HELD_MIN_NS = 20_000  # a launch or async copy that is not held returns in a few µs, even under nsys
QUEUE_FULL_DEPTH = 512  # rows issued and not ended at a launch's start for a full launch queue

NO_ID = 4294967295  # the export's "none" for a stream or event id

WAIT_CALLS = frozenset({
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
    "cudaMemcpyPeer", "cudaMemcpy2DToArray", "cudaMemcpy2DFromArray",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
    "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy2D", "cuMemcpy3D", "cuMemcpyPeer",
})  # fmt: skip
STREAM_SYNCS = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize"})
EVENT_SYNCS = frozenset({"cudaEventSynchronize", "cuEventSynchronize"})
DEVICE_SYNCS = frozenset({"cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize"})
IMPLICIT_CALLS = frozenset({"cudaFree", "cudaFreeHost", "cudaFreeArray", "cudaProfilerStop", "cudaHostUnregister",
                            "cuMemFree", "cuMemFreeHost", "cuMemHostUnregister", "cuProfilerStop"})  # fmt: skip
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
STREAM_WAIT_EVENT = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})
EVENT_RECORDS = frozenset({"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags"})

COPY_ENGINES = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p", 11: "um_h2d", 12: "um_d2h", 13: "um_d2d"}
STREAM_BLOCKING, STREAM_NULL = 1, 3  # TARGET_INFO_CUDA_STREAM.flag: a blocking stream, the legacy default stream


def base_name(name: str) -> str:
    """cudaLaunchKernel_v7000 -> cudaLaunchKernel (every version suffix, _ptsz, _ptds)."""
    return re.sub(r"(?:_v\d+|_ptds|_ptsz)+$", "", name)


def category(name: str) -> str:
    """wait, graph_launch, launch, copy, implicit or other, by a call's base name."""
    if name in WAIT_CALLS:
        return "wait"
    if name in GRAPH_LAUNCHES:
        return "graph_launch"
    if name.startswith(("cudaLaunch", "cuLaunch")):
        return "launch"
    if name.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset", "cudaMemPrefetch", "cuMemPrefetch")):
        return "copy"
    if name in IMPLICIT_CALLS:
        return "implicit"
    return "other"


def issues(c: "Call") -> bool:
    """A call that puts work on the GPU (what makes its thread a launching thread)."""
    return c.cat in ("launch", "graph_launch", "copy") or (c.cat == "wait" and c.name.startswith(("cudaMemcpy", "cuMemcpy")))


# --------------------------------------------------------------------------- the trace, read with sqlite3


@dataclass
class Row:
    idx: int
    resource: str  # kernel, graph, memset, h2d, d2h, d2d, p2p, copy
    name: str  # the kernel's short name ("" for other rows)
    start: int
    end: int
    stream: int
    corr: int
    pid: int
    device: int
    pageable: bool = False
    by_device: bool = False  # launched by the device (set per group)


@dataclass
class Call:
    idx: int
    name: str
    start: int
    end: int
    pid: int
    tid: int
    corr: int
    cat: str


@dataclass
class Trace:
    rows: list[Row]
    calls: list[Call]
    sync_of: dict[int, tuple[int, int]]  # correlation id -> (stream, event) of its SYNCHRONIZATION row (-1: none)
    record_of: dict[int, tuple[int, int]]  # correlation id -> (stream, event) of its CUDA_EVENT row
    thread_names: dict[int, str]
    stream_flags: dict[tuple[int, int], int] = field(default_factory=dict)  # (pid, stream) -> CUPTI flag


def _none(v: int | None) -> int:
    return -1 if v is None or v == NO_ID else int(v)


def read(path) -> Trace:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    strings = dict(con.execute("SELECT id, value FROM StringIds"))

    def cols(table: str) -> set[str]:
        return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}

    rows: list[Row] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        for s, e, d, st, corr, gp, sn in con.execute(
            "SELECT start, end, deviceId, streamId, correlationId, globalPid, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            rows.append(Row(0, "kernel", strings[sn], s, e, st, corr, (gp >> 24) & 0xFFFFFF, d))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        for s, e, d, st, corr, gp in con.execute(
            "SELECT start, end, deviceId, streamId, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        ):
            rows.append(Row(0, "graph", "", s, e, st, corr, (gp >> 24) & 0xFFFFFF, d))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        kinds = "srcKind, dstKind" if {"srcKind", "dstKind"} <= cols("CUPTI_ACTIVITY_KIND_MEMCPY") else "NULL, NULL"
        for s, e, d, st, corr, gp, ck, sk, dk in con.execute(
            f"SELECT start, end, deviceId, streamId, correlationId, globalPid, copyKind, {kinds} FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            rows.append(Row(0, COPY_ENGINES.get(ck, "other"), "", s, e, st, corr, (gp >> 24) & 0xFFFFFF, d,
                            pageable=0 in (sk, dk)))  # fmt: skip
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for s, e, d, st, corr, gp in con.execute(
            "SELECT start, end, deviceId, streamId, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            rows.append(Row(0, "memset", "", s, e, st, corr, (gp >> 24) & 0xFFFFFF, d))
    rows.sort(key=lambda r: (r.start, r.end, r.corr))
    for i, r in enumerate(rows):
        r.idx = i
    calls: list[Call] = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            for s, e, gt, corr, nid in con.execute(f"SELECT start, end, globalTid, correlationId, nameId FROM {table}"):
                name = base_name(strings[nid])
                calls.append(Call(0, name, s, e, (gt >> 24) & 0xFFFFFF, gt & 0xFFFFFF, corr, category(name)))
    calls.sort(key=lambda c: (c.start, c.end, c.corr))
    for i, c in enumerate(calls):
        c.idx = i
    sync_of: dict[int, tuple[int, int]] = {}
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        for corr, st, ev in con.execute("SELECT correlationId, streamId, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
            sync_of[corr] = (_none(st), _none(ev))
    record_of: dict[int, tuple[int, int]] = {}
    if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" in tables:
        for corr, st, ev in con.execute("SELECT correlationId, streamId, eventId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
            record_of[corr] = (_none(st), _none(ev))
    names: dict[int, tuple[int, str]] = {}
    if "ThreadNames" in tables:
        for gt, nid, prio in con.execute("SELECT globalTid, nameId, priority FROM ThreadNames"):
            tid = gt & 0xFFFFFF
            if tid not in names or (prio or 0) >= names[tid][0]:
                names[tid] = (prio or 0, strings[nid])
    flags: dict[tuple[int, int], int] = {}
    if "TARGET_INFO_CUDA_STREAM" in tables:
        for p, st, f in con.execute("SELECT processId, streamId, flag FROM TARGET_INFO_CUDA_STREAM"):
            flags[(p, st)] = f
    con.close()
    return Trace(rows, calls, sync_of, record_of, {t: n for t, (_, n) in names.items()}, flags)


# --------------------------------------------------------------------------- the graph


@dataclass
class Held:
    """A call the GPU held: by row ``row`` (the awaited row with the latest end)."""

    call: Call
    row: Row
    wait: bool  # an explicit wait (else a blocked non-synchronizing call)
    release: int = 0  # when the row let the call go: min(row end, call end)
    blocked: list[Interval] = field(default_factory=list)  # non-synchronizing calls: the blocked time
    cause: str | None = None


@dataclass
class ThreadSplit:
    tid: int
    name: str | None
    active_ns: int
    work_ns: int
    blocked_ns: int
    wait_ns: int
    blocked_by_cause: dict[str, int]


@dataclass
class Segment:
    start: int
    end: int
    resource: str  # host:<label>, kernel, h2d, d2h, memset, graph, ..., launch, idle
    what: str  # the node: "row 12", "thread 1757 in cudaLaunchKernel", "launch gap"
    name: str = ""  # a kernel row's kernel name


@dataclass
class Path:
    total_ns: int
    segments: list[Segment]
    by_resource: dict[str, int]
    by_kernel: dict[str, int]

    @property
    def shares(self) -> dict[str, float]:
        """Each resource's share of the path, the host threads as host:<label> (see shares_json)."""
        return {k: v / self.total_ns for k, v in self.by_resource.items() if v > 0}

    def shares_json(self) -> dict[str, float]:
        """As --json names them: ``host`` alone when one thread has all the host time."""
        hosts = [k for k, v in self.by_resource.items() if k.startswith("host:") and v > 0]
        out = dict(self.shares)
        if len(hosts) == 1:
            out["host"] = out.pop(hosts[0])
        return out


@dataclass
class Reference:
    pid: int
    device: int
    window: list[Interval]
    steady: list[Interval]
    held: dict[int, Held]  # call idx -> how it was held
    threads: dict[int, ThreadSplit]
    path: Path
    blocked_by_cause: dict[str, int]  # summed over the launching threads, in the steady window
    launching: list[int]  # tids


class Graph:
    """One (process, device) group: its rows and calls, and every dependency the definitions name."""

    def __init__(self, tr: Trace, pid: int, device: int, queue_full_depth: int = QUEUE_FULL_DEPTH) -> None:
        self.pid, self.device, self.depth = pid, device, queue_full_depth
        self.rows = [r for r in tr.rows if r.pid == pid and r.device == device]
        self.calls = [c for c in tr.calls if c.pid == pid]
        self.tr = tr
        self.call_by_corr = {c.corr: c for c in self.calls}
        # device-launched rows: no call of the process has their id, and it is 0 or among the calls' ids
        ids = [c.corr for c in self.calls if c.corr > 0]
        lo_id, hi_id = (min(ids), max(ids)) if ids else (1, 0)
        for r in self.rows:
            r.by_device = r.corr not in self.call_by_corr and (r.corr <= 0 or lo_id <= r.corr <= hi_id)
        self.host_rows = [r for r in self.rows if not r.by_device]
        self.device_rows = [r for r in self.rows if r.by_device]
        self.rows_by_corr: dict[int, list[Row]] = defaultdict(list)
        for r in self.host_rows:
            self.rows_by_corr[r.corr].append(r)
        # rows by stream, in stream order (correlation id, then start)
        self.on_stream: dict[int, list[Row]] = defaultdict(list)
        for r in sorted(self.rows, key=lambda r: (r.corr, r.start)):
            self.on_stream[r.stream].append(r)
        self.pos = {r.idx: i for v in self.on_stream.values() for i, r in enumerate(v)}  # place in stream order
        # by issue order (correlation id), with the latest-ending row of every prefix: "the last row
        # (of the group, or on a stream) issued before correlation id X" in one bisect (host-launched rows)
        self.by_issue = self._issue_order(self.host_rows)
        host_on: dict[int, list[Row]] = defaultdict(list)
        for r in self.host_rows:
            host_on[r.stream].append(r)
        self.stream_by_issue = {s: self._issue_order(v) for s, v in host_on.items()}
        # the legacy default stream and the blocking streams (TARGET_INFO_CUDA_STREAM)
        flag = {r.stream: tr.stream_flags.get((pid, r.stream), 0) for r in self.rows}
        self.flag = flag
        self.legacy = any(f == STREAM_NULL for f in flag.values())
        self.to_legacy = self._issue_order([r for r in self.host_rows if flag[r.stream] in (STREAM_BLOCKING, STREAM_NULL)])
        self.from_legacy = self._issue_order([r for r in self.host_rows if flag[r.stream] == STREAM_NULL])
        # rows by engine, in end order
        self.engine_by_end: dict[str, list[Row]] = defaultdict(list)
        for r in sorted(self.rows, key=lambda r: (r.end, r.start)):
            self.engine_by_end[r.resource].append(r)
        self.engine_ends = {k: [r.end for r in v] for k, v in self.engine_by_end.items()}
        self.busy = union([(r.start, r.end) for r in self.rows])
        self.by_end = sorted(self.rows, key=lambda r: (r.end, r.start))
        self.ends = [r.end for r in self.by_end]
        self.corr_arr = np.array([r.corr for r in self.host_rows], dtype=np.int64)
        self.end_arr = np.array([r.end for r in self.host_rows], dtype=np.int64)
        self.dev_start = np.array([r.start for r in self.device_rows], dtype=np.int64)
        self.dev_end = np.array([r.end for r in self.device_rows], dtype=np.int64)
        # calls by thread, in start order
        self.thread_calls: dict[int, list[Call]] = defaultdict(list)
        for c in self.calls:
            self.thread_calls[c.tid].append(c)
        self.thread_starts = {t: [c.start for c in v] for t, v in self.thread_calls.items()}
        # the first launch of each kernel name (module loads)
        self.first_launch: dict[str, int] = {}
        for c in sorted(self.calls, key=lambda c: c.corr):
            if c.cat == "launch":
                for r in self.rows_by_corr.get(c.corr, []):
                    if r.resource == "kernel":
                        self.first_launch.setdefault(r.name, c.corr)
        # event records (correlation id order) and stream waits, from CUDA_EVENT and SYNCHRONIZATION rows
        self.records: dict[int, list[tuple[int, int]]] = defaultdict(list)  # event -> [(record corr, stream)]
        for c in sorted(self.calls, key=lambda c: c.corr):
            if c.name in EVENT_RECORDS and c.corr in tr.record_of:
                st, ev = tr.record_of[c.corr]
                if ev >= 0:
                    self.records[ev].append((c.corr, st))
        self.stream_waits: dict[int, list[tuple[int, int]]] = defaultdict(list)  # stream -> [(wait corr, event)]
        for c in sorted(self.calls, key=lambda c: c.corr):
            if c.name in STREAM_WAIT_EVENT and c.corr in tr.sync_of:
                st, ev = tr.sync_of[c.corr]
                if st >= 0 and ev >= 0:
                    self.stream_waits[st].append((c.corr, ev))
        self.held: dict[int, Held] = {}
        for c in self.calls:
            h = self._held(c)
            if h is not None:
                self.held[c.idx] = h

    # ---- the rows a call or a dependency names

    @staticmethod
    def _latest(rows) -> Row | None:
        best = None
        for r in rows:
            if best is None or (r.end, r.start) > (best.end, best.start):
                best = r
        return best

    @staticmethod
    def _issue_order(rows: list[Row]) -> tuple[list[int], list[Row], list[Row]]:
        """(correlation ids, rows, latest-ending row of each prefix), in issue order."""
        order = sorted(rows, key=lambda r: (r.corr, r.start, r.end))
        latest: list[Row] = []
        for r in order:
            latest.append(r if not latest or (r.end, r.start) > (latest[-1].end, latest[-1].start) else latest[-1])
        return [r.corr for r in order], order, latest

    @staticmethod
    def _before(issue: tuple[list[int], list[Row], list[Row]], corr: int) -> Row | None:
        keys, _, latest = issue
        i = bisect_left(keys, corr)
        return latest[i - 1] if i > 0 else None

    def latest_before(self, corr: int, stream: int | None = None) -> Row | None:
        """The latest-ending host-launched row (on ``stream``, or of the whole group) issued before
        correlation id ``corr``."""
        return self._before(self.by_issue if stream is None else self.stream_by_issue.get(stream, ([], [], [])), corr)

    def last_issued_before(self, corr: int, stream: int) -> Row | None:
        """The host-launched row on ``stream`` with the largest correlation id below ``corr``."""
        keys, order, _ = self.stream_by_issue.get(stream, ([], [], []))
        i = bisect_left(keys, corr)
        return order[i - 1] if i > 0 else None

    def device_ending_in(self, a: int, b: int) -> Row | None:
        """The device-launched row with the latest end inside [a, b]."""
        return self._latest(r for r in self.device_rows if a <= r.end <= b)

    def awaited(self, w: Call) -> Row | None:
        """The row an explicit wait (or an implicit synchronize with a SYNCHRONIZATION row) waits for:
        the awaited row with the latest end; None when there is none."""
        st, ev = self.tr.sync_of.get(w.corr, (-1, -1))
        found: list[Row | None] = [self.device_ending_in(w.start, w.end)]
        own = self.rows_by_corr.get(w.corr, [])
        if w.name in STREAM_SYNCS and st >= 0:
            found.append(self.latest_before(w.corr, st))
        elif w.name in EVENT_SYNCS and ev >= 0 and any(rc < w.corr for rc, _ in self.records.get(ev, [])):
            rc, rs = [(rc, rs) for rc, rs in self.records[ev] if rc < w.corr][-1]  # the latest record before the sync
            found.append(self.latest_before(rc, rs))
        elif w.cat == "wait" and w.name not in STREAM_SYNCS | EVENT_SYNCS | DEVICE_SYNCS and (own or st >= 0):
            found += own + [self.latest_before(w.corr, max(r.stream for r in own) if own else st)]  # a synchronous copy
        else:
            found.append(self.latest_before(w.corr))  # a device sync, or a stream or event that cannot be found
        return self._latest(r for r in found if r is not None)

    def _held(self, c: Call) -> Held | None:
        synced = c.cat == "implicit" and c.corr in self.tr.sync_of
        if c.cat == "wait" or synced:
            r = self.awaited(c)
            if r is None or not c.start <= r.end <= c.end:
                return None
            if c.cat == "wait":
                return Held(c, r, wait=True, release=r.end)
            h = Held(c, r, wait=False, release=r.end, blocked=clip_set(self.busy, [(c.start, r.end)]))
            h.cause = "implicit_sync"
            return h
        if c.cat not in ("launch", "graph_launch", "copy", "implicit"):
            return None
        own = self.rows_by_corr.get(c.corr, [])
        long = c.end - c.start >= HELD_MIN_NS
        lists = [[r for r in own if r.end <= c.end]]
        if long:
            lo, hi = bisect_right(self.ends, c.start), bisect_right(self.ends, c.end)
            lists.append([r for r in self.by_end[lo:hi] if (r.by_device or r.corr < c.corr) and c.end - r.end <= RETURN_NS])
            lists.append([r for r in own if r.start < c.end])
        best, release = None, None
        for cands in lists:  # the latest release; ties: the earlier list
            for r in cands:
                rel = min(r.end, c.end)
                if release is None or rel > release:
                    best, release = r, rel
        if best is None:
            return None
        h = Held(c, best, wait=False, release=release,
                 blocked=clip_set(self.busy, [(c.start, release)]) if release > c.start else [])  # fmt: skip
        h.cause = self._cause(c, best)
        return h

    def _cause(self, c: Call, r: Row) -> str:
        if c.cat == "launch":
            for own in self.rows_by_corr.get(c.corr, []):
                if own.resource == "kernel" and self.first_launch.get(own.name) == c.corr:
                    return "module_load"
        if c.cat == "implicit":
            return "implicit_sync"
        if r.corr == c.corr and not r.by_device and r.pageable:  # its own copy, from or to pageable memory
            return "pageable"
        if c.cat == "graph_launch":
            return "graph"
        if c.cat == "launch" and self.pending(c) >= self.depth:
            return "queue_full"
        return "gpu_behind"

    def pending(self, c: Call) -> int:
        """Rows issued before c that had not ended at c.start (device-launched rows: running then)."""
        host = int(np.count_nonzero((self.corr_arr < c.corr) & (self.end_arr > c.start)))
        return host + int(np.count_nonzero((self.dev_start <= c.start) & (self.dev_end > c.start)))

    # ---- each row's dependencies: (release, order, kind, node)

    def stream_predecessor(self, r: Row) -> Row | None:
        """The latest-ending row before r on its stream, in stream order, if it started by r.start."""
        i = self.pos[r.idx]
        before = self.on_stream[r.stream][:i]
        if not before:
            return None
        p = max(range(len(before)), key=lambda k: (before[k].end, k))
        return before[p] if before[p].start <= r.start else None

    def event_sources(self, r: Row) -> list[Row]:
        """For the first row on its stream issued after a cudaStreamWaitEvent(stream, E): the last row on
        the recording stream issued before the latest cudaEventRecord(E) that precedes the wait."""
        prev = self.last_issued_before(r.corr, r.stream)
        prev_corr = prev.corr if prev is not None else -1
        out = []
        for wc, ev in self.stream_waits.get(r.stream, []):
            if not prev_corr < wc < r.corr:
                continue
            recs = [(rc, rs) for rc, rs in self.records.get(ev, []) if rc < wc]
            if not recs:
                continue
            rc, rs = recs[-1]
            x = self.latest_before(rc, rs)
            if x is not None:
                out.append(x)
        return out

    def engine_predecessor(self, r: Row) -> Row | None:
        """The latest-ending other row of r's engine that ended by r.start."""
        rows, ends = self.engine_by_end[r.resource], self.engine_ends[r.resource]
        i = bisect_right(ends, r.start) - 1
        while i >= 0 and rows[i] is r:
            i -= 1
        return rows[i] if i >= 0 else None

    def legacy_predecessor(self, r: Row) -> Row | None:
        """On the legacy default stream: the latest-ending row issued before r on a blocking or legacy
        stream; on a blocking stream: the latest-ending row issued before r on the legacy stream."""
        if not self.legacy or r.by_device:
            return None
        f = self.flag.get(r.stream, 0)
        if f == STREAM_NULL:
            return self._before(self.to_legacy, r.corr)
        if f == STREAM_BLOCKING:
            return self._before(self.from_legacy, r.corr)
        return None

    def dependencies(self, r: Row) -> list[tuple[int, int, str, object]]:
        """(release, order, kind, node) of a row: stream predecessor (order 0; released at min(its end,
        r.start)), event sources (1), engine predecessor (2), legacy stream (3), launch call (4); for a
        device-launched row with none of them, the latest-ending row that ended by its start (5)."""
        deps = []
        p = self.stream_predecessor(r)
        if p is not None:
            deps.append((min(p.end, r.start), 0, "stream", p))
        for x in self.event_sources(r):
            deps.append((x.end, 1, "event", x))
        x = self.engine_predecessor(r)
        if x is not None:
            deps.append((x.end, 2, "engine", x))
        x = self.legacy_predecessor(r)
        if x is not None:
            deps.append((x.end, 3, "legacy", x))
        c = self.call_by_corr.get(r.corr) if not r.by_device else None
        if c is not None:
            deps.append((c.start, 4, "launch", c))
        if r.by_device and not [d for d in deps if d[0] <= r.start]:
            i = bisect_right(self.ends, r.start) - 1
            while i >= 0 and self.by_end[i] is r:
                i -= 1
            if i >= 0:
                deps.append((self.by_end[i].end, 5, "device", self.by_end[i]))
        return deps

    # ---- the launching threads


    def launching(self, window: list[Interval]) -> list[int]:
        out = set()
        for c in self.calls:
            if issues(c) and any(min(c.end, b) > max(c.start, a) or (c.start == c.end and a <= c.start <= b) for a, b in window):
                out.add(c.tid)
        return sorted(out)


def _touches(c: Call, window: list[Interval]) -> bool:
    return any(min(c.end, b) > max(c.start, a) or (c.start == c.end and a <= c.start <= b) for a, b in window)


def thread_split(g: Graph, tid: int, window: list[Interval], steady: list[Interval]) -> ThreadSplit:
    mine = [c for c in g.thread_calls[tid] if _touches(c, window)]
    first, last = min(c.start for c in mine), max(c.end for c in mine)
    active = clip_set([(first, last)], steady)
    waits = clip_set(union([(c.start, c.end) for c in g.thread_calls[tid] if c.cat == "wait"]), active)
    by_cause: dict[str, list[Interval]] = defaultdict(list)
    for c in g.thread_calls[tid]:
        h = g.held.get(c.idx)
        if h is not None and not h.wait:
            by_cause[h.cause].extend(h.blocked)
    blocked_all = minus(clip_set(union([iv for v in by_cause.values() for iv in v]), active), waits)
    causes = {k: total(minus(clip_set(union(v), active), waits)) for k, v in by_cause.items()}
    a, w, b = total(active), total(waits), total(blocked_all)
    return ThreadSplit(tid, g.tr.thread_names.get(tid), a, a - w - b, b, w, {k: v for k, v in causes.items() if v})


# --------------------------------------------------------------------------- the walk


def host_label(g: Graph, tid: int) -> str:
    return f"host:{g.tr.thread_names.get(tid) or tid}"


def walk(g: Graph, w0: int, w1: int, threads: list[int], max_steps: int = 10_000_000) -> list[Segment]:
    """The backward last-arrival walk over [w0, w1]: segments from w1 down to w0 (latest first)."""
    segs: list[Segment] = []

    def add(a: int, b: int, resource: str, what: str, name: str = "") -> None:
        a, b = max(a, w0), min(b, w1)
        if b >= a:
            segs.append(Segment(a, b, resource, what, name))

    # the first node: the latest-ending row, or launching-thread call, ending by w1 (a row on a tie)
    row = max((r for r in g.rows if r.end <= w1), key=lambda r: (r.end, r.start), default=None)
    call = max((c for t in threads for c in g.thread_calls[t] if c.end <= w1), key=lambda c: (c.end, c.start), default=None)
    if row is None and call is None:
        add(w0, w1, "idle", "nothing ends in the window")
        return segs
    if row is not None and (call is None or row.end >= call.end):
        state: tuple = ("row", row, row.end)  # a row and the time the walk entered it
        t = row.end
    else:
        state = ("thread", call.tid)
        t = call.end
    add(t, w1, "idle", "after the last node")
    steps = 0
    while t > w0:
        steps += 1
        assert steps < max_steps, "the walk does not end"
        if state[0] == "row":
            r: Row = state[1]
            add(min(r.start, state[2]), state[2], r.resource, f"row {r.idx}", r.name)
            deps = [d for d in g.dependencies(r) if d[0] <= r.start]
            if not deps:
                add(w0, min(r.start, state[2]), "idle", "no dependency")
                break
            release, _, kind, node = max(deps, key=lambda d: (d[0], -d[1]))
            add(release, min(r.start, state[2]), "launch" if kind == "launch" else "idle", f"{kind} gap")
            if kind == "launch":
                state, t = ("thread", node.tid), node.start
            else:
                state, t = ("row", node, release), release
            continue
        tid = state[1]
        calls, starts = g.thread_calls[tid], g.thread_starts[tid]
        i = bisect_left(starts, t) - 1  # the last call on the thread with start < t
        if i < 0:
            add(w0, t, host_label(g, tid), f"thread {tid} before its first call")
            break
        c = calls[i]
        h = g.held.get(c.idx)
        if h is not None and h.release <= t and h.release > c.start:
            add(h.release, t, host_label(g, tid), f"thread {tid} after {c.name} returned")
            state, t = ("row", h.row, h.release), h.release
        elif c.end >= t:
            add(c.start, t, host_label(g, tid), f"thread {tid} in {c.name}")
            t = c.start
        else:
            add(c.end, t, host_label(g, tid), f"thread {tid} after {c.name}")
            t = c.end
    return segs


def critical_path(g: Graph, window: list[Interval], threads: list[int]) -> Path:
    segs: list[Segment] = []
    for a, b in window:
        segs += walk(g, a, b, threads)
    by_res: dict[str, int] = defaultdict(int)
    by_kernel: dict[str, int] = defaultdict(int)
    for s in segs:
        by_res[s.resource] += s.end - s.start
        if s.resource == "kernel":
            by_kernel[s.name] += s.end - s.start
    return Path(sum(b - a for a, b in window), segs, dict(by_res), dict(by_kernel))


# --------------------------------------------------------------------------- everything


def reference(path_or_trace, window: list[Interval], setup: list[Interval] = (), pid: int | None = None,
              device: int | None = None, queue_full_depth: int = QUEUE_FULL_DEPTH) -> Reference:  # fmt: skip
    """Blocked time, the thread split and the critical path of one group over ``window`` (less the
    ``setup`` gaps for the thread split). pid/device: the group (default: the one with the most GPU time)."""
    tr = path_or_trace if isinstance(path_or_trace, Trace) else read(path_or_trace)
    if pid is None or device is None:
        busy: dict[tuple[int, int], list[Interval]] = defaultdict(list)
        for r in tr.rows:
            busy[(r.pid, r.device)].append((r.start, r.end))
        pid, device = max(busy, key=lambda k: total(union(busy[k])))
    g = Graph(tr, pid, device, queue_full_depth)
    window = sorted(window)
    steady = minus(window, list(setup))
    threads = g.launching(window)
    splits = {t: thread_split(g, t, window, steady) for t in threads}
    by_cause: dict[str, int] = defaultdict(int)
    for s in splits.values():
        for k, v in s.blocked_by_cause.items():
            by_cause[k] += v
    return Reference(pid, device, window, steady, g.held, splits, critical_path(g, window, threads), dict(by_cause), threads)

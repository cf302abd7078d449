"""A plain-Python reading of blocked time (docs/analyze.md, "Blocked time and the critical path") over the
raw rows of an export, read here with sqlite3: no clusterbench code. Slow and simple: loops and bisect.
The tests hold analyze's figures against it (the host bar is work; blocked time by cause)."""

from __future__ import annotations

import bisect
import sqlite3
from dataclasses import dataclass, field

from oracle import SYNC_CALLS, SYNC_COPIES, api_base, clip_set, kind, union

RETURN_NS = 20_000
HELD_MIN_NS = 20_000
QUEUE_FULL_DEPTH = 512
IMPLICIT = {"cudaFree", "cudaFreeHost", "cudaFreeArray", "cudaProfilerStop", "cudaHostUnregister", "cuMemFree",
            "cuMemFreeHost", "cuMemHostUnregister", "cuProfilerStop"}  # fmt: skip
STREAM_SYNC = {"cudaStreamSynchronize", "cuStreamSynchronize"}
EVENT_SYNC = {"cudaEventSynchronize", "cuEventSynchronize"}
GRAPH_LAUNCH = {"cudaGraphLaunch", "cuGraphLaunch"}
COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p"}
NONE_ID = 4294967295


@dataclass
class Row:
    engine: str
    start: int
    end: int
    stream: int
    corr: int
    pid: int
    device: int
    pageable: bool = False
    nbytes: int = 0
    name: str = ""


@dataclass
class Call:
    name: str
    start: int
    end: int
    pid: int
    tid: int
    corr: int
    stream: int = -1
    event: int = -1


@dataclass
class Export:
    rows: list[Row]
    calls: list[Call]  # in start order
    records: list[tuple[int, int, int, int, int]]  # pid, device, stream, corr, event (cudaEventRecord)
    by_corr: dict[tuple[int, int], list[Row]] = field(default_factory=dict)  # (pid, corr) -> rows
    synced: set[tuple[int, int]] = field(default_factory=set)  # (pid, corr) of calls with a SYNCHRONIZATION row


def read(path) -> Export:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    rows: list[Row] = []

    def pid(g: int) -> int:
        return (g >> 24) & 0xFFFFFF

    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        for s, e, st, c, g, d, n in con.execute("SELECT start, end, streamId, correlationId, globalPid, deviceId, shortName "
                                                "FROM CUPTI_ACTIVITY_KIND_KERNEL"):  # fmt: skip
            rows.append(Row("kernel", s, e, st, c, pid(g), d, name=strings[n]))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        for s, e, st, c, g, d in con.execute("SELECT start, end, streamId, correlationId, globalPid, deviceId FROM "
                                             "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):  # fmt: skip
            rows.append(Row("graph", s, e, st, c, pid(g), d))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        for s, e, st, c, g, d, k, b, sk, dk in con.execute(
            "SELECT start, end, streamId, correlationId, globalPid, deviceId, copyKind, bytes, srcKind, dstKind "
            "FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            rows.append(Row(COPY_KINDS.get(k, "other"), s, e, st, c, pid(g), d, 0 in (sk, dk), b))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for s, e, st, c, g, d, b in con.execute("SELECT start, end, streamId, correlationId, globalPid, deviceId, bytes "
                                                "FROM CUPTI_ACTIVITY_KIND_MEMSET"):  # fmt: skip
            rows.append(Row("memset", s, e, st, c, pid(g), d, nbytes=b))
    syncs: dict[tuple[int, int], tuple[int, int]] = {}
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        for c, g, st, ev in con.execute("SELECT correlationId, globalPid, streamId, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
            syncs[(pid(g), c)] = (-1 if st == NONE_ID else st, -1 if ev in (None, NONE_ID) else ev)
    records = []
    events: dict[tuple[int, int], int] = {}
    if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" in tables:
        for g, d, st, c, ev in con.execute("SELECT globalPid, deviceId, streamId, correlationId, eventId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
            records.append((pid(g), d, -1 if st == NONE_ID else st, c, ev))
            events[(pid(g), c)] = -1 if st == NONE_ID else st
    by_corr: dict[tuple[int, int], list[Row]] = {}
    for r in rows:
        by_corr.setdefault((r.pid, r.corr), []).append(r)
    calls = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            for s, e, gt, nid, c in con.execute(f"SELECT start, end, globalTid, nameId, correlationId FROM {table}"):
                p = pid(gt)
                own = by_corr.get((p, c), [])
                stream = max(r.stream for r in own) if own else syncs.get((p, c), (-1, -1))[0]
                if stream == -1 and not own:
                    stream = events.get((p, c), -1)
                calls.append(Call(api_base(strings[nid]), s, e, p, gt & 0xFFFFFF, c, stream, syncs.get((p, c), (-1, -1))[1]))
    calls.sort(key=lambda x: x.start)
    con.close()
    return Export(rows, calls, records, by_corr, set(syncs))


@dataclass
class Held:
    call: Call
    row: Row
    wait: bool
    release: int = 0  # when the row let the call go: min(its end, the call's end)
    blocked: int = 0  # in the window
    cause: str | None = None
    depth: int | None = None


def held_calls(x: Export, pid: int, device: int, window: list[tuple[int, int]]) -> list[Held]:
    """Every call of process ``pid`` that the GPU of (pid, device) held, with blocked time inside ``window``."""
    rows = [r for r in x.rows if r.pid == pid and r.device == device]
    calls = [c for c in x.calls if c.pid == pid]
    corrs = {c.corr for c in calls if c.corr > 0}
    lo_c, hi_c = (min(corrs), max(corrs)) if corrs else (1, 0)
    launched = {r.corr for r in rows if r.corr in corrs}

    def device_row(r: Row) -> bool:
        return r.corr not in launched and (r.corr <= 0 or lo_c <= r.corr <= hi_c)

    host_rows = [r for r in rows if not device_row(r)]
    dev_rows = [r for r in rows if device_row(r)]
    busy = clip_set(union([(r.start, r.end) for r in rows]), window)
    starts = [a for a, _ in busy]

    def busy_in(a: int, b: int) -> int:
        total = 0
        k = max(0, bisect.bisect_right(starts, a) - 1)
        while k < len(busy) and busy[k][0] < b:
            s, e = busy[k]
            total += max(0, min(e, b) - max(s, a))
            k += 1
        return total

    def latest(cands: list[Row]) -> Row | None:
        return max(cands, key=lambda r: r.end) if cands else None

    def on_stream_before(stream: int, corr: int) -> Row | None:
        return latest([r for r in rows if r.stream == stream and r.corr < corr])

    first_launch: dict[str, int] = {}
    for r in host_rows:
        if r.engine == "kernel":
            first_launch[r.name] = min(first_launch.get(r.name, r.corr), r.corr)
    streams = {r.stream for r in rows}
    out = []
    for c in calls:
        own = [r for r in rows if r.corr == c.corr] if c.corr > 0 else []
        synced = c.name in IMPLICIT and (pid, c.corr) in x.synced
        if kind(c.name) == "wait" or synced:
            cands = []
            recorded = None
            if c.name in EVENT_SYNC and c.event >= 0:
                recs = [rc for rc in x.records if rc[0] == pid and rc[1] == device and rc[4] == c.event and rc[3] < c.corr]
                recorded = max(recs, key=lambda rc: rc[3]) if recs else None
            if c.name in STREAM_SYNC and c.stream >= 0:
                if c.stream in streams:
                    cands.append(on_stream_before(c.stream, c.corr))
            elif c.name in SYNC_COPIES and c.stream >= 0:
                cands += [on_stream_before(c.stream, c.corr), latest(own)]
            elif recorded is not None:
                cands.append(on_stream_before(recorded[2], recorded[3]))
            else:
                if c.name in SYNC_COPIES:
                    cands.append(latest(own))
                cands.append(latest([r for r in host_rows if r.corr < c.corr]))
            cands.append(latest([r for r in dev_rows if c.start <= r.end <= c.end]))
            r = latest([r for r in cands if r is not None])
            if r is not None and c.start <= r.end <= c.end:
                if synced:  # an implicit synchronize that left a SYNCHRONIZATION row: blocked, not a wait
                    out.append(Held(c, r, False, release=r.end, blocked=busy_in(c.start, r.end), cause="implicit_sync"))
                else:
                    out.append(Held(c, r, True, release=r.end))
            continue
        if not (kind(c.name) in ("launch", "copy") or c.name in IMPLICIT):
            continue
        cands = [latest([r for r in own if r.end <= c.end])]
        if c.end - c.start >= HELD_MIN_NS:
            cands.append(latest([r for r in rows if (device_row(r) or r.corr < c.corr) and c.start < r.end <= c.end
                                 and c.end - r.end <= RETURN_NS]))  # fmt: skip
            cands.append(latest([r for r in own if r.start < c.end]))  # its own work still running when it returned
        cands = [r for r in cands if r is not None]
        if not cands:
            continue
        r = max(cands, key=lambda q: min(q.end, c.end))  # the one that lets it go last (ties: the first)
        release = min(r.end, c.end)
        h = Held(c, r, False, release=release, blocked=busy_in(c.start, max(c.start, release)))
        is_launch = kind(c.name) == "launch" and c.name not in GRAPH_LAUNCH
        if is_launch:
            h.depth = sum(1 for q in host_rows if q.corr < c.corr and q.end > c.start) + sum(
                1 for q in dev_rows if q.start <= c.start < q.end)
        if is_launch and own and any(q.engine == "kernel" and first_launch.get(q.name) == c.corr for q in own):
            h.cause = "module_load"
        elif c.name in IMPLICIT:
            h.cause = "implicit_sync"
        elif r in own and r.pageable:
            h.cause = "pageable"
        elif c.name in GRAPH_LAUNCH:
            h.cause = "graph"
        elif is_launch and h.depth >= QUEUE_FULL_DEPTH:
            h.cause = "queue_full"
        else:
            h.cause = "gpu_behind"
        out.append(h)
    return out


def blocked_by_thread(held: list[Held], threads: set[int]) -> dict[int, dict[str, int]]:
    """tid -> cause -> blocked ns, for the launching threads."""
    out: dict[int, dict[str, int]] = {t: {} for t in threads}
    for h in held:
        if not h.wait and h.blocked > 0 and h.call.tid in threads:
            d = out[h.call.tid]
            d[h.cause] = d.get(h.cause, 0) + h.blocked
    return out
